"""The measured checks: the accuracy run's ``train/summary.nc`` (:func:`check_measured`) and the run's own probe
files (memory, the fake-tensor estimate, throughput). A check whose file or point is absent is pending and says what
it waits for."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.audit.claims import checks
from hsitp.audit.claims.checks import ClaimsError
from hsitp.audit.claims.core import (
    OPS,
    Context,
    Outcome,
    _bounds,
    _fmt,
    _sel_text,
    pending,
    probe_config,
    probe_sizes,
    share,
)
from hsitp.contracts import TRAIN_SUMMARY, flag_meanings
from hsitp.names import DCHAG_PLANS
from hsitp.outcomes import Basis, Claim


def check_measured(ctx: Context, a: checks.Measured) -> Outcome:
    """:func:`_check_measured`, its reason saying when the summary is the committed reference, not a run here."""
    out = _check_measured(ctx, a)
    if ctx.accuracy_from_reference and out.verdict != Claim.PENDING:
        note = f"from the committed reference {ctx.accuracy_summary}, not re-run here"
        out = replace(out, reason=f"{out.reason}; {note}" if out.reason else note)
    return out


def _check_measured(ctx: Context, a: checks.Measured) -> Outcome:
    """A claim decided by measurements: a variable of ``results/<audit.accuracy_run>/train/summary.nc`` (one value
    per cell), as the share of the selected cells equal to ``equals`` (e.g. a verdict variable) or within [low,
    high]. Basis ``measured``; pending, with what it waits for, while the file or the variable is absent (the drift
    check compares such claims by presence and schema, never by verdict)."""
    path, var, waits = ctx.accuracy_summary, a.variable, a.waits_for
    if not path.exists():
        why = f"pending: no {path} (run the accuracy run `{ctx.accuracy_run}`: audit.accuracy_run). {waits}"
        return pending(path, why.strip())
    ds = TRAIN_SUMMARY.read(path)
    ctx.inputs["accuracy_summary"] = path
    if var not in ds:
        return pending(f"{path}:{var}", f"pending: {path} has no variable {var!r} yet. {waits}".strip())
    vals = _selected(ds[var], a.sel or {}, path)
    if "undecided" in a.model_fields_set and bool(np.all(vals.astype(str) == str(a.undecided))):
        # no cell decided either way: the measurement cannot judge the claim (not a contradiction of it); a share
        # of 0 with a decided cell is one (if_false: contradicted)
        return Outcome(
            verdict=Claim.NOT_REPRODUCIBLE, basis=Basis.MEASURED, value=0.0,
            how=f"every one of {vals.size} cell(s) of {var}{_sel_text(a.sel)} is {a.undecided!r}",
            source=f"{path}:{var}", reason=f"no selected cell was decided ({a.undecided}): more seeds could decide it",
        )  # fmt: skip
    if "equals" in a.model_fields_set:
        truth = vals.astype(str) == str(a.equals)
        cond = f"== {a.equals!r}"
    else:
        lo, hi, _ = _bounds(a)
        num = vals.astype(float)
        truth = (num >= lo) & (num <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    how = f"share of {vals.size} cell(s) of {var}{_sel_text(a.sel)} {cond}"
    return share(float(truth.mean()), int(vals.size), a, how, f"{path}:{var}", basis="measured")


def _selected(da: xr.DataArray, sel: checks.Sel, path: Path) -> np.ndarray:
    """The values of ``da`` at the cells whose coordinates (dataset, plan, P, protocol, ...) are in ``sel``, flat; a
    CF flag variable (e.g. oa_verdict) by name."""
    for key, want in sel.items():
        if key not in da.coords:
            raise ClaimsError(
                f"measured check: {da.name!r} has no coordinate {key!r} (coords {list(da.coords)})"
            )
        keep = np.isin(np.asarray(da[key].values), np.asarray(want if isinstance(want, list) else [want]))
        da = da.isel({da[key].dims[0]: np.flatnonzero(keep)})
    flags = "flag_values" in da.attrs and "flag_meanings" in da.attrs
    vals = np.array(flag_meanings(da), dtype=object) if flags else np.asarray(da.values).ravel()
    if vals.size == 0:
        raise ClaimsError(f"measured check: no cell of {da.name!r} in {path} matches {dict(sel)}")
    return vals


def _undecided(path: Path, why: str, basis: str = "measured", note: str = "") -> Outcome:
    """A measured check whose file is there but decides nothing (no point in scope, every point oversubscribed or
    within its noise): pending, with why; a first_decided claim then falls through to its next sub-check."""
    where = f" ({note})" if note else ""
    return pending(path, f"undecided{where}: {why}", basis)


def off_sizes(ds: xr.Dataset, want: dict[str, Any] | None) -> str:
    """Rule 1 (scope) for a measurement: "" when the probe file's model is at every size the claim speaks of
    (``want``, its ``sizes``: e.g. {dim: 256, depth: 12, N: 5776}, §8.2's estimate), else what differs. A claim
    without ``sizes`` speaks of any model at least the headline run's (the toy-size rule of
    :meth:`Context.measured`)."""
    if not want:
        return ""
    p, have = probe_config(ds), probe_sizes(ds)
    off = []
    for k, v in want.items():
        got = p.get(k)
        vals = [int(x) for x in (got if isinstance(got, list) else [got])] if got is not None else []
        if int(v) not in vals:
            off.append(f"{k} {v} (measured: {', '.join(map(str, vals)) or 'none'})")
    if not off:
        return ""
    return f"not at the sizes the claim speaks of: {'; '.join(off)}; the probe's model is " + ", ".join(
        f"{k} {x}" for k, x in have.items()
    )


def _msel(da: xr.DataArray, sel: checks.Sel | None) -> tuple[xr.DataArray | None, str]:
    """``da`` at coordinate values (a scalar drops the dim, a list keeps it); (None, what was not measured) when a
    value is absent from the file (a point the run did not measure), :class:`ClaimsError` for an unknown name."""
    for key, want in (sel or {}).items():
        if key not in da.coords:
            raise ClaimsError(
                f"measured check: {da.name!r} has no coordinate {key!r} (coords {list(da.coords)})"
            )
        have = [v.item() if hasattr(v, "item") else v for v in np.atleast_1d(da[key].values)]
        wants = want if isinstance(want, list) else [want]
        absent = [w for w in wants if w not in have]
        if absent:
            return None, f"{key} = {', '.join(map(str, absent))} not measured ({key} = {have})"
        da = da.sel({key: want}, drop=not isinstance(want, list))
    return da, ""


def _condition(a: checks.ProbeCheck) -> tuple[Callable[[float], bool], str]:
    """The test a measured value must pass: ``op``/``value`` or the band ``low``/``high`` (or ``expect``)."""
    if "op" in a.model_fields_set:
        f, x = OPS[a.op], float(a.value)
        return (lambda v: bool(f(v, x))), f"{a.op} {_fmt(x)}"
    lo, hi, _ = _bounds(a)
    return (lambda v: lo <= v <= hi), f"in [{_fmt(lo)}, {_fmt(hi)}]"


def _labelled_points(q: xr.DataArray, keep_nan: bool = False) -> list[tuple[str, float]]:
    """(label, value) of every finite point of ``q`` (every point with ``keep_nan``); the label names the
    coordinates that vary."""
    q = q.squeeze()
    if not q.dims:
        v = float(q.values)
        return [("", v)] if math.isfinite(v) or keep_nan else []
    dims = list(q.dims)
    st = q.stack(_pt=dims)
    out = []
    for i in range(st.sizes["_pt"]):
        v = float(st.values[i])
        if math.isfinite(v) or keep_nan:
            out.append((", ".join(f"{d}={_fmt(st[d].values[i].item())}" for d in dims), v))
    return out


MAX_LISTED = 12  # points listed in a measured check's `how`


def _share(
    points: Sequence[tuple[str, bool, str]],
    a: checks.Check,
    how: str,
    source: str,
    basis: str | None = "measured",
    left_out: Sequence[str] = (),
    note: str = "",
    none: tuple[Path, str] | None = None,
) -> Outcome:
    """A share outcome over decided points (label, holds, shown value), listing them and what was left out; with
    ``none`` = (file, what decided nothing) and no point, undecided on that file, the left-out listed."""
    if not points and none is not None:
        return _undecided(none[0], "; ".join([none[1], *left_out]), basis or "measured")
    n = len(points)
    held = sum(ok for _, ok, _ in points)
    listed = "; ".join(f"{lbl}: {shown}{'' if ok else ' (no)'}" for lbl, ok, shown in points[:MAX_LISTED])
    more = f"; and {n - MAX_LISTED} more" if n > MAX_LISTED else ""
    out = f"; left out: {'; '.join(left_out)}" if left_out else ""
    reason = f"Measured {note}." if note else ""
    return share(held / n, n, a, f"{how}: {listed}{more}{out}", source, basis, reason)


def _probe_model(ds: xr.Dataset) -> str:
    """The probe's model and device, as its attributes record them (the scale a measured verdict rests on)."""
    p = probe_config(ds)
    dev = sorted({str(d) for d in np.atleast_1d(ds["device"].values)}) if "device" in ds else []
    model = ", ".join(f"{k} {p[k]}" for k in ("dim", "depth", "heads", "L", "N", "batch") if k in p)
    return f"probe model {model}, {ds.attrs.get('dtype', '?')}; device {' / '.join(dev) or '?'}"


