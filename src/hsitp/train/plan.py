"""Which architecture a training job trains, and whether its P and crop fit, in pure Python (no torch): the CLI
calls it before the runtime starts and the Snakemake targets call it when the DAG is built.

A job is (dataset, plan, N, P, g, protocol, seed, partition): N is the spatial tokens of one of the dataset's crops
(``train.crops``: each ``{patch, tokens, datasets}``, datasets null = every trained dataset), and the crop's patch
goes with it (one crop per N per dataset, so N names it); partition is the index of one of the protocol's K
partitions (``data.partition.draws``), so (partition, seed) is the job's replicate."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hsitp.cost.budget import ANY_MACHINE_BYTES, check_fits, peak_per_rank
from hsitp.cost.memory import PlanSize
from hsitp.errors import HsitpError
from hsitp.models.config import ModelConfig, architecture_for, config_keys
from hsitp.models.config import PlanError as PlanError  # re-exported: check_job raises it
from hsitp.names import DCHAG_PLANS, partition_tag
from hsitp.train.settings import TrainSettings

if TYPE_CHECKING:
    from hsitp.data.registry import DatasetSpec

# ModelConfig fields set from train.model (errors name these keys, not ModelConfig's model.*).
MODEL_KEYS = {k: f"train.model.{k}" for k in ("dim", "heads", "depth", "mlp_ratio")} | {
    "patch": "train.crops patch",
    "groups": "train.groups",
}

Job = tuple[str, str, int, int, int, str, int, int]  # dataset, plan, N, P, g, protocol, seed, partition


class TrainConfigError(HsitpError, ValueError):
    """A training job's settings do not fit together (names the `train.` key)."""


def run_name(plan: str, N: int, P: int, g: int, protocol: str, seed: int, partition: int = 0) -> str:  # noqa: N803
    """The file stem of one job: ``{plan}_N{N}_P{P}_g{g}_{protocol}{tag}_s{seed}`` (N = the crop's spatial tokens;
    protocol the accuracy protocol, ``random`` or ``block``; tag = "" for partition 0, ``_k{partition}`` for the
    others: a run of one draw names its files without a tag)."""
    return f"{plan}_N{N}_P{P}_g{g}_{protocol}{partition_tag(partition)}_s{seed}"


@dataclass(frozen=True)
class TrainJob:
    """What one training job trains and where its files go."""

    data: Path  # results/<run>/data/DATASET.nc
    out: Path  # results/<run>/train/DATASET/{plan}_N{N}_P{P}_g{g}_{protocol}_s{seed}.nc
    plan: str
    world_size: int  # P, the TP size
    groups: int  # g (1 unless a dchag plan)
    protocol: str  # the accuracy protocol: which train/test partition of the prepared file
    seed: int
    tokens: int  # N, spatial tokens per crop (a perfect square)
    patch: int  # p; the crop edge is S = p x sqrt(N)
    ranks: int = 0  # processes launched: P (0 = P), or 1 for the single-process equivalent of (plan, P, g)
    stop_after: int | None = None  # last epoch run, on the whole run's schedule (the equivalence check)
    partition: int = 0  # which of the protocol's K partitions of the prepared file (data.partition.draws)

    @property
    def launched(self) -> int:
        """Ranks this job runs on: P, or 1 when it trains the plan's single-process equivalent."""
        return self.ranks or self.world_size

    @property
    def equivalent(self) -> bool:
        """One process training ``architecture_for(base, plan, P, g)``, the model the plan splits over P ranks."""
        return self.launched != self.world_size

    @property
    def name(self) -> str:
        return run_name(
            self.plan, self.tokens, self.world_size, self.groups, self.protocol, self.seed, self.partition
        )

    @property
    def checkpoint_dir(self) -> Path:
        return self.out.parent / "checkpoints" / self.name


def crop_size(patch: int, tokens: int) -> int:
    """S = patch x sqrt(N); N must be a perfect square (a square grid of tokens)."""
    side = math.isqrt(tokens)
    if side * side != tokens:
        raise TrainConfigError(
            f"train.crops: tokens = {tokens} is not a perfect square (the crop is a square grid of tokens)"
        )
    return patch * side


