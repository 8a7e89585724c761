"""Report page of the bench stage: measured CCR beside the paper's stated model and the calibrated refined model.

Every measured number is labelled with the device it was timed on (the files' ``device`` attribute); the models
on this page are calibrated on that same device (``calibration.nc``). The paper's section 8.1 and 8.2 tables put
the cost stage's modelled CCR (on the paper's hardware presets) beside the layer measured here, where the bench
grid holds the same N, D and P.
"""

from __future__ import annotations

import math
import os
from itertools import product

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hsitp.analysis.labels import measured_on, modelled_for
from hsitp.analysis.read import json_attr, load, need
from hsitp.contracts import CALIBRATION, MICROBENCH, MODEL_VS_MEASURED
from hsitp.names import PLANS
from hsitp.report import style
from hsitp.report.common import MEASURED, MODELLED, headline, log_limits
from hsitp.report.cost import MODEL_STYLE, paper_cases

HELD_OUT, NOT_MEASURED = 1, -1  # model_vs_measured held_out flags (0: fitted)
MODEL_MARKER = {"stated": "v", "refined": "^"}  # hollow: visible where a sweep has a single P
SPLIT_OPS = {
    "channel": "attn_channel",
    "token": "attn_token",
    "2d": "attn_2d",
}  # the attention layer per split


def load_microbench(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, MICROBENCH, "time_median", "exposed_comm")


def load_calibration(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, CALIBRATION)


def load_model_vs_measured(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, MODEL_VS_MEASURED, "ccr_measured", "ccr_stated", "ccr_refined", "held_out")


def points(mvm: xr.Dataset) -> pd.DataFrame:
    """One row per measured point with P > 1 (P = 1 has no communication): measured and both models' CCR."""
    cols = ["ccr_measured", "ccr_stated", "ccr_refined", "rel_err_stated", "rel_err_refined", "held_out"]
    cols = [c for c in cols if c in mvm]
    df = mvm[cols].to_dataframe().reset_index()
    df = df[(df["P"] > 1) & (df["held_out"] != NOT_MEASURED) & np.isfinite(df["ccr_measured"])]
    df["subset"] = np.where(df["held_out"] == HELD_OUT, "held out", "fitted")
    return df.reset_index(drop=True)


def _counts(mvm: xr.Dataset) -> dict[str, int]:
    """Points with communication (P > 1, CCR > 0) per subset, as the file's summary counts them."""
    df = points(mvm)
    df = df[df["ccr_measured"] > 0]
    return {s: int((df["subset"] == s).sum()) for s in ("fitted", "held out")}


def _basis(mvm: xr.Dataset) -> str:
    """The second title line: measured on which device, beside which models (the counts go to the legend)."""
    return f"{MEASURED} on {measured_on(mvm.attrs)}, beside the stated (paper's formulas) and refined models calibrated there"


def _device(mvm: xr.Dataset | None) -> str:
    """The device a section 8.1 / 8.2 table's measured columns come from."""
    return measured_on(mvm.attrs) if mvm is not None else "no bench file"


def _op_title(op: str) -> str:
    """'attn_channel (channel split)': the attention ops named by the split they implement."""
    split = {v: k for k, v in SPLIT_OPS.items()}.get(op)
    return f"{op} ({split} split)" if split else op


