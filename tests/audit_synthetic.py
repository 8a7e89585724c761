"""Synthetic bench and probe files (not measurements) for the audit tests and the run-output walk: the variables the
audit reads, shaped as `hsitp bench merge`, `hsitp bench compare` and the probe stage write them, with made-up
numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from hsitp.io import provenance, write_netcdf


def labelled(ds: xr.Dataset) -> xr.Dataset:
    """Every variable and coordinate named and, where numeric, in units (times s, the rest 1), as io requires."""
    for name, var in ds.variables.items():
        var.attrs["long_name"] = str(name)
        if var.dtype.kind in "fiu":
            var.attrs["units"] = "s" if "time" in str(name) else "1"
    return ds


def bench_files(run: Path, zero_at: dict | None = None) -> None:
    """Synthetic bench files shaped as the pipeline writes them, with the zeros a real run has: comm-only time and
    measured CCR are 0 where nothing is communicated (P = 1, op = layernorm_replicated). ``zero_at`` plants one
    more zero in time_median (full mode) and ccr_measured."""
    ops, Ps, modes = ["mlp", "layernorm_replicated"], [1, 2], ["full", "compute", "comm"]
    dims = ("op", "P", "N", "D", "L", "dtype")
    coords = {"op": ops, "P": Ps, "N": [144], "D": [64], "L": [8], "dtype": ["float32"]}
    t = xr.DataArray(1e-3, coords=coords, dims=dims).expand_dims(mode=modes).transpose(*dims, "mode").copy()
    silent = (t["P"] == 1) | (t["op"] == "layernorm_replicated")
    t = t.where(~((t["mode"] == "comm") & silent), 0.0)
    ccr = xr.DataArray(0.5, coords=coords, dims=dims).where(~silent, 0.0)
    if zero_at:
        t.loc[{**zero_at, "mode": "full"}] = 0.0
        ccr.loc[zero_at] = 0.0
    coll = xr.DataArray([[[1e-4, 2e-4]]], dims=("collective", "P", "nbytes"),
                        coords={"collective": ["all_reduce"], "P": [2], "nbytes": [4096, 65536]})  # fmt: skip
    mb = labelled(xr.Dataset({"time_median": t, "ccr_measured": ccr, "coll_time_median": coll}))
    title = "synthetic bench file for the audit tests"
    write_netcdf(mb, run / "bench/microbench.nc", kind="microbench", prov=provenance(), title=title)
    mvm = xr.Dataset(
        {
            "ccr_measured": ccr.sel(dtype="float32", drop=True),
            "ccr_refined": ccr.sel(dtype="float32", drop=True) * 1.1,
            "held_out": xr.zeros_like(ccr.sel(dtype="float32", drop=True)),
        }
    )
    write_netcdf(labelled(mvm), run / "bench/model_vs_measured.nc", kind="model_vs_measured", prov=provenance(),
                 title=title)  # fmt: skip


PLANS = ["dense", "tp", "dchag_l", "dchag_c", "token"]
PROBE_PS = [1, 2, 4, 8]  # P = 4 is labelled oversubscribed: its timings decide nothing
PROBE_ATTRS = {
    "probe": json.dumps(
        {"dim": 64, "depth": 2, "heads": 4, "L": [200], "N": [324], "batch": 1, "attention_kernel": "exact"}
    ),
    "attention_kernel": "exact",
    "dtype": "float32",
    "title": "synthetic probe file for the audit tests",
}


def _per_p(values: list, name: str) -> xr.DataArray:
    return xr.DataArray(values, dims=("P",), coords={"P": PROBE_PS}, name=name)


def probe_files(run: Path, *, memory: bool = True, throughput: bool = True, estimate: bool = True) -> None:
    """Synthetic probe files (memory.nc, throughput.nc, estimate.nc) shaped as the probe stage writes them, with
    made-up numbers: every plan at P = 2, 4, 8 (dense at P = 1), g = 2, 4 and 8, P = 4 labelled oversubscribed."""
    rng = np.random.default_rng(0)
    grid = {"plan": PLANS, "P": PROBE_PS, "g": [2, 4, 8], "L": [200], "N": [324], "checkpointing": ["none"]}
    ran = np.zeros([len(v) for v in grid.values()], dtype=bool)
    for i, plan in enumerate(PLANS):
        for j, P in enumerate(PROBE_PS):
            ran[i, j] = (plan == "dense") == (P == 1)
    ranks = np.arange(8)
    parts = ["tokenisation", "aggregation", "blocks", "head"]
    kinds = ["parameters", "gradients", "optimizer", "activations", "transient"]
    shape = [*ran.shape, len(parts), len(kinds), len(ranks)]
    mem = rng.uniform(1e6, 5e6, size=shape)
    in_group = np.array(PROBE_PS)[None, :, None, None, None, None, None, None, None] > ranks
    mem = np.where(ran[..., None, None, None] & in_group, mem, 0.0)
    peak = np.where(ran[..., None] & in_group[..., 0, 0, :], mem.sum((-3, -2)) * 1.5, np.nan)
    dims = list(grid)
    if memory:
        ds = xr.Dataset(
            {
                "memory": ([*dims, "part", "kind", "rank"], mem),
                "peak_allocated": ([*dims, "rank"], peak),
                "device": _per_p(["synthetic CPU"] * 4, "device"),
                "oversubscribed": _per_p([0, 0, 1, 0], "oversubscribed"),
            },
            coords={**grid, "part": parts, "kind": kinds, "rank": ranks},
            attrs=PROBE_ATTRS,
        )
        write_netcdf(labelled(ds), run / "probe/memory.nc", kind="probe_memory", prov=provenance())
    if throughput:
        med = np.where(ran, rng.uniform(0.5, 2.0, size=ran.shape), np.nan)
        med[PLANS.index("tp")] = np.where(ran[PLANS.index("tp")], 1.0, np.nan)
        tparts = ["tokenisation", "aggregation", "blocks", "head", "other"]
        tshape = [*ran.shape, len(tparts), len(ranks)]
        active = ran[..., None, None] & in_group[..., 0, 0, :][..., None, :]
        coll = np.where(active, rng.uniform(1e-3, 5e-3, size=tshape), 0.0)
        comp = np.where(active, rng.uniform(1e-3, 5e-3, size=tshape), 0.0)
        notes = ["", "", "oversubscribed: 4 ranks on 2 cores", ""]
        ds = xr.Dataset(
            {
                "ratio_vs_tp_median": (dims, med),
                "ratio_vs_tp_min": (dims, med * 0.97),
                "ratio_vs_tp_max": (dims, med * 1.03),
                "time_collectives": ([*dims, "time_part", "rank"], coll),
                "time_compute": ([*dims, "time_part", "rank"], comp),
                "device": _per_p(["synthetic CPU"] * 4, "device"),
                "oversubscribed": _per_p([0, 0, 1, 0], "oversubscribed"),
                "oversubscribed_note": _per_p(notes, "oversubscribed_note"),
            },
            coords={**grid, "time_part": tparts, "rank": ranks},
            attrs=PROBE_ATTRS,
        )
        write_netcdf(labelled(ds), run / "probe/throughput.nc", kind="probe_throughput", prov=provenance())
    if estimate:
        configs = [
            (plan, P, g) for plan in ("tp", "dchag_l", "dchag_c", "token") for P in (2, 4, 8) for g in (4, 8)
        ]
        n = len(configs)
        ds = xr.Dataset(
            {
                "peak_allocated": ("config", rng.uniform(1e7, 9e7, size=n)),
                "plan": ("config", [c[0] for c in configs]),
                "P": ("config", [c[1] for c in configs]),
                "g": ("config", [c[2] for c in configs]),
                "L": ("config", [200] * n),
                "N": ("config", [324] * n),
                "D": ("config", [256] * n),
                "depth": ("config", [12] * n),
                "batch": ("config", [1] * n),
                "dtype": ("config", ["bfloat16"] * n),
                "checkpointing": ("config", ["none"] * n),
            },
            coords={"config": [f"grid/{p}/P{P}/g{g}" for p, P, g in configs]},
            attrs={
                "estimated": "synthetic fake-tensor estimate",
                "title": "synthetic estimate for the audit tests",
            },
        )
        write_netcdf(labelled(ds), run / "probe/estimate.nc", kind="probe_estimate", prov=provenance())


def measured_bench_files(run: Path) -> None:
    """Synthetic microbench.nc and model_vs_measured.nc for the measured sub-checks: the attention splits and the
    sharded LayerNorm at P = 1, 2, 8 on N = 324, 5776 and D = 256, 1024 (ρ = D/N below and above 1), IQRs of 2 %
    and three independent launches within 1 % of each other, so every point decides."""
    rng = np.random.default_rng(1)
    ops = ["attn_channel", "attn_token", "layernorm_replicated", "layernorm_sharded"]
    coords = {
        "op": ops,
        "P": [1, 2, 8],
        "N": [324, 5776],
        "D": [256, 1024],
        "L": [200],
        "dtype": ["bfloat16"],
    }
    dims = tuple(coords)
    shape = [len(v) for v in coords.values()]
    ccr = rng.uniform(0.2, 5.0, size=shape)
    silent = (np.array(coords["P"]) == 1)[None, :, None, None, None, None] | (
        np.array(ops) == "layernorm_replicated"
    )[:, None, None, None, None, None]
    ccr = np.where(silent, 0.0, ccr)
    ds = xr.Dataset(
        {
            "ccr_measured": (dims, ccr),
            "ccr_measured_iqr": (dims, ccr * 0.02),
            "ccr_measured_launch": (
                ("launch", *dims),
                ccr[None] * np.array([0.99, 1.0, 1.01]).reshape(3, *[1] * 6),
            ),
            "n_collectives": (dims, np.where(silent, 0.0, 2.0) * np.ones(shape)),
            "oversubscribed": (("P",), [0, 0, 0]),
        },
        coords={**coords, "launch": [0, 1, 2]},
        attrs={
            "device": "NVIDIA H200 (synthetic)",  # a GPU: every bench sub-check decides, gpu_only ones too
            "launches": 3,
            "oversubscribed_P": "[]",
            "layer_shape": json.dumps({"batch": 1}),
            "title": "synthetic bench file for the audit tests",
        },
    )
    write_netcdf(labelled(ds), run / "bench/microbench.nc", kind="microbench", prov=provenance())
    mvm = xr.Dataset({"ccr_stated": (dims, rng.uniform(0.2, 5.0, size=shape))}, coords=coords)
    write_netcdf(labelled(mvm), run / "bench/model_vs_measured.nc", kind="model_vs_measured", prov=provenance(),
                 title="synthetic bench file for the audit tests")  # fmt: skip
