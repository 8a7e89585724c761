"""The training settings, typed: read once from the validated config where a command starts (``hsitp train``,
``hsitp tune``, the ingredients ablation, the Snakemake DAG through :mod:`hsitp.train.plan`) and passed down; nothing below
reads ``config["train"]``.

Field names are the config's keys (``train.X``; a nested key ``train.A.B`` is ``A_B``), so a setting is found by
the name the config gives it; ``docs/stages.md`` and the schema say what each does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

# Keys of `train` that do not change the trajectory: a checkpoint made under other values is resumed from. The
# job's crop is in "model"; the launched ranks are in the checkpoint's layout; the check and the verdict are read
# after training.
_NOT_TRAJECTORY = (
    "debug", "checkpoint", "summary_epochs", "datasets", "plans", "world_sizes", "groups", "protocols", "seeds",
    "device", "threads_per_rank", "crops", "equivalent", "equivalence", "verdict",
)  # fmt: skip


@dataclass(frozen=True)
class Crop:
    """One entry of ``train.crops``: the square crop a job trains on."""

    patch: int  # p, the patch edge (kernel = stride = p per band)
    tokens: int  # N, spatial tokens per crop (a perfect square); the crop edge is S = p x sqrt(N)
    datasets: tuple[str, ...] | None  # the scenes it applies to; None: every trained scene


@dataclass(frozen=True)
class ModelSizes:
    """``train.model``: the transformer's sizes (bands and classes come from the prepared file)."""

    dim: int  # D, token width (divisible by heads)
    heads: int  # attention heads of the blocks and aggregators (tp and D-CHAG need P to divide it)
    depth: int  # transformer blocks
    mlp_ratio: int  # MLP hidden width = mlp_ratio x D


