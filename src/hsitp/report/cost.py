"""Report page of the cost stage: the cost model's tables (modelled, not measured) as figures and paper tables.

Every number here comes from ``results/<run>/cost/*.nc``; each figure names the hardware presets it was modelled
for. The paper's section 2.2 table also gets the rho of the scenes prepared in this run, read from their files.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from hsitp.analysis.labels import modelled_for, presets
from hsitp.analysis.read import json_attr, need
from hsitp.names import PLAN_NAMES
from hsitp.report import style
from hsitp.report.common import MODELLED, headline, log_limits
from hsitp.shape import n_tokens

SPLITS = ("channel", "token", "2d")
MODELS = ("stated", "refined")
MODEL_STYLE = {
    "stated": (0, (4, 2)),
    "refined": "solid",
}  # the paper's formulas dashed, the refined model solid
MODEL_MEANING = {"stated": "the paper's formulas", "refined": "per-layer ring model"}
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
    meaning = _c_meanings(rho.attrs.get("c_def_meaning", ""))
    for ax, c_def in zip(axes, c_defs, strict=True):
        sub = df[df["c_def"] == c_def]
        sns.barplot(sub, x="dataset", y="rho", hue="patch", ax=ax, palette="crest")
        ax.axhline(1.0, color="0.2", lw=0.8, ls="--")
        ax.set_yscale("log")
        ax.set_title(f"C = {c_def}" + (f"\n({meaning[c_def]})" if c_def in meaning else ""))
        ax.set_xlabel("")
        ax.set_ylabel("rho = C / N")
        ax.tick_params(axis="x", rotation=90, labelsize=7.5)
        ax.get_legend().remove()  # one key below the panels, over no bar
    handles, names = axes[0].get_legend_handles_labels()
    style.key_below(fig, handles, len(names), labels=names, title="patch p (pixels)")
    what = (
        "rho = C/N per dataset and patch size (N = spatial tokens of the registry grid; rho < 1: more tokens "
        "than channels)"
    )
    fig.suptitle(headline(what, f"{MODELLED}, from the registry grids", "no hardware dependence"))
    return fig


def _c_meanings(text: str) -> dict[str, str]:
    """'bands: L of the prepared cube; pca: k components' -> {'bands': 'L of the prepared cube', ...}: what C is
    under each definition (the rho file's ``c_def_meaning``), for the panel titles."""
    pairs = (part.split(":", 1) for part in text.split(";") if ":" in part)
    return {k.strip(): v.strip() for k, v in pairs}


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
            style.log2_axis(ax, Ps)
            ax.set_title(f"{case} (N = {int(ccr['N'].sel(case=case))}), {hw}", fontsize=8)
            if j == 0:
                ax.set_ylabel("block CCR = T_comm / T_comp")
            if i == len(hws) - 1:
                ax.set_xlabel("P (devices in the TP group)")
    handles = [Line2D([], [], color=SPLIT_COLOURS[s], label=f"{s} split") for s in SPLITS]
    handles += [Line2D([], [], color="0.3", ls=MODEL_STYLE[m], label=f"{m} model ({MODEL_MEANING[m]})")
                for m in MODELS]  # fmt: skip
    ncol = len(handles) if 3.3 * len(cases) >= 9 else 3  # one row where the figure is wide enough
    style.key_below(fig, handles, ncol, fontsize=8)
    what = (
        f"Block CCR vs P, C = D = {ccr.attrs.get('embed_dim', '?')}, patch {ccr.attrs.get('patch', '?')} "
        "(CCR < 1: compute-bound)"
    )
    fig.suptitle(headline(what, MODELLED, modelled_for(ccr.attrs, hws)))
    return fig


def boundary_figure(boundary: xr.Dataset) -> Figure:
    """Which split wins over (rho, P·F/beta), stated and refined, with each dataset x preset placed on the map and
    each dataset named next to its highest point."""
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
    # named once the layout is final
    to_name: list[tuple[plt.Axes, dict[str, tuple[float, float, float]]]] = []
    refined = f"P = {boundary.attrs.get('refined_P', '?')}, F and α of {boundary.attrs.get('refined_hardware', '?')}"
    for i, D in enumerate(Ds):
        for j, model in enumerate(MODELS):
            ax = axes[i, j]
            region = boundary[f"region_{model}"].sel(D=D).values  # (rho, threshold)
            ax.pcolormesh(rho, thr, region.T, cmap=cmap, vmin=-0.5, vmax=3.5, shading="nearest")
            sel = boundary["point_D"].values == D
            by_ds: dict[str, tuple[float, float, float]] = {}  # each dataset's column: x, lowest, highest y
            for k in np.flatnonzero(sel):
                lab = labels[k]
                x, y = boundary["point_rho"].values[k], boundary["point_threshold"].values[k]
                ax.plot(x, y, marker=markers.get(lab[1] if len(lab) > 1 else "?", "o"), color="k", ms=4,
                        mfc="white", ls="none")  # fmt: skip
                _, low, high = by_ds.get(lab[0], (x, y, y))
                by_ds[lab[0]] = (x, min(low, y), max(high, y))
            to_name.append((ax, by_ds))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{model} model, D = {int(D)}" + (f" ({refined})" if model == "refined" else ""))
            ax.set_xlabel("rho = C / N (dimensionless)")
            if j == 0:
                ax.set_ylabel("threshold P·F / β [FLOP/byte]")
            ax.grid(False)
    handles = [Patch(color=c, label=r) for c, r in zip(REGION_COLOURS, REGIONS, strict=True)]
    handles += [
        Line2D([], [], marker=m, color="k", mfc="white", ls="none", label=h) for h, m in markers.items()
    ]
    style.key_below(
        fig,
        handles,
        min(len(handles), 5),
        title="region: the split with the lowest CCR; marker: a dataset at the preset's threshold",
    )
    what = "Decision boundary: the split with the lowest CCR where it is < 1, else data parallel"
    fig.suptitle(headline(what, MODELLED, modelled_for(boundary.attrs, hw_names)))
    style.wrap_suptitle(fig)
    fig.canvas.draw()  # the layout (and so the axes' size) final before the names are placed
    for ax, by_ds in to_name:
        name_points(ax, by_ds)
    return fig


def name_points(
    ax: plt.Axes, points: dict[str, tuple[float, float, float]], fontsize: float = 7.5
) -> list[Text]:
    """Name each column of points (name -> x, lowest y, highest y) next to it: a few points right of and above its
    highest point, else left of it, else below its lowest point, else a line further out (with a thin leader
    line): the first place where the name overlaps no name placed before and stays inside the axes, a leader that
    crosses no name if there is one (a leader that must cross passes under the names placed before). Columns are
    taken left to right; call it once the figure's layout is final (``fig.canvas.draw()``)."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    placed: list[Bbox] = []
    texts: list[Text] = []
    step = fontsize + 3.5  # one line of names, in points

    def put(name: str, xy: tuple[float, float], offset: tuple[float, float], leader: bool) -> Text:
        return ax.annotate(
            name, xy, xytext=offset, textcoords="offset points", fontsize=fontsize,
            ha="left" if offset[0] >= 0 else "right", va="bottom" if offset[1] >= 0 else "top",
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.9},
            arrowprops={"arrowstyle": "-", "color": "0.3", "lw": 0.5, "shrinkA": 0, "shrinkB": 2} if leader else None,
            zorder=4 - 0.01 * len(texts),  # earlier names above later leaders
        )  # fmt: skip

    def free(xy: tuple[float, float], offset: tuple[float, float], leader: bool, strict: bool) -> bool:
        t = put(name, xy, offset, leader=False)  # measured without its leader (drawn once placed)
        box = t.get_window_extent(renderer)
        t.remove()
        start = ax.transData.transform(xy)
        corner = (box.x0 if offset[0] >= 0 else box.x1, box.y0 if offset[1] >= 0 else box.y1)
        if not (box.x0 >= inside.x0 and box.x1 <= inside.x1 and box.y0 >= inside.y0 and box.y1 <= inside.y1):
            return False
        if any(box.overlaps(b) or (strict and leader and _crosses(start, corner, b)) for b in placed):
            return False
        placed.append(box.padded(6.0))  # a gap a reader sees between two names
        return True

    for name, (x, low, high) in sorted(points.items(), key=lambda kv: kv[1][0]):
        spots = [
            ((x, y), (3.0 * side, sign * (3 + level * step)))
            for level in range(12)
            for y, sign in ((high, 1), (low, -1))
            for side in (1, -1)
        ]
        found = next(
            ((xy, off, k >= 4) for strict in (True, False) for k, (xy, off) in enumerate(spots)
             if free(xy, off, k >= 4, strict)),
            (spots[0][0], spots[0][1], False),  # nowhere free: above the point, overlapping (the check names it)
        )  # fmt: skip
        texts.append(put(name, *found))
    return texts


def _crosses(a: Sequence[float], b: Sequence[float], box: Bbox, n: int = 24) -> bool:
    """Whether the segment a-b (display coordinates) passes through ``box``."""
    t = np.linspace(0.0, 1.0, n)
    x, y = a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1])
    return bool(((x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)).any())


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
        style.log2_axis(ax, tp)
        ax.set_title(hw, fontsize=8)
        ax.set_xlabel("TP degree")
    top[0].set_ylabel("throughput vs 1 device (ideal = devices)")
    top[0].legend(fontsize=7, title="TP scheme", title_fontsize=7)
    mem_ax = fig.add_subplot(grid[1, :])
    for s in schemes:
        mem_ax.plot(
            tp, scale["memory_total"].sel(scheme=s).values / 2**30, marker="o", color=colours[s], label=s
        )
    limits: dict[float, list[str]] = {}  # device memory -> presets with that much (A100 and H100: both 80 GB)
    for name, p in presets(scale.attrs).items():
        if name in hws and p.get("memory_bytes"):
            limits.setdefault(p["memory_bytes"] / 2**30, []).append(name)
    for gib, names in limits.items():
        mem_ax.axhline(gib, color="0.4", lw=0.7, ls="--")
        mem_ax.annotate(
            f"device memory: {', '.join(names)}", (tp[-1], gib), fontsize=7, ha="right", va="bottom"
        )
    style.log2_axis(mem_ax, tp)
    mem_ax.set_yscale("log")
    style.plain_log_ticks(mem_ax.yaxis)  # 10, 20, 50, 100 GiB
    mem_ax.set_xlabel("TP degree (data/FSDP degree = devices / TP)")
    mem_ax.set_ylabel(f"training memory per device [GiB]\n({scale_policy(scale)})")
    mem_ax.legend(fontsize=7, title="TP scheme", title_fontsize=7)
    model = json_attr(scale, "model", {}) or {}
    what = (
        f"Projection to {scale.attrs.get('devices', '?')} devices ({scale.attrs.get('devices_per_node', '?')} "
        f"per node): D = {model.get('embed_dim', '?')}, depth {model.get('depth', '?')}, "
        f"N = {scale.attrs.get('N', '?')}, {scale.attrs.get('optimizer', '?')}"
        + (", FSDP" if int(scale.attrs.get("fsdp", 0)) else "")
        + " (x at 0: infeasible)"
    )
    fig.suptitle(headline(what, f"{MODELLED} (refined model)", modelled_for(scale.attrs, hws)))
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


LOWER_SPLIT_AT = ("paper-intra", 8)  # the preset and P of the section 2.2 table's lower-CCR split


def rho_table(rho: xr.Dataset, scenes: Sequence[xr.Dataset] = (), patch: int = 8) -> pd.DataFrame:
    """Paper section 2.2: rho per dataset at patch p, the registry's (modelled) value beside the value read from
    the scene prepared in this run (where one was), and the split with the lower CCR on one preset at one P
    (:data:`LOWER_SPLIT_AT`)."""
    hardware, P = LOWER_SPLIT_AT
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


def rho_caption(rho: xr.Dataset, patch: int = 8) -> str:
    hardware, P = LOWER_SPLIT_AT
    return (
        f"Paper section 2.2, reproduced: rho = C/N at patch {patch} ({rho.attrs.get('token_grid', 'crop')} token "
        "grid). 'modelled' columns come from the registry's grids (cost table rho); 'prepared here' is read from "
        "the scene files this run prepared (empty where the run prepared none). The lower-CCR split is "
        f"{modelled_for(rho.attrs, [hardware])} at P = {P}. No measurement on any device."
    )


def scale_policy(scale: xr.Dataset) -> str:
    """The activation-checkpointing policy the projection's memory was modelled with (scale.nc's attribute):
    'activation checkpointing: blocks' (each block's input kept, one block recomputed at a time) or ': none'."""
    return f"activation checkpointing: {'blocks' if int(scale.attrs.get('activation_checkpointing', 0)) else 'none'}"


def scale_table(scale: xr.Dataset) -> pd.DataFrame:
    """Paper section 9.1 as projected here: per preset, TP degree and scheme — memory, CCR, throughput."""
    need(scale, "memory_total", "ccr", "relative_throughput", "scaling_efficiency", "feasible", "dp")
    rows, policy = [], scale_policy(scale)
    for hw, t, s in product(scale["hardware"].values, scale["tp"].values, scale["scheme"].values):
        sel = {"hardware": hw, "tp": t, "scheme": s}
        row = {
            "hardware (modelled)": str(hw),
            "TP": int(t),
            "DP/FSDP": int(scale["dp"].sel(tp=t)),
            "scheme": str(s),
            f"memory/device [GiB] ({policy})": float(scale["memory_total"].sel(tp=t, scheme=s)) / 2**30,
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
        f"devices: {MODELLED}, refined model, {modelled_for(scale.attrs)}, {scale_policy(scale)}. No column is measured: no run of this "
        "size exists here (the D-CHAG paper's reported memory is compared in table cost_dchag_memory)."
    )


def dchag_memory_table(scale: xr.Dataset) -> pd.DataFrame:
    """The D-CHAG paper's reported peak memory (measured there, on MI250X) beside this memory model."""
    need(scale, "reference_memory_reported", "reference_memory_modelled")
    rows = []
    embed = scale.get("reference_embed_dim")
    for ref, s in product(scale["reference"].values, scale["scheme"].values):
        reported = float(scale["reference_memory_reported"].sel(reference=ref, scheme=s))
        modelled = float(scale["reference_memory_modelled"].sel(reference=ref, scheme=s))
        rows.append(
            {
                "configuration": str(ref),
                "D (inferred)": int(embed.sel(reference=ref)) if embed is not None else None,
                "scheme": str(s),
                "reported [GiB] (D-CHAG paper, MI250X)": reported,
                "modelled [GiB] (this memory model, no activation checkpointing)": modelled,
                "modelled / reported": modelled / reported if reported else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def dchag_memory_caption(scale: xr.Dataset) -> str:
    units = scale["reference_memory_reported"].attrs.get("long_name", "")
    return (
        "Peak memory per device: reported by the D-CHAG paper (measured there on MI250X GCDs, not here) beside "
        "this project's memory model at the paper's sizes, with no activation checkpointing modelled (what the "
        f"paper checkpointed is not given). {units}"
    )


# --- hsitp advise plan over P (plan.nc): kept in its own section so the figure-style branch merges cleanly -------
PLAN_STYLE = dict(zip(PLAN_NAMES, ("o", "s", "^", "v", "D"), strict=True))  # a marker per plan
DATASET_LINES = ("-", "--", ":", "-.")
# dashed and dotted (as the report's caption says), thin and lighter than the datasets' lines
DEVICE_LINES = {"device": (0, (6, 3)), "usable": (0, (1, 1.5))}


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
                line = {"color": colours[p], "ls": ls, "marker": PLAN_STYLE.get(p, "o"), "ms": 3}
                mem_ax.plot(P[ok], mem[ok], **line)
                tps_ax.plot(P[ok], tps[ok], **line)
        dev = float(plan["device_memory"].sel(hardware=hw)) / 1e9
        use = float(plan["usable_memory"].sel(hardware=hw)) / 1e9
        # the lines only: their values in the panel title, their meaning in the legend (labels beside two lines
        # 10 % apart on a log axis overlap each other and the lines)
        mem_ax.axhline(dev, color="0.45", lw=0.8, ls=DEVICE_LINES["device"])
        mem_ax.axhline(use, color="0.45", lw=0.8, ls=DEVICE_LINES["usable"])
        for ax in (mem_ax, tps_ax):
            style.log2_axis(ax, P)
            ax.set_yscale("log")
        mem_ax.set_title(f"{hw}: device {dev:g} GB, usable {use:.1f} GB", fontsize=8)
        tps_ax.set_xlabel("TP degree P (replicas = devices / P)")
    axes[0, 0].set_ylabel("per-rank peak memory [GB]")
    axes[1, 0].set_ylabel("tokens/s of the allocation")
    handles = _plan_legend(plans, names, colours)
    style.key_below(fig, handles, int(np.ceil(len(handles) / 2)), fontsize=8)
    model = json_attr(plan, "model", {}) or {}
    what = (
        f"advise plan over P: D = {model.get('embed_dim', '?')}, depth {model.get('depth', '?')}, "
        f"{model.get('heads', '?')} heads, batch {model.get('batch', '?')}, g = {plan.attrs.get('groups', '?')}, "
        f"checkpointing {checkpointing}"
    )
    fig.suptitle(
        headline(what, f"{MODELLED} (memory and refined time models)", modelled_for(plan.attrs, hws))
    )
    return fig


def _plan_legend(plans: list[str], names: list[str], colours: dict[str, tuple]) -> list[Line2D]:
    """The legend of :func:`plan_figure`: a colour and marker per plan, a line style per dataset, the two
    device-memory lines."""
    handles = [Line2D([], [], color=colours[p], marker=PLAN_STYLE.get(p, "o"), label=p) for p in plans]
    handles += [
        Line2D([], [], color="0.3", ls=DATASET_LINES[i % len(DATASET_LINES)], label=n)
        for i, n in enumerate(names)
    ]
    handles += [
        Line2D([], [], color="0.45", lw=0.8, ls=DEVICE_LINES["device"], label="device memory"),
        Line2D(
            [], [], color="0.45", lw=0.8, ls=DEVICE_LINES["usable"], label="usable (device less headroom)"
        ),
    ]
    return handles
