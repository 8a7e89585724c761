"""The ingredients ablation (``config/cpu-places-ablation.yaml``): one row per recipe ingredient, each the
baseline recipe plus that ingredient alone, trained on the same replicates as the baseline through the pipeline's
own ``hsitp train``, then reduced to one table of mean ΔOA vs the baseline with its paired interval and its cost.

    python -m hsitp.train.ingredients config/cpu-places-ablation.yaml                 # train what is missing
    python -m hsitp.train.ingredients config/cpu-places-ablation.yaml --table         # the table only
    python -m hsitp.train.ingredients config/cpu-places-ablation.yaml \\
        --overlay config/cpu-places-pilot.yaml                                        # the short pilot

A replicate is (partition, training seed). A partition is one draw of the accuracy protocol's train/test squares:
draw k of the prepared scene ``results/RUN/data/DATASET.nc`` (``data.partition.draws`` = the largest index + 1,
written by this runner when missing; draw 0 is the draw of a run of one, cpu-fair's), trained
with ``hsitp train --partition k``. Every row runs on every replicate, so ΔOA is paired by replicate: the draw's effect on OA
(16 pp of the SVM's across five block draws) cancels from the difference. Interval: the 95 % t interval
of the mean paired difference over replicates (:func:`hsitp.evaluate.verdict.paired_verdict`; none with one
replicate). OA is each record's §7.4 summary (mean of its last ``summary_epochs`` evaluations).

Cost: optimizer steps (fine-tuning plus pretraining) and wall time per run (one process, one thread, on a shared
machine: ratios to the baseline are paired by replicate but not interleaved, so they are rough). A row with
pretraining is transductive (it saw the test pixels' spectra, never their labels): its line says so.

The spec (:class:`AblationSpec`; a malformed one refused in one line naming each bad key) is not a pipeline
overlay: each row's config is built from it (:func:`row_config`). Records: results/RUN/train/DATASET/ROW/pK/NAME.nc
with a ``.wall.json`` beside; the table: results/RUN/ingredients.{nc,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import numpy as np
import xarray as xr
from pydantic import Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from hsitp.config import ConfigError, deep_merge, load_config, read_config_file
from hsitp.errors import HsitpError, one_line
from hsitp.markdown import markdown_table
from hsitp.outcomes import Accuracy
from hsitp.sections import Config
from hsitp.sections.base import RUN_NAME, Section, distinct, named, sized
from hsitp.train.plan import crop_patch, run_name
from hsitp.train.settings import TrainSettings

PartitionIndex = Annotated[int, Field(ge=0, strict=True)]


class IngredientsError(HsitpError, ValueError):
    """The ingredients spec is malformed or its records do not match it (names the key)."""


class Row(Section):
    """One row of the table: the baseline recipe plus one ingredient."""

    name: str = Field(pattern=RUN_NAME)
    """The row's folder under results/RUN/train/DATASET/ and its label in the table (letters, digits, _ and -)."""
    what: str = ""
    """What the row adds, in words: the table's `what` column."""
    train: dict[str, Any] = {}
    """The ingredient: train keys merged over the shared ones; the pipeline's schema validates the merged config
    (none for the first row, the baseline)."""