# --- figures -------------------------------------------------------------------------------------------------------
def ccr_vs_p_figure(mvm: xr.Dataset) -> Figure:
    """CCR vs P per op (the attention ops are the three splits): measured points, stated and refined lines, one
    colour per layer shape (N, D), the shapes side by side at each P. P = 1 has no communication (CCR = 0, not on a
    log axis); when the bench measured a single P > 1 the title says so: one point per shape, no trend in P."""
    df = points(mvm)
    if df.empty:
        raise ValueError("model_vs_measured holds no point with P > 1: nothing communicates, no CCR to plot")
    L0, dt0 = mvm["L"].values[0], mvm["dtype"].values[0]
    df = df[(df["L"] == L0) & (df["dtype"] == dt0)].copy()
    Ps = sorted(int(p) for p in set(df["P"]))
    df["shape"] = [f"N={n}, D={d}" for n, d in zip(df["N"], df["D"], strict=True)]
    ops = [str(o) for o in mvm["op"].values if o in set(df["op"])]
    shapes = list(dict.fromkeys(df.sort_values(["D", "N"])["shape"]))
    colours = dict(zip(shapes, style.palette(len(shapes)), strict=True))
    # side by side at each P: a factor 2**(±0.1 per shape) on the log2 axis, the same for every P of a shape
    dodge = {s: 2.0 ** (0.1 * (i - (len(shapes) - 1) / 2)) for i, s in enumerate(shapes)}
    fig, axes = style.panel_grid(len(ops), 3, lambda ncol, nrow: (3.5 * ncol, 2.7 * nrow + 1.4))
    positive = [v for c in ("ccr_measured", "ccr_refined", "ccr_stated") for v in df[c] if v > 0]
    lo, hi = log_limits(positive)
    for ax, op in zip(axes, ops, strict=True):
        _ccr_panel(ax, df[df["op"] == op], colours, dodge)
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        style.log2_axis(ax, Ps)
        ax.minorticks_off()
        ax.set_xlim(min(Ps) / 1.5, max(Ps) * 1.5)
        ax.set(title=_op_title(op), xlabel="P (ranks)", ylabel="CCR = T_comm / T_comp")
    n = _counts(mvm)
    handles = [Line2D([], [], color=colours[s], marker="s", ls="none", label=s) for s in shapes]
    handles += [
        Line2D([], [], color="0.3", marker=m, mec="k", ls="none", label=f"measured, {s} ({n[s]})")
        for s, m in (("fitted", "o"), ("held out", "X"))
    ]
    handles += [
        Line2D([], [], color="0.3", ls=MODEL_STYLE[m], marker=MODEL_MARKER[m], mfc="none", label=f"{m} model")
        for m in ("stated", "refined")
    ]
    style.key_below(fig, handles, min(len(handles), 4))
    what = f"CCR vs P per layer (L = {L0}, {dt0})"
    if len(Ps) == 1:
        what += f": P = {Ps[0]} only (P = 1 has no communication), so one point per shape and no trend in P"
    fig.suptitle(headline(what, MEASURED, _basis(mvm)))
    return fig


def _ccr_panel(ax: Axes, sub: pd.DataFrame, colours: dict[str, str], dodge: dict[str, float]) -> None:
    """One op's panel of :func:`ccr_vs_p_figure`: per shape the stated and refined lines and the measured points
    (fitted filled, held out crossed), CCR = 1 dotted."""
    for shape, g in sub.groupby("shape", sort=False):
        g = g.sort_values("P")
        c, x = colours[shape], g["P"] * dodge[shape]
        for model in ("stated", "refined"):
            ax.plot(x, g[f"ccr_{model}"], color=c, ls=MODEL_STYLE[model], lw=1, marker=MODEL_MARKER[model],
                    mfc="none", ms=5)  # fmt: skip
        for subset, marker in (("fitted", "o"), ("held out", "X")):
            h = g["subset"] == subset
            ax.plot(x[h], g["ccr_measured"][h], marker, color=c, ms=6, mec="k", mew=0.4, ls="none")
    if not (sub["ccr_measured"] > 0).any():
        ax.text(0.5, 0.5, "no collective in this layer:\nCCR = 0 (nothing to draw\non a log axis)",
                transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.3")  # fmt: skip
    ax.axhline(1.0, color="0.3", lw=0.7, ls=":")


def predicted_vs_measured_figure(mvm: xr.Dataset) -> Figure:
    """Predicted vs measured CCR on log-log axes with the identity line, one panel per model; colour and marker
    name the op, a filled marker a fitted point and a hollow one a held-out point."""
    df = points(mvm)
    if df.empty:
        raise ValueError("model_vs_measured holds no point with P > 1: nothing to compare")
    summary = json_attr(mvm, "summary", {}) or {}
    ops = list(dict.fromkeys(df["op"]))
    colours = dict(zip(ops, style.palette(len(ops)), strict=True))
    marks = dict(zip(ops, style.markers(len(ops)), strict=True))
    positive = [v for c in ("ccr_measured", "ccr_stated", "ccr_refined") for v in df[c] if v > 0]
    lo, hi = log_limits(positive)
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.6), sharex=True, sharey=True, layout="constrained")
    for ax, model in zip(axes, ("stated", "refined"), strict=True):
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=0.8)
        for op in ops:
            for subset in ("fitted", "held out"):
                h = df[(df["op"] == op) & (df["subset"] == subset)]
                face = colours[op] if subset == "fitted" else "none"
                ax.plot(h["ccr_measured"], h[f"ccr_{model}"], marks[op], color=colours[op], mfc=face, mew=1.2,
                        ms=6, ls="none")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("measured CCR")
        ax.set_ylabel(f"{model} model CCR (calibrated)")
        err = summary.get("held_out", {}).get(f"median_abs_rel_err_{model}")
        fit = summary.get("fitted", {}).get(f"median_abs_rel_err_{model}")
        ax.set_title(f"{model}: median |rel. error|\nheld out {_pct(err)}, fitted {_pct(fit)}")
    silent = {o for o in ops if not (df[df["op"] == o]["ccr_measured"] > 0).any()}
    handles = [Line2D([], [], color=colours[o], marker=marks[o], ls="none",
                      label=f"{o} (no collective: CCR = 0, not drawn)" if o in silent else o) for o in ops]  # fmt: skip
    n = _counts(mvm)
    handles += [
        Line2D([], [], color="0.3", marker="o", ls="none", label=f"fitted point (filled, {n['fitted']})"),
        Line2D([], [], color="0.3", marker="o", mfc="none", ls="none",
               label=f"held-out point (hollow, {n['held out']})"),
        Line2D([], [], color="0.3", label="identity"),
    ]  # fmt: skip
    style.key_below(fig, handles, 4)
    what = "Predicted vs measured CCR (each point: one layer at one P > 1, N, D, L)"
    fig.suptitle(headline(what, MEASURED, _basis(mvm)))
    return fig