@dataclass(frozen=True)
class TrainSettings:
    """The ``train`` section (and the master ``seed``) of one validated config."""

    # the job matrix (the DAG's; one job's dataset, crop, plan, P, g, protocol and seed come on its command line)
    datasets: tuple[str, ...]  # scenes trained: train.datasets, or the top-level datasets when it is null
    plans: tuple[str, ...]  # plans trained (hsitp.names.PLANS)
    world_sizes: tuple[int, ...]  # P of the parallel plans (dense always runs at P = 1)
    groups: dict[str, tuple[int, ...]]  # g per D-CHAG plan; every other plan runs at g = 1
    protocols: tuple[str, ...]  # accuracy protocols of the prepared file trained on (each its own partition)
    seeds: tuple[int, ...]  # training seeds, one job each
    # partition indices trained, one job each with every seed (data.partition.draws: 0..K-1; a replicate is
    # (partition, seed))
    partitions: tuple[int, ...]
    crops: tuple[Crop, ...]  # the crops, in config order
    control_world_sizes: tuple[int, ...]  # P of the untuned control (under recipe tuned)
    recipe: str  # where a job's recipe comes from: "config" (this section) or "tuned" (its own study)
    equivalent: bool  # train each (plan, P, g) as its single-process equivalent
    equivalence_epochs: int  # epochs of the P-rank check of each equivalent (0: no check)
    equivalence_seed: int  # seed of the check runs
    # the recipe: what shapes the trained weights
    seed: int  # the master seed: draws the validation pixels of the protocol's train pixels
    model: ModelSizes  # transformer sizes
    epochs: int  # epochs to train
    steps_per_epoch: int  # optimizer steps per epoch (one of them memory-tracked in the summary epochs)
    batch: int  # crops per optimizer step (the same on every rank)
    lr: float  # peak AdamW learning rate (after warm-up; cosine decay to 0)
    weight_decay: float  # AdamW weight decay
    warmup_steps: int  # linear warm-up steps from 0 to lr
    augment: bool  # random flips and rot90 of every crop (seeded)
    label_smoothing: float  # cross-entropy label smoothing epsilon (0: plain cross-entropy)
    # the optional ingredients for new places (the block protocol); every one off by default, and then nothing
    # of them runs or draws a random number
    augmentation_brightness: float  # per-pixel brightness factor in [1 - b, 1 + b] (0: off)
    augmentation_noise: float  # Gaussian spectral noise, in band stds (0: off)
    augmentation_band_mask: float  # share of a crop's bands set to their mean (0: off)
    tta: str  # test-time augmentation of every evaluation: none, flips (4 passes) or dihedral (8)
    ema_decay: float  # EMA of the weights used for evaluation (0: off)
    pretrain_steps: int  # masked-band reconstruction steps before fine-tuning (0: off; transductive)
    pretrain_mask_ratio: float  # share of the bands masked per pretraining crop
    pretrain_lr: float  # peak AdamW lr of pretraining
    # share of the train pixels held out of the loss (every recipe decision reads them)
    validation_fraction: float
    validation_folds: (
        int  # inner folds of the train pixels (>= 2: fold validation_fold held out; 1: the fraction)
    )
    validation_fold: int  # which inner fold is held out
    sampling_mode: str  # loss pixels of a step: "all" train pixels of the crops, or "stratified"
    sampling_per_class: int  # under stratified: at most this many loss pixels of one class per step
    recipe_plan: str | None  # whose tuned recipe a control job trains on (--recipe-plan); None: its own
    # how a job runs and what it records
    # torch.use_deterministic_algorithms on CPU (a resumed run equals an uninterrupted one)
    deterministic: bool
    eval_every: int  # evaluate every this-many epochs (and the last summary_epochs, and the last)
    summary_epochs: int  # the last epochs the record's summaries average (memory is tracked only there)
    checkpoint_keep: int  # complete checkpoints kept
    debug_nan_at_step: int | None  # fault injection: the loss turns NaN at this global step
    debug_fail_at_step: int | None  # fault injection: an injected failure at the start of this global step
    # model.attention_kernel: the single-query attentions' kernel, auto, exact or sdpa (resolved for the job's
    # device when it builds its model: hsitp.models.resolve_attention_kernel)
    attention_kernel: str
    source: Mapping[str, Any]  # the validated config these were read from, never read for a setting: hashed
    # into the record's provenance, its recipe hash and the checkpoint's key (JSON of the train section, so a
    # hash does not depend on how these fields are laid out: the committed references' recipe hashes hold)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TrainSettings:
        """The settings of a validated config (schema defaults filled in: ``hsitp.config.validate_config``)."""
        tc = config["train"]
        check = tc.get("equivalence") or {}
        ints = ("epochs", "steps_per_epoch", "batch", "warmup_steps", "eval_every", "summary_epochs")
        floats = ("lr", "weight_decay", "label_smoothing")
        flags = ("augment", "deterministic")
        return cls(
            datasets=tuple(tc["datasets"] or config["datasets"]),
            plans=tuple(tc["plans"]),
            world_sizes=tuple(int(p) for p in tc["world_sizes"]),
            groups={plan: tuple(int(g) for g in gs) for plan, gs in tc["groups"].items()},
            protocols=tuple(tc["protocols"]),
            seeds=tuple(int(s) for s in tc["seeds"]),
            partitions=tuple(range(int(config.get("data", {}).get("partition", {}).get("draws", 1)))),
            crops=tuple(_crop(c) for c in tc["crops"]),
            control_world_sizes=tuple(int(p) for p in (tc.get("control") or {}).get("world_sizes") or ()),
            recipe=str(tc.get("recipe", "config")),
            equivalent=bool(tc.get("equivalent")),
            equivalence_epochs=int(check.get("epochs", 0)),
            equivalence_seed=int(check.get("seed", 0)),
            seed=int(config["seed"]),
            model=ModelSizes(**{f.name: int(tc["model"][f.name]) for f in fields(ModelSizes)}),
            **{k: int(tc[k]) for k in ints},
            **{k: float(tc[k]) for k in floats},
            **{k: bool(tc[k]) for k in flags},
            **_ingredients(tc),
            validation_fraction=float(tc["validation"]["fraction"]),
            validation_folds=int(tc["validation"]["folds"]),
            validation_fold=int(tc["validation"]["fold"]),
            sampling_mode=str(tc["sampling"]["mode"]),
            sampling_per_class=int(tc["sampling"]["per_class"]),
            recipe_plan=tc.get("recipe_plan"),
            checkpoint_keep=int(tc["checkpoint"]["keep"]),
            debug_nan_at_step=_optional_int(tc["debug"]["nan_at_step"]),
            debug_fail_at_step=_optional_int(tc["debug"]["fail_at_step"]),
            attention_kernel=str((config.get("model") or {}).get("attention_kernel", "auto")),
            source=config,
        )

    @property
    def transductive(self) -> bool:
        """Whether the run sees the test pixels' spectra in a loss (masked-band pretraining), not only as the
        input of its crops: its numbers must say so beside them."""
        return self.pretrain_steps > 0

    def ingredients(self) -> dict[str, Any]:
        """Which of the recipe's optional ingredients ran and how strong (the record's ``ingredients``)."""
        return {
            "augment_flips_rot90": self.augment,
            "augmentation": {
                "brightness": self.augmentation_brightness,
                "noise": self.augmentation_noise,
                "band_mask": self.augmentation_band_mask,
            },
            "tta": self.tta,
            "ema_decay": self.ema_decay,
            "pretrain": {
                "steps": self.pretrain_steps,
                "mask_ratio": self.pretrain_mask_ratio,
                "lr": self.pretrain_lr,
            },
        }

    @property
    def per_class(self) -> int | None:
        """The per-class cap of a step's loss pixels under stratified sampling; None under "all"."""
        return self.sampling_per_class if self.sampling_mode == "stratified" else None

    def trajectory_key(self) -> dict[str, Any]:
        """The train keys that shape a run's trajectory, as JSON (a checkpoint is resumed only under equal keys)."""
        keys = {k: v for k, v in self.source["train"].items() if k not in _NOT_TRAJECTORY}
        if self.attention_kernel != "auto":  # the kernels round differently: a resumed run keeps its kernel
            keys["attention_kernel"] = self.attention_kernel
        return json.loads(json.dumps(keys, sort_keys=True))


def _ingredients(tc: Mapping[str, Any]) -> dict[str, Any]:
    """The recipe's optional ingredients (every one off at its schema default)."""
    aug, pre = tc["augmentation"], tc["pretrain"]
    return {
        "augmentation_brightness": float(aug["brightness"]),
        "augmentation_noise": float(aug["noise"]),
        "augmentation_band_mask": float(aug["band_mask"]),
        "tta": str(tc["tta"]),
        "ema_decay": float(tc["ema"]["decay"]),
        "pretrain_steps": int(pre["steps"]),
        "pretrain_mask_ratio": float(pre["mask_ratio"]),
        "pretrain_lr": float(pre["lr"]),
    }


def _crop(crop: Mapping[str, Any]) -> Crop:
    names = crop.get("datasets")
    return Crop(int(crop["patch"]), int(crop["tokens"]), None if names is None else tuple(names))


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
