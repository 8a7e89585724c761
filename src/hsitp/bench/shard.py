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

from hsitp.bench.ops import bench_kernel, make_step, sweep_points, trace_point
from hsitp.bench.predict import check_points, mesh_2d, op_work, predict
from hsitp.bench.results import POINT_COORD_ATTRS
from hsitp.bench.timing import median_iqr, time_region
from hsitp.contracts import BENCH_SHARD
from hsitp.errors import HsitpError
from hsitp.io import describe, device_description, provenance, write_netcdf

log = logging.getLogger(__name__)
POINT_DIMS = ("op", "P", "N", "D", "L")


def noop_group(op: str, P: int) -> Any:
    """Rank 0 of a P-way split with no process group: a no-op TPGroup, or the no-op 2-D mesh for attn_2d."""
    from hsitp.parallel.groups import TPGroup, make_mesh_2d

    world = TPGroup(None, P, 0, comm="noop")
    return make_mesh_2d(world, *mesh_2d(P)) if op == "attn_2d" else world


def modelled_comm_time(traced: list[Any], hw: Any) -> float:
    """The preset's ring-model time of the traced collectives (hierarchical when a group spans nodes)."""
    from hsitp.cost.refined import collectives_time

    return collectives_time(((r.name, r.group_size, r.nbytes, 1) for _, recs in traced for r in recs), hw)


def run_shard(config: Mapping[str, Any], *, hardware: str) -> xr.Dataset:
    """Time every configured point's rank-0 shard for every P on one device; pair with ``hardware``'s comm."""
    from hsitp.cost.hardware import get_hardware
    from hsitp.parallel.runtime import RuntimeSettings, start

    hw = get_hardware(hardware)
    # one process (P = 1): threads and device as `bench run` sets them; no process group
    rt = start(RuntimeSettings.from_config(config, section="bench", world_size=1))
    try:
        return _run_shard(config, hw, rt.device)
    finally:
        rt.stop()


def _run_shard(config: Mapping[str, Any], hw: Any, device: Any) -> xr.Dataset:
    import torch

    from hsitp.parallel.ops import build_op
    from hsitp.parallel.runtime import dtype_name, resolve_dtype

    bc = config["bench"]
    dtype = resolve_dtype(bc["dtypes"][0], device, key="bench.dtypes")
    dname = dtype_name(dtype)
    sizes = bc["shard"]["world_sizes"]
    shape = (len(bc["ops"]), len(sizes), len(bc["N"]), len(bc["D"]), len(bc["L"]))
    times = np.full((*shape, bc["repeats"]), np.nan)
    out = {
        k: np.full(shape, np.nan)
        for k in ("flops", "bytes", "t_comm_trace", "t_comm_refined", "t_comp_refined")
    }
    skipped = []
    pad = config["parallel"]["head_padding"]
    points = [(pi, idx, pt) for pi, p in enumerate(sizes) for idx, pt in sweep_points(config, p, [dname])]
    check_points((pt for _, _, pt in points), head_padding=pad)
    for pi, (i, j, k, m, _), pt in points:
        index = (i, pi, j, k, m)
        kw = {
            "shape": pt.shape,
            "head_padding": pad,
            "device": device,
            "seed": int(config["seed"]),
            "attention_kernel": bench_kernel(config, device.type),
        }
        tp = noop_group(pt.op, pt.P)
        try:
            traced = trace_point(pt.op, tp, kw)
            step = make_step(build_op(pt.op, tp=tp, **kw))
            times[index] = time_region(
                step,
                device=device,
                warmup=bc["warmup"],
                repeats=bc["repeats"],
                min_region_s=bc["min_region_s"],
            )
        except (HsitpError, torch.cuda.OutOfMemoryError) as exc:
            skipped.append({**dataclasses.asdict(pt), "reason": f"{type(exc).__name__}: {exc}"})
            log.warning("shard: skipped %s: %s", pt, exc)
            continue
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        pred = predict(pt, hw, head_padding=pad)
        out["flops"][index] = op_work(pt, head_padding=pad)[0]
        out["bytes"][index] = float(sum(r.nbytes for _, recs in traced for r in recs))
        out["t_comm_trace"][index] = modelled_comm_time(traced, hw)
        out["t_comm_refined"][index] = pred.t_comm
        out["t_comp_refined"][index] = pred.t_comp
    ds = _dataset(bc, sizes, dname, times, out, hw, device, skipped)
    ds.attrs["attention_kernel"] = bench_kernel(
        config, device.type
    )  # the aggregation ops' single-query kernel
    return ds


def _dataset(
    bc: Mapping[str, Any],
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
    coords = {
        "op": list(bc["ops"]),
        "P": list(sizes),
        "N": list(bc["N"]),
        "D": list(bc["D"]),
        "L": list(bc["L"]),
    }
    ds = xr.Dataset(
        {
            "time": (
                (*POINT_DIMS, "rep"),
                times,
                {"units": "s", "long_name": "measured: rank 0's shard, fwd+bwd, collectives as no-ops"},
            ),
            "t_comp_measured": (POINT_DIMS, med, {"units": "s", "long_name": "measured (median)"}),
            "t_comp_iqr": (POINT_DIMS, iqr, {"units": "s", "long_name": "inter-quartile range over repeats"}),
            "flops": (
                POINT_DIMS,
                out["flops"],
                {"units": "FLOP", "long_name": "modelled (refined cost model)"},
            ),
            "achieved_flops": (
                POINT_DIMS,
                out["flops"] / med,
                {"units": "FLOP/s", "long_name": "modelled FLOPs / measured time"},
            ),
            "bytes_moved": (
                POINT_DIMS,
                out["bytes"],
                {"units": "B", "long_name": "traced full-tensor bytes"},
            ),
            "t_comm_modelled": (
                POINT_DIMS,
                out["t_comm_trace"],
                {"units": "s", "long_name": "modelled: the preset's ring model on the traced collectives"},
            ),
            "t_comm_refined": (
                POINT_DIMS,
                out["t_comm_refined"],
                {"units": "s", "long_name": "modelled: refined cost model's collectives on the preset"},
            ),
            "t_comp_refined": (
                POINT_DIMS,
                out["t_comp_refined"],
                {"units": "s", "long_name": "modelled: refined cost model's compute time on the preset"},
            ),
        },
        coords={**coords, "rep": np.arange(times.shape[-1])},
    )
    ds["ccr_half_measured"] = (ds["t_comm_modelled"] / ds["t_comp_measured"]).assign_attrs(
        units="1", long_name="half-measured CCR: modelled communication / measured compute"
    )
    ds["ccr_refined"] = (ds["t_comm_refined"] / ds["t_comp_refined"]).assign_attrs(
        units="1", long_name="modelled CCR: refined cost model on the preset"
    )
    describe(ds, {**POINT_COORD_ATTRS, "rep": {"units": "1", "long_name": "repeat index"}})

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
        "mesh_2d": {str(p): list(mesh_2d(p)) for p in sizes},
        "skipped_points": skipped,
        "note": "no communication was performed; only compute is measured",
    }
    return ds


def write_shard(out: str | Path, *, config: Mapping[str, Any], hardware: str) -> Path:
    ds = run_shard(config, hardware=hardware)
    return write_netcdf(
        ds, out, kind=BENCH_SHARD.kind, prov=provenance(config=config, extra={"hardware": hardware})
    )
