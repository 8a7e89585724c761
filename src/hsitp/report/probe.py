"""Report page of the probe stage: measured per-rank memory by part and throughput per plan, beside the memory
model, and the fake-tensor estimates of configurations beyond this machine.

Every measured number is labelled with the device it ran on (the files' per-P ``device`` variable) and every memory
number with its activation-checkpointing policy; the estimates say "estimated with fake tensors" (rank 0 of P in
one process: no device memory was allocated).
"""

from __future__ import annotations

import os
from itertools import product

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from hsitp.analysis.labels import computed_on, measured_on
from hsitp.analysis.read import load
from hsitp.contracts import PROBE_ESTIMATE, PROBE_MEMORY, PROBE_THROUGHPUT
from hsitp.names import DCHAG_PLANS
from hsitp.report import style
from hsitp.report.common import MEASURED, MODELLED, headline

PARTS = ("tokenisation", "aggregation", "blocks", "head")
# What a rank keeps through a step (README "Memory probe"): the transient is shown apart, as the peak.
STEADY_KINDS = ("parameters", "gradients", "optimizer", "activations")
FAKE = "estimated with fake tensors"
ESTIMATED = f"{FAKE} (FakeTensorMode, rank 0 of P in one process, nothing allocated)"
MIB = 2.0**20
GIB = 2.0**30


def load_memory(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, PROBE_MEMORY, "memory", "memory_model", "rel_err", "peak_allocated", "device")


def load_throughput(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, PROBE_THROUGHPUT, "tokens_per_s", "device")


def load_estimate(path: str | os.PathLike[str]) -> xr.Dataset:
    required = ("memory", "memory_model", "peak_allocated", "peak_model", "plan", "P", "checkpointing")
    return load(path, PROBE_ESTIMATE, *required)


def probe_device(ds: xr.Dataset) -> str:
    """The device(s) the probe ran on, from the per-P ``device`` variable, with dtype (as for bench files)."""
    devices = [str(d) for d in np.atleast_1d(ds["device"].values) if str(d) not in ("", "nan")]
    return measured_on({"device": "; ".join(devices), "dtype": ds.attrs.get("dtype")})


def _plan_label(plan: str, g: int) -> str:
    return f"{plan} (g={g})" if str(plan) in DCHAG_PLANS else str(plan)


def _points(mem: xr.Dataset) -> pd.DataFrame:
    """One row per measured point: plan, P, g, L, N, checkpointing (plans without groups once, at the first g)."""
    ran = np.isfinite(mem["memory"]).any(("part", "kind", "rank")).to_dataframe("ran").reset_index()
    ran = ran[ran["ran"]].drop(columns="ran")
    g0 = int(mem["g"].values[0])
    keep = ran["plan"].astype(str).isin(DCHAG_PLANS) | (ran["g"] == g0)
    return ran[keep].reset_index(drop=True)


def _max_rank(mem: xr.Dataset, sel: dict) -> int:
    """The rank holding the most steady memory at one point (the per-rank figures show that rank)."""
    total = mem["memory"].sel(**sel, kind=list(STEADY_KINDS)).sum(("part", "kind"), min_count=1)
    return int(total.fillna(-1).argmax("rank"))


def memory_by_part(mem: xr.Dataset) -> pd.DataFrame:
    """Long table: per point and part, the steady bytes (parameters + gradients + optimizer + activations) of the
    rank holding the most, the model's rank-0 bytes, and the rank-max transient and peak."""
    rows = []
    for pt in _points(mem).to_dict("records"):
        sel = {d: pt[d] for d in ("plan", "P", "g", "L", "N", "checkpointing")}
        r = _max_rank(mem, sel)
        at = mem.sel(**sel)
        for part in PARTS:
            rows.append(
                {
                    **sel,
                    "label": _plan_label(pt["plan"], pt["g"]),
                    "rank": r,
                    "part": part,
                    "measured": float(at["memory"].sel(part=part, kind=list(STEADY_KINDS), rank=r).sum()),
                    "model": float(at["memory_model"].sel(part=part, kind=list(STEADY_KINDS)).sum()),
                    "peak": float(at["peak_allocated"].max("rank")),
                    "peak_model": float(at["peak_model"]) if "peak_model" in at else np.nan,
                }
            )
    return pd.DataFrame(rows)


