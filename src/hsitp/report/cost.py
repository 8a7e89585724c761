"""Report page of the cost stage: the cost model's tables (modelled, not measured) as figures and paper tables.

Every number here comes from ``results/<run>/cost/*.nc``; each figure names the hardware presets it was modelled
for. The paper's section 2.2 table also gets the rho of the scenes prepared in this run, read from their files.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from adjustText import adjust_text
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

from hsitp.cost.tables import n_tokens
from hsitp.report import style
from hsitp.report.common import MODELLED, headline, json_attr, log_limits, modelled_for, need, presets

SPLITS = ("channel", "token", "2d")
MODELS = ("stated", "refined")
MODEL_STYLE = {
    "stated": (0, (4, 2)),
    "refined": "solid",
}  # the paper's formulas dashed, the refined model solid
SPLIT_COLOURS = dict(zip(SPLITS, style.palette(3), strict=True))
REGIONS = ("data_parallel", "channel", "token", "2d")  # boundary.nc region codes 0..3
REGION_COLOURS = ["#d9d9d9", "#9ecae1", "#fdae6b", "#a1d99b"]


# --- figures -------------------------------------------------------------------------------------------------------
def rho_figure(rho: xr.Dataset) -> Figure:
    """rho = C/N per dataset and patch size, one panel per definition of C (bands, PCA components, embedding)."""
    need(rho, "rho", "N", "C")
    df = rho["rho"].to_dataframe().reset_index()
    c_defs = list(rho["c_def"].values)
    fig, axes = plt.subplots(
        1, len(c_defs), figsize=style.figsize(3.6 * len(c_defs), 4.6), sharey=True, layout="constrained"
    )
    axes = np.atleast_1d(axes)
    meaning = rho.attrs.get("c_def_meaning", "")
    for ax, c_def in zip(axes, c_defs, strict=True):
        sub = df[df["c_def"] == c_def]
        sns.barplot(sub, x="dataset", y="rho", hue="patch", ax=ax, palette="crest")
        ax.axhline(1.0, color="0.2", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_title(f"C = {c_def}")
        ax.set_xlabel("")
        ax.set_ylabel("rho = C / N")
        ax.tick_params(axis="x", rotation=90, labelsize=7.5)
        ax.get_legend().remove()  # one key below the panels, over no bar
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(
        handles, names, title="patch p (pixels)", loc="outside lower center", ncol=len(names), frameon=False
    )
    fig.suptitle(
        headline(
            "rho = C/N per dataset and patch size (N = spatial tokens of the registry grid; rho < 1: more tokens "
            "than channels)",
            f"{MODELLED}, from the registry grids",
            f"no hardware dependence ({meaning})" if meaning else "no hardware dependence",
        )
    )
    return fig


def paper_cases(ccr: xr.Dataset) -> list[str]:
    """The paper's own cases (N = 324 and 5776), before the registry datasets."""
    return [
        str(c) for c, s in zip(ccr["case"].values, ccr["case_source"].values, strict=True) if s == "paper"
    ]


