"""The paper's question answered from a run's files: per plan and P, per-rank memory and interleaved tokens/s vs tp
(the probe) beside the accuracy verdict and the time to tp's accuracy (the training summary); the Pareto points;
what tuning changed (the untuned control)."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from hsitp import contracts
from hsitp.analysis import labels
from hsitp.analysis.cells import MIB, answers, cell_rows, probe_bands, verdict_name, verdict_text
from hsitp.analysis.read import load
from hsitp.names import DCHAG_PLANS

NO_VERDICT = "not computed yet"  # no training summary yet


NO_PROBE = "no probe stage in this run (config `stages`): no per-rank memory or interleaved tokens/s to show"


def load_probe(
    memory: str | os.PathLike[str], throughput: str | os.PathLike[str]
) -> tuple[xr.Dataset, xr.Dataset]:
    """``probe/memory.nc`` and ``probe/throughput.nc`` of the same run (the probe at the trained sizes)."""
    mem = load(memory, contracts.PROBE_MEMORY, "peak_allocated", "device")
    ratios = ("ratio_vs_tp_median", "ratio_vs_tp_min", "ratio_vs_tp_max", "oversubscribed_note")
    return mem, load(throughput, contracts.PROBE_THROUGHPUT, *ratios)


def time_to_accuracy_ratio(
    summary: xr.Dataset, c: Any, step_time_ratio: float, target: str = "tp_minus_delta"
) -> tuple[float, str]:
    """(ratio, text) of cell ``c``'s time to ``target`` against tp's: its steps over tp's steps (the seed-mean test
    OA curves of train/summary.nc) times ``step_time_ratio``, its measured time per step over tp's (the inverse of
    the probe's interleaved tokens/s ratio; NaN: steps only). NaN ratio with the reason when it cannot be given."""
    steps = summary["steps_to_target"].sel(target=target)
    tp = int(summary["tp_cell"].values[c.i])  # the verdicts' pairing
    if tp < 0:
        return math.nan, "no tp cell to compare with"
    mine, ref = float(steps.values[c.i]), float(steps.values[tp])
    if not np.isfinite(ref):
        return math.nan, "tp's own curve never reaches it"
    if not np.isfinite(mine):
        return math.nan, "never reached within the run"
    if c.plan == "tp":
        return 1.0, f"1 (reference: {int(ref)} steps)"
    by_steps = mine / ref
    if not np.isfinite(step_time_ratio):
        return (
            math.nan,
            f"steps {int(mine)} vs tp's {int(ref)} ({by_steps:.2f}x); no interleaved time per step",
        )
    ratio = by_steps * step_time_ratio
    return ratio, f"{ratio:.2f} ({int(mine)} vs {int(ref)} steps, x {step_time_ratio:.2f} time per step)"


def step_time_ratio(tokens_per_s_ratio: float, oversubscribed: str | None) -> float:
    """A plan's time per step over tp's: the inverse of the interleaved tokens/s ratio (NaN when not timed, or at an
    oversubscribed P, which times nothing)."""
    ok = np.isfinite(tokens_per_s_ratio) and tokens_per_s_ratio > 0 and not oversubscribed
    return 1.0 / tokens_per_s_ratio if ok else math.nan


TRAINED_CHECKPOINTING = "none"  # every training record's activation-checkpointing policy (train/record.py)


def _per_cell_columns(
    summary: xr.Dataset | None, here: dict[str, Any], step_time: float, timed_on: str, peak: xr.DataArray
) -> dict[str, str]:
    """The summary's answer for the probed point ``here`` (plan, P, g, L, N, checkpointing), one column per
    dataset and protocol ("not trained" where no cell is that point): 'OA verdict vs tp, DATASET PROTOCOL
    protocol' (the verdict) and 'time to tp's OA − δ vs tp, ...' (:func:`time_to_accuracy_ratio`, its time per
    step the probe's on ``timed_on``). A cell answers only the row at its scene's bands (:func:`probe_bands`:
    every scene's verdict sat beside every L of a probe of several), and the time only a row probed without
    activation checkpointing, as every cell trained (a checkpointed row's time per step was multiplied by the
    steps of runs that checkpoint nothing). Without a summary the verdict's "not computed yet" and no time."""
    if summary is None:
        return {"OA verdict vs tp (measured)": NO_VERDICT}
    plan, P, g, N = str(here["plan"]), int(here["P"]), int(here["g"]), int(here["N"])  # noqa: N806
    verdicts: dict[str, str] = {}
    times: dict[str, str] = {}
    for c in cell_rows(summary):
        where = f"{c.dataset} {c.protocol} protocol"
        verdict = f"OA verdict vs tp, {where} (measured)"
        time = f"time to tp's OA − δ vs tp, {where} (measured; time per step on {timed_on})"
        verdicts.setdefault(verdict, "not trained")
        times.setdefault(time, "not trained")
        if answers(c, plan, P, g, N) and probe_bands(peak, c.dataset) == {"L": int(here["L"])}:
            verdicts[verdict] = "reference" if plan == "tp" else verdict_text(summary, c.i)
            times[time] = (
                time_to_accuracy_ratio(summary, c, step_time)[1]
                if str(here["checkpointing"]) == TRAINED_CHECKPOINTING
                else "n/a: the runs trained without activation checkpointing"
            )
    return verdicts | times