def check_probe_memory(ctx: Context, a: checks.ProbeMemory) -> Outcome:
    """Measured per-rank memory of one training step (``probe/memory.nc``, real tensors under torchrun, the larger
    rank's value) as a share of points passing ``op``/``value`` or ``low``/``high``: ``variable`` (peak_allocated,
    or memory after ``sel`` summed over the ``sum`` dims, e.g. kind = activations) at ``lhs`` (plans, g) divided by
    its value at ``against`` (the same P and other coordinates, e.g. {plan: tp}, or a fixed point, e.g. {plan:
    dense, P: 1}), times P with ``scale_P`` (memory that falls as 1/P gives 1), over every measured P ≥ ``P_min``
    (default 2). Memory does not depend on how busy the cores were, so oversubscribed P count. Pending while the
    file, or a plan, P or g in scope, is absent."""
    ds, path, absent = ctx.measured("memory")
    if absent is not None:
        return absent
    if off := off_sizes(ds, a.sizes):
        return _undecided(path, note=ctx.measured_notes.get("memory", ""), why=off)
    var = a.variable
    ran = ds["peak_allocated"].notnull().any("rank")  # memory holds 0 where a point was not run
    da, missing = _msel(ds[var].where(ran), a.sel)
    if da is None:
        return _undecided(path, note=ctx.measured_notes.get("memory", ""), why=missing)
    for d in a.sum or []:
        da = da.sum(d, min_count=1)
    da = da.max("rank")
    num, miss = _msel(da, a.lhs)
    den, miss2 = _msel(da, a.against)
    if num is None or den is None:
        return _undecided(path, note=ctx.measured_notes.get("memory", ""), why=miss or miss2)
    q = num / den.where(den > 0)
    if "g" in q.dims and _groupless(a):
        q = q.isel(g=0, drop=True)  # one measurement repeated along g, not one point per g
    if a.scale_P:
        q = q * q["P"]
    if "P" in q.dims:
        q = q.where(q["P"] >= a.P_min)
    cond, ctext = _condition(a)
    pts = [(lbl, cond(v), _fmt(v)) for lbl, v in _labelled_points(q)]
    if not pts:
        return _undecided(path, f"no measured point of {var}{_sel_text(a.lhs)} at P ≥ {a.P_min}")
    summed = f" summed over {', '.join(a.sum)}" if a.sum else ""
    expr = (
        f"{var}{_sel_text(a.sel)}{summed} (larger rank) at {_sel_text(a.lhs)} / at "
        f"{_sel_text(a.against)}{' × P' if a.scale_P else ''}"
    )
    return _share(
        pts,
        a,
        f"measured {ctx.measured_label('memory')} ({_probe_model(ds)}): share of {len(pts)} point(s) of {expr} "
        f"{ctext}",
        f"{path}:{var}",
        note=ctx.measured_notes.get("memory", ""),
    )


