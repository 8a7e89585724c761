"""The headline experiment's tidy tables, from a committed reference's four files (``results/reference/RUN/``):
accuracy per cell with its interval beside the classical baselines (:func:`forest_table`), per-rank memory
against tokens/s per plan and P with each cell's verdict (:func:`pareto_table`), the OA curves and the time to
tp's accuracy (:func:`curves_table`, :func:`time_table`). Every number is measured on the CPU the files name."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from hsitp import contracts
from hsitp.analysis import labels
from hsitp.analysis.answer import TRAINED_CHECKPOINTING as CHECKPOINTING
from hsitp.analysis.answer import step_time_ratio, time_to_accuracy_ratio
from hsitp.analysis.cells import MIB, baseline_name, model_label, probe_bands, replicate_unit, verdict_name
from hsitp.analysis.read import ReportError, json_attr, load
from hsitp.evaluate.verdict import half_width
from hsitp.names import DCHAG_PLANS

FILES = {
    "summary": "train/summary.nc",
    "runs": "train/runs.nc",
    "memory": "probe/memory.nc",
    "throughput": "probe/throughput.nc",
}


NEEDS = {  # what each file must hold for the page (beyond its contract)
    "summary": ("oa_mean", "oa_std", "seeds", "d_oa_vs_tp_mean", "d_oa_vs_tp_ci_low", "d_oa_vs_tp_ci_high",
                "oa_verdict", "tp_cell", "baseline_oa_mean", "baseline_oa_std", "steps_to_target",
                "steps_to_target_min", "steps_to_target_max", "target_oa"),
    "runs": ("oa", "steps_per_epoch", "control", "cpu_model", "device", "recipe", "patch", "bands"),
    "memory": ("peak_allocated", "device", "tokens_per_step"),
    "throughput": ("tokens_per_s", "sample_time", "ratio_vs_tp_median", "oversubscribed_note"),
}  # fmt: skip


PLAN_ORDER = ("tp", *DCHAG_PLANS)


@dataclass(frozen=True)
class Inputs:
    """The four files of a reference the page reads."""

    folder: Path
    summary: xr.Dataset
    runs: xr.Dataset
    memory: xr.Dataset
    throughput: xr.Dataset


def load_reference(folder: str | os.PathLike[str]) -> Inputs:
    """The reference's summary, per-run rows and probe files, each checked by its kind and the variables the
    page draws (a missing or damaged file, or one lacking a variable: one line naming it)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such reference folder (e.g. results/reference/cpu-places)")
    kinds = {"summary": contracts.TRAIN_SUMMARY, "runs": contracts.REFERENCE_RUNS,
             "memory": contracts.PROBE_MEMORY, "throughput": contracts.PROBE_THROUGHPUT}  # fmt: skip
    read = {name: load(folder / FILES[name], kinds[name], *NEEDS[name]) for name in FILES}
    return Inputs(folder, **read)


def _interval(mean: float, sd: float, k: int, level: float) -> tuple[float, float]:
    """The two-sided t interval of a mean over ``k`` units (NaN with fewer than two or no spread recorded)."""
    if k < 2 or not np.isfinite(sd):
        return math.nan, math.nan
    half = half_width(sd, k, level)
    return mean - half, mean + half


def _spread(summary: xr.Dataset, i: int, prefix: str = "", j: int | None = None) -> tuple[float, int, str]:
    """(sd, k, unit) of cell ``i``'s OA (``prefix`` "baseline_": classifier ``j``'s): over partitions where
    the cell holds two or more, else over its seeds."""
    at = (i,) if j is None else (i, j)
    parts = f"{prefix}partitions"
    if parts in summary and int(summary[parts].values[i]) > 1:
        sd = float(summary[f"{prefix}oa_partition_std"].values[at])
        return sd, int(summary[parts].values[i]), "partition"
    return float(summary[f"{prefix}oa_std"].values[at]), int(summary[f"{prefix}seeds"].values[i]), "seed"


def _cells(summary: xr.Dataset) -> pd.DataFrame:
    """The summary's cells, tp first, then each D-CHAG plan by P."""
    cells = contracts.summary_cells(summary).reset_index()
    cells["order"] = [PLAN_ORDER.index(p) if p in PLAN_ORDER else len(PLAN_ORDER) for p in cells["plan"]]
    return cells.sort_values(["dataset", "protocol", "order", "P", "g"], kind="stable")