def _pct(x: float | None) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f} %"


def compute_vs_comm_figure(mb: xr.Dataset) -> Figure:
    """Per op and P > 1: compute-only time, collective-only time and exposed communication (full − compute),
    the mean over repeats (the estimate every derived quantity uses), one panel per op and P, wrapped in rows."""
    need(mb, "time", "exposed_comm")
    # the mean over repeats; recomputed from the repeats where a file lacks time_mean (the committed bench fixtures,
    # tests/fixtures/report_bench, measured once on a machine they name, predate it: the page still draws them)
    mean = mb["time_mean"] if "time_mean" in mb else mb["time"].mean(mb["time"].dims[-1])
    L0, dt0 = mb["L"].values[0], mb["dtype"].values[0]
    Ps = [int(p) for p in mb["P"].values if p > 1]
    if not Ps:
        raise ValueError("microbench holds only P = 1: no communication to show")
    parts = (
        "compute only",
        "collectives only",
        "exposed comm (full − compute; under collectives only: overlap or noise)",
    )
    rows = []
    for op, P, N, D in product(mb["op"].values, Ps, mb["N"].values, mb["D"].values):
        sel = {"op": op, "P": P, "N": N, "D": D, "L": L0, "dtype": dt0}
        t = mean.sel(**sel)
        values = (t.sel(mode="compute"), t.sel(mode="comm"), mb["exposed_comm"].sel(**sel))
        for part, v in zip(parts, values, strict=True):
            rows.append(
                {
                    "op": str(op),
                    "P": P,
                    "shape": f"N={int(N)}\nD={int(D)}",
                    "part": part,
                    "ms": 1e3 * float(v),
                }
            )
    df = pd.DataFrame(rows).dropna()
    panels = list(dict.fromkeys(zip(df["op"], df["P"], strict=True)))
    n_shapes = len(set(df["shape"]))
    fig, axes = style.panel_grid(
        len(panels), 3,
        lambda ncol, nrow: (min(style.FULL_WIDTH_IN, max(2.2, 0.55 * n_shapes + 1.0) * ncol), 2.3 * nrow + 1.3),
    )  # fmt: skip
    palette = dict(zip(parts, style.palette(3), strict=True))
    for ax, (op, P) in zip(axes, panels, strict=True):
        sub = df[(df["op"] == op) & (df["P"] == P)]
        sns.barplot(sub, x="shape", y="ms", hue="part", palette=palette, ax=ax, legend=False)
        ax.axhline(0, color="0.2", lw=0.6)
        ax.set_title(f"{op}, P = {P}")
        ax.set_xlabel("")
        ax.set_ylabel("mean time [ms]")
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, label=k) for k, c in palette.items()]
    style.key_below(fig, handles, 3 if fig.get_figwidth() >= 8 else 1)
    what = f"Compute vs exposed communication per layer (fwd + bwd, L = {L0}, {dt0})"
    fig.suptitle(headline(what, MEASURED, f"{MEASURED} on {measured_on(mb.attrs)}; mean over repeats"))
    return fig