def _groupless(a: checks.ProbeMemory) -> bool:
    """True when every plan the check divides has no band groups (dense, tp, token): the probe measures such a plan
    once and repeats it along g (probe/results.py), so its g copies are one point, not one per g."""
    plans = set()
    for sel in (a.lhs, a.against):
        want = (sel or {}).get("plan", [])
        plans |= {str(p) for p in (want if isinstance(want, list) else [want])}
    return bool(plans) and not plans & set(DCHAG_PLANS)


def check_probe_estimate(ctx: Context, a: checks.ProbeEstimate) -> Outcome:
    """The planner's fake-tensor estimate (``probe/estimate.nc``: the model built under FakeTensorMode at the
    configs it lists, rank 0): ``variable`` (peak_allocated, or memory after ``sel`` summed over part and kind) of
    each config of a plan in ``lhs`` over the config of plan ``against`` with the same P, L, N, D, depth, batch,
    dtype and checkpointing, as a share passing ``op``/``value`` or ``low``/``high``. Modelled, not measured: basis
    computed, labelled so."""
    ds, path, absent = ctx.measured("estimate")
    if absent is not None:
        return absent
    var = a.variable
    da = ds[var]
    if "part" in da.dims or "kind" in da.dims:
        da, missing = _msel(da, a.sel)
        if da is None:
            return _undecided(path, missing, basis=Basis.PENDING)
        da = da.sum([d for d in ("part", "kind") if d in da.dims])
    keys = [k for k in ("P", "L", "N", "D", "depth", "batch", "dtype", "checkpointing") if k in ds]
    plans = [str(x) for x in ds["plan"].values]
    sig = [tuple(str(ds[k].values[i]) for k in keys) for i in range(len(plans))]
    want = a.lhs if isinstance(a.lhs, list) else [a.lhs]
    cond, ctext = _condition(a)
    pts = []
    sizes = {("D" if k == "dim" else k): int(v) for k, v in (a.sizes or {}).items()}
    off = [
        i for i in range(len(plans)) if any(k in ds and int(ds[k].values[i]) != v for k, v in sizes.items())
    ]
    for i, plan in enumerate(plans):
        if plan not in want or i in off:  # rule 1: only the configs at the sizes the claim speaks of
            continue
        j = next((j for j in range(len(plans)) if plans[j] == a.against and sig[j] == sig[i]), None)
        if j is None or not float(da.values[j]) > 0:
            continue
        v = float(da.values[i]) / float(da.values[j])
        pts.append((str(ds["config"].values[i]), cond(v), _fmt(v)))
    if not pts:
        at = f" at the sizes the claim speaks of ({sizes})" if sizes else ""
        return _undecided(
            path, f"no config of {want}{at} with a matching {a.against} config", basis=Basis.PENDING
        )
    return _share(
        pts,
        a,
        f"modelled with fake tensors in run `{ctx.measured_run}` (not measured: {ds.attrs.get('estimated', '')}): "
        f"share of {len(pts)} config(s) where {var} of {want} / {a.against} at the same P, L, N, D, depth "
        f"{ctext}",
        f"{path}:{var}",
        basis="computed",
    )


