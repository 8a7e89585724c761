"""Timing one parallel op per point: full fwd+bwd, compute-only, collective-only, and what it communicates.

* full: ``module(*inputs)`` then backward with a fixed output gradient, then the replicated-weight gradient sync
  of token-split layers (``reduce_replicated_grads``), exactly one training step of the layer;
* compute: the same layer built on the no-op twin of the group (``comm="noop"``): every collective becomes a
  local op of the same output shape and dtype;
* comm: the collectives the layer issued (traced once, in order, forward then backward) replayed alone on the
  same process groups with buffers of the traced sizes.

bytes_moved sums the traced full-tensor bytes; FLOPs and memory traffic come from the refined cost model (see
``bench.model``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.collective_sweep import COLLECTIVES, CollectiveCall, make_call
from hsitp.bench.fit import ring_factor
from hsitp.bench.model import L_DEPENDENT_OPS, Point, mesh_2d, op_flops, op_traffic
from hsitp.bench.results import MODES
from hsitp.bench.timing import time_interleaved
from hsitp.errors import HsitpError

log = logging.getLogger(__name__)

# Seed of the fixed upstream gradient every timed backward pass starts from (same on every rank and point).
GRAD_SEED = 1234


@dataclasses.dataclass
class Groups:
    """This rank's real process groups, built once per run (new_group is collective and not free)."""

    world: Any  # TPGroup
    meshes: dict[tuple[int, int], Any]  # (P_c, P_t) -> Mesh2D

    def mesh(self, shape: tuple[int, int]) -> Any:
        from hsitp.parallel.groups import make_mesh_2d

        if shape not in self.meshes:
            self.meshes[shape] = make_mesh_2d(self.world, *shape)
        return self.meshes[shape]


def make_groups(rt: Any, timeout_s: float) -> Groups:
    from hsitp.parallel.groups import TPGroup

    world = (
        TPGroup.single() if rt.group is None else TPGroup.from_process_group(rt.group, timeout_s=timeout_s)
    )
    return Groups(world=world, meshes={})


def _variant(tp: Any, **changes: Any) -> Any:
    """The same TPGroup or Mesh2D with ``changes`` (comm, trace) applied to every axis."""
    from hsitp.parallel.groups import Mesh2D

    if isinstance(tp, Mesh2D):
        return Mesh2D(
            channel=dataclasses.replace(tp.channel, **changes), token=dataclasses.replace(tp.token, **changes)
        )
    return dataclasses.replace(tp, **changes)


def _traced(tp: Any) -> tuple[Any, list[tuple[Any, Any]]]:
    """A no-op twin whose every axis records into its own list, so each record's group is known."""
    from hsitp.parallel.groups import Mesh2D

    if isinstance(tp, Mesh2D):
        ch, tok = [], []
        mesh = Mesh2D(
            channel=dataclasses.replace(tp.channel, comm="noop", trace=ch),
            token=dataclasses.replace(tp.token, comm="noop", trace=tok),
        )
        return mesh, [(tp.channel, ch), (tp.token, tok)]
    records: list[Any] = []
    return dataclasses.replace(tp, comm="noop", trace=records), [(tp, records)]


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


def replay_calls(traced: list[tuple[Any, list[Any]]], rt: Any) -> list[CollectiveCall]:
    """Buffers for every traced collective on the real group that issued it, in issue order per group."""
    import torch

    calls = []
    for tp, records in traced:
        for r in records:
            elems = int(np.prod(r.shape))
            calls.append(
                make_call(
                    r.name,
                    elems,
                    dtype=getattr(torch, r.dtype),
                    device=rt.device,
                    group=tp.group,
                    world_size=r.group_size,
                )
            )
    return calls


def _agree(ok: bool, rt: Any) -> bool:
    """True only if every rank says ok: a point skipped on one rank must be skipped on all, or they hang."""
    import torch
    import torch.distributed as dist

    if rt.group is None:
        return ok
    flag = torch.tensor([int(ok)], device=rt.device)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=rt.group)
    return bool(flag.item())


def build_kwargs(pt: Point, *, dtype: Any, device: Any, seed: int) -> dict[str, Any]:
    """``build_op`` keyword arguments for a point (everything but the op name and the group)."""
    return {
        "N": pt.N,
        "D": pt.D,
        "L": pt.L,
        "heads": pt.heads,
        "groups": pt.groups,
        "batch": pt.batch,
        "patch": pt.patch,
        "mlp_ratio": pt.mlp_ratio,
        "dtype": dtype,
        "device": device,
        "seed": seed,
    }


