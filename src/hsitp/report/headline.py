"""The headline experiment's page drawn from its committed reference alone (``results/reference/RUN/``,
collected by ``hsitp report reference``): ``hsitp report headline --reference results/reference/RUN --out
DIR``.

Three figures, each from a tidy table this module also writes as CSV (what is drawn is what the table holds):

- :func:`forest_table` / :func:`forest_figure`: per accuracy protocol, each cell's mean test OA with its 95 %
  t interval over partitions, the SVM and the random forest on the same partitions as bands, and each D-CHAG
  cell's paired ΔOA vs tp with its interval and verdict (``train/summary.nc``).
- :func:`pareto_table` / :func:`pareto_figure`: per-rank peak memory (fullest rank) against tokens/s per plan
  and P (``probe/memory.nc``, ``probe/throughput.nc``, no activation checkpointing), each point marked with
  its cell's verdict.
- :func:`curves_table`, :func:`time_table` / :func:`time_figure`: the partition-mean test OA curve per cell
  (``train/runs.nc``) and the steps to tp's OA − δ (the summary's ``steps_to_target``), with the time ratio
  where the probe timed both plans interleaved without oversubscription.

Every number is measured on the device the files name; nothing here is modelled. Nothing is recomputed from a
run: the page renders in seconds from the reference's four files.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from hsitp.analysis import labels
from hsitp.analysis.cells import model_label, replicate_unit
from hsitp.analysis.headline import (
    FILES,
    PLAN_ORDER,
    Inputs,
    curves_table,
    forest_table,
    load_reference,
    pareto_table,
    probe_size,
    probed_on,
    time_table,
    trained_on,
)
from hsitp.io import atomic_write_text
from hsitp.report import style
from hsitp.report.common import MEASURED, headline, save_figure
from hsitp.report.train import BASELINE_STYLES, VERDICT_MARKERS

FIGURES = ("forest", "pareto", "time")
PERCENT = 100.0
REFERENCE_MARKER = "*"
MARKERS = {"reference": REFERENCE_MARKER, **VERDICT_MARKERS}
P_STYLES = {2: "-", 4: "--", 8: ":"}  # line style per P in the curves
PLAN_COLOURS = ("0.15", style.OKABE_ITO[0], style.OKABE_ITO[5], style.OKABE_ITO[3], style.OKABE_ITO[1])
EQUAL_ZONE = style.OKABE_ITO[2]


def _colours(plans: list[str]) -> dict[str, str]:
    """tp near black, then each D-CHAG plan a colour-blind-safe colour none of the zones uses."""
    ordered = sorted(plans, key=_plan_key)
    return {p: PLAN_COLOURS[k % len(PLAN_COLOURS)] for k, p in enumerate(ordered)}


def _plan_key(plan: str) -> int:
    return PLAN_ORDER.index(plan) if plan in PLAN_ORDER else len(PLAN_ORDER)


def _panels(table: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted(set(zip(table["dataset"], table["protocol"], strict=True)))


# --- the forest plot -------------------------------------------------------------------------------------------------
def _bar(ax: plt.Axes, x: float, y: float, xerr: list[list[float]], gid: str, **style_: Any) -> None:
    """A point with horizontal whiskers; its data marker (not the caps) carries ``gid``, so a test reads the
    plotted value back."""
    ax.errorbar(x, y, xerr=xerr, **style_)[0].set_gid(gid)


def _oa_panel(ax: plt.Axes, cells: pd.DataFrame, baselines: pd.DataFrame, colours: dict[str, str]) -> None:
    """Each cell's mean OA [%] with its interval (gid = the row's name: a test reads the plotted values back),
    the classical baselines as a line at the mean and a band over their interval."""
    y = np.arange(len(cells))
    for b in baselines.itertuples(index=False):
        ls = next((s for n, s in BASELINE_STYLES.values() if n == b.row), "-.")
        shade = "0.35" if ls == "-." else "0.6"
        ax.axvspan(PERCENT * b.oa_ci_low, PERCENT * b.oa_ci_high, color=shade, alpha=0.13, lw=0)
        ax.axvline(PERCENT * b.oa_mean, color=shade, ls=ls, lw=1.3)
    for yy, c in zip(y, cells.itertuples(index=False), strict=True):
        err = [[PERCENT * (c.oa_mean - c.oa_ci_low)], [PERCENT * (c.oa_ci_high - c.oa_mean)]]
        _bar(ax, PERCENT * c.oa_mean, yy, err, f"{c.protocol}: oa {c.row}", fmt=MARKERS.get(c.verdict, "s"),
             color=colours[c.plan], ms=6, capsize=3, lw=1.4, mec="black", mew=0.5)  # fmt: skip
    ax.set_yticks(y, cells["row"])
    ax.set_ylim(len(cells) - 0.5, -0.5)
    k, unit = int(cells["units"].max()), str(cells["unit"].iloc[0])
    ax.set_xlabel(f"test OA [%], mean and 95 % t interval over {k} {unit}s")


def _delta_panel(ax: plt.Axes, cells: pd.DataFrame, colours: dict[str, str], margin: float) -> None:
    """Each D-CHAG cell's paired ΔOA vs tp [pp] with the summary's interval, the equal zone (± margin) shaded,
    the verdicts named on the right."""
    y = np.arange(len(cells))
    ax.axvspan(-PERCENT * margin, PERCENT * margin, color=EQUAL_ZONE, alpha=0.18, lw=0)
    ax.axvline(0.0, color="0.3", lw=0.9)
    for yy, c in zip(y, cells.itertuples(index=False), strict=True):
        if c.plan == "tp":
            ax.plot(0.0, yy, REFERENCE_MARKER, color=colours["tp"], ms=9)
            continue
        err = [[PERCENT * (c.d_oa_vs_tp_mean - c.d_oa_vs_tp_ci_low)],
               [PERCENT * (c.d_oa_vs_tp_ci_high - c.d_oa_vs_tp_mean)]]  # fmt: skip
        _bar(ax, PERCENT * c.d_oa_vs_tp_mean, yy, err, f"{c.protocol}: d_oa {c.row}",
             fmt=MARKERS.get(c.verdict, "s"), color=colours[c.plan], ms=6, capsize=3, lw=1.4, mec="black",
             mew=0.5)  # fmt: skip
    ax.yaxis.tick_right()
    ax.set_yticks(y, cells["verdict"])
    ax.set_ylim(len(cells) - 0.5, -0.5)
    units = "/".join(dict.fromkeys(cells.loc[cells["plan"] != "tp", "unit"])) or "partition"
    ax.set_xlabel(f"ΔOA vs tp [pp], paired by {units} (95 % t interval)")


def forest_figure(table: pd.DataFrame, hardware: str, margin: float = 0.01) -> Figure:
    """Per (dataset, protocol) a row of two panels: each cell's OA with its interval beside the SVM and the
    random forest on the same partitions (bands), and each D-CHAG cell's paired ΔOA vs tp with its verdict."""
    panels = _panels(table)
    n = max(
        int(((table["dataset"] == d) & (table["protocol"] == p) & (table["kind"] == "cell")).sum())
        for d, p in panels
    )
    size = style.figsize(style.FULL_WIDTH_IN, len(panels) * (0.32 * n + 1.3) + 1.6)
    fig, axes = plt.subplots(
        len(panels), 2, squeeze=False, layout="constrained", width_ratios=[3, 2], figsize=size
    )
    colours = _colours(list(set(table.loc[table["kind"] == "cell", "plan"])))
    for row, (dataset, protocol) in enumerate(panels):
        here = table[(table["dataset"] == dataset) & (table["protocol"] == protocol)]
        cells = here[here["kind"] == "cell"].reset_index(drop=True)
        _oa_panel(axes[row, 0], cells, here[here["kind"] == "baseline"], colours)
        _delta_panel(axes[row, 1], cells, colours, margin)
        axes[row, 0].set_title(f"{dataset}, {protocol} protocol: OA per cell", fontsize=9)
        tested = cells["beats_svm"].notna()
        counts = (
            "\nnot counted: no paired ΔOA vs the SVM in the summary"
            if not tested.any()
            else (
                ""
                if cells.loc[tested, "beats_svm"].astype(bool).any()
                else "\nnot counted: no model beats the SVM"
            )
        )
        axes[row, 1].set_title(f"{protocol} protocol: verdict vs tp{counts}", fontsize=9)
    handles = [plt.Line2D([], [], ls="", marker="o", color=colours[p], label=p) for p in colours]
    handles += [plt.Line2D([], [], ls="", marker=m, color="0.4", label=v) for v, m in MARKERS.items()]
    plural = "s" if (table["unit"] == "partition").any() else ""
    handles += [plt.Line2D([], [], color="0.35" if ls == "-." else "0.6", ls=ls, lw=1.3,
                           label=f"{name}, same partition{plural} (band: 95 % interval)")
                for name, ls in BASELINE_STYLES.values()]  # fmt: skip
    zone = f"equal zone (± {PERCENT * margin:g} pp)"
    handles.append(plt.Rectangle((0, 0), 1, 1, color=EQUAL_ZONE, alpha=0.18, label=zone))
    style.key_below(fig, handles, 4, title="plan (colour), verdict vs tp (marker), classical baselines")
    what = "Accuracy per cell with its 95 % interval, beside the SVM and the random forest,"
    what += " and its verdict vs tp"
    fig.suptitle(headline(what, MEASURED, hardware))
    return fig


