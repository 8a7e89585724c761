"""The measured checks on the run's own microbenchmarks (``bench/*.nc``): a comparison of two ops, a trend along a
dimension, a value.

A point decides only when the difference exceeds both spreads the bench records: the repeats' inter-quartile
bands (pooled over launches) lie apart, and so do the independent launches' own values (``ccr_measured_launch``:
every launch of one side beyond every launch of the other). The second is what makes a verdict reproducible: the
repeats inside one launch share that launch's state (allocator, thread placement, the machine's load at the
time), and two smoke runs of one launch each ordered the same two ops oppositely, each run consistently
(docs/audit.md). With fewer than :data:`MIN_LAUNCHES` launches a bench sub-check stays pending.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from hsitp.analysis.labels import measured_on, platform
from hsitp.audit.claims import checks
from hsitp.audit.claims.core import MEASURED_FILES, OPS, Context, Outcome, _fmt
from hsitp.audit.claims.measured import _msel, _oversubscribed, _share, _undecided

# Independent launches a bench sub-check needs before any point decides. With k launches a side, two ops of equal
# true cost land wholly apart by chance with probability 2 / C(2k, k): 1/3 at k = 2, 1/10 at k = 3 (and the
# repeats' bands must lie apart too), so 3 is the fewest that makes a reproducible verdict likely.
MIN_LAUNCHES = 3


class _Arrays(NamedTuple):
    """One op's values at the points a bench sub-check may use (NaN elsewhere)."""

    ds: xr.Dataset | None  # microbench.nc
    path: Path
    pending: Outcome | None  # set when nothing can decide (file absent, op not benched, too few launches)
    values: xr.DataArray | None = None  # the pooled value per point
    half_iqr: xr.DataArray | None = None  # half the repeats' inter-quartile range per point
    launches: xr.DataArray | None = None  # (launch, ...) each independent launch's value per point
    left: Sequence[str] = ()  # what was left out, and why


def _bench_arrays(ctx: Context, a: checks.BenchCheck, op: str, variable: str) -> _Arrays:
    """One op's values at communicating P (> 1) that are not oversubscribed, after ``sel`` and the ``where``
    filters on N, D and ρ = D/N (e.g. {rho: ["<", 1]}); pending with fewer than :data:`MIN_LAUNCHES` launches."""
    ds, path, absent = ctx.measured("microbench")
    if absent is not None:
        return _Arrays(None, path, absent)
    if a.gpu_only and platform(str(ds.attrs.get("device", "")).split(";")) != "GPU":
        why = (
            f"the bench ran on {measured_on(ds.attrs)}: the claim speaks of GPU interconnects (NVLink/NCCL), "
            "which a CPU (gloo) timing does not stand in for"
        )
        return _Arrays(ds, path, _undecided(path, why))
    n_launches = int(ds.attrs.get("launches", 1))
    if n_launches < MIN_LAUNCHES:
        why = (
            f"{n_launches} independent launch(es) of the bench at each P; deciding needs >= {MIN_LAUNCHES} "
            "(bench.launches): the repeats inside one launch do not show the run-to-run spread"
        )
        return _Arrays(ds, path, _undecided(path, why))
    if op not in [str(x) for x in ds["op"].values]:
        return _Arrays(ds, path, _undecided(path, f"op {op} not benched"))
    if f"{variable}_launch" not in ds:
        return _Arrays(ds, path, _undecided(path, f"no per-launch values of {variable}"))
    v = ds[variable].sel(op=op, drop=True)
    iqr_name = f"{variable}_iqr" if f"{variable}_iqr" in ds else None
    h = ds[iqr_name].sel(op=op, drop=True) / 2 if iqr_name else xr.zeros_like(v)
    v, missing = _msel(v, a.sel)
    if v is None:
        return _Arrays(ds, path, _undecided(path, missing))
    h, _ = _msel(h, a.sel)
    by_launch, _ = _msel(ds[f"{variable}_launch"].sel(op=op, drop=True), a.sel)
    over = _oversubscribed(ds)
    keep = [int(P) for P in v["P"].values if int(P) > 1 and int(P) not in over]
    left = [f"P = {P} ({over[P]}: decides nothing)" for P in v["P"].values if int(P) in over]
    mask = v["P"].isin(keep)
    for name, (opname, x) in (a.where or {}).items():
        coord = v["D"] / v["N"] if name == "rho" else v[name]
        mask = mask & OPS[opname](coord, float(x))
    return _Arrays(ds, path, None, v.where(mask), h.where(mask), by_launch.where(mask), left)


def _apart(a: np.ndarray, b: np.ndarray) -> bool:
    """Every launch's value on one side beyond every launch's value on the other."""
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    return bool(a.size and b.size and (a.min() > b.max() or a.max() < b.min()))


