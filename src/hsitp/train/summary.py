"""``results/<run>/train/summary.nc``: the training records reduced to the paper's table, one row per cell.

A cell is (dataset, plan, P, g, split, N), N the crop's spatial tokens (the record's ``tokens``: one scene may be
trained at several crops of ``train.crops``); its seeds are reduced to mean and sample standard deviation (ddof = 1;
NaN with one seed). Accuracy is the last epoch's (always evaluated); throughput, peak memory and ccr_inline are the
records' means over their last ``train.summary_epochs`` epochs (``*_summary``). Accuracy differences are paired
by seed: plan minus ``tp`` at the same dataset, P, split and N (NaN where ``tp`` did not run that seed). The
classical baseline (results/<run>/baseline/DATASET_{protocol}_s{seed}.nc) on the same dataset and split stands
beside every cell (whatever its N) when its files are given.

Every record carries its recipe hash (``hsitp.train.plan.recipe_hash``); records of different recipes are refused,
so a summary never compares runs trained differently. Validation accuracy (``val_*``, the pixels every recipe
decision is taken on) and the per-class test accuracy are reduced beside the test numbers.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.errors import HsitpError
from hsitp.io import read_netcdf

KIND = "train_summary"
ACCURACY = ("oa", "aa", "kappa")
VALIDATION = ("val_oa", "val_aa", "val_kappa")
BASELINE_VARS = {"oa": "overall_accuracy", "aa": "average_accuracy", "kappa": "kappa"}
LONG = {
    "oa": "overall accuracy on the test pixels after the last epoch",
    "aa": "average accuracy (mean per-class recall) on the test pixels after the last epoch",
    "kappa": "Cohen's kappa on the test pixels after the last epoch",
    "val_oa": "overall accuracy on the validation pixels (train.validation) after the last epoch",
    "val_aa": "average accuracy on the validation pixels after the last epoch",
    "val_kappa": "Cohen's kappa on the validation pixels after the last epoch",
    "tokens_per_s": "training throughput (tokens/s), mean over the record's last summary epochs",
    "peak_memory": "peak memory of the tracked step, largest rank, mean over the record's last summary epochs",
    "ccr_inline": "in-training comm / (step - comm), mean over ranks and the record's last summary epochs",
}
UNITS = {
    "oa": "1",
    "aa": "1",
    "kappa": "1",
    "val_oa": "1",
    "val_aa": "1",
    "val_kappa": "1",
    "tokens_per_s": "1/s",
    "peak_memory": "bytes",
    "ccr_inline": "1",
}


class SummaryError(HsitpError, ValueError):
    """The records or baseline files cannot be summarised together (names the file)."""


Cell = tuple[str, str, int, int, str, int]  # dataset, plan, P, g, split, N


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def record_numbers(ds: xr.Dataset) -> dict[str, Any]:
    """The numbers one record contributes to its cell."""
    nan = float("nan")
    return {
        **{m: float(ds[m].values[-1]) if m in ds else nan for m in VALIDATION},
        "per_class": np.asarray(ds["per_class_accuracy"].values[-1], dtype=np.float64)
        if "per_class_accuracy" in ds
        else np.zeros(0),
        "oa": float(ds["oa"].values[-1]),
        "aa": float(ds["aa"].values[-1]),
        "kappa": float(ds["kappa"].values[-1]),
        "tokens_per_s": float(ds["tokens_per_s_summary"]),
        "peak_memory": float(ds["peak_allocated_summary"].max()),
        "ccr_inline": float(ds["ccr_inline_summary"].mean()),
    }


def _pad(values: np.ndarray, classes: int) -> np.ndarray:
    """(seeds, K) -> (seeds, classes), NaN-padded (records of scenes with fewer classes)."""
    out = np.full((values.shape[0], classes), np.nan)
    out[:, : values.shape[1]] = values
    return out


def summarize(records: Sequence[str | Path], baselines: Sequence[str | Path] = ()) -> xr.Dataset:
    """The summary Dataset (dims cell, classifier) of the training records and baseline files given."""
    runs: dict[Cell, dict[int, dict[str, Any]]] = defaultdict(dict)
    recipes: dict[str, str] = {}  # recipe hash -> the first record with it
    recipe_json = ""
    for path in records:
        ds = read_netcdf(path, kind="train")
        a = ds.attrs
        rh = str(a.get("recipe_hash", "none"))
        recipes.setdefault(rh, str(path))
        if len(recipes) > 1:
            (h0, p0), (h1, p1) = list(recipes.items())[:2]
            raise SummaryError(
                f"{p1}: trained under recipe {h1}, but {p0} under recipe {h0}: a summary never mixes recipes "
                "(train.* keys other than the job matrix); summarise each recipe's records apart"
            )
        recipe_json = str(a.get("recipe", ""))
        if "tokens" not in a:
            raise SummaryError(
                f"{path}: no `tokens` attribute (N of the crop): not a training record of this version"
            )
        cell = (
            str(a["dataset"]),
            str(a["plan"]),
            int(a["P"]),
            int(a["g"]),
            str(a["split"]),
            int(a["tokens"]),
        )
        runs[cell][int(a["seed"])] = record_numbers(ds)
    base: dict[tuple[str, str], dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
    classifiers: list[str] = []
    for path in baselines:
        ds = read_netcdf(path, kind="baseline")
        names = [str(c) for c in ds["classifier"].values]
        classifiers = classifiers or names
        if names != classifiers:
            raise SummaryError(f"{path}: classifiers {names}, other baseline files have {classifiers}")
        key = (str(ds.attrs["dataset"]), str(ds.attrs["protocol"]))
        for m, var in BASELINE_VARS.items():
            base[key][m].append(np.asarray(ds[var].values, dtype=np.float64))
        if "class_accuracy" in ds:
            base[key]["per_class"].append(np.asarray(ds["class_accuracy"].values, dtype=np.float64))

    if not runs:
        raise SummaryError("train summary: no training records given")
    cells = sorted(runs)
    data: dict[str, Any] = {}
    for m in (*ACCURACY, *VALIDATION, "tokens_per_s", "peak_memory", "ccr_inline"):
        vals = [[r[m] for r in runs[c].values()] for c in cells]
        attrs = {"units": UNITS[m]}
        if m == "tokens_per_s":  # each record timed at its own moment: no ratio between cells
            attrs["comparable"] = "within one record only; plan ratios: probe/throughput.nc (interleaved)"
        data[f"{m}_mean"] = (
            "cell",
            [_mean(v) for v in vals],
            {**attrs, "long_name": f"mean over seeds of {LONG[m]}"},
        )
        data[f"{m}_std"] = (
            "cell",
            [_std(v) for v in vals],
            {**attrs, "long_name": f"standard deviation (ddof 1) over seeds of {LONG[m]}"},
        )
    for m in ACCURACY:
        diffs = []
        for d, _plan, p, _g, s, n in cells:
            ref = runs.get((d, "tp", p, 1, s, n), {})
            mine = runs[(d, _plan, p, _g, s, n)]
            diffs.append([mine[seed][m] - ref[seed][m] for seed in sorted(mine) if seed in ref])
        note = f"plan minus tp at the same dataset, P, split, N and seed ({m}); NaN without a tp run"
        data[f"d_{m}_vs_tp_mean"] = (
            "cell",
            [_mean(v) for v in diffs],
            {"units": "1", "long_name": f"mean of {note}"},
        )
        data[f"d_{m}_vs_tp_std"] = (
            "cell",
            [_std(v) for v in diffs],
            {"units": "1", "long_name": f"standard deviation (ddof 1) of {note}"},
        )
    per_class = [np.stack([r["per_class"] for r in runs[c].values()]) for c in cells]  # (seeds, K) per cell
    classes = max(pc.shape[1] for pc in per_class)
    with warnings.catch_warnings():  # a class with no test pixel is NaN in every seed: mean of nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        pc_mean = np.array([np.nanmean(_pad(pc, classes), axis=0) for pc in per_class])
    data["per_class_accuracy_mean"] = (
        ("cell", "label"),
        pc_mean,
        {
            "units": "1",
            "long_name": "mean over seeds of each class's recall on the test pixels after the last epoch; NaN for "
            "a class with no test pixel (OA hides minority classes)",
        },
    )
    data["seeds"] = ("cell", [len(runs[c]) for c in cells], {"units": "1", "long_name": "seeds in the cell"})
    coords: dict[str, Any] = {
        "cell": ("cell", np.arange(len(cells), dtype=np.int32), {"units": "1", "long_name": "cell index"}),
        "dataset": ("cell", np.array([c[0] for c in cells], dtype=object), {"long_name": "dataset"}),
        "plan": ("cell", np.array([c[1] for c in cells], dtype=object), {"long_name": "parallel plan"}),
        "P": (
            "cell",
            np.array([c[2] for c in cells], dtype=np.int32),
            {"units": "1", "long_name": "TP size"},
        ),
        "g": (
            "cell",
            np.array([c[3] for c in cells], dtype=np.int32),
            {"units": "1", "long_name": "D-CHAG groups"},
        ),
        "split": ("cell", np.array([c[4] for c in cells], dtype=object), {"long_name": "split protocol"}),
        "N": (
            "cell",
            np.array([c[5] for c in cells], dtype=np.int32),
            {"units": "1", "long_name": "spatial tokens per crop (the crop of train.crops)"},
        ),
        "label": (
            "label",
            np.arange(1, classes + 1, dtype=np.int16),
            {"units": "1", "long_name": "class label (1..K)"},
        ),
    }
    if classifiers:
        coords["classifier"] = (
            "classifier",
            np.array(classifiers, dtype=object),
            {"long_name": "classifier"},
        )
        for m in ACCURACY:
            rows = [base.get((c[0], c[4]), {}).get(m, []) for c in cells]
            nan = np.full(len(classifiers), np.nan)
            mean = [np.mean(r, axis=0) if r else nan for r in rows]
            std = [np.std(r, axis=0, ddof=1) if len(r) > 1 else nan for r in rows]
            what = f"the classical baseline's {m} on the same dataset and split"
            data[f"baseline_{m}_mean"] = (
                ("cell", "classifier"),
                np.array(mean),
                {"units": "1", "long_name": f"mean over baseline seeds of {what}"},
            )
            data[f"baseline_{m}_std"] = (
                ("cell", "classifier"),
                np.array(std),
                {"units": "1", "long_name": f"standard deviation (ddof 1) over baseline seeds of {what}"},
            )
        rows_pc = [base.get((c[0], c[4]), {}).get("per_class", []) for c in cells]
        if all(rows_pc):
            with warnings.catch_warnings():  # a class with no test pixel: NaN in every seed
                warnings.simplefilter("ignore", RuntimeWarning)
                pc = np.stack([np.nanmean([_pad(r, classes) for r in rs], axis=0) for rs in rows_pc])
            data["baseline_per_class_accuracy_mean"] = (
                ("cell", "classifier", "label"),
                pc,
                {
                    "units": "1",
                    "long_name": "mean over baseline seeds of each class's recall on the test pixels of the same "
                    "dataset and split; NaN for a class with no test pixel",
                },
            )
        data["baseline_seeds"] = (
            "cell",
            [len(base.get((c[0], c[4]), {}).get("oa", [])) for c in cells],
            {"units": "1", "long_name": "baseline seeds (files) on the cell's dataset and split"},
        )
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        {
            "title": "hsitp training summary: accuracy, throughput, memory and ccr_inline per cell, over seeds",
            "std": "sample standard deviation over seeds (ddof = 1); NaN with one seed",
            "accuracy": "the last epoch's evaluation (whole-scene tiled prediction, test pixels, rank 0's map)",
            "differences": "paired by seed: plan minus tp at the same dataset, P, split and N",
            "records": len(records),
            "recipe_hash": next(iter(recipes)),
            "recipe": recipe_json,
            "baseline_files": len(baselines),
        }
    )
    return ds