# --- memory per rank against tokens/s --------------------------------------------------------------------------------
LABEL_OFFSET = {"tp": (6, 4, "left"), "dchag_l": (6, -10, "left"), "dchag_c": (-6, 5, "right")}  # points, ha


def _pareto_panel(ax: plt.Axes, here: pd.DataFrame, colours: dict[str, str]) -> None:
    """One protocol's probed points: a line per plan through its P, marker = verdict, hollow = oversubscribed,
    whiskers = tokens/s over the interleaved rounds (min to max)."""
    shown = here.dropna(subset=["peak_mib", "tokens_per_s"])
    for plan, pts in shown.groupby("plan", sort=False):
        pts = pts.sort_values("P")
        ax.plot(pts["tokens_per_s"], pts["peak_mib"], color=colours[plan], lw=0.8, alpha=0.6)
        for p in pts.itertuples(index=False):
            over = bool(str(p.note))
            err = [[p.tokens_per_s - p.tokens_per_s_min], [p.tokens_per_s_max - p.tokens_per_s]]
            _bar(ax, p.tokens_per_s, p.peak_mib, err, f"{p.protocol}: {plan} P={p.P} g={p.g}",
                 fmt=MARKERS.get(p.verdict, "s"), color=colours[plan], mfc="white" if over else colours[plan],
                 mec=colours[plan] if over else "black", mew=1.2 if over else 0.5,
                 ms=10 if plan == "tp" else 7, capsize=2, lw=0.9)  # fmt: skip
            dx, dy, ha = LABEL_OFFSET.get(plan, (6, 4, "left"))
            name = f"P = {p.P}" if plan == "tp" else f"P = {p.P}, g = {p.g}"
            ax.annotate(name, (p.tokens_per_s, p.peak_mib), xytext=(dx, dy), textcoords="offset points",
                        fontsize=7.5, ha=ha, color="0.2")  # fmt: skip
    ax.set_xlabel("tokens/s, median of the interleaved rounds\n(whiskers: slowest to fastest round)")
    ax.set_ylabel("peak memory per rank [MiB]\n(fullest rank, no activation checkpointing)")
    ax.set_ylim(0, max(shown["peak_mib"].max() * 1.15, 1.0) if not shown.empty else 1.0)
    lo, hi = (shown["tokens_per_s_min"].min(), shown["tokens_per_s_max"].max()) if not shown.empty else (0, 1)
    ax.set_xlim(lo - 0.12 * (hi - lo), hi + 0.12 * (hi - lo))


