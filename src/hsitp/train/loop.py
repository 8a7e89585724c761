"""One training run of one plan on one TP group: the loop, its per-epoch record and its checkpoints.

Every rank of the group runs :func:`train_rank` with the same arguments: same seed, same crops (the sampler is
seeded alike on every rank), same master weights (the dense model is built from the seed, then sliced by the
plan). Rank 0 writes the per-epoch record. Semantics of one optimizer step:

    x (B, L, S, S), y (B, S, S) -> logits = model(model.shard_input(x))       this rank's part of (B, K, S, S)
    loss = sum over this rank's train pixels of CE / (train pixels of the whole batch)
    (token plan: the ranks' losses sum to the full loss; other plans: every rank holds the full loss)
    backward -> model.reduce_grads() -> AdamW step -> LR schedule step (linear warm-up, cosine to 0)

Every ``train.eval_every`` epochs, in each of the last ``train.summary_epochs`` epochs (the paper's §7.4 averages
them) and after the last one, the whole scene is predicted by tiled inference and scored on the protocol's test pixels (``hsitp.train.inference``; no randomness, so resume stays exact); the record holds OA,
AA, kappa and per-class accuracy per epoch (NaN where not evaluated) and the final predicted map.

The recipe's optional ingredients for new places, the block protocol (all off by default, and then nothing of
them runs or draws a random number):
photometric augmentation of the crops (``train.augmentation``, in the sampler), test-time flips of every evaluation
(``train.tta``), an EMA of the weights that every evaluation uses (``train.ema``, updated after each step outside
the timed step, checkpointed), and masked-band pretraining before the first epoch (``train.pretrain``,
:mod:`hsitp.train.pretrain`; transductive, and the record says so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812

from hsitp.errors import HsitpError
from hsitp.models.config import ModelConfig
from hsitp.parallel.collectives import ALL_GATHER_SINGLE
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.runtime import Runtime
from hsitp.probe.tracker import KINDS, PARTS, measure_step
from hsitp.signals import StopRequest
from hsitp.train import checkpoint as ckpt
from hsitp.train.ccr import CommTimer, timed_collectives
from hsitp.train.data import CropSampler, Photometric, Scene, load_scene
from hsitp.train.ema import WeightEMA
from hsitp.train.inference import Evaluation, predict_scene
from hsitp.train.plan import TrainJob, check_job
from hsitp.train.record import EpochRecord, EpochSteps, PretrainAttrs, write_record
from hsitp.train.settings import TrainSettings
from hsitp.train.steps import global_loss, lr_lambda

log = logging.getLogger(__name__)


class TrainError(HsitpError):
    """Training cannot go on (a non-finite loss, a launch that is not one TP group, ...)."""


class InjectedFailure(HsitpError):
    """Raised at ``train.debug.fail_at_step`` to test resuming after a crash mid-epoch."""


def tp_group(rt: Runtime, P: int) -> TPGroup:  # noqa: N803
    """The TP group of this rank. The whole launched world is one TP group (no data-parallel replicas)."""
    if rt.world_size != P:
        raise TrainError(
            f"{rt.world_size} ranks launched for a TP size of P = {P}; data-parallel replicas are not "
            f"supported: launch `torchrun --nproc_per_node {P}`"
        )
    return rt.world


def evaluated_epochs(settings: TrainSettings, stop_after: int | None = None) -> set[int]:
    """The 1-based epochs whose end evaluates the model: every ``eval_every``, the last ``summary_epochs``, the
    last epoch run, and the equivalence check's epoch under ``train.equivalent`` (both sides score it)."""
    epochs, every = settings.epochs, settings.eval_every
    k = min(epochs, settings.summary_epochs)
    out = {e for e in range(1, epochs + 1) if e % every == 0 or e > epochs - k}
    out.add(epochs)
    check = settings.equivalence.epochs
    if settings.equivalent and 0 < check <= epochs:
        out.add(check)
    if stop_after is not None:
        out.add(min(stop_after, epochs))
    return out


def _rng_state(device: torch.device) -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


def _gather_rows(row: torch.Tensor, tp: TPGroup) -> np.ndarray:
    """(P, n) float64: every rank's metric vector (outside the timed collectives)."""
    if tp.size == 1:
        return row.detach().cpu().double().numpy()[None]
    out = row.new_empty(tp.size * row.numel())  # ranks concatenated (gloo wants matching 1-D shapes)
    ALL_GATHER_SINGLE(out, row.contiguous(), group=tp.group)  # untimed, and not the deprecated *_into_tensor
    return out.view(tp.size, -1).cpu().double().numpy()


