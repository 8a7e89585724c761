"""One torchrun launch of ``hsitp probe run``: every rank runs every probe point at this P; rank 0 writes the file.

Per point: build the plan's model (``probe.build``), ``warmup`` steps (AdamW creates its state lazily), one
measured step (``hsitp.probe.tracker.measure_step``: exact state bytes, saved activations by part, the peak and the part
where it was reached), then ``steps`` timed steps in two modes interleaved step by step: ``full`` (the real
collectives) and ``compute`` (the same model on the group's no-op twin: every collective a local op of the same
shape). Part boundaries split every step into tokenisation / aggregation / blocks / head / other, forward,
backward and update; collectives time per part = full - compute. Per-rank results are gathered to rank 0.

On a CPU the ranks are gloo processes on shared cores; every file records backend, threads per rank, cores and the
oversubscription flag. On CUDA the timeline synchronises the device at every part boundary (it perturbs the
timing a little; the step total is measured the same way in both modes).

Then the throughput phase (``throughput_phase``): per (L, N, checkpointing), every plan (and g) of the grid at this
P is built at once and timed by ``hsitp.bench.interleave`` (``probe.throughput``: warm-up steps of every plan,
excluded; ``repeats`` rounds of one sample of ``steps`` training steps per plan, the order reversed every other
round; the slowest rank's seconds per step). Same process, same threads, same minutes for every plan: these are the
only timings whose ratio between plans the pipeline reports (memory stays measured one point at a time, above).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from hsitp.bench.interleave import Interleaved, interleave, round_order
from hsitp.bench.timing import synchronize
from hsitp.cost.budget import host_bytes
from hsitp.models.config import config_attention_kernel
from hsitp.names import DCHAG_PLANS
from hsitp.probe.build import build_point
from hsitp.probe.grid import Point, check_point_fits, points
from hsitp.probe.results import MODES, TIME_PARTS, PointResult, RankResult
from hsitp.probe.tracker import KINDS, PARTS, PHASES, PartTimeline, measure_step
from hsitp.settings import ProbeSettings

if TYPE_CHECKING:
    from hsitp.parallel.runtime import Runtime

log = logging.getLogger(__name__)


def run_partial(s: ProbeSettings, *, world_size: int, out: str | Path) -> Path | None:
    """Probe every configured point at P = ``world_size``; returns the file written (rank 0) or None."""
    from hsitp.parallel.runtime import RuntimeSettings, start

    pts = points(s, world_size)  # refuses a grid that does not fit before any rendezvous
    if s.device == "cpu" or not torch.cuda.is_available():  # the ranks share this machine's memory
        for pt in pts:
            check_point_fits(s, pt, "probe", host_bytes() / world_size)
    rt = start(RuntimeSettings.from_config(s.config, section="probe", world_size=world_size))
    # model.attention_kernel on this device (written into the files, so the memory model prices that kernel)
    s = s.model_copy(update={"attention_kernel": config_attention_kernel(s.config, rt.device.type)})
    try:
        results = [probe_point(pt, s, rt) for pt in pts]
        samples, orders = throughput_phase(pts, s, rt)
        if rt.rank != 0:
            return None
        results = [dataclasses.replace(res, sample_time=samples[res.point]) for res in results]
        from hsitp.probe.results import write_partial

        attrs = {**rt.attrs(), "interleave_orders": orders}
        return write_partial(results, settings=s, attrs=attrs, out=Path(out), world_size=world_size)
    finally:
        rt.stop()


def _gather(obj: Any, rt: Runtime) -> list[Any]:
    if rt.world_size == 1:
        return [obj]
    objs: list[Any] = [None] * rt.world_size
    dist.all_gather_object(objs, obj, group=rt.group)
    return objs


def _clock(device: torch.device):  # noqa: ANN202
    if device.type == "cuda":

        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return clock
    return time.perf_counter


def probe_point(point: Point, pc: ProbeSettings, rt: Runtime) -> PointResult:
    """Memory of one step on every rank, and timed steps in both modes; the per-rank lists (rank 0 keeps them)."""
    from hsitp.parallel.runtime import dtype_name, resolve_dtype

    seed = pc.seed
    dtype = resolve_dtype(pc.dtype, rt.device, key="probe.dtype")
    built = build_point(point, pc, rt.world, dtype=dtype, device=rt.device, seed=seed)
    for _ in range(int(pc.warmup)):
        built.step()
    mem = measure_step(built.model, built.step, optimizer=built.optimizer, device=rt.device)
    twin = build_point(point, pc, rt.world.noop(), dtype=dtype, device=rt.device, seed=seed)
    for _ in range(int(pc.warmup)):
        twin.step()
    part_t, step_t = _time_modes(built, twin, int(pc.steps), rt)
    tokens = built.tokens_per_step
    mine = RankResult(
        memory=np.array([[mem.by_part[p][k] for k in KINDS] for p in PARTS], dtype=np.float64),
        peak_allocated=mem.peak_allocated,
        peak_reserved=mem.peak_reserved,
        transient=mem.transient,
        peak_part=mem.peak_part,
        peak_phase=mem.peak_phase,
        peak_categories=mem.peak_categories,
        method=mem.method,
        part_time=part_t,
        step_time=step_t,
    )
    ranks = _gather(mine, rt)
    del built, twin
    if rt.rank == 0:
        where = (point.plan, point.P, point.g, point.L, point.N, point.checkpointing)
        peak, step = (mem.peak_allocated or 0) / 2**20, float(np.median(step_t[0]))
        log.info("probe %s P=%d g=%d L=%d N=%d ckpt=%s: peak %.1f MiB, step %.3f s", *where, peak, step)
    return PointResult(point, ranks, dtype_name(dtype), tokens)


def _time_modes(built: Any, twin: Any, steps: int, rt: Runtime) -> tuple[np.ndarray, np.ndarray]:
    """(time per mode, part, phase and step; time per mode and step): ``steps`` steps of the model with its
    collectives (``built``, mode full) and of its no-op twin (compute), interleaved step by step."""
    clock = _clock(rt.device)
    part_t = np.zeros((len(MODES), len(TIME_PARTS), len(PHASES), steps))
    step_t = np.zeros((len(MODES), steps))
    for rep in range(steps):
        order = round_order(MODES, rep)  # interleaved: drift hits both modes alike
        for mode in order:
            b = built if mode == "full" else twin
            if rt.world_size > 1:
                dist.barrier(group=rt.group)
            mi = MODES.index(mode)
            t0 = clock()
            with PartTimeline(b.model, clock=clock) as tl:
                b.step()
            step_t[mi, rep] = clock() - t0
            seconds = tl.by_part()
            part_t[mi, ..., rep] = [[seconds[part][phase] for phase in PHASES] for part in TIME_PARTS]
    return part_t, step_t


def side_name(point: Point) -> str:
    """A plan's name in the interleaved rounds: 'tp', 'dchag_l g=2'."""
    return point.plan + (f" g={point.g}" if point.plan in DCHAG_PLANS else "")


