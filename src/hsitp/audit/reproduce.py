"""``hsitp audit reproduce --reference results/reference/RUN --seed S --budget-min M``: a spot check of a reported
experiment that fits in minutes (a reader checks the numbers without the hours the run took).

1. **Cells picked by the auditor's seed.** A cell is one training run of the reference's ``train/runs.nc`` (plan, P,
   g, protocol, seed, N, control). The cells are put in a canonical order, permuted by ``numpy.random.default_rng(S)``
   and taken greedily in that order while the estimated time still fits the budget: the picks depend on the seed
   and the reference only, so nobody can choose them. A run's estimate is its recorded wall time (Snakemake's
   benchmark file) or, without one, its steps x recorded step time x 1.25 + 10 s of start-up; a D-CHAG cell's probe
   re-measurement adds the probe's recorded wall time at its P scaled to the two points it re-measures. When a
   cell's training fits but its probe does not, the cell is taken without the probe, and its lines say so.
2. **Retrained exactly, by Snakemake.** Each picked run is built again by the repository's Snakefile in a work
   folder (``hsitp.audit.rebuild``): a config overlay written from the reference's recorded config
   (``run_config.json``) and the run's recorded recipe, restricted to the cell (its scene, plan, P, g, protocol,
   partition, seed, crop, ranks, threads, evaluation cadence, summary window and kernel), and Snakemake asked for
   that one record (rule ``train``, or ``train_control`` on tp's study copied from the reference), so the command
   line is the rule's own. The prepared scene is the one named by the reference: ``--data PATH``, else
   ``results/RUN/data/DATASET.nc`` when present, else built by the data rules with the settings the reference
   recorded; either way its content hash must equal the reference's. A pip-installed package has no Snakefile:
   the spot check says it needs a checkout.
3. **Memory and throughput re-measured** for a D-CHAG cell by the probe rules (``probe_run``, ``probe_merge``) at
   the cell's P, tp and the cell's plan at its g, L and N, no activation checkpointing, once per (plan, P, g).
4. **Verdict per cell.** ``reproduced`` when every judged check holds, else ``differs`` with by how much (``failed``
   when the training itself did not finish):

   - accuracy (test OA, AA and kappa averaged over the last summary epochs, and the final OA): identical to 1e-9
     when this machine's torch version, torch CPU capability, CPU vendor and SIMD flags are the reference's
     (``manifest.json``'s platform); otherwise within 3 standard deviations of the cell's own seeds (the
     summary's ``*_std``; 3 sigma covers the difference of two draws, sqrt(2) x 1.96 = 2.8), or the verdict
     margin where the cell has one seed; the recipe hash must be the recorded one;
   - the run's own peak memory within 2 %;
   - the probe's memory ratio vs tp within 2 %;
   - timing: the probe's throughput ratio vs tp (median of the interleaved rounds) inside the reference's [min,
     max] over rounds widened by that range's own width on each side; not judged where the reference or this
     machine is oversubscribed, or under ``--no-timing``.

A progress line per cell, an estimate before it starts, ``K of N cells reproduced`` last; exit 1 on any cell not
reproduced.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsitp.audit import rebuild
from hsitp.audit.rebuild import Cell, ReproduceError
from hsitp.outcomes import Reproduction

if TYPE_CHECKING:  # numpy and xarray are imported where used: `hsitp --help` builds this parser
    import xarray as xr

IDENTICAL = 1e-9  # |reproduced - reference| of an accuracy on the reference's platform
SPREAD_SIGMAS = 3.0  # the tolerance elsewhere, in standard deviations of the cell's seeds
MEMORY_REL = 0.02  # memory (the run's peak, the probe's ratio vs tp): within 2 %
DEFAULT_MARGIN = 0.01  # the verdict margin, when the summary does not give its own
START_S = 10.0  # start-up of one `hsitp train` process (imports, scene, runtime), added to steps x step time
STEP_SLACK = 1.25  # step time x this: evaluation passes, the memory-tracked steps, checkpoints
PROBE_FALLBACK_S = 30.0  # one probe launch when the reference recorded no probe wall time
PREPARE_FALLBACK_S = 60.0  # fetch + prepare, when the reference recorded no data_prepare wall time
ACCURACY = (
    ("oa_summary", "OA last {k}", "oa"),
    ("aa_summary", "AA last {k}", "aa"),
    ("kappa_summary", "kappa last {k}", "kappa"),
    ("oa_final", "final OA", "oa"),
)


# --- the reference ------------------------------------------------------------------------------------------------
@dataclass
class Reference:
    path: Path
    manifest: dict[str, Any]
    runs: xr.Dataset
    summaries: dict[bool, xr.Dataset | None]  # control? -> train/summary.nc or train/control_summary.nc
    memory: xr.Dataset | None
    throughput: xr.Dataset | None
    cells: list[Cell] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the run's recorded config (run_config.json), or {}

    def value(self, cell: Cell, var: str) -> Any:
        v = self.runs[var].values[cell.row]
        return v.item() if hasattr(v, "item") else v

    @property
    def run(self) -> str:
        return str(self.manifest.get("run", self.path.name))


def load_reference(path: str | os.PathLike[str]) -> Reference:
    from hsitp.contracts import PROBE_MEMORY, PROBE_THROUGHPUT, REFERENCE_RUNS, TRAIN_SUMMARY, Contract
    from hsitp.publish.reference import RUNS_FILE, read_manifest

    ref = Path(path)
    manifest = read_manifest(ref)
    runs = REFERENCE_RUNS.read(ref / RUNS_FILE)

    def optional(rel: str, contract: Contract) -> xr.Dataset | None:
        return contract.read(ref / rel) if (ref / rel).is_file() else None

    out = Reference(
        path=ref,
        manifest=manifest,
        runs=runs,
        summaries={
            False: optional("train/summary.nc", TRAIN_SUMMARY),
            True: optional("train/control_summary.nc", TRAIN_SUMMARY),
        },
        memory=optional("probe/memory.nc", PROBE_MEMORY),
        throughput=optional("probe/throughput.nc", PROBE_THROUGHPUT),
        config=rebuild.base_config(ref),
    )
    out.cells = [Cell.from_runs(runs, i) for i in range(runs.sizes["run"])]
    return out


# --- the probe rows of the reference ----------------------------------------------------------------------------
def _probe_sel(ds: xr.Dataset, cell: Cell, bands: int) -> dict[str, Any] | None:
    """The selection of (plan, P, g, L, N, no checkpointing) in a probe file; None when not probed there."""
    sel: dict[str, Any] = {"plan": cell.plan, "P": cell.P, "g": cell.g}
    for dim, want in (("L", bands), ("N", cell.N)):
        if dim in ds.dims:
            values = [int(v) for v in ds[dim].values]
            if want in values:
                sel[dim] = want
            elif len(values) == 1:
                sel[dim] = values[0]
            else:
                return None
    if "checkpointing" in ds.dims:
        if "none" not in [str(v) for v in ds["checkpointing"].values]:
            return None
        sel["checkpointing"] = "none"
    for dim in ("plan", "P", "g"):
        if dim not in ds.dims or sel[dim] not in ds[dim].values.tolist():
            return None
    if "tp" not in ds["plan"].values.tolist():
        return None
    return sel


def memory_ratio(memory: xr.Dataset, cell: Cell, bands: int) -> float:
    """The cell's (plan, P, g) peak per rank (fullest rank) over tp's, as the report's answer table: NaN when not
    probed."""
    sel = _probe_sel(memory, cell, bands)
    if sel is None:
        return math.nan
    peak = memory["peak_allocated"].max("rank", skipna=True)
    here, tp = float(peak.sel(sel)), float(peak.sel({**sel, "plan": "tp"}))
    return here / tp if tp > 0 and math.isfinite(here) else math.nan


def throughput_ratio(throughput: xr.Dataset, cell: Cell, bands: int) -> tuple[float, float, float, str]:
    """(median, min, max) of the interleaved tokens/s ratio vs tp over rounds, and the oversubscription note at P."""
    sel = _probe_sel(throughput, cell, bands)
    if sel is None:
        return math.nan, math.nan, math.nan, ""
    med, lo, hi = (float(throughput[f"ratio_vs_tp_{s}"].sel(sel)) for s in ("median", "min", "max"))
    note = ""
    if "oversubscribed_note" in throughput:
        note = str(throughput["oversubscribed_note"].sel(P=cell.P).item())
    return med, lo, hi, note


def needs_probe(ref: Reference, cell: Cell) -> bool:
    """A D-CHAG (or other non-tp) cell whose (plan, P, g) the reference's probe measured against tp."""
    if cell.plan == "tp" or ref.memory is None or ref.throughput is None:
        return False
    return math.isfinite(memory_ratio(ref.memory, cell, int(ref.value(cell, "bands"))))


