"""The per-epoch record of one training run (kind ``train``), written by rank 0 through ``hsitp.io``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import numpy as np
import xarray as xr

from hsitp.contracts import TRAIN
from hsitp.io import provenance, variable, write_netcdf
from hsitp.probe.tracker import KINDS, PARTS

if TYPE_CHECKING:
    from hsitp.models.config import ModelConfig
    from hsitp.parallel.runtime import Runtime
    from hsitp.train.data import Scene
    from hsitp.train.plan import TrainJob
    from hsitp.train.settings import TrainSettings

# tokens/s of a record: timed at its own moment on a shared machine, so no ratio with another record's
COMPARABLE = "within this record only"
CCR_INLINE_NOTE = (
    "ccr_inline = time inside the model's collectives / the rest of the step, measured inside real training steps "
    "(perf_counter around gloo's synchronous calls on CPU, CUDA events on GPU). Not the bench stage's "
    "ccr_measured (collectives replayed alone / compute with no-op collectives, per layer): this one includes "
    "waiting for the slowest rank and subtracts no overlap; the scalar loss all-reduce of the token plan and the "
    "metric gathers are not counted."
)


class EpochSteps(TypedDict):
    """One epoch's training numbers (``hsitp.train.loop``); the arrays are every rank's, (rank, ...)."""

    epoch: int  # epochs finished (1-based)
    loss: float
    lr: float
    tokens_per_s: float
    step_time: np.ndarray
    comm_time: np.ndarray
    ccr_inline: np.ndarray
    peak_allocated: np.ndarray
    peak_reserved: np.ndarray
    memory: np.ndarray  # (rank, part, kind)


class EpochRecord(EpochSteps):
    """One entry of a run's history: the epoch's training numbers and its test and validation accuracy (NaN
    when not evaluated), what the record and the checkpoints hold."""

    oa: float
    aa: float
    kappa: float
    per_class: np.ndarray  # (classes,)
    # the loop always writes them; build_dataset reads a history without them as NaN
    val_oa: NotRequired[float]
    val_aa: NotRequired[float]
    val_kappa: NotRequired[float]
    val_per_class: NotRequired[np.ndarray]


class PretrainAttrs(TypedDict):
    """What the masked-band pretraining did (``hsitp.train.pretrain``), as the checkpoints and the record's
    ``pretrain`` attribute keep it."""

    steps: int
    first_loss: float
    last_loss_mean_of_10: float  # the mean of the last 10 steps' losses
    seconds: float


EVALUATED = "; NaN at epochs not evaluated (train.eval_every)"
TEST_NOTE = "on the labelled test pixels of the run's accuracy protocol, whole-scene tiled prediction"
VAL_NOTE = (
    "on the validation pixels (train.validation: train pixels held out of the loss; every recipe decision is "
    "taken on these), same prediction; NaN when the run holds none out"
)
BYTES_NOTE = "bytes on this rank"
# the record's summaries: mean over the last epochs (§7.4: the test set scored in each of the last k epochs, NaN
# ones skipped, averaged), with the dims they keep
SUMMARISED = (
    ("oa", ()),
    ("aa", ()),
    ("kappa", ()),
    ("loss", ()),
    ("tokens_per_s", ()),
    ("step_time", ("rank",)),
    ("ccr_inline", ("rank",)),
    ("peak_allocated", ("rank",)),
)


def build_dataset(
    history: Sequence[EpochRecord],
    *,
    world_size: int,
    summary_epochs: int,
    attrs: Mapping[str, Any],
) -> xr.Dataset:
    """The record as an xarray Dataset: dims epoch (1-based), rank, part, kind; summaries over the last epochs."""
    classes = len(np.asarray(history[0]["per_class"])) if history else 0
    ds = xr.Dataset(
        {**_accuracy_vars(history, classes), **_training_vars(history), **_memory_vars(history)},
        coords=_coords(history, world_size, classes),
    )
    k = min(ds.sizes["epoch"], summary_epochs)  # the last summary_epochs, or all when fewer were run
    last = ds.isel(epoch=slice(-k, None))
    for name, dims in SUMMARISED:
        attrs_ = dict(ds[name].attrs)
        attrs_["long_name"] = f"mean over the last {k} epochs of: {attrs_['long_name']}"
        ds[f"{name}_summary"] = (dims, last[name].mean("epoch").values, attrs_)
    ds.attrs.update(dict(attrs))
    ds.attrs["summary_epochs"] = k
    ds.attrs["activation_checkpointing"] = "none"
    ds.attrs["ccr_inline_note"] = CCR_INLINE_NOTE
    return ds


def _per_epoch(history: Sequence[EpochRecord], key: str) -> np.ndarray:
    return np.array([h[key] for h in history], dtype=np.float64)


def _per_rank(history: Sequence[EpochRecord], key: str) -> np.ndarray:
    return np.stack([np.asarray(h[key], dtype=np.float64) for h in history])  # (epoch, rank, ...)


def _accuracy_vars(history: Sequence[EpochRecord], classes: int) -> dict[str, tuple]:
    """Test and validation OA, AA, kappa and per-class recall per epoch."""

    def per_class(key: str) -> np.ndarray:
        if not history:
            return np.zeros((0, 0))
        return np.stack([np.asarray(h.get(key, np.full(classes, np.nan)), dtype=np.float64) for h in history])

    def validation(m: str) -> np.ndarray:
        return (
            _per_epoch(history, f"val_{m}")
            if history and f"val_{m}" in history[0]
            else np.full(len(history), np.nan)
        )

    aa = f"average accuracy (mean recall over the classes present) {TEST_NOTE}{EVALUATED}"
    per_class_note = f"recall of each class {TEST_NOTE}; NaN for a class with no test pixel{EVALUATED}"
    return {
        "oa": ("epoch", _per_epoch(history, "oa"), {"units": "1", "long_name": f"overall accuracy {TEST_NOTE}{EVALUATED}"}),
        "aa": ("epoch", _per_epoch(history, "aa"), {"units": "1", "long_name": aa}),
        "kappa": ("epoch", _per_epoch(history, "kappa"), {"units": "1", "long_name": f"Cohen's kappa {TEST_NOTE}{EVALUATED}"}),
        "per_class_accuracy": (("epoch", "label"), per_class("per_class"), {"units": "1", "long_name": per_class_note}),
        **{
            f"val_{m}": ("epoch", validation(m), {"units": "1", "long_name": f"{what} {VAL_NOTE}{EVALUATED}"})
            for m, what in (("oa", "overall accuracy"), ("aa", "average accuracy"), ("kappa", "Cohen's kappa"))
        },
        "val_per_class_accuracy": (
            ("epoch", "label"),
            per_class("val_per_class"),
            {"units": "1", "long_name": f"recall of each class {VAL_NOTE}; NaN for a class with none"},
        ),
    }  # fmt: skip


def _training_vars(history: Sequence[EpochRecord]) -> dict[str, tuple]:
    """Loss, learning rate, throughput, step and communication times per epoch (and rank)."""
    loss = (
        "mean training cross-entropy of the epoch's steps (loss pixels; label-smoothed under "
        "train.label_smoothing > 0)"
    )
    throughput = {
        "units": "1/s",
        "long_name": "training throughput: tokens (batch x N) per second of the slowest rank's mean step time",
        # timed at this run's own moment on a shared machine: never divide it by another record's
        # (plan-to-plan ratios come from the probe's interleaved rounds, probe/throughput.nc)
        "comparable": COMPARABLE,
    }
    ranked = ("epoch", "rank")
    return {
        "loss": variable("epoch", _per_epoch(history, "loss"), loss),
        "lr": variable("epoch", _per_epoch(history, "lr"), "learning rate after the epoch"),
        "tokens_per_s": ("epoch", _per_epoch(history, "tokens_per_s"), throughput),
        "step_time": variable(
            ranked, _per_rank(history, "step_time"), "mean optimizer-step time (untracked steps)", "s"
        ),
        "comm_time": variable(
            ranked, _per_rank(history, "comm_time"), "mean time per step inside the model's collectives", "s"
        ),
        "ccr_inline": variable(
            ranked,
            _per_rank(history, "ccr_inline"),
            "in-training comm / (step - comm)",
            comment=CCR_INLINE_NOTE,
        ),
    }


def _memory_vars(history: Sequence[EpochRecord]) -> dict[str, tuple]:
    """The tracked step's peaks and its memory by part and kind, per epoch and rank (NaN where untracked)."""
    peak = (
        f"peak memory of the tracked step, {BYTES_NOTE}; NaN before the summary epochs (memory is tracked only in "
        "the epochs the summary averages)"
    )
    by_part = (
        f"memory of the tracked step by model part and kind, {BYTES_NOTE}; NaN before the summary epochs"
    )
    return {
        "peak_allocated": (("epoch", "rank"), _per_rank(history, "peak_allocated"), {"units": "bytes", "long_name": peak}),
        "peak_reserved": (
            ("epoch", "rank"),
            _per_rank(history, "peak_reserved"),
            {"units": "bytes", "long_name": "CUDA max_memory_reserved of the tracked step (NaN on CPU)"},
        ),
        "memory": (
            ("epoch", "rank", "part", "kind"),
            _per_rank(history, "memory"),
            {"units": "bytes", "long_name": by_part, "activation_checkpointing": "none"},
        ),
    }  # fmt: skip


