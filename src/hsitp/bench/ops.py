"""Timing one parallel op per point: full fwd+bwd, compute-only, collective-only, and what it communicates.

* full: ``module(*inputs)`` then backward with a fixed output gradient, then the replicated-weight gradient sync
  of token-split layers (``reduce_replicated_grads``), exactly one training step of the layer;
* compute: the same layer built on the no-op twin of the group (``comm="noop"``): every collective becomes a
  local op of the same output shape and dtype;
* comm: the collectives the layer issued (traced once, in order, forward then backward) replayed alone on the
  same process groups with buffers of the traced sizes.

What is stored is measured: times, and the traced calls and full-tensor bytes per collective and process group.
FLOPs and memory traffic are the cost model's and are computed where used (``bench.predict``).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from hsitp.bench.collective_sweep import CollectiveCall, make_call
from hsitp.bench.predict import L_DEPENDENT_OPS, Point, bench_shape
from hsitp.bench.results import MODES, TRACED_GROUPS
from hsitp.bench.timing import time_interleaved
from hsitp.cost.refined import default_mesh
from hsitp.errors import HsitpError
from hsitp.names import COLLECTIVES

if TYPE_CHECKING:
    from hsitp.parallel.groups import AxisTrace, Mesh2D, TPGroup
    from hsitp.parallel.ops import BuiltOp
    from hsitp.parallel.runtime import Runtime
    from hsitp.settings import BenchSettings
    from hsitp.shape import LayerShape

log = logging.getLogger(__name__)

# Seed of the fixed upstream gradient every timed backward pass starts from (same on every rank and point).
GRAD_SEED = 1234


def make_step(built: Any) -> Callable[[], None]:
    """One training step of the layer: forward, backward with a fixed gradient, replicated-grad sync."""
    import torch

    module, make_input = built
    inputs = make_input()
    params = list(module.parameters())
    with torch.no_grad():
        shape_probe = module(*inputs)
    gen = torch.Generator().manual_seed(GRAD_SEED)
    grad = torch.randn(shape_probe.shape, generator=gen).to(shape_probe.device, shape_probe.dtype)
    sync = getattr(module, "reduce_replicated_grads", None)

    def step() -> None:
        for p in params:
            p.grad = None
        for x in inputs:
            x.grad = None
        out = module(*inputs)
        out.backward(grad)
        if sync is not None:
            sync()

    return step


def replay_calls(traced: list[AxisTrace], rt: Runtime) -> list[CollectiveCall]:
    """Buffers for every traced collective on the real group that issued it, in issue order per group."""
    import torch

    return [
        make_call(
            r.name,
            int(np.prod(r.shape)),
            dtype=getattr(torch, r.dtype),
            device=rt.device,
            group=tp.group,
            world_size=r.group_size,
        )
        for tp, records in traced
        for r in records
    ]


def _agree(ok: bool, rt: Runtime) -> bool:
    """True only if every rank says ok: a point skipped on one rank must be skipped on all, or they hang."""
    import torch
    import torch.distributed as dist

    if rt.group is None:
        return ok
    flag = torch.tensor([int(ok)], device=rt.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=rt.group)
    return bool(flag.item())


@dataclasses.dataclass(frozen=True)
class OpBuild:
    """How a point's op is built: :func:`hsitp.parallel.ops.build_op`'s arguments but the op and its group."""

    shape: LayerShape
    head_padding: bool = False
    device: Any = None  # a torch.device (torch is imported where an op is built)
    seed: int = 0
    attention_kernel: str = "exact"

    def build(self, op: str, tp: TPGroup | Mesh2D) -> BuiltOp:
        from hsitp.parallel.ops import build_op

        return build_op(op, tp=tp, shape=self.shape, head_padding=self.head_padding, device=self.device,
                        seed=self.seed, attention_kernel=self.attention_kernel)  # fmt: skip


def trace_point(op: str, tp: TPGroup | Mesh2D, how: OpBuild) -> list[AxisTrace]:
    """The collectives one training step of ``op`` issues, per real group, without communicating."""
    traced_tp, traced = tp.traced()
    step = make_step(how.build(op, traced_tp))
    for _, recs in traced:
        recs.clear()  # drop what make_step's shape probe recorded
    step()
    return traced


def summarize_trace(traced: list[AxisTrace], op: str) -> dict[str, Any]:
    """Bytes and calls in all, and per (collective, group) (COLLECTIVES x TRACED_GROUPS) calls and full bytes of
    what :func:`trace_point` returned for ``op``: its groups are the attn_2d mesh's channel and token axes, or all
    P ranks (tp)."""
    names = ("channel", "token") if op == "attn_2d" else ("tp",)
    count = np.zeros((len(COLLECTIVES), len(TRACED_GROUPS)))
    nbytes = np.zeros((len(COLLECTIVES), len(TRACED_GROUPS)))
    for name, (_, recs) in zip(names, traced, strict=True):
        for r in recs:
            i, g = COLLECTIVES.index(r.name), TRACED_GROUPS.index(name)
            count[i, g] += 1
            nbytes[i, g] += r.nbytes
    return {"bytes": float(nbytes.sum()), "n": int(count.sum()), "count": count, "trace_bytes": nbytes}


def time_point(
    pt: Point,
    rt: Runtime,
    s: BenchSettings,
    *,
    repeats: int,
) -> dict[str, Any]:
    """Time one point in all three modes: times (mode, rep) plus :func:`summarize_trace` (or a skip reason)."""
    import torch

    tp = rt.mesh(*default_mesh(pt.P)) if pt.op == "attn_2d" else rt.world
    how = OpBuild(pt.shape, s.head_padding, rt.device, s.seed, bench_kernel(s, rt.device.type))
    reason = ""
    try:
        traced = trace_point(pt.op, tp, how)
        full = make_step(how.build(pt.op, tp))
        compute = make_step(how.build(pt.op, tp.noop()))
        calls = replay_calls(traced, rt)
    except (HsitpError, torch.cuda.OutOfMemoryError) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if not _agree(not reason, rt):
        return {"skipped": reason or "skipped on another rank"}

    def comm() -> None:
        for c in calls:
            c.run()

    fns = [full, compute] + ([comm] if calls else [])
    times = np.zeros((len(MODES), repeats))  # comm stays exactly 0 when nothing is communicated (P = 1)
    times[: len(fns)] = time_interleaved(
        fns,
        device=rt.device,
        group=rt.group,
        warmup=s.warmup,
        repeats=repeats,
        min_region_s=s.min_region_s,
    )
    return {"times": times, **summarize_trace(traced, pt.op)}


def sweep_points(s: BenchSettings, P: int, dtypes: Iterable[str]) -> Iterator[tuple[tuple[int, ...], Point]]:
    """Every point of the bench sweep at P, with its (op, N, D, L, dtype) index: ops that do not depend on L
    only at the first L."""
    for (i, op), (j, n), (k, d), (m, bands), (q, dname) in itertools.product(
        enumerate(s.ops), enumerate(s.N), enumerate(s.D), enumerate(s.L), enumerate(dtypes)
    ):
        if op in L_DEPENDENT_OPS or m == 0:
            yield (i, j, k, m, q), Point(op, P, bench_shape(s, N=n, D=d, L=bands, dtype=dname))


def bench_kernel(s: BenchSettings, device_type: str) -> str:
    """The single-query attention kernel the aggregation ops run on ``device_type`` (``model.attention_kernel``)."""
    from hsitp.models.config import resolve_attention_kernel

    return resolve_attention_kernel(s.attention_kernel, device_type)


def time_ops(
    ds: xr.Dataset,
    rt: Runtime,
    s: BenchSettings,
    *,
    dtypes: Iterable[str],
    reps: np.ndarray,
    on_step: Callable[[str], None] | None = None,
) -> None:
    """Time every point for the repeats ``reps`` (indices into ``rep``) and fill ``ds`` in place.

    Fills ``time`` at those repeats and, from the trace, ``bytes_moved``, ``n_collectives``, ``trace_count`` and
    ``trace_bytes``. Ops that do not depend on L are timed at the first L only (the other L stay NaN).
    ``on_step(what)`` is called after each point (progress, and a safe point to stop).
    """
    import torch

    skipped: list[dict[str, Any]] = []
    last_op = None
    for (i, j, k, m, q), pt in sweep_points(s, rt.world_size, dtypes):
        if rt.rank == 0 and pt.op != last_op:
            log.debug("P=%d %s (repeats %s)", rt.world_size, pt.op, reps.tolist())
        last_op = pt.op
        res = time_point(pt, rt, s, repeats=len(reps))
        idx = (i, 0, j, k, m, q)
        what = f"{pt.op} N={pt.shape.N} D={pt.shape.D} L={pt.shape.L}"
        if "skipped" in res:
            skipped.append({**dataclasses.asdict(pt), "reason": res["skipped"]})
            if rt.rank == 0:
                log.warning("skipped %s: %s", pt, res["skipped"])
        else:
            ds["time"].values[idx][:, reps] = res["times"]  # (mode, rep) view
            ds["bytes_moved"].values[idx] = res["bytes"]
            ds["n_collectives"].values[idx] = res["n"]
            ds["trace_count"].values[idx] = res["count"]
            ds["trace_bytes"].values[idx] = res["trace_bytes"]
            if rt.is_cuda:
                torch.cuda.empty_cache()
        if on_step is not None:
            on_step(what)
    ds["group_size"].values[0] = [rt.world.size, *default_mesh(rt.world_size)]  # TRACED_GROUPS order
    ds.attrs["skipped_points"] = skipped
    ds.attrs["mesh_2d"] = list(default_mesh(rt.world_size))