def _oversubscribed(ds: xr.Dataset) -> dict[int, str]:
    """P values whose timings decide nothing: ranks × threads per rank exceeded the cores (the file's own label)."""
    import json

    out: dict[int, str] = {}
    if "oversubscribed" in ds and "P" in ds["oversubscribed"].dims:
        note = ds.get("oversubscribed_note")
        for i, P in enumerate(ds["P"].values):
            if int(ds["oversubscribed"].values[i]):
                text = str(note.values[i]) if note is not None else ""
                out[int(P)] = text or "oversubscribed"
    for P in json.loads(str(ds.attrs.get("oversubscribed_P", "[]")) or "[]"):
        out.setdefault(int(P), "oversubscribed")
    return out


def check_probe_throughput(ctx: Context, a: checks.ProbeThroughput) -> Outcome:
    """Measured throughput against tp (``probe/throughput.nc``: every plan at one P timed interleaved, in rounds)
    as a share of decided points passing ``op`` ``value``: ``quantity`` ratio (tokens/s of the plan / tokens/s of
    tp in the same round: a point decides only when its slowest and fastest round are on the same side of
    ``value``) or ccr_ratio (the plan's CCR / tp's at the same P, CCR = the slowest rank's collective time over its
    compute time, from each point's own full and compute-only steps, one rank's own). Plans ``plans``, P in ``P`` (or ≥ ``P_min``,
    default 2); an oversubscribed P (the file's label) decides nothing. Pending while nothing decides."""
    ds, path, absent = ctx.measured("throughput")
    if absent is not None:
        return absent
    over = _oversubscribed(ds)
    quantity = a.quantity
    med, lo, hi, what = _throughput_quantity(ds, quantity)
    sel = {**(a.sel or {}), "plan": list(a.plans)}
    arrays = []
    for x in (med, lo, hi):
        x, missing = _msel(x, sel)
        if x is None:
            return _undecided(path, note=ctx.measured_notes.get("throughput", ""), why=missing)
        arrays.append(x)
    med, lo, hi = arrays
    in_scope = [int(P) for P in med["P"].values if (int(P) in a.P if a.P else int(P) >= a.P_min)]
    f, x = OPS[a.op], float(a.value)
    pts, left = _decided_points(med, lo, hi, [P for P in in_scope if P not in over], f, x, quantity)
    left = [f"P = {P} ({over[P]}: decides nothing)" for P in in_scope if P in over] + left
    if not pts:
        measured = [int(P) for P in med["P"].values]
        why = "; ".join(left) if left else f"no P in scope measured (P = {measured})"
        if quantity == "ccr_ratio" and pts == [] and left:
            meds = [v for P in in_scope if P not in over for _, v in _labelled_points(med.sel(P=[P]))]
            if meds:
                below = sum(bool(f(v, x)) for v in meds)
                why = (
                    f"medians {_fmt(min(meds))}-{_fmt(max(meds))} over {len(meds)} point(s), {below} of them "
                    f"{a.op} {_fmt(x)}, but the probe records no repeat range of a CCR (one median of the "
                    f"collective and of the compute time per point): a ratio decides only where its measured range "
                    f"lies wholly on one side of {_fmt(x)}; {why}"
                )
        scope = f"P in {a.P}" if a.P else f"P ≥ {a.P_min}"
        return _undecided(path, note=ctx.measured_notes.get("throughput", ""), why=f"{why}; scope {scope}")
    return _share(
        pts,
        a,
        f"measured {ctx.measured_label('throughput')} ({_probe_model(ds)}): share of {len(pts)} decided point(s) of "
        f"{what} {a.op} {_fmt(x)}",
        f"{path}:{'ratio_vs_tp_median' if quantity == 'ratio' else 'time_collectives,time_compute'}",
        left_out=left,
        note=ctx.measured_notes.get("throughput", ""),
    )


