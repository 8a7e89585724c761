"""Claims of the paper as data (``claims.yaml``), the check functions they name, and their verdicts.

Each claim names one check (``check.fn``). A check reads cached results only (the cost tables
``results/RUN/cost/*.nc``, the dataset registry, :mod:`hsitp.cost.stated`, the run's config) and returns an
:class:`Outcome`: the pipeline's value, where it came from, and either a boolean, a fraction of points where the
claim holds, or a verdict stated by reading (with its reason and source). :func:`verdict_of` turns that into one of
:data:`VERDICTS` under the claim's declared tolerance, so a number that decides a verdict is never typed by hand.

The rules every claim is held to (scope, the paper's formulas first, findings, "by construction" evidence, knife
edges, hedged claims, the flip test, sources, the measured basis) are written down in ``docs/audit.md``; the
functions here implement the checkable ones (:func:`decide`, :func:`knife_edge`, :func:`hedged`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from hsitp.cost import stated
from hsitp.data import registry
from hsitp.errors import HsitpError

CLAIMS_FILE = Path(__file__).with_name("claims.yaml")

KINDS = (
    "number",
    "formula",
    "directional_rule",
    "dataset_fact",
    "design_parameter",
    "estimate",
    "conclusion",
    "reference_fact",
    "finding",  # our refined model's answer to a claim judged by the paper's formulas (``refines``: that claim)
)
# "consistent": holds, but only by the paper's own formulas applied to the paper's own numbers (basis circular)
VERDICTS = ("holds", "consistent", "conditional", "contradicted", "not_reproducible", "needs_gpu", "pending")
# How a verdict was reached: computed from cached results, read from a source, waiting on a stage, or decided by
# measurements (results/<audit.accuracy_run>/train/summary.nc; pending while that file or its variable is absent).
BASES = ("computed", "circular", "reading", "pending", "measured")
# The paper's own presets: a stated-model table selection limited to these evaluates the paper with itself.
PAPER_PRESETS = frozenset({"paper-intra", "paper-inter"})
# Checks that evaluate the paper's own formulas at the paper's own numbers (rule 11).
CIRCULAR_CHECKS = frozenset({"formula_identity", "formula_value", "preset_value"})
# Quotes recomputed by the paper's own formulas and parameters alone (not those needing the registry's scenes or
# the refined memory model, which hsitp.cost adds beside them).
OWN_QUOTES = frozenset(q.key for q in stated.paper_quotes())
# Quote markers that hedge a claim (rule 5). 可能 ("may") hedges its scope: the claim holds if the effect occurs in at
# least one configuration of the stated scope. 约/大约/左右 ("about") hedge a number: the claim states its tolerance
# (field ``about``). 约束 ("constraint"), 归约/规约 ("reduce"), 节约, 约定 are not hedges.
POSSIBILITY_MARKERS = ("可能",)
APPROX_MARKERS = ("大约", "约", "左右")
NOT_HEDGES = ("约束", "归约", "规约", "节约", "约定")
KNIFE_EDGE_RTOL = 0.02  # rule 4: |value - edge| <= 2 % of a finite non-zero edge
DEFAULT_ACCURACY_RUN = "cpu"  # audit.accuracy_run's schema default
REQUIRED_FIELDS = ("id", "section", "kind", "zh", "en", "check")
COST_TABLES = ("rho", "ccr", "boundary", "scale", "plan")
# Columns of paper_claims.{csv,md,json}, in order.
COLUMNS = (
    "id",
    "section",
    "kind",
    "zh",
    "en",
    "paper_value",
    "pipeline_value",
    "pipeline_number",
    "how",
    "source",
    "tolerance",
    "verdict",
    "basis",
    "reason",
    "hedged",
    "knife_edge",
    "edge",
    "refines",
)


class ClaimsError(HsitpError):
    """claims.yaml is malformed, or a check cannot be evaluated (names the claim and the key)."""


@dataclass
class Outcome:
    """What one check found. Exactly one of ``ok``, ``fraction``, ``verdict`` decides the claim."""

    value: Any = ""  # the pipeline's value (number or text)
    how: str = ""  # formula / method
    source: str = ""  # file and variable, registry entry, config key, or reading source
    ok: bool | None = None
    fraction: float | None = None  # share of points (datasets, cases, P, ...) where the claim holds
    verdict: str | None = None  # reading / pending / needs_gpu: stated, with a reason
    reason: str = ""
    tolerance: str = ""
    paper_value: str = ""
    labels: list[str] = field(default_factory=list)  # any_of: the conditions under which it holds
    # What decides it (so the flip test and the knife-edge mark can move the value): a numeric band [low, high]
    # for ``value`` (exact: an ``expect`` check), or the number of points behind ``fraction``.
    band: tuple[float, float] | None = None
    exact: bool = False
    n_points: int | None = None
    parts: list[tuple[str, Outcome, Mapping[str, Any]]] = field(
        default_factory=list
    )  # any_of: label, outcome, check
    basis: str | None = None  # "measured" for a check reading the accuracy run


class Context:
    """Cached inputs of one audit: the run's cost tables (read once), the registry, the run's config, and (for
    measured-basis claims) ``results/<audit.accuracy_run>/train/summary.nc`` beside the run's folder."""

    def __init__(
        self, cost_dir: Path, config: Mapping[str, Any] | None = None, results_root: Path | None = None
    ) -> None:
        self.cost_dir = Path(cost_dir)
        self.config = dict(config or {})
        # results/ (the run folder's parent): where the accuracy run's folder sits
        self.results_root = Path(results_root) if results_root is not None else self.cost_dir.parent.parent
        self._tables: dict[str, xr.Dataset] = {}
        self.inputs: dict[str, Path] = {}

    @property
    def accuracy_run(self) -> str:
        return str((self.config.get("audit") or {}).get("accuracy_run", DEFAULT_ACCURACY_RUN))

    @property
    def accuracy_summary(self) -> Path:
        """``results/<audit.accuracy_run>/train/summary.nc``: the input of measured-basis claims."""
        return self.results_root / self.accuracy_run / "train" / "summary.nc"

    def table(self, name: str) -> xr.Dataset:
        """``cost/NAME.nc`` (kind ``cost_NAME``; ``model_NAME`` accepted: the files written before issue 8's
        rename of the stage, as in results/reference/)."""
        if name not in COST_TABLES:
            raise ClaimsError(f"unknown cost table {name!r}; one of {', '.join(COST_TABLES)}")
        if name not in self._tables:
            from hsitp.io import read_netcdf

            path = self.cost_dir / f"{name}.nc"
            ds = read_netcdf(path)
            if ds.attrs.get("kind") not in (f"cost_{name}", f"model_{name}"):
                ds = read_netcdf(path, kind=f"cost_{name}")  # raises with the reader's message
            self._tables[name] = ds
            self.inputs[name] = path
        return self._tables[name]


