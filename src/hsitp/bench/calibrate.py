"""``microbench.nc`` -> ``calibration.nc`` (its contract: :data:`hsitp.contracts.CALIBRATION`, built here by
:func:`calibration_dataset`; the cost model reads it as ``measured:PATH`` hardware).

alpha and beta per collective come from the collective sweep, achieved F per op from the compute-only timings
(every time is a point's mean over repeats, ``time_mean`` / ``coll_time_mean``); both are fitted on a training subset
only. Beyond the required fields, the same
training points give each op's compute model (per-call overhead + FLOP term + memory-traffic term; FLOPs and
traffic are the refined cost model's, computed here by :func:`hsitp.bench.predict.work_split`) and its sequence
factor: the median ratio of its training points' replayed collectives to their ring-model time with the sweep's
alpha and beta (collectives issued back to back run slower than the same collectives timed alone).
``tokenize`` (timed alone) is fitted first; each aggregation op is then fitted on its points' time less the
tokeniser's modelled time, on its own work, so the planner can price tokenisation and aggregation apart, as the
cost model splits them. The held-out points are listed in the ``fit_points`` attribute so ``model_vs_measured.nc``
can say, for each point, whether the calibration saw it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

import numpy as np
import xarray as xr

from hsitp.bench.fit import (
    AlphaBetaFit,
    FitError,
    achieved_flops,
    fit_alpha_beta,
    fit_compute,
    holdout_mask,
)
from hsitp.bench.predict import TOKENIZE, work_split
from hsitp.bench.results import head_padding, point_at, read_input, trace_records
from hsitp.contracts import (
    CALIBRATION,
    COMPUTE_MODEL_VARS,
    MICROBENCH,
    CalibrationError,
    validate_calibration,
)
from hsitp.cost.refined import collectives_time
from hsitp.io import describe, provenance, write_netcdf
from hsitp.names import COLLECTIVES
from hsitp.settings import BenchSettings

log = logging.getLogger(__name__)


def _rate(value: float, unit: str) -> str:
    """A rate in G<unit>/s, or 'not fitted' for a term fitted to zero (inf)."""
    return f"{value / 1e9:.3g} G{unit}/s" if np.isfinite(value) else "not fitted"


@dataclass(frozen=True)
class FittedLinks:
    """The sweep's fitted alpha and beta per collective as :func:`hsitp.cost.refined.collectives_time` takes them:
    one bandwidth level (every measured group lies inside this one machine, ``devices_per_node`` ranks)."""

    fits: Mapping[str, AlphaBetaFit]
    devices_per_node: int

    def link(self, collective: str, level: str) -> tuple[float, float]:
        fit = self.fits[collective]
        return fit.alpha, fit.beta


class CollectivePoint(TypedDict):
    """One measured (collective, P, size) of the sweep, as the calibration's ``fit_points`` lists it."""

    collective: str
    P: int
    nbytes: int
    t_measured: float  # [s] mean over repeats
    held_out: NotRequired[bool]  # set once the hold-out is drawn
    t_predicted: NotRequired[float]  # [s] set by the collective's fit


class OpPoint(TypedDict):
    """One measured op point, as the calibration's ``fit_points`` lists it: its time (compute-only, and with its
    collectives) and the refined model's work, the tokeniser's share of it apart."""

    op: str
    P: int
    N: int
    D: int
    L: int
    dtype: str
    t_compute: float  # [s]
    t_comm: float  # [s]
    flops: float
    traffic_bytes: float
    tokenize_flops: float  # the tokeniser's share of an aggregation point (else 0)
    tokenize_traffic_bytes: float
    held_out: NotRequired[bool]  # set once the hold-out is drawn
    t_compute_predicted: NotRequired[float]  # [s] set by the op's compute fit


class OwnWork(NamedTuple):
    """A point's work and time less its tokeniser's, and the tokeniser's modelled time [s]."""

    flops: float
    traffic: float
    t: float
    tok_t: float


def collective_points(mb: xr.Dataset, *, fraction: float, seed: int) -> list[CollectivePoint]:
    """One record per measured (collective, P, size), with its time (mean over repeats) and whether it is held
    out."""
    dims = ("collective", "P", "nbytes")
    t, b = (mb[v].stack(point=dims) for v in ("coll_time_mean", "coll_bytes"))
    rows = [
        CollectivePoint(collective=str(c), P=int(p), nbytes=int(nb), t_measured=float(tt))
        for (c, p, _), tt, nb in zip(t["point"].values, t.values, b.values, strict=True)
        if p >= 2 and np.isfinite(tt) and np.isfinite(nb)
    ]
    span: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        span.setdefault((r["collective"], r["P"]), []).append(r["nbytes"])
    # the smallest and largest size of each (collective, P) always train: the fit needs the span
    anchors = [r["nbytes"] in (min(s), max(s)) for r in rows for s in [span[(r["collective"], r["P"])]]]
    return _hold_out(rows, ("collective", "P", "nbytes"), fraction, seed, anchors)