def _beats_svm(summary: xr.Dataset, i: int) -> bool | None:
    """Whether cell ``i`` beats the SVM: the summary's 95 % interval of OA(cell) - OA(SVM), paired by partition,
    lies above 0 (where no model does, the protocol's verdicts compare models that are not trained yet); None
    where the summary holds no such interval (cpu-fair's: untested, which was drawn as "no model beats the SVM"
    beside a cell 10 pp above it)."""
    if "d_oa_vs_baseline_ci_low" not in summary or "svm" not in summary["classifier"].values:
        return None
    return bool(float(summary["d_oa_vs_baseline_ci_low"].sel(classifier="svm").values[i]) > 0)


def forest_table(summary: xr.Dataset) -> pd.DataFrame:
    """One row per cell and per classical baseline of each (dataset, protocol): mean OA and its 95 % t
    interval over partitions (over seeds with one partition), and for a cell its paired ΔOA vs tp with the
    summary's interval and verdict. Fractions, as the file holds them."""
    level = float(summary.attrs.get("verdict_level", 0.95))
    rows: list[dict[str, object]] = []
    for c in _cells(summary).itertuples(index=False):
        sd, k, unit = _spread(summary, c.i)
        lo, hi = _interval(float(c.oa_mean), sd, k, level)
        vs_tp = c.plan != "tp"
        rows.append({"dataset": c.dataset, "protocol": c.protocol, "kind": "cell", "plan": c.plan, "P": c.P,
                     "g": c.g, "row": model_label(c.plan, c.P, c.g), "oa_mean": float(c.oa_mean),
                     "oa_ci_low": lo, "oa_ci_high": hi, "units": k, "unit": unit,
                     "d_oa_vs_tp_mean": float(c.d_oa_vs_tp_mean) if vs_tp else 0.0,
                     "d_oa_vs_tp_ci_low": float(c.d_oa_vs_tp_ci_low) if vs_tp else math.nan,
                     "d_oa_vs_tp_ci_high": float(c.d_oa_vs_tp_ci_high) if vs_tp else math.nan,
                     "verdict": verdict_name(summary, c.i) if vs_tp else "reference",
                     "beats_svm": _beats_svm(summary, c.i)})  # fmt: skip
    cells = contracts.summary_cells(summary).reset_index()
    for (dataset, protocol), here in cells.groupby(["dataset", "protocol"], sort=True):
        i = int(here["i"].iloc[0])  # every cell of (dataset, protocol) holds the same baseline numbers
        for j, clf in enumerate(summary["classifier"].values):
            mean = float(summary["baseline_oa_mean"].values[i, j])
            sd, k, unit = _spread(summary, i, "baseline_", j)
            lo, hi = _interval(mean, sd, k, level)
            rows.append({"dataset": dataset, "protocol": protocol, "kind": "baseline", "plan": str(clf),
                         "row": baseline_name(clf), "oa_mean": mean,
                         "oa_ci_low": lo, "oa_ci_high": hi, "units": k, "unit": unit})  # fmt: skip
    return pd.DataFrame(rows)


def _probe_point(inputs: Inputs, dataset: str, plan: str, P: int, g: int, N: int) -> dict[str, float | str]:  # noqa: N803
    """Peak memory of the fullest rank and tokens/s (median and range over the interleaved rounds) of one
    probed point of ``dataset``'s cell (at its bands: :func:`probe_bands`) without checkpointing; NaN with the
    reason where the probe lacks it."""
    mem, thr = inputs.memory, inputs.throughput
    at = {"plan": plan, "P": P, "g": g, "checkpointing": CHECKPOINTING}
    for key, value in (("plan", plan), ("P", P), ("g", g), ("N", N)):
        ran = [str(v) if key == "plan" else int(v) for v in mem[key].values]
        if value not in ran:  # name what is missing (a g or N the probe lacks was said to be a P)
            return {"note": f"not probed: the probe ran {key} = {', '.join(map(str, ran))}"}
    if CHECKPOINTING not in mem["checkpointing"].values:  # the trained models checkpoint nothing
        return {
            "note": f"not probed without activation checkpointing: the probe ran {', '.join(mem['checkpointing'].values)}"
        }
    bands = probe_bands(mem, dataset)
    if bands is None:
        return {
            "note": f"not probed at {dataset}'s bands: the probe ran L = {', '.join(map(str, mem['L'].values))}"
        }
    one = {**bands, "N": N}
    peak = float(mem["peak_allocated"].sel(**at, **one).max("rank", skipna=True)) / MIB
    per_round = (mem["tokens_per_step"].sel(**at, **one) / thr["sample_time"].sel(**at, **one)).values
    note = str(thr["oversubscribed_note"].sel(P=P).values)
    return {"peak_mib": peak, "tokens_per_s": float(thr["tokens_per_s"].sel(**at, **one)),
            "tokens_per_s_min": float(np.nanmin(per_round)), "tokens_per_s_max": float(np.nanmax(per_round)),
            "ratio_vs_tp": float(thr["ratio_vs_tp_median"].sel(**at, **one)), "note": note}  # fmt: skip