def _throughput_quantity(
    ds: xr.Dataset, quantity: str
) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray, str]:
    """(median, low, high, what) of the probe's ``quantity`` vs tp: the interleaved tokens/s ratio with its slowest
    and fastest round, or the CCR ratio (medians only: low and high NaN, so no point decides)."""
    if quantity == "ratio":
        what = "tokens/s of the plan / tokens/s of tp, interleaved rounds (median [slowest, fastest round])"
        return ds["ratio_vs_tp_median"], ds["ratio_vs_tp_min"], ds["ratio_vs_tp_max"], what
    coll = ds["time_collectives"].sum("time_part")
    comp = ds["time_compute"].sum("time_part")
    # one rank's collective over its own compute time, at the slowest rank (the largest full step): the largest
    # collective over the largest compute time mixed two ranks (tp at P = 2: rank 0's collectives, rank 1's compute)
    slowest = (
        (coll + comp).fillna(-np.inf).argmax("rank")
    )  # collectives = full - compute: their sum is the step
    ccr = (coll / comp.where(comp > 0)).isel(rank=slowest)
    med = ccr / ccr.sel(plan="tp", drop=True)
    # A ratio decides only where its measured range (the repeats) lies wholly on one side of the
    # threshold. The probe records one median per point for the collective and compute times, no repeats:
    # the range is unknown, so no point decides (lo and hi NaN); the medians are listed.
    what = "CCR of the plan / CCR of tp (slowest rank's collective / compute time, medians)"
    return med, med.where(False), med.where(False), what


def _decided_points(
    med: xr.DataArray,
    lo: xr.DataArray,
    hi: xr.DataArray,
    sizes: Sequence[int],
    f: Callable[..., Any],
    x: float,
    quantity: str,
) -> tuple[list[tuple[str, bool, str]], list[str]]:
    """The points at ``sizes`` whose whole range is on one side of ``x`` (label, passes, shown), and the others
    with why they decide nothing."""
    pts, left = [], []
    for P in sizes:  # noqa: N806
        lows = dict(_labelled_points(lo.sel(P=[P]), keep_nan=True))
        highs = dict(_labelled_points(hi.sel(P=[P]), keep_nan=True))
        for lbl, v in _labelled_points(med.sel(P=[P])):
            vl, vh = lows[lbl], highs[lbl]
            shown = _fmt(v) if quantity != "ratio" else f"{_fmt(v)} [{_fmt(vl)}, {_fmt(vh)}]"
            if not (math.isfinite(vl) and math.isfinite(vh)):
                left.append(f"{lbl} {shown} (one median, no repeat range: decides nothing)")
            elif bool(f(vl, x)) != bool(f(vh, x)):
                left.append(f"{lbl} {shown} (rounds on both sides of {_fmt(x)})")
            else:
                pts.append((lbl, bool(f(v, x)), shown))
    return pts, left
