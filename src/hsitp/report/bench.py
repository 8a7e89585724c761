"""Report page of the bench stage: measured CCR beside the paper's stated model and the calibrated refined model.

Every measured number is labelled with the device it was timed on (the files' ``device`` attribute); the models
on this page are calibrated on that same device (``calibration.nc``). The paper's section 8.1 and 8.2 tables put
the cost stage's modelled CCR (on the paper's hardware presets) beside the layer measured here, where the bench
grid holds the same N, D and P.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from hsitp.report.common import (
    MEASURED,
    MODELLED,
    headline,
    json_attr,
    load,
    log_limits,
    measured_on,
    modelled_for,
    need,
)

HELD_OUT, FITTED, NOT_MEASURED = 1, 0, -1  # model_vs_measured held_out flags
MODEL_STYLE = {"stated": (0, (4, 2)), "refined": "solid"}
MODEL_MARKER = {"stated": "v", "refined": "^"}  # hollow: visible where a sweep has a single P
SPLIT_OPS = {
    "channel": "attn_channel",
    "token": "attn_token",
    "2d": "attn_2d",
}  # the attention layer per split
SCHEME_OPS = {
    "tp": "agg_tp",
    "dchag_l": "agg_dchag_l",
    "dchag_c": "agg_dchag_c",
}  # the aggregation per scheme


def load_microbench(path: str | os.PathLike[str]) -> xr.Dataset:
    ds = load(path, kind="microbench")
    need(ds, "time_median", "exposed_comm")
    return ds


def load_calibration(path: str | os.PathLike[str]) -> xr.Dataset:
    return load(path, kind="calibration")


def load_model_vs_measured(path: str | os.PathLike[str]) -> xr.Dataset:
    ds = load(path, kind="model_vs_measured")
    need(ds, "ccr_measured", "ccr_stated", "ccr_refined", "held_out")
    return ds


def points(mvm: xr.Dataset) -> pd.DataFrame:
    """One row per measured point with P > 1 (P = 1 has no communication): measured and both models' CCR."""
    cols = ["ccr_measured", "ccr_stated", "ccr_refined", "rel_err_stated", "rel_err_refined", "held_out"]
    cols = [c for c in cols if c in mvm]
    df = mvm[cols].to_dataframe().reset_index()
    df = df[(df["P"] > 1) & (df["held_out"] != NOT_MEASURED) & np.isfinite(df["ccr_measured"])]
    df["subset"] = np.where(df["held_out"] == HELD_OUT, "held out", "fitted")
    return df.reset_index(drop=True)


def _basis(mvm: xr.Dataset) -> str:
    return (
        f"{MEASURED} points; stated (paper's formulas) and refined models calibrated on the same device "
        f"(fit on the 'fitted' points, {int((mvm['held_out'] == HELD_OUT).sum())} held out)"
    )