def dataset_crops(settings: TrainSettings, dataset: str) -> list[tuple[int, int]]:
    """(patch, tokens) of every crop of ``train.crops`` that applies to ``dataset`` (datasets null = all), in
    config order; TrainConfigError when none does or when two share N (their run names would collide)."""
    out: list[tuple[int, int]] = []
    for crop in settings.crops:
        if crop.datasets is None or dataset in crop.datasets:
            patch, tokens = crop.patch, crop.tokens
            if any(n == tokens for _, n in out):
                raise TrainConfigError(
                    f"train.crops: two crops with tokens = {tokens} apply to {dataset} (N names the job's files); "
                    "give them distinct tokens or disjoint `datasets`"
                )
            out.append((patch, tokens))
    if not out:
        raise TrainConfigError(
            f"train.crops: no crop applies to {dataset}; add it to a crop's `datasets` or add a crop with "
            "datasets: null"
        )
    return out


def crop_patch(settings: TrainSettings, dataset: str, tokens: int) -> int:
    """The patch of ``dataset``'s crop with ``tokens`` spatial tokens (TrainConfigError when it has none)."""
    crops = dataset_crops(settings, dataset)
    for patch, n in crops:
        if n == int(tokens):
            return patch
    raise TrainConfigError(
        f"train.crops: {dataset} has no crop with tokens = {tokens} (its crops: "
        + ", ".join(f"patch {p}, tokens {n}" for p, n in crops)
        + ")"
    )


def model_config(
    settings: TrainSettings, bands: int, classes: int, *, patch: int, tokens: int
) -> ModelConfig:
    """The base ModelConfig of a run: sizes from ``train.model``, crop S = patch x sqrt(tokens) (one crop of
    ``train.crops``)."""
    s = crop_size(int(patch), int(tokens))
    sizes = settings.model.model_dump()  # dim, heads, depth, mlp_ratio
    with config_keys(MODEL_KEYS):
        return ModelConfig(bands=bands, height=s, width=s, classes=classes, patch=int(patch), **sizes)


def check_job(
    settings: TrainSettings,
    plan: str,
    P: int,  # noqa: N803
    g: int,
    bands: int,
    classes: int,
    *,
    patch: int,
    tokens: int,
    rows: int | None = None,
    cols: int | None = None,
    dataset: str | None = None,
    memory: float = ANY_MACHINE_BYTES,
) -> ModelConfig:
    """The architecture the job trains; PlanError / TrainConfigError (naming the key) when it does not fit, and
    ConfigError when its modelled peak per rank is past ``memory`` bytes (any machine's, or this one's)."""
    if plan not in DCHAG_PLANS and g != 1:
        raise TrainConfigError(f"plan {plan!r} has no band groups: g must be 1, got {g}")
    base = model_config(settings, bands, classes, patch=patch, tokens=tokens)
    with config_keys(MODEL_KEYS):
        arch = architecture_for(base, plan, P, g)
    size = PlanSize(B=settings.batch, N=arch.n_tokens, D=arch.dim, L=arch.bands, heads=arch.heads,
                    depth=arch.depth, patch=arch.patch, classes=arch.classes, mlp_ratio=arch.mlp_ratio)  # fmt: skip
    check_fits(
        f"train {plan} at P = {P}",
        peak_per_rank(plan, size, P, g),
        "train.batch or train.model (dim, depth, mlp_ratio)",
        memory,
    )
    if rows is not None and cols is not None and (arch.height > rows or arch.width > cols):
        scene = f"the {dataset} scene" if dataset else "the scene"
        raise TrainConfigError(
            f"train.crops: the crop patch {patch}, tokens {tokens} (S = {arch.height} = patch x sqrt(tokens)) does "
            f"not fit {scene} ({rows} x {cols}); lower that crop's tokens or patch, or list only the scenes it "
            "fits in its `datasets`"
        )
    return arch


def plan_groups(settings: TrainSettings, plan: str) -> list[int]:
    """The g a plan is trained at: ``train.groups[plan]`` for the D-CHAG plans, 1 for every other plan."""
    return list(getattr(settings.groups, plan) or (1,)) if plan in DCHAG_PLANS else [1]


def plan_world_sizes(settings: TrainSettings, plan: str) -> list[int]:
    """The P a plan is trained at: dense at 1; under ``train.equivalent`` tp at the smallest P only (its
    architecture does not depend on P: one model at every P); else every P of ``train.world_sizes``."""
    if plan == "dense":
        return [1]
    if plan == "tp" and settings.equivalent:
        return [min(settings.world_sizes)]
    return list(settings.world_sizes)


