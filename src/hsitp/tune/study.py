"""One tuning study: a TPE search over the recipe of one plan under one accuracy protocol, with an equal budget.

Every plan gets the same search space (``tune.space``), the same number of trials (``tune.trials``, counting
completed, pruned and diverged trials alike) and the same steps per trial (``tune.epochs`` x
``tune.steps_per_epoch``). A trial trains the plan's single-process equivalent at ``tune.world_size`` (its
architecture at that P) on the training pixels of the protocol's partition 0, less ``tune.validation_fraction`` of
them held out; its score is the validation OA of its last epoch. Under the block protocol with
``tune.block_validation.folds`` = F >= 2 a trial trains F times, once per inner fold of the partition's
training squares (each on the other folds' squares), and its score is the OA over every fold's validation pixels
pooled (the folds' last-epoch OAs weighted by their pixels): every train pixel is validated once, where a 20 %
hold-out of whole squares held 565 pixels of 7 classes on Indian Pines. The pruner sees fold f's epoch e as step
f x epochs + e. The test pixels are scored by the shared evaluation but never
recorded here and never read by the search. A median pruner stops a trial whose validation OA falls below the
median of earlier trials at the same epoch, after ``tune.prune.warmup_epochs``.

The study lives in an Optuna journal file beside its netCDF (``results/RUN/tune/DATASET/PLAN_PROTOCOL.journal``); a
killed or interrupted study resumes: its finished trials are kept, the trial that was running is failed (not
counted) and queued again once with its parameters by Optuna's ``RetryHeartbeatStaleTrialCallback`` (the
``RetryFailedTrialCallback`` of Optuna < 4.9), and that retry resumes from the trial's own training checkpoint.
Optuna's heartbeat, which finds such a trial by itself, exists for its RDB storage only; the journal has none, so
:func:`open_study` does the heartbeat's part: one process runs a study (one Snakemake job per study file), so a
trial still RUNNING when the study opens belongs to a dead process. ``MaxTrialsCallback`` keeps the budget and
``study.best_trial`` names the best; nothing here touches Optuna's private attributes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
import xarray as xr
from optuna.trial import TrialState

from hsitp.errors import HsitpError
from hsitp.io import variable
from hsitp.names import DCHAG_PLANS
from hsitp.sections import Config
from hsitp.sections.tune import Space
from hsitp.settings import TuneSettings
from hsitp.train.recipe import TrialParams, recipe_keys

if TYPE_CHECKING:
    from hsitp.train.record import EpochRecord

log = logging.getLogger(__name__)

# The searched recipe keys, in the order the netCDF lists them (groups: searched for the D-CHAG plans only, and
# kept for every trial in its user attrs).
PARAMS = ("lr", "weight_decay", "label_smoothing", "warmup_steps", "per_class", "groups")
# The trial states that count against the budget (tune.trials): completed, and pruned (by the median pruner, or a
# diverged recipe, with its ``failure``); a trial failed by an interruption or by an error of the code does not.
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED)


# run_study's trial: train_trial(params, workdir, on_epoch) -> its score
TrialTrainer = Callable[[TrialParams, Path, Callable[[int, "EpochRecord"], None]], float]


class TuneError(HsitpError):
    """A tuning study that cannot run as configured."""


@dataclass(frozen=True)
class StudySpec:
    """What one study tunes and where it keeps its files."""

    data: Path  # results/RUN/data/DATASET.nc
    out: Path  # results/RUN/tune/DATASET/PLAN_PROTOCOL.nc
    plan: str
    protocol: str  # the accuracy protocol (random, block)
    tokens: int  # N of the crop the trials train on
    patch: int
    folds: int = 1  # inner folds of the validation (tune.block_validation.folds under the block protocol)
    partition: int = 0  # which of the protocol's partitions the study tunes on

    @property
    def journal(self) -> Path:
        return self.out.with_suffix(".journal")

    @property
    def trial_root(self) -> Path:
        return self.out.parent / "trials" / self.out.stem


def allowed_groups(space: Space, plan: str, fits: Callable[[int], bool]) -> list[int]:
    """The g values of ``space.groups`` the plan's band partition allows (``fits(g)``); [1] for plans without groups."""
    if plan not in DCHAG_PLANS:
        return [1]
    allowed = [int(g) for g in space.groups if fits(int(g))]
    if not allowed:
        raise TuneError(
            f"tune.space.groups: none of {list(space.groups)} fits plan {plan}'s band partition (its bands per rank)"
        )
    return allowed