def trace_point(op: str, tp: Any, kw: Mapping[str, Any]) -> list[tuple[Any, list[Any]]]:
    """The collectives one training step of ``op`` issues, per real group, without communicating."""
    from hsitp.parallel.ops import build_op

    traced_tp, traced = _traced(tp)
    step = make_step(build_op(op, tp=traced_tp, **kw))
    for _, recs in traced:
        recs.clear()  # drop what make_step's shape probe recorded
    step()
    return traced


def summarize_trace(traced: list[tuple[Any, list[Any]]]) -> dict[str, Any]:
    """Bytes, call count, and per collective (COLLECTIVES order) calls and Σ ring factor x full bytes."""
    records = [r for _, recs in traced for r in recs]
    count = np.zeros(len(COLLECTIVES))
    factor_bytes = np.zeros(len(COLLECTIVES))
    for r in records:
        i = COLLECTIVES.index(r.name)
        count[i] += 1
        factor_bytes[i] += ring_factor(r.name, r.group_size) * r.nbytes
    return {
        "bytes": float(sum(r.nbytes for r in records)),
        "n": len(records),
        "count": count,
        "factor_bytes": factor_bytes,
    }


def time_point(
    pt: Point, groups: Groups, rt: Any, bc: Mapping[str, Any], dtype: Any, seed: int, repeats: int
) -> dict[str, Any]:
    """Time one point in all three modes: times (mode, rep) plus :func:`summarize_trace` (or a skip reason)."""
    import torch

    from hsitp.parallel.ops import build_op

    tp = groups.mesh(mesh_2d(pt.P)) if pt.op == "attn_2d" else groups.world
    kw = build_kwargs(pt, dtype=dtype, device=rt.device, seed=seed)
    reason = ""
    try:
        traced = trace_point(pt.op, tp, kw)
        full = make_step(build_op(pt.op, tp=tp, **kw))
        compute = make_step(build_op(pt.op, tp=_variant(tp, comm="noop"), **kw))
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
        warmup=bc["warmup"],
        repeats=repeats,
        min_region_s=bc["min_region_s"],
    )
    return {"times": times, **summarize_trace(traced)}


def time_ops(
    ds: xr.Dataset,
    rt: Any,
    bc: Mapping[str, Any],
    *,
    dtypes: Mapping[str, Any],
    settings: Mapping[str, Any],
    seed: int,
    reps: np.ndarray,
    groups: Groups,
) -> None:
    """Time every point for the repeats ``reps`` (indices into ``rep``) and fill ``ds`` in place.

    Fills ``time`` at those repeats and, from the trace and the cost model, ``bytes_moved``, ``n_collectives``,
    ``trace_*``, ``flops`` and ``traffic_bytes``. Ops that do not depend on L are timed at the first L only (the other L stay NaN).
    """
    import torch

    skipped: list[dict[str, Any]] = []
    first_l = bc["L"][0]
    for i, op in enumerate(bc["ops"]):
        if rt.rank == 0:
            log.info("P=%d %s (repeats %s)", rt.world_size, op, reps.tolist())
        for j, n in enumerate(bc["N"]):
            for k, d in enumerate(bc["D"]):
                for m, bands in enumerate(bc["L"]):
                    if op not in L_DEPENDENT_OPS and bands != first_l:
                        continue
                    for q, (dname, dtype) in enumerate(dtypes.items()):
                        pt = Point(op, rt.world_size, n, d, bands, dname, **settings)
                        res = time_point(pt, groups, rt, bc, dtype, seed, len(reps))
                        idx = (i, 0, j, k, m, q)
                        if "skipped" in res:
                            skipped.append({**dataclasses.asdict(pt), "reason": res["skipped"]})
                            if rt.rank == 0:
                                log.warning("skipped %s: %s", pt, res["skipped"])
                            continue
                        ds["time"].values[idx][:, reps] = res["times"]  # (mode, rep) view
                        ds["bytes_moved"].values[idx] = res["bytes"]
                        ds["n_collectives"].values[idx] = res["n"]
                        ds["trace_count"].values[idx] = res["count"]
                        ds["trace_factor_bytes"].values[idx] = res["factor_bytes"]
                        ds["flops"].values[idx] = op_flops(pt)
                        ds["traffic_bytes"].values[idx] = op_traffic(pt)
                        if rt.is_cuda:
                            torch.cuda.empty_cache()
    ds.attrs["skipped_points"] = skipped
    ds.attrs["mesh_2d"] = list(mesh_2d(rt.world_size))
    ds.attrs["op_settings"] = dict(settings)