def op_points(mb: xr.Dataset, *, dtype: str, fraction: float, seed: int) -> list[OpPoint]:
    """One record per measured op point of ``dtype``, grouped by (op, P) for the hold-out choice, with the
    refined model's FLOPs and memory traffic for the point."""
    dims = ("op", "P", "N", "D", "L")
    sel = mb.sel(dtype=dtype)
    comp = sel["time_mean"].sel(mode="compute").stack(point=dims)
    comm = sel["time_mean"].sel(mode="comm").stack(point=dims)
    pad = head_padding(mb)
    rows: list[OpPoint] = []
    for i, (op, p, n, d, bands) in enumerate(comp["point"].values):
        t = float(comp.values[i])
        if np.isfinite(t):
            point = {"op": str(op), "P": int(p), "N": int(n), "D": int(d), "L": int(bands), "dtype": dtype}
            (flops, traffic), (tok_flops, tok_traffic) = work_split(point_at(mb, **point), head_padding=pad)
            rows.append(
                OpPoint(
                    **point,
                    t_compute=t,
                    t_comm=float(comm.values[i]),
                    flops=flops,
                    traffic_bytes=traffic,
                    tokenize_flops=tok_flops,
                    tokenize_traffic_bytes=tok_traffic,
                )
            )
    return _hold_out(rows, ("op", "P", "N", "D", "L"), fraction, seed)


def _hold_out(
    rows: list[Any], key: tuple[str, ...], fraction: float, seed: int, anchors: Any = None
) -> list[Any]:
    """``rows``, each marked ``held_out`` or not: :func:`hsitp.bench.fit.holdout_mask` of the rows' ``key``
    fields, drawn per value of the first two (the collective or op, and P)."""
    keys = [tuple(r[k] for k in key) for r in rows]
    for r, held in zip(rows, holdout_mask(keys, [k[:2] for k in keys], fraction, seed, anchors), strict=True):
        r["held_out"] = bool(held)
    return rows


def _own_work(row: OpPoint, tok_fit: Any) -> OwnWork:
    """A point's work and time less its tokeniser's (modelled by ``tok_fit``, the ``tokenize`` op's compute
    model; none fitted: the whole point is the op's own)."""
    if tok_fit is None or not row["tokenize_flops"]:
        return OwnWork(row["flops"], row["traffic_bytes"], row["t_compute"], 0.0)
    tok_t = float(tok_fit.predict(row["tokenize_flops"], row["tokenize_traffic_bytes"]))
    return OwnWork(
        row["flops"] - row["tokenize_flops"],
        row["traffic_bytes"] - row["tokenize_traffic_bytes"],
        row["t_compute"] - tok_t,
        tok_t,
    )


def sequence_factors(
    mb: xr.Dataset,
    opts: list[OpPoint],
    fits: Mapping[str, AlphaBetaFit],
    ops: list[str],
    *,
    dtype: str,
) -> dict[str, float]:
    """Per op, the median over its training points (P >= 2) of replayed-collectives time / ring-model time.

    The ring-model time is :func:`hsitp.cost.refined.collectives_time` with the sweep's alpha and beta on the
    traced calls (:func:`hsitp.bench.results.trace_records`). An op without such a point gets the median over the
    other ops (1.0 if none has one).
    """
    links = FittedLinks(fits, devices_per_node=int(mb["P"].max()))
    ratios: dict[str, list[float]] = {o: [] for o in ops}
    for r in opts:
        if r["held_out"] or r["P"] < 2 or not (np.isfinite(r["t_comm"]) and r["t_comm"] > 0):
            continue
        pt = mb.sel(op=r["op"], P=r["P"], N=r["N"], D=r["D"], L=r["L"], dtype=dtype)
        records = [rec for rec in trace_records(pt) if rec[0] in fits]
        model = collectives_time(records, links)
        if model > 0:
            ratios[r["op"]].append(r["t_comm"] / model)
    factors = {o: float(np.median(v)) for o, v in ratios.items() if v}
    fallback = float(np.median(list(factors.values()))) if factors else 1.0
    return {o: factors.get(o, fallback) for o in ops}


