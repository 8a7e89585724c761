"""``hsitp report reference --run-dir results/RUN --out results/reference/RUN``: the small files that carry every
number a run reports, collected for committing (the tables of the docs and the audit read them, and a clone
can check a rerun against them).

What the folder holds (a few MB for the headline run; no checkpoint, no scene cube, no prediction map):

- ``train/summary.nc`` and ``train/control_summary.nc`` (when the run has it), as the run wrote them: the verdict
  table, per cell mean and spread over seeds, time to accuracy;
- ``train/runs.nc`` (kind ``reference_runs``): one row per training record (``train/DATASET/*.nc`` and the untuned
  control's ``train/DATASET/control/*.nc``; the equivalence checks are not reported numbers): the cell (plan, P,
  g, protocol, partition index, seed, N, control), the recipe (JSON and hash) and what else ``hsitp train`` needs to train it again
  (steps, evaluation cadence, ranks launched, threads, crop), the last-``summary_epochs`` mean and the final
  epoch's OA / AA / kappa (``hsitp.train.summary.record_numbers``: the summary's own definitions), the test OA,
  validation OA and loss curves, tokens/s, step time and peak memory, the job's wall time (Snakemake's benchmark
  file, NaN without one) and each record's provenance (torch version, CPU model, commit, config hash, sha256);
- ``tune/DATASET/*.nc``: the tuning studies (every trial, the expected-best curve), as written;
- ``probe/memory.nc`` and ``probe/throughput.nc``: memory per rank and the interleaved throughput ratio vs tp with
  its [min, max] over rounds, as written;
- ``manifest.json``: every file with its size and sha256, the collecting checkout's commit and package versions,
  the CPU (model, vendor, SIMD flags, torch's CPU capability) and load average at collection, the records' own
  commits, versions and config hashes, the prepared scene (content sha256 and how to prepare it again), and the
  probe's and data stage's wall times (what ``hsitp audit reproduce`` estimates its budget from).

Every file is written atomically (``hsitp.io``); files a previous collection listed in its manifest and this one
does not produce are removed, nothing else in ``--out`` is touched (``results/reference/smoke`` holds other files).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import xarray as xr

from hsitp.analysis.labels import attr_json
from hsitp.contracts import DATASET, REFERENCE_RUNS, TRAIN, TUNE_STUDY
from hsitp.errors import HsitpError
from hsitp.io import (
    atomic_write,
    atomic_write_text,
    config_hash,
    cpu_model,
    git_commit,
    package_versions,
    provenance,
    read_netcdf,
    read_provenance,
    sha256_file,
    write_netcdf,
)

MANIFEST = "manifest.json"
RUNS_FILE = "train/runs.nc"
AS_IS = ("train/summary.nc", "train/control_summary.nc", "probe/memory.nc", "probe/throughput.nc")
SIZE_WARNING = 8 * 2**20  # a reference folder is meant to stay a few MB
# /proc/cpuinfo flags that select numerical kernels (SIMD widths, FMA, dot-product and matrix extensions): the
# "instruction set" a bit-for-bit comparison needs equal. Others (hypervisor, tsc, ...) do not change a number.
SIMD_FLAG = re.compile(r"^(sse|ssse|avx|fma|f16c|amx|vnni|asimd|neon|sve|fp16|bf16|dotprod|i8mm)")


class ReferenceError(HsitpError):
    """A run folder that cannot give a reference (names the file and what is missing)."""


# --- the platform: what an identical rerun needs equal -----------------------------------------------------------
class TorchPlatform(TypedDict):
    torch: str  # torch's version, or absent
    torch_cpu_capability: str  # the CPU capability torch's kernels dispatch to (AVX2, AVX512, ...)


class Platform(TorchPlatform):
    """A machine's platform as a reference's manifest records it (``collected_by``, ``platform``)."""

    cpu_model: str
    cpu_vendor: str
    simd_flags: list[str]  # sorted


def torch_platform() -> TorchPlatform:
    """torch's version and the CPU capability its kernels dispatch to (AVX2, AVX512, ...)."""
    try:
        import torch

        cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: "unknown")()
        return {"torch": str(torch.__version__), "torch_cpu_capability": str(cap)}
    except ImportError:
        return {"torch": "absent", "torch_cpu_capability": "unknown"}


