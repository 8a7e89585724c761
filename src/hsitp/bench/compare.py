"""``model_vs_measured.nc``: measured CCR beside the paper's stated model and the calibrated refined model.

Three predictions per point, all on ``measured:calibration.nc`` hardware (the same device the timings come from):

* ``stated``: the paper's formula (§3.2/§3.3/§6.3/§8.2) with F = the median achieved rate and β = the fitted
  all-gather bandwidth (no α: the paper has none);
* ``refined``: :func:`hsitp.cost.refined.op_cost` (default switches, no overlap) with the calibration's per-op
  compute model (overhead + FLOP term + memory-traffic term), per-collective α, β and sequence factor;
* ``traced``: a diagnostic, not a model: the calibrated ring model (:func:`hsitp.cost.refined.collectives_time`)
  applied to the collectives the layer actually issued (from the trace) over the calibrated compute time. Where it is right and ``refined`` is not, the refined
  model's list of collectives differs from the implementation's; where both miss, the ring model or α, β do.

Relative error = (predicted − measured) / measured, per point; each point is flagged held out (never seen by the
calibration) or fitted. P = 1 points have no communication, so their CCR error is undefined (NaN).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.calibrate import fit_points
from hsitp.bench.predict import predict
from hsitp.bench.results import (
    POINT_COORD_ATTRS,
    POINT_DIMS,
    head_padding,
    point_at,
    read_input,
    trace_records,
)
from hsitp.contracts import CALIBRATION, MICROBENCH, MODEL_VS_MEASURED
from hsitp.cost.hardware import hardware_from_calibration
from hsitp.cost.refined import collectives_time
from hsitp.io import describe, provenance, write_netcdf
from hsitp.names import COST_MODELS
from hsitp.settings import BenchSettings

log = logging.getLogger(__name__)
TITLE = "hsitp: measured CCR per layer vs the paper's stated and the calibrated refined cost model"
MODELS = (*COST_MODELS, "traced")  # traced: a diagnostic beside the two cost models (docstring)
FLAG_NOT_MEASURED, FLAG_FITTED, FLAG_HELD_OUT = -1, 0, 1


def compare(mb: xr.Dataset, cal: xr.Dataset, calibration_path: str | Path) -> xr.Dataset:
    """Build the comparison on the grid of ``mb`` (NaN where a point was not measured)."""
    hw = hardware_from_calibration(calibration_path)
    dtype = cal.attrs["dtype"]
    mbd = mb.sel(dtype=[dtype])
    pred, flag = _predictions(mb, mbd, cal, hw)
    measured = {
        "ccr_measured": mbd["ccr_measured"],
        "ccr_exposed": mbd["ccr_exposed"],
        "ccr_measured_iqr": mbd["ccr_measured_iqr"],
        "t_comp_measured": mbd["time_mean"].sel(mode="compute", drop=True),
        "t_comm_measured": mbd["time_mean"].sel(mode="comm", drop=True),
    }
    predicted = {name: (POINT_DIMS, values) for name, values in pred.items()}
    traced = {"n_collectives_traced": mbd["n_collectives"], "bytes_traced": mbd["bytes_moved"]}
    ds = xr.Dataset({**measured, **predicted, **traced}, coords={d: mbd[d].values for d in POINT_DIMS})
    describe(ds, PREDICTION_ATTRS)
    for m in MODELS:
        with np.errstate(divide="ignore", invalid="ignore"):
            err = (ds[f"ccr_{m}"] - ds["ccr_measured"]) / ds["ccr_measured"]
        ds[f"rel_err_{m}"] = err.where(ds["ccr_measured"] > 0).assign_attrs(
            units="1", long_name=f"relative error of ccr_{m}: (ccr_{m} - measured) / measured"
        )
    ds["held_out"] = (POINT_DIMS, flag)
    ds["held_out"].attrs = {
        "flag_values": [FLAG_NOT_MEASURED, FLAG_FITTED, FLAG_HELD_OUT],
        "flag_meanings": "not_measured fitted held_out",
        "long_name": "was this point held out of the calibration fit?",
    }
    ds.attrs = {
        "title": TITLE,
        "device": mb.attrs.get("device", "unknown"),
        "hardware": hw.description,
        "dtype": dtype,
        "summary": summary(ds),
        "summary_by_op": {str(op): summary(ds.sel(op=[op])) for op in ds["op"].values},
        "note": "measured = timings on the device above; stated/refined = cost models with the calibration "
        "fitted on the 'fitted' points of the same device; traced = diagnostic",
    }
    return ds


def _predictions(
    mb: xr.Dataset, mbd: xr.Dataset, cal: xr.Dataset, hw: Any
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each model's prediction at every measured point of ``mbd`` (``mb`` at the calibration's dtype) that the
    calibration knows, and the held-out flag of every point."""
    dtype, pad = cal.attrs["dtype"], head_padding(mb)
    held = {(r["op"], r["P"], r["N"], r["D"], r["L"]): bool(r["held_out"]) for r in fit_points(cal)["ops"]}
    shape = tuple(mbd.sizes[d] for d in POINT_DIMS)
    extra = ("t_comp_model", "t_comm_refined", "t_comm_traced", "n_collectives_refined", "bytes_refined")
    pred = {name: np.full(shape, np.nan) for name in (*(f"ccr_{m}" for m in MODELS), *extra)}
    flag = np.full(shape, FLAG_NOT_MEASURED, dtype=np.int8)
    comp = mbd["time_mean"].sel(mode="compute", drop=True)
    for index in np.ndindex(*shape):
        idx = {d: mbd[d].values[i] for d, i in zip(POINT_DIMS, index, strict=True)}
        if not np.isfinite(float(comp.sel(idx))):
            continue
        op, p, n, d, bands = (idx[k] for k in ("op", "P", "N", "D", "L"))
        key = (str(op), int(p), int(n), int(d), int(bands))
        if key not in held:
            continue  # measured but not in the calibration's points (another dtype)
        flag[index] = FLAG_HELD_OUT if held[key] else FLAG_FITTED
        pr = predict(point_at(mb, op=op, P=p, N=n, D=d, L=bands, dtype=dtype), hw, head_padding=pad)
        # the ring model on the traced collectives, times the op's sequence factor (as the refined model applies it)
        t_traced = collectives_time(trace_records(mbd.sel(idx)), hw) * hw.sequence_factor_for(str(op))
        values = (pr.ccr_stated, pr.ccr_refined, t_traced / pr.t_comp, pr.t_comp, pr.t_comm, t_traced)
        for name, value in zip(pred, (*values, pr.n_collectives, pr.bytes), strict=True):
            pred[name][index] = value
    return pred, flag