# --- estimates and picks ------------------------------------------------------------------------------------------
def train_estimate(ref: Reference, cell: Cell) -> tuple[float, str]:
    """Seconds to retrain the cell, and where the number comes from."""
    wall = float(ref.value(cell, "wall_s"))
    if math.isfinite(wall) and wall > 0:
        return wall, "recorded wall time"
    steps, step = float(ref.value(cell, "steps")), float(ref.value(cell, "step_time_summary"))
    if not math.isfinite(step):
        step = 1.0
    return START_S + steps * step * STEP_SLACK, "steps x recorded step time"


def probe_estimate(ref: Reference, cell: Cell) -> float:
    """Seconds to re-measure the cell's (plan, P, g) with the probe: the reference's probe launch at P (its wall
    time) scaled to the two points re-measured (tp and the plan, no checkpointing)."""
    wall = ref.manifest.get("probe_wall_s", {}).get(str(cell.P))
    if wall is None or ref.memory is None:
        return PROBE_FALLBACK_S
    peak = ref.memory["peak_allocated"].max("rank", skipna=True).sel(P=cell.P)
    import numpy as np

    points = int(np.isfinite(peak.values).sum()) or 1
    return START_S + max(float(wall) - START_S, 0.0) * min(2.0 / points, 1.0)