def platform_now() -> Platform:
    """The platform of this process: torch version and CPU capability, and this machine's CPU model, vendor and
    SIMD flags (sorted), from /proc/cpuinfo (empty where absent)."""
    vendor, flags = "", []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            key = key.strip()
            if key == "vendor_id" and not vendor:
                vendor = val.strip()
            elif key in ("flags", "Features") and not flags:
                flags = val.split()
    except OSError:
        pass
    return {
        **torch_platform(),
        "cpu_model": cpu_model(),
        "cpu_vendor": vendor or "unknown",
        "simd_flags": sorted({f for f in flags if SIMD_FLAG.match(f)}),
    }


# --- the prepared scene ------------------------------------------------------------------------------------------
def scene_content_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 over every data variable of a prepared scene (name, dtype, shape and bytes, in name order): equal
    for equal arrays whatever the file's time stamps and provenance (the file's own sha256 is not). A file with one
    partition per protocol (``data.partition.draws`` 1) hashes its ``partition`` without the partition_index
    dimension: the same arrays as a scene of one draw had before that dimension, whose hash the committed
    references' manifests carry (cpu-fair's)."""
    h = hashlib.sha256()
    ds = DATASET.read(path, load=False)
    try:
        for var in sorted(map(str, ds.data_vars)):
            values = ds[var]
            if var == "partition" and values.sizes.get("partition_index") == 1:
                values = values.isel(partition_index=0)
            arr = np.ascontiguousarray(values.values)
            h.update(f"{var}|{arr.dtype.str}|{arr.shape}|".encode())
            h.update(arr.tobytes())
    finally:
        ds.close()
    return h.hexdigest()


def scene_entry(path: Path) -> dict[str, Any]:
    """What a spot check needs of a prepared scene: its content hash, and the data stage's settings that made it
    (read back from the file's own attributes: seed, accuracy protocols and partition settings, clip quantiles, PCA,
    source), as ``prepare_config`` for ``hsitp data fetch`` / ``hsitp data prepare --config-json``."""
    ds = DATASET.read(path, load=False)
    try:
        attrs = dict(ds.attrs)
    finally:
        ds.close()
    name = str(attrs.get("dataset", path.stem))
    data: dict[str, Any] = {}
    partition = dict(attr_json(attrs, "partition_settings", {}) or {})
    protocols = attr_json(attrs, "partition_protocols", None)
    if protocols:
        partition["protocols"] = list(protocols)
    if partition:
        data["partition"] = partition
    quant = re.search(r"\[([-+0-9.e]+), ([-+0-9.e]+)\] quantiles", str(attrs.get("normalisation", "")))
    if quant:
        data["clip_quantiles"] = [float(quant.group(1)), float(quant.group(2))]
    pca = str(attrs.get("pca", ""))
    if pca == "off":
        data["pca_components"] = None
    elif (k := re.match(r"(\d+) components", pca)) is not None:
        data["pca_components"] = int(k.group(1))
    if attrs.get("source"):
        data["sources"] = {name: [str(attrs["source"])]}
    cfg: dict[str, Any] = {"data": data}
    if "seed" in attrs:
        cfg["seed"] = int(attrs["seed"])
    from hsitp.data import registry

    return {
        "dataset": name,
        "file": str(path),
        "content_sha256": scene_content_sha256(path),
        "file_sha256": sha256_file(path),
        # None: not a registry scene (a test's synthetic one), which only --data can give
        "prepare_config": cfg if name in registry.names() else None,
        "registry_verified": int(attrs.get("registry_verified", 0)),
    }


# --- Snakemake's benchmark files: wall time per job ---------------------------------------------------------------
def benchmark_seconds(path: Path) -> float:
    """Wall seconds (column ``s``) of a Snakemake benchmark file; NaN when absent or unreadable."""
    try:
        with path.open(newline="") as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        return float(row["s"])
    except (OSError, StopIteration, KeyError, ValueError):
        return math.nan


# --- train/runs.nc ------------------------------------------------------------------------------------------------
def training_records(run_dir: Path) -> list[tuple[Path, bool]]:
    """(record, control?) of every training record of the run, in name order: train/DATASET/*.nc, then the
    untuned control's train/DATASET/control/*.nc (not the equivalence checks of train/DATASET/check/)."""
    train = run_dir / "train"
    own = sorted(p for p in train.glob("*/*.nc") if p.is_file())
    control = sorted(p for p in train.glob("*/control/*.nc") if p.is_file())
    return [(p, False) for p in own] + [(p, True) for p in control]


