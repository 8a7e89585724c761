"""Which architecture a training job trains, and whether its P fits, in pure Python (no torch): the CLI calls
it before the runtime starts and the Snakemake targets call it when the DAG is built."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsitp.errors import HsitpError
from hsitp.models.config import DCHAG_PARTIAL, ModelConfig, PlanError, architecture_for

__all__ = [
    "PlanError",
    "TrainConfigError",
    "check_job",
    "check_jobs",
    "crop_size",
    "jobs",
    "model_config",
    "run_name",
]


class TrainConfigError(HsitpError, ValueError):
    """A training job's settings do not fit together (names the `train.` key)."""


def run_name(plan: str, P: int, g: int, split: str, seed: int) -> str:  # noqa: N803
    """The file stem of one job: ``{plan}_P{P}_g{g}_{split}_s{seed}``."""
    return f"{plan}_P{P}_g{g}_{split}_s{seed}"


@dataclass(frozen=True)
class TrainJob:
    """What one training job trains and where its files go."""

    data: Path  # results/<run>/data/DATASET.nc
    out: Path  # results/<run>/train/DATASET/{plan}_P{P}_g{g}_{split}_s{seed}.nc
    plan: str
    world_size: int  # P, the TP size
    groups: int  # g (1 unless a dchag plan)
    split: str
    seed: int

    @property
    def name(self) -> str:
        return run_name(self.plan, self.world_size, self.groups, self.split, self.seed)

    @property
    def checkpoint_dir(self) -> Path:
        return self.out.parent / "checkpoints" / self.name


def crop_size(patch: int, tokens: int) -> int:
    """S = patch x sqrt(N); N must be a perfect square (a square grid of tokens)."""
    side = math.isqrt(tokens)
    if side * side != tokens:
        raise TrainConfigError(f"train.tokens = {tokens} is not a perfect square (the crop is a square grid)")
    return patch * side


def model_config(train_cfg: Mapping[str, Any], bands: int, classes: int) -> ModelConfig:
    """The base ModelConfig of a run: sizes from ``train.model``, crop from ``train.patch`` and ``train.tokens``."""
    s = crop_size(int(train_cfg["patch"]), int(train_cfg["tokens"]))
    m = train_cfg["model"]
    return ModelConfig(
        bands=bands,
        height=s,
        width=s,
        classes=classes,
        patch=int(train_cfg["patch"]),
        dim=int(m["dim"]),
        heads=int(m["heads"]),
        depth=int(m["depth"]),
        mlp_ratio=int(m["mlp_ratio"]),
    )


def check_job(
    train_cfg: Mapping[str, Any],
    plan: str,
    P: int,  # noqa: N803
    g: int,
    bands: int,
    classes: int,
    *,
    rows: int | None = None,
    cols: int | None = None,
) -> ModelConfig:
    """The architecture the job trains; PlanError / TrainConfigError (naming the key) when it does not fit."""
    if plan not in DCHAG_PARTIAL and g != 1:
        raise TrainConfigError(f"plan {plan!r} has no band groups: g must be 1, got {g}")
    arch = architecture_for(model_config(train_cfg, bands, classes), plan, P, g)
    if rows is not None and cols is not None and (arch.height > rows or arch.width > cols):
        raise TrainConfigError(
            f"crop S = {arch.height} (train.patch x sqrt(train.tokens)) does not fit the {rows} x {cols} scene; "
            "lower train.tokens or train.patch"
        )
    return arch


def jobs(config: Mapping[str, Any]) -> list[tuple[str, str, int, int, str, int]]:
    """(dataset, plan, P, g, split, seed) of every configured training job; dense once, at P = 1, whatever
    ``train.world_sizes`` holds (it is the reference every parallel plan is compared with)."""
    tc = config["train"]
    out = []
    for dataset in tc["datasets"] or config["datasets"]:
        for plan in tc["plans"]:
            for P in [1] if plan == "dense" else tc["world_sizes"]:  # noqa: N806
                for g in tc["groups"].get(plan, [1]) if plan in DCHAG_PARTIAL else [1]:
                    for split in tc["splits"]:
                        for seed in tc["seeds"]:
                            out.append((dataset, plan, int(P), int(g), split, int(seed)))
    return out


def check_jobs(config: Mapping[str, Any]) -> None:
    """Refuse, when the DAG is built, any job whose P does not fit (bands and classes from the registry; scenes
    the registry does not know, or a PCA-reduced cube, are checked by the CLI against the prepared file)."""
    from hsitp.data import registry

    known = set(registry.names())
    pca = config.get("data", {}).get("pca_components")
    for dataset, plan, P, g, _, _ in jobs(config):  # noqa: N806
        if dataset not in known:
            continue
        spec = registry.get(dataset)
        bands = int(pca) if pca else spec.bands
        check_job(config["train"], plan, P, g, bands, spec.n_classes, rows=spec.rows, cols=spec.cols)