def _trajectory_meta(settings: TrainSettings, job: TrainJob, arch: ModelConfig) -> dict[str, Any]:
    """What a checkpoint must match to be resumed from: the trajectory's train keys, the master seed (it draws
    the validation pixels), the job's cell and partition, and the architecture."""
    return {
        "train": settings.trajectory_key(),
        "master_seed": settings.seed,
        "plan": job.plan,
        "P": job.world_size,
        "ranks": job.launched,
        "g": job.groups,
        "protocol": job.protocol,
        "seed": job.seed,
        "partition": job.partition,
        "model": json.loads(json.dumps(arch.__dict__)),
    }


class _Progress:
    """tqdm on rank 0 when stderr is a terminal; one log line per epoch otherwise (Snakemake logs)."""

    def __init__(self, rank: int, total: int, done: int, epochs: int) -> None:
        self.bar = None
        self.epochs, self.total, self.t0, self.done0 = epochs, total, time.monotonic(), done
        self.rank = rank
        if rank == 0 and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="step", dynamic_ncols=True)

    def step(self, loss: float, tokens_per_s: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tokens_per_s:.0f}")

    def epoch(self, epoch: int, done: int, rec: EpochRecord) -> None:
        """The epoch's log line: its loss, throughput, and rank 0's step time and ccr_inline."""
        if self.rank != 0 or self.bar is not None:
            return
        rate = (done - self.done0) / max(time.monotonic() - self.t0, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("nan")
        step, ccr = float(rec["step_time"][0]), float(rec["ccr_inline"][0])
        log.info(
            "epoch %d/%d  loss %.4f  tokens/s %.1f  step %.3f s  ccr_inline %.3f  ETA %.0f s",
            *(epoch, self.epochs, rec["loss"], rec["tokens_per_s"], step, ccr, eta),
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class _Setup:
    """What one rank trains with, built once (:func:`_build`) and used by every epoch."""

    scene: Scene  # the prepared scene: cube, labels, partition and validation pixels
    arch: ModelConfig  # the architecture the plan splits (crop size, model sizes, aggregation)
    model: Any  # the plan's parallel model on this rank
    opt: torch.optim.Optimizer  # AdamW
    sched: torch.optim.lr_scheduler.LambdaLR  # linear warm-up, cosine decay
    sampler: CropSampler  # the seeded crop stream (identical on every rank)
    tp: TPGroup  # the TP group (the whole launched world)
    device: torch.device  # where this rank computes
    autocast: Any  # bf16 autocast on CUDA; a no-op on CPU (fp32)
    valid: torch.Tensor | None  # this rank's padded output locations (None: no padding)
    tokens_per_step: int  # batch x N
    predict: Callable[[], np.ndarray]  # the whole scene predicted by tiled inference (train.tta)
    ema: WeightEMA | None  # the weights' moving average (train.ema), or None

    def evaluate(self) -> Evaluation:
        """The evaluation of the weights the record reports: the EMA's when there is one, else the raw ones."""
        with self.ema.swapped(self.model) if self.ema is not None else contextlib.nullcontext():
            return Evaluation.of(self.scene, self.predict())


@dataclass
class _Resumed:
    """Where a run starts: after the newest complete checkpoint of the same configuration, or at epoch 0."""

    start_epoch: int  # epochs already done
    history: list[EpochRecord]  # their per-epoch records
    resumed_at: list[int]  # every epoch a run of this job resumed after
    last_good: Path | None  # the newest complete checkpoint (named in a failure's message)
    pretrain: PretrainAttrs | None = None  # what the pretraining did (train.pretrain), in the checkpoints


def train_rank(
    rt: Runtime,
    settings: TrainSettings,
    job: TrainJob,
    *,
    stop: StopRequest | None = None,
    on_step: Callable[[int], None] | None = None,
    on_epoch: Callable[[int, EpochRecord], None] | None = None,
) -> Path | None:
    """Train ``job`` on this rank (every rank of the group calls it); rank 0 returns the record's path.

    Resumes from the newest complete checkpoint of the same configuration. ``stop``: the command's signal recorder
    (:mod:`hsitp.signals`), checked at every epoch's end after its checkpoint (every rank together) and, in one
    process, before every step: an interrupted run resumes where it stopped. ``on_step(global_step)`` runs before
    every step (tests use it to kill a rank); ``on_epoch(epoch, record)`` after every epoch's checkpoint, with that
    epoch's record (``hsitp tune`` reports validation OA to its pruner there, and stops a pruned trial by raising)."""
    tp = tp_group(rt, job.launched)
    _seed(settings, job, rt.device)
    setup = _build(settings, job, tp, rt.device)
    meta = _trajectory_meta(settings, job, setup.arch)
    run = _resume(setup, job, meta)
    if run.start_epoch == 0 and settings.pretrain.steps > 0:  # once, before the first epoch (not on resume)
        from hsitp.train.pretrain import pretrain

        run.pretrain = pretrain(setup, settings, job.seed).attrs()
        log.info("%s: pretrained %s", job.name, run.pretrain)
    spe = settings.steps_per_epoch
    last_epoch = settings.epochs if job.stop_after is None else min(settings.epochs, int(job.stop_after))
    eval_at = evaluated_epochs(settings, job.stop_after)
    # memory is tracked (one step of the epoch under the tracker, several times a plain step's time on CPU) only in
    # the epochs the summary averages (§7.4: the last summary_epochs of this run); NaN in the others
    tracked_from = last_epoch - min(last_epoch, settings.summary_epochs)
    stop = stop or StopRequest()  # without one: nothing to check but the other ranks
    prediction = None  # (H, W) int16: the last evaluation's map
    progress = _Progress(tp.rank, last_epoch * spe, run.start_epoch * spe, last_epoch)
    try:
        for epoch in range(run.start_epoch, last_epoch):
            steps = _Steps(stop, on_step, progress, tracked=epoch >= tracked_from)
            trained = _train_epoch(setup, settings, job, epoch, run.last_good, steps)
            rec, scored = _score_epoch(setup, trained, evaluate=epoch + 1 in eval_at)
            prediction = scored if scored is not None else prediction
            run.history.append(rec)
            run.last_good = _save(setup, settings, job, epoch, run, meta)
            progress.epoch(epoch + 1, (epoch + 1) * spe, rec)
            if on_epoch is not None:
                on_epoch(epoch + 1, rec)
            # the epoch is saved: stop here if any rank was signalled (every rank together)
            stop.check(tp.group if tp.size > 1 else None, setup.device)
    finally:
        progress.close()
    if prediction is None:  # resumed after the last epoch: the same weights give the same map
        prediction = setup.evaluate().prediction
    return _write_record(rt, settings, job, setup, run, prediction) if tp.rank == 0 else None


def _write_record(
    rt: Runtime, settings: TrainSettings, job: TrainJob, setup: _Setup, run: _Resumed, prediction: np.ndarray
) -> Path:
    """Rank 0's record of the run: every epoch's numbers, the resumptions, the last evaluation's map."""
    return write_record(
        job, settings, rt, setup.arch, setup.scene, run.history, resumed_at=run.resumed_at,
        memory_method=_memory_method(setup.device), prediction=prediction, pretrain=run.pretrain,
    )  # fmt: skip


def _seed(settings: TrainSettings, job: TrainJob, device: torch.device) -> None:
    """The job's seed in every RNG (the same on every rank); deterministic kernels on CPU when asked."""
    if settings.deterministic and device.type != "cuda":
        torch.use_deterministic_algorithms(True)
    random.seed(job.seed)
    np.random.seed(job.seed)
    torch.manual_seed(job.seed)


def _build(settings: TrainSettings, job: TrainJob, tp: TPGroup, device: torch.device) -> _Setup:
    """The scene, the plan's model on this rank, its optimizer, schedule and crop sampler."""
    scene, arch = _scene_and_arch(settings, job, device)
    from hsitp.models.model import SpectralSpatialTransformer
    from hsitp.models.plans import parallelize

    # the single-process equivalent trains the plan's architecture whole, on one rank (plan "dense")
    applied = "dense" if job.equivalent else job.plan
    model = parallelize(SpectralSpatialTransformer(arch, seed=job.seed), applied, tp, device=device)
    total_steps = settings.epochs * settings.steps_per_epoch
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(settings.warmup_steps, total_steps))
    aug = settings.augmentation
    photometric = Photometric(aug.brightness, aug.noise, aug.band_mask)
    sampler = CropSampler(
        scene,
        arch.height,
        settings.batch,
        job.seed,
        augment=settings.augment,
        per_class=settings.per_class,
        photometric=photometric,
    )
    # torch.autocast's CPU twin: fp32 on CPU
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()
    )
    predict = functools.partial(
        predict_scene,
        model,
        scene,
        arch.height,
        batch=settings.batch,
        device=device,
        autocast=autocast,
        tta=settings.tta,
    )
    ema = WeightEMA(model, settings.ema.decay) if settings.ema.decay > 0 else None
    valid = model.output_valid()  # (1, 1, ...) bool or None: this rank's padded output locations
    tokens_per_step = settings.batch * arch.n_tokens
    return _Setup(
        scene, arch, model, opt, sched, sampler, tp, device, autocast, valid, tokens_per_step, predict, ema
    )


