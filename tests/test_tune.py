"""The tuning stage (issue 36): a tiny study through ``hsitp tune``, its resume after a kill, and the budget curves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from train_utils import TINY_CROP, write_scene

from hsitp.io import read_netcdf
from hsitp.tune.budget import best_so_far, expected_best

TUNE = {
    "trials": 3,
    "startup_trials": 2,
    "epochs": 2,
    "steps_per_epoch": 2,
    "prune": {"startup_trials": 1, "warmup_epochs": 1},
    "space": {"groups": [1, 2, 4]},
}
TRAIN = {
    "crops": [TINY_CROP],
    "model": {"dim": 16, "heads": 2, "depth": 1, "mlp_ratio": 2},
    "device": "cpu",
    "summary_epochs": 1,
}


def _tune(scene: Path, out: Path, plan: str, protocol: str = "random", **tune: object) -> int:
    from hsitp.cli import main

    cfg = {"tune": {**TUNE, **tune}, "train": TRAIN, "parallel": {"timeout_s": 20}}
    return main(
        ["tune", str(scene), "--plan", plan, "--protocol", protocol, "--tokens", "9", "--out", str(out),
         "--config-json", json.dumps(cfg)]
    )  # fmt: skip


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scene(tmp_path_factory.mktemp("tune") / "scene.nc")


def test_tiny_study_records_every_trial_and_resumes(scene: Path, tmp_path: Path, capsys) -> None:
    """Catches a study that does not keep its equal budget or cannot resume (the bugs: trials counted wrongly, a
    second call re-running the finished trials, a D-CHAG g outside the band partition, the test set's scores in the
    study file, no progress line): 3 trials of dchag_l with g searched among those the 12 bands at P = 2 allow,
    each with its validation curve; then the same call with a budget of 4 runs exactly one more trial."""
    out = tmp_path / "dchag_l_random.nc"
    assert _tune(scene, out, "dchag_l") == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("tune ")]
    assert [ln.split(":")[1].strip() for ln in lines] == ["trial 1 of 3", "trial 2 of 3", "trial 3 of 3"]
    ds = read_netcdf(out, kind="tune_study")
    assert ds.sizes["trial"] == 3 and ds.sizes["epoch"] == 2
    assert set(ds["state"].values) <= {"complete", "pruned", "failed"}
    done = ds["state"].values == "complete"
    assert done.any()
    # a completed trial has a validation OA after each epoch, and its score is the last one
    np.testing.assert_allclose(ds["score"].values[done], ds["val_oa"].values[done, 0, -1])  # one fold
    assert set(ds["groups"].values) <= {
        1,
        2,
        4,
    }  # 6 bands a rank at P = 2: g = 4 pads to 8 slots, as train does
    assert not any("test" in name or name in ("oa", "aa", "kappa") for name in ds.data_vars)
    assert np.all(np.isfinite(ds["wall_s"].values)) and np.all(ds["wall_s"].values > 0)
    assert not list(
        out.parent.rglob("checkpoints/*/epoch_*")
    )  # ended trials keep their record, not checkpoints
    best = json.loads(ds.attrs["best_params"])
    assert {"lr", "weight_decay", "label_smoothing", "warmup_steps", "per_class", "groups"} <= set(best)
    first = ds[["lr", "score"]].isel(trial=slice(0, 3)).load()

    assert _tune(scene, out, "dchag_l", trials=4) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("tune ")]
    assert [ln.split(":")[1].strip() for ln in lines] == ["trial 4 of 4"]
    again = read_netcdf(out, kind="tune_study")
    assert again.sizes["trial"] == 4
    assert again[["lr", "score"]].isel(trial=slice(0, 3)).equals(first)  # by value: the finished trials kept


def test_interrupted_trial_is_retried_with_its_parameters(scene: Path, tmp_path: Path) -> None:
    """Catches a killed study that loses or double-counts the trial it was running (the bug: a RUNNING trial in
    the journal forever, never finished and never counted, or counted with no score): a trial left running is
    failed, not counted, and its parameters run again as the next trial, which Optuna records as its retry; a
    retry that fails again is not queued a third time (no endless loop on a trial that always dies)."""
    import optuna

    from hsitp.tune.study import StudySpec, counted, open_study, retried_from

    out = tmp_path / "tp_random.nc"
    spec = StudySpec(data=scene, out=out, plan="tp", protocol="random", tokens=9, patch=4)
    from hsitp.config import validate_config
    from hsitp.settings import TuneSettings

    tune = TuneSettings.from_config(validate_config({"tune": TUNE}))
    study = open_study(spec, tune)
    trial = study.ask()
    trial.suggest_float("lr", 1e-3, 1e-2, log=True)
    lr = trial.params["lr"]  # the process "dies" here: the trial stays RUNNING in the journal
    del study, trial
    study = open_study(spec, tune)
    states = [t.state for t in study.get_trials()]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    assert counted(study) == 0
    retry = study.ask()  # the queued trial comes first, with the interrupted one's parameters
    assert retry.suggest_float("lr", 1e-3, 1e-2, log=True) == lr
    assert retried_from(study.trials[retry.number]) == 0
    del study, retry  # the retry dies too
    study = open_study(spec, tune)
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL] * 2
    assert counted(study) == 0


def test_a_journal_of_an_older_hsitp_is_refused(scene: Path, tmp_path: Path) -> None:
    """Catches a journal whose retries an older hsitp queued by hand (user attribute retry_of) resumed as if
    Optuna had queued them: a failed trial retried twice, or a retry counted apart. One line naming the journal."""
    from hsitp.config import validate_config
    from hsitp.settings import TuneSettings
    from hsitp.tune.study import StudySpec, TuneError, open_study

    spec = StudySpec(
        data=scene, out=tmp_path / "tp_random.nc", plan="tp", protocol="random", tokens=9, patch=4
    )
    tune = TuneSettings.from_config(validate_config({"tune": TUNE}))
    study = open_study(spec, tune)
    study.enqueue_trial({"lr": 0.005}, user_attrs={"retry_of": 0})
    del study
    with pytest.raises(
        TuneError, match=r"tp_random\.journal: a tuning journal written by an older hsitp"
    ) as exc:
        open_study(spec, tune)
    assert "\n" not in str(exc.value) and "re-run `hsitp tune`" in str(exc.value)


def test_a_trial_stopped_by_a_signal_runs_again_and_the_budget_holds(tmp_path: Path) -> None:
    """Catches Optuna's bookkeeping done wrong (issue 52): a trial Ctrl-C stopped (failed by Optuna itself, not left
    running) lost or counted, the study run past or short of tune.trials, the progress lines counting the failed
    trial, or a best trial that is not the best completed one. A fake trainer (score = lr, nothing trained) is
    stopped at its second trial; the next call runs that trial's parameters first and stops at 3 counted trials."""
    import optuna

    from hsitp.config import validate_config
    from hsitp.settings import TuneSettings
    from hsitp.tune.study import COUNTED, StudySpec, counted, retried_from, run_study, study_dataset

    cfg = TuneSettings.from_config(
        validate_config({"tune": {**TUNE, "trials": 3, "prune": {"startup_trials": 3}}})
    )
    spec = StudySpec(data=tmp_path / "s.nc", out=tmp_path / "tp_random.nc", plan="tp", protocol="random", tokens=9,
                     patch=4)  # fmt: skip
    lrs: list[float] = []

    def train(params, workdir, on_epoch) -> float:  # noqa: ANN001 (run_study's callable)
        lrs.append(params["lr"])
        if len(lrs) == 2:
            raise KeyboardInterrupt
        on_epoch(1, {"val_oa": params["lr"]})
        return params["lr"]

    lines: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        run_study(spec, cfg, train, fits=lambda g: True, say=lines.append)
    study = run_study(spec, cfg, train, fits=lambda g: True, say=lines.append)
    assert [ln.split(":")[1].strip() for ln in lines] == ["trial 1 of 3", "trial 2 of 3", "trial 3 of 3"]
    assert lrs[2] == lrs[1] and len(lrs) == 4  # the stopped trial's parameters ran next, then one new trial
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1 and counted(study) == 3
    assert sum(s in COUNTED for s in states) == 3
    assert retried_from(study.trials[2]) == 1
    ds = study_dataset(study, spec, cfg)
    best = json.loads(ds.attrs["best_params"])["lr"]
    assert best == max(lrs) and ds["lr"].values[ds.attrs["best_trial"] - 1] == best