_STR = "str"
# the cell of each row: name -> (dtype, units or _STR, long_name)
RUN_COORDS: dict[str, tuple[type, str, str]] = {
    "name": (object, _STR, "the record's run name"),
    "dataset": (object, _STR, "scene"),
    "plan": (object, _STR, "parallel plan"),
    "P": (np.int32, "1", "TP size P"),
    "g": (np.int32, "1", "D-CHAG groups per rank g (1 for the other plans)"),
    "protocol": (object, _STR, "accuracy protocol"),
    "seed": (np.int32, "1", "training seed"),
    "partition_index": (np.int32, "1", "which of the protocol's partitions (data.partition.draws)"),
    "N": (np.int32, "1", "spatial tokens per crop N"),
    "control": (np.int8, "1", "1: the untuned control (a D-CHAG plan on tp's tuned recipe, train/DATASET/control/), "
                "0: the plan's own recipe"),
}  # fmt: skip
# name -> (dims, units or _STR, long_name)
RUN_VARS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "recipe": (("run",), _STR, "the record's training recipe (hsitp.train.plan.recipe: every train key that shapes "
               "the weights, and the master seed), JSON"),
    "recipe_hash": (("run",), _STR, "12 hex digits of the recipe's sha256 (hsitp.train.plan.recipe_hash)"),
    "epochs": (("run",), "1", "epochs trained"),
    "steps_per_epoch": (("run",), "1", "optimizer steps per epoch"),
    "steps": (("run",), "1", "optimizer steps trained (epochs x steps_per_epoch)"),
    "summary_epochs": (("run",), "1", "epochs the *_summary numbers average (train.summary_epochs)"),
    "eval_every": (("run",), "1", "the test set scored every this-many epochs (train.eval_every)"),
    "ranks": (("run",), "1", "processes launched: P, or 1 for the single-process equivalent (train.equivalent)"),
    "threads_per_rank": (("run",), "1", "torch threads per rank (train.threads_per_rank)"),
    "patch": (("run",), "1", "patch edge of the crop (train.crops)"),
    "bands": (("run",), "1", "bands L of the model's input"),
    "stopped_after_epochs": (("run",), "1", "epoch the run stopped after (0: ran all its epochs)"),
    "resumed": (("run",), "1", "times the run resumed from a checkpoint"),
    "oa_summary": (("run",), "1", "test OA, mean over the record's last summary_epochs epochs (§7.4)"),
    "aa_summary": (("run",), "1", "test AA, mean over the record's last summary_epochs epochs"),
    "kappa_summary": (("run",), "1", "test kappa, mean over the record's last summary_epochs epochs"),
    "oa_final": (("run",), "1", "test OA after the last epoch"),
    "aa_final": (("run",), "1", "test AA after the last epoch"),
    "kappa_final": (("run",), "1", "test kappa after the last epoch"),
    "tokens_per_s_summary": (("run",), "1/s", "training tokens/s, mean over the last summary_epochs (comparable "
                             "within one record only)"),
    "step_time_summary": (("run",), "s", "mean optimizer-step time over the last summary_epochs, slowest rank"),
    "peak_allocated_summary": (("run",), "bytes", "peak memory of the tracked step, largest rank, mean over the "
                               "last summary_epochs (one process's under train.equivalent)"),
    "wall_s": (("run",), "s", "the training job's wall time (Snakemake benchmark file: the last attempt's "
               "when the job was resumed; NaN without one)"),
    "oa": (("run", "epoch"), "1", "test OA per epoch (NaN where not evaluated or past the run's epochs)"),
    "val_oa": (("run", "epoch"), "1", "validation OA per epoch (NaN where not evaluated or no validation pixels)"),
    "loss": (("run", "epoch"), "1", "mean training loss per epoch (NaN past the run's epochs)"),
    "device": (("run",), _STR, "the record's device line (CPU model, threads per rank, backend)"),
    "backend": (("run",), _STR, "process-group backend (none for one process)"),
    "attention_kernel": (("run",), _STR, "the single-query attentions' kernel, exact or sdpa"),
    "torch_version": (("run",), _STR, "torch version of the training process (provenance)"),
    "cpu_model": (("run",), _STR, "CPU model of the training machine (provenance)"),
    "git_commit": (("run",), _STR, "commit of the code that trained (provenance)"),
    "config_hash": (("run",), _STR, "sha256 of the config the training job read (provenance)"),
    "created_utc": (("run",), _STR, "when the record was written (provenance)"),
    "record_sha256": (("run",), _STR, "sha256 of the record file this row was read from"),
}  # fmt: skip


