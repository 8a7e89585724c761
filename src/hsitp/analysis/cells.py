"""The training summary's cells as rows: mean and spread over replicates, the paired difference to tp with its
interval and verdict, the classical baselines beside them (``train/summary.nc``)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from hsitp import contracts
from hsitp.analysis.read import load
from hsitp.names import DCHAG_PLANS
from hsitp.outcomes import Accuracy

MIB = 2.0**20
BASELINE_NAMES = {"svm": "SVM (RBF)", "rf": "random forest"}  # classifier -> its name in tables and figures


def baseline_name(classifier: object) -> str:
    """A classical baseline's name as tables and figures print it (the classifier's key when it has none)."""
    return BASELINE_NAMES.get(str(classifier), str(classifier))


def model_label(plan: str, P: int, g: int, N: int | None = None) -> str:  # noqa: N803
    """'dchag_l P=2 g=2', 'tp P=2', 'dense P=1': one model of the comparison; ' N=5776' appended when given (a
    scene trained at more than one crop of train.crops)."""
    return f"{plan} P={P}" + (f" g={g}" if str(plan) in DCHAG_PLANS else "") + (f" N={N}" if N else "")


def probe_bands(probe: xr.Dataset | xr.DataArray, dataset: str) -> dict[str, int] | None:
    """The probe's L to pair a trained cell of ``dataset`` with: its one L, or, where it probed several (the
    trained scenes' band counts, probe.match_train), the scene's own (the registry's); None when it probed
    several and none is the scene's. The first L of several paired every scene with the smallest's rows."""
    probed = [int(v) for v in probe["L"].values]
    if len(probed) == 1:
        return {"L": probed[0]}
    from hsitp.data.registry import get, names

    bands = get(dataset).bands if dataset in names() else None
    return {"L": bands} if bands in probed else None


def cell_table(summary: xr.Dataset) -> pd.DataFrame:
    """The summary's cells in file order, one row each: coordinates, per-cell variables, and ``verdict``, the
    ``oa_verdict`` by name where the summary has one."""
    table = contracts.summary_cells(summary).reset_index()
    if "oa_verdict" in summary:
        table = table.assign(verdict=contracts.flag_meanings(summary["oa_verdict"]))
    return table


def cell_rows(summary: xr.Dataset) -> list[Any]:
    """The summary's cells in file order, each with its coordinates and per-cell variables as attributes."""
    return list(contracts.summary_cells(summary).reset_index().itertuples(index=False))


def several_partitions(summary: xr.Dataset) -> bool:
    """Whether a summary's cells hold more than one partition: its tables then show the spread across
    partitions apart from the spread across seeds (seeds of one partition share its draw of places). A summary
    of one partition shows the seeds' spread only, whether or not it has the ``partitions`` variable (the
    committed cpu-fair summaries have none)."""
    return "partitions" in summary and int(np.max(summary["partitions"].values, initial=0)) > 1


def replicate_unit(summary: xr.Dataset) -> str:
    """'partition' or 'seed': what a summary's intervals and pairings run over, as a caption names it (a summary
    of one partition, cpu-fair's, was said to pair and spread over partitions)."""
    return "partition" if several_partitions(summary) else "seed"


def verdict_name(summary: xr.Dataset, i: int) -> str:
    """One cell's ``oa_verdict`` as its name (equal, better, worse, undecided; flag values or text)."""
    return contracts.flag_meanings(summary["oa_verdict"])[i]


def verdict_text(summary: xr.Dataset, i: int) -> str:
    """One cell's accuracy verdict (``oa_verdict``: flag values or text), with its CI and seeds to decide."""
    text = verdict_name(summary, i)
    unit, n = "seed", int(summary["seeds"].values[i])  # what the interval is over (seeds, or partitions)
    if (
        "verdict_unit_flag" in summary
        and contracts.flag_meanings(summary["verdict_unit_flag"])[i] == "partition"
    ):
        unit, n = "partition", int(summary["verdict_units"].values[i])
    if "d_oa_vs_tp_ci_low" in summary and "d_oa_vs_tp_ci_high" in summary:
        lo, hi = float(summary["d_oa_vs_tp_ci_low"].values[i]), float(summary["d_oa_vs_tp_ci_high"].values[i])
        if np.isfinite(lo) and np.isfinite(hi):
            text += f" (ΔOA 95 % CI [{100 * lo:+.1f}, {100 * hi:+.1f}] pp, {n} {unit}s)"
    if "seeds_to_decide" in summary and text.startswith(Accuracy.UNDECIDED):
        k = summary["seeds_to_decide"].values[i]
        text += (
            f"; {unit}s to decide: {int(k)}"
            if np.isfinite(k) and k > 0
            else f"; |mean ΔOA| ≥ the margin: no number of {unit}s makes it equal"
        )
    return text


def answers(c: Any, plan: str, P: int, g: int, N: int) -> bool:  # noqa: N803
    """Whether summary cell ``c`` is the answer row's (plan, P, g, N); tp, trained once (single-process
    equivalent), is tp at every P."""
    if plan == "tp":
        return c.plan == "tp" and c.N == N
    return (c.plan, c.P, c.N) == (plan, P, N) and (c.g == g or plan not in DCHAG_PLANS)


def _trained_as(plan: str, P: int, ranks: int) -> str:  # noqa: N803
    """How a cell's runs were trained: over P ranks, or as the plan's single-process equivalent."""
    if ranks == P:
        return f"{P} ranks"
    if plan == "tp":
        return "1 process (tp's equivalent: one model at every P)"
    return f"1 process (equivalent of P = {P})"


METRICS = {"oa": "OA", "aa": "AA", "kappa": "κ"}


# what the page's tables and figures read of a summary beyond its contract
SUMMARY_NEEDS = ("per_class_accuracy_mean", "steps_to_target", "tp_cell")


def load_summary(path: str | os.PathLike[str]) -> xr.Dataset:
    """``train/summary.nc`` (kind ``train_summary``): accuracy per cell over seeds, with the baselines."""
    return load(path, contracts.TRAIN_SUMMARY, *contracts.TRAIN_SUMMARY.variables, *SUMMARY_NEEDS)


def accuracy_table(summary: xr.Dataset) -> pd.DataFrame:
    """One row per model and per classical baseline, grouped by (dataset, protocol): OA, AA and κ as mean and sample
    std over replicates (std blank with one), where the summary has several partitions the OA's spread across
    partitions apart from its spread across seeds, and each plan's paired OA difference to tp at the same P."""
    rows: list[dict[str, object]] = []
    for (dataset, protocol), here in (
        contracts.summary_cells(summary).reset_index().groupby(["dataset", "protocol"], sort=False)
    ):
        with_n = here["N"].nunique() > 1  # the scene trained at two crops: N in the model's name
        for c in here.sort_values(["N", "P", "plan", "g"], kind="stable").itertuples(index=False):
            row: dict[str, object] = {
                "dataset": dataset, "protocol": protocol, "model": model_label(c.plan, c.P, c.g, c.N if with_n else None),
                "kind": "transformer (measured)", "seeds": int(summary["seeds"].values[c.i]),
            }  # fmt: skip
            for m, name in METRICS.items():
                row[f"{name} mean"] = float(summary[f"{m}_mean"].values[c.i])
                row[f"{name} std"] = float(summary[f"{m}_std"].values[c.i])
            if several_partitions(summary):  # the replicates' two spreads apart
                row["partitions"] = int(summary["partitions"].values[c.i])
                row["OA sd across partitions"] = float(summary["oa_partition_std"].values[c.i])
                row["OA sd across seeds"] = float(summary["oa_seed_std"].values[c.i])
            vs_tp = c.plan != "tp"  # tp minus itself is not a comparison
            row["ΔOA vs tp mean"] = float(summary["d_oa_vs_tp_mean"].values[c.i]) if vs_tp else np.nan
            row["ΔOA vs tp std"] = float(summary["d_oa_vs_tp_std"].values[c.i]) if vs_tp else np.nan
            row["verdict"] = verdict_text(summary, c.i) if vs_tp else "reference"
            if "ranks" in summary:
                row["trained as"] = _trained_as(c.plan, c.P, int(summary["ranks"].values[c.i]))
            rows.append(row)
        if "classifier" in summary.coords:
            i = here["i"].iloc[0]  # every cell of (dataset, protocol) holds the same baseline numbers
            for j, clf in enumerate(summary["classifier"].values):
                row = {"dataset": dataset, "protocol": protocol, "model": baseline_name(clf),
                       "kind": "classical baseline (measured)",
                       "seeds": int(summary["baseline_seeds"].values[i]) if "baseline_seeds" in summary else np.nan}  # fmt: skip
                for m, name in METRICS.items():
                    row[f"{name} mean"] = float(summary[f"baseline_{m}_mean"].values[i, j])
                    row[f"{name} std"] = float(summary[f"baseline_{m}_std"].values[i, j])
                if several_partitions(summary):
                    row["partitions"] = int(summary["baseline_partitions"].values[i])
                    row["OA sd across partitions"] = float(summary["baseline_oa_partition_std"].values[i, j])
                    row["OA sd across seeds"] = np.nan  # its seed drives only the CV folds and the forest
                row["ΔOA vs tp mean"] = row["ΔOA vs tp std"] = np.nan
                row["verdict"] = ""
                if "ranks" in summary:
                    row["trained as"] = "one process"
                rows.append(row)
    return pd.DataFrame(rows)


def per_class_table(summary: xr.Dataset) -> pd.DataFrame:
    """Test recall per class (rows: labels 1..K) per model and baseline (columns, per dataset and protocol), mean over
    seeds: OA hides the minority classes."""
    cells = contracts.summary_cells(summary).reset_index()
    recall = summary["per_class_accuracy_mean"].values
    cols = {
        f"{c.dataset} {c.protocol}: {model_label(c.plan, c.P, c.g)}": recall[c.i] for c in cells.itertuples()
    }
    if "baseline_per_class_accuracy_mean" in summary:
        recall = summary["baseline_per_class_accuracy_mean"].values
        for (dataset, protocol), here in cells.groupby(["dataset", "protocol"], sort=False):
            i = here["i"].iloc[0]
            for j, clf in enumerate(summary["classifier"].values):
                name = baseline_name(clf)
                cols[f"{dataset} {protocol}: {name}"] = recall[i, j]
    return pd.DataFrame({"class": summary["label"].values.astype(int), **cols})