class AblationSpec(Section):
    """The ingredients ablation (``config/cpu-places-ablation.yaml``): not a pipeline overlay, the rows' configs are
    built from it."""

    base: distinct(str)  # type: ignore[valid-type]
    """Pipeline overlays every row starts from, in merge order (config/config.yaml first)."""
    run: str = Field(pattern=RUN_NAME)
    """The run: the prepared scene goes to results/RUN/data/, the records under results/RUN/train/, the table to
    results/RUN/ingredients.{nc,md}."""
    dataset: str = Field(pattern=RUN_NAME)
    """The registry scene every row trains on."""
    plan: named("plan")  # type: ignore[valid-type]
    """The parallel plan every row trains, as its single-process equivalent (--ranks 1)."""
    world_size: sized("world_size")  # type: ignore[valid-type]
    """The plan's parallel degree P: its architecture (the same at every P for tp) and its records' run name."""
    protocol: named("protocol")  # type: ignore[valid-type]
    """The accuracy protocol whose train/test partitions the rows train and score on."""
    partitions: distinct(PartitionIndex)  # type: ignore[valid-type]
    """Draws k of the protocol's partition (0: a one-draw run's); every row trains on each (x every seed)."""
    seeds: distinct(sized("seed"))  # type: ignore[valid-type]
    """Training seeds; a replicate is (partition, seed), and ΔOA is paired by replicate."""
    rows: tuple[Row, ...] = Field(min_length=1)
    """The rows in the order they train; the first is the baseline the others are compared with."""
    recipe: str | None = None
    """A tuning study (results/RUN/tune/DATASET/PLAN_PROTOCOL.nc) whose best trial's keys go under every row; it
    must be the study of `plan` under `protocol`. None: the base overlays' train keys."""
    train: dict[str, Any] = {}
    """Train keys every row shares (steps, evaluation cadence), over the recipe's, under each row's."""

    @field_validator("rows")
    @classmethod
    def _baseline_first(cls, rows: tuple[Row, ...]) -> tuple[Row, ...]:
        names = [r.name for r in rows]
        if len(set(names)) != len(names):
            raise ValueError(f"row names repeat: {sorted({n for n in names if names.count(n) > 1})}")
        if rows[0].train:
            raise ValueError(f"the first row ({rows[0].name}) is the baseline: it adds no `train` keys")
        return rows


class Job(NamedTuple):
    """One replicate of a row: the command that trains it and the record it writes."""

    row: str
    replicate: tuple[int, int]  # (partition, seed)
    record: Path
    cmd: tuple[str, ...]
    recipe_hash: str


def _problem(e: ErrorDetails) -> str:
    """One of pydantic's errors as 'key.path: what is wrong'."""
    where = ".".join(str(p) for p in e["loc"]) or "<top level>"
    if e["type"] == "extra_forbidden":
        model = Row if e["loc"][0] == "rows" else AblationSpec
        return f"{where}: unknown key (allowed: {', '.join(model.model_fields)})"
    return f"{where}: {e['msg'].removeprefix('Value error, ')}"


def read_spec(path: str | Path, overlays: Sequence[str | Path] = ()) -> AblationSpec:
    """The spec, with ``overlays`` merged over it (a pilot: fewer seeds and steps, its own run name);
    IngredientsError naming the file(s) and each malformed key on one line otherwise."""
    try:
        raw = read_config_file(path)
        for extra in overlays:
            raw = deep_merge(raw, read_config_file(extra))
    except ConfigError as exc:
        raise IngredientsError(str(exc)) from None
    try:
        return AblationSpec.model_validate(raw)
    except ValidationError as exc:
        files = " + ".join(str(p) for p in (path, *overlays))
        raise IngredientsError(f"{files}: " + "; ".join(_problem(e) for e in exc.errors())) from None


def partition_path(spec: AblationSpec) -> Path:
    """The prepared scene holding every partition of the spec (``data.partition.draws`` = the largest index + 1)."""
    return Path("results") / spec.run / "data" / f"{spec.dataset}.nc"


def prepare_partitions(spec: AblationSpec) -> None:
    """Prepare the scene once with K = max(partitions) + 1 draws per protocol (``hsitp data prepare``, the base
    overlays; partition k is the k-th seeded draw, the same whatever K: partition 0 is a one-draw run's)."""
    out = partition_path(spec)
    draws = max(spec.partitions) + 1
    if out.exists():
        from hsitp.contracts import DATASET

        ds = DATASET.read(out, load=False)
        try:
            have = ds.sizes["partition_index"]
        finally:
            ds.close()
        if have >= draws:
            return
    cmd = [sys.executable, "-m", "hsitp", "data", "prepare", spec.dataset, "--out", str(out)]
    for base in spec.base:
        cmd += ["--config", str(base)]
    cmd += ["--config-json", json.dumps({"data": {"partition": {"draws": draws}}})]
    if subprocess.call(cmd) != 0:
        raise IngredientsError(f"partitions: preparing {draws} partitions failed: {' '.join(cmd)}")