# --- helpers -------------------------------------------------------------------------------------------------------
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _op(name: str) -> Callable[[Any, Any], Any]:
    if name not in _OPS:
        raise ClaimsError(f"unknown comparison {name!r}; one of {' '.join(_OPS)}")
    return _OPS[name]


def _sel(da: xr.DataArray, sel: Mapping[str, Any] | None) -> xr.DataArray:
    if not sel:
        return da
    try:
        return da.sel({k: v for k, v in sel.items()})
    except (KeyError, ValueError) as exc:
        raise ClaimsError(f"selection {dict(sel)} not in {da.name!r} (dims {dict(da.sizes)}): {exc}") from exc


def _sel_text(sel: Mapping[str, Any] | None) -> str:
    if not sel:
        return ""
    return "[" + ", ".join(f"{k}={v}" for k, v in sel.items()) + "]"


def _fmt(x: Any) -> str:
    if isinstance(x, float | np.floating):
        return f"{float(x):.6g}"
    return str(x)


def _is_exact(args: Mapping[str, Any]) -> bool:
    return "expect" in args


def _bounds(args: Mapping[str, Any]) -> tuple[float, float, str]:
    """``low``/``high`` bounds, or ``expect`` with ``rtol`` (default 1e-12: exact up to rounding)."""
    if "expect" in args:
        e, rtol = float(args["expect"]), float(args.get("rtol", 1e-12))
        return e - abs(e) * rtol, e + abs(e) * rtol, f"{_fmt(e)} (rtol {rtol:g})"
    low, high = float(args.get("low", -math.inf)), float(args.get("high", math.inf))
    return low, high, f"[{_fmt(low)}, {_fmt(high)}]"


# The names a formula may use: the paper's formulas and constants, the token grid, math.
def _n_tokens(rows: int, cols: int, patch: int, grid: str = "crop") -> int:
    from hsitp.cost.tables.common import n_tokens

    return n_tokens(rows, cols, patch, grid)


FORMULA_NAMES: dict[str, Any] = {
    "ccr_channel": lambda *a: float(stated.ccr_channel(*a)),
    "ccr_token": lambda *a: float(stated.ccr_token(*a)),
    "threshold": lambda *a: float(stated.threshold(*a)),
    "relative_throughput": lambda *a: float(stated.relative_throughput(*a)),
    "ccr_2d": lambda *a: float(stated.ccr_2d(*a)),
    "rho": lambda *a: float(stated.rho(*a)),
    "n_tokens": _n_tokens,
    "F": stated.PAPER_F,
    "beta_intra": stated.PAPER_BETA_INTRA,
    "beta_inter": stated.PAPER_BETA_INTER,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
    "abs": abs,
}