def suggest(trial: Any, space: Space, groups: list[int]) -> TrialParams:
    """One point of the search space (the same space for every plan; groups where the plan has them)."""
    return TrialParams(
        lr=trial.suggest_float("lr", *map(float, space.lr), log=True),
        weight_decay=trial.suggest_float("weight_decay", *map(float, space.weight_decay), log=True),
        label_smoothing=trial.suggest_float("label_smoothing", *map(float, space.label_smoothing)),
        warmup_steps=trial.suggest_int("warmup_steps", *map(int, space.warmup_steps)),
        per_class=trial.suggest_int("per_class", *map(int, space.per_class)),
        groups=trial.suggest_categorical("groups", groups) if len(groups) > 1 else groups[0],
    )


def trial_config(
    config: Config, tune: TuneSettings, params: TrialParams, *, folds: int = 1, fold: int = 0
) -> Config:
    """The training config one trial (or, with ``folds`` >= 2, its inner fold ``fold``) runs: the run's train section
    with the trial's recipe and the study's budget (epochs, steps, validation pixels every epoch, one memory-tracked
    step)."""
    return config.with_train(
        **recipe_keys(params),
        epochs=tune.epochs,
        steps_per_epoch=tune.steps_per_epoch,
        validation={"fraction": float(tune.validation_fraction), "folds": int(folds), "fold": int(fold)},
        eval_every=1,  # the pruner reads every epoch's validation OA
        summary_epochs=1,  # the memory tracker (slow on CPU) runs on one step only
        equivalent=True,
    )


def trial_key(params: TrialParams) -> str:
    """A short stable name for a trial's parameters: its working folder, so a retried trial finds its checkpoint."""
    text = json.dumps(params, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _storage(journal: Path) -> Any:
    journal.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))


def open_study(spec: StudySpec, tune: TuneSettings) -> Any:
    """The study in the journal (created or resumed); a trial a killed study left running is failed and, like a
    trial failed by Ctrl-C or SIGTERM, queued again once with its parameters (:func:`retry_killed`)."""
    optuna.logging.disable_default_handler()  # Optuna's lines go through logging (the CLI's handler), not its own
    optuna.logging.enable_propagation()
    pruner = optuna.pruners.MedianPruner(
        n_startup_trials=tune.prune.startup_trials,
        n_warmup_steps=tune.prune.warmup_epochs,
    )
    study = optuna.create_study(
        study_name=spec.out.stem,
        storage=_storage(spec.journal),
        sampler=_sampler(tune, 0),
        pruner=pruner,
        direction="maximize",
        load_if_exists=True,
    )
    trials = study.get_trials(deepcopy=False)
    if any(
        "retry_of" in t.user_attrs for t in trials
    ):  # retries queued by hand, not Optuna's: not counted alike
        raise TuneError(
            f"{spec.journal}: a tuning journal written by an older hsitp (its retries queued by hand); delete it "
            "and re-run `hsitp tune` (rule tune), which starts the study again"
        )
    # a seeded sampler restarts its random stream in every process: a resumed study would draw its first points
    # again; seeding by the trials already there continues the search (deterministic given the journal)
    study.sampler = _sampler(tune, len(trials))
    retry_killed(study)
    return study