def row_config(spec: AblationSpec, row: Row) -> Config:
    """The full validated config of one row: base overlays, the study's recipe keys, the spec's shared keys,
    the row's ingredient."""
    train: dict[str, Any] = {}
    if spec.recipe:
        from hsitp.train.recipe import read_best, recipe_keys

        found = read_best(spec.recipe)
        if (found["plan"], found["protocol"]) != (spec.plan, spec.protocol):
            raise IngredientsError(
                f"recipe: {spec.recipe} is the study of {found['plan']} under {found['protocol']}, the spec "
                f"trains {spec.plan} under {spec.protocol}"
            )
        train = recipe_keys(found["best"])
    train = deep_merge(deep_merge(train, spec.train), row.train)
    try:
        return load_config([Path(p) for p in spec.base], {"run": spec.run, "train": train})
    except ConfigError as exc:
        raise IngredientsError(f"rows: {row.name}: {exc}") from None


def row_jobs(spec: AblationSpec, row: Row) -> list[Job]:
    """One job per replicate (partition, seed) of a row: its command line and record."""
    cfg = row_config(spec, row)
    settings = TrainSettings.from_config(cfg)
    tokens = settings.crops[0].tokens
    patch = crop_patch(settings, spec.dataset, tokens)
    out = []
    for k in spec.partitions:
        for seed in spec.seeds:
            name = run_name(spec.plan, tokens, spec.world_size, 1, spec.protocol, seed)
            rec = Path("results", spec.run, "train", spec.dataset, row.name, f"p{k}", f"{name}.nc")
            cmd = (
                sys.executable, "-m", "hsitp", "train", str(partition_path(spec)), "--partition", str(k),
                "--plan", spec.plan,
                "--tokens", str(tokens), "--patch", str(patch), "--world-size", str(spec.world_size), "--ranks", "1",
                "--protocol", spec.protocol, "--seed", str(seed), "--out", str(rec),
                "--config-json", json.dumps(cfg.as_json()),
            )  # fmt: skip
            out.append(Job(row.name, (k, seed), rec, cmd, settings.recipe_hash()))
    return out


