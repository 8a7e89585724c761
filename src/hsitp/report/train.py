"""Report page of the train stage: training curves, per-rank peak memory and throughput per run, predicted class
maps, and the paper's last-epochs summary per run.

Every number is measured during training on the device the record names (its ``device`` attribute), with
activation checkpointing ``none`` (the record's ``activation_checkpointing``). Overall accuracy and the predicted
map are shown only where a record holds them (``overall_accuracy`` per evaluated epoch, ``prediction`` (y, x)).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from itertools import cycle

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hsitp import contracts
from hsitp.analysis import labels
from hsitp.analysis.answer import NO_PROBE, pareto_points
from hsitp.analysis.cells import BASELINE_NAMES, METRICS, MIB, accuracy_table, model_label, replicate_unit
from hsitp.analysis.read import json_attr, load
from hsitp.names import DCHAG_PLANS
from hsitp.outcomes import Accuracy
from hsitp.report import style
from hsitp.report.common import MEASURED, headline


def load_records(paths: Sequence[str | os.PathLike[str]]) -> list[xr.Dataset]:
    """Every training record (kind ``train``), in the given order."""
    return [load(p, contracts.TRAIN, "loss", "tokens_per_s", "peak_allocated") for p in paths]


def run_label(ds: xr.Dataset) -> str:
    """'indian_pines: dchag_l P=2 g=2 N=5776 random s0' (N: the crop of train.crops; one scene may have two)."""
    a = ds.attrs
    return f"{a.get('dataset', '?')}: {_record_model(ds, True)} {a.get('protocol', '')} s{a.get('seed', '')}"


def trained_on(records: Sequence[xr.Dataset]) -> str:
    """The device(s) the runs trained on, with dtype, and their activation-checkpointing policy."""
    devices = list(dict.fromkeys(labels.measured_on(r.attrs) for r in records))
    # A P = 1 run has no process group (backend "none"); it is the same device as the multi-rank runs' entry.
    devices = [d for d in devices if ", none)" not in d] or devices
    ckpt = sorted({str(r.attrs.get("activation_checkpointing", "none")) for r in records})
    return f"measured on {'; '.join(devices) or 'an unrecorded device'}; activation checkpointing: {', '.join(ckpt)}"


def _need_runs(records: Sequence[xr.Dataset]) -> None:
    if not records:
        raise ValueError("no training record given: nothing to show")


def _accuracy(ds: xr.Dataset) -> pd.DataFrame | None:
    """Overall accuracy (``oa``) per evaluated epoch (NaN epochs dropped), or None when the record has none."""
    if "oa" not in ds:
        return None
    oa = ds["oa"]
    if oa.ndim != 1:
        return None
    df = pd.DataFrame({"epoch": oa[oa.dims[0]].values, "overall_accuracy": oa.values})
    return df[np.isfinite(df["overall_accuracy"])]


def _panel_key(ds: xr.Dataset) -> tuple[str, str]:
    return str(ds.attrs.get("dataset", "?")), str(ds.attrs.get("protocol", "?"))


def _record_model(ds: xr.Dataset, with_n: bool) -> str:
    a = ds.attrs
    return model_label(a.get("plan"), a.get("P"), a.get("g"), a.get("tokens") if with_n else None)


# --- figures -------------------------------------------------------------------------------------------------------
def _same_curves(a: xr.Dataset, b: xr.Dataset) -> bool:
    """Two records that trained one model: equal loss (and overall accuracy) at every epoch, to float32 noise."""
    if a["loss"].shape != b["loss"].shape or not np.allclose(a["loss"].values, b["loss"].values, rtol=1e-5):
        return False
    oa, ob = _accuracy(a), _accuracy(b)
    if (oa is None) != (ob is None):
        return False
    return oa is None or (
        oa.shape == ob.shape and np.allclose(oa.values, ob.values, rtol=1e-5, equal_nan=True)
    )


def coinciding_runs(records: Sequence[xr.Dataset]) -> list[list[xr.Dataset]]:
    """Records grouped where they trained one model (same panel, same seed, same curves): dense at P = 1, tp and
    token at seed 0 are one model computed three ways, so they are one line named 'dense P=1 ≡ tp P=2 ≡ ...'."""
    groups: list[list[xr.Dataset]] = []
    for r in records:
        key = (_panel_key(r), int(r.attrs.get("seed", 0)))
        for g in groups:
            if (_panel_key(g[0]), int(g[0].attrs.get("seed", 0))) == key and _same_curves(g[0], r):
                g.append(r)
                break
        else:
            groups.append([r])
    return groups


def curves_figure(records: Sequence[xr.Dataset], summary: xr.Dataset | None = None) -> Figure:
    """Learning curves: loss per epoch (top) and overall accuracy per evaluated epoch (bottom, where any record
    holds it), one column per (dataset, protocol); colour and marker = model (plan, P, g), line style = seed. Runs
    that trained one model (identical curves) are one line whose label names every run ('dense P=1 ≡ tp P=2').
    With ``summary`` (train/summary.nc), the classical baselines' mean overall accuracy on the same partition is drawn
    as horizontal lines, so the transformer is seen beside them."""
    _need_runs(records)
    panels = list(dict.fromkeys(_panel_key(r) for r in records))
    has_acc = any((a := _accuracy(r)) is not None and not a.empty for r in records)
    note = accuracy_note(summary, records) if has_acc else None
    nrow = 2 if has_acc else 1
    with_n = len({r.attrs.get("tokens") for r in records}) > 1  # N shown once the records hold two crops
    groups = coinciding_runs(records)
    names = list(dict.fromkeys(" ≡ ".join(_record_model(r, with_n) for r in g) for g in groups))
    colours = dict(zip(names, style.palette(len(names)), strict=True))
    marks = dict(zip(names, style.markers(len(names)), strict=True))
    seeds = sorted({int(r.attrs.get("seed", 0)) for r in records})
    # seed line styles, none of them the baselines' ("-." and ":")
    styles = dict(zip(seeds, cycle(["-", "--", (0, (4, 1, 1, 1, 1, 1)), (0, (8, 2))]), strict=False))
    width = min(style.FULL_WIDTH_IN, max(7.5, 4.4 * len(panels)))
    legend_rows = int(np.ceil((len(names) + (len(seeds) if len(seeds) > 1 else 0) + 2) / 2))
    fig, axes = plt.subplots(
        nrow, len(panels), figsize=(width, 2.9 * nrow + 1.2 + 0.22 * legend_rows), squeeze=False,
        layout="constrained", sharex="col",
    )  # fmt: skip
    for g in groups:
        r = g[0]
        col = panels.index(_panel_key(r))
        name = " ≡ ".join(_record_model(x, with_n) for x in g)
        line = {"color": colours[name], "ls": styles[int(r.attrs.get("seed", 0))], "lw": 1.4,
                "marker": marks[name], "ms": 4, "markevery": max(1, r.sizes["epoch"] // 8)}  # fmt: skip
        axes[0, col].plot(r["epoch"].values, r["loss"].values, **line)
        acc = _accuracy(r)
        if has_acc and acc is not None and not acc.empty:
            axes[1, col].plot(acc["epoch"], acc["overall_accuracy"], **{**line, "markevery": 1})
    _curve_panels(axes, panels, records, summary, note, width)
    handles = [plt.Line2D([], [], color=colours[m], marker=marks[m], label=m) for m in names]
    if len(seeds) > 1:
        handles += [plt.Line2D([], [], color="0.3", ls=styles[s], label=f"seed {s}") for s in seeds]
    if summary is not None and has_acc:
        n_seeds = _baseline_seeds(summary)
        handles += [plt.Line2D([], [], color="0.35", ls=ls, label=f"{name}, same partition ({n_seeds})")
                    for name, ls in BASELINE_STYLES.values()]  # fmt: skip
    style.key_below(fig, handles, 2)
    what = "Learning curves per run" + ("" if has_acc else " (no record holds an overall accuracy)")
    fig.suptitle(headline(what, MEASURED, trained_on(records)))
    return fig


def _curve_panels(
    axes: np.ndarray,
    panels: Sequence[tuple[str, str]],
    records: Sequence[xr.Dataset],
    summary: xr.Dataset | None,
    note: str | None,
    width: float,
) -> None:
    """Titles and labels of the learning-curve panels; on the accuracy row (if any) the classical baselines' OA as
    lines and the not-trained-yet note between the runs' OA and the lowest baseline."""
    has_acc = axes.shape[0] > 1
    for col, (dataset, protocol) in enumerate(panels):
        axes[0, col].set_title(f"{dataset}, {protocol} protocol")
        axes[0, col].set_ylabel("training loss\n(cross-entropy, train pixels)" if col == 0 else "")
        axes[-1, col].set_xlabel("epoch")
        axes[-1, col].xaxis.set_major_locator(MaxNLocator(integer=True))
        if has_acc:
            axes[1, col].set_ylabel("overall accuracy\n(test pixels)" if col == 0 else "")
            axes[1, col].set_ylim(0, 1)
            baselines = _baseline_oa(summary, dataset, protocol)
            for name, ls, oa in baselines:
                axes[1, col].axhline(oa, color="0.35", ls=ls, lw=1)
                axes[1, col].annotate(f"{name} {oa:.3f}", (0.01, oa), xycoords=("axes fraction", "data"),
                                      fontsize=7, color="0.3", va="bottom")  # fmt: skip
            if note:  # between the runs' OA and the lowest baseline: where the gap is
                runs_oa = [a["overall_accuracy"].max() for r in records if _panel_key(r) == (dataset, protocol)
                           and (a := _accuracy(r)) is not None and not a.empty]  # fmt: skip
                lo, hi = max(runs_oa, default=0.0), min((oa for *_, oa in baselines), default=1.0)
                stamp(axes[1, col], note, (0.5, (lo + hi) / 2), width_in=width / len(panels) - 1.0)