def pareto_figure(table: pd.DataFrame, hardware: str) -> Figure:
    """Per (dataset, protocol): per-rank peak memory against tokens/s for each trained plan and P the probe
    measured, marker = the cell's accuracy verdict vs tp (tp: the reference); the P it did not probe named."""
    panels = _panels(table)
    size = style.figsize(min(style.FULL_WIDTH_IN, 4.8 * len(panels) + 1.0), 5.6)
    fig, axes = plt.subplots(1, len(panels), squeeze=False, layout="constrained", sharey=True, figsize=size)
    colours = _colours(list(set(table["plan"])))
    for ax, (dataset, protocol) in zip(axes[0], panels, strict=True):
        here = table[(table["dataset"] == dataset) & (table["protocol"] == protocol)]
        _pareto_panel(ax, here, colours)
        missing = sorted({int(p) for p in here.loc[here["peak_mib"].isna(), "P"]})
        title = f"{dataset}, {protocol} protocol"
        if missing:
            title += f"\nP = {', '.join(map(str, missing))}: trained, not probed"
        ax.set_title(title, fontsize=9)
    for ax in axes[0][1:]:
        ax.set_ylabel("")
    notes = sorted({str(n) for n in table["note"].dropna() if str(n) and not str(n).startswith("not probed")})
    handles = [plt.Line2D([], [], ls="", marker="o", color=colours[p], label=p) for p in colours]
    handles += [plt.Line2D([], [], ls="", marker=m, color="0.4", label=v) for v, m in MARKERS.items()]
    handles += [plt.Line2D([], [], ls="", marker="o", mfc="white", mec="0.3",
                           label=f"hollow: {n}, its tokens/s decide nothing") for n in notes]  # fmt: skip
    style.key_below(fig, handles, 4, title="plan (colour), accuracy verdict vs tp (marker)")
    what = "Peak memory per rank against tokens/s per plan and P, marked by accuracy verdict vs tp"
    fig.suptitle(headline(what, MEASURED, f"{hardware}; no activation checkpointing"))
    return fig