# --- tables --------------------------------------------------------------------------------------------------------
def summary_table(mvm: xr.Dataset) -> pd.DataFrame:
    """Median |relative error| of the stated and refined models, all ops and per op, held out vs fitted."""
    rows = []
    groups = [("all ops", json_attr(mvm, "summary", {}) or {})]
    groups += list((json_attr(mvm, "summary_by_op", {}) or {}).items())
    for op, by_subset in groups:
        for subset in ("held_out", "fitted"):
            s = by_subset.get(subset)
            if not s:
                continue
            rows.append(
                {
                    "op": op,
                    "points": subset.replace("_", " "),
                    "n": int(s.get("n_points", 0)),
                    "median |rel err| stated": s.get("median_abs_rel_err_stated"),
                    "median |rel err| refined": s.get("median_abs_rel_err_refined"),
                    "median |rel err| traced (diagnostic)": s.get("median_abs_rel_err_traced"),
                }
            )
    return pd.DataFrame(rows)


def summary_caption(mvm: xr.Dataset) -> str:
    return (
        f"Model vs measured CCR: median |relative error| of the paper's stated model and of the refined model, "
        f"both calibrated on the device measured ({measured_on(mvm.attrs)}); 'held out' points were not used by the "
        "calibration fit. 'traced' is a diagnostic (the ring model on the collectives the layer issued)."
    )


def _measured_point(
    mvm: xr.Dataset | None, op: str, N: int, D: int, P: int
) -> tuple[float, float, float, str]:
    """(measured CCR, refined CCR calibrated on the bench device, stated CCR likewise, note) for one layer."""
    nan = float("nan")
    if mvm is None:
        return nan, nan, nan, "no bench file"
    lacking = ", ".join(
        f"{k}={v}" for k, v in (("op", op), ("N", N), ("D", D), ("P", P)) if v not in mvm[k].values
    )
    if lacking:
        return nan, nan, nan, f"not measured (bench grid lacks {lacking})"
    L0, dt0 = mvm["L"].values[0], mvm["dtype"].values[0]
    sel = {"op": op, "N": N, "D": D, "P": P, "L": L0, "dtype": dt0}
    flag = int(mvm["held_out"].sel(**sel))
    if flag == NOT_MEASURED:
        return nan, nan, nan, "not measured (point skipped)"
    note = f"{op}, L={L0}, {dt0}, {'held out' if flag == HELD_OUT else 'fitted'}"
    return (
        float(mvm["ccr_measured"].sel(**sel)),
        float(mvm["ccr_refined"].sel(**sel)),
        float(mvm["ccr_stated"].sel(**sel)),
        note,
    )


def ccr_8_1_table(ccr: xr.Dataset, mvm: xr.Dataset | None = None) -> pd.DataFrame:
    """Paper section 8.1: block CCR and throughput per case, P and split on each preset (modelled), beside the
    attention layer of that split measured on the bench device at the same N, D = C and P (where measured)."""
    need(ccr, "ccr", "relative_throughput", "N", "layer_ccr")
    C = int(ccr.attrs.get("embed_dim", 0))
    dev = _device(mvm)
    rows = []
    for case, P, split in product(map(str, ccr["case"].values), ccr["P"].values, ccr["split"].values):
        N = int(ccr["N"].sel(case=case))
        row: dict[str, object] = {"case": case, "N": N, "C": C, "P": int(P), "split": str(split)}
        for hw in ccr["hardware"].values:
            sel = {"case": case, "P": P, "hardware": hw, "split": split}
            for model in ccr["model"].values:
                row[f"block CCR {model} [{hw}]"] = float(ccr["ccr"].sel(**sel, model=model))
            row[f"attn CCR refined [{hw}]"] = float(ccr["layer_ccr"].sel(**sel, layer="attn"))
            row[f"throughput stated [{hw}]"] = float(ccr["relative_throughput"].sel(**sel, model="stated"))
        meas, refined, stated, note = _measured_point(mvm, SPLIT_OPS.get(str(split), ""), N, C, int(P))
        row[f"attn CCR measured [{dev}]"] = meas
        row["attn CCR refined [calibrated, same device]"] = refined
        row["attn CCR stated [calibrated, same device]"] = stated
        row["measured point"] = note
        rows.append(row)
    return pd.DataFrame(rows)