PREDICTION_ATTRS: dict[str, dict[str, str]] = {
    **POINT_COORD_ATTRS,
    "ccr_measured": {"units": "1", "long_name": "measured: collective-only / compute-only time"},
    "ccr_exposed": {"units": "1", "long_name": "measured: (full - compute-only) / compute-only"},
    "ccr_measured_iqr": {
        "units": "1",
        "long_name": "measured: inter-quartile range over repeats of the per-repeat CCR",
    },
    "t_comp_measured": {"units": "s", "long_name": "measured compute-only time (mean over repeats)"},
    "t_comm_measured": {"units": "s", "long_name": "measured collective-only time (mean over repeats)"},
    "n_collectives_traced": {"units": "1", "long_name": "collective calls the layer issued"},
    "bytes_traced": {"units": "B", "long_name": "full-tensor bytes the layer moved"},
    "ccr_stated": {
        "units": "1",
        "long_name": "paper's stated model with calibrated F (median over ops) and beta",
    },
    "ccr_refined": {
        "units": "1",
        "long_name": "refined cost model with the calibration (alpha, beta, F per op)",
    },
    "ccr_traced": {"units": "1", "long_name": "diagnostic: calibrated ring model on the traced collectives"},
    "t_comp_model": {"units": "s", "long_name": "calibrated compute model's time of the op (fwd+bwd)"},
    "t_comm_refined": {"units": "s", "long_name": "refined model's collective time with the calibration"},
    "t_comm_traced": {
        "units": "s",
        "long_name": "calibrated ring model's time of the traced collectives, times the sequence factor",
    },
    "n_collectives_refined": {"units": "1", "long_name": "collective calls in the refined model"},
    "bytes_refined": {"units": "B", "long_name": "full-tensor bytes in the refined model"},
}


def summary(ds: xr.Dataset) -> dict[str, dict[str, float]]:
    """Median |relative error| of each model over held-out and fitted points, and their counts: points with P >= 2
    that communicate (measured CCR > 0; the relative error of a layer without collectives is undefined)."""
    out: dict[str, dict[str, float]] = {}
    for label, flag in (("held_out", FLAG_HELD_OUT), ("fitted", FLAG_FITTED)):
        sel = (ds["held_out"] == flag) & (ds["P"] > 1) & (ds["ccr_measured"] > 0)
        row: dict[str, float] = {"n_points": int(sel.sum())}
        for m in MODELS:
            err = np.abs(ds[f"rel_err_{m}"].where(sel).values)
            err = err[np.isfinite(err)]
            row[f"median_abs_rel_err_{m}"] = float(np.median(err)) if err.size else float("nan")
        out[label] = row
    return out


def run_compare(
    microbench: str | Path, calibration: str | Path, out: str | Path, settings: BenchSettings
) -> Path:
    mb = read_input(microbench, MICROBENCH)
    cal = read_input(calibration, CALIBRATION)
    log.info(
        "read %s and %s (calibrated %s on %s)",
        microbench,
        calibration,
        cal.attrs["dtype"],
        cal.attrs["device"],
    )
    ds = compare(mb, cal, calibration)
    log_summary(ds)
    prov = provenance(config=settings.config, inputs={"microbench": microbench, "calibration": calibration})
    path = write_netcdf(ds, out, kind=MODEL_VS_MEASURED.kind, prov=prov)
    log.info("wrote %s", path)
    return path


def log_summary(ds: xr.Dataset) -> None:
    """Log the median |relative error| of each model on held-out and fitted points, overall and per op."""

    def errors(row: Mapping[str, float]) -> str:
        return ", ".join(f"{m} {100 * row[f'median_abs_rel_err_{m}']:.1f} %" for m in MODELS)

    for label, row in ds.attrs["summary"].items():
        log.info(
            "%s points (%d with P >= 2 and CCR > 0): median |rel. error| of the CCR: %s",
            label,
            row["n_points"],
            errors(row),
        )
    for op, by in ds.attrs["summary_by_op"].items():
        row = by["held_out"]
        if row["n_points"]:
            log.info("  %s held out (%d): %s", op, row["n_points"], errors(row))