def throughput_phase(
    pts: list[Point], pc: ProbeSettings, rt: Runtime
) -> tuple[dict[Point, list[float]], dict[str, list[list[str]]]]:
    """Seconds per training step (slowest rank) of every point, one sample per round, the plans of each (L, N,
    checkpointing) interleaved in one run; and the order each round ran in, per (L, N, checkpointing)."""
    from hsitp.parallel.runtime import resolve_dtype

    tc, seed = pc.throughput, pc.seed
    dtype = resolve_dtype(pc.dtype, rt.device, key="probe.dtype")
    samples: dict[Point, list[float]] = {}
    orders: dict[str, list[list[str]]] = {}
    for key in dict.fromkeys((pt.L, pt.N, pt.checkpointing) for pt in pts):
        here = [pt for pt in pts if (pt.L, pt.N, pt.checkpointing) == key]
        built = {pt: build_point(pt, pc, rt.world, dtype=dtype, device=rt.device, seed=seed) for pt in here}
        sides = {side_name(pt): (b.step, lambda: synchronize(rt.device)) for pt, b in built.items()}
        res: Interleaved = interleave(
            sides,
            warmup=int(tc.warmup),
            repeats=int(tc.repeats),
            steps=int(tc.steps),
            device=rt.device,
            group=rt.group,
        )
        for pt in here:
            samples[pt] = res.times[side_name(pt)]
        orders[f"L{key[0]}/N{key[1]}/{key[2]}"] = res.orders
        del built, sides
        if rt.rank == 0:
            log.info(
                "throughput P=%d L=%d N=%d ckpt=%s, %d interleaved rounds: %s",
                rt.world_size, *key, res.repeats,
                ", ".join(f"{n} {res.median(n):.3f} s/step" for n in res.names),
            )  # fmt: skip
    return samples, orders