def _first_shape(df: pd.DataFrame, ds: xr.Dataset) -> tuple[pd.DataFrame, int, int]:
    """The rows of ``df`` at the file's first L and N (a figure shows one layer shape), and that L and N."""
    L0, N0 = int(ds["L"].values[0]), int(ds["N"].values[0])  # noqa: N806
    return df[(df["L"] == L0) & (df["N"] == N0)], L0, N0


def _ckpt(policy: str) -> str:
    return f"activation checkpointing: {policy}"


# --- figures -------------------------------------------------------------------------------------------------------
def memory_parts_figure(mem: xr.Dataset) -> Figure:
    """Stacked bars of the steady per-rank memory by part, one bar per plan, one panel per (checkpointing, P)."""
    df, L0, N0 = _first_shape(memory_by_part(mem), mem)  # noqa: N806
    if df.empty:
        raise ValueError(f"{mem.attrs.get('_source_path', 'probe memory')}: no measured point")
    panels = list(dict.fromkeys(zip(df["checkpointing"], df["P"], strict=True)))
    fig, axes = style.panel_grid(
        len(panels), 3, lambda ncol, nrow: style.figsize(3.4 * ncol, 3.0 * nrow + 1.6)
    )
    colours = dict(zip(PARTS, style.palette(len(PARTS)), strict=True))
    most = max(df.groupby(["checkpointing", "P"])["label"].nunique())
    for ax, (ck, P) in zip(axes, panels, strict=True):  # noqa: N806
        sub = df[(df["checkpointing"] == ck) & (df["P"] == P)]
        plans = list(dict.fromkeys(sub["label"]))
        left = np.zeros(len(plans))
        for part in PARTS:  # horizontal stacks: plan names read without rotation or overlap
            v = np.array([sub[(sub["label"] == p) & (sub["part"] == part)]["measured"].sum() for p in plans])
            ax.barh(plans, v / MIB, left=left, color=colours[part], label=part, edgecolor="0.3", lw=0.3)
            left += v / MIB
        ax.set_ylim(most - 0.5, -0.5)  # the same bar thickness in every panel, first plan on top
        ax.set_title(f"P = {P}, {_ckpt(ck)}", fontsize=8.5)
        ax.set_xlabel("MiB on the fullest rank")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    handles, names = axes[0].get_legend_handles_labels()
    style.key_below(fig, handles, len(PARTS), labels=names)
    what = f"Per-rank memory by part (parameters + gradients + AdamW state + saved activations; L = {L0}, N = {N0})"
    fig.suptitle(
        headline(what, MEASURED, f"{MEASURED} on {probe_device(mem)} (one training step, the fullest rank)")
    )
    return fig