FAR_BELOW = 0.5  # a transformer under this fraction of the best classical baseline's OA has not learnt yet


def accuracy_note(summary: xr.Dataset | None, records: Sequence[xr.Dataset] = ()) -> str | None:
    """A note for the accuracy figures (curves, accuracy bars, predicted maps) of a run whose models have not learnt:
    on every (dataset, protocol) the best transformer's mean OA is under :data:`FAR_BELOW` of the best classical
    baseline's (the summary's ``oa_mean``, ``baseline_oa_mean``); without a summary, every record's last OA is under
    twice chance (2 / classes). The smoke config trains 2 epochs of 3 steps: its OA of ~0.1 beside the SVM's 0.8
    and its noise-like maps say the machinery ran, not how accurate a plan is. None when the models are not far
    below, or nothing tells."""
    far: list[bool] = []
    by_baseline = summary is not None and "oa_mean" in summary and "baseline_oa_mean" in summary
    if by_baseline:
        for _, here in contracts.summary_cells(summary).groupby(["dataset", "protocol"], sort=False):
            runs = here["oa_mean"].to_numpy(dtype=float)
            base = summary["baseline_oa_mean"].values[here["i"].iloc[0]]
            if np.isfinite(runs).any() and np.isfinite(base).any():
                far.append(bool(np.nanmax(runs) < FAR_BELOW * np.nanmax(base)))
    else:
        for r in records:
            acc, k = _accuracy(r), int(r.attrs.get("classes", 0) or 0)
            if acc is not None and not acc.empty and k > 1:
                far.append(bool(acc["overall_accuracy"].iloc[-1] < 2.0 / k))
    if not far or not all(far):
        return None
    steps = {(r.attrs.get("epochs"), r.attrs.get("steps_per_epoch")) for r in records}
    short = ""
    if len(steps) == 1 and None not in (step := next(iter(steps))):
        e, n = int(step[0]), int(step[1])
        short = f" after {e} epoch{'s' * (e != 1)} of {n} step{'s' * (n != 1)}"
    base = "the classical baseline" if by_baseline else "twice chance"
    return f"not trained yet: OA far below {base}{short}. A smoke run tests the machinery, not accuracy."