def _scene_and_arch(
    settings: TrainSettings, job: TrainJob, device: torch.device
) -> tuple[Scene, ModelConfig]:
    """The job's scene (its partition, validation pixels held out) and the architecture the plan splits, with
    the attention kernel resolved for ``device``."""
    scene = load_scene(
        job.data,
        job.protocol,
        partition_index=job.partition,
        validation=settings.validation.fraction,
        validation_seed=settings.seed,
        validation_folds=settings.validation.folds,
        validation_fold=settings.validation.fold,
    )
    arch = check_job(
        settings,
        job.plan,
        job.world_size,
        job.groups,
        scene.bands,
        scene.classes,
        patch=job.patch,
        tokens=job.tokens,
    )
    from hsitp.models.config import resolve_attention_kernel

    kernel = resolve_attention_kernel(settings.attention_kernel, device.type)  # auto: per device
    return scene, dataclasses.replace(arch, attention_kernel=kernel)


def _resume(setup: _Setup, job: TrainJob, meta: Mapping[str, Any]) -> _Resumed:
    """Load the newest complete checkpoint of the same configuration (``meta``) into ``setup``, or clear stale
    ones."""
    tp = setup.tp
    found = ckpt.latest_checkpoint(job.checkpoint_dir, tp.rank, tp.size, meta)
    run = _Resumed(0, [], [], None)
    if found is None:
        if tp.rank == 0:
            ckpt.clear(job.checkpoint_dir)
    else:
        run.start_epoch, state = found
        setup.model.load_state_dict(state["model"])
        setup.opt.load_state_dict(state["optimizer"])
        setup.sched.load_state_dict(state["scheduler"])
        setup.sampler.load_state_dict(state["sampler"])
        if setup.ema is not None:  # train.ema is a trajectory key: a checkpoint of this run holds it
            setup.ema.load_state_dict(state["ema"])
        run.pretrain = state.get("pretrain")
        _set_rng_state(state["rng"], setup.device)
        run.history, run.resumed_at = list(state["history"]), [*state["resumed_at"], run.start_epoch]
        run.last_good = ckpt.epoch_dir(job.checkpoint_dir, run.start_epoch)
        log.info("resuming %s after epoch %d from %s", job.name, run.start_epoch, job.checkpoint_dir)
    _barrier(tp)
    return run