def _coords(history: Sequence[EpochRecord], world_size: int, classes: int) -> dict[str, tuple]:
    return {
        "epoch": variable(
            "epoch", np.array([int(h["epoch"]) for h in history], dtype=np.int32), "epochs finished"
        ),
        "rank": variable("rank", np.arange(world_size, dtype=np.int32), "rank in the TP group"),
        "label": variable(
            "label", np.arange(1, classes + 1, dtype=np.int16), "class label (1..K, the dataset's)"
        ),
        "part": ("part", list(PARTS), {"long_name": "model part (hsitp.probe.tracker.PARTS)"}),
        "kind": ("kind", list(KINDS), {"long_name": "memory kind (hsitp.probe.tracker.KINDS)"}),
    }


def write_record(
    job: TrainJob,
    settings: TrainSettings,
    rt: Runtime,
    arch: ModelConfig,
    scene: Scene,
    history: Sequence[EpochRecord],
    *,
    resumed_at: Sequence[int],
    memory_method: str,
    prediction: np.ndarray,
    pretrain: PretrainAttrs | None = None,
) -> Path:
    """Rank 0's record of a finished (or stopped-after) run: the history, the final map and what was trained;
    ``pretrain``: what the masked-band pretraining did (``hsitp.train.pretrain``), None when it did not run."""
    attrs = {
        **_run_attrs(job, settings, rt, arch, scene),
        "memory_method": memory_method,
        "resumed_at_epochs": list(resumed_at),
        **ingredient_attrs(settings, pretrain),
    }
    ds = build_dataset(history, world_size=job.launched, summary_epochs=settings.summary_epochs, attrs=attrs)
    ds["prediction"] = (
        ("y", "x"),
        np.asarray(prediction, dtype=np.int16),
        {
            "units": "1",
            "long_name": "predicted class label (1..K) of every pixel after the last epoch (whole-scene tiled "
            "inference; train, test and unlabelled pixels alike)",
        },
    )
    ds.attrs["evaluation"] = EVALUATION
    ds.attrs["eval_every"] = settings.eval_every
    ds.attrs["evaluated"] = "every eval_every epochs, each of the last summary_epochs, and the last epoch run"
    prov = provenance(
        settings.config, inputs={"dataset": job.data}, extra={"dataset": scene.name, "run_name": job.name}
    )
    return write_netcdf(ds, job.out, kind=TRAIN.kind, prov=prov)