def memory_vs_p_figure(mem: xr.Dataset) -> Figure:
    """Steady per-rank memory vs P per plan: measured (filled markers, solid) beside the memory model (hollow
    markers, dashed, drawn on top so neither hides the other), one panel per checkpointing policy. Plans whose
    measured curves coincide share one labelled line ('tp ≡ token')."""
    df, L0, N0 = _first_shape(memory_by_part(mem), mem)  # noqa: N806
    tot = df.groupby(["checkpointing", "label", "P"], sort=False)[["measured", "model"]].sum().reset_index()
    policies = list(dict.fromkeys(tot["checkpointing"]))
    fig, axes = plt.subplots(1, len(policies), figsize=(min(style.FULL_WIDTH_IN, 4.6 * len(policies)), 4.6),
                             squeeze=False, layout="constrained", sharey=True)  # fmt: skip
    plans = list(dict.fromkeys(tot["label"]))
    colours = dict(zip(plans, style.palette(len(plans)), strict=True))
    marks = dict(zip(plans, style.markers(len(plans)), strict=True))
    Ps = sorted(set(tot["P"]))  # noqa: N806
    handles: dict[str, Line2D] = {}
    for ax, ck in zip(axes.flat, policies, strict=True):
        sub = tot[tot["checkpointing"] == ck]
        for group in _coinciding(sub, plans):
            g = sub[sub["label"] == group[0]].sort_values("P")
            name = " ≡ ".join(group)
            c, m = colours[group[0]], marks[group[0]]
            ax.plot(g["P"], g["measured"] / MIB, marker=m, color=c, lw=2.2, ms=7, alpha=0.55, zorder=2)
            # the model dark, thin and on top: visible even where it equals the measurement
            ax.plot(g["P"], g["model"] / MIB, marker=m, color="0.15", lw=0.9, ms=4.5, mfc="none", ls=(0, (4, 2)),
                    zorder=3)  # fmt: skip
            handles.setdefault(name, Line2D([], [], color=c, marker=m, lw=2.2, alpha=0.7, label=name))
        style.log2_axis(ax, Ps)
        ax.minorticks_off()
        ax.set_xlim(min(Ps) / 1.3, max(Ps) * 1.3)
        ax.set_yscale("log")
        style.plain_log_ticks(ax.yaxis)
        ax.set_xlabel("P (ranks)")
        ax.set_ylabel("MiB on the fullest rank")
        ax.set_title(_ckpt(ck))
    legend = list(handles.values()) + [
        Line2D([], [], color="0.3", marker="o", lw=2.2, alpha=0.55, label="measured (filled, solid)"),
        Line2D([], [], color="0.15", marker="o", mfc="none", ms=4.5, lw=0.9, ls=(0, (4, 2)),
               label="memory model (dark, dashed, on top)"),
    ]  # fmt: skip
    style.key_below(fig, legend, 3)
    what = (
        f"Per-rank memory vs P per plan (parameters + gradients + AdamW state + saved activations; L = {L0}, "
        f"N = {N0})"
    )
    fig.suptitle(
        headline(what, MEASURED, f"{MEASURED} on {probe_device(mem)}, beside the memory model ({MODELLED})")
    )
    return fig


def _coinciding(tot: pd.DataFrame, plans: list[str]) -> list[list[str]]:
    """Plans grouped where their measured totals agree at every P (within 0.1 %): one line, one name each."""
    series = {p: tot[tot["label"] == p].set_index("P")["measured"].sort_index() for p in plans
              if (tot["label"] == p).any()}  # fmt: skip
    groups: list[list[str]] = []
    for plan, s in series.items():
        for group in groups:
            ref = series[group[0]]
            if ref.index.equals(s.index) and np.allclose(ref.values, s.values, rtol=1e-3, atol=0):
                group.append(plan)
                break
        else:
            groups.append([plan])
    return groups


