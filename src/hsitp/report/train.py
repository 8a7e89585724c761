"""Report page of the train stage: training curves, per-rank peak memory and throughput per run, predicted class
maps, and the paper's last-epochs summary per run.

Every number is measured during training on the device the record names (its ``device`` attribute), with
activation checkpointing ``none`` (the record's ``activation_checkpointing``). Overall accuracy and the predicted
map are shown only where a record holds them (``overall_accuracy`` per evaluated epoch, ``prediction`` (y, x)).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import xarray as xr
from matplotlib.figure import Figure

from hsitp.report import labels
from hsitp.report.common import MEASURED, headline, load, need

MIB = 2.0**20


def load_records(paths: Sequence[str | os.PathLike[str]]) -> list[xr.Dataset]:
    """Every training record (kind ``train``), in the given order."""
    out = []
    for p in paths:
        ds = load(p, kind="train")
        need(ds, "loss", "tokens_per_s", "peak_allocated")
        out.append(ds)
    return out


def run_label(ds: xr.Dataset) -> str:
    a = ds.attrs
    g = f" g={a.get('g')}" if str(a.get("plan", "")).startswith("dchag") else ""
    n = f" N={a.get('tokens')}" if "tokens" in a else ""  # the crop (train.crops): one scene may have two
    return f"{a.get('dataset', '?')}: {a.get('plan', '?')} P={a.get('P', '?')}{g}{n} {a.get('split', '')} s{a.get('seed', '')}"


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
    return str(ds.attrs.get("dataset", "?")), str(ds.attrs.get("split", "?"))


def model_label(plan: str, P: int, g: int, N: int | None = None) -> str:  # noqa: N803
    """'dchag_l P=2 g=2', 'tp P=2', 'dense P=1': one model of the comparison; ' N=5776' appended when given (a
    scene trained at more than one crop of train.crops)."""
    return f"{plan} P={P}" + (f" g={g}" if str(plan).startswith("dchag") else "") + (f" N={N}" if N else "")


def _record_model(ds: xr.Dataset, with_n: bool) -> str:
    a = ds.attrs
    return model_label(a.get("plan"), a.get("P"), a.get("g"), a.get("tokens") if with_n else None)


# --- figures -------------------------------------------------------------------------------------------------------
def curves_figure(records: Sequence[xr.Dataset], summary: xr.Dataset | None = None) -> Figure:
    """Learning curves: loss per epoch (top) and overall accuracy per evaluated epoch (bottom, where any record
    holds it), one column per (dataset, split); colour = model (plan, P, g), line style = seed. With ``summary``
    (train/summary.nc), the classical baselines' mean overall accuracy on the same split is drawn as horizontal
    lines, so the transformer is seen beside them."""
    _need_runs(records)
    panels = list(dict.fromkeys(_panel_key(r) for r in records))
    has_acc = any((a := _accuracy(r)) is not None and not a.empty for r in records)
    nrow = 2 if has_acc else 1
    fig, axes = plt.subplots(
        nrow, len(panels), figsize=(4.4 * len(panels), 2.9 * nrow + 0.8), squeeze=False,
        layout="constrained", sharex="col",
    )  # fmt: skip
    with_n = len({r.attrs.get("tokens") for r in records}) > 1  # N shown once the records hold two crops
    models = list(dict.fromkeys(_record_model(r, with_n) for r in records))
    colours = dict(zip(models, sns.color_palette("tab10", len(models)), strict=True))
    seeds = sorted({int(r.attrs.get("seed", 0)) for r in records})
    # seed line styles, none of them the baselines' ("-." and ":")
    styles = dict(
        zip(seeds, ["-", "--", (0, (4, 1, 1, 1, 1, 1)), (0, (8, 2))] * (len(seeds) // 4 + 1), strict=False)
    )
    for r in records:
        col = panels.index(_panel_key(r))
        model = _record_model(r, with_n)
        # Earlier models drawn wider, so a model that equals another (dense P=1 and tp P=2 at one seed) shows.
        width = 1.2 + 1.6 * (len(models) - 1 - models.index(model)) / max(len(models) - 1, 1)
        style = {"color": colours[model], "ls": styles[int(r.attrs.get("seed", 0))], "lw": width}
        axes[0, col].plot(r["epoch"].values, r["loss"].values, **style)
        acc = _accuracy(r)
        if has_acc and acc is not None and not acc.empty:
            axes[1, col].plot(acc["epoch"], acc["overall_accuracy"], marker=".", **style)
    for col, (dataset, split) in enumerate(panels):
        axes[0, col].set_title(f"{dataset}, {split} split", fontsize=8)
        axes[0, col].set_ylabel("training loss (cross-entropy, train pixels)" if col == 0 else "")
        axes[-1, col].set_xlabel("epoch")
        if has_acc:
            axes[1, col].set_ylabel("overall accuracy (test pixels)" if col == 0 else "")
            axes[1, col].set_ylim(0, 1)
            for name, ls, oa in _baseline_oa(summary, dataset, split):
                axes[1, col].axhline(oa, color="0.35", ls=ls, lw=1)
                axes[1, col].annotate(f"{name} {oa:.3f}", (0.01, oa), xycoords=("axes fraction", "data"),
                                      fontsize=6, color="0.3", va="bottom")  # fmt: skip
    handles = [plt.Line2D([], [], color=colours[m], label=m) for m in models]
    if len(seeds) > 1:
        handles += [plt.Line2D([], [], color="0.3", ls=styles[s], label=f"seed {s}") for s in seeds]
    if summary is not None and has_acc:
        handles += [plt.Line2D([], [], color="0.35", ls=ls, label=f"{name} (mean over seeds)")
                    for name, ls in BASELINE_STYLES.values()]  # fmt: skip
    fig.legend(
        handles=handles, loc="outside lower center", ncol=min(4, len(handles)), fontsize=7, frameon=False
    )
    fig.suptitle(
        headline(
            "Learning curves per run" + ("" if has_acc else " (no record holds an overall accuracy)"),
            MEASURED
            + ("; classical baselines on the same split as grey lines" if summary is not None else ""),
            trained_on(records),
        )
    )
    return fig


BASELINE_STYLES = {
    "svm": ("SVM (RBF)", "-."),
    "rf": ("random forest", ":"),
}  # classifier -> (name, line style)


def _baseline_oa(summary: xr.Dataset | None, dataset: str, split: str) -> list[tuple[str, str, float]]:
    """(name, line style, mean OA) of each classical baseline on (dataset, split), from the summary."""
    if summary is None or "baseline_oa_mean" not in summary:
        return []
    here = [c for c in summary_cells(summary) if (c.dataset, c.split) == (dataset, split)]
    if not here:
        return []
    out = []
    for j, clf in enumerate(summary["classifier"].values):
        name, ls = BASELINE_STYLES.get(str(clf), (str(clf), "-."))
        oa = float(summary["baseline_oa_mean"].values[here[0].i, j])
        if np.isfinite(oa):
            out.append((name, ls, oa))
    return out


def resources_figure(records: Sequence[xr.Dataset]) -> Figure:
    """Per-rank peak memory (mean of the last epochs; one dot per rank, bar = the fullest rank) and tokens/s."""
    _need_runs(records)
    rows = []
    for r in records:
        peak = (
            r["peak_allocated_summary"]
            if "peak_allocated_summary" in r
            else r["peak_allocated"].mean("epoch")
        )
        tps = (
            float(r["tokens_per_s_summary"])
            if "tokens_per_s_summary" in r
            else float(r["tokens_per_s"].mean())
        )
        for rank, v in zip(peak["rank"].values, peak.values, strict=True):
            rows.append({"run": run_label(r), "rank": int(rank), "peak [MiB]": v / MIB, "tokens/s": tps})
    df = pd.DataFrame(rows)
    fig, axes = plt.subplots(
        1, 2, figsize=(9.5, 0.35 * len(records) + 2.2), layout="constrained", sharey=True
    )
    fullest = df.groupby("run", sort=False)["peak [MiB]"].max().reset_index()
    sns.barplot(data=fullest, y="run", x="peak [MiB]", ax=axes[0], color="0.8", orient="h")
    sns.stripplot(data=df, y="run", x="peak [MiB]", hue="rank", ax=axes[0], orient="h", size=4, jitter=False)
    axes[0].set_xlabel("peak memory of the tracked step [MiB] (bar: fullest rank; dots: ranks)")
    axes[0].legend(title="rank", fontsize=6, title_fontsize=7, frameon=False)
    tps = df.groupby("run", sort=False)["tokens/s"].first().reset_index()
    sns.barplot(data=tps, y="run", x="tokens/s", ax=axes[1], color="C0", orient="h")
    axes[1].set_xlabel("tokens / s (batch x N per slowest rank's mean step)")
    for ax in axes:
        ax.set_ylabel("")
        ax.tick_params(axis="y", labelsize=7)
    k = sorted({int(r.attrs.get("summary_epochs", 0)) for r in records})
    fig.suptitle(
        headline(
            f"Per-rank peak memory and throughput per run (mean of the last {', '.join(map(str, k))} epochs)",
            MEASURED,
            trained_on(records),
        )
    )
    return fig


def prediction_figure(records: Sequence[xr.Dataset]) -> Figure:
    """Predicted class map (y, x) of every run whose record holds one; a note when none does."""
    _need_runs(records)
    maps = [r for r in records if "prediction" in r and r["prediction"].ndim == 2]
    if not maps:
        fig, ax = plt.subplots(figsize=(6, 1.8), layout="constrained")
        ax.axis("off")
        ax.text(0.5, 0.5, "no training record holds a predicted class map ('prediction' (y, x))",
                ha="center", va="center", fontsize=9)  # fmt: skip
        fig.suptitle(headline("Predicted class maps", f"{MEASURED} (none recorded)", trained_on(records)))
        return fig
    ncol = min(4, len(maps))
    nrow = int(np.ceil(len(maps) / ncol))
    fig, axes = plt.subplots(
        nrow, ncol, figsize=(3.2 * ncol, 3.2 * nrow + 0.6), squeeze=False, layout="constrained"
    )
    vmax = max(float(np.nanmax(r["prediction"].values)) for r in maps)
    for ax, r in zip(axes.flat, maps, strict=False):
        ax.imshow(r["prediction"].values, cmap="tab20", vmin=0, vmax=max(vmax, 1), interpolation="nearest")
        ax.set_title(run_label(r), fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in list(axes.flat)[len(maps) :]:
        ax.set_visible(False)
    fig.suptitle(headline("Predicted class maps per run (final model)", MEASURED, trained_on(records)))
    return fig


# --- tables ----------------------------------------------------------------------------------------------------------
def summary_table(records: Sequence[xr.Dataset]) -> pd.DataFrame:
    """One row per run: the record's ``*_summary`` means of the last epochs (rank-max where per rank), the last
    evaluated overall accuracy where present, the device and the checkpointing policy."""
    _need_runs(records)
    rows = []
    for r in records:
        a = r.attrs

        def s(name: str, r: xr.Dataset = r) -> xr.DataArray:
            return (
                r[f"{name}_summary"]
                if f"{name}_summary" in r
                else r[name].isel(epoch=slice(-10, None)).mean("epoch")
            )

        acc = _accuracy(r)
        rows.append(
            {
                "dataset": a.get("dataset"), "plan": a.get("plan"), "P": a.get("P"), "g": a.get("g"),
                "N": a.get("tokens"),
                "split": a.get("split"), "seed": a.get("seed"), "epochs": int(r.sizes["epoch"]),
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
METRICS = {"oa": "OA", "aa": "AA", "kappa": "κ"}


def load_summary(path: str | os.PathLike[str]) -> xr.Dataset:
    """``train/summary.nc`` (kind ``train_summary``): accuracy per cell over seeds, with the baselines."""
    ds = load(path, kind="train_summary")
    need(ds, "oa_mean", "oa_std", "aa_mean", "kappa_mean", "seeds")
    return ds


@dataclass(frozen=True)
class Cell:
    """One cell of train/summary.nc: its index and coordinates."""

    i: int
    dataset: str
    split: str
    plan: str
    P: int  # noqa: N815
    g: int
    N: int | None  # the crop's tokens (None in a summary written before train.crops)


def summary_cells(summary: xr.Dataset) -> list[Cell]:
    """The summary's cells, in file order."""
    n = summary["N"].values if "N" in summary else [None] * summary.sizes["cell"]
    return [
        Cell(i, str(summary["dataset"].values[i]), str(summary["split"].values[i]), str(summary["plan"].values[i]),
             int(summary["P"].values[i]), int(summary["g"].values[i]), None if n[i] is None else int(n[i]))
        for i in range(summary.sizes["cell"])
    ]  # fmt: skip