def _where_text(a: checks.BenchCheck) -> str:
    w = a.where or {}
    return (
        " and ".join(f"{'ρ = D/N' if k == 'rho' else k} {o} {_fmt(x)}" for k, (o, x) in w.items()) or "any ρ"
    )


def check_bench_compare(ctx: Context, a: checks.BenchCompare) -> Outcome:
    """Two ops of the microbenchmark at the same point (P, N, D, L, dtype; P > 1, not oversubscribed; ``where``
    filters on N, D, ρ = D/N): the share of decided points where ``variable`` (default ccr_measured) of ``lhs``
    ``op`` that of ``rhs``. A point decides only where the two values differ by more than half their IQRs together
    (their inter-quartile bands do not overlap). With ``agree_with`` (a model variable of bench/model_vs_measured.nc,
    e.g. ccr_stated), the share of decided points where that model orders the two ops as measured."""
    var = a.variable
    lhs, rhs = _bench_arrays(ctx, a, a.lhs, var), _bench_arrays(ctx, a, a.rhs, var)
    for side in (lhs, rhs):
        if side.pending is not None:
            return side.pending
    ds, path, left = lhs.ds, lhs.path, lhs.left
    f = OPS[a.op]
    model = None
    if a.agree_with:
        mvm, mpath, absent = ctx.measured("model_vs_measured")
        if absent is not None:
            return absent
        mv = mvm[a.agree_with]
        model = (mv.sel(op=a.lhs, drop=True), mv.sel(op=a.rhs, drop=True))
    pts, undecided = _compared_points(lhs, rhs, a, f, model)
    if undecided:
        left = [*left, f"{undecided} point(s) within the repeats' IQR or the launches' range"]
    rule = (
        f"the model's {a.agree_with} orders {a.lhs} {a.op} {a.rhs} as measured"
        if model is not None
        else f"{var}({a.lhs}) {a.op} {var}({a.rhs})"
    )
    return _share(
        pts,
        a,
        f"{_measured_in(ctx, ds)}: share of {len(pts)} decided point(s) where {_where_text(a)} at which {rule}",
        f"{path}:{var}"
        + (
            f"; {ctx.measured_dir / MEASURED_FILES['model_vs_measured'][0]}:{a.agree_with}"
            if model is not None
            else ""
        ),
        left_out=left,
        none=(path, f"no decided point of {a.lhs} vs {a.rhs} where {_where_text(a)}"),
    )


def _rows(arr: _Arrays) -> list[tuple[dict[str, Any], float, float, np.ndarray]]:
    """(coordinates, value, half IQR, each launch's value) of every point of one op with a value, in the order of
    its dims."""
    V = arr.values  # noqa: N806
    st = xr.Dataset({"v": V, "h": arr.half_iqr, "vl": arr.launches}).stack(_pt=list(V.dims))
    out = []
    for i in range(st.sizes["_pt"]):
        v = float(st["v"].values[i])
        if math.isfinite(v):
            c = {d: st[d].values[i].item() for d in V.dims}
            out.append((c, v, float(st["h"].values[i]), st["vl"].isel(_pt=i).values))
    return out


def _label(c: dict[str, Any], V: xr.DataArray) -> str:  # noqa: N803
    """A point by the coordinates that vary (N and D always)."""
    return ", ".join(f"{d}={_fmt(c[d])}" for d in V.dims if V.sizes[d] > 1 or d in ("N", "D"))


def _compared_points(
    lhs: _Arrays, rhs: _Arrays, a: checks.BenchCompare, f: Callable[..., Any], model: Any
) -> tuple[list, int]:
    """The decided points of ``lhs`` against ``rhs`` (label, passes, shown), matched by coordinates (the arrays
    share their dims), and how many points their repeats' IQR or launches' range leave undecided."""
    right = {tuple(c.values()): (v, h, ls) for c, v, h, ls in _rows(rhs)}
    pts, undecided = [], 0
    for coords, l_, hl, ll in _rows(lhs):
        if (at := tuple(coords.values())) not in right:
            continue
        r_, hr, rl = right[at]
        if abs(l_ - r_) <= hl + hr or not _apart(ll, rl):  # the IQR bands overlap, or the launches do
            undecided += 1
            continue
        shown = f"{a.lhs} {_fmt(l_)} vs {a.rhs} {_fmt(r_)}"
        if model is not None:
            ml = float(model[0].sel({d: coords[d] for d in model[0].dims}).values)
            mr = float(model[1].sel({d: coords[d] for d in model[1].dims}).values)
            ok = bool(f(ml, mr)) == bool(f(l_, r_))
            shown += f" (model {_fmt(ml)} vs {_fmt(mr)})"
        else:
            ok = bool(f(l_, r_))
        pts.append((_label(coords, lhs.values), ok, shown))
    return pts, undecided