# --- figures -------------------------------------------------------------------------------------------------------
def ccr_vs_p_figure(mvm: xr.Dataset) -> Figure:
    """CCR vs P per op (the attention ops are the three splits): measured points, stated and refined lines."""
    df = points(mvm)
    if df.empty:
        raise ValueError("model_vs_measured holds no point with P > 1: nothing communicates, no CCR to plot")
    L0, dt0 = mvm["L"].values[0], mvm["dtype"].values[0]
    df = df[(df["L"] == L0) & (df["dtype"] == dt0)]
    df["shape"] = [f"N={n}, D={d}" for n, d in zip(df["N"], df["D"], strict=True)]
    ops = [o for o in mvm["op"].values if o in set(df["op"])]
    shapes = list(dict.fromkeys(df.sort_values(["D", "N"])["shape"]))
    colours = dict(zip(shapes, sns.color_palette("viridis", len(shapes)), strict=True))
    ncol = min(4, len(ops))
    nrow = int(np.ceil(len(ops) / ncol))
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(3.4 * ncol, 3.0 * nrow), squeeze=False, layout="constrained"
    )
    lo, hi = log_limits(list(df["ccr_measured"]) + list(df["ccr_refined"]) + list(df["ccr_stated"]))
    Ps = sorted(set(df["P"]))
    for ax, op in zip(axes.flat, ops, strict=False):
        sub = df[df["op"] == op]
        for shape, g in sub.groupby("shape", sort=False):
            g = g.sort_values("P")
            c = colours[shape]
            for model in ("stated", "refined"):
                ax.plot(g["P"], g[f"ccr_{model}"], color=c, ls=MODEL_STYLE[model], lw=1,
                        marker=MODEL_MARKER[model], mfc="none", ms=5)  # fmt: skip
            for subset, marker in (("fitted", "o"), ("held out", "X")):
                h = g[g["subset"] == subset]
                ax.plot(h["P"], h["ccr_measured"], marker, color=c, ms=5, mec="k", mew=0.4, ls="none")
        ax.axhline(1.0, color="0.3", lw=0.7, ls=":")
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        ax.set_xscale("log", base=2)
        ax.set_xticks(Ps, [str(p) for p in Ps])
        ax.set_xlim(min(Ps) / 1.4, max(Ps) * 1.4)
        ax.set_title(op, fontsize=9)
        ax.set_xlabel("P")
        ax.set_ylabel("CCR = T_comm / T_comp")
    for ax in list(axes.flat)[len(ops) :]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=colours[s], marker="s", ls="none", label=s) for s in shapes]
    handles += [
        Line2D([], [], color="0.3", marker="o", ls="none", label="measured (fitted)"),
        Line2D([], [], color="0.3", marker="X", ls="none", label="measured (held out)"),
        Line2D([], [], color="0.3", ls=MODEL_STYLE["stated"], marker="v", mfc="none", label="stated model"),
        Line2D([], [], color="0.3", ls=MODEL_STYLE["refined"], marker="^", mfc="none", label="refined model"),
    ]
    fig.legend(
        handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False
    )
    fig.suptitle(
        headline(
            f"CCR vs P per layer (attn_channel / attn_token / attn_2d = the three splits; L = {L0}, {dt0}; "
            "P = 1 has no communication)",
            _basis(mvm),
            f"measured on {measured_on(mvm)}",
        )
    )
    return fig


def predicted_vs_measured_figure(mvm: xr.Dataset) -> Figure:
    """Predicted vs measured CCR on log-log axes with the identity line, one panel per model, held out marked."""
    df = points(mvm)
    if df.empty:
        raise ValueError("model_vs_measured holds no point with P > 1: nothing to compare")
    summary = json_attr(mvm, "summary", {}) or {}
    ops = list(dict.fromkeys(df["op"]))
    colours = dict(zip(ops, sns.color_palette("colorblind", len(ops)), strict=True))
    lo, hi = log_limits(list(df["ccr_measured"]) + list(df["ccr_stated"]) + list(df["ccr_refined"]))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.8), sharex=True, sharey=True, layout="constrained")
    for ax, model in zip(axes, ("stated", "refined"), strict=True):
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=0.8, label="identity")
        for op in ops:
            for subset, marker, fill in (("fitted", "o", colours[op]), ("held out", "X", colours[op])):
                h = df[(df["op"] == op) & (df["subset"] == subset)]
                ax.plot(
                    h["ccr_measured"],
                    h[f"ccr_{model}"],
                    marker,
                    color=fill,
                    mec="k",
                    mew=0.4,
                    ms=6,
                    ls="none",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel("measured CCR")
        ax.set_ylabel(f"{model} model CCR (calibrated)")
        err = summary.get("held_out", {}).get(f"median_abs_rel_err_{model}")
        fit = summary.get("fitted", {}).get(f"median_abs_rel_err_{model}")
        ax.set_title(
            f"{model}: median |rel. error| held out {_pct(err)}, fitted {_pct(fit)}",
            fontsize=9,
        )
    handles = [Line2D([], [], color=colours[o], marker="s", ls="none", label=o) for o in ops]
    handles += [
        Line2D([], [], color="0.3", marker="o", ls="none", label="fitted point"),
        Line2D([], [], color="0.3", marker="X", ls="none", label="held-out point"),
        Line2D([], [], color="0.3", label="identity"),
    ]
    fig.legend(
        handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False
    )
    fig.suptitle(
        headline(
            "Predicted vs measured CCR (each point: one layer at one P, N, D, L)",
            _basis(mvm),
            measured_on(mvm),
        )
    )
    return fig


def _pct(x: float | None) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f} %"