def test_groups_searched_only_where_the_band_partition_allows() -> None:
    """Catches a D-CHAG g the plan cannot run entering the search (or tp searching g at all)."""
    from hsitp.sections.tune import Space
    from hsitp.tune.study import TuneError, allowed_groups

    space = Space(groups=(1, 2, 4))
    assert allowed_groups(space, "dchag_c", lambda g: g != 4) == [1, 2]
    assert allowed_groups(space, "tp", lambda g: False) == [1]
    with pytest.raises(TuneError, match="tune.space.groups"):
        allowed_groups(space, "dchag_l", lambda g: False)


def test_budget_curves() -> None:
    """Catches a wrong expected-best estimator (the bug: the mean instead of the expected maximum, or n-th powers
    of the wrong CDF): E[max of 1] is the mean, E[max of n] rises to the best, and best-so-far skips failures."""
    v = [0.2, 0.5, 0.4, float("nan")]
    mean, std = expected_best(v, n_max=50)
    assert mean[0] == pytest.approx(np.mean([0.2, 0.5, 0.4]))
    assert np.all(np.diff(mean) >= -1e-12) and mean[-1] == pytest.approx(0.5, abs=1e-6)
    # two draws from {0.2, 0.4, 0.5}: max is 0.2 w.p. 1/9, 0.4 w.p. 3/9, 0.5 w.p. 5/9
    assert mean[1] == pytest.approx((0.2 + 3 * 0.4 + 5 * 0.5) / 9)
    assert std[0] == pytest.approx(np.std([0.2, 0.5, 0.4]))
    np.testing.assert_allclose(best_so_far([float("nan"), 0.3, 0.2, 0.6]), [np.nan, 0.3, 0.3, 0.6])