def _row(path: Path, control: bool, logs_dir: Path | None) -> dict[str, Any]:
    from hsitp.train.summary import record_numbers

    ds = TRAIN.read(path, load=False)
    try:
        a = dict(ds.attrs)
        nums = record_numbers(ds)
        prov = read_provenance(ds)
        model = attr_json(a, "model", {}) or {}
        curves = {
            v: np.asarray(ds[v].values, dtype=np.float64) if v in ds else None
            for v in ("oa", "val_oa", "loss")
        }
        step_time = (
            float(np.nanmax(ds["step_time_summary"].values)) if "step_time_summary" in ds else math.nan
        )
        epochs_axis = np.asarray(ds["epoch"].values, dtype=np.int64)
    finally:
        ds.close()
    recipe = attr_json(a, "recipe", {}) or {}
    epochs = int(a.get("epochs", len(epochs_axis)))
    spe = int(a.get("steps_per_epoch", recipe.get("train", {}).get("steps_per_epoch", 0)))
    dataset = str(a.get("dataset", path.parent.parent.name if control else path.parent.name))
    return {
        "name": path.stem,
        "dataset": dataset,
        "plan": str(a["plan"]),
        "P": int(a["P"]),
        "g": int(a.get("g", 1)),
        "protocol": str(a["protocol"]),
        "seed": int(a["seed"]),
        "partition_index": int(a["partition_index"]),
        "N": int(a.get("tokens", model.get("n_tokens", 0))),
        "control": int(control),
        "recipe": json.dumps(recipe, sort_keys=True),
        "recipe_hash": str(a.get("recipe_hash", "")),
        "epochs": epochs,
        "steps_per_epoch": spe,
        "steps": epochs * spe,
        "summary_epochs": int(a.get("summary_epochs", nums["window"])),
        "eval_every": int(a.get("eval_every", 1)),
        "ranks": int(a.get("ranks", a["P"])),
        "threads_per_rank": int(a.get("threads_per_rank", 1)),
        "patch": int(model.get("patch", 0)),
        "bands": int(model.get("bands", 0)),
        "stopped_after_epochs": int(a.get("stopped_after_epochs", 0)),
        "resumed": len(attr_json(a, "resumed_at_epochs", []) or []),
        **{f"{m}_summary": nums[m] for m in ("oa", "aa", "kappa")},
        **{f"{m}_final": nums[f"{m}_final"] for m in ("oa", "aa", "kappa")},
        "tokens_per_s_summary": nums["tokens_per_s"],
        "step_time_summary": step_time,
        "peak_allocated_summary": nums["peak_memory"],
        "curves": (epochs_axis, curves),
        **_machine_columns(path, a, prov, logs_dir, control, dataset),
    }