def compute_vs_comm_figure(mb: xr.Dataset) -> Figure:
    """Per op and P > 1: compute-only time, collective-only time and exposed communication (full − compute)."""
    need(mb, "time_median", "exposed_comm")
    L0, dt0 = mb["L"].values[0], mb["dtype"].values[0]
    Ps = [int(p) for p in mb["P"].values if p > 1]
    if not Ps:
        raise ValueError("microbench holds only P = 1: no communication to show")
    rows = []
    for op in mb["op"].values:
        for P in Ps:
            for N in mb["N"].values:
                for D in mb["D"].values:
                    sel = {"op": op, "P": P, "N": N, "D": D, "L": L0, "dtype": dt0}
                    t = mb["time_median"].sel(**sel)
                    shape = f"N={int(N)}\nD={int(D)}"
                    rows += [
                        {"op": op, "P": P, "shape": shape, "part": "compute only", "ms": 1e3 * float(t.sel(mode="compute"))},
                        {"op": op, "P": P, "shape": shape, "part": "collectives only", "ms": 1e3 * float(t.sel(mode="comm"))},
                        {"op": op, "P": P, "shape": shape, "part": "exposed comm (full − compute)",
                         "ms": 1e3 * float(mb["exposed_comm"].sel(**sel))},
                    ]  # fmt: skip
    df = pd.DataFrame(rows).dropna()
    ops = list(dict.fromkeys(df["op"]))
    fig, axes = plt.subplots(
        len(Ps),
        len(ops),
        figsize=(2.9 * len(ops), 3.0 * len(Ps)),
        squeeze=False,
        sharey="row",
        layout="constrained",
    )
    palette = dict(zip(["compute only", "collectives only", "exposed comm (full − compute)"],
                       sns.color_palette("Set2", 3), strict=True))  # fmt: skip
    for i, P in enumerate(Ps):
        for j, op in enumerate(ops):
            ax = axes[i, j]
            sub = df[(df["op"] == op) & (df["P"] == P)]
            sns.barplot(sub, x="shape", y="ms", hue="part", palette=palette, ax=ax, legend=False)
            ax.axhline(0, color="0.2", lw=0.6)
            ax.set_title(f"{op}, P = {P}", fontsize=8)
            ax.set_xlabel("")
            ax.set_ylabel("median time [ms]" if j == 0 else "")
            ax.tick_params(axis="x", labelsize=6)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c, label=k) for k, c in palette.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(
        headline(
            f"Compute vs exposed communication per layer (fwd + bwd, L = {L0}, {dt0}; exposed < collectives "
            "only: overlap or noise)",
            f"{MEASURED} (median over repeats)",
            measured_on(mb),
        )
    )
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
        f"both calibrated on the device measured ({measured_on(mvm)}); 'held out' points were not used by the "
        "calibration fit. 'traced' is a diagnostic (the ring model on the collectives the layer issued)."
    )