# --- time to accuracy ------------------------------------------------------------------------------------------------
def _curves_panel(ax: plt.Axes, curves: pd.DataFrame, times: pd.DataFrame, colours: dict[str, str]) -> None:
    """The replicate-mean test OA [%] per cell against steps (gid = the cell's name), and the target line."""
    for (plan, P, g), c in curves.groupby(["plan", "P", "g"], sort=False):  # noqa: N806
        gid = f"{c['protocol'].iloc[0]}: curve {model_label(plan, int(P), int(g))}"
        ax.plot(
            c["step"], PERCENT * c["oa"], color=colours[plan], ls=P_STYLES.get(int(P), "-."), lw=1.2, gid=gid
        )
    target = float(times["target_oa"].iloc[0])
    ax.axhline(PERCENT * target, color="black", lw=0.9, ls=(0, (5, 2)))
    gaps = [np.diff(c["step"].to_numpy()).max(initial=0) for _, c in curves.groupby(["plan", "P", "g"])]
    ax.set_xlabel(f"training steps (test OA scored every ≤ {int(max(gaps, default=0))} steps)")
    ax.set_ylabel(f"test OA [%], mean over {times['unit'].iloc[0]}s")


def _steps_panel(ax: plt.Axes, times: pd.DataFrame, colours: dict[str, str], last: float) -> None:
    """Steps to the target per cell (dot: the replicate-mean curve's; whiskers: the fastest and the slowest
    replicate's own, an arrow to the run's end where one never reaches it), the time ratio vs tp on the right.
    """
    y = np.arange(len(times))
    for yy, t in zip(y, times.itertuples(index=False), strict=True):
        if np.isfinite(t.steps_min):
            high = t.steps_max if np.isfinite(t.steps_max) else last
            ax.plot([t.steps_min, high], [yy, yy], color=colours[t.plan], lw=1.2)
            if not np.isfinite(t.steps_max):
                ax.plot(last, yy, ">", color=colours[t.plan], ms=5)
        if np.isfinite(t.steps):
            gid = f"{t.protocol}: steps {t.row}"
            ax.plot(t.steps, yy, "o", color=colours[t.plan], ms=6, mec="black", mew=0.5, gid=gid)
    ax.set_yticks(y, times["row"])
    ax.set_ylim(len(times) - 0.5, -0.5)
    ax.set_xlim(0, last * 1.04)
    ax.set_xlabel("steps to tp's OA − δ")
    right = ax.twinx()  # a real axes: the figure check reads its labels
    right.set_ylim(ax.get_ylim())
    right.set_yticks(y, [_time_label(t) for t in times.itertuples(index=False)])
    right.grid(False)


def _time_label(t: Any) -> str:  # a row of time_table
    """The right-hand label of a row: the time ratio vs tp, or why only steps (or nothing) can be said."""
    if t.plan == "tp":
        return "reference"
    if not np.isfinite(t.steps):
        return "never reached"
    if np.isfinite(t.time_ratio):
        return f"time {t.time_ratio:.2f}x tp's"
    return f"steps {t.steps / t.steps_ref:.2f}x tp's; time: —" if np.isfinite(t.steps_ref) else "—"