def _machine_columns(
    path: Path, a: dict[str, Any], prov: dict[str, Any], logs_dir: Path | None, control: bool, dataset: str
) -> dict[str, Any]:
    """Where and how a record ran: its rule's wall time (Snakemake's benchmark file under ``logs_dir``; NaN
    without one), device, kernel, platform and provenance, and the record's own sha256."""
    rule = "train_control" if control else "train"
    tsv = f"benchmarks/{rule}/{dataset}/{path.stem}.tsv"
    wall = benchmark_seconds(logs_dir / tsv) if logs_dir is not None else math.nan
    return {
        "wall_s": wall,
        "device": str(a.get("device", "")),
        "backend": str(a.get("backend", "")),
        "attention_kernel": str(a["attention_kernel"]),
        "torch_version": str(prov.get("packages", {}).get("torch", "unknown")),
        "cpu_model": str(prov.get("device", {}).get("cpu", "unknown")),
        "git_commit": str(prov.get("git_commit", "unknown")),
        "config_hash": str(prov.get("config_hash", "")),
        "created_utc": str(prov.get("created_utc", "")),
        "record_sha256": sha256_file(path),
    }


def _attrs(units: str, long_name: str) -> dict[str, str]:
    return {"long_name": long_name} if units == _STR else {"units": units, "long_name": long_name}


def runs_dataset(records: Sequence[tuple[Path, bool]], logs_dir: Path | None = None) -> xr.Dataset:
    """``train/runs.nc``: one row per training record (see the module's docstring)."""
    if not records:
        raise ReferenceError("no training record to collect (train/DATASET/*.nc)")
    rows = [_row(p, c, logs_dir) for p, c in records]
    n_epoch = max(int(r["curves"][0].max()) if len(r["curves"][0]) else 0 for r in rows)
    epoch = np.arange(1, n_epoch + 1, dtype=np.int32)
    coords: dict[str, Any] = {
        "run": ("run", np.arange(len(rows), dtype=np.int32), {"units": "1", "long_name": "row (training record)"}),
        "epoch": ("epoch", epoch, {"units": "1", "long_name": "training epoch (1-based)"}),
        **{name: ("run", np.array([r[name] for r in rows], dtype=dtype), _attrs(units, long_name))
           for name, (dtype, units, long_name) in RUN_COORDS.items()},
    }  # fmt: skip
    data: dict[str, Any] = {}
    for name, (dims, units, long_name) in RUN_VARS.items():
        attrs = _attrs(units, long_name)
        if dims == ("run", "epoch"):
            arr = np.full((len(rows), n_epoch), np.nan)
            for i, r in enumerate(rows):
                axis, curves = r["curves"]
                if curves[name] is not None:
                    arr[i, axis - 1] = curves[name]
            data[name] = (dims, arr, attrs)
        elif units == _STR:
            data[name] = (dims, np.array([r[name] for r in rows], dtype=object), attrs)
        else:
            values = [r[name] for r in rows]
            dtype = np.float64 if any(isinstance(v, float) for v in values) else np.int64
            data[name] = (dims, np.array(values, dtype=dtype), attrs)
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        {
            "title": "hsitp reference: every training record of the run, one row each",
            "records": len(rows),
            "control_records": int(sum(r["control"] for r in rows)),
            "accuracy": "oa/aa/kappa_summary: the record's mean over its last summary_epochs epochs (§7.4), as "
            "hsitp.train.summary.record_numbers reads them; *_final: the last epoch's",
        }
    )
    return ds


# --- copying ------------------------------------------------------------------------------------------------------
def atomic_copy(src: Path, dst: Path) -> Path:
    """Copy ``src`` to ``dst`` atomically (:func:`hsitp.io.atomic_write`)."""
    return atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def _distinct(values: Iterable[Any]) -> list[Any]:
    return sorted({str(v) for v in values})


