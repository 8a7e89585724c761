"""``results/<run>/train/summary.nc``: the training records reduced to the paper's table, one row per cell.

A cell is (dataset, plan, P, g, protocol, N), N the crop's spatial tokens (the record's ``tokens``: one scene may be
trained at several crops of ``train.crops``); its replicates (partition, seed): the protocol's K partitions
(``data.partition.draws``, the record's ``partition_index``) times the training seeds, are
reduced to mean and sample standard deviation (ddof = 1; NaN with one replicate), and the accuracy's spread across
partitions (sd of the partitions' seed means) apart from its spread across seeds (pooled within-partition sd). As the paper's §7.4 says, test OA, AA and kappa are each record's mean over its last
``train.summary_epochs`` epochs (each evaluated), and so are throughput, peak memory and ccr_inline
(``*_summary``); the last epoch's accuracy stands beside them (``oa_final``, ...). Accuracy differences are paired
by replicate (partition and seed): plan minus ``tp`` at the same dataset, P, protocol and N, or the one tp cell
trained as a single-process equivalent (``train.equivalent``: tp is one model at every P). Each pair of series gets
a verdict (``hsitp.evaluate.verdict``): equal / better / worse / undecided from the 95 % interval and the margin δ,
with the units that would decide an undecided one. The interval's unit is the partition where the pair shares two
or more (each partition's seed-paired differences averaged over its seeds, k - 1 degrees of freedom over k
partitions): seeds within a partition share its draw of places, so K x S replicates are not K x S independent
draws, and an interval over them would be narrower by about sqrt(S) wherever the difference depends on the draw.
With one partition the unit is the seed. The same pairing gives each cell's
difference to each classical baseline (``d_oa_vs_baseline_*``: the cell's seed mean minus the baseline's seed mean
on each partition). The classical baseline (results/<run>/baseline/DATASET_{protocol}[_kK]_s{seed}.nc)
on the same dataset and protocol stands beside every cell (whatever its N) when its files are given.

Every record carries its recipe hash (``TrainSettings.recipe_hash``); records of different recipes are refused,
so a summary never compares runs trained differently. Validation accuracy (``val_*``, the pixels every recipe
decision is taken on, last epoch) and the per-class test accuracy (last epoch) are reduced beside the test numbers.

Time to accuracy (MLPerf's training metric): per cell, the training steps until the seed-mean test OA
curve first reaches each of two targets (dim ``target``): the RBF SVM baseline's OA on the same dataset and protocol
(``svm``), and tp's summary OA on the same dataset, protocol and N less the verdict margin δ (``tp_minus_delta``);
``steps_to_target`` with ``steps_to_target_min`` / ``_max`` over each seed's own first crossing.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import xarray as xr

from hsitp.contracts import BASELINE, TRAIN, Cell
from hsitp.errors import HsitpError
from hsitp.evaluate.verdict import DEFAULT_MARGIN, LEVEL, VERDICTS, half_width, paired_verdict
from hsitp.io import variable
from hsitp.outcomes import Accuracy

ACCURACY = ("oa", "aa", "kappa")
FINAL = ("oa_final", "aa_final", "kappa_final")
VERDICT_METRICS = ("oa", "aa")  # the verdict variables: oa_verdict, aa_verdict (and their intervals)
# flag values of the verdict variables: the verdicts, then the cells that have none
VERDICT_FLAGS = (*VERDICTS, "reference", "unpaired")
VALIDATION = ("val_oa", "val_aa", "val_kappa")
# flag values of verdict_unit_flag: what a verdict's interval is over
UNIT_FLAGS = ("none", "seed", "partition")
BASELINE_VARS = {"oa": "overall_accuracy", "aa": "average_accuracy", "kappa": "kappa"}
LONG = {
    "oa": "overall accuracy on the test pixels, the record's mean over its last summary epochs",
    "aa": "average accuracy (mean per-class recall) on the test pixels, the record's mean over its last summary "
    "epochs",
    "kappa": "Cohen's kappa on the test pixels, the record's mean over its last summary epochs",
    "oa_final": "overall accuracy on the test pixels after the last epoch",
    "aa_final": "average accuracy on the test pixels after the last epoch",
    "kappa_final": "Cohen's kappa on the test pixels after the last epoch",
    "val_oa": "overall accuracy on the validation pixels (train.validation) after the last epoch",
    "val_aa": "average accuracy on the validation pixels after the last epoch",
    "val_kappa": "Cohen's kappa on the validation pixels after the last epoch",
    "tokens_per_s": "training throughput (tokens/s), mean over the record's last summary epochs",
    "peak_memory": "peak memory of the tracked step, largest rank, mean over the record's last summary epochs",
    "ccr_inline": "in-training comm / (step - comm), mean over ranks and the record's last summary epochs",
}
UNITS = {m: "1" for m in (*ACCURACY, *FINAL, *VALIDATION, "ccr_inline")} | {
    "tokens_per_s": "1/s",
    "peak_memory": "bytes",
}


TARGETS = ("svm", "tp_minus_delta")  # the time-to-accuracy targets (dim ``target``)
SVM = "svm"  # the baseline classifier whose OA is the first target
TIME_TO_ACCURACY_NOTE = (
    "steps_to_target*: training steps (epoch x the record's steps_per_epoch, train.steps_per_epoch) until the "
    "test OA first reaches the target, read from the test OA curve at the evaluated epochs only (train.eval_every, "
    "each of the last summary_epochs and the last epoch; the other epochs are NaN in the records), so a crossing "
    "is known to eval_every epochs' steps; steps, not seconds (seconds = steps x the per-step time, which the "
    "probe's interleaved throughput ratio gives; not computed here). Targets: svm = the RBF SVM baseline's OA "
    "(mean over baseline seeds) on the same dataset and protocol; tp_minus_delta = tp's oa_mean on the same dataset, "
    "protocol and N (the cell the verdicts pair with) less verdict_margin. The curve is the test pixels': reported "
    "only, used for no decision (recipe decisions are taken on the validation pixels)."
)


class SummaryError(HsitpError, ValueError):
    """The records or baseline files cannot be summarised together (names the file)."""


Replicate = tuple[int, int]  # (partition index, training seed)


class RunRecord(TypedDict):
    """The numbers one training record contributes to its cell (:func:`record_numbers`)."""

    val_oa: float  # last epoch, validation pixels (NaN in a record without them)
    val_aa: float
    val_kappa: float
    per_class: np.ndarray  # (classes,) test recall, last epoch
    oa: float  # the window mean (``*_summary``)
    aa: float
    kappa: float
    oa_final: float  # last epoch
    aa_final: float
    kappa_final: float
    ranks: int  # processes it trained on
    partition: int  # which of the protocol's K partitions
    epochs: int
    window: int  # summary epochs
    tokens_per_s: float
    peak_memory: float
    ccr_inline: float
    curve: tuple[np.ndarray, np.ndarray]  # (epochs, test OA; NaN where not evaluated)
    steps_per_epoch: float


Runs = Mapping[Cell, Mapping[Replicate, RunRecord]]  # each cell's records by replicate


def flags(
    dims: str | tuple[str, ...], values: Sequence[str], meanings: Sequence[str], long_name: str, **attrs: Any
) -> tuple[Any, Any, dict[str, Any]]:
    """A CF flag variable: each of ``values`` as its int8 index in ``meanings`` (``flag_values``,
    ``flag_meanings``)."""
    codes = np.array([meanings.index(v) for v in values], dtype=np.int8)
    flag_values = np.arange(len(meanings), dtype=np.int8)
    return variable(
        dims, codes, long_name, flag_values=flag_values, flag_meanings=" ".join(meanings), **attrs
    )


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def record_numbers(ds: xr.Dataset) -> RunRecord:
    """The numbers one record contributes to its cell."""
    nan = float("nan")
    return {
        **{m: float(ds[m].values[-1]) if m in ds else nan for m in VALIDATION},
        "per_class": np.asarray(ds["per_class_accuracy"].values[-1], dtype=np.float64)
        if "per_class_accuracy" in ds
        else np.zeros(0),
        **{m: float(ds[f"{m}_summary"]) for m in ACCURACY},  # the window mean (§7.4)
        **{f"{m}_final": float(ds[m].values[-1]) for m in ACCURACY},
        "ranks": int(ds.attrs.get("ranks", ds.attrs["P"])),
        "partition": int(ds.attrs["partition_index"]),  # which of the protocol's K partitions
        "epochs": int(ds.sizes["epoch"]),
        "window": int(ds.attrs.get("summary_epochs", 1)),
        "tokens_per_s": float(ds["tokens_per_s_summary"]),
        "peak_memory": float(ds["peak_allocated_summary"].max()),
        "ccr_inline": float(ds["ccr_inline_summary"].mean()),
        # the test OA curve (NaN at epochs not evaluated) and the steps behind each epoch: time to accuracy
        "curve": (
            np.asarray(ds["epoch"].values, dtype=np.int64),
            np.asarray(ds["oa"].values, dtype=np.float64),
        ),
        "steps_per_epoch": float(ds.attrs["steps_per_epoch"]),
    }


def _pad(values: np.ndarray, classes: int) -> np.ndarray:
    """(seeds, K) -> (seeds, classes), NaN-padded (records of scenes with fewer classes)."""
    out = np.full((values.shape[0], classes), np.nan)
    out[:, : values.shape[1]] = values
    return out


# the baseline files' numbers by (dataset, protocol): each file's (partition, seed) under "replicate", its
# (classifier,) accuracies under oa / aa / kappa and its (classifier, label) recall under per_class
Baselines = Mapping[tuple[str, str], Mapping[str, list[Any]]]


@dataclass
class _Cells:
    """What every group of the summary's variables is computed from: the records by cell and replicate, the
    processes each cell trained on, the baseline files, the verdicts' margin and level; the cells in order and
    each one's tp cell, found once."""

    runs: Runs
    ranks: Mapping[Cell, int]
    base: Baselines
    classifiers: Sequence[str]
    margin: float
    level: float
    cells: list[Cell] = field(init=False)
    refs: dict[Cell, Cell | None] = field(init=False)  # the tp cell each cell is compared with

    def __post_init__(self) -> None:
        self.cells = sorted(self.runs)
        self.refs = {c: self._reference(c) for c in self.cells}

    def _reference(self, cell: Cell) -> Cell | None:
        """The tp cell a cell is compared with: tp at the same dataset, P, protocol and N, else the one tp cell of
        that dataset, protocol and N trained as a single-process equivalent (tp's architecture does not depend on
        P)."""
        same = cell._replace(plan="tp", g=1)
        if same in self.runs:
            return same
        anyp = [c for c in self.runs if c._replace(P=cell.P, g=1) == same and self.ranks[c] == 1]
        return anyp[0] if len(anyp) == 1 else None

    def values(self, cell: Cell | None, m: str) -> dict[Replicate, float]:
        """Metric ``m`` of a cell's records by replicate; empty for no cell."""
        return {r: v[m] for r, v in self.runs[cell].items()} if cell is not None else {}

    def each(self, count: Callable[[Cell], int]) -> np.ndarray:
        """(cell,) int32: ``count`` of every cell."""
        return np.array([count(c) for c in self.cells], dtype=np.int32)

    def baseline(self, cell: Cell) -> Mapping[str, list[Any]]:
        """The baseline files' numbers on the cell's dataset and protocol (empty without such files)."""
        return self.base.get((cell.dataset, cell.protocol), {})

    def baseline_values(self, cell: Cell, m: str, j: int) -> dict[Replicate, float]:
        """Classifier ``j``'s metric ``m`` on the cell's dataset and protocol, by the file's (partition, seed)."""
        rows = self.baseline(cell)
        return {r: float(v[j]) for r, v in zip(rows.get("replicate", []), rows.get(m, []), strict=True)}