@dataclass
class _Steps:
    """What an epoch's steps report to, and whether its last step is memory-tracked."""

    stop: StopRequest  # checked before every step in one process (no collective: free)
    on_step: Callable[[int], None] | None  # the caller's hook, before every step
    progress: _Progress  # the bar or log line
    tracked: bool  # the epoch's last step runs under the memory tracker


def _train_epoch(
    setup: _Setup, settings: TrainSettings, job: TrainJob, epoch: int, last_good: Path | None, steps: _Steps
) -> EpochSteps:
    """One epoch's optimizer steps (the last one memory-tracked in the summary epochs); its numbers."""
    spe = settings.steps_per_epoch
    nan_at, fail_at = settings.debug.nan_at_step, settings.debug.fail_at_step
    timer = CommTimer(setup.device)
    losses: list[float] = []
    step_times: list[float] = []
    comm_times: list[float] = []
    memory = None
    for i in range(spe):
        gstep = epoch * spe + i
        if setup.tp.size == 1:
            steps.stop.check()
        if steps.on_step is not None:
            steps.on_step(gstep)
        if fail_at is not None and gstep == fail_at:
            raise InjectedFailure(f"injected failure at step {gstep} (train.debug.fail_at_step)")
        where = (
            f"{job.name}: step {gstep} (epoch {epoch + 1}, step {i + 1} of {spe}); last good "
            f"checkpoint: {last_good if last_good else 'none (no epoch finished)'}"
        )
        box: dict[str, float] = {}
        inject_nan = nan_at is not None and gstep == nan_at
        step = functools.partial(
            _one_step, setup, _next_batch(setup), settings.label_smoothing, inject_nan, where, box
        )
        # the epoch's last step: after >= 1 step of the run the optimizer state exists
        tracked = i == spe - 1 and steps.tracked
        dt, comm, measured = _timed(setup, step, timer, tracked)
        if measured is not None:
            memory = measured
        if setup.ema is not None:  # after the step, outside its time and memory
            setup.ema.update(setup.model)
        if not tracked or spe == 1:  # a tracked step runs under the memory tracker: not timed
            step_times.append(dt)
            comm_times.append(comm)
        losses.append(box["loss"])
        steps.progress.step(box["loss"], setup.tokens_per_step / dt)
    return _epoch_record(setup, epoch, losses, step_times, comm_times, memory)


