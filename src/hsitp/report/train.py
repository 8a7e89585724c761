"""Report page of the train stage: training curves, per-rank peak memory and throughput per run, predicted class
maps, and the paper's last-epochs summary per run.

Every number is measured during training on the device the record names (its ``device`` attribute), with
activation checkpointing ``none`` (the record's ``activation_checkpointing``). Overall accuracy and the predicted
map are shown only where a record holds them (``overall_accuracy`` per evaluated epoch, ``prediction`` (y, x)).
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
    return f"{a.get('dataset', '?')}: {a.get('plan', '?')} P={a.get('P', '?')}{g} {a.get('split', '')} s{a.get('seed', '')}"


def trained_on(records: Sequence[xr.Dataset]) -> str:
    """The device(s) the runs trained on, with dtype, and their activation-checkpointing policy."""
    devices = list(dict.fromkeys(labels.measured_on(r.attrs) for r in records))
    ckpt = sorted({str(r.attrs.get("activation_checkpointing", "none")) for r in records})
    return f"measured on {'; '.join(devices) or 'an unrecorded device'}; activation checkpointing: {', '.join(ckpt)}"


def _need_runs(records: Sequence[xr.Dataset]) -> None:
    if not records:
        raise ValueError("no training record given: nothing to show")


def _accuracy(ds: xr.Dataset) -> pd.DataFrame | None:
    """Overall accuracy per evaluated epoch (NaN epochs dropped), or None when the record has none."""
    if "overall_accuracy" not in ds:
        return None
    oa = ds["overall_accuracy"]
    if oa.ndim != 1:
        return None
    df = pd.DataFrame({"epoch": oa[oa.dims[0]].values, "overall_accuracy": oa.values})
    return df[np.isfinite(df["overall_accuracy"])]


# --- figures -------------------------------------------------------------------------------------------------------
def curves_figure(records: Sequence[xr.Dataset]) -> Figure:
    """Loss per epoch per run, and overall accuracy per evaluated epoch where any record holds it."""
    _need_runs(records)
    acc = [(run_label(r), _accuracy(r)) for r in records]
    acc = [(lbl, a) for lbl, a in acc if a is not None and not a.empty]
    ncol = 2 if acc else 1
    fig, axes = plt.subplots(1, ncol, figsize=(4.6 * ncol, 3.4), squeeze=False, layout="constrained")
    colours = dict(
        zip([run_label(r) for r in records], sns.color_palette("tab10", len(records)), strict=True)
    )
    for r in records:
        lbl = run_label(r)
        axes[0, 0].plot(r["epoch"].values, r["loss"].values, "-", marker=".", color=colours[lbl], label=lbl)
    axes[0, 0].set_xlabel("epoch")
    axes[0, 0].set_ylabel("training loss (cross-entropy, train pixels)")
    axes[0, 0].set_title("loss", fontsize=8)
    if acc:
        for lbl, a in acc:
            axes[0, 1].plot(a["epoch"], a["overall_accuracy"], "o-", color=colours[lbl], label=lbl)
        axes[0, 1].set_xlabel("epoch")
        axes[0, 1].set_ylabel("overall accuracy (test pixels)")
        axes[0, 1].set_title("overall accuracy, evaluated epochs", fontsize=8)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=min(3, len(names)), fontsize=7, frameon=False)
    fig.suptitle(
        headline(
            "Training curves per run" + ("" if acc else " (no record holds an overall accuracy)"),
            MEASURED,
            trained_on(records),
        )
    )
    return fig


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
