"""Schema of the calibration file (``results/<run>/bench/calibration.nc``): its builder, validator and reader.

:func:`hsitp.cost.hardware.get_hardware` turns a file read here into ``measured:PATH`` hardware; this module knows
nothing of :class:`~hsitp.cost.hardware.Hardware`, so the dependency runs one way (hardware -> calibration).

The microbenchmark stage fits, per collective, t = α + factor(P)·bytes/β (factor: all_reduce 2(P−1)/P,
all_gather and reduce_scatter (P−1)/P; bytes = the full unsharded tensor) and, per op, an achieved FLOP rate
(FLOPs counted by :func:`hsitp.cost.refined.op_cost` with default switches, divided by measured compute time).
It should build the dataset with :func:`calibration_dataset` (which validates it) and write it with
``hsitp.io.write_netcdf(ds, path, kind="calibration", prov=...)``.

Optional refinements beyond the required fields (docs/contracts.md), per op (all four together, or none):

* per op, ``compute_overhead`` [s], ``compute_rate`` [FLOP/s] and ``mem_bandwidth`` [B/s]: the compute time
  model t = overhead + FLOPs / compute_rate + traffic bytes / mem_bandwidth (traffic: the refined model's
  operand-and-result estimate), which follows ops whose time is not FLOP-proportional (tokenisation, elementwise
  work); ``inf`` means that term was fitted to zero;
* ``sequence_factor``: the op's collectives, issued back to back, take this multiple of their ring-model time
  with the α, β fitted on collectives timed alone.

``achieved_flops`` stays the plain FLOPs / time rate (the stated model's F and the fallback).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hsitp.errors import HsitpError
from hsitp.names import COLLECTIVES

if TYPE_CHECKING:  # xarray is imported where a dataset is built or read: `hsitp --help` stays light
    import xarray as xr

CALIBRATION_KIND = "calibration"
MEASURED_PREFIX = "measured:"  # a hardware name "measured:PATH" names a calibration file
COMPUTE_MODEL_VARS = ("compute_overhead", "compute_rate", "mem_bandwidth", "sequence_factor")
REQUIRED_ATTRS = ("device", "backend", "dtype", "world_sizes", "fit_points")
BACKENDS = ("gloo", "nccl")
CALIBRATION_ATTRS: dict[str, dict[str, str]] = {
    "alpha": {"units": "s", "long_name": "per-call overhead"},
    "beta": {"units": "B/s", "long_name": "ring bandwidth"},
    "achieved_flops": {"units": "FLOP/s", "long_name": "achieved compute rate"},
    "alpha_stderr": {"units": "s", "long_name": "standard error of alpha"},
    "beta_stderr": {"units": "B/s", "long_name": "standard error of beta"},
    "n_points": {"units": "1", "long_name": "points in the fit"},
    "compute_overhead": {"units": "s", "long_name": "fixed time per call of the op"},
    "compute_rate": {"units": "FLOP/s", "long_name": "rate of the FLOP term (inf: term fitted to zero)"},
    "mem_bandwidth": {
        "units": "B/s",
        "long_name": "rate of the memory-traffic term (inf: term fitted to zero)",
    },
    "sequence_factor": {
        "units": "1",
        "long_name": "time of the op's collectives back to back / their ring-model time timed alone",
    },
    "collective": {"long_name": "collective (ring model per collective)"},
    "op": {"long_name": "parallel layer (hsitp.names.OP_NAMES)"},
}


class CalibrationError(HsitpError, ValueError):
    """A calibration that cannot be made or read: a calibration file that does not follow the schema (the message
    names the file and the field), or microbenchmarks too thin to fit one (raised by :mod:`hsitp.bench.calibrate`)."""


def calibration_dataset(
    *,
    alpha: Mapping[str, float],
    beta: Mapping[str, float],
    achieved_flops: Mapping[str, float],
    device: str,
    backend: str,
    dtype: str,
    world_sizes: Sequence[int],
    fit_points: Any,
    alpha_stderr: Mapping[str, float] | None = None,
    beta_stderr: Mapping[str, float] | None = None,
    n_points: Mapping[str, int] | None = None,
    compute_model: Mapping[str, Mapping[str, float]] | None = None,
    sequence_factor: Mapping[str, float] | None = None,
) -> xr.Dataset:
    """Build a schema-valid calibration dataset (α [s], β [B/s] per collective; achieved FLOP/s per op).

    ``compute_model``: {"compute_overhead" | "compute_rate" | "mem_bandwidth": {op: value}} and
    ``sequence_factor``: {op: value}, for every op of ``achieved_flops`` (module docstring). Both optional, given
    together.
    """
    import xarray as xr

    from hsitp.io import describe

    colls = [c for c in COLLECTIVES if c in alpha or c in beta]
    ops = list(achieved_flops)
    data: dict[str, Any] = {
        "alpha": ("collective", [float(alpha[c]) for c in colls]),
        "beta": ("collective", [float(beta[c]) for c in colls]),
        "achieved_flops": ("op", [float(achieved_flops[o]) for o in ops]),
    }
    for name, values in (("alpha_stderr", alpha_stderr), ("beta_stderr", beta_stderr)):
        if values is not None:
            data[name] = ("collective", [float(values.get(c, np.nan)) for c in colls])
    if n_points is not None:
        data["n_points"] = ("collective", [int(n_points.get(c, 0)) for c in colls])
    for name in COMPUTE_MODEL_VARS[:3] if compute_model is not None else ():
        data[name] = ("op", [float(compute_model[name][o]) for o in ops])
    if sequence_factor is not None:
        data["sequence_factor"] = ("op", [float(sequence_factor[o]) for o in ops])
    ds = xr.Dataset(
        data,
        coords={"collective": colls, "op": ops},
        attrs={
            "device": device,
            "backend": backend,
            "dtype": dtype,
            "world_sizes": json.dumps([int(p) for p in world_sizes]),
            "fit_points": json.dumps(fit_points, default=str),
            "model": "t = alpha + factor(P) * bytes / beta; all_reduce 2(P-1)/P, all_gather/reduce_scatter (P-1)/P",
        },
    )
    describe(ds, CALIBRATION_ATTRS)
    validate_calibration(ds, "<in memory>")
    return ds


def validate_calibration(ds: xr.Dataset, where: str | Path) -> None:
    """Raise CalibrationError naming the file and field if ``ds`` does not follow the calibration schema."""
    problems: list[str] = []
    for dim in ("collective", "op"):
        if dim not in ds.coords:
            problems.append(f"missing coordinate {dim!r}")
    for var, dim in (("alpha", "collective"), ("beta", "collective"), ("achieved_flops", "op")):
        if var not in ds:
            problems.append(f"missing variable {var!r} (dims ({dim},))")
        elif ds[var].dims != (dim,):
            problems.append(f"{var} has dims {ds[var].dims}, expected ({dim},)")
    if "collective" in ds.coords:
        unknown = sorted(set(map(str, ds["collective"].values)) - set(COLLECTIVES))
        if unknown:
            problems.append(f"unknown collectives {unknown}; allowed {list(COLLECTIVES)}")
    if "beta" in ds and not bool(np.all(np.asarray(ds["beta"]) > 0)):
        problems.append("beta must be > 0 for every collective")
    if "alpha" in ds and not bool(np.all(np.asarray(ds["alpha"]) >= 0)):
        problems.append("alpha must be >= 0 for every collective")
    if "achieved_flops" in ds and not bool(np.all(np.asarray(ds["achieved_flops"]) > 0)):
        problems.append("achieved_flops must be > 0 for every op")
    present = [v for v in COMPUTE_MODEL_VARS if v in ds]
    if present and len(present) < len(COMPUTE_MODEL_VARS):
        problems.append(f"has {present} but not all of {list(COMPUTE_MODEL_VARS)} (give all or none)")
    for var in COMPUTE_MODEL_VARS:
        if var in ds:
            values = np.asarray(ds[var], dtype=float)
            if ds[var].dims != ("op",):
                problems.append(f"{var} has dims {ds[var].dims}, expected ('op',)")
            elif var == "compute_overhead" and not bool(np.all(np.isfinite(values) & (values >= 0))):
                problems.append("compute_overhead must be finite and >= 0 for every op")
            elif var == "sequence_factor" and not bool(np.all(np.isfinite(values) & (values > 0))):
                problems.append("sequence_factor must be finite and > 0 for every op")
            elif var in ("compute_rate", "mem_bandwidth") and not bool(np.all(values > 0)):
                problems.append(f"{var} must be > 0 (inf allowed) for every op")
    for attr in REQUIRED_ATTRS:
        if attr not in ds.attrs:
            problems.append(f"missing attribute {attr!r}")
    if ds.attrs.get("backend") not in (None, *BACKENDS):
        problems.append(f"backend {ds.attrs['backend']!r} is not one of {BACKENDS}")
    if "world_sizes" in ds.attrs:
        try:
            sizes = json.loads(ds.attrs["world_sizes"])
            if not sizes or not all(isinstance(p, int) and p >= 1 for p in sizes):
                raise ValueError
        except (ValueError, TypeError):
            problems.append(
                f"world_sizes must be a JSON list of positive ints, got {ds.attrs['world_sizes']!r}"
            )
    if problems:
        raise CalibrationError(
            f"{where}: not a valid calibration file:\n  "
            + "\n  ".join(problems)
            + "\n(schema: hsitp.cost.calibration; the microbenchmark stage writes it, e.g. results/paper/bench/calibration.nc)"
        )


def load_calibration(path: str | Path) -> xr.Dataset:
    """Read and validate a calibration file written by the microbenchmark stage."""
    from hsitp.io import ResultFileError, read_netcdf

    path = Path(path)
    if not path.exists():
        raise CalibrationError(
            f"{MEASURED_PREFIX}{path}: no such calibration file; run the microbenchmark stage first "
            "(snakemake results/RUN/bench/calibration.nc) or pick a preset"
        )
    try:
        ds = read_netcdf(path, kind=CALIBRATION_KIND)
    except ResultFileError as exc:
        raise CalibrationError(str(exc)) from exc
    validate_calibration(ds, path)
    return ds