@dataclass
class Pick:
    cell: Cell
    train_s: float
    train_from: str
    probe: bool  # re-measure its probe row
    probe_s: float  # 0 when the probe row is shared with an earlier pick or not re-measured
    probe_skipped: str = ""  # why a probe row is not re-measured


def pick_cells(ref: Reference, seed: int, budget_s: float, fixed_s: float = 0.0) -> list[Pick]:
    """The cells the auditor's seed picks: canonical order, permuted by ``default_rng(seed)``, taken greedily while
    the estimate fits ``budget_s`` (after ``fixed_s``, the scene's preparation)."""
    import numpy as np

    order = sorted(ref.cells, key=lambda c: c.key)
    perm = np.random.default_rng(seed).permutation(len(order))
    spent = fixed_s
    probed: set[tuple[str, int, int]] = set()
    picks: list[Pick] = []
    for i in perm:
        cell = order[int(i)]
        t, source = train_estimate(ref, cell)
        wants = needs_probe(ref, cell)
        p = probe_estimate(ref, cell) if wants and cell.probe_key not in probed else 0.0
        if spent + t + p <= budget_s:
            picks.append(Pick(cell, t, source, wants, p))
            spent += t + p
            if wants:
                probed.add(cell.probe_key)
        elif wants and spent + t <= budget_s:
            why = f"the probe at P = {cell.P} (est. {p / 60:.1f} min) did not fit the budget"
            picks.append(Pick(cell, t, source, False, 0.0, why))
            spent += t
    return picks


# --- platform -----------------------------------------------------------------------------------------------------
def platform_comparison(manifest: Mapping[str, Any]) -> tuple[bool, str]:
    """(same platform?, a line saying why): torch version, torch's CPU capability, CPU vendor and SIMD flags."""
    from hsitp.publish.reference import platform_now

    ref, here = manifest.get("platform", {}), platform_now()
    labels = {
        "torch": "torch",
        "torch_cpu_capability": "torch CPU capability",
        "cpu_vendor": "CPU vendor",
        "simd_flags": "SIMD flags",
    }
    unknown = [label for key, label in labels.items() if ref.get(key) is None]
    differ = [key for key in labels if ref.get(key) is not None and ref[key] != here[key]]
    what = f"torch {here['torch']} ({here['torch_cpu_capability']}), {here['cpu_vendor']} {here['cpu_model']}"
    if differ:
        detail = [
            f"SIMD flags (only the reference's: {sorted(set(ref[k]) - set(here[k]))}; only here: "
            f"{sorted(set(here[k]) - set(ref[k]))})"
            if k == "simd_flags"
            else f"{labels[k]} {ref[k]} there, {here[k]} here"
            for k in differ
        ]
        return False, f"another platform than the reference's: {'; '.join(detail)} ({what})"
    if unknown:
        return (
            False,
            f"the reference does not record its {', '.join(unknown)}: its platform is unknown ({what})",
        )
    return True, f"the reference's platform: {what}"