def _next_batch(setup: _Setup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """This rank's part of the next batch: input, target, loss mask, and the whole batch's train pixels."""
    x, y = setup.sampler.next()  # (B, L, S, S), (B, S, S)
    x, y = x.to(setup.device), y.to(setup.device)
    # this rank's input, (B, L_r, S, S) | (B, L, p, N_r p), made before the (memory-tracked) step so that no
    # plan's peak counts its input batch; a view of the whole cube (dchag's bands) is copied, as a rank that loads
    # only its bands would hold it, so the probe (whole storages) sees its share
    x_local = setup.model.shard_input(x)
    if x_local.untyped_storage().nbytes() > x_local.nbytes:
        x_local = x_local.clone()
    del x
    n_train = max(int((y >= 0).sum()), 1)  # train pixels of the whole batch (every rank knows it)
    target = setup.model.shard_output(y[:, None])[:, 0]  # this rank's pixels, laid out as its logits
    mask = target >= 0
    if setup.valid is not None:
        mask = mask & setup.valid[:, 0]
    return x_local, target, mask, n_train


def _timed(
    setup: _Setup, step: Callable[[], None], timer: CommTimer, tracked: bool
) -> tuple[float, float, Any]:
    """Run one step: (seconds, seconds inside the model's collectives, its memory when tracked else None)."""
    memory = None
    timer.reset()
    t0 = time.perf_counter()
    with timed_collectives(timer):
        if tracked:
            memory = measure_step(setup.model, step, optimizer=setup.opt, device=setup.device)
        else:
            step()
    if setup.device.type == "cuda":
        torch.cuda.synchronize(setup.device)
    return time.perf_counter() - t0, timer.seconds(), memory


def _score_epoch(
    setup: _Setup, trained: EpochSteps, *, evaluate: bool
) -> tuple[EpochRecord, np.ndarray | None]:
    """The epoch's record: its numbers and test and validation accuracy (NaN when not evaluated); the predicted
    map or None."""
    classes = setup.scene.classes
    result = setup.evaluate() if evaluate else None
    test = _accuracy(None if result is None else result.scores, classes)
    val = _accuracy(None if result is None else result.validation, classes, prefix="val_")
    return EpochRecord(**trained, **test, **val), None if result is None else result.prediction


def _save(
    setup: _Setup, settings: TrainSettings, job: TrainJob, epoch: int, run: _Resumed, meta: Mapping[str, Any]
) -> Path:
    """Checkpoint the state after ``epoch`` (every rank its own part; the manifest last); its folder."""
    state = {
        "model": setup.model.state_dict(),
        "optimizer": setup.opt.state_dict(),
        "scheduler": setup.sched.state_dict(),
        "sampler": setup.sampler.state_dict(),
        "rng": _rng_state(setup.device),
        "history": run.history,
        "resumed_at": run.resumed_at,
        "pretrain": run.pretrain,
    }
    if setup.ema is not None:
        state["ema"] = setup.ema.state_dict()
    tp = setup.tp
    return ckpt.save_checkpoint(
        job.checkpoint_dir,
        epoch + 1,
        tp.rank,
        tp.size,
        state,
        meta,
        keep=settings.checkpoint.keep,
        barrier=lambda: _barrier(tp),
    )


def _one_step(
    setup: _Setup,
    batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor, int],
    smoothing: float,
    inject_nan: bool,
    where: str,
    box: dict[str, float],
) -> None:
    """One optimizer step on ``batch`` (:func:`_next_batch`) with label smoothing ``smoothing``; the full batch's
    loss goes into ``box["loss"]`` (the memory tracker calls a step without taking its result). A non-finite loss
    stops the run before backward (the weights stay those of the last good step)."""
    model, opt, sched = setup.model, setup.opt, setup.sched
    x_local, target, mask, n_train = batch
    opt.zero_grad(set_to_none=True)
    with setup.autocast:
        logits = model(x_local)  # (B, K, ...) this rank's pixels
    # (B, ...)
    ce = F.cross_entropy(logits.float(), target.clamp(min=0), reduction="none", label_smoothing=smoothing)
    loss = (ce * mask).sum() / n_train
    if inject_nan:
        loss = loss * float("nan")  # train.debug.nan_at_step
    value = global_loss(loss, model.plan, setup.tp)
    if not math.isfinite(value):
        raise TrainError(f"loss is {value} at {where}; stopped")
    loss.backward()
    model.reduce_grads()
    opt.step()
    sched.step()
    box["loss"] = value