def _verdict_vars(s: _Cells) -> dict[str, Any]:
    """d_{m}_vs_tp mean/std/ci_low/ci_high, {m}_verdict (CF flags), seeds_to_decide (OA; aa_seeds_to_decide), and
    what the intervals are over (verdict_unit_flag, verdict_units: none and 0 for tp and unpaired cells)."""
    units = []
    for c in s.cells:
        a, _, unit = paired_units(s.values(c, "oa"), s.values(s.refs[c], "oa"))
        units.append(("none", 0) if s.refs[c] == c or not a else (unit, len(a)))
    long = (
        "what the verdict's interval is over: partition (each partition's seed-paired difference averaged over its "
        "seeds; two or more partitions) or seed (one partition); none for tp and unpaired cells"
    )
    data = {
        "verdict_unit_flag": flags("cell", [u for u, _ in units], UNIT_FLAGS, long),
        "verdict_units": variable(
            "cell",
            np.array([n for _, n in units], dtype=np.int32),
            "paired units the verdict's interval is over (its k; 0 for tp and unpaired)",
        ),
    }
    for m in ACCURACY:
        data.update(_difference_vars(s, m))
    return data


def _difference_vars(s: _Cells, m: str) -> dict[str, Any]:
    """Metric ``m`` of each cell minus its tp cell's: mean and sd, and for the verdict metrics the interval, the
    verdict and the units to decide."""
    mean, std, verdicts, low, high, need = zip(*(_paired(s, c, m) for c in s.cells), strict=True)
    margin, level = s.margin, s.level
    note = (
        f"plan minus tp ({m}) paired by replicate (partition and seed), at the same dataset, protocol and N and "
        "the same P (or tp's one single-process equivalent), over verdict_unit_flag (partitions, each one's "
        "mean over its seeds, or seeds where one partition); NaN without a tp run"
    )
    data: dict[str, Any] = {
        f"d_{m}_vs_tp_mean": variable("cell", list(mean), f"mean of {note}"),
        f"d_{m}_vs_tp_std": variable("cell", list(std), f"standard deviation (ddof 1) of {note}"),
    }
    if m not in VERDICT_METRICS:
        return data
    ci = f"{level:.0%} two-sided t interval (k - 1 degrees of freedom) of the mean of {note}"
    data[f"d_{m}_vs_tp_ci_low"] = variable("cell", list(low), f"low end of the {ci}")
    data[f"d_{m}_vs_tp_ci_high"] = variable("cell", list(high), f"high end of the {ci}")
    data[f"{m}_verdict"] = flags(
        "cell",
        verdicts,
        VERDICT_FLAGS,
        f"{m.upper()} of the plan vs tp: equal if the interval lies in [-margin, margin], else better (low > 0), "
        "worse (high < 0) or undecided; reference = tp itself, unpaired = no tp run",
        margin=margin,
        level=level,
        multiplicity="per comparison: a table of n verdicts holds n such intervals (no correction)",
    )
    data["seeds_to_decide" if m == "oa" else f"{m}_seeds_to_decide"] = variable(
        "cell",
        np.array(need, dtype=np.int32),
        f"the fewest units (verdict_unit_flag: partitions, or seeds where one partition) whose interval of the "
        f"{m.upper()} difference would fit in the margin if its mean and sd stayed as measured (undecided cells); "
        "-1 = not applicable or no number does (|mean| >= margin, one unit)",
    )
    return data