# --- the builds (Snakemake, through hsitp.audit.rebuild) ------------------------------------------------------
def scene_for(ref: Reference, dataset: str, given: Mapping[str, Path], work: Path, say) -> Path:  # noqa: ANN001
    """The prepared scene of ``dataset`` in the work folder: given, the run's own, or built there by the data rules
    with the reference's data settings; its content hash checked."""
    from hsitp.publish.reference import scene_content_sha256

    entry = ref.manifest.get("scenes", {}).get(dataset, {})
    path = work / "results" / ref.run / "data" / f"{dataset}.nc"
    own = Path("results") / ref.run / "data" / f"{dataset}.nc"
    if dataset in given or own.is_file():
        src, how = (given[dataset], "given (--data)") if dataset in given else (own, "the run's own")
        if not src.is_file():
            raise ReproduceError(f"--data {src}: no such file")
        rebuild.place(src, path)
    else:
        cfg = entry.get("prepare_config")
        if not cfg:
            raise ReproduceError(
                f"the reference records no way to prepare {dataset!r} (not a registry scene?): give --data PATH"
            )
        say(
            f"preparing {dataset} with the reference's data settings in {path} (Snakemake, rule data_prepare) ..."
        )
        overlay = {**ref.config, **cfg, "run": ref.run, "datasets": [dataset], "stages": ["data"]}
        log = work / "logs" / "reproduce" / f"data_{dataset}.log"
        if rebuild.snakemake(work, f"data_{dataset}", overlay, [str(path)], log) != 0 or not path.is_file():
            raise ReproduceError(f"preparing {dataset} failed ({rebuild.tail(log)}); log {log}")
        how = "prepared here"
    want = entry.get("content_sha256")
    got = scene_content_sha256(path)
    if want and got != want:
        raise ReproduceError(
            f"{path} ({how}): its arrays are not the reference's scene (content sha256 {got[:12]}, the reference's "
            f"{want[:12]}): accuracy cannot be compared; give the run's prepared scene with --data"
        )
    say(f"scene {dataset}: {path} ({how}; content sha256 {got[:12]}{' = the reference' if want else ''})")
    return path


def retrain(ref: Reference, cell: Cell, data: Path, work: Path) -> tuple[Path | None, Path]:
    """Snakemake trains the cell again in ``work`` (rule train, or train_control), the reference's tuning studies
    beside it; (its record or None when the job failed, the log of the Snakemake call)."""
    sub = Path(cell.dataset) / ("control" if cell.control else "")
    out = work / "results" / ref.run / "train" / sub / f"{cell.name}.nc"
    log = work / "logs" / "reproduce" / "train" / sub / f"{cell.name}.log"
    if int(ref.value(cell, "stopped_after_epochs")):
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("a run stopped early (a check run) has no rule that trains it as a cell\n")
        return None, log
    for study in sorted((ref.path / "tune" / cell.dataset).glob("*.nc")):  # what a tuned recipe reads
        rebuild.place(study, work / "results" / ref.run / "tune" / cell.dataset / study.name)
    overlay = rebuild.cell_overlay(ref.config, ref.run, cell)
    code = rebuild.snakemake(work, f"train_{cell.label.replace('/', '_')}", overlay, [str(out)], log)
    return (out if code == 0 and out.is_file() else None), log


def remeasure_probe(ref: Reference, cell: Cell, work: Path) -> tuple[xr.Dataset, xr.Dataset] | str:
    """Snakemake's probe rules at the cell's P for tp and its plan at its g, L and N (no checkpointing), in a run
    of their own under ``work``: (memory, throughput), or why not."""
    import xarray as xr

    assert ref.memory is not None
    pc = json.loads(str(ref.memory.attrs["probe"]))
    kernel = str(pc.pop("attention_kernel"))  # the reference probe's kernel
    bands = int(ref.value(cell, "bands"))
    sel = _probe_sel(ref.memory, cell, bands)
    assert sel is not None
    pc.update(
        plans=["tp", cell.plan],
        groups=[cell.g],
        checkpointing=["none"],
        L=[int(sel.get("L", bands))],
        N=[int(sel.get("N", cell.N))],
        world_sizes=[cell.P],
        match_train=False,
    )
    seed = int(json.loads(cell.recipe).get("seed") or 0)
    run = f"{ref.run}-probe-{cell.plan}-P{cell.P}-g{cell.g}"
    folder = work / "results" / run / "probe"
    log = work / "logs" / "reproduce" / f"{run}.log"
    overlay = rebuild.probe_overlay(ref.config, run, pc, seed, kernel)
    targets = [str(folder / "memory.nc"), str(folder / "throughput.nc")]
    if rebuild.snakemake(work, run, overlay, targets, log) != 0 or not Path(targets[0]).is_file():
        return f"the probe failed ({rebuild.tail(log)}); log {log}"
    return xr.load_dataset(targets[0]), xr.load_dataset(targets[1])


# --- comparison ---------------------------------------------------------------------------------------------------
@dataclass
class Check:
    kind: str  # accuracy, recipe, memory, timing
    what: str
    reference: Any
    reproduced: Any
    ok: bool | None  # None: not judged (said why in text)
    text: str

    def as_dict(self) -> dict[str, Any]:
        def num(x: Any) -> Any:
            return None if isinstance(x, float) and not math.isfinite(x) else x

        return {**asdict(self), "reference": num(self.reference), "reproduced": num(self.reproduced)}