def stamp(
    ax: plt.Axes,
    note: str,
    xy: tuple[float, float],
    ha: str = "center",
    va: str = "center",
    width_in: float = 3.0,
) -> None:
    """``note`` in a framed box at ``xy`` (axes fraction), wrapped to about ``width_in`` inches: a warning the
    reader sees on the panel itself (:func:`accuracy_note`)."""
    size = 8.0
    chars = max(20, int(width_in * 72.0 / (0.56 * size)))
    ax.text(*xy, "\n".join(style.wrap_lines(note, chars)), transform=ax.transAxes, ha=ha, va=va, fontsize=size,
            color="#8b0000", zorder=5,
            bbox={"boxstyle": "round,pad=0.4", "fc": "white", "ec": "#8b0000", "lw": 0.8, "alpha": 0.95})  # fmt: skip


def _baseline_seeds(summary: xr.Dataset) -> str:
    """'mean over 3 seeds' or 'one seed' for the baselines' lines (a mean of one seed is that seed)."""
    seeds = summary.get("baseline_seeds")
    n = sorted({int(v) for v in np.atleast_1d(seeds.values)}) if seeds is not None else []
    if not n:
        return "mean over seeds"
    return "one seed" if n == [1] else f"mean over {'/'.join(map(str, n))} seeds"


BASELINE_STYLES = {
    k: (BASELINE_NAMES[k], ls) for k, ls in (("svm", "-."), ("rf", ":"))
}  # -> (name, line style)


def _baseline_oa(summary: xr.Dataset | None, dataset: str, protocol: str) -> list[tuple[str, str, float]]:
    """(name, line style, mean OA) of each classical baseline on (dataset, protocol): the baselines' rows of the
    accuracy table (:func:`hsitp.analysis.cells.accuracy_table`)."""
    if summary is None or "baseline_oa_mean" not in summary:
        return []
    tab = accuracy_table(summary)
    here = tab[
        (tab["dataset"] == dataset) & (tab["protocol"] == protocol) & tab["kind"].str.startswith("classical")
    ]
    styles = dict(BASELINE_STYLES.values())  # name -> line style
    pairs = zip(here["model"], here["OA mean"], strict=True)
    return [(m, styles.get(m, "-."), float(oa)) for m, oa in pairs if np.isfinite(oa)]