@contextmanager
def _experimental() -> Iterator[None]:
    """Optuna marks its retry callback experimental (since 2.8; unchanged since, and pinned in constraints.txt):
    its warning on every use says nothing to the user of a study."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def retried_from(trial: optuna.trial.FrozenTrial) -> int | None:
    """The number of the trial that ``trial`` retries (Optuna's record of it), None when it is no retry."""
    with _experimental():
        return optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(trial)


def retry_killed(study: optuna.Study) -> None:
    """The heartbeat's part for a journal: fail every trial still RUNNING (its process is gone: a study runs in one
    process), then queue every failed trial not yet retried once more with its parameters through Optuna's retry
    callback (at most once: a retry that fails too is a bug to look at, not to loop on), unless its parameters
    already finished in another trial (a repeat of a finished trial would redo it)."""
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)
    with _experimental():
        history = optuna.storages.RetryHeartbeatStaleTrialCallback.retry_history
        trials = study.get_trials(deepcopy=False)
        retried = {n for t in trials for n in history(t)}
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        finished = [t.params for t in counted_trials(study)]
        for t in study.get_trials(deepcopy=True, states=(TrialState.FAIL,)):
            if t.number not in retried and t.params not in finished:
                retry(study, t)
                log.info("trial %d did not finish: queued again with the same parameters", t.number)


def _sampler(tune: TuneSettings, offset: int) -> Any:
    """TPE with ``tune.startup_trials`` random start-up trials, seeded ``tune.seed + offset``."""
    return optuna.samplers.TPESampler(seed=tune.seed + offset, n_startup_trials=tune.startup_trials)


def counted_trials(study: Any) -> list[Any]:
    """The trials that count against the budget (:data:`COUNTED`), in the order they ran: completed and pruned (a
    diverged recipe ends pruned, with its ``failure``); a trial failed by an interruption or by an error of the
    code does not."""
    return study.get_trials(deepcopy=False, states=COUNTED)


def counted(study: Any) -> int:
    """How many trials count against the budget (:func:`counted_trials`)."""
    return len(counted_trials(study))