def jobs(settings: TrainSettings, groups_of: Callable[[str, str, str], list[int]] | None = None) -> list[Job]:
    """(dataset, plan, N, P, g, protocol, seed, partition) of every configured training job of a validated config:
    every crop of ``train.crops`` that applies to the dataset, every plan, every partition of
    ``data.partition.draws`` with every seed; dense once per crop, at P = 1, whatever
    ``train.world_sizes`` holds (it is the reference every parallel plan is compared with); under
    ``train.equivalent`` tp once (plan_world_sizes). ``groups_of(dataset, plan, protocol)``, when given, replaces
    ``train.groups`` for the D-CHAG plans (under ``train.recipe: tuned``, the g of the plan's tuning study on that
    protocol)."""
    out = []
    for dataset in settings.datasets:
        for _, N in dataset_crops(settings, dataset):  # noqa: N806
            for plan in settings.plans:
                for P in plan_world_sizes(settings, plan):  # noqa: N806
                    for g, protocol in _groups_and_protocols(settings, plan, dataset, groups_of):
                        for k in settings.partitions:
                            for seed in settings.seeds:
                                out.append(
                                    (dataset, plan, int(N), int(P), int(g), protocol, int(seed), int(k))
                                )
    return out


def _groups_and_protocols(
    settings: TrainSettings, plan: str, dataset: str, groups_of: Callable[[str, str, str], list[int]] | None
) -> list[tuple[int, str]]:
    """(g, protocol) pairs of a plan's jobs, g outer as ``train.groups`` lists them (or per protocol,
    ``groups_of``)."""
    protocols = settings.protocols
    if groups_of is None or plan not in DCHAG_PLANS:
        return [(g, protocol) for g in plan_groups(settings, plan) for protocol in protocols]
    pairs = [(int(g), protocol) for protocol in protocols for g in groups_of(dataset, plan, protocol)]
    return sorted(pairs, key=lambda p: (p[0], list(protocols).index(p[1])))


def control_jobs(ts: TrainSettings) -> list[Job]:
    """The untuned control of ``train.recipe: tuned``: every D-CHAG plan of ``train.plans`` at each P of
    ``train.control.world_sizes``, at ``train.groups``, every protocol and seed, each to be trained on tp's tuned
    recipe (tp's study on its protocol). [] unless the recipe is tuned and the control names a P."""
    sizes = list(ts.control.world_sizes)
    if ts.recipe != "tuned" or not sizes:
        return []
    unknown = sorted(set(sizes) - set(ts.world_sizes))
    if unknown:
        raise TrainConfigError(
            f"train.control.world_sizes: P = {unknown} is not in train.world_sizes {list(ts.world_sizes)}: a "
            "control cell is compared with the tuned cell at the same P"
        )
    plans = tuple(p for p in ts.plans if p in DCHAG_PLANS)
    return jobs(ts.model_copy(update={"plans": plans, "world_sizes": tuple(sizes)}))


def check_runs(ts: TrainSettings) -> list[Job]:
    """The equivalence checks of ``train.equivalent``: one real P-rank run per (dataset, N, plan, P, g) of the
    parallel plans (tp at every P >= 2 of ``train.world_sizes``), at ``train.equivalence.seed`` on the first
    protocol's partition 0, stopped after ``train.equivalence.epochs`` epochs; none without ``train.equivalent`` or
    with epochs 0. Not at P = 1: one rank is the single-process equivalent itself (the check would repeat its first
    epochs and pass by construction)."""
    if not ts.equivalent or not ts.equivalence.epochs:
        return []
    # the accuracy jobs of one seed on one protocol's partition 0, tp at every P (as if not train.equivalent)
    one = {
        "seeds": (ts.equivalence.seed,),
        "protocols": ts.protocols[:1],
        "partitions": (0,),
        "equivalent": False,
    }
    runs = jobs(ts.model_copy(update={"plans": tuple(p for p in ts.plans if p != "dense"), **one}))
    return [job for job in runs if job[3] > 1]