def calibrate(mb: xr.Dataset, *, fraction: float, seed: int) -> xr.Dataset:
    """Fit alpha/beta per collective and F per op on the training points of ``mb`` at its first dtype."""
    dtype = mb["dtype"].values.tolist()[0]
    cpts = collective_points(mb, fraction=fraction, seed=seed)
    fits = [_fit_collective(c, cpts) for c in mb["collective"].values.tolist()]
    opts = op_points(mb, dtype=dtype, fraction=fraction, seed=seed)
    ops = [o for o in mb["op"].values.tolist() if any(r["op"] == o for r in opts)]
    rates, models = _fit_compute(ops, opts)
    seq = sequence_factors(mb, opts, {f.collective: f for f in fits}, ops, dtype=dtype)
    log.info("sequence factors (back-to-back / alone): %s", ", ".join(f"{o} {v:.2f}" for o, v in seq.items()))
    world_sizes = sorted({r["P"] for r in cpts if not r["held_out"]})
    ds = calibration_dataset(
        alpha={f.collective: f.alpha for f in fits},
        beta={f.collective: f.beta for f in fits},
        achieved_flops={o: rates[o] for o in ops},
        device=mb.attrs.get("device", "unknown"),
        backend=mb.attrs.get("backend", "gloo"),
        dtype=dtype,
        world_sizes=world_sizes,
        fit_points={"collectives": cpts, "ops": opts},
        alpha_stderr={f.collective: f.alpha_stderr for f in fits},
        beta_stderr={f.collective: f.beta_stderr for f in fits},
        n_points={f.collective: f.n_points for f in fits},
        compute_model=models,
        sequence_factor=seq,
    )
    ds["achieved_flops"].attrs["long_name"] = (
        "median over training points of modelled FLOPs / compute-only time"
    )
    ds["n_points"].attrs["long_name"] = "training points in the fit (held-out points excluded)"
    ds.attrs.update(
        {
            "title": "hsitp calibration: alpha, beta per collective and compute model per op, fitted to "
            "microbenchmarks",
            "holdout_fraction": fraction,
            "holdout_seed": seed,
            "measured": "fitted to measurements on the device named in `device`",
        }
    )
    return ds


CALIBRATION_ATTRS: dict[str, dict[str, str]] = {
    "alpha": {"units": "s", "long_name": "per-call overhead"},
    "beta": {"units": "B/s", "long_name": "ring bandwidth"},
    "achieved_flops": {"units": "FLOP/s", "long_name": "achieved compute rate"},
    "alpha_stderr": {"units": "s", "long_name": "standard error of alpha"},
    "beta_stderr": {"units": "B/s", "long_name": "standard error of beta"},
    "n_points": {"units": "1", "long_name": "points in the fit"},
    "compute_overhead": {"units": "s", "long_name": "fixed time per call of the op"},
    "compute_rate": {"units": "FLOP/s", "long_name": "rate of the FLOP term (inf: term fitted to zero)"},
    "mem_bandwidth": {"units": "B/s", "long_name": "rate of the memory-traffic term (inf: term fitted to zero)"},
    "sequence_factor": {"units": "1", "long_name": "time of the op's collectives back to back / their ring-model "
                        "time timed alone"},
    "collective": {"long_name": "collective (ring model per collective)"},
    "op": {"long_name": "parallel layer (hsitp.names.OP_NAMES)"},
}  # fmt: skip


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
    """A calibration dataset (:data:`hsitp.contracts.CALIBRATION`), validated: α [s], β [B/s] per collective,
    achieved FLOP/s per op; optionally ``compute_model`` {"compute_overhead" | "compute_rate" | "mem_bandwidth":
    {op: value}} and ``sequence_factor`` {op: value} for every op of ``achieved_flops``, given together."""
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


