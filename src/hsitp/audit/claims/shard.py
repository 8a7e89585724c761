"""The checks on the committed one-GPU shard timings (``results/reference/h200-check/shard_*.nc``, kind
``bench_shard``): rank 0's shard of each layer timed on one GPU (fwd + bwd, collectives as no-ops, 5
repeats) with its communication modelled from the GPU's preset (ring model on the traced collectives). Their CCR is
*half-measured*: the compute measured, the communication modelled. Their outcomes carry basis ``half-measured``, which
only a finding may show: they never set a claim's verdict (docs/audit.md rule 8).

A finding's point counts only where its measured range lies wholly on one side (the bench's rule applied to the
shard's repeats): the CCR range is the modelled communication over the slowest and the fastest repeat; two ops are
ordered only where their ranges lie apart, a value only where the range lies wholly on one side of it. The shards
sit at the paper's sizes (D = 256, L = 200, N = 324 and 5776, P = 2/4/8 within one node).
"""

from __future__ import annotations

import math
from pathlib import Path

import xarray as xr

from hsitp.audit.claims import checks
from hsitp.audit.claims.core import GPU_REFERENCE, OPS, Context, Outcome, _fmt, pending
from hsitp.audit.claims.measured import _share

HALF = "half-measured"  # the basis of every outcome here: a finding, never a verdict (docs/audit.md rule 8)


def _shards(ctx: Context) -> tuple[xr.Dataset | None, Path, Outcome | None]:
    """Every shard file of the GPU reference merged along op, or a pending outcome naming the folder."""
    folder = ctx.reference_dir(GPU_REFERENCE)
    files = sorted(folder.glob("shard_*.nc")) if folder.exists() else []
    if not files:
        why = f"pending: no shard timings in {folder} (benchmarks/gpu_check.sh on a GPU: bench shard mode)"
        return None, folder, pending(folder, why, HALF)
    from hsitp.contracts import BENCH_SHARD

    parts = [BENCH_SHARD.read(f) for f in files]
    lo_hi = [
        xr.Dataset(
            {
                "ccr": ds["ccr_half_measured"],
                "lo": ds["t_comm_modelled"] / ds["time"].max("rep"),
                "hi": ds["t_comm_modelled"] / ds["time"].min("rep"),
            }
        )
        for ds in parts
    ]
    merged = xr.merge(lo_hi, compat="no_conflicts", join="outer", combine_attrs="drop")
    merged.attrs = {
        k: parts[0].attrs.get(k, "") for k in ("measured", "modelled", "hardware_assumptions", "dtype")
    }
    for f in files:
        ctx.inputs[f"gpu_{f.stem}"] = f
    return merged, folder, None


def _what(ds: xr.Dataset, folder: Path) -> str:
    return (
        f"half-measured on the committed one-GPU check {folder} ({ds.attrs.get('measured', '')}; communication "
        f"modelled from its preset, no collective ran; {ds.attrs.get('dtype', '')}, batch 1)"
    )


def _points(ds: xr.Dataset, op: str, sel: checks.Sel) -> list[tuple[str, float, float, float]]:
    """(label, median, low, high) of one op's CCR at every communicating point (P > 1) of ``sel``."""
    if op not in [str(x) for x in ds["op"].values]:
        return []
    sub = ds.sel(op=op)
    for k, v in (sel or {}).items():
        vals = v if isinstance(v, list) else [v]
        sub = sub.sel({k: [x for x in vals if x in sub[k].values]})
    sub = sub.where(sub["P"] > 1, drop=True)
    out = []
    st = sub.stack(_pt=list(sub["ccr"].dims))
    for i in range(st.sizes["_pt"]):
        m, lo, hi = (float(st[n].values[i]) for n in ("ccr", "lo", "hi"))
        if not math.isfinite(m):
            continue
        lbl = ", ".join(f"{d}={_fmt(st[d].values[i].item())}" for d in ("N", "P"))
        out.append((lbl, m, lo, hi))
    return out


def check_shard_value(ctx: Context, a: checks.ShardValue) -> Outcome:
    """The half-measured CCR of ``ops`` at the points of ``sel`` (N, P) passing ``op`` ``value``: the share of
    decided points (the range over repeats wholly on one side of ``value``)."""
    ds, folder, absent = _shards(ctx)
    if absent is not None:
        return absent
    f, x = OPS[a.op], float(a.value)
    pts, left = [], []
    for opname in a.ops:
        for lbl, m, lo, hi in _points(ds, opname, a.sel or {}):
            shown = f"{opname} {lbl}: {_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]"
            if bool(f(lo, x)) != bool(f(hi, x)):
                left.append(f"{shown} (repeats on both sides of {_fmt(x)})")
                continue
            pts.append((f"{opname} {lbl}", bool(f(m, x)), f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]"))
    return _share(
        pts,
        a,
        f"{_what(ds, folder)}: share of {len(pts)} decided point(s) where the CCR (median [range over repeats]) "
        f"{a.op} {_fmt(x)}",
        f"{folder}/shard_*.nc:ccr_half_measured",
        basis=HALF,
        left_out=left,
        none=(folder, f"no decided point of {a.ops} at {dict(a.sel or {})}"),
    )


def check_shard_compare(ctx: Context, a: checks.ShardCompare) -> Outcome:
    """Two ops' half-measured CCR at the same point (N, P of ``sel``): the share of decided points (their ranges
    over repeats apart) where CCR(``lhs``) ``op`` CCR(``rhs``)."""
    ds, folder, absent = _shards(ctx)
    if absent is not None:
        return absent
    f = OPS[a.op]
    left_pts = {lbl: (m, lo, hi) for lbl, m, lo, hi in _points(ds, a.lhs, a.sel or {})}
    right_pts = {lbl: (m, lo, hi) for lbl, m, lo, hi in _points(ds, a.rhs, a.sel or {})}
    pts, left = [], []
    for lbl in sorted(set(left_pts) & set(right_pts)):
        (ml, ll, hl), (mr, lr, hr) = left_pts[lbl], right_pts[lbl]
        shown = f"{a.lhs} {_fmt(ml)} [{_fmt(ll)}, {_fmt(hl)}] vs {a.rhs} {_fmt(mr)} [{_fmt(lr)}, {_fmt(hr)}]"
        if not (hl < lr or hr < ll):
            left.append(f"{lbl}: {shown} (ranges overlap)")
            continue
        pts.append((lbl, bool(f(ml, mr)), shown))
    return _share(
        pts,
        a,
        f"{_what(ds, folder)}: share of {len(pts)} decided point(s) (ranges over repeats apart) where "
        f"CCR({a.lhs}) {a.op} CCR({a.rhs})",
        f"{folder}/shard_*.nc:ccr_half_measured",
        basis=HALF,
        left_out=left,
        none=(folder, f"no decided point of {a.lhs} vs {a.rhs} at {dict(a.sel or {})}"),
    )