def _paired(s: _Cells, c: Cell, m: str) -> tuple[float, float, str, float, float, int]:
    """Cell ``c`` minus its tp cell in metric ``m``, paired by replicate (:func:`paired_units`): (mean, sd,
    verdict, interval low and high, units to decide; -1 where not applicable)."""
    ref = s.refs[c]
    a, b, _unit = paired_units(s.values(c, m), s.values(ref, m))
    d = [x - y for x, y in zip(a, b, strict=True)]
    if c.plan == "tp" and ref == c:
        return _mean(d), _std(d), "reference", np.nan, np.nan, -1
    if len(d) < 2:
        return _mean(d), _std(d), "unpaired" if not d else Accuracy.UNDECIDED, np.nan, np.nan, -1
    v = paired_verdict(a, b, s.margin, s.level)
    k = -1 if v.seeds_to_decide is None else v.seeds_to_decide
    return _mean(d), _std(d), v.verdict, v.ci_low, v.ci_high, k


def paired_units(
    mine: Mapping[Replicate, float], other: Mapping[Replicate, float]
) -> tuple[list[float], list[float], str]:
    """The paired series a verdict's interval is over, and their unit ("partition" or "seed").

    The replicates (partition, seed) both sides ran are paired; where they span two or more partitions each side is
    averaged over its seeds within each partition and the unit is the partition (the draw of places is what a new
    partition changes, and seeds within one share it); with one partition the unit is the seed."""
    common = sorted(set(mine) & set(other))
    parts = sorted({k for k, _ in common})
    if len(parts) < 2:
        return [mine[r] for r in common], [other[r] for r in common], "seed"
    a = [float(np.mean([mine[r] for r in common if r[0] == k])) for k in parts]
    b = [float(np.mean([other[r] for r in common if r[0] == k])) for k in parts]
    return a, b, "partition"