def accuracy_table(summary: xr.Dataset) -> pd.DataFrame:
    """One row per model and per classical baseline, grouped by (dataset, split): OA, AA and κ as mean and sample
    std over seeds (std blank with one seed), and each plan's paired OA difference to tp at the same P."""
    rows: list[dict[str, object]] = []
    cells = summary_cells(summary)
    for dataset, split in dict.fromkeys((c.dataset, c.split) for c in cells):
        here = [c for c in cells if (c.dataset, c.split) == (dataset, split)]
        with_n = len({c.N for c in here}) > 1  # the scene trained at two crops: N in the model's name
        for c in sorted(here, key=lambda c: (c.N or 0, c.P, c.plan, c.g)):
            row: dict[str, object] = {
                "dataset": dataset, "split": split, "model": model_label(c.plan, c.P, c.g, c.N if with_n else None),
                "kind": "transformer (measured)", "seeds": int(summary["seeds"].values[c.i]),
            }  # fmt: skip
            for m, name in METRICS.items():
                row[f"{name} mean"] = float(summary[f"{m}_mean"].values[c.i])
                row[f"{name} std"] = float(summary[f"{m}_std"].values[c.i])
            vs_tp = c.plan != "tp"  # tp minus itself is not a comparison
            row["ΔOA vs tp mean"] = float(summary["d_oa_vs_tp_mean"].values[c.i]) if vs_tp else np.nan
            row["ΔOA vs tp std"] = float(summary["d_oa_vs_tp_std"].values[c.i]) if vs_tp else np.nan
            rows.append(row)
        if "classifier" in summary.coords:
            i = here[0].i  # every cell of (dataset, split) holds the same baseline numbers
            for j, clf in enumerate(summary["classifier"].values):
                row = {"dataset": dataset, "split": split, "model": BASELINE_STYLES.get(str(clf), (str(clf),))[0],
                       "kind": "classical baseline (measured)",
                       "seeds": int(summary["baseline_seeds"].values[i]) if "baseline_seeds" in summary else np.nan}  # fmt: skip
                for m, name in METRICS.items():
                    row[f"{name} mean"] = float(summary[f"baseline_{m}_mean"].values[i, j])
                    row[f"{name} std"] = float(summary[f"baseline_{m}_std"].values[i, j])
                row["ΔOA vs tp mean"] = row["ΔOA vs tp std"] = np.nan
                rows.append(row)
    return pd.DataFrame(rows)