def _load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def collect(
    run_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    logs_dir: str | os.PathLike[str] | None = None,
    config_paths: Sequence[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Write the reference of ``run_dir`` into ``out``; returns the manifest (also written as manifest.json).

    ``logs_dir`` (default ``logs/RUN`` beside ``results/``) gives the jobs' wall times; ``config_paths`` (the run's
    YAML overlays, optional) are recorded as ``run_config.json`` with their merged config's hash."""
    run_dir, out = Path(run_dir), Path(out)
    if not run_dir.is_dir():
        raise ReferenceError(f"report reference: {run_dir}: no such run folder")
    if out.resolve() == run_dir.resolve():
        raise ReferenceError("report reference: --out must not be the run folder itself")
    logs = Path(logs_dir) if logs_dir is not None else run_dir.parent.parent / "logs" / run_dir.name
    logs_found = logs.is_dir()
    runs, written = _copy_files(run_dir, out, logs if logs_found else None)
    run_config: dict[str, Any] | None = None
    if config_paths:
        from hsitp.config import load_config

        run_config = load_config(list(config_paths))
        atomic_write_text(out / "run_config.json", json.dumps(run_config, indent=1, sort_keys=True) + "\n")
        written.append("run_config.json")
    scenes, probe_wall = _scenes_and_walls(run_dir, runs, logs if logs_found else None)
    here = platform_now()
    manifest: dict[str, Any] = {
        "run": run_dir.name,
        "run_dir": str(run_dir),
        "collected_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "collected_by": {
            "git_commit": git_commit(),
            "packages": package_versions(),
            **here,
            "cores": os.cpu_count(),
            "load_average_1_5_15_min": _load_average(),
        },
        "records": {
            "count": int(runs.sizes["run"]),
            "control": int(runs["control"].sum()),
            "git_commits": _distinct(runs["git_commit"].values),
            "torch_versions": _distinct(runs["torch_version"].values),
            "cpu_models": _distinct(runs["cpu_model"].values),
            "config_hashes": _distinct(runs["config_hash"].values),
        },
        "run_config_hash": config_hash(run_config) if run_config is not None else None,
        "platform": _records_platform(runs, here),
        "scenes": scenes,
        "probe_wall_s": probe_wall,
        "logs_dir": str(logs) if logs_found else None,
        **_file_list(out, written),
    }
    _remove_stale(out, set(written))
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def _copy_files(run_dir: Path, out: Path, logs: Path | None) -> tuple[xr.Dataset, list[str]]:
    """The runs table written into ``out`` and the files kept as they are copied there: the runs, and the paths
    written (relative to ``out``)."""
    written: list[str] = []
    records = training_records(run_dir)
    if not records:
        raise ReferenceError(
            f"report reference: {run_dir}/train holds no training record (train/DATASET/*.nc): nothing to collect"
        )
    runs = runs_dataset(records, logs)
    inputs = {str(p): p for p, _ in records}
    write_netcdf(runs, out / RUNS_FILE, kind=REFERENCE_RUNS.kind, prov=provenance({}, inputs=inputs))
    written.append(RUNS_FILE)
    for rel in AS_IS:
        src = run_dir / rel
        if src.is_file():
            read_netcdf(src, load=False).close()  # a readable hsitp file, or one line naming it
            atomic_copy(src, out / rel)
            written.append(rel)
    for study in sorted((run_dir / "tune").glob("*/*.nc")):
        rel = study.relative_to(run_dir).as_posix()
        TUNE_STUDY.read(study, load=False).close()
        atomic_copy(study, out / rel)
        written.append(rel)
    return runs, written