def test_a_resumed_study_does_not_redraw_its_first_points(scene: Path, tmp_path: Path) -> None:
    """Catches a resumed study whose seeded sampler starts its random stream again (the bug the cpu-fair run hit:
    after a restart the random start-up trials repeated the first trials' parameters, the repeat found the first
    one's finished checkpoint, trained nothing and failed): a second call that adds one random trial draws new
    parameters, and still ends with a score."""
    out = tmp_path / "tp_random.nc"
    assert _tune(scene, out, "tp", trials=1, startup_trials=4) == 0
    assert _tune(scene, out, "tp", trials=2, startup_trials=4) == 0
    ds = read_netcdf(out, kind="tune_study")
    assert ds.sizes["trial"] == 2 and ds["lr"].values[0] != ds["lr"].values[1]
    assert np.all(np.isfinite(ds["score"].values))


def test_block_study_over_inner_folds_validates_every_train_pixel(tmp_path: Path) -> None:
    """Catches the block protocol's tuning validation (issue 50) that still holds a few blocks (a pick on a partial
    sample), a fold trained on its own validation pixels, a score that is not the folds' OA pooled by their pixels
    (a plain mean of the folds would weigh a small fold as much as a large one), counts not recorded, and a
    validation below tune.block_validation's minimum that the study runs anyway instead of refusing at start."""
    from hsitp.data.partition import TRAIN, read_partition

    scene = write_scene(tmp_path / "scene.nc", both_protocols=True)
    out = tmp_path / "tp_block.nc"
    folds = {"folds": 2, "min_pixels": 10, "min_classes": 2}
    assert _tune(scene, out, "tp", "block", trials=2, block_validation=folds) == 0
    ds = read_netcdf(out, kind="tune_study")
    assert ds["val_oa"].dims == ("trial", "fold", "epoch") and ds.sizes["fold"] == 2
    src = read_netcdf(scene, kind="dataset")
    train = (read_partition(src, "block") == TRAIN) & (src["labels"].values > 0)
    assert int(ds["validation_pixels"].sum()) == ds.attrs["validation_pixels_total"] == int(train.sum())
    assert (ds["validation_pixels"] > 0).all()
    assert int(ds["validation_class_pixels"].sum()) == int(train.sum())
    n = ds["validation_pixels"].values
    for i in np.flatnonzero(ds["state"].values == "complete"):
        last = ds["val_oa"].values[i, :, -1]  # each fold's last epoch
        assert float(ds["score"].values[i]) == pytest.approx(float((last * n).sum() / n.sum()))
    assert "2 inner folds" in ds.attrs["validation"]

    rc = _tune(
        scene, tmp_path / "refused.nc", "tp", "block", block_validation={"folds": 1, "min_classes": 99}
    )
    assert rc == 2 and not (tmp_path / "refused.nc").exists()