def equivalent_of(ts: TrainSettings, job: Job) -> Job:
    """The accuracy job a check run is compared with: the same cell, tp at its one trained P."""
    dataset, plan, N, P, g, protocol, seed, partition = job  # noqa: N806
    if plan == "tp":
        P = plan_world_sizes(ts, "tp")[0]  # noqa: N806
    return (dataset, plan, N, P, g, protocol, seed, partition)


def _check_crop_names(ts: TrainSettings, known: Sequence[str]) -> None:
    """A crop's `datasets` may name a registry scene that is not trained (an overlay that trains fewer scenes
    keeps the paper's crops), never an unknown name (a typo would silently drop the crop)."""
    trained = set(ts.datasets)
    for i, crop in enumerate(ts.crops):
        unknown = [d for d in crop.datasets or () if d not in trained and d not in known]
        if unknown:
            raise TrainConfigError(
                f"train.crops[{i}].datasets names {unknown}: neither trained ({sorted(trained)}) nor a registry "
                "dataset"
            )


def check_jobs(ts: TrainSettings) -> None:
    """Refuse, when the DAG is built, any job whose P or crop does not fit (bands, classes and scene size from the
    registry; scenes the registry does not know, or a PCA-reduced cube, are checked by the CLI against the
    prepared file). Under ``train.recipe: tuned`` a D-CHAG job's g is its study's, so every g the study may choose
    (:func:`study_groups`) is checked at every P, and ``train.groups`` only where the control trains it."""
    from hsitp.data import registry

    known = set(registry.names())
    _check_crop_names(ts, sorted(known))
    if check_runs(ts) and ts.equivalence.seed not in ts.seeds:
        raise TrainConfigError(
            f"train.equivalence.seed = {ts.equivalence.seed} is not one of train.seeds {list(ts.seeds)}: the "
            "check run is compared with that seed's single-process equivalent"
        )
    tuned = ts.recipe == "tuned"
    planned = jobs(ts, groups_of=study_groups(ts) if tuned else None)
    for job in [*planned, *control_jobs(ts)]:  # control_jobs: the control's P against train.world_sizes too
        dataset, plan, N, P, g, *_ = job  # noqa: N806
        if dataset not in known:
            crop_size(crop_patch(ts, dataset, N), N)  # N a perfect square, at least
            continue
        try:
            _check_scene_job(ts, registry.get(dataset), plan, N, P, g)
        except HsitpError as exc:
            if not (tuned and plan in DCHAG_PLANS and job in planned):
                raise
            tune = ts.config.tune
            raise TrainConfigError(
                f"tune.space.groups: the {plan} study may choose g = {g} (it fits at tune.world_size = "
                f"{tune.world_size}), and train.recipe: tuned then trains it at P = {P}, where "
                f"{str(exc).replace('train.groups = ', 'g = ')}; drop {g} from "
                f"tune.space.groups or {P} from train.world_sizes"
            ) from exc


def study_groups(ts: TrainSettings) -> Callable[[str, str, str], list[int]]:
    """``groups_of`` for :func:`jobs` before any study has run: every g of ``tune.space.groups`` that a D-CHAG
    plan's study on the dataset may choose, those that fit at ``tune.world_size`` on the dataset's first crop (the
    study's own test, ``hsitp tune``); all of them on a scene the registry does not know."""
    from hsitp.data import registry

    tune = ts.config.tune

    def fits(dataset: str, plan: str, g: int) -> bool:
        try:
            _check_scene_job(
                ts, registry.get(dataset), plan, dataset_crops(ts, dataset)[0][1], tune.world_size, g
            )
        except HsitpError:
            return False
        return True

    def groups_of(dataset: str, plan: str, protocol: str) -> list[int]:
        if dataset not in registry.names():
            return list(tune.space.groups)
        return [g for g in tune.space.groups if fits(dataset, plan, g)]

    return groups_of


def _check_scene_job(ts: TrainSettings, spec: DatasetSpec, plan: str, N: int, P: int, g: int) -> None:  # noqa: N803
    """:func:`check_job` of one job on a registry scene (its bands, or ``data.pca_components``; classes; extent)."""
    pca = ts.config.data.pca_components
    bands = int(pca) if pca else spec.bands
    patch = crop_patch(ts, spec.name, N)
    check_job(ts, plan, P, g, bands, spec.n_classes, patch=patch, tokens=N, rows=spec.rows, cols=spec.cols,
              dataset=spec.name)  # fmt: skip