def run_study(
    spec: StudySpec,
    tune: TuneSettings,
    train_trial: TrialTrainer,
    *,
    fits: Callable[[int], bool],
    say: Callable[[str], None] = print,
) -> Any:
    """Run trials until ``tune.trials`` count; return the study.

    ``train_trial(params, workdir, on_epoch)`` trains one trial (its settings: :func:`trial_config`) and returns its
    score (validation OA of the last epoch); ``on_epoch(epoch, record)`` reports to the pruner and raises
    ``optuna.TrialPruned``."""
    groups = allowed_groups(tune.space, spec.plan, fits)
    study = open_study(spec, tune)
    budget = tune.trials

    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, tune.space, groups)
        trial.set_user_attr("groups", int(params["groups"]))  # also when fixed (not a searched parameter)
        workdir = spec.trial_root / trial_key(params)
        t0 = time.perf_counter()

        def on_epoch(epoch: int, rec: EpochRecord) -> None:
            value = float(rec["val_oa"])
            trial.report(value, epoch)
            if trial.should_prune():
                trial.set_user_attr("wall_s", time.perf_counter() - t0)
                raise optuna.TrialPruned(f"validation OA {value:.3f} after epoch {epoch}: below the median")

        try:
            score = train_trial(params, workdir, on_epoch)
        except HsitpError as exc:  # a diverged recipe (NaN loss) is a result of the search, counted
            trial.set_user_attr("wall_s", time.perf_counter() - t0)
            trial.set_user_attr("failure", str(exc).splitlines()[0])
            raise optuna.TrialPruned(f"failed: {exc}") from exc
        trial.set_user_attr("wall_s", time.perf_counter() - t0)
        return score

    def progress(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.state not in COUNTED:
            return
        best = _best(study)
        best_text = (
            f"best so far {best.value:.3f} (trial {_position(study, best.number)})"
            if best
            else "no completed trial yet"
        )
        say(f"tune {spec.out.stem}: trial {counted(study)} of {budget}: {_outcome(trial)}; {best_text}")

    if counted(study) < budget:  # optimize runs a trial before any callback could stop it
        study.optimize(
            objective,
            callbacks=[optuna.study.MaxTrialsCallback(budget, states=COUNTED), progress],
            catch=(),
        )
    return study


def _outcome(trial: Any) -> str:
    """How a trial ended, for its progress line."""
    if trial.state == TrialState.COMPLETE:
        return f"validation OA {trial.value:.3f}"
    if trial.user_attrs.get("failure"):
        return f"failed ({trial.user_attrs['failure']})"
    seen = trial.intermediate_values
    if seen:
        epoch = max(seen)
        return f"pruned after epoch {epoch} at validation OA {seen[epoch]:.3f}"
    return trial.state.name.lower()


def _position(study: Any, number: int) -> int:
    """1-based position of Optuna trial ``number`` among the counted trials (the netCDF's ``trial`` coordinate;
    an interrupted trial is not counted, so Optuna's numbers can run ahead)."""
    return 1 + [t.number for t in counted_trials(study)].index(number)


def _best(study: Any) -> Any:
    """``study.best_trial`` (frozen), None before a trial completed."""
    try:
        return study.best_trial
    except ValueError:  # Optuna: "No trials are completed yet."
        return None


def study_dataset(study: Any, spec: StudySpec, tune: TuneSettings, validation: Any = None) -> xr.Dataset:
    """Every trial (parameters, validation OA per fold and epoch, state, wall time) and the budget curves, as
    netCDF; with ``validation`` (:class:`hsitp.train.data.ValidationCounts`) what the validation held."""
    trials = counted_trials(study)
    epochs, startup = tune.epochs, tune.startup_trials
    ds = xr.Dataset(
        _trial_vars(trials, epochs, startup, spec.folds),
        coords={
            "trial": variable(
                "trial", np.arange(1, len(trials) + 1), "trial, in the order the study ran them"
            ),
            "fold": variable(
                "fold", np.arange(spec.folds), "inner fold of the validation (one: the single hold-out)"
            ),
            "epoch": variable("epoch", np.arange(1, epochs + 1), "epoch of the trial"),
            "n": variable("n", np.arange(1, max(startup, 1) + 1), "trials drawn at random"),
        },
    )
    for name in PARAMS:
        values = [
            t.user_attrs.get("groups", 1) if name == "groups" else t.params.get(name, np.nan) for t in trials
        ]
        ds[name] = variable("trial", np.array(values, dtype=float), f"searched {name.replace('_', ' ')}")
    if validation is not None:
        _add_validation(ds, validation)
    ds.attrs.update(_study_attrs(study, spec, tune))
    return ds


def _study_attrs(study: optuna.Study, spec: StudySpec, tune: TuneSettings) -> dict[str, Any]:
    """The study file's attributes: what was tuned, on what, with which budget, and its best trial."""
    best = _best(study)
    return dict(
        plan=spec.plan,
        protocol=spec.protocol,
        partition_index=spec.partition,
        folds=spec.folds,
        validation=_validation_text(spec, tune),
        tokens=spec.tokens,
        patch=spec.patch,
        world_size=tune.world_size,
        budget_trials=tune.trials,
        steps_per_trial=tune.epochs * tune.steps_per_epoch,
        startup_trials=tune.startup_trials,
        best_trial=-1 if best is None else _position(study, best.number),
        best_params=json.dumps(_best_params(study)),
        estimator_note=(
            "expected_best is Dodge et al.'s estimator on the completed ones among the TPE start-up trials (drawn "
            "at random, i.i.d.; a start-up trial the pruner stopped has no final score and is left out, which "
            "biases the curve upward); best_so_far is the search as run"
        ),
    )


def _validation_text(spec: StudySpec, tune: TuneSettings) -> str:
    """What the study's score is measured on, in words (the study file's ``validation`` attribute)."""
    where = f"the train pixels of the {spec.protocol} protocol's partition {spec.partition}"
    if spec.folds >= 2:
        return (
            f"{spec.folds} inner folds of {where} (whole training blocks, class-stratified, under the block "
            "protocol); each trial trains once per fold on the other folds; its score is the OA of every fold's "
            "validation pixels pooled (each fold's last-epoch OA weighted by its pixels)"
        )
    return f"a hold-out of {float(tune.validation_fraction):g} of {where}; the score is its last-epoch OA"


def _add_validation(ds: xr.Dataset, v: Any) -> None:
    """The validation's pixels and classes per fold and its pixels per class (``v``: ValidationCounts)."""
    ds.coords["label"] = variable("label", np.arange(1, v.class_pixels.shape[1] + 1), "class label (1..K)")
    ds["validation_pixels"] = variable("fold", np.array(v.pixels), "validation pixels")
    ds["validation_classes"] = variable("fold", np.array(v.classes), "classes among the validation pixels")
    ds["validation_learnable_pixels"] = variable(
        "fold",
        np.array(v.learnable_pixels),
        "validation pixels of a class the fold's own training pixels hold (the others no recipe can classify)",
    )
    ds["validation_class_pixels"] = variable(("fold", "label"), v.class_pixels, "validation pixels per class")
    ds.attrs.update(
        validation_pixels_total=v.total_pixels,
        validation_classes_total=v.total_classes,
        validation_learnable_pixels_total=int(sum(v.learnable_pixels)),
        validation_learnable_classes_total=v.learnable_classes,
        train_pixels=v.train_pixels,
        train_classes=v.train_classes,
    )


def _trial_scores(
    trials: Sequence[Any], epochs: int, folds: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trial: validation OA after each fold's epochs (reported step f x epochs + e), its score (completed: the
    objective's value, the pooled OA under folds; pruned: its last reported one) and how it ended (complete,
    pruned, failed)."""
    curve = np.full((len(trials), folds, epochs), np.nan)
    score = np.full(len(trials), np.nan)
    for i, t in enumerate(trials):
        for step, v in t.intermediate_values.items():
            if 1 <= step <= folds * epochs:
                curve[i, (step - 1) // epochs, (step - 1) % epochs] = v
        if t.state == TrialState.COMPLETE:
            score[i] = t.value
        elif t.intermediate_values:
            score[i] = t.intermediate_values[max(t.intermediate_values)]
    state = np.array(
        [
            "complete"
            if t.state == TrialState.COMPLETE
            else ("failed" if t.user_attrs.get("failure") else "pruned")
            for t in trials
        ]
    )
    return curve, score, state


def _trial_vars(trials: Sequence[Any], epochs: int, startup: int, folds: int = 1) -> dict[str, Any]:
    """The trials' curves, scores, states and times, and the budget curves (best so far, expected best)."""
    from hsitp.tune.budget import best_so_far, expected_best

    curve, score, state = _trial_scores(trials, epochs, folds)
    completed = np.where(state == "complete", score, np.nan)
    # a pruned start-up trial's final score is unknown: the estimator takes the completed ones (a curve biased
    # upward where the pruner stopped start-up trials, said in the attrs)
    eb_mean, eb_std = expected_best(completed[:startup], n_max=max(startup, 1))
    expected = (
        "expected best validation OA of n random start-up trials, from the completed ones (Dodge et al.)"
    )
    score_note = (
        "validation OA of the last epoch run, pooled over the folds (pruned: where it stopped, that fold's)"
    )
    wall = np.array([float(t.user_attrs.get("wall_s", np.nan)) for t in trials])
    epochs_run = np.array([len(t.intermediate_values) for t in trials])
    return {
        "val_oa": variable(
            ("trial", "fold", "epoch"),
            curve,
            "validation OA of each inner fold after each epoch (NaN: not run)",
        ),
        "score": variable("trial", score, score_note),
        "state": variable("trial", state, "complete, pruned or failed (diverged)"),
        "wall_s": variable("trial", wall, "wall time of the trial", "s"),
        "epochs_run": variable(
            "trial", epochs_run, "epochs trained before the trial ended (summed over its inner folds)"
        ),
        "best_so_far": variable(
            "trial",
            best_so_far(completed),
            "best completed validation OA among the first k trials (the search as run)",
        ),
        "expected_best": variable("n", eb_mean, expected),
        "expected_best_std": variable(
            "n", eb_std, "spread of the best of n random start-up trials (Dodge et al.)"
        ),
    }


def _best_params(study: Any) -> dict[str, Any]:
    best = _best(study)
    if best is None:
        return {}
    return {"groups": int(best.user_attrs.get("groups", 1)), **best.params}