def time_figure(curves: pd.DataFrame, times: pd.DataFrame, hardware: str, margin: float = 0.01) -> Figure:
    """Per (dataset, protocol): the cells' replicate-mean test OA curves with the target, and the steps to it
    (with the time ratio vs tp where the probe timed both plans without oversubscription)."""
    panels = _panels(times)
    n = max(int(((times["dataset"] == d) & (times["protocol"] == p)).sum()) for d, p in panels)
    size = style.figsize(style.FULL_WIDTH_IN, len(panels) * max(0.3 * n + 1.4, 3.0) + 1.5)
    fig, axes = plt.subplots(len(panels), 2, squeeze=False, layout="constrained", figsize=size)
    colours = _colours(list(set(times["plan"])))
    last = float(curves["step"].max()) if not curves.empty else 1.0
    for row, (dataset, protocol) in enumerate(panels):
        t = times[(times["dataset"] == dataset) & (times["protocol"] == protocol)].reset_index(drop=True)
        c = curves[(curves["dataset"] == dataset) & (curves["protocol"] == protocol)]
        ref = t.loc[t["plan"] == "tp", "steps"]
        t["steps_ref"] = float(ref.iloc[0]) if not ref.empty else math.nan
        _curves_panel(axes[row, 0], c, t, colours)
        _steps_panel(axes[row, 1], t, colours, last)
        axes[row, 0].set_title(f"{dataset}, {protocol} protocol: test OA per cell", fontsize=9)
        axes[row, 1].set_title(f"{protocol} protocol: steps to tp's OA − δ, time vs tp", fontsize=9)
    handles = [plt.Line2D([], [], color=colours[p], lw=1.4, label=p) for p in colours]
    handles += [plt.Line2D([], [], color="0.3", ls=ls, lw=1.2, label=f"P = {P}")
                for P, ls in P_STYLES.items() if P in set(times["P"])]  # fmt: skip
    target = f"target: tp's OA − δ (δ = {PERCENT * margin:g} pp)"
    never = f"a {times['unit'].iloc[0]} never reached it"
    handles += [plt.Line2D([], [], color="black", ls=(0, (5, 2)), lw=0.9, label=target),
                plt.Line2D([], [], ls="", marker=">", color="0.3", label=never)]  # fmt: skip
    style.key_below(fig, handles, 4, title="plan (colour), P (line style), target")
    fig.suptitle(
        headline("Time to accuracy: steps to tp's OA − δ, and time vs tp where timed", MEASURED, hardware)
    )
    return fig


# --- the page --------------------------------------------------------------------------------------------------------
def captions(inputs: Inputs, times: pd.DataFrame) -> dict[str, str]:
    """One sentence per figure for the Markdown page, naming what is measured and where."""
    s = inputs.summary
    margin = PERCENT * float(s.attrs.get("verdict_margin", 0.01))
    unit = replicate_unit(s)  # partitions where the cells hold several, else seeds (cpu-fair: one partition)
    timed = sorted(
        {int(p) for p in times.loc[np.isfinite(times["time_ratio"]) & (times["plan"] != "tp"), "P"]}
    )
    return {
        "forest": f"Test OA per cell (mean and 95 % t interval over {unit}s) beside the SVM and the random "
        f"forest fit on the same partition{'s' * (unit == 'partition')} (bands), and each D-CHAG cell's ΔOA vs "
        f"tp paired by {unit} with its verdict (equal: the interval within ± {margin:g} pp; tp is one model at every P, so each "
        f"D-CHAG cell pairs with its one tp cell); {trained_on(inputs.runs)}.",
        "pareto": "Per-rank peak memory (fullest rank, one training step, no activation checkpointing) "
        "against tokens/s (median of the interleaved rounds, whiskers min to max) per plan and P, marker = "
        f"the cell's accuracy verdict vs tp; {probe_size(inputs)}, {probed_on(inputs.memory)}.",
        "time": "Replicate-mean test OA against training steps per cell and the steps until it first reaches "
        f"tp's OA − δ (whiskers: the fastest and the slowest {unit}'s own curve); the time ratio vs tp "
        "(steps x the probe's interleaved time per step) only at P = "
        f"{', '.join(map(str, timed)) or 'none'}, where the probe timed both plans on as many cores as "
        f"ranks; {trained_on(inputs.runs)}.",
    }