def throughput_figure(thr: xr.Dataset) -> Figure:
    """Training-step throughput (tokens/s, all ranks together) vs P per plan, one panel per checkpointing policy."""
    df = thr["tokens_per_s"].to_dataframe().reset_index()
    df = df[np.isfinite(df["tokens_per_s"])]
    g0 = int(thr["g"].values[0])
    df = df[df["plan"].astype(str).isin(DCHAG_PLANS) | (df["g"] == g0)]
    df, L0, N0 = _first_shape(df, thr)  # noqa: N806
    df["label"] = [_plan_label(p, g) for p, g in zip(df["plan"], df["g"], strict=True)]
    policies = list(dict.fromkeys(df["checkpointing"]))
    fig, axes = plt.subplots(1, len(policies), figsize=(3.8 * len(policies), 3.3), squeeze=False,
                             layout="constrained", sharey=True)  # fmt: skip
    Ps = sorted(set(df["P"]))  # noqa: N806
    notes = thr["oversubscribed_note"].to_series().to_dict() if "oversubscribed_note" in thr else {}
    busy = {int(P): str(n) for P, n in notes.items() if str(n) and int(P) in Ps}
    for ax, ck in zip(axes.flat, policies, strict=True):
        sns.lineplot(data=df[df["checkpointing"] == ck], x="P", y="tokens_per_s", hue="label", marker="o", ax=ax,
                     legend=ax is axes.flat[0])  # fmt: skip
        if ax.get_legend() is not None:
            ax.get_legend().set_title("plan (g: D-CHAG groups)")  # not the frame's column name 'label'
        for P in busy:  # noqa: N806
            ax.axvspan(P / 1.25, P * 1.25, color="0.88", zorder=0, lw=0)
        style.log2_axis(ax, Ps)
        # ranks outnumbering cores time the contention, not the plan: the answer table draws no conclusion there
        ax.set_xticks(Ps, [f"{P}\noversubscribed" if P in busy else str(P) for P in Ps])
        ax.set_ylabel("tokens / s (B·N per median step)")
        ax.set_title(_ckpt(ck), fontsize=8)
    what = f"Training-step throughput vs P per plan (L = {L0}, N = {N0}, slowest rank)"
    fig.suptitle(headline(what, MEASURED, f"{MEASURED} on {probe_device(thr)}"))
    return fig


def estimate_frame(est: xr.Dataset) -> pd.DataFrame:
    """Per config: estimated and modelled peak and steady memory (GiB), D-CHAG's reported reserved memory."""
    steady = {
        k: est[k].sel(kind=list(STEADY_KINDS)).sum(("part", "kind")) for k in ("memory", "memory_model")
    }
    rep = est.get("reported_reserved_gib", xr.full_like(est["P"], np.nan, float))
    return pd.DataFrame(
        {
            "config": est["config"].values.astype(str),
            "checkpointing": est["checkpointing"].values.astype(str),
            "peak estimated [GiB]": est["peak_allocated"].values / GIB,
            "peak modelled [GiB]": est["peak_model"].values / GIB,
            "steady estimated [GiB]": steady["memory"].values / GIB,
            "steady modelled [GiB]": steady["memory_model"].values / GIB,
            "reported reserved [GiB] (D-CHAG paper, MI250X)": np.asarray(rep.values, float),
        }
    )


def estimate_figure(est: xr.Dataset) -> Figure:
    """Rank-0 peak memory per config: estimated with fake tensors beside the memory model (and D-CHAG's report),
    as dots on a log axis (a bar's length on a log axis would exaggerate ratios)."""
    df = estimate_frame(est)
    df["config"] = [f"{c} [{ck}]" if not c.endswith(ck) else c for c, ck in zip(df["config"], df["checkpointing"],
                                                                                strict=True)]  # fmt: skip
    cols = {"peak estimated [GiB]": "estimated with fake tensors", "peak modelled [GiB]": "memory model (modelled)",
            "reported reserved [GiB] (D-CHAG paper, MI250X)": "D-CHAG paper, reported (MI250X)"}  # fmt: skip
    colours = dict(zip(cols.values(), style.palette(len(cols)), strict=True))
    marks = dict(zip(cols.values(), ["o", "D", "s"], strict=True))
    vals = df[list(cols)].to_numpy(float)
    lo, hi = np.nanmin(vals[vals > 0]), np.nanmax(vals)
    unit, scale = ("MiB", 1024.0) if hi < 1 else ("GiB", 1.0)  # the unit the sizes read in
    fig, ax = plt.subplots(figsize=style.figsize(10.0, 0.24 * len(df) + 2.2), layout="constrained")
    y = np.arange(len(df))
    for col, name in cols.items():
        v = df[col].to_numpy(float) * scale
        ok = np.isfinite(v) & (v > 0)
        if not ok.any():
            continue  # e.g. no D-CHAG config in this grid: no legend entry for its report
        hollow = col == "peak modelled [GiB]"  # the model hollow: an estimate equal to it still shows
        ax.plot(v[ok], y[ok], marks[name], color=colours[name], mfc="none" if hollow else colours[name], ms=6,
                mew=1.2, ls="none", label=name)  # fmt: skip
    ax.set_yticks(y, df["config"], fontsize=7)
    ax.set_ylim(len(df) - 0.5, -0.5)
    ax.set_xscale("log")
    style.plain_log_ticks(ax.xaxis)
    ax.set_xlim(lo * scale / 1.5, hi * scale * 1.5)
    ax.set_xlabel(
        f"rank-0 peak memory [{unit}], log scale (activation checkpointing: last field of the label)"
    )
    ax.set_ylabel("")
    ax.legend(loc="best", frameon=True, framealpha=0.9)
    span = f"{fmt_gib(lo)} to {fmt_gib(hi)}"
    what = f"Rank-0 peak memory per configuration, estimated without running it ({span})"
    # the method (rank 0 of P in one process, nothing allocated) is in the output's description: with a long CPU
    # name the line ran to a third title line (the figure check fails that)
    fig.suptitle(
        headline(what, FAKE, f"{FAKE} on {computed_on(est.attrs)}, beside the memory model (modelled)")
    )
    return fig


