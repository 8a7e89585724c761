"""Compact, comparable-by-value summaries of pipeline outputs too large to commit whole (results/reference/)."""

from __future__ import annotations

import xarray as xr

# attrs that change on every run or name the machine: never compared
VOLATILE_ATTRS = ("provenance", "history")


def dataset_summary(ds: xr.Dataset) -> xr.Dataset:
    """A prepared scene reduced to what decides its value: labels, partition, normalisation and per-band moments of
    the cube (float64), plus every attribute except the volatile ones. ~100 kB instead of 17 MB for Indian Pines."""
    cube = ds["cube"].astype("float64")
    out = xr.Dataset(
        {
            "labels": ds["labels"],
            "partition": ds["partition"],
            "norm_low": ds["norm_low"],
            "norm_high": ds["norm_high"],
            "cube_mean": cube.mean(("y", "x")),
            "cube_std": cube.std(("y", "x")),
            "cube_min": cube.min(("y", "x")),
            "cube_max": cube.max(("y", "x")),
        }
    )
    out.attrs = {k: v for k, v in ds.attrs.items() if k not in VOLATILE_ATTRS}
    return out


def strip_volatile(ds: xr.Dataset) -> xr.Dataset:
    ds = ds.copy()
    ds.attrs = {k: v for k, v in ds.attrs.items() if k not in VOLATILE_ATTRS}
    return ds
