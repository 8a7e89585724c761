"""Single-device ``shard`` mode: measure one rank's share of compute for each P, model its communication.

On a machine with one accelerator there are no peers to communicate with, but the compute of one rank's shard
is real: each op is built on a no-op group of size P (``TPGroup(None, P, 0, comm="noop")``, or the matching
2-D mesh), so its layers hold rank 0's slice of the weights and tokens and every collective becomes a local op of
the same shape. The collectives it would issue are traced and costed with a hardware preset's ring model
(:func:`hsitp.cost.refined.collectives_time`). The resulting CCR is *half-measured*: compute measured on this
device, communication modelled from the preset, and every output says so.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.ops import OpBuild, bench_kernel, make_step, sweep_points, trace_point
from hsitp.bench.predict import check_points, op_work, predict
from hsitp.bench.results import POINT_COORD_ATTRS
from hsitp.bench.timing import median_iqr, time_interleaved
from hsitp.contracts import BENCH_SHARD
from hsitp.cost.refined import collectives_time, default_mesh
from hsitp.errors import HsitpError
from hsitp.io import describe, device_description, provenance, write_netcdf
from hsitp.settings import BenchSettings

log = logging.getLogger(__name__)
POINT_DIMS = ("op", "P", "N", "D", "L")
SHARD_ATTRS: dict[str, dict[str, str]] = {
    **POINT_COORD_ATTRS,
    "rep": {"units": "1", "long_name": "repeat index"},
    "time": {"units": "s", "long_name": "measured: rank 0's shard, fwd+bwd, collectives as no-ops"},
    "t_comp_measured": {"units": "s", "long_name": "measured (median)"},
    "t_comp_iqr": {"units": "s", "long_name": "inter-quartile range over repeats"},
    "flops": {"units": "FLOP", "long_name": "modelled (refined cost model)"},
    "achieved_flops": {"units": "FLOP/s", "long_name": "modelled FLOPs / measured time"},
    "bytes_moved": {"units": "B", "long_name": "traced full-tensor bytes"},
    "t_comm_modelled": {
        "units": "s",
        "long_name": "modelled: the preset's ring model on the traced collectives",
    },
    "t_comm_refined": {"units": "s", "long_name": "modelled: refined cost model's collectives on the preset"},
    "t_comp_refined": {
        "units": "s",
        "long_name": "modelled: refined cost model's compute time on the preset",
    },
    "ccr_half_measured": {
        "units": "1",
        "long_name": "half-measured CCR: modelled communication / measured compute",
    },
    "ccr_refined": {"units": "1", "long_name": "modelled CCR: refined cost model on the preset"},
}


def noop_group(op: str, P: int) -> Any:
    """Rank 0 of a P-way split with no process group: a no-op TPGroup, or the no-op 2-D mesh for attn_2d."""
    from hsitp.parallel.groups import TPGroup, make_mesh_2d

    world = TPGroup(None, P, 0, comm="noop")
    return make_mesh_2d(world, *default_mesh(P)) if op == "attn_2d" else world


def run_shard(s: BenchSettings, *, hardware: str) -> xr.Dataset:
    """Time every configured point's rank-0 shard for every P on one device; pair with ``hardware``'s comm."""
    from hsitp.cost.hardware import get_hardware
    from hsitp.parallel.runtime import RuntimeSettings, start

    hw = get_hardware(hardware)
    # one process (P = 1): threads and device as `bench run` sets them; no process group
    rt = start(RuntimeSettings.from_config(s.config, section="bench", world_size=1))
    try:
        return _run_shard(s, hw, rt.device)
    finally:
        rt.stop()


def _run_shard(s: BenchSettings, hw: Any, device: Any) -> xr.Dataset:
    import torch

    from hsitp.parallel.runtime import dtype_name, resolve_dtype

    dtype = resolve_dtype(s.dtypes[0], device, key="bench.dtypes")
    dname = dtype_name(dtype)
    sizes = list(s.shard.world_sizes)
    shape = (len(s.ops), len(sizes), len(s.N), len(s.D), len(s.L))
    times = np.full((*shape, s.repeats), np.nan)
    names = ("flops", "bytes_moved", "t_comm_modelled", "t_comm_refined", "t_comp_refined")
    out = {k: np.full(shape, np.nan) for k in names}
    skipped = []
    pad, kernel = s.head_padding, bench_kernel(s, device.type)  # the aggregation ops' single-query kernel
    points = [(pi, idx, pt) for pi, p in enumerate(sizes) for idx, pt in sweep_points(s, p, [dname])]
    check_points((pt for _, _, pt in points), head_padding=pad)
    for pi, (i, j, k, m, _), pt in points:
        index = (i, pi, j, k, m)
        try:
            times[index], traced = _time_shard(pt, s, device, kernel)
        except (HsitpError, torch.cuda.OutOfMemoryError) as exc:
            skipped.append({**dataclasses.asdict(pt), "reason": f"{type(exc).__name__}: {exc}"})
            log.warning("shard: skipped %s: %s", pt, exc)
            continue
        pred = predict(pt, hw, head_padding=pad)
        calls = [(r.name, r.group_size, r.nbytes, 1) for _, recs in traced for r in recs]
        work, nbytes = op_work(pt, head_padding=pad)[0], float(sum(c[2] for c in calls))
        # the traced collectives on the preset's ring model (hierarchical when a group spans nodes)
        values = (work, nbytes, collectives_time(calls, hw), pred.t_comm, pred.t_comp)
        for name, value in zip(names, values, strict=True):
            out[name][index] = value
    ds = _dataset(s, sizes, dname, times, out, hw, device, skipped)
    ds.attrs["attention_kernel"] = kernel
    return ds


def _time_shard(pt: Any, s: BenchSettings, device: Any, kernel: str) -> tuple[np.ndarray, list[Any]]:
    """Rank 0's shard of one point timed on ``device`` (collectives as no-ops), and the collectives it issued."""
    import torch

    how = OpBuild(pt.shape, s.head_padding, device, s.seed, kernel)
    tp = noop_group(pt.op, pt.P)
    try:
        traced = trace_point(pt.op, tp, how)
        step = make_step(how.build(pt.op, tp))
        t = time_interleaved(
            [step], device=device, warmup=s.warmup, repeats=s.repeats, min_region_s=s.min_region_s
        )
        return t[0], traced
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def _dataset(
    s: BenchSettings,
    sizes: list[int],
    dname: str,
    times: np.ndarray,
    out: Mapping[str, np.ndarray],
    hw: Any,
    device: Any,
    skipped: list[dict[str, Any]],
) -> xr.Dataset:
    import torch

    med, iqr = median_iqr(times)
    coords = dict(zip(POINT_DIMS, (s.ops, sizes, s.N, s.D, s.L), strict=True))
    per_point = {
        "t_comp_measured": med,
        "t_comp_iqr": iqr,
        "flops": out["flops"],
        "achieved_flops": out["flops"] / med,
    }
    ds = xr.Dataset(
        {
            "time": ((*POINT_DIMS, "rep"), times),
            **{k: (POINT_DIMS, v) for k, v in {**per_point, **out}.items()},
        },
        coords={**{k: list(v) for k, v in coords.items()}, "rep": np.arange(times.shape[-1])},
    )
    ds["ccr_half_measured"] = ds["t_comm_modelled"] / ds["t_comp_measured"]
    ds["ccr_refined"] = ds["t_comm_refined"] / ds["t_comp_refined"]
    describe(ds, SHARD_ATTRS)
    ds.attrs = {
        "title": "hsitp shard mode (half-measured): rank 0's compute measured on one device, communication "
        f"modelled from {hw.name}",
        "label": "half-measured",
        "measured": f"compute of rank 0's shard on one device: "
        f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU: ' + device_description()['cpu']}",
        "modelled": f"communication from hardware preset {hw.name!r}: {hw.description}",
        "hardware_source": hw.source,
        "hardware_assumptions": hw.assumptions,
        "dtype": dname,
        "mesh_2d": {str(p): list(default_mesh(p)) for p in sizes},
        "skipped_points": skipped,
        "note": "no communication was performed; only compute is measured",
    }
    return ds


def write_shard(out: str | Path, settings: BenchSettings, *, hardware: str | None = None) -> Path:
    """Run the shard mode and write it; ``hardware`` default: bench.shard.hardware."""
    hardware = hardware or settings.shard.hardware
    ds = run_shard(settings, hardware=hardware)
    return write_netcdf(
        ds, out, kind=BENCH_SHARD.kind, prov=provenance(config=settings.config, extra={"hardware": hardware})
    )