def fmt_gib(gib: float) -> str:
    """'20 MiB', '3.1 GiB': a memory size in the unit that reads best."""
    return f"{gib * 1024:.3g} MiB" if gib < 1 else f"{gib:.3g} GiB"


# --- tables ----------------------------------------------------------------------------------------------------------
def relative_to_tp_table(mem: xr.Dataset) -> pd.DataFrame:
    """Per point and plan: steady memory of the fullest rank, in total and in tokenisation + aggregation, and
    the rank-max peak, each relative to tp at the same P, L, N and checkpointing (−74 % = 74 % less than tp)."""
    df = memory_by_part(mem)
    keys = ["P", "L", "N", "checkpointing"]
    df["tok+agg"] = np.where(df["part"].isin(["tokenisation", "aggregation"]), df["measured"], 0.0)
    per = df.groupby([*keys, "plan", "g", "label"], sort=False).agg(
        total=("measured", "sum"), tokagg=("tok+agg", "sum"), peak=("peak", "first")
    ).reset_index()  # fmt: skip
    tp = per[per["plan"] == "tp"][[*keys, "total", "tokagg", "peak"]]
    per = per.merge(tp, on=keys, how="left", suffixes=("", "_tp"))  # tp's numbers beside each plan's

    def rel(col: str) -> pd.Series:  # NaN where tp has no such point (or none of this part)
        return 100.0 * (per[col] / per[f"{col}_tp"].where(per[f"{col}_tp"] > 0) - 1.0)

    return pd.DataFrame(
        {
            "plan": per["label"], "P": per["P"], "L": per["L"], "N": per["N"],
            "activation checkpointing": per["checkpointing"],
            "total [MiB] (measured)": per["total"] / MIB, "total vs tp [%]": rel("total"),
            "tokenisation+aggregation [MiB] (measured)": per["tokagg"] / MIB,
            "tokenisation+aggregation vs tp [%]": rel("tokagg"),
            "peak [MiB] (measured)": per["peak"] / MIB, "peak vs tp [%]": rel("peak"),
        }
    )  # fmt: skip


def model_vs_measured_table(mem: xr.Dataset) -> pd.DataFrame:
    """Per part and kind: the largest |relative error| of the memory model against rank 0's measurement over
    every measured point, and where it is (plus the step's peak)."""
    pts = _points(mem)[["plan", "P", "g", "L", "N", "checkpointing"]].to_dict("records")
    rows = []
    for part, kind in product(PARTS, mem["kind"].values.astype(str)):
        rows.append(_worst(part, kind, mem["rel_err"].sel(part=part, kind=kind), pts))
    if "peak_rel_err" in mem:
        rows.append(_worst("step", "peak", mem["peak_rel_err"], pts))
    return pd.DataFrame(rows)