def resources_figure(records: Sequence[xr.Dataset]) -> Figure:
    """Per-rank peak memory (mean of the last epochs; one dot per rank, bar = the fullest rank) and tokens/s."""
    _need_runs(records)
    rows = []
    for r in records:
        # the record's summary window where it has one (else the mean over every epoch)
        peak = r.get("peak_allocated_summary", r["peak_allocated"].mean("epoch"))
        tps = float(r.get("tokens_per_s_summary", r["tokens_per_s"].mean()))
        for rank, v in zip(peak["rank"].values, peak.values, strict=True):
            rows.append({"run": run_label(r), "rank": int(rank), "peak [MiB]": v / MIB, "tokens/s": tps})
    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.32 * len(records) + 2.4), layout="constrained", sharey=True)
    fullest = df.groupby("run", sort=False)["peak [MiB]"].max().reset_index()
    sns.barplot(data=fullest, y="run", x="peak [MiB]", ax=axes[0], color="0.85", orient="h")
    ranks = sorted(set(df["rank"]))
    sns.stripplot(data=df, y="run", x="peak [MiB]", hue="rank", ax=axes[0], orient="h", size=5, jitter=False,
                  dodge=True, palette=dict(zip(ranks, style.palette(len(ranks)), strict=True)))  # fmt: skip
    axes[0].set_xlabel("peak memory of the tracked step [MiB]\n(bar: fullest rank; dots: ranks)")
    handles, names = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()  # below the panels: inside, it hides dots
    style.key_below(fig, handles, len(names), labels=[f"rank {n}" for n in names])
    tps = df.groupby("run", sort=False)["tokens/s"].first().reset_index()
    sns.barplot(data=tps, y="run", x="tokens/s", ax=axes[1], color=style.OKABE_ITO[0], orient="h")
    axes[1].set_xlabel("tokens / s\n(batch x N per slowest rank's mean step)")
    for ax in axes:
        ax.set_ylabel("")
        ax.tick_params(axis="y", labelsize=7.5)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    k = sorted({int(r.attrs.get("summary_epochs", 0)) for r in records})
    what = f"Per-rank peak memory and throughput per run (mean of the last {', '.join(map(str, k))} epochs)"
    fig.suptitle(headline(what, MEASURED, trained_on(records)))
    return fig


def prediction_figure(
    records: Sequence[xr.Dataset], scenes: Sequence[xr.Dataset] = (), summary: xr.Dataset | None = None
) -> Figure:
    """Predicted class map (y, x) of every run whose record holds one, on the labelled pixels, after its scene's
    ground truth (from ``scenes``, the prepared files), in the class colours of the data page with their key. The
    first map carries :func:`accuracy_note` when the runs are far below the classical baselines (``summary``)."""
    from hsitp.report.data import class_handles, class_image

    _need_runs(records)
    maps = [r for r in records if "prediction" in r and r["prediction"].ndim == 2]
    if not maps:
        fig, ax = plt.subplots(figsize=(6, 1.8), layout="constrained")
        ax.axis("off")
        ax.text(0.5, 0.5, "no training record holds a predicted class map ('prediction' (y, x))",
                ha="center", va="center", fontsize=9)  # fmt: skip
        fig.suptitle(headline("Predicted class maps: none recorded", MEASURED, trained_on(records), width=70))
        return fig
    truth = {str(s.attrs.get("dataset")): s for s in scenes}
    panels = _prediction_panels(maps, truth)
    classes = sorted({int(c) for _, m, _ in panels for c in np.unique(m) if c > 0})
    names: dict[int, str] = {}
    for scene in scenes:
        names.update({int(k): v for k, v in (json_attr(scene, "class_names", {}) or {}).items()})
    key_rows = int(np.ceil(len(classes) / 4))
    fig, axes = style.panel_grid(
        len(panels), 4, lambda ncol, nrow: (2.6 * ncol + 0.4, 2.9 * nrow + 1.2 + 0.2 * key_rows)
    )
    for ax, (title, m, _) in zip(axes, panels, strict=True):
        ax.imshow(class_image(m, classes), interpolation="nearest")
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    note = accuracy_note(summary, records)
    first = next((i for i, (_, _, r) in enumerate(panels) if r is not None), None)
    if note and first is not None:  # on the first predicted map: the one a reader would take for a result
        stamp(axes[first], note, (0.5, 0.5), width_in=2.4)
    style.key_below(fig, class_handles(classes, names), 4, fontsize=7.5, title="class (white: unlabelled)")
    what = "Predicted class maps per run (final model)" + (
        " on the labelled pixels beside the ground truth" if truth else ""
    )
    fig.suptitle(headline(what, MEASURED, f"{trained_on(records)}; train and test pixels both shown"))
    return fig