def lacking(inputs: Inputs, times: pd.DataFrame, pareto: pd.DataFrame) -> list[str]:
    """What the reference does not hold for these figures, one sentence each."""
    out = []
    unprobed = sorted({int(p) for p in pareto.loc[pareto["peak_mib"].isna(), "P"]})
    if unprobed:
        probed = ", ".join(str(int(p)) for p in inputs.memory["P"].values)
        out.append(
            f"Memory and tokens/s at P = {', '.join(map(str, unprobed))}: the probe ran P = {probed} only."
        )
    over = sorted({str(n) for n in pareto["note"].dropna() if str(n) and not str(n).startswith("not probed")})
    out += [f"A throughput a conclusion can rest on where the probe was {n} (drawn hollow)." for n in over]
    no_time = times[(times["plan"] != "tp") & np.isfinite(times["steps"]) & ~np.isfinite(times["time_ratio"])]
    if not no_time.empty:
        which = "; ".join(
            f"{protocol}: {', '.join(here['row'])}" for protocol, here in no_time.groupby("protocol")
        )
        out.append(
            f"Seconds to accuracy ({which}): the reference holds steps to the target (the test OA scored "
            "every few epochs) and a time per step comparable across plans only from the probe's interleaved "
            "rounds, which lack these cells' P or ran them oversubscribed; the runs' own tokens/s and wall "
            "times are of single-process equivalents (one process, whatever P), comparable within a run only."
        )
    return out


def page(inputs: Inputs, caps: dict[str, str], missing: list[str], command: str) -> str:
    """The Markdown page: each figure with its caption, what the reference lacks, where it came from."""
    files = ", ".join(f"`{f}`" for f in FILES.values())
    devices = [*map(str, inputs.runs["device"].values), *map(str, inputs.memory["device"].values)]
    lines = [
        f"# The headline experiment: {inputs.folder.name}",
        "",
        f"Drawn by `{command}` from the committed reference `{inputs.folder}` alone ({files}). Every "
        f"number is measured on {labels.platform(devices)}{labels.not_a_gpu(devices)} (nothing modelled).",
        "",
    ]
    titles = ("Accuracy and verdicts", "Memory per rank against tokens/s", "Time to accuracy")
    for name, title in zip(FIGURES, titles, strict=True):
        lines += [f"## {title}", "", f"![{title}](headline_{name}.png)", "", caps[name], ""]
    lines += ["## What the reference lacks for these figures", ""]
    lines += [f"- {m}" for m in missing] or ["- nothing"]
    return "\n".join(lines) + "\n"


def compact_png(src: Path, dst: Path, colours: int = 128) -> Path:
    """A smaller copy of a saved figure for the docs (a third of the bytes): its pixels reduced to a palette
    of ``colours`` without dithering (text and lines unchanged to the eye), its recorded readability check
    kept, so ``hsitp report check-figures`` reads the copy as it reads the original."""
    from PIL import Image, PngImagePlugin

    with Image.open(src) as im:
        info = PngImagePlugin.PngInfo()
        for key, value in im.info.items():
            if isinstance(value, str):
                info.add_text(key, value)
        small = im.convert("RGB").quantize(colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    small.save(tmp, format="png", optimize=True, pnginfo=info)
    os.replace(tmp, dst)
    return dst


def render(
    reference: str | os.PathLike[str],
    out: str | os.PathLike[str],
    command: str = "",
    docs: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Read the reference, write the three figures (PNG + PDF, checked as saved), their tidy tables (CSV) and
    ``headline.md`` under ``out``, and with ``docs`` a compact copy of each PNG there (:func:`compact_png`);
    the paths written."""
    inputs = load_reference(reference)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    style.theme()
    forest, pareto = forest_table(inputs.summary), pareto_table(inputs)
    curves, times = curves_table(inputs), time_table(inputs)
    margin = float(inputs.summary.attrs.get("verdict_margin", 0.01))
    figures = {
        "forest": forest_figure(forest, trained_on(inputs.runs), margin),
        "pareto": pareto_figure(pareto, probed_on(inputs.memory)),
        "time": time_figure(curves, times, trained_on(inputs.runs), margin),
    }
    written: list[Path] = []
    for name, fig in figures.items():
        written += save_figure(fig, [out / f"headline_{name}.{ext}" for ext in ("png", "pdf")]).paths
    for name, table in (("forest", forest), ("pareto", pareto), ("curves", curves), ("time", times)):
        written.append(atomic_write_text(out / f"headline_{name}.csv", table.to_csv(index=False)))
    text = page(
        inputs, captions(inputs, times), lacking(inputs, times, pareto), command or "hsitp report headline"
    )
    written.append(atomic_write_text(out / "headline.md", text))
    if docs is not None:
        written += [
            compact_png(out / f"headline_{name}.png", Path(docs) / f"headline_{name}.png") for name in figures
        ]
    return written