def seed_spread(ref: Reference, cell: Cell, metric: str) -> tuple[float, str]:
    """The standard deviation over seeds of the cell's metric (oa, aa, kappa): the summary's ``{metric}_seed_std``
    where its replicates span several partitions (a retrained run keeps its partition: the spread across
    partitions is no tolerance for it), else its ``{metric}_std``; else computed from runs.nc's rows of the same
    cell and partition."""
    import numpy as np

    from hsitp import contracts

    summary = ref.summaries.get(cell.control)
    key = contracts.Cell(cell.dataset, cell.plan, cell.P, cell.g, cell.protocol, cell.N)
    cells = contracts.summary_cells(summary) if summary is not None else None
    if cells is not None and key in cells.index and f"{metric}_std" in cells:
        row = cells.loc[key]
        var = f"{metric}_seed_std" if int(row.get("partitions", 1)) > 1 else f"{metric}_std"
        name = "control_summary.nc" if cell.control else "summary.nc"
        return float(row[var]), f"{var} of train/{name}"
    runs = ref.runs
    same = np.ones(runs.sizes["run"], dtype=bool)
    for dim in ("dataset", "plan", "P", "g", "protocol", "N", "control", "partition_index"):
        same &= runs[dim].values == runs[dim].values[cell.row]
    vals = runs[f"{metric}_summary"].values[same]
    vals = vals[np.isfinite(vals)]
    sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else math.nan
    return sd, "the std of the cell's seeds in train/runs.nc"


def margin(ref: Reference, cell: Cell) -> float:
    summary = ref.summaries.get(cell.control) or ref.summaries.get(False)
    if summary is not None and "verdict_margin" in summary.attrs:
        return float(summary.attrs["verdict_margin"])
    return DEFAULT_MARGIN


def _fmt(x: float, digits: int = 6) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "NaN"