def run_one(job: Job) -> None:
    """Train one missing record (``job.cmd``, one thread) and write its wall time beside it (``.wall.json``), its
    output to ``.log``; a record present is left alone (resumable), a failed run is reported and leaves no record."""
    rec = job.record
    if rec.exists():
        return
    rec.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.monotonic()
    with open(rec.with_suffix(".log"), "w") as log:
        code = subprocess.call(job.cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - t0
    if code != 0:
        print(f"FAILED ({code}): {rec} (log {rec.with_suffix('.log')})", flush=True)
        return
    rec.with_suffix(".wall.json").write_text(json.dumps({"wall_s": wall}))
    print(f"done {rec} in {wall:.0f} s", flush=True)


def train_rows(spec: AblationSpec, only: Sequence[str] | None = None, workers: int = 1) -> None:
    """Train every missing record, row by row (the baseline first), ``workers`` processes at a time (one thread
    each); every row's config is resolved (and a malformed one refused) before anything runs."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = [job for row in spec.rows if only is None or row.name in only for job in row_jobs(spec, row)]
    prepare_partitions(spec)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(run_one, jobs))


def _read(job: Job) -> dict[str, Any] | None:
    """A record's numbers: OA (§7.4 summary), validation OA (last epoch), steps, wall time, transductive."""
    from hsitp.contracts import TRAIN
    from hsitp.train.summary import record_numbers

    rec = job.record
    if not rec.exists():
        return None
    ds = TRAIN.read(rec)
    if ds.attrs.get("recipe_hash") != job.recipe_hash:
        raise IngredientsError(
            f"{rec} was trained under recipe {ds.attrs.get('recipe_hash')}, its row now resolves to "
            f"{job.recipe_hash}: the spec or its overlays changed; restore them or delete the row's records"
        )
    ingredients = json.loads(str(ds.attrs.get("ingredients", "{}")))
    pre = int((ingredients.get("pretrain") or {}).get("steps", 0))
    wall = rec.with_suffix(".wall.json")
    return {
        "oa": float(record_numbers(ds)["oa"]),
        "val_oa": float(ds["val_oa"].values[-1]),
        "steps": int(ds.attrs["epochs"]) * int(ds.attrs["steps_per_epoch"]) + pre,
        "wall_s": float(json.loads(wall.read_text())["wall_s"]) if wall.exists() else math.nan,
        "transductive": str(ds.attrs.get("transductive", "no")).startswith("yes"),
    }


def table(spec: AblationSpec) -> xr.Dataset:
    """Per row: replicates found, mean OA, mean ΔOA vs the baseline with its 95 % paired interval and verdict
    (margin train.verdict.margin), validation ΔOA, steps, wall time per run and its ratio to the baseline's."""
    from hsitp.evaluate.verdict import paired_verdict

    rows = spec.rows
    got = [{j.replicate: n for j in row_jobs(spec, row) if (n := _read(j)) is not None} for row in rows]
    margin = row_config(spec, rows[0]).train.verdict.margin
    base = got[0]
    cols: dict[str, list[Any]] = {k: [] for k in (
        "replicates", "oa_mean", "d_oa_mean", "d_oa_ci_low", "d_oa_ci_high", "verdict", "d_val_oa_mean", "steps",
        "wall_s", "wall_vs_baseline", "transductive", "d_oa_each")}  # fmt: skip
    for numbers in got:
        common = sorted(set(numbers) & set(base))
        cols["replicates"].append(len(common))
        cols["oa_mean"].append(_mean([numbers[r]["oa"] for r in numbers]))
        cols["steps"].append(int(max((n["steps"] for n in numbers.values()), default=0)))
        cols["wall_s"].append(_mean([numbers[r]["wall_s"] for r in numbers]))
        cols["transductive"].append(any(n["transductive"] for n in numbers.values()))
        cols["d_oa_each"].append(", ".join(
            f"p{k}s{seed} {100 * (numbers[(k, seed)]['oa'] - base[(k, seed)]['oa']):+.1f}" for k, seed in common
        ))  # fmt: skip
        if not common:
            for k in ("d_oa_mean", "d_oa_ci_low", "d_oa_ci_high", "d_val_oa_mean", "wall_vs_baseline"):
                cols[k].append(math.nan)
            cols["verdict"].append(Accuracy.PENDING)
            continue
        v = paired_verdict([numbers[r]["oa"] for r in common], [base[r]["oa"] for r in common], margin=margin)
        cols["d_oa_mean"].append(v.mean)
        cols["d_oa_ci_low"].append(v.ci_low if math.isfinite(v.ci_low) else math.nan)
        cols["d_oa_ci_high"].append(v.ci_high if math.isfinite(v.ci_high) else math.nan)
        cols["verdict"].append(v.verdict)
        cols["d_val_oa_mean"].append(_mean([numbers[r]["val_oa"] - base[r]["val_oa"] for r in common]))
        cols["wall_vs_baseline"].append(_mean([numbers[r]["wall_s"] / base[r]["wall_s"] for r in common]))
    return _dataset(spec, cols, margin)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


LONG = {
    "replicates": ("1", "replicates (partition, seed) the row shares with the baseline"),
    "oa_mean": ("1", "mean over the row's replicates of test OA (each record's mean of its last summary_epochs "
                "evaluations)"),
    "d_oa_mean": ("1", "mean over replicates of OA(row) - OA(baseline), paired by (partition, seed)"),
    "d_oa_ci_low": ("1", "95 % t interval of the mean paired difference, low end (NaN: one replicate)"),
    "d_oa_ci_high": ("1", "95 % t interval of the mean paired difference, high end (NaN: one replicate)"),
    "verdict": ("", "equal (inside +-train.verdict.margin) / better / worse / undecided vs the baseline"),
    "d_val_oa_mean": ("1", "mean paired difference of validation OA (last epoch; NaN without validation pixels)"),
    "steps": ("1", "optimizer steps per run: fine-tuning (epochs x steps_per_epoch) plus pretraining"),
    "wall_s": ("s", "mean wall time of one run (one process, one thread, shared machine: load not controlled)"),
    "wall_vs_baseline": ("1", "mean over replicates of wall(row) / wall(baseline): rough, not interleaved"),
    "transductive": ("1", "1: the row's pretraining saw the test pixels' spectra (never their labels)"),
    "d_oa_each": ("", "OA(row) - OA(baseline) of each replicate (partition k, seed s: pKsS), percentage points"),
}  # fmt: skip


def _dataset(spec: AblationSpec, cols: Mapping[str, list[Any]], margin: float) -> xr.Dataset:
    rows = spec.rows
    data = {}
    for k, values in cols.items():
        units, long = LONG[k]
        arr = np.asarray(values, dtype=np.int8 if k == "transductive" else str if k == "d_oa_each" else None)
        data[k] = ("row", arr, {"units": units, "long_name": long} if units else {"long_name": long})
    ds = xr.Dataset(data, coords={"row": ("row", [r.name for r in rows], {"long_name": "ingredient"})})
    ds["what"] = ("row", [r.what for r in rows], {"long_name": "what the row adds"})
    ds.attrs.update({
        "title": "hsitp ingredients ablation: each ingredient alone on the baseline recipe, paired by replicate",
        "plan": f"{spec.plan} at P = {spec.world_size} as its single-process equivalent",
        "protocol": spec.protocol,
        "partitions": json.dumps(list(spec.partitions)),
        "seeds": json.dumps(list(spec.seeds)),
        "baseline": rows[0].name,
        "recipe": (spec.recipe or "the base overlays' train keys"),
        "verdict_margin": margin,
        "decision": "test OA over the replicates measures each ingredient; adopting one by it selects on the test "
        "pixels of these partitions: confirm on fresh partitions or on validation pixels",
        "transductive": "rows with pretraining saw every pixel's spectrum, the test pixels' included (never a "
        "label); the classical baselines had no such unlabelled-data advantage",
        "hardware": "CPU, OMP_NUM_THREADS=1 per run, one run at a time, a 2-core machine shared with other jobs",
    })  # fmt: skip
    return ds


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "–"


def markdown(ds: xr.Dataset) -> str:
    """The table in markdown: ΔOA in percentage points with its interval, cost in steps and wall time."""
    head = ["ingredient", "what", "replicates", "test OA [%]", "ΔOA vs baseline [pp] (95 % CI)", "verdict",
            "ΔOA per replicate [pp]", "Δ validation OA [pp]", "steps", "wall/run [s]", "wall vs baseline",
            "transductive"]  # fmt: skip
    rows = []
    for i, name in enumerate(ds["row"].values):
        v = {k: ds[k].values[i] for k in ds.data_vars}
        if i == 0:
            delta, verdict = "baseline", ""
        elif not math.isfinite(float(v["d_oa_ci_low"])):
            delta, verdict = (
                f"{100 * float(v['d_oa_mean']):+.1f} (no interval: one replicate)",
                str(v["verdict"]),
            )
        else:
            delta = (f"{100 * float(v['d_oa_mean']):+.1f} [{100 * float(v['d_oa_ci_low']):+.1f}, "
                     f"{100 * float(v['d_oa_ci_high']):+.1f}]")  # fmt: skip
            verdict = str(v["verdict"])
        cells = [
            str(name), str(v["what"]), str(int(v["replicates"])), f"{100 * float(v['oa_mean']):.1f}", delta,
            verdict, str(v["d_oa_each"]) if i else "", _fmt(100 * float(v["d_val_oa_mean"]), "+.1f") if i else "",
            str(int(v["steps"])), _fmt(float(v["wall_s"]), ".0f"),
            _fmt(float(v["wall_vs_baseline"]), ".2f") if i else "1", "yes" if int(v["transductive"]) else "no",
        ]  # fmt: skip
        rows.append(cells)
    return markdown_table(rows, head)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hsitp.train.ingredients", description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="config/cpu-places-ablation.yaml")
    ap.add_argument("--overlay", action="append", default=[], help="YAML merged over the spec (the pilot's)")
    ap.add_argument("--rows", help="comma-separated row names to train (default: every row)")
    ap.add_argument("--workers", type=int, default=1, help="training processes at a time (one thread each)")
    ap.add_argument("--table", action="store_true", help="only build the table from the records present")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except HsitpError as exc:  # a malformed spec, a row's config refused, records of another recipe
        print(f"hsitp: error: {one_line(str(exc))}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    spec = read_spec(args.spec, args.overlay)
    only = args.rows.split(",") if args.rows else None
    unknown = sorted(set(only or ()) - {r.name for r in spec.rows})
    if unknown:
        raise IngredientsError(f"--rows: no row named {unknown} in {args.spec}")
    if not args.table:
        train_rows(spec, only, args.workers)
    from hsitp.contracts import TRAIN_INGREDIENTS
    from hsitp.io import provenance, write_netcdf

    ds = table(spec)
    out = Path("results") / spec.run / "ingredients.nc"
    inputs = {"spec": Path(args.spec), **{f"overlay{i}": Path(p) for i, p in enumerate(args.overlay)}}
    write_netcdf(ds, out, kind=TRAIN_INGREDIENTS.kind, prov=provenance({}, inputs=inputs))
    text = markdown(ds)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