def answer_table(
    memory: xr.Dataset | None, throughput: xr.Dataset | None, summary: xr.Dataset | None = None
) -> pd.DataFrame:
    """The paper's question in one table, one row per probed (plan, P, g, L, N, checkpointing):

    per-rank peak memory of the fullest rank and its ratio to tp's (``probe/memory.nc``, one point at a time); the
    tokens/s ratio to tp, median [min, max] over the interleaved rounds (``probe/throughput.nc``; oversubscribed P
    says so, and no conclusion rests on it); the accuracy verdict of the plan against tp (``oa_verdict`` of
    ``train/summary.nc``, per dataset and protocol; "not computed yet" without one). Each row names the
    machine. Without the probe's files: one row saying so."""
    if memory is None or throughput is None:
        return pd.DataFrame([{"answer": NO_PROBE}])
    peak = memory["peak_allocated"].max("rank", skipna=True)  # the fullest rank
    notes = throughput["oversubscribed_note"].to_series().to_dict()  # P -> note ('' where not oversubscribed)
    devices = memory["device"].to_series().to_dict()  # P -> device
    kind = labels.platform(devices.values())  # CPU or GPU, as the probe's device lines say
    dtype = memory.attrs.get("dtype", "")
    rows = []
    for idx in np.ndindex(*peak.shape):
        here = {d: peak[d].values[i] for d, i in zip(peak.dims, idx, strict=True)}
        value = float(peak.values[idx])
        if not np.isfinite(value):
            continue  # not probed (dense at P > 1)
        plan, P, g, ck = str(here["plan"]), int(here["P"]), int(here["g"]), str(here["checkpointing"])  # noqa: N806
        if plan not in DCHAG_PLANS and g != int(peak["g"].values[0]):
            continue  # plans without groups are repeated along g: one row
        tp_sel = {**here, "plan": "tp"}
        has_tp = "tp" in peak["plan"].values and np.isfinite(float(peak.sel(tp_sel)))
        step_time = math.nan  # this plan's time per step over tp's, from the interleaved tokens/s ratio
        if plan == "tp":
            mem_vs, thr_vs, step_time = "1 (reference)", "1 (reference)", 1.0
        elif not has_tp:
            mem_vs = thr_vs = f"n/a (no tp at P = {P})"
        else:
            mem_vs = f"{value / float(peak.sel(tp_sel)):.2f}"
            med, lo, hi = (float(throughput[f"ratio_vs_tp_{s}"].sel(here)) for s in ("median", "min", "max"))
            thr_vs = f"{med:.2f} [{lo:.2f}, {hi:.2f}]" if np.isfinite(med) else "not timed"
            step_time = step_time_ratio(med, notes.get(P))
        if notes.get(P) and plan != "tp" and has_tp:
            thr_vs = f"{notes[P]}: {thr_vs}, no conclusion"
        on = labels.measured_on({"device": devices.get(P, ""), "dtype": dtype})
        on += f", {labels.attention_kernel(memory.attrs)}"
        rows.append(
            {
                "plan": plan, "P": P, "g": g if plan in DCHAG_PLANS else "", "L": int(here["L"]),
                "N": int(here["N"]), "activation checkpointing": ck,
                f"peak per rank [MiB] (fullest rank, measured on {kind})": f"{value / MIB:.1f}",
                f"peak vs tp (fullest rank, measured on {kind})": mem_vs,
                f"tokens/s vs tp, median [min, max] (measured on {kind}, interleaved)": thr_vs,
                **_per_cell_columns(summary, here, step_time, kind, peak),
                "measured on": on + (f"; {notes[P]}" if notes.get(P) else ""),
            }
        )  # fmt: skip
    return pd.DataFrame(rows).sort_values("P", kind="stable").reset_index(drop=True)  # P by P, plans in order