def pareto_table(inputs: Inputs) -> pd.DataFrame:
    """One row per trained cell and per tp at each P a D-CHAG cell of the protocol trained at: its per-rank
    peak memory [MiB] (fullest rank, no activation checkpointing) and tokens/s (median over the interleaved
    rounds, with their min and max) from the probe, and the cell's verdict vs tp; NaN where the probe has no
    such point. Each D-CHAG cell's tp row is the tp cell its verdict is paired with (the summary's ``tp_cell``:
    the same N, g = 1), so a run of several crops (train.crops) draws each crop against its own tp."""
    summary = inputs.summary
    rows: list[dict[str, object]] = []
    for (dataset, protocol), here in _cells(summary).groupby(["dataset", "protocol"], sort=True):
        tp_cells = here[here["plan"] == "tp"]
        # (P, tp cell) to draw: each tp cell at its own P, and at each P a D-CHAG cell paired with it ran at
        refs = {(int(t.P), int(t.i)) for t in tp_cells.itertuples()}
        for c in here[here["plan"] != "tp"].itertuples(index=False):
            point = _probe_point(inputs, dataset, c.plan, c.P, c.g, c.N)
            rows.append({"dataset": dataset, "protocol": protocol, "plan": c.plan, "P": c.P, "g": c.g, "N": c.N,
                         "verdict": verdict_name(summary, c.i), **point})  # fmt: skip
            if (tp := int(summary["tp_cell"].values[c.i])) >= 0:
                refs.add((int(c.P), tp))
        by_index = tp_cells.set_index("i")
        for P, i in sorted(refs):  # noqa: N806
            t = by_index.loc[
                i
            ]  # one tp model per N at every P (trained once; the verdicts pair with it at each P)
            point = _probe_point(inputs, dataset, "tp", P, int(t["g"]), int(t["N"]))
            rows.append({"dataset": dataset, "protocol": protocol, "plan": "tp", "P": P, "g": int(t["g"]),
                         "N": int(t["N"]), "verdict": "reference", **point})  # fmt: skip
    cols = ["dataset", "protocol", "plan", "P", "g", "N", "verdict", "peak_mib", "tokens_per_s",
            "tokens_per_s_min", "tokens_per_s_max", "ratio_vs_tp", "note"]  # fmt: skip
    return pd.DataFrame(rows).reindex(columns=cols)


def curves_table(inputs: Inputs) -> pd.DataFrame:
    """Per cell (the summary's, its runs of ``train/runs.nc`` that are not the untuned control) the
    replicate-mean test OA at each epoch every replicate evaluated, against training steps (epoch x steps per
    epoch)."""
    runs = inputs.runs
    keys = pd.DataFrame({k: runs[k].values for k in (*contracts.Cell._fields, "control", "steps_per_epoch")})
    rows: list[dict[str, object]] = []
    for c in _cells(inputs.summary).itertuples(index=False):
        pick = np.flatnonzero(
            np.logical_and.reduce([keys[k].to_numpy() == getattr(c, k) for k in contracts.Cell._fields])
            & (keys["control"].to_numpy() == 0)
        )
        if pick.size == 0:
            continue
        oa = runs["oa"].values[pick]  # (replicate, epoch)
        every = np.isfinite(oa).all(axis=0)
        per_epoch = int(keys["steps_per_epoch"].iloc[pick[0]])
        for epoch, value in zip(runs["epoch"].values[every], oa[:, every].mean(axis=0), strict=True):
            rows.append({"dataset": c.dataset, "protocol": c.protocol, "plan": c.plan, "P": c.P, "g": c.g,
                         "replicates": int(pick.size), "epoch": int(epoch), "step": int(epoch) * per_epoch,
                         "oa": float(value)})  # fmt: skip
    return pd.DataFrame(rows)


def _step_time_ratio(inputs: Inputs, dataset: str, plan: str, P: int, g: int, N: int) -> tuple[float, str]:  # noqa: N803
    """The plan's time per step over tp's (inverse of the probe's interleaved tokens/s ratio) and why it is
    NaN: not probed, or oversubscribed (ranks outnumbering cores time nothing)."""
    point = _probe_point(inputs, dataset, plan, P, g, N)
    note = str(point.get("note") or "")
    ratio = step_time_ratio(float(point.get("ratio_vs_tp", math.nan)), note)
    return ratio, note or ("" if np.isfinite(ratio) else "not timed")