def _measured_point(
    mvm: xr.Dataset | None, op: str, N: int, D: int, P: int
) -> tuple[float, float, float, str]:
    """(measured CCR, refined CCR calibrated on the bench device, stated CCR likewise, note) for one layer."""
    nan = float("nan")
    if mvm is None:
        return nan, nan, nan, "no bench file"
    have = {
        "op": op in mvm["op"].values,
        "N": N in mvm["N"].values,
        "D": D in mvm["D"].values,
        "P": P in mvm["P"].values,
    }
    if not all(have.values()):
        lacking = ", ".join(f"{k}={v}" for k, v in (("op", op), ("N", N), ("D", D), ("P", P)) if not have[k])
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


def ccr_8_1_table(
    ccr: xr.Dataset, mvm: xr.Dataset | None = None, cases: Sequence[str] | None = None
) -> pd.DataFrame:
    """Paper section 8.1: block CCR and throughput per case, P and split on each preset (modelled), beside the
    attention layer of that split measured on the bench device at the same N, D = C and P (where measured)."""
    need(ccr, "ccr", "relative_throughput", "N", "layer_ccr")
    C = int(ccr.attrs.get("embed_dim", 0))
    cases = list(cases) if cases else [str(c) for c in ccr["case"].values]
    dev = measured_on(mvm) if mvm is not None else "no bench file"
    rows = []
    for case in cases:
        N = int(ccr["N"].sel(case=case))
        for P in ccr["P"].values:
            for split in ccr["split"].values:
                row: dict[str, object] = {"case": case, "N": N, "C": C, "P": int(P), "split": str(split)}
                for hw in ccr["hardware"].values:
                    sel = {"case": case, "P": P, "hardware": hw, "split": split}
                    for model in ccr["model"].values:
                        row[f"block CCR {model} [{hw}]"] = float(ccr["ccr"].sel(**sel, model=model))
                    row[f"attn CCR refined [{hw}]"] = float(ccr["layer_ccr"].sel(**sel, layer="attn"))
                    row[f"throughput stated [{hw}]"] = float(
                        ccr["relative_throughput"].sel(**sel, model="stated")
                    )
                op = SPLIT_OPS.get(str(split), "")
                meas, refined, stated, note = _measured_point(mvm, op, N, C, int(P))
                row[f"attn CCR measured [{dev}]"] = meas
                row["attn CCR refined [calibrated, same device]"] = refined
                row["attn CCR stated [calibrated, same device]"] = stated
                row["measured point"] = note
                rows.append(row)
    return pd.DataFrame(rows)


def ccr_8_1_caption(ccr: xr.Dataset, mvm: xr.Dataset | None) -> str:
    dev = measured_on(mvm) if mvm is not None else "no bench file"
    return (
        f"Paper section 8.1, reproduced: block CCR (stated and refined) and stated relative throughput, "
        f"{MODELLED}, {modelled_for(ccr, list(ccr['hardware'].values))}; beside them the attention layer of the "
        f"same split {MEASURED} on {dev} at the same N, D = C and P with both models calibrated on that device "
        "(a single layer, not the whole block; empty where the bench grid lacks the point)."
    )


def bench_groups(mb: xr.Dataset) -> int | None:
    """D-CHAG group count the bench's aggregation layers used (microbench ``op_settings``)."""
    groups = (json_attr(mb, "op_settings", {}) or {}).get("groups")
    return int(groups) if groups is not None else None