def _first_crossing(epochs: np.ndarray, oa: np.ndarray, target: float) -> float:
    """The first evaluated epoch whose OA >= target (x steps_per_epoch: the steps); NaN when none is (the callers
    skip a NaN target)."""
    with np.errstate(invalid="ignore"):
        hit = np.flatnonzero(np.isfinite(oa) & (oa >= target))
    return float(epochs[hit[0]]) if hit.size else float("nan")


def _seed_mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The epochs every replicate ran and the mean OA over replicates at each (NaN where one did not evaluate it)."""
    common = sorted(set.intersection(*(set(e.tolist()) for e, _ in curves)))
    epochs = np.array(common, dtype=np.int64)
    stack = (
        np.stack([oa[np.searchsorted(e, epochs)] for e, oa in curves])
        if common
        else np.zeros((len(curves), 0))
    )
    return epochs, stack.mean(axis=0)  # NaN in any seed: the epoch was not evaluated in the cell


def _time_to_accuracy(s: _Cells) -> dict[str, Any]:
    """target_oa, steps_to_target (seed-mean curve), its _min / _max over seeds, target_reached and
    seeds_reaching_target, each (cell, target); steps_per_epoch (cell)."""
    nan = float("nan")
    shape = (len(s.cells), len(TARGETS))
    t = {
        k: np.full(shape, nan)
        for k in ("target_oa", "steps_to_target", "steps_to_target_min", "steps_to_target_max")
    }
    t["target_reached"], t["seeds_reaching_target"] = np.zeros(shape, np.int8), np.zeros(shape, np.int32)
    spe = np.full(len(s.cells), nan)
    position = {c: i for i, c in enumerate(s.cells)}
    svm_oa = _svm_oa(s)
    for i, c in enumerate(s.cells):
        seeds = [s.runs[c][r] for r in sorted(s.runs[c])]
        per_epoch = {r["steps_per_epoch"] for r in seeds}
        if len(per_epoch) > 1:
            raise SummaryError(
                f"cell {c}: seeds trained at different steps_per_epoch {sorted(per_epoch)} (one recipe has one)"
            )
        spe[i] = per_epoch.pop()
        tp_oa = _mean(list(s.values(s.refs[c], "oa").values()))  # NaN without a tp cell
        t["target_oa"][i] = (svm_oa.get(c, nan), tp_oa - s.margin)
        _cell_crossings(seeds, spe[i], t, i)
    tp_cell = s.each(lambda c: position.get(s.refs[c], -1))
    return _time_to_accuracy_vars(tp_cell, t, spe)


def _cell_crossings(seeds: Sequence[RunRecord], spe: float, t: Mapping[str, np.ndarray], i: int) -> None:
    """Row ``i`` of the time-to-accuracy arrays ``t``: where the seed-mean curve and each seed's own first reach
    each target of ``t["target_oa"][i]``."""
    epochs, mean = _seed_mean_curve([r["curve"] for r in seeds])
    for j, target in enumerate(t["target_oa"][i]):
        if not np.isfinite(target):
            continue
        hit = _first_crossing(epochs, mean, target)
        t["target_reached"][i, j] = int(np.isfinite(hit))
        t["steps_to_target"][i, j] = hit * spe
        at_epoch = np.array([_first_crossing(*r["curve"], target) for r in seeds])  # each seed's crossing
        ok = np.isfinite(at_epoch)
        each = at_epoch * spe  # every seed's steps_per_epoch is the cell's (checked)
        t["seeds_reaching_target"][i, j] = int(ok.sum())
        if ok.any():
            t["steps_to_target_min"][i, j] = float(np.min(each[ok]))
        if ok.all():
            t["steps_to_target_max"][i, j] = float(np.max(each))


def _time_to_accuracy_vars(
    tp_cell: np.ndarray, t: Mapping[str, np.ndarray], spe: np.ndarray
) -> dict[str, Any]:
    """The time-to-accuracy arrays as the summary's variables, described."""
    curve = "the replicate-mean test OA (mean over replicates at each epoch every replicate evaluated)"
    described = {
        "target_oa": "target OA of time to accuracy: svm = the RBF SVM baseline's OA on the same dataset and protocol "
        "(mean over baseline seeds); tp_minus_delta = tp's oa_mean on the same dataset, protocol and N less the "
        "verdict margin; NaN without a baseline or a tp cell",
        "steps_to_target": "training steps until the replicate-mean test OA first reaches the target (NaN: never "
        "within the run)",
        "steps_to_target_min": "fewest training steps over replicates until a replicate's own test OA first reaches "
        "the target (the fastest; NaN when none reaches it within the run)",
        "steps_to_target_max": "most training steps over replicates until a replicate's own test OA first reaches "
        "the target (the slowest; NaN when some replicate never reaches it within the run: seeds_reaching_target)",
        "target_reached": f"1 if {curve} reaches the target within the run, else 0",
        "seeds_reaching_target": "replicates (partition, seed) whose own test OA reaches the target within the run",
    }
    tp_note = "index of the tp cell this cell is compared with (its differences, verdict and time to accuracy); -1: none"
    spe_note = "optimizer steps per epoch of the cell's records (train.steps_per_epoch)"
    return {
        "tp_cell": variable("cell", tp_cell, tp_note),
        **{name: variable(("cell", "target"), t[name], long) for name, long in described.items()},
        "steps_per_epoch": variable("cell", spe, spe_note),
    }