def per_class_table(summary: xr.Dataset) -> pd.DataFrame | None:
    """Test recall per class (rows: labels 1..K) per model and baseline (columns, per dataset and split), mean over
    seeds; None for a summary without per-class numbers (written before issue 23)."""
    if "per_class_accuracy_mean" not in summary:
        return None
    cols: dict[str, np.ndarray] = {}
    cells = summary_cells(summary)
    for c in cells:
        cols[f"{c.dataset} {c.split}: {model_label(c.plan, c.P, c.g)}"] = summary[
            "per_class_accuracy_mean"
        ].values[c.i]
    if "baseline_per_class_accuracy_mean" in summary:
        for dataset, split in dict.fromkeys((c.dataset, c.split) for c in cells):
            i = next(c.i for c in cells if (c.dataset, c.split) == (dataset, split))
            for j, clf in enumerate(summary["classifier"].values):
                name = BASELINE_STYLES.get(str(clf), (str(clf),))[0]
                cols[f"{dataset} {split}: {name}"] = summary["baseline_per_class_accuracy_mean"].values[i, j]
    return pd.DataFrame({"class": summary["label"].values.astype(int), **cols})


def per_class_caption(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> str:
    return (
        "Recall of each class on the test pixels after the last epoch, mean over seeds (blank: no test pixel of that "
        "class in the split). OA hides the minority classes; on the block split some classes have no train pixel at "
        f"all, so no model can learn them ({MEASURED}; {trained_on(records)})."
    )


def accuracy_caption(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> str:
    return (
        "Accuracy on the test pixels of each split protocol after the last epoch: mean and sample standard deviation "
        "(ddof 1) over seeds of overall accuracy (OA), average accuracy (AA, mean recall over the classes with test "
        "pixels) and Cohen's κ; ΔOA vs tp is the plan's OA minus tp's at the same P and crop (N), paired by seed. "
        "The classical baselines (RBF SVM, random forest on pixel spectra, hyper-parameters chosen on train pixels "
        f"only) are fit on the same split ({MEASURED}; {trained_on(records)})."
    )


def accuracy_figure(summary: xr.Dataset, records: Sequence[xr.Dataset]) -> Figure:
    """OA, AA and κ (rows) per model and baseline, mean ± std over seeds, one column per (dataset, split)."""
    tab = accuracy_table(summary)
    panels = list(dict.fromkeys(zip(tab["dataset"], tab["split"], strict=True)))
    fig, axes = plt.subplots(
        len(METRICS), len(panels), figsize=(4.4 * len(panels), 2.2 * len(METRICS) + 1.0), squeeze=False,
        layout="constrained", sharey="col",
    )  # fmt: skip
    for col, (dataset, split) in enumerate(panels):
        t = tab[(tab["dataset"] == dataset) & (tab["split"] == split)].reset_index(drop=True)
        colours = ["0.55" if k.startswith("classical") else "C0" for k in t["kind"]]
        for row, name in enumerate(METRICS.values()):
            ax = axes[row, col]
            y = np.arange(len(t))
            ax.barh(y, t[f"{name} mean"], xerr=t[f"{name} std"].fillna(0), color=colours, capsize=2)
            ax.set_yticks(y, t["model"], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlim(0, 1)
            ax.set_xlabel(name + " (test pixels)", fontsize=8)
            if row == 0:
                ax.set_title(f"{dataset}, {split} split", fontsize=8)
    seeds = sorted(set(tab["seeds"].dropna().astype(int)))
    fig.suptitle(
        headline(
            f"Accuracy per model beside the classical baselines (grey): mean ± std over {'/'.join(map(str, seeds))} "
            "seeds",
            MEASURED,
            trained_on(records),
        )
    )
    return fig