def dchag_8_2_table(
    ccr: xr.Dataset,
    mvm: xr.Dataset | None = None,
    groups: int | None = None,
    cases: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Paper section 8.2: whole-model CCR, throughput and memory of pure TP vs D-CHAG per case, P and g
    (modelled), beside the aggregation layer of each scheme measured on the bench device (where measured).

    ``groups`` is the bench's D-CHAG group count (:func:`bench_groups`): a D-CHAG row is paired with a
    measurement only at that g (pure TP's aggregation does not depend on g)."""
    need(ccr, "scheme_ccr", "scheme_relative_throughput", "scheme_memory", "N")
    C = int(ccr.attrs.get("embed_dim", 0))
    cases = (
        list(cases)
        if cases
        else [
            str(c) for c, s in zip(ccr["case"].values, ccr["case_source"].values, strict=True) if s == "paper"
        ]
    )
    dev = measured_on(mvm) if mvm is not None else "no bench file"
    rows = []
    for case in cases:
        N = int(ccr["N"].sel(case=case))
        for P in ccr["P"].values:
            for g in ccr["g"].values:
                for scheme in ccr["scheme"].values:
                    row: dict[str, object] = {
                        "case": case,
                        "N": N,
                        "C": C,
                        "P": int(P),
                        "g": int(g),
                        "scheme": str(scheme),
                    }
                    for hw in ccr["hardware"].values:
                        sel = {"case": case, "P": P, "hardware": hw, "g": g, "scheme": scheme}
                        for model in ccr["model"].values:
                            row[f"CCR {model} [{hw}]"] = float(ccr["scheme_ccr"].sel(**sel, model=model))
                            row[f"throughput {model} [{hw}]"] = float(
                                ccr["scheme_relative_throughput"].sel(**sel, model=model)
                            )
                    row["memory/device [GiB]"] = (
                        float(ccr["scheme_memory"].sel(case=case, P=P, g=g, scheme=scheme)) / 2**30
                    )
                    op = SCHEME_OPS.get(str(scheme), "")
                    if scheme != "tp" and (groups is None or int(g) != groups):
                        why = "unknown" if groups is None else str(groups)
                        meas, refined, stated, note = (float("nan"),) * 3 + (
                            f"not measured (bench D-CHAG groups = {why})",
                        )
                    else:
                        meas, refined, stated, note = _measured_point(mvm, op, N, C, int(P))
                    row[f"aggregation CCR measured [{dev}]"] = meas
                    row["aggregation CCR refined [calibrated, same device]"] = refined
                    row["measured point"] = note
                    rows.append(row)
    return pd.DataFrame(rows)


def dchag_8_2_caption(ccr: xr.Dataset, mvm: xr.Dataset | None) -> str:
    dev = measured_on(mvm) if mvm is not None else "no bench file"
    return (
        "Paper section 8.2, reproduced: whole-model CCR and throughput of pure TP vs D-CHAG (linear and "
        f"cross-attention partial aggregators) and per-device memory, {MODELLED}, "
        f"{modelled_for(ccr, list(ccr['hardware'].values))}; beside them the aggregation layer of each scheme "
        f"{MEASURED} on {dev} (one layer, not the whole model; only at the bench's group count)."
    )


def points_table(mvm: xr.Dataset) -> pd.DataFrame:
    """Every measured point (P > 1) with both models' CCR and relative errors."""
    return points(mvm).drop(columns=["held_out"])


def calibration_table(cal: xr.Dataset) -> pd.DataFrame:
    """What the calibration fitted on the bench device: alpha, beta per collective; the compute model per op."""
    need(cal, "alpha", "beta")
    rows = []
    for c in cal["collective"].values:
        rows.append(
            {
                "fitted for": f"collective {c}",
                "alpha [s]": float(cal["alpha"].sel(collective=c)),
                "beta [B/s]": float(cal["beta"].sel(collective=c)),
                "training points": int(cal["n_points"].sel(collective=c)) if "n_points" in cal else None,
            }
        )
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
        f"Calibration fitted to the microbenchmarks on {measured_on(cal)} (world sizes "
        f"{json_attr(cal, 'world_sizes', '?')}): {cal.attrs.get('model', '')}. Fitted to measurements, on the "
        f"training subset only (hold-out fraction {cal.attrs.get('holdout_fraction', '?')})."
    )


def points_caption(mvm: xr.Dataset) -> str:
    return (
        f"Every measured point with P > 1: CCR {MEASURED} on {measured_on(mvm)} beside the stated and refined "
        "models calibrated on the same device, relative errors, and whether the calibration fit saw the point."
    )