def _tuned(recipe_json: str) -> bool:
    """Whether a record's recipe came from a tuning study (train.recipe "tuned")."""
    try:
        return json.loads(recipe_json).get("train", {}).get("recipe") == "tuned"
    except (ValueError, AttributeError):
        return False


@dataclass
class _Records:
    """The training records read, by cell and seed, with what the summary checks across them."""

    runs: dict[Cell, dict[Replicate, RunRecord]] = field(default_factory=lambda: defaultdict(dict))
    ranks: dict[Cell, int] = field(default_factory=dict)  # processes each cell's runs trained on
    # recipe hash -> the first record with it, per recipe scope: the whole summary, or under train.recipe "tuned"
    # (each plan on its own study's recipe) each (dataset, plan, protocol)
    recipes: dict[tuple[str, ...], dict[str, str]] = field(default_factory=lambda: defaultdict(dict))
    recipe_json: str = ""  # the last record's recipe
    tuned: bool = False  # the records' recipes came from tuning studies
    # records whose losses saw test spectra (pretraining)
    transductive: list[str] = field(default_factory=list)


def summarize(
    records: Sequence[str | Path],
    baselines: Sequence[str | Path] = (),
    *,
    margin: float = DEFAULT_MARGIN,
    level: float = LEVEL,
) -> xr.Dataset:
    """The summary Dataset (dims cell, classifier) of the training records and baseline files given; verdicts at
    equivalence margin ``margin`` and confidence ``level``."""
    got = _read_records(records)
    base, classifiers = _read_baselines(baselines)
    if not got.runs:
        raise SummaryError("train summary: no training records given")
    s = _Cells(got.runs, got.ranks, base, classifiers, margin, level)
    per_class, classes = _per_class_mean(s)
    data = {**_seed_stats(s), **_verdict_vars(s), **per_class, **_cell_counts(s)}
    coords = _cell_coords(s.cells, classes)
    if classifiers:
        coords["classifier"] = (
            "classifier",
            np.array(classifiers, dtype=object),
            {"long_name": "classifier"},
        )
        data.update(_baseline_vars(s, classes))
    data.update(_time_to_accuracy(s))
    coords["target"] = (
        "target",
        np.array(TARGETS, dtype=object),
        {
            "long_name": "time-to-accuracy target: svm (the RBF SVM baseline's OA), tp_minus_delta (tp's OA - margin)"
        },
    )
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(_summary_attrs(got, margin, level, records=len(records), baselines=len(baselines)))
    return ds


def _read_records(records: Sequence[str | Path]) -> _Records:
    """Every record's numbers by cell and seed; SummaryError for mixed recipes, an old record, or a cell whose seeds
    trained on different numbers of processes."""
    got = _Records()
    for path in records:
        ds = TRAIN.read(path)
        a = ds.attrs
        got.recipe_json = str(a.get("recipe", ""))
        got.tuned = _tuned(got.recipe_json)
        _check_recipe(got, a, path)
        if str(a.get("transductive", "no")).startswith("yes"):
            got.transductive.append(Path(path).name)
        if "tokens" not in a:
            raise SummaryError(
                f"{path}: no `tokens` attribute (N of the crop): not a training record of this version"
            )
        cell = Cell(
            str(a["dataset"]), str(a["plan"]), int(a["P"]), int(a["g"]), str(a["protocol"]), int(a["tokens"])
        )
        numbers = record_numbers(ds)
        replicate = (numbers["partition"], int(a["seed"]))
        if replicate in got.runs[cell]:
            raise SummaryError(
                f"{path}: a second record of cell {cell}, partition {replicate[0]}, seed {replicate[1]}: give each "
                "replicate once"
            )
        got.runs[cell][replicate] = numbers
        if got.ranks.setdefault(cell, numbers["ranks"]) != numbers["ranks"]:
            raise SummaryError(
                f"{path}: trained on {numbers['ranks']} rank(s), other seeds of its cell on {got.ranks[cell]}: "
                "summarise single-process equivalents and P-rank runs apart"
            )
    return got