def _fit_collective(c: str, cpts: list[CollectivePoint]) -> AlphaBetaFit:
    """alpha and beta of collective ``c`` from its training points; every point of ``c`` gets its prediction."""
    train = [r for r in cpts if r["collective"] == c and not r["held_out"]]
    try:
        fit = fit_alpha_beta(
            c, [r["P"] for r in train], [r["nbytes"] for r in train], [r["t_measured"] for r in train]
        )
    except FitError as exc:
        raise CalibrationError(
            f"cannot calibrate {c}: {exc}. The bench sweep needs world_sizes with P >= 2 and at least "
            "three collective sizes (bench.collectives.sizes_bytes)."
        ) from exc
    for r in cpts:
        if r["collective"] == c:
            r["t_predicted"] = float(fit.predict(r["P"], r["nbytes"]))
    held = [r["t_predicted"] / r["t_measured"] for r in cpts if r["collective"] == c and r["held_out"]]
    alpha = f"alpha = {fit.alpha * 1e6:.1f} us (+- {fit.alpha_stderr * 1e6:.1f})"
    beta = f"beta = {fit.beta / 1e9:.3g} GB/s (+- {fit.beta_stderr / 1e9:.2g})"
    log.info("%s: %s, %s from %d points; %s", c, alpha, beta, fit.n_points, _held_out_error(held, "the time"))
    return fit


def _held_out_error(ratios: list[float], what: str) -> str:
    """'held-out median |rel. error| of WHAT x % over n points', from the held-out points' predicted / measured."""
    median = f"{100 * np.median(np.abs(np.asarray(ratios) - 1)):.1f} %" if ratios else "n/a"
    return f"held-out median |rel. error| of {what} {median} over {len(ratios)} points"


def _fit_compute(ops: list[str], opts: list[OpPoint]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Per op: the achieved FLOP rate and the compute model (overhead, rate, memory bandwidth) of its own work
    (the aggregations less the tokeniser, fitted first); every point of the op gets its predicted compute time."""
    rates: dict[str, float] = {}
    models: dict[str, dict[str, float]] = {"compute_overhead": {}, "compute_rate": {}, "mem_bandwidth": {}}
    tok_fit = None
    for o in sorted(ops, key=lambda name: name != TOKENIZE):  # tokenize first: the aggregations need it
        points = [r for r in opts if r["op"] == o]
        own = [_own_work(r, tok_fit) for r in points]
        train = [(r, w) for r, w in zip(points, own, strict=True) if not r["held_out"]]
        # The rate while all P ranks compute at once (shared cores, memory bandwidth) is the one a P-way layer
        # sees; P = 1 points only stand in when an op has no multi-rank training point.
        train = [(r, w) for r, w in train if r["P"] >= 2] or train
        kept = [w for _, w in train if w.t > 0]
        if len(kept) < len(train):
            log.warning(
                "%s: %d training points left out: the tokeniser's modelled time exceeds the measured time",
                o,
                len(train) - len(kept),
            )
        rates[o] = achieved_flops([w.flops for w in kept], [w.t for w in kept])
        cf = fit_compute(o, [w.flops for w in kept], [w.traffic for w in kept], [w.t for w in kept])
        models["compute_overhead"][o] = cf.overhead
        models["compute_rate"][o] = cf.rate
        models["mem_bandwidth"][o] = cf.bandwidth
        for r, w in zip(points, own, strict=True):
            r["t_compute_predicted"] = float(cf.predict(w.flops, w.traffic)) + w.tok_t
        if o == TOKENIZE:
            tok_fit = cf
        held = [r["t_compute_predicted"] / r["t_compute"] for r in opts if r["op"] == o and r["held_out"]]
        log.info(
            "%s: compute t = %.1f us + FLOPs / %s + traffic / %s (%d points); achieved %s; %s",
            o,
            cf.overhead * 1e6,
            _rate(cf.rate, "FLOP"),
            _rate(cf.bandwidth, "B"),
            cf.n_points,
            _rate(rates[o], "FLOP"),
            _held_out_error(held, "the compute time"),
        )
    return rates, models


def run_calibrate(microbench: str | Path, out: str | Path, settings: BenchSettings) -> Path:
    mb = read_input(microbench, MICROBENCH)
    fraction, seed = settings.fit.holdout_fraction, settings.seed
    log.info(
        "read %s: P = %s, dtypes %s, on %s; holding out %.0f %% of the points (seed %d)",
        microbench,
        ", ".join(str(int(p)) for p in mb["P"].values),
        ", ".join(mb["dtype"].values.tolist()),
        mb.attrs.get("device", "?"),
        100 * fraction,
        seed,
    )
    cal = calibrate(mb, fraction=fraction, seed=seed)
    prov = provenance(config=settings.config, inputs={"microbench": microbench})
    path = write_netcdf(cal, out, kind=CALIBRATION.kind, prov=prov)
    log.info("wrote %s", path)
    return path


def fit_points(cal: xr.Dataset) -> dict[str, list[dict[str, Any]]]:
    """The fitted / held-out points a calibration file was built from."""
    return json.loads(cal.attrs["fit_points"])