def tuning_effect_table(summary: xr.Dataset, control: xr.Dataset | None) -> pd.DataFrame:
    """What tuning D-CHAG's own recipe changed: per D-CHAG cell of the untuned control
    (``train/control_summary.nc``: the plan on tp's tuned recipe, at train.groups' g) the OA difference to tp and
    its verdict, beside the same plan, P and protocol on its own tuned recipe (``train/summary.nc``, at its study's g),
    both paired by seed with the same tp runs. One row saying so when the run has no control."""
    if control is None:
        return pd.DataFrame(
            [{"plan": "none", "note": "no untuned control in this run (train.control.world_sizes)"}]
        )
    tuned = {(c.dataset, c.protocol, c.plan, c.P, c.N): c for c in cell_rows(summary) if c.plan != "tp"}
    rows: list[dict[str, object]] = []
    for c in cell_rows(control):
        if c.plan == "tp":
            continue
        own = tuned.get((c.dataset, c.protocol, c.plan, c.P, c.N))
        d_tp = float(control["d_oa_vs_tp_mean"].values[c.i])
        row: dict[str, object] = {
            "dataset": c.dataset, "protocol": c.protocol, "plan": c.plan, "P": c.P,
            "g on tp's recipe": c.g, "ΔOA vs tp on tp's recipe (pp)": 100 * d_tp,
            "verdict on tp's recipe": verdict_text(control, c.i),
        }  # fmt: skip
        if own is None:
            row["verdict on its own recipe"] = "not trained at this P"
        else:
            d_own = float(summary["d_oa_vs_tp_mean"].values[own.i])
            row |= {
                "g on its own recipe": own.g, "ΔOA vs tp on its own recipe (pp)": 100 * d_own,
                "verdict on its own recipe": verdict_text(summary, own.i), "tuning gained (pp)": 100 * (d_own - d_tp),
            }  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def _probed_unchecked(probe: xr.Dataset) -> bool:
    """Whether the probe ran without activation checkpointing, as every training run does (the only policy a
    trained cell pairs with: a probe of blocks only was drawn as if unchecked)."""
    return "checkpointing" not in probe.dims or TRAINED_CHECKPOINTING in probe["checkpointing"].values


def _no_checkpointing(da: xr.DataArray) -> xr.DataArray:
    """The probe's numbers without activation checkpointing (:func:`_probed_unchecked` says whether it has any)."""
    return da.sel(checkpointing=TRAINED_CHECKPOINTING) if "checkpointing" in da.dims else da


def _first(da: xr.DataArray) -> float:
    """The value at the first index of every dimension left (the probe's one N)."""
    return float(da.isel({d: 0 for d in da.dims}))


def pareto_points(
    memory: xr.Dataset | None, throughput: xr.Dataset | None, summary: xr.Dataset | None
) -> pd.DataFrame:
    """One row per trained D-CHAG cell that the probe measured: its per-rank peak memory over tp's (fullest rank,
    no activation checkpointing, ``probe/memory.nc``) and its time to tp's OA − δ over tp's
    (:func:`time_to_accuracy_ratio`, the interleaved tokens/s ratio of ``probe/throughput.nc``), with its verdict;
    NaN where either is missing (never reached, oversubscribed, not probed)."""
    cols = ["dataset", "protocol", "plan", "P", "g", "memory_ratio", "time_ratio", "verdict"]
    if memory is None or throughput is None or summary is None or not _probed_unchecked(memory):
        return pd.DataFrame(columns=cols)
    peak = _no_checkpointing(memory["peak_allocated"].max("rank", skipna=True))
    ratio_vs_tp = _no_checkpointing(throughput["ratio_vs_tp_median"])
    notes = throughput["oversubscribed_note"].to_series().to_dict()  # P -> note ('' where not oversubscribed)
    rows = []
    for c in cell_rows(summary):
        if c.plan not in DCHAG_PLANS:
            continue
        bands = probe_bands(peak, c.dataset)
        if bands is None:
            continue  # not probed at this scene's bands
        at = {"P": c.P, "g": c.g, **bands}
        if "N" in peak.dims:
            at["N"] = c.N
        try:
            here, tp, thr = (
                _first(x.sel(**at))
                for x in (peak.sel(plan=c.plan), peak.sel(plan="tp"), ratio_vs_tp.sel(plan=c.plan))
            )
        except KeyError:
            continue  # this (P, g, N) was not probed
        mem = here / tp if tp > 0 else math.nan
        ratio = time_to_accuracy_ratio(summary, c, step_time_ratio(thr, notes.get(c.P)))[0]
        verdict = verdict_name(summary, c.i)
        rows.append([c.dataset, c.protocol, c.plan, c.P, c.g, mem, ratio, verdict])
    return pd.DataFrame(rows, columns=cols)