def _barrier(tp: TPGroup) -> None:
    if tp.size > 1:
        dist.barrier(group=tp.group)


def _accuracy(scores: Any, classes: int = 0, prefix: str = "") -> dict[str, Any]:
    """The record's accuracy entries of one epoch (NaN when the epoch was not evaluated or, for the validation
    entries, ``prefix="val_"``, when the run holds no validation pixels)."""
    if scores is None:
        values = {"oa": math.nan, "aa": math.nan, "kappa": math.nan, "per_class": np.full(classes, np.nan)}
    else:
        values = {
            "oa": scores.oa,
            "aa": scores.aa,
            "kappa": scores.kappa,
            "per_class": np.asarray(scores.per_class, dtype=np.float64),
        }
    return {prefix + k: v for k, v in values.items()}


def _memory_method(device: torch.device) -> str:
    if device.type == "cuda":
        return "torch.cuda.max_memory_allocated/max_memory_reserved after reset_peak_memory_stats"
    return "torch.distributed._tools.mem_tracker.MemTracker peak (CPU)"


def _epoch_record(
    setup: _Setup,
    epoch: int,
    losses: list[float],
    step_times: list[float],
    comm_times: list[float],
    memory: Any | None,
) -> EpochSteps:
    """One epoch's numbers, per-rank values gathered onto every rank (so every rank's checkpoint has them); the
    memory numbers are NaN in an epoch whose memory was not tracked (``memory`` None)."""
    tp = setup.tp
    step = float(np.mean(step_times))
    comm = float(np.mean(comm_times))
    if memory is None:
        mem = [math.nan] * (len(PARTS) * len(KINDS))
        peak_a, peak_r = math.nan, -1.0
    else:
        mem = [memory.by_part[p][k] for p in PARTS for k in KINDS]
        peak_a = float(memory.peak_allocated or 0)
        peak_r = -1.0 if memory.peak_reserved is None else float(memory.peak_reserved)
    row = torch.tensor([step, comm, peak_a, peak_r, *mem], dtype=torch.float64)
    rows = _gather_rows(row.to(setup.device), tp)
    step_r, comm_r = rows[:, 0], rows[:, 1]
    slowest = float(step_r.max())  # the group advances at the slowest rank's pace
    return {
        "epoch": epoch + 1,
        "loss": float(np.mean(losses)),
        "lr": float(setup.sched.get_last_lr()[0]),
        "tokens_per_s": setup.tokens_per_step / slowest,
        "step_time": step_r,
        "comm_time": comm_r,
        "ccr_inline": comm_r / np.maximum(step_r - comm_r, 1e-12),
        "peak_allocated": rows[:, 2],
        "peak_reserved": np.where(rows[:, 3] < 0, np.nan, rows[:, 3]),
        "memory": rows[:, 4:].reshape(tp.size, len(PARTS), len(KINDS)),
    }