def _prediction_panels(
    maps: Sequence[xr.Dataset], truth: Mapping[str, xr.Dataset]
) -> list[tuple[str, np.ndarray, xr.Dataset | None]]:
    """(title, class map, record or None) per panel: each scene's ground truth (where its prepared file is given),
    then each run's predicted map on the labelled pixels."""
    panels: list[tuple[str, np.ndarray, xr.Dataset | None]] = []
    for dataset in dict.fromkeys(str(r.attrs.get("dataset")) for r in maps):
        scene = truth.get(dataset)
        labels = scene["labels"].values if scene is not None else None
        if labels is not None:
            panels.append((f"{dataset}\nground truth", labels, None))
        for r in (m for m in maps if str(m.attrs.get("dataset")) == dataset):
            pred = r["prediction"].values.astype(int)
            if labels is not None and labels.shape == pred.shape:
                pred = np.where(labels > 0, pred, 0)  # the labelled pixels, as the ground truth shows
            panels.append((f"{_record_model(r, False)}\n{r.attrs.get('protocol', '')} protocol, seed "
                           f"{r.attrs.get('seed', '')}", pred, r))  # fmt: skip
    return panels


# --- tables ----------------------------------------------------------------------------------------------------------
def summary_table(records: Sequence[xr.Dataset]) -> pd.DataFrame:
    """One row per run: the record's ``*_summary`` means of the last epochs (rank-max where per rank), the last
    evaluated overall accuracy where present, the device and the checkpointing policy."""
    _need_runs(records)
    rows = []
    for r in records:
        a = r.attrs

        def s(name: str, r: xr.Dataset = r) -> xr.DataArray:  # the summary window, else the last 10 epochs
            return r.get(f"{name}_summary", r[name].isel(epoch=slice(-10, None)).mean("epoch"))

        acc = _accuracy(r)
        rows.append(
            {
                "dataset": a.get("dataset"), "plan": a.get("plan"), "P": a.get("P"), "g": a.get("g"),
                "N": a.get("tokens"),
                "protocol": a.get("protocol"), "partition": int(a["partition_index"]), "seed": a.get("seed"),
                "epochs": int(r.sizes["epoch"]),
                "summary epochs": a.get("summary_epochs"),
                "loss": float(s("loss")),
                "tokens/s": float(s("tokens_per_s")),
                "step time [s] (slowest rank)": float(s("step_time").max()) if "step_time" in r else np.nan,
                "ccr_inline (max rank)": float(s("ccr_inline").max()) if "ccr_inline" in r else np.nan,
                "peak [MiB] (fullest rank)": float(s("peak_allocated").max()) / MIB,
                "overall accuracy (last evaluated)": (
                    float(acc["overall_accuracy"].iloc[-1]) if acc is not None and not acc.empty else np.nan
                ),
                "activation checkpointing": a.get("activation_checkpointing", "none"),
                "device": labels.measured_on(a),
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def summary_caption(records: Sequence[xr.Dataset]) -> str:
    return (
        "Per training run: the mean of the last epochs (the record's summary window) of loss, tokens/s, step time "
        f"and ccr_inline (slowest rank) and peak memory (fullest rank), the last evaluated overall accuracy where "
        f"recorded ({MEASURED}; {trained_on(records)})."
    )


# --- accuracy over seeds (train/summary.nc) -------------------------------------------------------------------------


def per_class_caption(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> str:
    return (
        "Recall of each class on the test pixels after the last epoch, mean over "
        f"{'seeds' if replicate_unit(summary) == 'seed' else 'replicates (partitions × seeds)'} (blank: no test pixel of that "
        "class in the partition). OA hides the minority classes; under the block protocol some classes have no train pixel at "
        f"all, so no model can learn them ({MEASURED}; {trained_on(records)})."
    )


def accuracy_caption(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> str:
    """The accuracy table's caption; its spread, pairing and units to decide named by the summary's replicates
    (a summary of 5 partitions x 1 seed was said to pair by seed and spread over seeds)."""
    unit = replicate_unit(summary)
    over = "seeds" if unit == "seed" else "replicates (partitions × seeds)"
    window = (
        f"each run's mean over its last {int(records[0].attrs.get('summary_epochs', 0))} epochs (§7.4)"
        if records and "oa_final_mean" in summary
        else "after the last epoch"
    )
    a = summary["oa_verdict"].attrs
    verdict = (
        f" The verdict: equal when the {float(a.get('level', 0.95)):.0%} t interval of the paired ΔOA lies "
        f"within ±{100 * float(a.get('margin', 0.01)):g} pp, better / worse when it excludes 0 on one side, "
        f"else undecided with the {unit}s that would decide it; per comparison, no multiplicity correction. "
        "A cell trained as a single-process equivalent trains the plan's exact architecture in one process "
        "(train/equivalence.nc shows it tracks the real P-rank run)."
    )
    return (
        f"Accuracy on the test pixels of each accuracy protocol, {window}: mean and sample standard deviation "
        f"(ddof 1) over {over} of overall accuracy (OA), average accuracy (AA, mean recall over the classes with "
        f"test pixels) and Cohen's κ; ΔOA vs tp is the plan's OA minus tp's at the same P and crop (N), paired by "
        f"{unit}."
        f"{verdict} "
        "The classical baselines (RBF SVM, random forest on pixel spectra, hyper-parameters chosen on train pixels "
        f"only) are fit on the same partition{'s' * (unit == 'partition')} ({MEASURED}; {trained_on(records)})."
    )


def accuracy_figure(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> Figure:
    """OA, AA and κ (rows) per model and baseline, mean ± std over seeds, one column per (dataset, protocol)."""
    tab = accuracy_table(summary)
    panels = list(dict.fromkeys(zip(tab["dataset"], tab["protocol"], strict=True)))
    width = min(style.FULL_WIDTH_IN, max(7.5, 4.4 * len(panels)))
    fig, axes = plt.subplots(
        len(METRICS), len(panels), figsize=(width, 2.2 * len(METRICS) + 1.2), squeeze=False,
        layout="constrained", sharey="col",
    )  # fmt: skip
    for col, (dataset, protocol) in enumerate(panels):
        t = tab[(tab["dataset"] == dataset) & (tab["protocol"] == protocol)].reset_index(drop=True)
        colours = ["0.6" if k.startswith("classical") else style.OKABE_ITO[0] for k in t["kind"]]
        for row, name in enumerate(METRICS.values()):
            ax = axes[row, col]
            y = np.arange(len(t))
            std = t[f"{name} std"]
            ax.barh(
                y,
                t[f"{name} mean"],
                xerr=None if std.isna().all() else std.fillna(0),
                color=colours,
                capsize=2,
            )
            ax.set_yticks(y, t["model"], fontsize=7.5)
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.set_xlabel(name + " (test pixels)", fontsize=8)
            if row == 0:
                ax.set_title(f"{dataset}, {protocol} protocol", fontsize=8)
    note = accuracy_note(summary, records)
    if note:  # top right of the OA panels: right of the runs' short bars, above the baselines' long ones
        for ax in axes[0]:
            stamp(ax, note, (0.98, 0.96), ha="right", va="top", width_in=width / len(panels) / 2)
    seeds = sorted(set(tab["seeds"].dropna().astype(int)))
    spread = (
        "one seed: no spread to show"
        if seeds == [1]
        else f"mean ± std over {'/'.join(map(str, seeds))} seeds"
    )
    what = f"Accuracy per model beside the classical baselines (grey); {spread}"
    fig.suptitle(headline(what, MEASURED, trained_on(records)))
    return fig


# --- the answer in one table: memory, throughput and accuracy vs tp per plan and P (probe + summary) ---------------


NO_CHECK = (
    "no equivalence check in this run: every run trained its plan over P ranks (train.equivalent false), or the "
    "check is off (train.equivalence.epochs 0)"
)


def equivalence_table(path: str | os.PathLike[str] | None) -> pd.DataFrame:
    """One row per (plan, P, g): test OA of the real P-rank run and of its single-process equivalent after the
    check's epochs, their difference, the loss curves' largest relative gap, passed or not
    (``train/equivalence.nc``); one row saying so when the run has no check."""
    if path is None:
        return pd.DataFrame([{"equivalence": NO_CHECK}])
    ds = load(path, contracts.TRAIN_EQUIVALENCE, "oa_check", "oa_equivalent", "d_oa", "passed")
    rows = []
    for i in range(ds.sizes["check"]):
        c = ds.isel(check=i)
        plan = str(c["plan"].values)
        rows.append(
            {
                "dataset": str(c["dataset"].values), "protocol": str(c["protocol"].values), "seed": int(c["seed"]),
                "model": model_label(plan, int(c["P"]), int(c["g"])), "epochs": int(c["epoch"]),
                "OA over P ranks (measured)": float(c["oa_check"]),
                "OA, 1 process (measured)": float(c["oa_equivalent"]), "ΔOA": float(c["d_oa"]),
                "loss: largest relative gap": float(c["loss_max_rel_diff"]),
                "within tolerance": "yes" if int(c["passed"]) else f"NO (tolerance {ds.attrs['tolerance']:g})",
            }
        )  # fmt: skip
    return pd.DataFrame(rows)


def equivalence_caption(path: str | os.PathLike[str] | None, records: Sequence[xr.Dataset]) -> str:
    if path is None:
        return f"No equivalence check: {NO_CHECK}."
    return (
        "The accuracy runs train each plan's single-process equivalent (architecture_for(base, plan, P, g) in one "
        "process). Here each (plan, P, g) also ran for real over P ranks (gloo), on the same seed, protocol and LR "
        "schedule, stopped after the epochs shown: test OA of both at that epoch, and the largest relative gap of "
        f"their per-epoch mean training loss ({MEASURED}; {trained_on(records)})."
    )


VERDICT_MARKERS = {Accuracy.EQUAL: "o", Accuracy.BETTER: "^", Accuracy.WORSE: "v", Accuracy.UNDECIDED: "s"}


def tuning_effect_caption(summary: xr.Dataset | None = None) -> str:
    """What the untuned-control table shows; its pairing named by the summary's replicate unit (the verdicts of
    cpu-places pair by partition, not by seed as the caption said)."""
    unit = replicate_unit(summary) if summary is not None else "seed"
    return (
        "What tuning changed: each D-CHAG cell on tp's tuned recipe (the untuned control) beside its own tuned "
        f"recipe, ΔOA vs the same tp runs (paired by {unit}), {MEASURED}."
    )


def pareto_figure(
    memory: xr.Dataset | None, throughput: xr.Dataset | None, summary: xr.Dataset | None
) -> Figure:
    """Memory per rank against time to accuracy, each over tp's, one point per D-CHAG plan and P, marker = accuracy
    verdict; one panel per dataset and protocol. Below 1 on both axes: less memory and sooner at tp's accuracy."""
    pts = pareto_points(memory, throughput, summary)
    panels = sorted({(d, s) for d, s in zip(pts["dataset"], pts["protocol"], strict=True)}) or [("", "")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.6, 4.2), layout="constrained",
                             squeeze=False)  # fmt: skip
    plans = sorted(set(pts["plan"])) or list(DCHAG_PLANS)
    colours = dict(zip(plans, style.palette(len(plans)), strict=True))
    shown = pts.dropna(subset=["memory_ratio", "time_ratio"])
    for ax, (dataset, protocol) in zip(axes[0], panels, strict=True):
        here = shown[(shown["dataset"] == dataset) & (shown["protocol"] == protocol)]
        for row in here.itertuples():
            ax.scatter(row.memory_ratio, row.time_ratio, color=colours[row.plan], s=60,
                       marker=VERDICT_MARKERS.get(row.verdict, "s"), edgecolor="black", linewidth=0.5)  # fmt: skip
            ax.annotate(f"P = {row.P}, g = {row.g}", (row.memory_ratio, row.time_ratio), fontsize=7.5,
                        xytext=(4, 4), textcoords="offset points")  # fmt: skip
        ax.axhline(1.0, color="0.6", lw=0.8, ls="--")
        ax.axvline(1.0, color="0.6", lw=0.8, ls="--")
        ax.set_xlabel("peak memory per rank / tp's (fullest rank, no checkpointing)")
        ax.set_ylabel("time to tp's OA − δ / tp's")
        missing = len(pts[(pts["dataset"] == dataset) & (pts["protocol"] == protocol)]) - len(here)
        title = f"{dataset} {protocol} protocol" if dataset else "no D-CHAG cell with both ratios yet"
        if missing > 0:
            title += f"\n{missing} cell(s) without a ratio (never reached, oversubscribed or not probed)"
        ax.set_title(title, fontsize=9)
        if here.empty:
            ax.text(0.5, 0.5, "nothing to plot yet", ha="center", va="center", transform=ax.transAxes)
    handles = [plt.Line2D([], [], ls="", marker="o", color=colours[p], label=p) for p in plans]
    handles += [plt.Line2D([], [], ls="", marker=m, color="0.4", label=v) for v, m in VERDICT_MARKERS.items()]
    style.key_below(fig, handles, 3, title="plan (colour) and accuracy verdict vs tp (marker)")
    # every P's device line: the first alone is the P = 1 launch's (backend none), and every point is a P >= 2 ratio
    hardware = labels.measured_on({"device": "; ".join(map(str, memory["device"].values)) if memory is not None else "",
                                   "dtype": memory.attrs.get("dtype", "") if memory is not None else ""})  # fmt: skip
    fig.suptitle(headline("Memory per rank vs time to accuracy, each over tp's", MEASURED, hardware))
    return fig


def load_studies(paths: Sequence[str | os.PathLike[str]]) -> list[xr.Dataset]:
    """The tuning studies (``hsitp tune``'s netCDF, kind ``tune_study``)."""
    required = ("score", "best_so_far", "expected_best", "expected_best_std")
    return [load(path, contracts.TUNE_STUDY, *required) for path in paths]


def budget_figure(studies: Sequence[xr.Dataset]) -> Figure:
    """Best validation OA against the number of tuning trials, per protocol (panel) and plan (colour): the search as
    run (best so far, solid) and Dodge et al.'s expected best of n random start-up trials with its spread (dashed,
    band). A curve still rising at the last trial says the budget was too small to decide."""
    protocols = sorted({str(s.attrs["protocol"]) for s in studies}) or ["none"]
    budget = sorted({(int(s.attrs["budget_trials"]), int(s.attrs["steps_per_trial"])) for s in studies})
    what = ", ".join(f"{t} trials of {st} steps" for t, st in budget)
    fig, axes = plt.subplots(1, len(protocols), figsize=(max(7.0, 4.8 * len(protocols) + 0.6), 3.9), layout="constrained",
                             squeeze=False, sharey=True)  # fmt: skip
    plans = sorted({str(s.attrs["plan"]) for s in studies})
    colours = dict(zip(plans, style.palette(max(len(plans), 1)), strict=False))
    for ax, protocol in zip(axes[0], protocols, strict=True):
        for s in (s for s in studies if str(s.attrs["protocol"]) == protocol):
            plan = str(s.attrs["plan"])
            k = s["trial"].values
            ax.plot(k, s["best_so_far"].values, color=colours[plan], lw=1.8, label=f"{plan}: best so far")
            n = s["n"].values
            mean, std = s["expected_best"].values, s["expected_best_std"].values
            ax.plot(n, mean, color=colours[plan], lw=1.2, ls="--", label=f"{plan}: expected best")
            ax.fill_between(n, mean - std, mean + std, color=colours[plan], alpha=0.15, lw=0)
        ax.set_title(
            f"{protocol} protocol ({what})" if studies else "no tuning study in this run", fontsize=9
        )
        ax.set_xlabel("trials")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        if not studies:
            ax.text(0.5, 0.5, "stage tune not run", ha="center", va="center", transform=ax.transAxes)
    axes[0][0].set_ylabel("validation OA")
    handles = [plt.Line2D([], [], color=colours[p], lw=1.8, label=p) for p in plans]
    handles += [plt.Line2D([], [], color="0.3", lw=1.8, label="best so far (the search as run)"),
                plt.Line2D([], [], color="0.3", lw=1.2, ls="--", label="expected best of n random trials ± sd")]  # fmt: skip
    style.key_below(fig, handles, 2, title="plan (colour) and curve")
    what = "Best validation OA against tuning trials, per plan"
    on = f"measured on {labels.computed_on(studies[0].attrs)}" if studies else "measured on no machine yet"
    fig.suptitle(headline(what, MEASURED, on))  # the machine that ran the studies (their provenance)
    return fig


# what a plan keeps of the base model (heads may be padded)
SIZE_KEYS = ("dim", "depth", "mlp_ratio", "patch")


def probe_sizes(memory: xr.Dataset, records: Sequence[xr.Dataset] = ()) -> str:
    """Whether the probe measured the trained models: 'the trained model's size (...)' when its D, depth, MLP
    ratio, patch, L and N equal every record's, else the probe's own sizes, said plainly."""
    pc = json_attr(memory, "probe", {}) or {}
    own = f"D = {pc.get('dim')}, depth {pc.get('depth')}, patch {pc.get('patch')}"
    shape = {(int(L), int(N)) for L in memory["L"].values for N in memory["N"].values}  # noqa: N806
    same = bool(records)
    for r in records:
        m = json_attr(r, "model", {}) or {}
        same &= (
            all(m.get(k) == pc.get(k) for k in SIZE_KEYS) and (m.get("bands"), r.attrs.get("tokens")) in shape
        )
    if same:
        return f"the trained model's size ({own}, equal to every training record's)"
    return f"the probe's own size ({own}), not the trained model's: no training record has it"


def answer_caption(
    memory: xr.Dataset | None, throughput: xr.Dataset | None, records: Sequence[xr.Dataset] = ()
) -> str:
    if memory is None or throughput is None:
        return f"The paper's question per plan and P: {NO_PROBE}."
    devices = list(map(str, memory["device"].values))
    kind = labels.platform(devices)
    return (
        f"The paper's question (§7.4), per plan and P at {probe_sizes(memory, records)}: per-rank peak memory of the "
        f"fullest rank ({'MemTracker on CPU' if kind == 'CPU' else 'CUDA allocator peak on ' + kind}, one training step, "
        "the activation-checkpointing policy named per row; the time to accuracy only without it, as every run "
        "trained) "
        "and its ratio to tp at the same P; the tokens/s ratio to tp, median [min, max] over "
        f"{throughput.sizes.get('repeat', '?')} interleaved rounds in which every plan at that P ran in the same "
        "process, threads and minutes (A-B / B-A order; training records' own tokens/s are comparable within "
        "a record only and are never divided here); and the accuracy verdict of the plan vs tp from the training "
        f"summary. Every cell {MEASURED} on {kind} ({'; '.join(dict.fromkeys(map(labels.singular, devices)))})"
        f"{labels.not_a_gpu(devices)}; a P whose ranks outnumber the cores is marked oversubscribed and no "
        "conclusion rests on it."
    )