def _measured_in(ctx: Context, ds: xr.Dataset, op: str | None = None) -> str:
    """Where and how the microbenchmark was measured (device, layer batch, launches; with ``op`` its collective
    calls), as every bench check's ``how`` begins."""
    import json

    try:
        batch = str(json.loads(ds.attrs.get("layer_shape", "{}")).get("batch", "?"))
    except ValueError:
        batch = "?"
    calls = _collectives_text(ds, op) if op is not None else ""
    return (
        f"measured {ctx.measured_label('microbench')} (bench {ds.attrs.get('device', '?')}, batch {batch}, "
        f"{int(ds.attrs.get('launches', 1))} independent launches{calls})"
    )


def _collectives_text(ds: xr.Dataset, op: str) -> str:
    """Collective calls the op issued (traced, forward + backward) at each communicating P."""
    if "n_collectives" not in ds:
        return ""
    n = ds["n_collectives"].sel(op=op)
    per_p = {
        int(P): sorted({int(x) for x in np.ravel(n.sel(P=P).values) if np.isfinite(x)})
        for P in n["P"].values
        if int(P) > 1
    }
    return "; collective calls per step (traced, fwd + bwd): " + ", ".join(
        f"P = {P}: {v}" for P, v in per_p.items()
    )


def check_bench_trend(ctx: Context, a: checks.BenchTrend) -> Outcome:
    """How one op's ``variable`` (default ccr_measured) moves with the size of its tensor (N·D elements per crop):
    the share of decided pairs of points (same P, L, dtype; different N·D; inter-quartile bands apart) where it
    ``direction`` (falls: larger on the smaller tensor; rises) as the tensor grows."""
    var = a.variable
    arr = _bench_arrays(ctx, a, a.op, var)
    if arr.pending is not None:
        return arr.pending
    ds, path, left, rows = arr.ds, arr.path, arr.left, _rows(arr)
    falls = a.direction == "falls"
    pts, undecided = [], 0
    for i, (ci, vi, hi, li) in enumerate(rows):
        for cj, vj, hj, lj in rows[i + 1 :]:
            same = all(ci[d] == cj[d] for d in ci if d not in ("N", "D"))
            si, sj = ci["N"] * ci["D"], cj["N"] * cj["D"]
            if not same or si == sj:
                continue
            (cs, vs), (cl_, vl) = ((ci, vi), (cj, vj)) if si < sj else ((cj, vj), (ci, vi))
            if abs(vi - vj) <= hi + hj or not _apart(li, lj):
                undecided += 1
                continue
            ok = vs > vl if falls else vs < vl
            lbl = f"P={cs['P']}: N·D {cs['N']}·{cs['D']} vs {cl_['N']}·{cl_['D']}"
            pts.append((lbl, ok, f"{_fmt(vs)} vs {_fmt(vl)}"))
    if undecided:
        left = [*left, f"{undecided} pair(s) within the repeats' IQR or the launches' range"]
    return _share(
        pts,
        a,
        f"{_measured_in(ctx, ds, a.op)}: share of {len(pts)} decided pair(s) where {var}({a.op}) "
        f"{'falls' if falls else 'rises'} as the tensor (N·D) grows",
        f"{path}:{var}",
        left_out=left,
        none=(path, f"no decided pair of {a.op} points of different size"),
    )


def check_bench_value(ctx: Context, a: checks.BenchValue) -> Outcome:
    """One op's ``variable`` (default ccr_measured) at every communicating, not oversubscribed point passing
    ``op`` ``value``: the share of decided points (the inter-quartile band wholly on one side of ``value``)."""
    var = a.variable
    arr = _bench_arrays(ctx, a, a.of, var)
    if arr.pending is not None:
        return arr.pending
    ds, path, left = arr.ds, arr.path, arr.left
    f, x = OPS[a.op], float(a.value)
    pts, undecided = [], 0
    for c, v, h, launches in _rows(arr):
        sides = {bool(f(y, x)) for y in launches[np.isfinite(launches)]}
        if bool(f(v - h, x)) != bool(f(v + h, x)) or len(sides) != 1:
            undecided += 1
            continue
        pts.append((_label(c, arr.values), bool(f(v, x)), f"{_fmt(v)} ± {_fmt(h)}"))
    if undecided:
        left = [*left, f"{undecided} point(s) whose IQR or launches straddle {_fmt(x)}"]
    return _share(
        pts,
        a,
        f"{_measured_in(ctx, ds, a.of)}: share of {len(pts)} decided point(s) where {var}({a.of}) "
        f"(median ± half IQR) {a.op} {_fmt(x)}",
        f"{path}:{var}",
        left_out=left,
        none=(path, f"no decided point of {a.of}"),
    )