TRANSDUCTIVE = (
    "yes: masked-band reconstruction pretraining (train.pretrain) trained on the spectra of every pixel of the "
    "scene, the test pixels' included (never a label); the classical baselines had no such unlabelled-data "
    "advantage"
)
NOT_TRANSDUCTIVE = (
    "no: no loss saw a test pixel's spectrum (the model sees every pixel of its crops as input only)"
)


def ingredient_attrs(settings: TrainSettings, pretrain: PretrainAttrs | None) -> dict[str, Any]:
    """Which of the recipe's optional ingredients ran (``ingredients``, their strengths; all off by default),
    whether the run is transductive (``transductive``: a reader sees it beside every number of the record) and
    what the pretraining did."""
    out: dict[str, Any] = {
        "ingredients": settings.ingredients(),
        "transductive": TRANSDUCTIVE if settings.transductive else NOT_TRANSDUCTIVE,
    }
    if settings.tta != "none":
        out["evaluation_tta"] = f"{settings.tta}: logits averaged over the transforms, each mapped back"
    if settings.ema.decay > 0:
        out["evaluation_weights"] = f"EMA of the weights, decay {settings.ema.decay} (warmed up)"
    if pretrain is not None:
        out["pretrain"] = dict(pretrain)
    return out


EVALUATION = (
    "whole-scene tiled inference (S x S tiles, the far ones flush with the edges, overlapping logits summed), "
    "model in eval mode under torch.no_grad, argmax -> labels 1..K, hsitp.evaluate.metrics.score_map on the "
    "labelled test pixels; rank 0's prediction (every rank of the TP group holds the same logits); no "
    "data-parallel replicas, so no cross-replica reduction"
)