def grid_gaps(ccr: xr.Dataset, mvm: xr.Dataset | None) -> str:
    """One line: which P, N and D = C of a section 8.1/8.2 table the bench grid lacks (their measured cells stay
    empty), e.g. 'The bench measured P = 1, 2, N = 144, 324, 576, D = 128, 256; it lacks P = 4, 8 and N = 5776'."""
    if mvm is None:
        return "No bench file: every measured cell is empty."
    want = {
        "P": sorted({int(p) for p in ccr["P"].values}),
        "N": sorted({int(n) for n in ccr["N"].values}),  # every case's
        "D": [int(ccr.attrs.get("embed_dim", 0))],
    }
    have = {k: sorted({int(v) for v in mvm[k].values}) for k in want}
    lacks = [f"{k} = {', '.join(map(str, sorted(set(want[k]) - set(have[k]))))}" for k in want
             if set(want[k]) - set(have[k])]  # fmt: skip
    measured = ", ".join(f"{k} = {', '.join(map(str, have[k]))}" for k in want)
    if not lacks:
        return f"The bench measured {measured}: every row has its measured point."
    return (
        f"The bench measured {measured}; it lacks {' and '.join(lacks)} of this table, so those rows have no "
        "measured cell (the reason is given per row)."
    )


def ccr_8_1_caption(ccr: xr.Dataset, mvm: xr.Dataset | None) -> str:
    dev = _device(mvm)
    return (
        f"{grid_gaps(ccr, mvm)}  \n"  # a line of its own in Markdown (hard break), a space in LaTeX
        f"Paper section 8.1, reproduced: block CCR (stated and refined) and stated relative throughput, "
        f"{MODELLED}, {modelled_for(ccr.attrs, list(ccr['hardware'].values))}; beside them the attention layer of the "
        f"same split {MEASURED} on {dev} at the same N, D = C and P with both models calibrated on that device "
        "(a single layer, not the whole block; empty where the bench grid lacks the point)."
    )


def bench_groups(mb: xr.Dataset) -> int | None:
    """D-CHAG group count the bench's aggregation layers used (microbench ``op_settings``)."""
    groups = (json_attr(mb, "op_settings", {}) or {}).get("groups")
    return int(groups) if groups is not None else None


def dchag_8_2_table(
    ccr: xr.Dataset, mvm: xr.Dataset | None = None, groups: int | None = None
) -> pd.DataFrame:
    """Paper section 8.2: whole-model CCR, throughput and memory of pure TP vs D-CHAG per case, P and g
    (modelled), beside the aggregation layer of each scheme measured on the bench device (where measured).

    ``groups`` is the bench's D-CHAG group count (:func:`bench_groups`): a D-CHAG row is paired with a
    measurement only at that g (pure TP's aggregation does not depend on g)."""
    need(ccr, "scheme_ccr", "scheme_relative_throughput", "scheme_memory", "N")
    C = int(ccr.attrs.get("embed_dim", 0))
    dev = _device(mvm)
    rows, memory = [], f"memory/device [GiB] ({ccr_memory_policy(ccr)})"
    for case, P, g, scheme in product(
        paper_cases(ccr), ccr["P"].values, ccr["g"].values, ccr["scheme"].values
    ):
        N = int(ccr["N"].sel(case=case))
        row: dict[str, object] = {
            "case": case,
            "N": N,
            "C": C,
            "P": int(P),
            "g": int(g),
            "scheme": str(scheme),
        }
        for hw, model in product(ccr["hardware"].values, ccr["model"].values):
            sel = {"case": case, "P": P, "hardware": hw, "g": g, "scheme": scheme, "model": model}
            row[f"CCR {model} [{hw}]"] = float(ccr["scheme_ccr"].sel(sel))
            row[f"throughput {model} [{hw}]"] = float(ccr["scheme_relative_throughput"].sel(sel))
        row[memory] = float(ccr["scheme_memory"].sel(case=case, P=P, g=g, scheme=scheme)) / 2**30
        if scheme != "tp" and (groups is None or int(g) != groups):
            why = "unknown" if groups is None else str(groups)
            meas, refined, note = math.nan, math.nan, f"not measured (bench D-CHAG groups = {why})"
        else:
            op = PLANS[str(scheme)].op if str(scheme) in PLANS else ""
            meas, refined, _, note = _measured_point(mvm, op, N, C, int(P))
        row[f"aggregation CCR measured [{dev}]"] = meas
        row["aggregation CCR refined [calibrated, same device]"] = refined
        row["measured point"] = note
        rows.append(row)
    return pd.DataFrame(rows)


