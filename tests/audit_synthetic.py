"""Synthetic bench files (not measurements) for the audit tests and the run-output walk: the variables the audit
reads, shaped as `hsitp bench merge` and `hsitp bench compare` write them, with made-up numbers."""

from __future__ import annotations

from pathlib import Path

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