def time_table(inputs: Inputs, target: str = "tp_minus_delta") -> pd.DataFrame:
    """Per cell: the target OA, the steps until the replicate-mean test OA curve first reaches it (the
    summary's ``steps_to_target``, with the fastest and slowest replicate's own), and the time ratio vs tp
    (steps ratio x time per step ratio, :func:`hsitp.report.train.time_to_accuracy_ratio`) where the probe
    timed it."""
    summary = inputs.summary
    k = list(summary["target"].values).index(target)
    unit = replicate_unit(summary)  # what the whiskers' fastest and slowest curves are of
    rows: list[dict[str, object]] = []
    for c in _cells(summary).itertuples(index=False):
        step_time, why = (
            _step_time_ratio(inputs, c.dataset, c.plan, c.P, c.g, c.N) if c.plan != "tp" else (1.0, "")
        )
        ratio, text = time_to_accuracy_ratio(summary, c, step_time, target)
        rows.append({"dataset": c.dataset, "protocol": c.protocol, "plan": c.plan, "P": c.P, "g": c.g,
                     "row": model_label(c.plan, c.P, c.g), "target": target,
                     "target_oa": float(summary["target_oa"].values[c.i, k]),
                     "steps": float(summary["steps_to_target"].values[c.i, k]),
                     "steps_min": float(summary["steps_to_target_min"].values[c.i, k]),
                     "steps_max": float(summary["steps_to_target_max"].values[c.i, k]),
                     "step_time_ratio": step_time, "time_ratio": ratio, "unit": unit,
                     "text": text + (f" ({why})" if why and "no interleaved" in text else "")})  # fmt: skip
    return pd.DataFrame(rows)


def trained_on(runs: xr.Dataset) -> str:
    """'measured on CPU: AMD EPYC, one process per run (1 thread), not a GPU': where the accuracy runs trained
    (the runs' device lines: a GPU's runs are named GPU, never 'not a GPU')."""
    devices = [str(v) for v in runs["device"].values]
    kind = labels.platform(devices)
    cpus = ", ".join(dict.fromkeys(labels.short_cpu(str(v)) for v in runs["cpu_model"].values))
    ranks = sorted({int(v) for v in runs["ranks"].values}) if "ranks" in runs else []
    how = "one process per run (each plan's single-process equivalent)" if ranks == [1] else "P ranks per run"
    where = cpus or "unrecorded"
    if kind != "CPU":  # the GPU's name, the CPU being its host's
        where = "; ".join(dict.fromkeys(labels.short_cpu(d) for d in devices))
    return f"measured on {kind}: {where}, {how}" + (", not a GPU" if kind == "CPU" else "")


PROBE_SIZES = ("dim", "depth", "heads", "mlp_ratio", "batch")  # the model and step a run's recipe also holds


def probe_size(inputs: Inputs) -> str:
    """'the probe at the trained size' where the probe's D, depth, heads, MLP ratio, batch and patch equal every
    run's (its recipe, runs.nc) and its L and N hold each run's bands and crop; else the probe's own size, said
    (the page asserted the trained size without reading either side)."""
    pc = json_attr(inputs.memory, "probe", {}) or {}
    runs, shapes = (
        inputs.runs,
        {(int(L), int(N)) for L in inputs.memory["L"].values for N in inputs.memory["N"].values},
    )  # noqa: N806
    same = True
    for recipe, patch, bands, n in zip(
        *(runs[k].values for k in ("recipe", "patch", "bands", "N")), strict=True
    ):
        train = json.loads(str(recipe)).get("train", {})
        mine = {**train.get("model", {}), "batch": train.get("batch")}
        same &= all(mine.get(k) == pc.get(k) for k in PROBE_SIZES) and int(patch) == pc.get("patch")
        same &= (int(bands), int(n)) in shapes
    if same:
        return "the probe at the trained size"
    own = ", ".join(f"{k} {pc.get(k)}" for k in (*PROBE_SIZES, "patch"))
    return f"the probe at its own size ({own}), not the trained model's"


def probed_on(memory: xr.Dataset) -> str:
    """'measured on CPU: AMD EPYC (1 thread/rank, gloo), float32, 2 cores, not a GPU': where the probe ran
    ('not a GPU' only where every device line is a CPU's)."""
    devices = list(map(str, memory["device"].values))
    on = labels.measured_on({"device": "; ".join(devices), "dtype": memory.attrs.get("dtype", "")})
    cores = sorted({int(v) for v in memory["cores"].values}) if "cores" in memory else []
    cores_text = f", {'/'.join(map(str, cores))} cores" if cores else ""
    return f"measured on {on}{cores_text}{labels.not_a_gpu(devices)}"