def _scenes_and_walls(
    run_dir: Path, runs: xr.Dataset, logs: Path | None
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Each trained scene's entry (with its prepare job's wall time when the logs are there) and the probe jobs'
    wall times by P."""
    scenes = {}
    for dataset in _distinct(runs["dataset"].values):
        path = run_dir / "data" / f"{dataset}.nc"
        scenes[dataset] = scene_entry(path) if path.is_file() else {"dataset": dataset, "file": None}
    probe_wall = {}
    if logs is not None:
        for tsv in sorted((logs / "benchmarks" / "probe_run").glob("P*.tsv")):
            if math.isfinite(s := benchmark_seconds(tsv)):
                probe_wall[tsv.stem[1:]] = s
        for dataset, entry in scenes.items():
            s = benchmark_seconds(logs / "benchmarks" / "data_prepare" / f"{dataset}.tsv")
            entry["prepare_wall_s"] = s if math.isfinite(s) else None
    return scenes, probe_wall


def _records_platform(runs: xr.Dataset, here: Platform) -> dict[str, Any]:
    """The records' platform: their torch and CPU model when one, and the CPU's flags read on this machine."""
    torch_versions = _distinct(runs["torch_version"].values)
    cpu_models = _distinct(runs["cpu_model"].values)
    same_host = len(cpu_models) == 1 and cpu_models[0] == here["cpu_model"]
    same_torch = len(torch_versions) == 1 and torch_versions[0] == here["torch"]
    return {
        "torch": torch_versions[0] if len(torch_versions) == 1 else None,
        "cpu_model": cpu_models[0] if len(cpu_models) == 1 else None,
        # the records carry the CPU model, not its flags: those are read here, and kept only when this machine has
        # the records' CPU model (and torch, for torch's capability): else unknown, and a spot check elsewhere
        # compares within the seeds' spread instead of bit for bit
        "cpu_vendor": here["cpu_vendor"] if same_host else None,
        "simd_flags": here["simd_flags"] if same_host else None,
        "torch_cpu_capability": here["torch_cpu_capability"] if same_host and same_torch else None,
        "flags_from": "the collecting machine, whose CPU model is the records'"
        if same_host
        else "unknown (collected on another CPU model than the records')",
    }


def _file_list(out: Path, written: Sequence[str]) -> dict[str, Any]:
    """The manifest's ``files`` (bytes and SHA-256 of each written file) and their ``total_bytes``."""
    files = {rel: {"bytes": (out / rel).stat().st_size, "sha256": sha256_file(out / rel)} for rel in written}
    return {"files": files, "total_bytes": sum(f["bytes"] for f in files.values())}


def _remove_stale(out: Path, written: set[str]) -> None:
    """Delete what the previous manifest listed and this collection did not write (a study since removed)."""
    old = out / MANIFEST
    if not old.is_file():
        return
    try:
        listed = json.loads(old.read_text()).get("files", {})
    except ValueError:
        return
    for rel in listed:
        if rel not in written and ".." not in Path(rel).parts:
            (out / rel).unlink(missing_ok=True)


def read_manifest(reference: str | os.PathLike[str]) -> dict[str, Any]:
    """A reference folder's manifest.json (ReferenceError naming it when absent or not JSON)."""
    path = Path(reference) / MANIFEST
    if not path.is_file():
        raise ReferenceError(
            f"{reference}: no {MANIFEST}: not a reference written by `hsitp report reference --run-dir "
            f"results/RUN --out {reference}`"
        )
    try:
        return dict(json.loads(path.read_text()))
    except ValueError as exc:
        raise ReferenceError(f"{path}: not JSON ({exc})") from exc


def not_as_collected(reference: str | os.PathLike[str], manifest: Mapping[str, Any]) -> list[str]:
    """The files ``manifest`` lists whose bytes are not the ones it recorded (edited after collection), a missing
    one as ``REL (missing)``. Said by ``audit check`` and ``audit reproduce``, not refused: a reference is compared
    by value (results/reference/README.md)."""
    files = manifest.get("files")
    if not isinstance(files, Mapping):  # a bare list of files records no sha256
        return []
    out = []
    for rel, meta in files.items():
        path = Path(reference) / rel
        if not path.is_file():
            out.append(f"{rel} (missing)")
        elif isinstance(meta, Mapping) and "sha256" in meta and sha256_file(path) != meta["sha256"]:
            out.append(rel)
    return out


def describe_manifest(manifest: Mapping[str, Any], out: Path) -> str:
    """One line for the terminal: what the folder holds and its size."""
    files = manifest["files"]
    studies = sum(1 for f in files if f.startswith("tune/"))
    parts = [f"{manifest['records']['count']} runs ({manifest['records']['control']} control)"]
    parts += [f for f in ("train/summary.nc", "train/control_summary.nc") if f in files]
    parts.append(f"{studies} tuning studies")
    parts.append("probe memory + throughput" if "probe/memory.nc" in files else "no probe files")
    size = manifest["total_bytes"] / 2**20
    line = f"wrote {out}: {', '.join(parts)}, manifest.json ({len(files) + 1} files, {size:.2f} MiB)"
    if manifest["total_bytes"] > SIZE_WARNING:
        line += f"; larger than {SIZE_WARNING // 2**20} MiB: check what it holds"
    return line