def ccr_memory_policy(ccr: xr.Dataset) -> str:
    """The activation-checkpointing policy ccr.nc's ``scheme_memory`` was modelled with (its attribute; a file
    written before it was recorded says so rather than guessing)."""
    policy = ccr["scheme_memory"].attrs.get("activation_checkpointing") if "scheme_memory" in ccr else None
    return f"activation checkpointing: {policy or 'not recorded in this ccr.nc'}"


def dchag_8_2_caption(ccr: xr.Dataset, mvm: xr.Dataset | None) -> str:
    dev = _device(mvm)
    return (
        "Paper section 8.2, reproduced: whole-model CCR and throughput of pure TP vs D-CHAG (linear and "
        f"cross-attention partial aggregators) and per-device memory ({ccr_memory_policy(ccr)}), {MODELLED}, "
        f"{modelled_for(ccr.attrs, list(ccr['hardware'].values))}; beside them the aggregation layer of each scheme "
        f"{MEASURED} on {dev} (one layer, not the whole model; only at the bench's group count)."
    )


def points_table(mvm: xr.Dataset) -> pd.DataFrame:
    """Every measured point (P > 1) with both models' CCR and relative errors."""
    return points(mvm).drop(columns=["held_out"])


def calibration_table(cal: xr.Dataset) -> pd.DataFrame:
    """What the calibration fitted on the bench device: alpha, beta per collective; the compute model per op."""
    need(cal, "alpha", "beta")
    rows: list[dict[str, object]] = [
        {
            "fitted for": f"collective {c}",
            "alpha [s]": float(cal["alpha"].sel(collective=c)),
            "beta [B/s]": float(cal["beta"].sel(collective=c)),
            "training points": int(cal["n_points"].sel(collective=c)) if "n_points" in cal else None,
        }
        for c in cal["collective"].values
    ]
    for op in cal["op"].values:
        row: dict[str, object] = {"fitted for": f"op {op}"}
        for var, label in (
            ("achieved_flops", "achieved F [FLOP/s]"),
            ("compute_overhead", "compute overhead [s]"),
            ("compute_rate", "FLOP-term rate [FLOP/s]"),
            ("mem_bandwidth", "traffic-term rate [B/s]"),
            ("sequence_factor", "sequence factor"),
        ):
            if var in cal:
                row[label] = float(cal[var].sel(op=op))
        rows.append(row)
    return pd.DataFrame(rows)


def calibration_caption(cal: xr.Dataset) -> str:
    return (
        f"Calibration fitted to the microbenchmarks on {measured_on(cal.attrs)} (world sizes "
        f"{json_attr(cal, 'world_sizes', '?')}): {cal.attrs.get('model', '')}. Fitted to measurements, on the "
        f"training subset only (hold-out fraction {cal.attrs.get('holdout_fraction', '?')})."
    )


def points_caption(mvm: xr.Dataset) -> str:
    return (
        f"Every measured point with P > 1: CCR {MEASURED} on {measured_on(mvm.attrs)} beside the stated and refined "
        "models calibrated on the same device, relative errors, and whether the calibration fit saw the point."
    )