def ccr_vs_p_figure(ccr: xr.Dataset, cases: Sequence[str] | None = None) -> Figure:
    """Block CCR vs P for channel, token and 2-D splits under the stated and refined models, per case and preset."""
    need(ccr, "ccr", "N")
    cases = list(cases) if cases else paper_cases(ccr)
    unknown = [c for c in cases if c not in ccr["case"].values]
    if unknown:
        raise ValueError(f"ccr table has no case {unknown}; it has {list(ccr['case'].values)}")
    hws = [str(h) for h in ccr["hardware"].values]
    fig, axes = plt.subplots(
        len(hws), len(cases), figsize=(3.3 * len(cases), 2.9 * len(hws)), squeeze=False, sharex=True,
        layout="constrained",
    )  # fmt: skip
    Ps = ccr["P"].values
    vals = ccr["ccr"].sel(case=cases).values.ravel()
    lo, hi = log_limits(list(vals) + [1.0])
    for i, hw in enumerate(hws):
        for j, case in enumerate(cases):
            ax = axes[i, j]
            for split in SPLITS:
                for model in MODELS:
                    y = ccr["ccr"].sel(case=case, hardware=hw, split=split, model=model).values
                    ax.plot(Ps, y, marker="o", ms=3, color=SPLIT_COLOURS[split], ls=MODEL_STYLE[model])
            ax.axhline(1.0, color="0.3", lw=0.7, ls=":")
            ax.set_yscale("log")
            ax.set_ylim(lo, hi)
            ax.set_xscale("log", base=2)
            ax.set_xticks(Ps, [str(p) for p in Ps])
            ax.set_title(f"{case} (N = {int(ccr['N'].sel(case=case))}), {hw}", fontsize=8)
            if j == 0:
                ax.set_ylabel("block CCR = T_comm / T_comp")
            if i == len(hws) - 1:
                ax.set_xlabel("P (devices in the TP group)")
    handles = [Line2D([], [], color=SPLIT_COLOURS[s], label=f"{s} split") for s in SPLITS]
    handles += [Line2D([], [], color="0.3", ls=MODEL_STYLE[m], label=f"{m} model") for m in MODELS]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(
        headline(
            f"CCR vs P, C = D = {ccr.attrs.get('embed_dim', '?')}, patch {ccr.attrs.get('patch', '?')} "
            "(CCR < 1: compute-bound)",
            f"{MODELLED} (stated = the paper's formulas, refined = per-layer ring model; no measured point: the "
            "bench page has those)",
            modelled_for(ccr, hws),
        )
    )
    return fig