def _worst(part: str, kind: str, err: xr.DataArray, pts: list[dict]) -> dict:
    """The largest |relative error| of ``err`` over the measured points ``pts``, signed, and where it is."""
    finite = [(v, p) for p in pts if np.isfinite(v := float(err.sel(**p)))]
    v, p = max(finite, key=lambda t: abs(t[0])) if finite else (np.nan, None)
    at = (
        f"{_plan_label(p['plan'], p['g'])}, P={p['P']}, L={p['L']}, N={p['N']}, ckpt {p['checkpointing']}"
        if p
        else "—"
    )
    return {
        "part": part,
        "kind": kind,
        "points": len(finite),
        "largest |rel err|": abs(v),
        "signed": v,
        "at": at,
    }


def peak_policy_note(mem: xr.Dataset) -> str:
    """Where the step's peak falls (``peak_part`` of the rank with the highest peak) under each checkpointing
    policy, and how much block checkpointing lowers the rank-max peak at most over the points probed under both:
    a peak reached after the blocks' activations are freed is not lowered by checkpointing them. Empty without both
    policies or without ``peak_part``."""
    policies = [str(c) for c in mem["checkpointing"].values]
    if "peak_part" not in mem or not {"none", "blocks"} <= set(policies):
        return ""
    parts: dict[str, set[str]] = {"none": set(), "blocks": set()}
    lowered = []
    for pt in _points(mem)[lambda d: d["checkpointing"] == "none"].to_dict("records"):
        at = {d: pt[d] for d in ("plan", "P", "g", "L", "N")}
        peaks = {ck: mem["peak_allocated"].sel(**at, checkpointing=ck) for ck in parts}
        if not all(np.isfinite(v).any() for v in peaks.values()):
            continue
        for ck, v in peaks.items():
            fullest = int(v.fillna(-1).argmax("rank"))
            parts[ck].add(str(mem["peak_part"].sel(**at, checkpointing=ck, rank=fullest).item()))
        top = {ck: float(v.max("rank")) for ck, v in peaks.items()}
        lowered.append(100.0 * (1.0 - top["blocks"] / top["none"]))
    if not lowered:
        return ""
    where = {ck: ", ".join(sorted(v)) for ck, v in parts.items()}
    at = (
        f"in {where['none']} under both policies" if where["none"] == where["blocks"]
        else f"in {where['none']} without checkpointing, in {where['blocks']} with block checkpointing"
    )  # fmt: skip
    most = max(0.0, *lowered)  # under 1 %: no saving worth the recomputation
    verdict = (
        f"does not lower it here (by at most {most:.2g} %)"
        if most < 1.0
        else f"lowers it by up to {most:.3g} %"
    )
    return f"Peak {at} at every point probed with both: block checkpointing {verdict}."


def relative_to_tp_caption(mem: xr.Dataset) -> str:
    note = peak_policy_note(mem)
    return (
        "Per-plan memory relative to tp at the same P, L, N and activation-checkpointing policy: parameters + "
        "gradients + AdamW state + saved activations on the fullest rank, in total and in tokenisation + "
        f"aggregation, and the rank-max peak ({MEASURED} on {probe_device(mem)})."
        + (f" {note}" if note else "")
    )


def model_vs_measured_caption(mem: xr.Dataset) -> str:
    return (
        "Memory model (modelled, rank 0) against the measurement: the largest |(model - measured) / measured| per "
        f"part and kind over every measured point and checkpointing policy ({MEASURED} on {probe_device(mem)})."
    )


def estimate_caption(est: xr.Dataset) -> str:
    return (
        f"Rank-0 memory {ESTIMATED} on {computed_on(est.attrs)}, beside the memory model ({MODELLED}) and the D-CHAG "
        "paper's reported max_memory_reserved (MI250X) where known; the checkpointing policy per config."
    )