def _eval(expr: str, extra: Mapping[str, Any] | None = None) -> float:
    names = {**FORMULA_NAMES, **(extra or {})}
    try:
        return float(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - names are the whitelist above
    except Exception as exc:  # a typo in claims.yaml: say which expression
        raise ClaimsError(f"formula {expr!r} cannot be evaluated: {exc}") from exc


# --- checks --------------------------------------------------------------------------------------------------------
def check_quote(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A quote recorded in ccr.nc (stated.paper_quotes + the table's own): consistent or not."""
    ds = ctx.table("ccr")
    key = a["key"]
    if key not in ds["quote"].values:
        raise ClaimsError(f"quote {key!r} not in ccr.nc (quotes: {', '.join(map(str, ds['quote'].values))})")
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


def check_quote_texts_agree(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Two of the paper's prose rules (quoted_text of two quotes) name the same split."""
    ds = ctx.table("ccr")
    ta, tb = (str(ds["quoted_text"].sel(quote=k).values) for k in (a["a"], a["b"]))
    return Outcome(
        value=f"{a['a']}: {ta}; {a['b']}: {tb}",
        how="the split each rule names for the same regime",
        source=f"cost/ccr.nc:quoted_text[quote={a['a']},{a['b']}]",
        ok=ta == tb,
        tolerance="same split",
    )


def check_formula_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A formula (paper's stated model, constants F, beta_intra, beta_inter, n_tokens) against the paper's number."""
    v = _eval(a["expr"], a.get("at"))
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=a["expr"],
        source="hsitp.cost.stated",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_formula_identity(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Two expressions agree at every listed point (a derivation step; rtol 1e-12 by default)."""
    rtol = float(a.get("rtol", 1e-12))
    points = a.get("points") or [a.get("at", {})]
    worst = 0.0
    for p in points:
        lhs, rhs = _eval(a["lhs"], p), _eval(a["rhs"], p)
        worst = max(worst, abs(lhs - rhs) / max(abs(rhs), 1e-300))
    return Outcome(
        value=worst,
        how=f"max relative |({a['lhs']}) − ({a['rhs']})| over {len(points)} point(s)",
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
    funcs = {
        "min": np.nanmin,
        "max": np.nanmax,
        "median": np.nanmedian,
        "count_positive": lambda v: float(np.sum(v > 0)),
        "count_distinct": lambda v: float(len(np.unique(v[np.isfinite(v)]))),
    }
    if how not in funcs:
        raise ClaimsError(f"unknown reduce {how!r}; one of value, {', '.join(funcs)}")
    return float(funcs[how](vals))


def check_table_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """One number from a cost table (optionally reduced over a selection) within bounds."""
    da = _sel(ctx.table(a["file"])[a["variable"]], a.get("sel"))
    if a.get("ratio_to"):
        da = da / _sel(ctx.table(a["file"])[a["variable"]], a["ratio_to"])
    red = a.get("reduce", "value")
    v = _reduce(da, red)
    ratio = f" / {a['variable']}{_sel_text(a['ratio_to'])}" if a.get("ratio_to") else ""
    how = f"{red} of {a['variable']}{_sel_text(a.get('sel'))}{ratio}"
    if a.get("over"):  # a ratio of two table values (e.g. one effect against another)
        other = check_table_value(ctx, {"file": a["file"], **a["over"]})
        v, how = v / float(other.value), f"({how}) / ({other.how})"
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=how,
        source=f"cost/{a['file']}.nc:{a['variable']}",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_table_compare(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Elementwise ``var[sel+lhs] OP var[sel+rhs]`` over the remaining dims: the fraction of points where true."""
    var = a["variable"]
    rvar = a.get("rhs_variable", var)
    ds = ctx.table(a["file"])
    base = dict(a.get("sel") or {})
    left = _sel(ds[var], {**base, **(a.get("lhs") or {})})
    rsel = {**base, **(a.get("rhs") or {})}
    if rvar != var:  # a second variable: the shared selection applies to the dims it has
        rsel = {k: v for k, v in rsel.items() if k in ds[rvar].dims}
    right = _sel(ds[rvar], rsel)
    if a.get("rhs_min_over"):  # against the best of several (e.g. the better 1-D split)
        right = right.min(a["rhs_min_over"])
    if "rhs_factor" in a:
        right = right * float(a["rhs_factor"])
    if set(left.dims) != set(right.dims):
        raise ClaimsError(
            f"table_compare: {var}{_sel_text(a.get('lhs'))} has dims {left.dims}, the other side {right.dims}"
        )
    right = right.transpose(*left.dims)
    truth = np.asarray(_op(a["op"])(np.asarray(left.values), np.asarray(right.values)), dtype=bool).ravel()
    frac = float(truth.mean()) if truth.size else 0.0
    return Outcome(
        value=frac,
        how=f"share of {truth.size} point(s) where {var}{_sel_text(a.get('lhs'))} {a['op']} "
        f"{_fmt(float(a.get('rhs_factor', 1.0))) + '·' if 'rhs_factor' in a else ''}{rvar}{_sel_text(a.get('rhs'))}"
        f" at {_sel_text(base) or 'every point'}",
        source=f"cost/{a['file']}.nc:{var}" + (f",{rvar}" if rvar != var else ""),
        fraction=frac,
        n_points=int(truth.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_table_fraction(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Fraction of a table's selected values satisfying ``OP value`` (or within [low, high]); optionally of their
    ratio to another selection (``ratio_to``) or of their minimum over one dim (``min_over``, e.g. the better split)."""
    ds = ctx.table(a["file"])
    da = _sel(ds[a["variable"]], a.get("sel"))
    extra = ""
    if a.get("ratio_to"):
        da = da / _sel(ds[a["variable"]], a["ratio_to"])
        extra += f" / {a['variable']}{_sel_text(a['ratio_to'])}"
    if a.get("min_over"):
        da = da.min(a["min_over"])
        extra += f" (min over {a['min_over']})"
    vals = np.asarray(da.values).ravel()
    if "op" in a:
        truth = np.asarray(_op(a["op"])(vals, a["value"]), dtype=bool)
        cond = f"{a['op']} {a['value']}"
    else:
        lo, hi, _ = _bounds(a)
        truth = (vals >= lo) & (vals <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    frac = float(truth.mean())
    return Outcome(
        value=frac,
        how=f"share of {vals.size} value(s) of {a['variable']}{_sel_text(a.get('sel'))}{extra} {cond}",
        source=f"cost/{a['file']}.nc:{a['variable']}",
        fraction=frac,
        n_points=int(vals.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_table_spread(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A quantity the paper says does not depend on ``dim``: max/min − 1 along it (worst over other dims)."""
    da = _sel(ctx.table(a["file"])[a["variable"]], a.get("sel"))
    spread = (da.max(a["dim"]) / da.min(a["dim"]) - 1.0).max()
    v = float(spread.values)
    rtol = float(a.get("rtol", 1e-9))
    return Outcome(
        value=v,
        how=f"max/min − 1 of {a['variable']}{_sel_text(a.get('sel'))} along {a['dim']}",
        source=f"cost/{a['file']}.nc:{a['variable']}",
        ok=v <= rtol,
        tolerance=f"spread ≤ {rtol:g}",
        band=(0.0, rtol),
    )


def check_lower_split_rule(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """How often a prose rule picks the 1-D split (channel vs token) with the lower CCR, over every rho.nc point
    (dataset × patch × definition of C × hardware × P) with C ≠ N. Rule ``longer``: split the longer of C and N
    (what the formulas give); ``shorter``: split the shorter (what §3.3 and §11 say)."""
    ds = ctx.table("rho")
    model = a.get("model", "stated")
    ccr = ds["ccr"].sel(model=model)
    chan, tok = ccr.sel(split="channel"), ccr.sel(split="token")
    C, N = ds["C"], ds["N"]  # (dataset, c_def), (dataset, patch)
    longer_is_c = (C > N).broadcast_like(chan)
    decided = (C != N).broadcast_like(chan) & (chan != tok)
    lower_is_c = chan < tok
    agree = (lower_is_c == longer_is_c) if a["rule"] == "longer" else (lower_is_c != longer_is_c)
    n = int(decided.sum())
    frac = float((agree & decided).sum()) / n if n else 0.0
    return Outcome(
        value=frac,
        how=f"share of {n} points where the '{a['rule']}' rule picks the 1-D split with the lower {model} CCR",
        source="cost/rho.nc:ccr,C,N",
        fraction=frac,
        n_points=n,
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_split_regime(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Share of rho.nc points (after ``sel``) where the choice between the two 1-D splits decides the regime: the
    better split's CCR is below 1 and the worse split's above 1 (``max(C, N) > P F/beta > min(C, N)`` under the
    stated model). Where both are above 1 (or both below), picking the wrong split changes no regime."""
    ds = ctx.table("rho")
    ccr = _sel(ds["ccr"].sel(split=["channel", "token"]), a.get("sel"))
    lo, hi = ccr.min("split"), ccr.max("split")
    decides = np.asarray(((lo < 1.0) & (hi > 1.0)).values, dtype=bool).ravel()
    frac = float(decides.mean()) if decides.size else 0.0
    return Outcome(
        value=frac,
        how=f"share of {decides.size} point(s) of ccr{_sel_text(a.get('sel'))} where min(channel, token) < 1 < "
        "max(channel, token)",
        source="cost/rho.nc:ccr",
        fraction=frac,
        n_points=int(decides.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def check_dataset_grid(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A scene's rows × cols (× bands) as the paper gives it, against the registry."""
    spec = registry.get(a["dataset"])
    keys = [k for k in ("rows", "cols", "bands") if k in a]
    got = {k: getattr(spec, k) for k in keys}
    return Outcome(
        value="x".join(str(got[k]) for k in keys),
        paper_value="x".join(str(a[k]) for k in keys),
        how=" x ".join(keys),
        source=f"hsitp.data.registry:{a['dataset']} (verified={spec.verified})",
        ok=all(int(a[k]) == got[k] for k in keys),
        tolerance="exact",
    )


def check_dataset_attr(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A registry attribute equals (or contains) what the paper says."""
    spec = registry.get(a["dataset"])
    v = getattr(spec, a["attr"])
    if "contains" in a:
        ok, tol = str(a["contains"]).lower() in str(v).lower(), f"contains {a['contains']!r}"
    else:
        ok, tol = v == a["equals"], f"equals {a['equals']!r}"
    return Outcome(
        value=v, how=a["attr"], source=f"hsitp.data.registry:{a['dataset']}.{a['attr']}", ok=ok, tolerance=tol
    )


def check_dataset_range(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Share of registry scenes whose bands (or tokens at a patch size) fall in [low, high]."""
    lo, hi, _ = _bounds(a)
    vals = {}
    for name in a.get("datasets") or registry.names():
        spec = registry.get(name)
        if a["attr"] == "tokens":
            vals[name] = _n_tokens(spec.rows, spec.cols, int(a["patch"]))
        else:
            vals[name] = getattr(spec, a["attr"])
    inside = [n for n, v in vals.items() if lo <= v <= hi]
    frac = len(inside) / len(vals)
    n_points = len(vals)
    what = f"tokens at p = {a['patch']}" if a["attr"] == "tokens" else a["attr"]
    return Outcome(
        value=frac,
        how=f"share of {len(vals)} registry scenes with {what} in [{_fmt(lo)}, {_fmt(hi)}]: "
        + ", ".join(f"{n}={v}" for n, v in vals.items()),
        source=f"hsitp.data.registry ({what})",
        fraction=frac,
        n_points=n_points,
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
    )


def _config_lookup(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise ClaimsError(f"config key {key!r} not in the config the audit was given")
        node = node[part]
    return node


def check_config_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A design parameter of the paper against the run's config."""
    v = _config_lookup(ctx.config, a["key"])
    return Outcome(
        value=v, how=f"config {a['key']}", source=f"config:{a['key']}", ok=v == a["equals"], tolerance="equal"
    )


def check_table_attr(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A design parameter recorded in a cost table (attribute or coordinate values)."""
    ds = ctx.table(a["file"])
    if "coord" in a:
        v: Any = [x.item() if hasattr(x, "item") else x for x in ds[a["coord"]].values]
        src = f"cost/{a['file']}.nc:{a['coord']} (coordinate)"
    else:
        v = ds.attrs[a["attr"]]
        v = v.item() if hasattr(v, "item") else v
        src = f"cost/{a['file']}.nc:{a['attr']} (attribute)"
    want = a["equals"]
    ok = list(v) == list(want) if isinstance(want, list) else v == want
    return Outcome(value=v, how="recorded value", source=src, ok=ok, tolerance="equal")


def check_preset_value(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A hardware number of the paper against the preset that encodes it (hsitp.cost.hardware)."""
    from hsitp.cost.hardware import get_hardware

    hw = get_hardware(a["preset"])
    v = float(eval(a["field"], {"__builtins__": {}}, {"hw": hw}))  # noqa: S307 - attribute access on a preset
    lo, hi, tol = _bounds(a)
    return Outcome(
        value=v,
        how=a["field"],
        source=f"hsitp.cost.hardware:{a['preset']}",
        ok=lo <= v <= hi,
        tolerance=tol,
        band=(lo, hi),
        exact=_is_exact(a),
    )


def check_any_of(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Sub-checks under named conditions (e.g. intra- and inter-node β): all hold → holds, some → conditional on
    those, none → contradicted."""
    parts = [(sub["label"], evaluate_check(ctx, sub), sub) for sub in a["checks"]]
    held = [lbl for lbl, o, sub in parts if _holds(o, sub)]
    return Outcome(
        value="; ".join(f"{lbl}: {_fmt(o.value)}" for lbl, o, _ in parts),
        how="; ".join(f"{lbl}: {o.how}" for lbl, o, _ in parts),
        source="; ".join(sorted({o.source for _, o, _ in parts})),
        fraction=len(held) / len(parts),
        labels=held,
        tolerance="; ".join(f"{lbl}: {o.tolerance}" for lbl, o, _ in parts),
        paper_value=next((o.paper_value for _, o, _ in parts if o.paper_value), ""),
        parts=parts,
    )


def check_reading(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A verdict that rests on reading (a reference's authors, a method's name, internal consistency of prose)."""
    return Outcome(verdict=a["verdict"], reason=a["reason"], source=a["source"], how="reading")


def check_pending(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Waits on a stage not built yet (training, memory probe)."""
    return Outcome(
        verdict="pending", reason=f"pending: {a['stage']} stage; {a['reason']}", how="-", source="-"
    )


def check_needs_gpu(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """Needs a GPU measurement (tensor cores, NCCL overlap) that CPU/gloo runs cannot stand in for."""
    return Outcome(verdict="needs_gpu", reason=a["reason"], how="-", source=a.get("source", "-"))


def check_measured(ctx: Context, a: Mapping[str, Any]) -> Outcome:
    """A claim decided by measurements: a variable of ``results/<audit.accuracy_run>/train/summary.nc`` (kind
    ``train_summary``, one value per cell), as the share of the selected cells equal to ``equals`` (e.g. a verdict
    variable) or within [low, high]. Basis ``measured``; pending, with what it waits for, while the file or the
    variable is absent (the drift check compares such claims by presence and schema, never by verdict)."""
    path = ctx.accuracy_summary
    waits = a.get("waits_for", "")
    if not path.exists():
        return Outcome(
            verdict="pending",
            basis="measured",
            how="-",
            source=str(path),
            reason=f"pending: no {path} (run the accuracy run `{ctx.accuracy_run}`: audit.accuracy_run). {waits}".strip(),
        )
    from hsitp.io import read_netcdf

    ds = read_netcdf(path, kind="train_summary")
    ctx.inputs["accuracy_summary"] = path
    var = a["variable"]
    if var not in ds:
        return Outcome(
            verdict="pending",
            basis="measured",
            how="-",
            source=f"{path}:{var}",
            reason=f"pending: {path} has no variable {var!r} yet. {waits}".strip(),
        )
    da = ds[var]
    for key, want in (a.get("sel") or {}).items():  # cell coordinates (dataset, plan, P, split, ...)
        if key not in da.coords:
            raise ClaimsError(f"measured check: {var!r} has no coordinate {key!r} (coords {list(da.coords)})")
        keep = np.isin(np.asarray(da[key].values), np.asarray(want if isinstance(want, list) else [want]))
        da = da.isel({da[key].dims[0]: np.flatnonzero(keep)})
    vals = np.asarray(da.values).ravel()
    if (
        "flag_values" in da.attrs and "flag_meanings" in da.attrs
    ):  # CF flags (e.g. oa_verdict): compare by name
        names = dict(
            zip(
                np.atleast_1d(da.attrs["flag_values"]).tolist(),
                str(da.attrs["flag_meanings"]).split(),
                strict=True,
            )
        )
        vals = np.array([names.get(v, str(v)) for v in vals.tolist()], dtype=object)
    if vals.size == 0:
        raise ClaimsError(f"measured check: no cell of {var!r} in {path} matches {dict(a.get('sel') or {})}")
    if "undecided" in a and bool(np.all(vals.astype(str) == str(a["undecided"]))):
        # no cell decided either way: the measurement cannot judge the claim (not a contradiction of it); a share
        # of 0 with a decided cell is one (if_false: contradicted)
        return Outcome(
            verdict="not_reproducible",
            basis="measured",
            value=0.0,
            how=f"every one of {vals.size} cell(s) of {var}{_sel_text(a.get('sel'))} is {a['undecided']!r}",
            source=f"{path}:{var}",
            reason=f"no selected cell was decided ({a['undecided']}): more seeds could decide it",
        )
    if "equals" in a:
        truth = vals.astype(str) == str(a["equals"])
        cond = f"== {a['equals']!r}"
    else:
        lo, hi, _ = _bounds(a)
        num = vals.astype(float)
        truth = (num >= lo) & (num <= hi)
        cond = f"in [{_fmt(lo)}, {_fmt(hi)}]"
    frac = float(truth.mean())
    return Outcome(
        value=frac,
        how=f"share of {vals.size} cell(s) of {var}{_sel_text(a.get('sel'))} {cond}",
        source=f"{path}:{var}",
        fraction=frac,
        n_points=int(vals.size),
        tolerance=f"holds if share ≥ {a.get('min_fraction', 1.0)}",
        basis="measured",
    )


CHECKS: dict[str, Callable[[Context, Mapping[str, Any]], Outcome]] = {
    "quote": check_quote,
    "quote_texts_agree": check_quote_texts_agree,
    "formula_value": check_formula_value,
    "formula_identity": check_formula_identity,
    "table_value": check_table_value,
    "table_compare": check_table_compare,
    "table_fraction": check_table_fraction,
    "table_spread": check_table_spread,
    "lower_split_rule": check_lower_split_rule,
    "split_regime": check_split_regime,
    "dataset_grid": check_dataset_grid,
    "dataset_attr": check_dataset_attr,
    "dataset_range": check_dataset_range,
    "config_value": check_config_value,
    "table_attr": check_table_attr,
    "preset_value": check_preset_value,
    "any_of": check_any_of,
    "reading": check_reading,
    "pending": check_pending,
    "needs_gpu": check_needs_gpu,
    "measured": check_measured,
}
# Verdict mapping keys a claim may set on its check.
VERDICT_KEYS = ("if_true", "if_false", "if_partial")


def evaluate_check(ctx: Context, check: Mapping[str, Any]) -> Outcome:
    fn = check.get("fn")
    if fn not in CHECKS:
        raise ClaimsError(f"unknown check {fn!r}; one of {', '.join(CHECKS)}")
    return CHECKS[fn](ctx, check)


def hedged(zh: str) -> bool:
    """Rule 5: the quote contains 可能, 约, 大约 or 左右 (words such as 约束 or 归约 are not hedges)."""
    text = str(zh)
    for word in NOT_HEDGES:
        text = text.replace(word, "")
    return any(m in text for m in POSSIBILITY_MARKERS + APPROX_MARKERS)


def possibility_hedged(zh: str) -> bool:
    """The quote says 可能 ("may"): the claim holds if the effect occurs in at least one configuration of its scope."""
    return any(m in str(zh) for m in POSSIBILITY_MARKERS)


def approximate(zh: str) -> bool:
    """The quote says 约/大约/左右 ("about"): the claim must state its tolerance (field ``about``)."""
    text = str(zh)
    for word in NOT_HEDGES:
        text = text.replace(word, "")
    return any(m in text for m in APPROX_MARKERS)


def _holds(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> bool:
    """Whether one outcome meets its check: the value in its band, the share at least ``min_fraction`` (any point
    at all for an existential, i.e. 可能-hedged, claim), the boolean, or all/any sub-checks of an any_of."""
    if o.parts:
        held = [_holds(po, pc) for _, po, pc in o.parts]
        return any(held) if existential else all(held)
    if o.band is not None:
        return bool(o.band[0] <= float(o.value) <= o.band[1])
    if o.fraction is not None:
        f = float(o.fraction)
        return f > 0 if existential else f >= float(check.get("min_fraction", 1.0))
    return bool(o.ok)


def decide(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> tuple[str, str]:
    """(verdict, basis) of an outcome under the claim's mapping (``if_true``/``if_false``/``if_partial``).

    The only place a number becomes a verdict: the flip test and the knife-edge mark move the outcome's value (or
    share, or one sub-check) and call this again. ``existential``: the claim is 可能-hedged (rule 5)."""
    if o.verdict is not None:
        return o.verdict, o.basis or ("pending" if o.verdict == "pending" else "reading")
    basis = o.basis or "computed"
    if o.parts:
        held = [_holds(po, pc) for _, po, pc in o.parts]
        ok = any(held) if existential else all(held)
        partial = not ok and any(held)
    elif o.band is not None or o.fraction is None:
        ok, partial = _holds(o, check), False
    else:
        ok = _holds(o, check, existential)
        partial = not ok and float(o.fraction) > 0
    if ok:
        return check.get("if_true", "holds"), basis
    if partial:
        return check.get("if_partial", "conditional"), basis
    return check.get("if_false", "contradicted"), basis


def verdict_of(o: Outcome, check: Mapping[str, Any]) -> tuple[str, str]:
    """(verdict, basis) of an outcome of a claim that is not 可能-hedged (see :func:`decide`)."""
    return decide(o, check)


def _flip_one(o: Outcome, check: Mapping[str, Any]) -> Outcome:
    """The outcome with its deciding point moved across: the value to the other side of the band, the share by one
    point (towards and across ``min_fraction``), the boolean negated."""
    import dataclasses

    if o.band is not None:
        lo, hi = o.band
        v = float(o.value)
        inside = lo <= v <= hi
        if inside:  # out across the nearer finite edge
            edges = [e for e in (lo, hi) if math.isfinite(e)]
            e = min(edges, key=lambda x: abs(v - x))
            return dataclasses.replace(o, value=e + (1 if e == hi else -1) * max(abs(e), 1e-300) * 1e-6)
        e = lo if v < lo else hi
        return dataclasses.replace(o, value=e)
    if o.fraction is not None and o.n_points:
        m = float(check.get("min_fraction", 1.0))
        k = round(float(o.fraction) * o.n_points)
        k = k - 1 if float(o.fraction) >= m else k + 1
        return dataclasses.replace(o, fraction=min(max(k, 0), o.n_points) / o.n_points)
    return dataclasses.replace(o, ok=not o.ok)


def knife_edge(o: Outcome, check: Mapping[str, Any], existential: bool = False) -> tuple[bool, str]:
    """Rule 4: (knife_edge, which edge). A band check is on a knife edge when |value − edge| ≤ 2 % of a finite
    non-zero edge (an exact ``expect`` check only when it misses by at most 2 %: a match of an exact number is not
    an edge); a share check when moving one point changes the verdict; an any_of when one of its sub-checks is on a
    knife edge and flipping that sub-check changes the verdict. Only the holds / does-not-hold threshold counts: a
    universal share check (min_fraction 1) that holds at every point is not marked, nor a share of 0 where one point
    would only turn contradicted into conditional."""
    if o.verdict is not None:
        return False, ""
    if o.parts:
        base = decide(o, check, existential)[0]
        notes = []
        for i, (label, po, pc) in enumerate(o.parts):
            sub_knife, sub_note = knife_edge(po, pc)
            if not sub_knife:
                continue
            flipped = list(o.parts)
            flipped[i] = (label, _flip_one(po, pc), pc)
            import dataclasses

            if decide(dataclasses.replace(o, parts=flipped), check, existential)[0] != base:
                notes.append(f"{label}: {sub_note}")
        return bool(notes), "; ".join(notes)
    if o.band is not None:
        v = float(o.value)
        lo, hi = o.band
        if o.exact:
            e = (lo + hi) / 2
            miss = abs(v - e)
            near = not (lo <= v <= hi) and e != 0 and miss <= KNIFE_EDGE_RTOL * abs(e)
            return near, (f"{_fmt(v)} vs {_fmt(e)} ({100 * miss / abs(e):.2g} %)" if near else "")
        for e in (lo, hi):
            if math.isfinite(e) and e != 0 and abs(v - e) <= KNIFE_EDGE_RTOL * abs(e):
                return True, f"{_fmt(v)} vs edge {_fmt(e)} ({100 * abs(v - e) / abs(e):.2g} %)"
        return False, ""
    if o.fraction is not None and o.n_points:
        n, f = o.n_points, float(o.fraction)
        k = round(f * n)
        m = 1.0 / n if existential else float(check.get("min_fraction", 1.0))
        ok = k / n >= m
        if ok and (m >= 1.0 and not existential):
            return False, ""
        if ok and (k - 1) / n < m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point fewer changes the verdict"
        if not ok and (k + 1) / n >= m:
            return True, f"{k} of {n} points, threshold {_fmt(m)}: one point more changes the verdict"
    return False, ""


def load_claims(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    """The claims, schema-checked (see :func:`validate_claims`)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ClaimsError(f"{path}: cannot read the claims: {exc}") from exc
    claims = data.get("claims") if isinstance(data, Mapping) else None
    if not isinstance(claims, list):
        raise ClaimsError(f"{path}: expected a mapping with a list under 'claims'")
    problems = validate_claims(claims)
    if problems:
        raise ClaimsError(f"{path}: " + "; ".join(problems[:10]))
    return claims


def _check_problems(cid: str, check: Any) -> list[str]:
    if not isinstance(check, Mapping) or check.get("fn") not in CHECKS:
        return [f"{cid}: check.fn must be one of {', '.join(CHECKS)}"]
    out = []
    for k in VERDICT_KEYS:
        if k in check and check[k] not in VERDICTS:
            out.append(f"{cid}: check.{k} {check[k]!r} is not a verdict ({', '.join(VERDICTS)})")
    if check["fn"] == "reading":
        if check.get("verdict") not in VERDICTS:
            out.append(f"{cid}: reading verdict {check.get('verdict')!r} not in {', '.join(VERDICTS)}")
        for k in ("reason", "source"):
            if not check.get(k):
                out.append(f"{cid}: a reading check needs a {k}")
    if check["fn"] == "measured" and not check.get("variable"):
        out.append(f"{cid}: a measured check needs a variable of train/summary.nc")
    if check["fn"] == "pending" and not (check.get("stage") and check.get("reason")):
        out.append(f"{cid}: a pending check needs stage and reason")
    if check["fn"] == "needs_gpu" and not check.get("reason"):
        out.append(f"{cid}: a needs_gpu check needs a reason")
    if check["fn"] == "any_of":
        subs = check.get("checks")
        if not isinstance(subs, list) or len(subs) < 2:
            out.append(f"{cid}: any_of needs a list of at least two checks")
        else:
            for s in subs:
                if not isinstance(s, Mapping) or not s.get("label"):
                    out.append(f"{cid}: every any_of check needs a label")
                else:
                    out += _check_problems(cid, s)
    return out


def validate_claims(claims: Sequence[Any]) -> list[str]:
    """Problems of the claims list: required fields, unique ids, valid kinds, check names and verdicts."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, c in enumerate(claims):
        if not isinstance(c, Mapping):
            problems.append(f"claim #{i}: not a mapping")
            continue
        cid = str(c.get("id", f"#{i}"))
        missing = [f for f in REQUIRED_FIELDS if not c.get(f)]
        if missing:
            problems.append(f"{cid}: missing {', '.join(missing)}")
        if cid in seen:
            problems.append(f"{cid}: duplicate id")
        seen.add(cid)
        if c.get("kind") not in KINDS:
            problems.append(f"{cid}: kind {c.get('kind')!r} not in {', '.join(KINDS)}")
        if "check" in c:
            problems += _check_problems(cid, c["check"])
        if c.get("kind") == "finding" and not c.get("refines"):
            problems.append(f"{cid}: a finding names the claim it refines (refines: ID)")
        if c.get("refines") and c.get("kind") != "finding":
            problems.append(f"{cid}: only a finding (kind: finding) refines another claim")
        if approximate(c.get("zh", "")) and not c.get("about"):
            problems.append(f"{cid}: the quote says 约/大约/左右; state the tolerance (about: ...)")
        if c.get("by_construction"):
            r = c.get("reading")
            if not isinstance(r, Mapping) or r.get("verdict") not in VERDICTS or not r.get("reason"):
                problems.append(
                    f"{cid}: by_construction evidence needs a reading verdict (reading: verdict, reason)"
                )
            elif not r.get("source"):
                problems.append(f"{cid}: a reading verdict needs a source")
    ids = {str(c.get("id")) for c in claims if isinstance(c, Mapping)}
    kind_of = {str(c.get("id")): c.get("kind") for c in claims if isinstance(c, Mapping)}
    for c in claims:
        if isinstance(c, Mapping) and c.get("refines"):
            target = str(c["refines"])
            if target not in ids:
                problems.append(f"{c.get('id')}: refines {target!r}, which is not a claim")
            elif kind_of[target] == "finding":
                problems.append(f"{c.get('id')}: refines {target!r}, itself a finding")
    return problems


def config_keys(claims: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Config keys the claims read (the audit rule passes exactly these to ``hsitp audit claims``)."""
    keys: set[str] = set()

    def walk(check: Mapping[str, Any]) -> None:
        if check.get("fn") == "config_value":
            keys.add(check["key"])
        if check.get("fn") == "measured":
            keys.add("audit.accuracy_run")
        for sub in check.get("checks") or []:
            walk(sub)

    for c in claims if claims is not None else load_claims():
        walk(c["check"])
    return sorted(keys)


def circular(check: Mapping[str, Any]) -> bool:
    """Rule 11: the check evaluates the paper's own formulas at the paper's own numbers (a formula identity or value,
    a quote its own formulas and parameters recompute, a preset copied from the paper, or a stated-model table
    limited to the paper's presets), so
    agreement says the paper is consistent with its own assumptions, not that it holds."""
    fn = str(check.get("fn", ""))
    if fn in CIRCULAR_CHECKS:
        return True
    if fn == "quote":
        return str(check.get("key")) in OWN_QUOTES
    if fn == "any_of":
        return bool(check.get("checks")) and all(circular(sub) for sub in check["checks"])
    sel = check.get("sel") or {}
    hw = sel.get("hardware")
    hardware = set(hw if isinstance(hw, list) else [hw]) if hw is not None else set()
    return (
        (fn.startswith("table_") or fn == "split_regime")
        and sel.get("model") == "stated"
        and bool(hardware)
        and hardware <= PAPER_PRESETS
    )


def evaluate_claim(ctx: Context, c: Mapping[str, Any]) -> tuple[Outcome, str, str]:
    """(outcome, verdict, basis) of one claim. Evidence that holds by our own construction (``by_construction``) is
    shown but does not decide: the claim's ``reading`` verdict does (rule 3). A computed claim whose check is
    circular (rule 11) has basis ``circular``, and says ``consistent`` where it would say ``holds``."""
    try:
        o = evaluate_check(ctx, c["check"])
    except (KeyError, TypeError) as exc:
        raise ClaimsError(f"claim {c['id']}: check {c['check'].get('fn')!r} is missing {exc}") from exc
    if c.get("by_construction"):
        r = c["reading"]
        return o, r["verdict"], "reading"
    verdict, basis = decide(o, c["check"], possibility_hedged(c["zh"]))
    if basis == "computed" and circular(c["check"]):
        return o, "consistent" if verdict == "holds" else verdict, "circular"
    return o, verdict, basis


def evaluate_claims(ctx: Context, claims: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per claim (:data:`COLUMNS`), verdicts computed where a number decides them."""
    rows = []
    for c in claims if claims is not None else load_claims():
        o, verdict, basis = evaluate_claim(ctx, c)
        existential = possibility_hedged(c["zh"])
        reason = o.reason or str(c.get("reason", "")).strip()
        how, source, tolerance = o.how, o.source, o.tolerance
        if c.get("by_construction"):
            r = c["reading"]
            reason = str(r["reason"]).strip()
            how = f"by construction ({c['by_construction']}): {o.how}"
            source = f"{r['source']}; evidence: {o.source}"
        elif o.parts and verdict in ("conditional", "holds") and basis != "reading":
            held = [lbl for lbl, po, pc in o.parts if _holds(po, pc)]
            if verdict == "conditional" or (existential and len(held) < len(o.parts)):
                reason = (f"holds only under: {', '.join(held)}. " + reason).strip()
        if c.get("about"):
            tolerance = f"about: {c['about']}; {tolerance}".strip("; ")
        if (
            existential
            and basis in ("computed", "circular", "measured")
            and (o.parts or o.fraction is not None)
        ):
            tolerance = f"{tolerance}; hedged (可能): holds if it occurs at one point or more".strip("; ")
        knife, edge = (False, "") if c.get("by_construction") else knife_edge(o, c["check"], existential)
        number = (
            o.value
            if isinstance(o.value, int | float | np.number) and not isinstance(o.value, bool)
            else None
        )
        rows.append(
            {
                "id": c["id"],
                "section": str(c["section"]),
                "kind": c["kind"],
                "zh": c["zh"].strip(),
                "en": c["en"].strip(),
                "paper_value": str(c.get("paper_value", "") or o.paper_value),
                "pipeline_value": _fmt(o.value) if not isinstance(o.value, list) else str(o.value),
                "pipeline_number": float(number) if number is not None else math.nan,
                "how": how,
                "source": source,
                "tolerance": tolerance,
                "verdict": verdict,
                "basis": basis,
                "reason": reason,
                "hedged": hedged(c["zh"]),
                "knife_edge": knife,
                "edge": edge,
                "refines": str(c.get("refines", "") or ""),
            }
        )
    return rows


def verdict_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Verdicts of the claims; findings (our refined model's answers, kind ``finding``) are left out (rule 2)."""
    claims = [r for r in rows if r["kind"] != "finding"]
    return {v: sum(r["verdict"] == v for r in claims) for v in VERDICTS}


def basis_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Verdicts of the claims by basis (measured, computed, circular, reading, pending): which verdicts this run's
    measurements decided, which the paper's own assumptions did (rule 11)."""
    claims = [r for r in rows if r["kind"] != "finding"]
    out: dict[str, dict[str, int]] = {}
    for b in BASES:
        here = {v: n for v in VERDICTS if (n := sum(r["verdict"] == v and r["basis"] == b for r in claims))}
        if here:
            out[b] = here
    return out


def finding_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Verdicts of the findings alone (what the refined model says of the claims they refine)."""
    found = [r for r in rows if r["kind"] == "finding"]
    return {v: n for v in VERDICTS if (n := sum(r["verdict"] == v for r in found))}