def _check_recipe(got: _Records, a: Mapping[str, Any], path: str | Path) -> None:
    """A summary never mixes recipes: one per summary, or under train.recipe tuned one per plan and protocol."""
    rh = str(a.get("recipe_hash", "none"))
    scope = (str(a.get("dataset")), str(a.get("plan")), str(a.get("protocol"))) if got.tuned else ()
    seen = got.recipes[scope]
    seen.setdefault(rh, str(path))
    if len(seen) > 1:
        (h0, p0), (h1, p1) = list(seen.items())[:2]
        raise SummaryError(
            f"{p1}: trained under recipe {h1}, but {p0} under recipe {h0}: a summary never mixes recipes "
            "(train.* keys other than the job matrix; under train.recipe tuned, within a plan and protocol); "
            "summarise each recipe's records apart"
        )


def _read_baselines(
    baselines: Sequence[str | Path],
) -> tuple[dict[tuple[str, str], dict[str, list[Any]]], list[str]]:
    """The baseline files' accuracies by (dataset, protocol), each file's (partition, seed) under ``replicate``, and
    their classifiers (the same in every file)."""
    base: dict[tuple[str, str], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    classifiers: list[str] = []
    for path in baselines:
        ds = BASELINE.read(path)
        names = [str(c) for c in ds["classifier"].values]
        classifiers = classifiers or names
        if names != classifiers:
            raise SummaryError(f"{path}: classifiers {names}, other baseline files have {classifiers}")
        key = (str(ds.attrs["dataset"]), str(ds.attrs["protocol"]))
        base[key]["replicate"].append((int(ds.attrs["partition_index"]), int(ds.attrs.get("seed", 0))))
        for m, var in BASELINE_VARS.items():
            base[key][m].append(np.asarray(ds[var].values, dtype=np.float64))
        if "class_accuracy" in ds:
            base[key]["per_class"].append(np.asarray(ds["class_accuracy"].values, dtype=np.float64))
    return base, classifiers


def _seed_stats(s: _Cells) -> dict[str, Any]:
    """Mean and standard deviation over replicates of every per-record number, per cell; for the accuracy, its
    spread across partitions apart from its spread across seeds (:func:`spread_parts`)."""
    data: dict[str, Any] = {}
    for m in (*ACCURACY, *FINAL, *VALIDATION, "tokens_per_s", "peak_memory", "ccr_inline"):
        vals = [list(s.values(c, m).values()) for c in s.cells]
        attrs = {}
        if m == "tokens_per_s":  # each record timed at its own moment: no ratio between cells
            attrs["comparable"] = "within one record only; plan ratios: probe/throughput.nc (interleaved)"
        over = f"over replicates (partition, seed) of {LONG[m]}"
        data[f"{m}_mean"] = variable("cell", [_mean(v) for v in vals], f"mean {over}", UNITS[m], **attrs)
        data[f"{m}_std"] = variable(
            "cell", [_std(v) for v in vals], f"standard deviation (ddof 1) {over}", UNITS[m], **attrs
        )
    for m in ACCURACY:
        spreads = [spread_parts(s.values(c, m)) for c in s.cells]
        data[f"{m}_partition_std"] = variable(
            "cell",
            [p for p, _ in spreads],
            f"spread across partitions: standard deviation (ddof 1) over the cell's partitions of each "
            f"partition's mean over its seeds, of {LONG[m]}; NaN with one partition",
        )
        data[f"{m}_seed_std"] = variable(
            "cell",
            [q for _, q in spreads],
            f"spread across seeds: pooled standard deviation over seeds within a partition (root mean of the "
            f"partitions' ddof-1 variances), of {LONG[m]}; NaN with one seed per partition",
        )
    return data


def spread_parts(values: Mapping[Replicate, float]) -> tuple[float, float]:
    """(spread across partitions, spread across seeds) of one cell's replicate values: the standard deviation
    (ddof 1) of the partitions' seed means, and the pooled within-partition standard deviation (the root of the
    mean of the ddof-1 variances of the partitions with two or more seeds); NaN where there are too few."""
    by_part: dict[int, list[float]] = defaultdict(list)
    for (k, _seed), v in sorted(values.items()):
        by_part[k].append(float(v))
    means = [float(np.mean(v)) for v in by_part.values()]
    within = [float(np.var(v, ddof=1)) for v in by_part.values() if len(v) > 1]
    return _std(means), float(np.sqrt(np.mean(within))) if within else float("nan")


def _per_class_mean(s: _Cells) -> tuple[dict[str, Any], int]:
    """Each class's test recall, mean over replicates per cell; and the most classes of any cell."""
    per_class = [np.stack(list(s.values(c, "per_class").values())) for c in s.cells]  # (seeds, K) per cell
    classes = max(pc.shape[1] for pc in per_class)
    with warnings.catch_warnings():  # a class with no test pixel is NaN in every seed: mean of nothing
        warnings.simplefilter("ignore", RuntimeWarning)
        pc_mean = np.array([np.nanmean(_pad(pc, classes), axis=0) for pc in per_class])
    long = (
        "mean over replicates of each class's recall on the test pixels after the last epoch; NaN for a class with no "
        "test pixel (OA hides minority classes)"
    )
    return {"per_class_accuracy_mean": variable(("cell", "label"), pc_mean, long)}, classes


def _cell_counts(s: _Cells) -> dict[str, Any]:
    """Seeds, partitions, replicates, epochs, summary epochs and processes of each cell."""

    def fewest(key: str) -> np.ndarray:
        return s.each(lambda c: min(r[key] for r in s.runs[c].values()))

    processes = (
        "processes each run of the cell trained on: P, or 1 for the plan's single-process equivalent "
        "(train.equivalent; its tokens/s and memory are one process's, not the plan's)"
    )
    seeds = [len({seed for _, seed in s.runs[c]}) for c in s.cells]
    return {
        "seeds": variable("cell", seeds, "training seeds in the cell (distinct)"),
        "partitions": variable(
            "cell",
            s.each(lambda c: len({k for k, _ in s.runs[c]})),
            "partitions of the protocol in the cell (distinct; data.partition.draws)",
        ),
        "replicates": variable(
            "cell",
            s.each(lambda c: len(s.runs[c])),
            "replicates (partition, seed) in the cell: its training records",
        ),
        "epochs": variable(
            "cell", fewest("epochs"), "epochs trained by every run of the cell (fewest over its seeds)"
        ),
        "summary_epochs": variable(
            "cell",
            fewest("window"),
            "epochs averaged into the cell's accuracy, tokens/s and memory (§7.4: the last 10)",
        ),
        "ranks": variable("cell", s.each(lambda c: s.ranks[c]), processes),
    }


def _cell_coords(cells: Sequence[Cell], classes: int) -> dict[str, Any]:
    """The cell's coordinates (dataset, plan, P, g, protocol, N) and the class labels."""

    def column(name: str, dtype: Any) -> np.ndarray:
        return np.array([getattr(c, name) for c in cells], dtype=dtype)

    return {
        "cell": ("cell", np.arange(len(cells), dtype=np.int32), {"units": "1", "long_name": "cell index"}),
        "dataset": ("cell", column("dataset", object), {"long_name": "dataset"}),
        "plan": ("cell", column("plan", object), {"long_name": "parallel plan"}),
        "P": ("cell", column("P", np.int32), {"units": "1", "long_name": "TP size"}),
        "g": ("cell", column("g", np.int32), {"units": "1", "long_name": "D-CHAG groups"}),
        "protocol": ("cell", column("protocol", object), {"long_name": "accuracy protocol (random, block)"}),
        "N": ("cell", column("N", np.int32), {"units": "1", "long_name": "spatial tokens per crop (the crop of train.crops)"}),
        "label": ("label", np.arange(1, classes + 1, dtype=np.int16), {"units": "1", "long_name": "class label (1..K)"}),
    }  # fmt: skip


def _baseline_vars(s: _Cells, classes: int) -> dict[str, Any]:
    """The classical baseline beside every cell: its accuracies on the cell's dataset and protocol over its files
    (partitions x seeds), their spread across partitions, and the cell's OA difference to it paired by partition."""
    data = _baseline_accuracy_vars(s, classes)
    reps = [s.baseline(c).get("replicate", []) for c in s.cells]
    data["baseline_seeds"] = variable(
        "cell",
        [len({seed for _, seed in r}) for r in reps],
        "baseline seeds (distinct) on the cell's dataset and protocol",
    )
    data["baseline_partitions"] = variable(
        "cell",
        np.array([len({k for k, _ in r}) for r in reps], dtype=np.int32),
        "partitions the baseline ran on (distinct), the cell's dataset and protocol",
    )
    shape = (len(s.cells), len(s.classifiers))
    for m in ACCURACY:
        sd = [[spread_parts(s.baseline_values(c, m, j))[0] for j in range(shape[1])] for c in s.cells]
        data[f"baseline_{m}_partition_std"] = variable(
            ("cell", "classifier"),
            np.array(sd, dtype=np.float64).reshape(shape),
            f"spread across partitions of the classical baseline's {m} on the same dataset and protocol: standard "
            "deviation (ddof 1) of each partition's mean over baseline seeds; NaN with one partition",
        )
    data.update(_baseline_difference_vars(s))
    return data


def _baseline_accuracy_vars(s: _Cells, classes: int) -> dict[str, Any]:
    """baseline_{m}_mean and _std (cell, classifier), and baseline_per_class_accuracy_mean where every file has it."""
    data: dict[str, Any] = {}
    nan = np.full(len(s.classifiers), np.nan)
    for m in ACCURACY:
        rows = [s.baseline(c).get(m, []) for c in s.cells]
        what = (
            f"over the baseline's files (partitions x seeds) of the classical baseline's {m} on the same dataset "
            "and protocol"
        )
        means = np.array([np.mean(r, axis=0) if r else nan for r in rows])
        stds = np.array([np.std(r, axis=0, ddof=1) if len(r) > 1 else nan for r in rows])
        data[f"baseline_{m}_mean"] = variable(("cell", "classifier"), means, f"mean {what}")
        data[f"baseline_{m}_std"] = variable(
            ("cell", "classifier"), stds, f"standard deviation (ddof 1) {what}"
        )
    rows_pc = [s.baseline(c).get("per_class", []) for c in s.cells]
    if all(rows_pc):
        with warnings.catch_warnings():  # a class with no test pixel: NaN in every seed
            warnings.simplefilter("ignore", RuntimeWarning)
            pc = np.stack([np.nanmean([_pad(r, classes) for r in rs], axis=0) for rs in rows_pc])
        long = (
            "mean over the baseline's files of each class's recall on the test pixels of the same dataset and "
            "protocol; NaN for a class with no test pixel"
        )
        data["baseline_per_class_accuracy_mean"] = variable(("cell", "classifier", "label"), pc, long)
    return data


def _baseline_difference_vars(s: _Cells) -> dict[str, Any]:
    """d_oa_vs_baseline_mean / _ci_low / _ci_high (cell, classifier): the cell's OA minus the baseline's, paired by
    partition (each side's mean over its seeds on the partition; the baseline's seed drives only its CV folds and
    forest, so its seeds are no pairing of the training seeds), the interval over partitions (over the cell's
    seeds against the baseline's mean where one partition)."""
    shape = (len(s.cells), len(s.classifiers))
    out = {k: np.full(shape, np.nan) for k in ("mean", "low", "high")}
    for i, c in enumerate(s.cells):
        mine = s.values(c, "oa")
        for j in range(shape[1]):
            theirs = s.baseline_values(c, "oa", j)
            parts = sorted({k for k, _ in mine} & {k for k, _ in theirs})
            if not parts:
                continue
            ref = {k: float(np.mean([v for (q, _), v in theirs.items() if q == k])) for k in parts}
            if len(parts) >= 2:
                d = [float(np.mean([v for (q, _), v in mine.items() if q == k])) - ref[k] for k in parts]
            else:
                d = [v - ref[q] for (q, _), v in sorted(mine.items()) if q in ref]
            out["mean"][i, j] = float(np.mean(d))
            if len(d) >= 2:
                half = half_width(float(np.std(d, ddof=1)), len(d), s.level)
                out["low"][i, j], out["high"][i, j] = out["mean"][i, j] - half, out["mean"][i, j] + half
    note = (
        "the cell's OA minus the classical baseline's on the same dataset and protocol, paired by partition (each "
        "side's mean over its seeds); over partitions, or the cell's seeds against the baseline's mean where one "
        "partition"
    )
    ci = f"{s.level:.0%} two-sided t interval (k - 1 degrees of freedom) of the mean of {note}"
    dims = ("cell", "classifier")
    return {
        "d_oa_vs_baseline_mean": variable(dims, out["mean"], f"mean of {note}"),
        "d_oa_vs_baseline_ci_low": variable(dims, out["low"], f"low end of the {ci}"),
        "d_oa_vs_baseline_ci_high": variable(dims, out["high"], f"high end of the {ci}"),
    }


def _svm_oa(s: _Cells) -> dict[Cell, float]:
    """The RBF SVM baseline's OA (mean over its seeds) on each cell's dataset and protocol, where there is one."""
    if SVM not in s.classifiers:
        return {}
    k = s.classifiers.index(SVM)
    return {c: float(np.mean([r[k] for r in rows])) for c in s.cells if (rows := s.baseline(c).get("oa", []))}


def _summary_attrs(
    got: _Records, margin: float, level: float, *, records: int, baselines: int
) -> dict[str, Any]:
    return {
        "title": "hsitp training summary: accuracy, throughput, memory and ccr_inline per cell, over replicates "
        "(partition, seed)",
        "std": "sample standard deviation over replicates (ddof = 1); NaN with one replicate; *_partition_std and "
        "*_seed_std split the accuracy's spread into its parts",
        "accuracy": "each record's mean over its last summary_epochs evaluations (whole-scene tiled prediction, "
        "test pixels, rank 0's map); *_final: the last epoch's",
        "differences": "paired by replicate (partition, seed): plan minus tp at the same dataset, P, protocol and N "
        "(or tp's single-process equivalent, one model at every P); intervals over partitions (each partition's "
        "differences averaged over its seeds) where two or more, else over seeds (verdict_unit_flag)",
        "verdict_margin": margin,
        "verdict_level": level,
        "verdict_scope": f"{level:.0%} per comparison; n comparisons hold n intervals (no multiplicity correction)",
        "records": records,
        "recipe_hash": "per plan and protocol (train.recipe tuned)"
        if got.tuned
        else next(iter(got.recipes[()])),
        "recipe": json.dumps({"/".join(k): next(iter(v)) for k, v in got.recipes.items()})
        if got.tuned
        else got.recipe_json,
        "baseline_files": baselines,
        "time_to_accuracy": TIME_TO_ACCURACY_NOTE,
        # masked-band pretraining sees the test pixels' spectra; a reader of any number here must know
        "transductive": (
            f"yes: {len(got.transductive)} of {records} records pretrained on every pixel's spectrum, the test "
            f"pixels' included (never a label): {', '.join(got.transductive)}; the classical baselines had no such "
            "unlabelled-data advantage"
            if got.transductive
            else "no record's loss saw a test pixel's spectrum"
        ),
    }
