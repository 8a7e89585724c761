"""The checks computed from cached results: the paper's quotes and formulas (:mod:`hsitp.cost.stated`), the cost
tables (``results/RUN/cost/*.nc``), the dataset registry and the run's config; and the checks stated by reading, or
waiting on a stage or a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from hsitp.audit.claims import checks
from hsitp.audit.claims.checks import ClaimsError
from hsitp.audit.claims.core import OPS, Context, Outcome, _bounds, _eval, _fmt, _sel, _sel_text, share
from hsitp.data import registry
from hsitp.outcomes import Claim
from hsitp.sections import Config
from hsitp.shape import n_tokens


def check_quote(ctx: Context, a: checks.Quote) -> Outcome:
    """A quote recorded in ccr.nc (stated.paper_quotes + the table's own): consistent or not; with ``agrees_with``,
    whether the two quotes' prose rules name the same split."""
    ds = ctx.table("ccr")
    key, pair = a.key, "agrees_with" in a.model_fields_set
    for k in (key, a.agrees_with) if pair else (key,):
        if k not in ds["quote"].values:
            raise ClaimsError(
                f"quote {k!r} not in ccr.nc (quotes: {', '.join(map(str, ds['quote'].values))})"
            )
    if pair:
        return _texts_agree(ds, key, str(a.agrees_with))
    q = ds.sel(quote=key)
    text = str(q["quoted_text"].values)
    if text:
        value, paper = str(q["computed_text"].values), text
        tol = "same split"
    else:
        value = float(q["computed"].values)
        lo, hi = float(q["quoted_low"].values), float(q["quoted_high"].values)
        paper, tol = f"[{_fmt(lo)}, {_fmt(hi)}]", f"quoted range [{_fmt(lo)}, {_fmt(hi)}]"
    ok = bool(int(q["quote_consistent"].values))
    band = None if text else (lo, hi)
    if band is not None and ok != (lo <= value <= hi):
        raise ClaimsError(
            f"quote {key!r}: quote_consistent {ok} disagrees with computed {value} in [{lo}, {hi}]"
        )
    return Outcome(
        value=value,
        how=str(q["quote_how"].values),
        source=f"cost/ccr.nc:computed[quote={key}]",
        ok=ok,
        tolerance=tol,
        paper_value=paper,
        band=band,
    )


def _texts_agree(ds: xr.Dataset, a: str, b: str) -> Outcome:
    """Two of the paper's prose rules (quoted_text of two quotes) name the same split."""
    ta, tb = (str(ds["quoted_text"].sel(quote=k).values) for k in (a, b))
    return Outcome(
        value=f"{a}: {ta}; {b}: {tb}",
        how="the split each rule names for the same regime",
        source=f"cost/ccr.nc:quoted_text[quote={a},{b}]",
        ok=ta == tb,
        tolerance="same split",
    )


def _banded(v: float, a: checks.Check, how: str, source: str) -> Outcome:
    """``v`` against the check's bounds (``low``/``high``, or ``expect``: exact), the band deciding."""
    lo, hi, tol = _bounds(a)
    exact = "expect" in a.model_fields_set
    return Outcome(
        value=v, how=how, source=source, ok=lo <= v <= hi, tolerance=tol, band=(lo, hi), exact=exact
    )


def check_formula_value(ctx: Context, a: checks.FormulaValue) -> Outcome:
    """A formula (paper's stated model, constants F, beta_intra, beta_inter, n_tokens) against the paper's number."""
    return _banded(_eval(a.expr, a.at), a, a.expr, "hsitp.cost.stated")


def check_formula_identity(ctx: Context, a: checks.FormulaIdentity) -> Outcome:
    """Two expressions agree at every listed point (a derivation step; rtol 1e-12 by default)."""
    rtol = a.rtol
    points = a.points or [a.at]
    worst = 0.0
    for p in points:
        lhs, rhs = _eval(a.lhs, p), _eval(a.rhs, p)
        worst = max(worst, abs(lhs - rhs) / max(abs(rhs), 1e-300))
    return Outcome(
        value=worst,
        how=f"max relative |({a.lhs}) − ({a.rhs})| over {len(points)} point(s)",
        source="hsitp.cost.stated",
        ok=worst <= rtol,
        tolerance=f"rtol {rtol:g}",
        band=(0.0, rtol),
    )


def _reduce(da: xr.DataArray, how: str) -> float:
    vals = np.asarray(da.values, dtype=float).ravel()
    if how == "value":
        if vals.size != 1:
            raise ClaimsError(f"selection of {da.name!r} holds {vals.size} values; give reduce: min/max/...")
        return float(vals[0])
    funcs = {  # the reductions checks.TableValue.reduce names
        "min": np.nanmin,
        "max": np.nanmax,
        "median": np.nanmedian,
        "count_positive": lambda v: float(np.sum(v > 0)),
        "count_distinct": lambda v: float(len(np.unique(v[np.isfinite(v)]))),
    }
    return float(funcs[how](vals))


def check_table_value(ctx: Context, a: checks.TableValue) -> Outcome:
    """One number from a cost table (optionally reduced over a selection) within bounds."""
    da = _sel(ctx.table(a.file)[a.variable], a.sel)
    if a.ratio_to:
        da = da / _sel(ctx.table(a.file)[a.variable], a.ratio_to)
    v = _reduce(da, a.reduce)
    ratio = f" / {a.variable}{_sel_text(a.ratio_to)}" if a.ratio_to else ""
    how = f"{a.reduce} of {a.variable}{_sel_text(a.sel)}{ratio}"
    if a.over:  # a ratio of two table values (e.g. one effect against another)
        other = check_table_value(ctx, a.over_check())
        v, how = v / float(other.value), f"({how}) / ({other.how})"
    return _banded(v, a, how, f"cost/{a.file}.nc:{a.variable}")


def check_table_compare(ctx: Context, a: checks.TableCompare) -> Outcome:
    """Elementwise ``var[sel+lhs] OP var[sel+rhs]`` over the remaining dims: the fraction of points where true."""
    var = a.variable
    rvar = a.rhs_variable if a.rhs_variable is not None else var
    ds = ctx.table(a.file)
    base = dict(a.sel or {})
    left = _sel(ds[var], {**base, **(a.lhs or {})})
    rsel = {**base, **(a.rhs or {})}
    if rvar != var:  # a second variable: the shared selection applies to the dims it has
        rsel = {k: v for k, v in rsel.items() if k in ds[rvar].dims}
    right = _sel(ds[rvar], rsel)
    if a.rhs_min_over:  # against the best of several (e.g. the better 1-D split)
        right = right.min(a.rhs_min_over)
    scaled = "rhs_factor" in a.model_fields_set
    if scaled:
        right = right * float(a.rhs_factor)
    if set(left.dims) != set(right.dims):
        raise ClaimsError(
            f"table_compare: {var}{_sel_text(a.lhs)} has dims {left.dims}, the other side {right.dims}"
        )
    right = right.transpose(*left.dims)
    truth = np.asarray(OPS[a.op](np.asarray(left.values), np.asarray(right.values)), dtype=bool).ravel()
    factor = f"{_fmt(float(a.rhs_factor))}·" if scaled else ""
    return share(
        float(truth.mean()) if truth.size else 0.0,
        int(truth.size),
        a,
        f"share of {truth.size} point(s) where {var}{_sel_text(a.lhs)} {a.op} "
        f"{factor}{rvar}{_sel_text(a.rhs)} at {_sel_text(base) or 'every point'}",
        f"cost/{a.file}.nc:{var}" + (f",{rvar}" if rvar != var else ""),
    )


def check_table_fraction(ctx: Context, a: checks.TableFraction) -> Outcome:
    """Fraction of a table's selected values satisfying ``OP value`` (or within [low, high]); optionally of their
    ratio to another selection (``ratio_to``) or of their minimum over one dim (``min_over``, e.g. the better split)."""
    ds = ctx.table(a.file)
    da = _sel(ds[a.variable], a.sel)
    extra = ""
    if a.ratio_to:
        da = da / _sel(ds[a.variable], a.ratio_to)
        extra += f" / {a.variable}{_sel_text(a.ratio_to)}"
    if a.min_over:
        da = da.min(a.min_over)
        extra += f" (min over {a.min_over})"
    vals = np.asarray(da.values).ravel()
    if "op" in a.model_fields_set:
        truth = np.asarray(OPS[a.op](vals, a.value), dtype=bool)
        cond = f"{a.op} {a.value}"
    else:
        lo, hi, _ = _bounds(a)
        truth = (vals >= lo) & (vals <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    return share(
        float(truth.mean()),
        int(vals.size),
        a,
        f"share of {vals.size} value(s) of {a.variable}{_sel_text(a.sel)}{extra} {cond}",
        f"cost/{a.file}.nc:{a.variable}",
    )


def check_table_spread(ctx: Context, a: checks.TableSpread) -> Outcome:
    """A quantity the paper says does not depend on ``dim``: max/min − 1 along it (worst over other dims)."""
    da = _sel(ctx.table(a.file)[a.variable], a.sel)
    spread = (da.max(a.dim) / da.min(a.dim) - 1.0).max()
    v = float(spread.values)
    rtol = a.rtol
    return Outcome(
        value=v,
        how=f"max/min − 1 of {a.variable}{_sel_text(a.sel)} along {a.dim}",
        source=f"cost/{a.file}.nc:{a.variable}",
        ok=v <= rtol,
        tolerance=f"spread ≤ {rtol:g}",
        band=(0.0, rtol),
    )


def check_lower_split_rule(ctx: Context, a: checks.LowerSplitRule) -> Outcome:
    """How often a prose rule picks the 1-D split (channel vs token) with the lower CCR, over every rho.nc point
    (dataset × patch × definition of C × hardware × P) with C ≠ N. Rule ``longer``: split the longer of C and N
    (what the formulas give); ``shorter``: split the shorter (what §3.3 and §11 say)."""
    ds = ctx.table("rho")
    model = a.model
    ccr = ds["ccr"].sel(model=model)
    chan, tok = ccr.sel(split="channel"), ccr.sel(split="token")
    C, N = ds["C"], ds["N"]  # (dataset, c_def), (dataset, patch)
    longer_is_c = (C > N).broadcast_like(chan)
    decided = (C != N).broadcast_like(chan) & (chan != tok)
    lower_is_c = chan < tok
    agree = (lower_is_c == longer_is_c) if a.rule == "longer" else (lower_is_c != longer_is_c)
    n = int(decided.sum())
    return share(
        float((agree & decided).sum()) / n if n else 0.0,
        n,
        a,
        f"share of {n} points where the '{a.rule}' rule picks the 1-D split with the lower {model} CCR",
        "cost/rho.nc:ccr,C,N",
    )


def check_split_regime(ctx: Context, a: checks.SplitRegime) -> Outcome:
    """Share of rho.nc points (after ``sel``) where the choice between the two 1-D splits decides the regime: the
    better split's CCR is below 1 and the worse split's above 1 (``max(C, N) > P F/beta > min(C, N)`` under the
    stated model). Where both are above 1 (or both below), picking the wrong split changes no regime."""
    ds = ctx.table("rho")
    ccr = _sel(ds["ccr"].sel(split=["channel", "token"]), a.sel)
    lo, hi = ccr.min("split"), ccr.max("split")
    decides = np.asarray(((lo < 1.0) & (hi > 1.0)).values, dtype=bool).ravel()
    return share(
        float(decides.mean()) if decides.size else 0.0,
        int(decides.size),
        a,
        f"share of {decides.size} point(s) of ccr{_sel_text(a.sel)} where min(channel, token) < 1 < "
        "max(channel, token)",
        "cost/rho.nc:ccr",
    )


def check_dataset_grid(ctx: Context, a: checks.DatasetGrid) -> Outcome:
    """A scene's rows × cols (× bands) as the paper gives it, against the registry."""
    spec = registry.get(a.dataset)
    keys = [k for k in ("rows", "cols", "bands") if k in a.model_fields_set]
    got = {k: getattr(spec, k) for k in keys}
    want = {k: getattr(a, k) for k in keys}
    return Outcome(
        value="x".join(str(got[k]) for k in keys),
        paper_value="x".join(str(want[k]) for k in keys),
        how=" x ".join(keys),
        source=f"hsitp.data.registry:{a.dataset} (verified={spec.verified})",
        ok=all(int(want[k]) == got[k] for k in keys),
        tolerance="exact",
    )


def check_dataset_attr(ctx: Context, a: checks.DatasetAttr) -> Outcome:
    """A registry attribute equals (or contains) what the paper says."""
    spec = registry.get(a.dataset)
    v = getattr(spec, a.attr)
    if "contains" in a.model_fields_set:
        ok, tol = str(a.contains).lower() in str(v).lower(), f"contains {a.contains!r}"
    else:
        ok, tol = v == a.equals, f"equals {a.equals!r}"
    return Outcome(
        value=v, how=a.attr, source=f"hsitp.data.registry:{a.dataset}.{a.attr}", ok=ok, tolerance=tol
    )


def check_dataset_range(ctx: Context, a: checks.DatasetRange) -> Outcome:
    """Share of registry scenes whose bands (or tokens at a patch size) fall in [low, high]."""
    lo, hi, _ = _bounds(a)
    vals = {}
    for name in a.datasets or registry.names():
        spec = registry.get(name)
        if a.attr == "tokens":
            vals[name] = n_tokens(spec.rows, spec.cols, int(a.patch))
        else:
            vals[name] = getattr(spec, a.attr)
    inside = [n for n, v in vals.items() if lo <= v <= hi]
    what = f"tokens at p = {a.patch}" if a.attr == "tokens" else a.attr
    return share(
        len(inside) / len(vals),
        len(vals),
        a,
        f"share of {len(vals)} registry scenes with {what} in [{_fmt(lo)}, {_fmt(hi)}]: "
        + ", ".join(f"{n}={v}" for n, v in vals.items()),
        f"hsitp.data.registry ({what})",
    )


def _config_lookup(config: Config, key: str) -> Any:
    """A dotted key's value in the config's JSON form (what a claim's ``equals`` is written in)."""
    node: Any = config.as_json()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ClaimsError(f"config key {key!r} not in the config the audit was given")
        node = node[part]
    return node


def check_config_value(ctx: Context, a: checks.ConfigValue) -> Outcome:
    """A design parameter of the paper against the run's config."""
    v = _config_lookup(ctx.settings.config, a.key)
    return Outcome(
        value=v, how=f"config {a.key}", source=f"config:{a.key}", ok=v == a.equals, tolerance="equal"
    )


def check_table_attr(ctx: Context, a: checks.TableAttr) -> Outcome:
    """A design parameter recorded in a cost table (attribute or coordinate values)."""
    ds = ctx.table(a.file)
    if "coord" in a.model_fields_set:
        v: Any = [x.item() if hasattr(x, "item") else x for x in ds[a.coord].values]
        src = f"cost/{a.file}.nc:{a.coord} (coordinate)"
    else:
        v = ds.attrs[a.attr]
        v = v.item() if hasattr(v, "item") else v
        src = f"cost/{a.file}.nc:{a.attr} (attribute)"
    want = a.equals
    ok = list(v) == list(want) if isinstance(want, list) else v == want
    return Outcome(value=v, how="recorded value", source=src, ok=ok, tolerance="equal")


def check_preset_value(ctx: Context, a: checks.PresetValue) -> Outcome:
    """A hardware number of the paper against the preset that encodes it (hsitp.cost.hardware)."""
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(a.preset)
    v = float(eval(a.field, {"__builtins__": {}}, {"hw": hw}))  # noqa: S307 - attribute access on a preset
    return _banded(v, a, a.field, f"hsitp.cost.hardware:{a.preset}")


def check_reading(ctx: Context, a: checks.Reading) -> Outcome:
    """A verdict that rests on reading (a reference's authors, a method's name, internal consistency of prose)."""
    return Outcome(verdict=a.verdict, reason=a.reason, source=a.source, how="reading")


def check_pending(ctx: Context, a: checks.Pending) -> Outcome:
    """Waits on a stage not built yet (training, memory probe)."""
    return Outcome(verdict=Claim.PENDING, reason=f"pending: {a.stage} stage; {a.reason}", how="-", source="-")


def check_needs_gpu(ctx: Context, a: checks.NeedsGpu) -> Outcome:
    """Needs a GPU measurement (tensor cores, NCCL overlap) that CPU/gloo runs cannot stand in for."""
    return Outcome(verdict=Claim.NEEDS_GPU, reason=a.reason, how="-", source=a.source)