def boundary_figure(boundary: xr.Dataset) -> Figure:
    """Which split wins over (rho, P·F/beta), stated and refined, with each dataset x preset placed on the map."""
    need(boundary, "region_stated", "region_refined", "point_rho", "point_threshold", "point_label")
    Ds = boundary["D"].values
    fig, axes = plt.subplots(
        len(Ds), 2, figsize=(11, 4.6 * len(Ds)), squeeze=False, sharex=True, sharey=True, layout="constrained"
    )
    rho = boundary["rho"].values
    thr = boundary["threshold"].values
    cmap = ListedColormap(REGION_COLOURS)
    labels = [str(s).split("|") for s in boundary["point_label"].values]  # dataset|hardware|D=...
    hw_names = list(dict.fromkeys(lab[1] if len(lab) > 1 else "?" for lab in labels))
    markers = dict(zip(hw_names, ["o", "s", "^", "D", "v", "P", "X"], strict=False))
    to_place: list[tuple] = []  # (axes, dataset names, point x, point y): placed once the layout is final
    for i, D in enumerate(Ds):
        for j, model in enumerate(MODELS):
            ax = axes[i, j]
            region = boundary[f"region_{model}"].sel(D=D).values  # (rho, threshold)
            ax.pcolormesh(rho, thr, region.T, cmap=cmap, vmin=-0.5, vmax=3.5, shading="nearest")
            sel = boundary["point_D"].values == D
            for k in np.flatnonzero(sel):
                lab = labels[k]
                ax.plot(
                    boundary["point_rho"].values[k],
                    boundary["point_threshold"].values[k],
                    marker=markers.get(lab[1] if len(lab) > 1 else "?", "o"),
                    color="k",
                    ms=4,
                    mfc="white",
                    ls="none",
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            # one name per dataset at its highest point, placed by adjustText so no two names overlap
            by_ds: dict[str, tuple[float, float]] = {}
            for k in np.flatnonzero(sel):
                x, y = boundary["point_rho"].values[k], boundary["point_threshold"].values[k]
                name = labels[k][0]
                if name not in by_ds or y > by_ds[name][1]:
                    by_ds[name] = (x, y)
            # start staggered over three heights (neighbours in rho start apart), adjustText then separates them
            ordered = sorted(by_ds.items(), key=lambda kv: kv[1][0])
            texts = [ax.text(x, y * 2.2 ** (1 + k % 3), name, fontsize=7.5, ha="center", va="bottom",
                             bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
                     for k, (name, (x, y)) in enumerate(ordered)]  # fmt: skip
            to_place.append(
                (ax, texts, boundary["point_rho"].values[sel], boundary["point_threshold"].values[sel])
            )
            ax.set_title(f"{model} model, D = {int(D)}")
            ax.set_xlabel("rho = C / N (dimensionless)")
            if j == 0:
                ax.set_ylabel("threshold P·F / β [FLOP/byte]")
            ax.grid(False)
    handles = [Patch(color=c, label=r) for c, r in zip(REGION_COLOURS, REGIONS, strict=True)]
    handles += [
        Line2D([], [], marker=m, color="k", mfc="white", ls="none", label=h) for h, m in markers.items()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), frameon=False)
    refined_hw = boundary.attrs.get("refined_hardware", "?")
    fig.suptitle(
        headline(
            "Decision boundary: split with the lowest CCR where it is < 1, else data parallel "
            f"(refined: P = {boundary.attrs.get('refined_P', '?')}, F and alpha of {refined_hw}, "
            "beta = P·F / threshold)",
            f"{MODELLED}; points: the registry datasets at each preset's threshold",
            modelled_for(boundary, hw_names),
        )
    )
    style.wrap_suptitle(fig)
    fig.canvas.draw()  # the layout (and so the axes' size) final before the labels are placed
    for ax, texts, xs, ys in to_place:
        adjust_text(texts, x=xs, y=ys, ax=ax, ensure_inside_axes=True, expand=(1.1, 1.3), force_text=(0.3, 0.6),
                    iter_lim=500, arrowprops={"arrowstyle": "-", "color": "0.3", "lw": 0.5})  # fmt: skip
    return fig


def scale_figure(scale: xr.Dataset) -> Figure:
    """Projection to many devices: relative throughput per preset and per-device memory vs the TP degree."""
    need(scale, "relative_throughput", "memory_total", "feasible")
    hws = [str(h) for h in scale["hardware"].values]
    schemes = [str(s) for s in scale["scheme"].values]
    colours = dict(zip(schemes, style.palette(len(schemes)), strict=True))
    tp = scale["tp"].values
    fig = plt.figure(figsize=style.figsize(2.3 * len(hws) + 0.6, 7.0), layout="constrained")
    grid = fig.add_gridspec(2, len(hws))
    top = [fig.add_subplot(grid[0, j]) for j in range(len(hws))]
    for ax, hw in zip(top, hws, strict=True):
        for s in schemes:
            y = scale["relative_throughput"].sel(hardware=hw, scheme=s).values
            ax.plot(tp, y, marker="o", ms=3, color=colours[s], label=s)
            bad = scale["feasible"].sel(hardware=hw, scheme=s).values == 0
            if bad.any():
                ax.plot(tp[bad], np.zeros(bad.sum()), "x", color=colours[s])
        ax.set_xscale("log", base=2)
        ax.set_xticks(tp, [str(t) for t in tp])
        ax.set_title(hw, fontsize=8)
        ax.set_xlabel("TP degree")
    top[0].set_ylabel("throughput vs 1 device (ideal = devices)")
    top[0].legend(fontsize=7, title="scheme", title_fontsize=7)
    mem_ax = fig.add_subplot(grid[1, :])
    for s in schemes:
        mem_ax.plot(
            tp, scale["memory_total"].sel(scheme=s).values / 2**30, marker="o", color=colours[s], label=s
        )
    limits: dict[float, list[str]] = {}  # device memory -> presets with that much (A100 and H100: both 80 GB)
    for name, p in presets(scale).items():
        if name in hws and p.get("memory_bytes"):
            limits.setdefault(p["memory_bytes"] / 2**30, []).append(name)
    for gib, names in limits.items():
        mem_ax.axhline(gib, color="0.4", lw=0.7, ls="--")
        mem_ax.annotate(
            f"device memory: {', '.join(names)}", (tp[-1], gib), fontsize=7, ha="right", va="bottom"
        )
    mem_ax.set_xscale("log", base=2)
    mem_ax.set_xticks(tp, [str(t) for t in tp])
    mem_ax.set_yscale("log")
    mem_ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 10, 20, 50, 100 GiB
    mem_ax.yaxis.set_major_formatter(ScalarFormatter())
    mem_ax.yaxis.set_minor_formatter(NullFormatter())
    mem_ax.set_xlabel("TP degree (data/FSDP degree = devices / TP)")
    mem_ax.set_ylabel("training memory per device [GiB]")
    mem_ax.legend(fontsize=7, title="scheme", title_fontsize=7)
    model = json_attr(scale, "model", {}) or {}
    fig.suptitle(
        headline(
            f"Projection to {scale.attrs.get('devices', '?')} devices ({scale.attrs.get('devices_per_node', '?')} "
            f"per node): D = {model.get('embed_dim', '?')}, depth {model.get('depth', '?')}, "
            f"N = {scale.attrs.get('N', '?')}, {scale.attrs.get('optimizer', '?')}"
            + (", FSDP" if int(scale.attrs.get("fsdp", 0)) else "")
            + " (x at 0: infeasible)",
            f"{MODELLED} (refined model)",
            modelled_for(scale, hws),
        )
    )
    return fig


# --- tables --------------------------------------------------------------------------------------------------------
def prepared_rho(scene: xr.Dataset, patch: int, grid: str = "crop") -> dict[str, float | int | str]:
    """rho of a scene prepared in this run, from its file: C = channels of the cube, N = tokens of its grid."""
    cube = scene["cube"]
    C = int(cube.shape[-1])
    N = n_tokens(int(scene.sizes["y"]), int(scene.sizes["x"]), patch, grid)
    return {
        "dataset": str(scene.attrs.get("dataset", "?")),
        "C": C,
        "N": N,
        "rho": C / N if N else float("nan"),
    }


def rho_table(
    rho: xr.Dataset,
    scenes: Sequence[xr.Dataset] = (),
    patch: int = 8,
    hardware: str = "paper-intra",
    P: int = 8,
) -> pd.DataFrame:
    """Paper section 2.2: rho per dataset at patch p, the registry's (modelled) value beside the value read from
    the scene prepared in this run (where one was), and the split with the lower CCR on one preset at one P."""
    need(rho, "rho", "N", "C", "H", "W", "L", "lower_split")
    if patch not in rho["patch"].values:
        raise ValueError(f"rho table has patches {list(rho['patch'].values)}, not {patch}")
    grid = rho.attrs.get("token_grid", "crop")
    prepared = {p["dataset"]: p for p in (prepared_rho(s, patch, grid) for s in scenes)}
    rows = []
    for ds_name in rho["dataset"].values:
        r = rho.sel(dataset=ds_name, patch=patch)
        row = {
            "dataset": str(ds_name),
            "H x W": f"{int(r['H'])} x {int(r['W'])}",
            "L (bands)": int(r["L"]),
            "registry verified": bool(int(r["verified"])) if "verified" in r else None,
            f"N (p={patch})": int(r["N"]),
        }
        for c_def in rho["c_def"].values:
            row[f"C = {c_def}"] = int(r["C"].sel(c_def=c_def))
            row[f"rho ({c_def}) modelled"] = float(r["rho"].sel(c_def=c_def))
        if hardware in rho["hardware"].values and P in rho["P"].values:
            for model in rho["model"].values:
                row[f"lower split, {model} [{hardware}, P={P}, C=bands]"] = str(
                    r["lower_split"].sel(c_def="bands", hardware=hardware, P=P, model=model).values
                )
        prep = prepared.get(str(ds_name))
        row["rho (bands) prepared here"] = prep["rho"] if prep else float("nan")
        row["C prepared here"] = prep["C"] if prep else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def rho_caption(rho: xr.Dataset, patch: int = 8, hardware: str = "paper-intra", P: int = 8) -> str:
    return (
        f"Paper section 2.2, reproduced: rho = C/N at patch {patch} ({rho.attrs.get('token_grid', 'crop')} token "
        "grid). 'modelled' columns come from the registry's grids (cost table rho); 'prepared here' is read from "
        "the scene files this run prepared (empty where the run prepared none). The lower-CCR split is "
        f"{modelled_for(rho, [hardware])} at P = {P}. No measurement on any device."
    )


def scale_table(scale: xr.Dataset) -> pd.DataFrame:
    """Paper section 9.1 as projected here: per preset, TP degree and scheme — memory, CCR, throughput."""
    need(scale, "memory_total", "ccr", "relative_throughput", "scaling_efficiency", "feasible", "dp")
    rows = []
    for hw in scale["hardware"].values:
        for t in scale["tp"].values:
            for s in scale["scheme"].values:
                sel = {"hardware": hw, "tp": t, "scheme": s}
                row = {
                    "hardware (modelled)": str(hw),
                    "TP": int(t),
                    "DP/FSDP": int(scale["dp"].sel(tp=t)),
                    "scheme": str(s),
                    "memory/device [GiB]": float(scale["memory_total"].sel(tp=t, scheme=s)) / 2**30,
                }
                for m in scale["model"].values:
                    row[f"CCR {m}"] = float(scale["ccr"].sel(**sel, model=m))
                row["throughput vs 1 device"] = float(scale["relative_throughput"].sel(**sel))
                row["scaling efficiency"] = float(scale["scaling_efficiency"].sel(**sel))
                feasible = bool(int(scale["feasible"].sel(**sel)))
                row["feasible"] = "yes" if feasible else str(scale["reason"].sel(**sel).values)
                rows.append(row)
    return pd.DataFrame(rows)


def scale_caption(scale: xr.Dataset) -> str:
    return (
        f"Paper section 9.1 (pure TP vs D-CHAG+TP), as projected here to {scale.attrs.get('devices', '?')} "
        f"devices: {MODELLED}, refined model, {modelled_for(scale)}. No column is measured: no run of this "
        "size exists here (the D-CHAG paper's reported memory is compared in table cost_dchag_memory)."
    )


def dchag_memory_table(scale: xr.Dataset) -> pd.DataFrame:
    """The D-CHAG paper's reported peak memory (measured there, on MI250X) beside this memory model."""
    need(scale, "reference_memory_reported", "reference_memory_modelled")
    rows = []
    for ref in scale["reference"].values:
        for s in scale["scheme"].values:
            reported = float(scale["reference_memory_reported"].sel(reference=ref, scheme=s))
            modelled = float(scale["reference_memory_modelled"].sel(reference=ref, scheme=s))
            rows.append(
                {
                    "configuration": str(ref),
                    "D (inferred)": int(scale["reference_embed_dim"].sel(reference=ref))
                    if "reference_embed_dim" in scale
                    else None,
                    "scheme": str(s),
                    "reported [GiB] (D-CHAG paper, MI250X)": reported,
                    "modelled [GiB] (this memory model)": modelled,
                    "modelled / reported": modelled / reported if reported else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def dchag_memory_caption(scale: xr.Dataset) -> str:
    units = scale["reference_memory_reported"].attrs.get("long_name", "")
    return (
        "Peak memory per device: reported by the D-CHAG paper (measured there on MI250X GCDs, not here) beside "
        f"this project's memory model at the same settings. {units}"
    )


# --- hsitp advise plan over P (plan.nc): kept in its own section so the figure-style branch merges cleanly -------
PLAN_STYLE = {"dense": "o", "tp": "s", "dchag_l": "^", "dchag_c": "v", "token": "D"}
DATASET_LINES = ("-", "--", ":", "-.")


def plan_figure(plan: xr.Dataset, checkpointing: str = "none") -> Figure:
    """Per-rank peak memory vs P for each plan with the device-memory and usable (less headroom) lines (top), and
    tokens/s of the whole allocation vs P (bottom), one column per GPU preset, one line style per dataset."""
    need(plan, "peak_memory", "tokens_per_s", "device_memory", "usable_memory")
    hws = [str(h) for h in plan["hardware"].values]
    names = [str(d) for d in plan["dataset"].values]
    plans = [str(p) for p in plan["plan"].values]
    colours = dict(zip(plans, sns.color_palette("colorblind", len(plans)), strict=True))
    P = plan["P"].values  # noqa: N806
    fig, axes = plt.subplots(2, len(hws), figsize=(3.2 * len(hws), 6.4), layout="constrained", squeeze=False)
    for j, hw in enumerate(hws):
        mem_ax, tps_ax = axes[0, j], axes[1, j]
        for di, name in enumerate(names):
            ls = DATASET_LINES[di % len(DATASET_LINES)]
            for p in plans:
                sel = {"hardware": hw, "dataset": name, "plan": p, "checkpointing": checkpointing}
                mem = plan["peak_memory"].sel(sel).values / 1e9
                tps = plan["tokens_per_s"].sel(sel).values
                ok = np.isfinite(mem)
                if not ok.any():
                    continue
                style = {"color": colours[p], "ls": ls, "marker": PLAN_STYLE.get(p, "o"), "ms": 3}
                mem_ax.plot(P[ok], mem[ok], **style)
                tps_ax.plot(P[ok], tps[ok], **style)
        dev = float(plan["device_memory"].sel(hardware=hw)) / 1e9
        use = float(plan["usable_memory"].sel(hardware=hw)) / 1e9
        mem_ax.axhline(dev, color="0.3", lw=0.8, ls="--")
        mem_ax.axhline(use, color="0.3", lw=0.8, ls=":")
        mem_ax.annotate(f"device {dev:g} GB", (P[-1], dev), fontsize=7, ha="right", va="bottom")
        mem_ax.annotate(f"usable {use:.1f} GB", (P[-1], use), fontsize=7, ha="right", va="top")
        for ax in (mem_ax, tps_ax):
            ax.set_xscale("log", base=2)
            ax.set_xticks(P, [str(int(x)) for x in P])
            ax.set_yscale("log")
        mem_ax.set_title(hw, fontsize=8)
        tps_ax.set_xlabel("TP degree P (replicas = devices / P)")
    axes[0, 0].set_ylabel("per-rank peak memory [GB]")
    axes[1, 0].set_ylabel("tokens/s of the allocation")
    handles = [Line2D([], [], color=colours[p], marker=PLAN_STYLE.get(p, "o"), label=p) for p in plans]
    handles += [
        Line2D([], [], color="0.3", ls=DATASET_LINES[i % len(DATASET_LINES)], label=n)
        for i, n in enumerate(names)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8, frameon=False)
    model = json_attr(plan, "model", {}) or {}
    fig.suptitle(
        headline(
            f"advise plan over P: D = {model.get('embed_dim', '?')}, depth {model.get('depth', '?')}, "
            f"{model.get('heads', '?')} heads, batch {model.get('batch', '?')}, g = {plan.attrs.get('groups', '?')}, "
            f"checkpointing {checkpointing}",
            f"{MODELLED} (memory model and refined time model; CUDA-side peak not measured here)",
            modelled_for(plan, hws),
            width=90,
        )
    )
    return fig