def _dotted(section: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A recipe section's leaves by dotted key ({"validation": {"fraction": 0}} -> {"validation.fraction": 0})."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        if isinstance(value, Mapping) and value:
            out |= _dotted(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def recipe_check(want_hash: str, want: Mapping[str, Any], got_hash: str, got: Mapping[str, Any]) -> Check:
    """The reproduced run's recipe against the recorded one: equal hashes, or (code that added train keys since:
    their defaults enter the hash) every recorded key with its recorded value, the added keys named."""
    if got_hash == want_hash:
        return Check("recipe", "recipe", want_hash, got_hash, True, f"recipe {got_hash}: the recorded one")
    # nested sections by dotted key: a key added inside one (validation.folds) is an added key, not a change
    wt, gt = _dotted(want.get("train", {})), _dotted(got.get("train", {}))
    changed = sorted(k for k in wt if gt.get(k) != wt[k])
    if want.get("seed") != got.get("seed"):
        changed.append("seed")
    added = sorted(set(gt) - set(wt))
    if changed:
        diffs = "; ".join(
            f"{k}: {wt.get(k, want.get(k))!r} recorded, {gt.get(k, got.get(k))!r} here" for k in changed
        )
        return Check(
            "recipe", "recipe", want_hash, got_hash, False, f"not trained on the recorded recipe: {diffs}"
        )
    return Check(
        "recipe", "recipe", want_hash, got_hash, True,
        f"recipe {got_hash} (recorded {want_hash}): every recorded key as recorded; train keys added since, at their "
        f"defaults: {', '.join(f'{k} = {gt[k]!r}' for k in added)}",
    )  # fmt: skip


def accuracy_checks(ref: Reference, cell: Cell, record: Path, identical: bool) -> list[Check]:
    from hsitp.contracts import TRAIN
    from hsitp.train.summary import record_numbers

    ds = TRAIN.read(record, load=False)
    try:
        got = record_numbers(ds)
        got_hash = str(ds.attrs.get("recipe_hash", ""))
        got_recipe = json.loads(str(ds.attrs.get("recipe", "{}")))
    finally:
        ds.close()
    k = cell.summary_epochs
    checks = [recipe_check(str(ref.value(cell, "recipe_hash")), json.loads(cell.recipe),
                           got_hash, got_recipe)]  # fmt: skip
    for var, label, metric in ACCURACY:
        label = label.format(k=k)
        want = float(ref.value(cell, var))
        have = float(got[{"oa_summary": "oa", "aa_summary": "aa", "kappa_summary": "kappa"}.get(var, var)])
        delta = have - want
        if identical:
            allowed, why = IDENTICAL, "identical expected (same platform)"
        else:
            sd, source = seed_spread(ref, cell, metric)
            if math.isfinite(sd) and sd > 0:
                allowed, why = (
                    SPREAD_SIGMAS * sd,
                    f"{SPREAD_SIGMAS:g} sigma of the seeds ({source}, sigma {sd:.4f})",
                )
            else:
                allowed, why = margin(ref, cell), "the verdict margin (no spread over seeds)"
        ok = math.isfinite(delta) and abs(delta) <= allowed
        if not math.isfinite(want) and not math.isfinite(have):
            ok = True
        text = f"{label}: reference {_fmt(want)}, reproduced {_fmt(have)} (Δ {delta:+.3g}; allowed ±{allowed:.3g}: {why})"
        checks.append(Check("accuracy", label, want, have, ok, text))
    want_mem, have_mem = float(ref.value(cell, "peak_allocated_summary")), float(got["peak_memory"])
    if math.isfinite(want_mem) and want_mem > 0 and math.isfinite(have_mem):
        rel = have_mem / want_mem - 1
        checks.append(
            Check(
                "memory", "peak memory of the run", want_mem, have_mem, abs(rel) <= MEMORY_REL,
                f"peak memory of the run: reference {want_mem / 2**20:.2f} MiB, reproduced {have_mem / 2**20:.2f} MiB "
                f"({100 * rel:+.2f} %; allowed ±{100 * MEMORY_REL:g} %)",
            )
        )  # fmt: skip
    return checks


def probe_checks(
    ref: Reference, cell: Cell, measured: tuple[xr.Dataset, xr.Dataset], *, timing: bool, cores: int
) -> list[Check]:
    assert ref.memory is not None and ref.throughput is not None
    bands = int(ref.value(cell, "bands"))
    mem_new, thr_new = measured
    want = memory_ratio(ref.memory, cell, bands)
    have = memory_ratio(mem_new, cell, bands)
    rel = have / want - 1 if want > 0 else math.nan
    checks = [
        Check(
            "memory", "memory vs tp (probe)", want, have, math.isfinite(rel) and abs(rel) <= MEMORY_REL,
            f"memory per rank vs tp (probe, fullest rank): reference {want:.4f}, reproduced {have:.4f} "
            f"({100 * rel:+.2f} %; allowed ±{100 * MEMORY_REL:g} %)",
        )
    ]  # fmt: skip
    med, lo, hi, note = throughput_ratio(ref.throughput, cell, bands)
    new_med, _, _, _ = throughput_ratio(thr_new, cell, bands)
    width = hi - lo
    a, b = lo - width, hi + width
    threads = cell.threads_per_rank
    here_over = cell.P * threads > cores
    inside = math.isfinite(new_med) and a <= new_med <= b
    text = (
        f"timing: throughput vs tp (probe, interleaved median): reproduced {new_med:.3f}; reference {med:.3f} "
        f"[{lo:.3f}, {hi:.3f}], accepted [{a:.3f}, {b:.3f}] (the range widened by its width)"
    )
    if not timing:
        checks.append(
            Check("timing", "throughput vs tp", med, new_med, None, text + ": not judged (--no-timing)")
        )
    elif note or here_over:
        why = note or f"oversubscribed here: {cell.P} ranks x {threads} threads on {cores} cores"
        checks.append(Check("timing", "throughput vs tp", med, new_med, None, f"{text}: not judged ({why})"))
    else:
        checks.append(Check("timing", "throughput vs tp", med, new_med, inside, text))
    return checks


# --- the command --------------------------------------------------------------------------------------------------
def _say(line: str) -> None:
    print(line, flush=True)


def _minutes(s: float) -> str:
    return f"{s / 60:.1f} min"


def check_cells(
    ref: Reference,
    picks: Sequence[Pick],
    given: Mapping[str, Path],
    work: Path,
    *,
    identical: bool,
    timing: bool,
) -> list[dict[str, Any]]:
    """Retrain and re-measure every pick in ``work``, print a progress line and the checks per cell; the cells'
    results (verdict, seconds, checks)."""
    scenes = {d: scene_for(ref, d, given, work, _say) for d in sorted({p.cell.dataset for p in picks})}
    probes: dict[tuple[str, int, int], tuple[xr.Dataset, xr.Dataset] | str] = {}
    results = []
    for k, p in enumerate(picks, 1):
        c, at = p.cell, f"[{k}/{len(picks)}] {p.cell.label}"
        _say(
            f"{at}: training {int(ref.value(c, 'steps'))} steps on {c.ranks} rank(s), seed "
            f"{c.seed} (est. {_minutes(p.train_s)}) ..."
        )
        t_cell = time.monotonic()
        record, log = retrain(ref, c, scenes[c.dataset], work)
        checks = (
            accuracy_checks(ref, c, record, identical)
            if record is not None
            else [
                Check(
                    "run", "training", None, None, False, f"training failed: {rebuild.tail(log)}; log {log}"
                )
            ]
        )
        checks += _probe_checks(ref, p, work, probes, at, timing) if p.probe else [_probe_note(p)]
        bad = [ch for ch in checks if ch.ok is False]
        verdict = (
            Reproduction.FAILED
            if record is None
            else Reproduction.DIFFERS
            if bad
            else Reproduction.REPRODUCED
        )
        took = time.monotonic() - t_cell
        _say(
            f"{at}: {verdict} in {_minutes(took)}" + (": " + "; ".join(ch.text for ch in bad) if bad else "")
        )
        for ch in checks:
            if ch.ok is not False:
                _say(f"    {ch.text}")
        results.append(
            {
                "cell": c.label,
                "plan": c.plan, "P": c.P, "g": c.g, "protocol": c.protocol, "partition": c.partition,
                "seed": c.seed, "N": c.N,
                "control": c.control, "verdict": verdict, "seconds": round(took, 1),
                "estimated_seconds": round(p.train_s + p.probe_s, 1), "checks": [ch.as_dict() for ch in checks],
            }
        )  # fmt: skip
    return results


def _probe_checks(
    ref: Reference,
    p: Pick,
    work: Path,
    probes: dict[tuple[str, int, int], tuple[xr.Dataset, xr.Dataset] | str],
    at: str,
    timing: bool,
) -> list[Check]:
    """The pick's memory and timing checks against the probe re-measured at its (plan, P, g), once per such point
    (``probes`` keeps them)."""
    c = p.cell
    if c.probe_key not in probes:
        _say(f"{at}: re-measuring memory and throughput vs tp at P = {c.P}, g = {c.g} ...")
        probes[c.probe_key] = remeasure_probe(ref, c, work)
    measured = probes[c.probe_key]
    if isinstance(measured, str):
        return [Check("memory", "probe", None, None, False, measured)]
    return probe_checks(ref, c, measured, timing=timing, cores=os.cpu_count() or 1)


def _probe_note(p: Pick) -> Check:
    """Why a pick's memory and throughput are not re-measured (not judged)."""
    if p.probe_skipped:
        why = f"memory and throughput not re-measured: {p.probe_skipped}"
    elif p.cell.plan == "tp":
        why = "memory and throughput vs tp: tp is the reference of the ratios"
    else:
        why = "memory and throughput vs tp: not in the reference's probe"
    return Check("memory", "probe", None, None, None, why)


def run_spot_check(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    ref = load_reference(Path(args.reference) if args.reference else Path("results/reference") / args.run)
    seed, budget_s = int(args.seed), float(args.budget_min) * 60
    if budget_s <= 0:
        raise ReproduceError("--budget-min must be positive")
    _say(
        f"hsitp audit reproduce: {ref.path} (run {ref.run}: {len(ref.cells)} runs, collected "
        f"{ref.manifest.get('collected_utc', '?')}); auditor seed {seed}, budget {args.budget_min:g} min"
    )
    from hsitp.publish.reference import not_as_collected

    edited = not_as_collected(ref.path, ref.manifest)
    if edited:
        _say(f"note: not as collected (sha256 differs from manifest.json): {', '.join(edited)}")
    identical, platform_line = platform_comparison(ref.manifest)
    rule = (
        f"accuracy must be identical (|Δ| ≤ {IDENTICAL:g})"
        if identical
        else f"accuracy within {SPREAD_SIGMAS:g} sigma of the cell's seeds (the verdict margin for one seed)"
    )
    _say(f"platform: {platform_line}: {rule}")
    given = _given_data(args)
    picks, est_s = _pick(ref, args, seed, budget_s, _scene_seconds(ref, given))
    if args.dry_run:
        _say_dry_run(ref, picks)
        return 0
    rebuild.snakefile()  # a pip-installed package has no Snakefile: said in one line before anything is built
    keep = args.work is not None
    work = Path(args.work) if keep else Path(tempfile.mkdtemp(prefix="hsitp-reproduce-"))
    work.mkdir(parents=True, exist_ok=True)
    _say(f"work folder: {work}{'' if keep else ' (removed at the end)'}")
    try:
        results = check_cells(ref, picks, given, work, identical=identical, timing=not args.no_timing)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    good = sum(r["verdict"] == Reproduction.REPRODUCED for r in results)
    wall = time.monotonic() - t0
    if args.out:
        _write_report(args.out, {
            "reference": str(ref.path), "run": ref.run, "seed": seed, "budget_min": args.budget_min,
            "platform": {"identical_expected": identical, "line": platform_line},
            "estimated_seconds": round(est_s, 1), "wall_seconds": round(wall, 1),
            "picked": [p.cell.label for p in picks], "cells": results, "reproduced": good, "checked": len(results),
        })  # fmt: skip
    _say(f"wall time {_minutes(wall)} (estimated {_minutes(est_s)})")
    _say(f"{good} of {len(results)} cells reproduced")
    return 0 if good == len(results) else 1


def _pick(
    ref: Reference, args: argparse.Namespace, seed: int, budget_s: float, fixed_s: float
) -> tuple[list[Pick], float]:
    """The cells the seed picks within the budget, said with the estimate; ReproduceError when none fits."""
    picks = pick_cells(ref, seed, budget_s, fixed_s)
    if not picks:
        raise ReproduceError(
            f"a budget of {args.budget_min:g} min fits no cell: the cheapest needs "
            f"{_minutes(min(train_estimate(ref, c)[0] for c in ref.cells) + fixed_s)} (its training{' and the scene' if fixed_s else ''}); "
            "raise --budget-min"
        )
    train_s = sum(p.train_s for p in picks)
    probe_s = sum(p.probe_s for p in picks)
    n_probe = sum(1 for p in picks if p.probe_s > 0)
    _say(
        f"picked {len(picks)} of {len(ref.cells)} cells (seed {seed}, canonical order permuted by "
        f"numpy.random.default_rng({seed}), taken while the estimate fits): "
        + ", ".join(p.cell.label for p in picks)
    )
    est_s = fixed_s + train_s + probe_s
    _say(
        f"estimate: {_minutes(est_s)} of the {args.budget_min:g} min budget ({len(picks)} training(s) "
        f"{_minutes(train_s)}, {n_probe} probe re-measurement(s) {_minutes(probe_s)}"
        + (f", the scene {_minutes(fixed_s)}" if fixed_s else "")
        + ")"
    )
    return picks, est_s


def _given_data(args: argparse.Namespace) -> dict[str, Path]:
    """The prepared files given with --data, by scene name."""
    from hsitp.contracts import dataset_name

    return {dataset_name(d): Path(d) for d in args.data or []}


def _scene_seconds(ref: Reference, given: Mapping[str, Path]) -> float:
    """Seconds estimated to prepare the scenes neither given nor in results/RUN/data (their prepare jobs' wall
    times in the reference); ReproduceError for a scene the reference records no way to prepare."""
    fixed_s = 0.0
    for d in sorted({c.dataset for c in ref.cells}):
        if d not in given and not (Path("results") / ref.run / "data" / f"{d}.nc").is_file():
            entry = ref.manifest.get("scenes", {}).get(d) or {}
            if not entry.get("prepare_config"):
                raise ReproduceError(
                    f"the reference records no way to prepare {d!r} (not a registry scene): give --data PATH"
                )
            s = entry.get("prepare_wall_s")
            fixed_s += float(s) + START_S if s else PREPARE_FALLBACK_S
    return fixed_s


def _say_dry_run(ref: Reference, picks: Sequence[Pick]) -> None:
    """What a dry run would do: each picked cell's steps and estimates."""
    for p in picks:
        _say(
            f"  {p.cell.label}: training {int(ref.value(p.cell, 'steps'))} steps, est. {_minutes(p.train_s)} "
            f"({p.train_from})"
            + (f"; probe est. {_minutes(p.probe_s)}" if p.probe_s else "")
            + (f"; {p.probe_skipped}" if p.probe_skipped else "")
        )
    _say(f"dry run: nothing trained ({len(picks)} cells would be)")


def _write_report(out: str | os.PathLike[str], report: dict[str, Any]) -> None:
    """The spot check's JSON report, this machine's platform added."""
    from hsitp.io import atomic_write_text
    from hsitp.publish.reference import platform_now

    report["platform"]["here"] = platform_now()
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    _say(f"report: {out}")


def register(asub: argparse._SubParsersAction) -> None:
    """``hsitp audit reproduce`` (called from hsitp.audit.commands.register)."""
    p = asub.add_parser(
        "reproduce",
        help="spot check of a reported run: cells picked at random from the auditor's seed within a time budget, "
        "retrained with the recorded recipe, memory and throughput re-measured; exit 1 unless all reproduced",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--reference", type=Path, help="reference folder, e.g. results/reference/cpu-fair")
    where.add_argument("--run", help="the run's name: --reference results/reference/RUN")
    p.add_argument("--seed", type=int, required=True, help="the auditor's seed: it alone picks the cells")
    p.add_argument(
        "--budget-min", type=float, required=True, help="minutes the retraining may take (estimated)"
    )
    p.add_argument("--out", type=Path, help="JSON report of every cell and check")
    p.add_argument("--work", type=Path, help="work folder, kept (default: a temporary one, removed)")
    p.add_argument(
        "--data",
        action="append",
        help="a prepared scene (results/RUN/data/DATASET.nc); default: the run's own when present, else prepared "
        "with the reference's data settings; its content must equal the reference's",
    )
    p.add_argument(
        "--no-timing",
        action="store_true",
        help="show the throughput ratio vs tp without judging it (a loaded machine)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the picked cells and the estimate; train nothing"
    )
    p.set_defaults(func=run_spot_check)