def _run_attrs(
    job: TrainJob, settings: TrainSettings, rt: Runtime, arch: ModelConfig, scene: Scene
) -> dict[str, Any]:
    """The record's attributes: the recipe, the job's cell, the scene, the model and where it ran."""

    trained_as = (
        f"single-process equivalent: architecture_for(base, {job.plan!r}, P={job.world_size}, g={job.groups}) "
        "in one process (the parity tests show it equals the plan over P ranks); its tokens/s and memory are "
        "one process's, not the plan's"
        if job.equivalent
        else f"{job.plan} over {job.world_size} rank(s)"
    )
    return {
        "recipe_hash": settings.recipe_hash(),
        "recipe": settings.recipe_record(),
        "title": f"hsitp training record: {job.name} on {scene.name}",
        "dataset": scene.name,
        "plan": job.plan,
        "P": job.world_size,
        "ranks": job.launched,
        "trained_as": trained_as,
        "stopped_after_epochs": int(job.stop_after) if job.stop_after is not None else 0,
        "g": job.groups,
        "protocol": job.protocol,
        "seed": job.seed,
        "partition_index": job.partition,  # which of the protocol's K partitions (data.partition.draws)
        "counts": dict(scene.counts),
        "classes": scene.classes,
        "crop_size": arch.height,
        "tokens": arch.n_tokens,
        "model": dataclasses.asdict(arch),
        # the single-query attentions' kernel (exact or sdpa: the same numbers up to rounding, not the same
        # trajectory): a spot check retrains with it
        "attention_kernel": arch.attention_kernel,
        "epochs": settings.epochs,
        "steps_per_epoch": settings.steps_per_epoch,
        "batch": settings.batch,
        "dtype": "bfloat16 autocast" if rt.is_cuda else "float32",
        "memory_tracked_step": "the last step of every epoch (its time is not in step_time)",
        "loss_pixels": "train pixels of each crop only (labels 1..K as 0..K-1), less the validation pixels "
        "(train.validation) and, under train.sampling stratified, all but per_class of each class per step; the "
        "model sees every pixel's spectrum of the crop, never a test or validation label",
        **rt.attrs(),
    }
