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

The spec is not a pipeline overlay: ``base`` lists the overlays every row starts from; ``recipe`` (optional) a
tuning study whose best trial's keys (``hsitp.train.recipe.recipe_keys``) go under every row; ``train`` the keys
every row shares (steps, evaluation cadence); each row's ``train`` its ingredient. The first row is the baseline.
Records: results/RUN/train/DATASET/ROW/pK/NAME.nc with a ``.wall.json`` beside; the table: results/RUN/ingredients.
{nc,md}.
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
from typing import Any

import numpy as np
import xarray as xr

from hsitp.config import deep_merge, load_config, yaml_load
from hsitp.errors import HsitpError
from hsitp.markdown import markdown_table
from hsitp.outcomes import Accuracy
from hsitp.train.plan import crop_patch, recipe_hash, run_name
from hsitp.train.settings import TrainSettings

REQUIRED = ("base", "run", "dataset", "plan", "world_size", "protocol", "partitions", "seeds", "rows")


class IngredientsError(HsitpError, ValueError):
    """The ingredients spec is malformed or its records do not match it (names the key)."""


def read_spec(path: str | Path, overlays: Sequence[str | Path] = ()) -> dict[str, Any]:
    """The spec, with ``overlays`` merged over it (a pilot: fewer seeds and steps, its own run name), checked."""
    spec = yaml_load(Path(path).read_text())
    for extra in overlays:
        spec = deep_merge(spec, yaml_load(Path(extra).read_text()))
    for key in REQUIRED:
        if key not in spec:
            raise IngredientsError(f"{path}: `{key}` missing")
    names = [r.get("name") for r in spec["rows"]]
    if len(set(names)) != len(names) or not all(names):
        raise IngredientsError(f"{path}: rows need unique non-empty `name`s, got {names}")
    if spec["rows"][0].get("train"):
        raise IngredientsError(f"{path}: the first row is the baseline: it adds no `train` keys")
    if not spec["partitions"] or not spec["seeds"]:
        raise IngredientsError(f"{path}: `partitions` and `seeds` need at least one entry each")
    return spec


def partition_path(spec: Mapping[str, Any]) -> Path:
    """The prepared scene holding every partition of the spec (``data.partition.draws`` = the largest index + 1)."""
    return Path("results") / spec["run"] / "data" / f"{spec['dataset']}.nc"


def prepare_partitions(spec: Mapping[str, Any]) -> None:
    """Prepare the scene once with K = max(partitions) + 1 draws per protocol (``hsitp data prepare``, the base
    overlays; partition k is the k-th seeded draw, the same whatever K: partition 0 is a one-draw run's)."""
    out = partition_path(spec)
    draws = max(int(k) for k in spec["partitions"]) + 1
    if out.exists():
        from hsitp.contracts import DATASET

        ds = DATASET.read(out, load=False)
        try:
            have = ds.sizes["partition_index"]
        finally:
            ds.close()
        if have >= draws:
            return
    cmd = [sys.executable, "-m", "hsitp", "data", "prepare", spec["dataset"], "--out", str(out)]
    for base in spec["base"]:
        cmd += ["--config", str(base)]
    cmd += ["--config-json", json.dumps({"data": {"partition": {"draws": draws}}})]
    if subprocess.call(cmd) != 0:
        raise IngredientsError(f"partitions: preparing {draws} partitions failed: {' '.join(cmd)}")


def row_config(spec: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """The full validated config of one row: base overlays, the study's recipe keys, the spec's shared keys,
    the row's ingredient."""
    train: dict[str, Any] = {}
    if spec.get("recipe"):
        from hsitp.train.recipe import read_best, recipe_keys

        found = read_best(spec["recipe"])
        if (found["plan"], found["protocol"]) != (spec["plan"], spec["protocol"]):
            raise IngredientsError(
                f"recipe: {spec['recipe']} is the study of {found['plan']} under {found['protocol']}, the spec "
                f"trains {spec['plan']} under {spec['protocol']}"
            )
        train = recipe_keys(found["best"])
    train = deep_merge(train, dict(spec.get("train") or {}))
    train = deep_merge(train, dict(row.get("train") or {}))
    return load_config([Path(p) for p in spec["base"]], {"run": spec["run"], "train": train})


def row_jobs(spec: Mapping[str, Any], row: Mapping[str, Any], cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One job per replicate (partition, seed) of a row: its command line and record."""
    settings = TrainSettings.from_config(cfg)
    tokens = settings.crops[0].tokens
    patch = crop_patch(settings, spec["dataset"], tokens)
    world = int(spec["world_size"])
    out = []
    for k in spec["partitions"]:
        for seed in spec["seeds"]:
            name = run_name(spec["plan"], tokens, world, 1, spec["protocol"], int(seed))
            rec = Path("results", spec["run"], "train", spec["dataset"], row["name"], f"p{k}", f"{name}.nc")
            cmd = [
                sys.executable, "-m", "hsitp", "train", str(partition_path(spec)), "--partition", str(k),
                "--plan", spec["plan"],
                "--tokens", str(tokens), "--patch", str(patch), "--world-size", str(world), "--ranks", "1",
                "--protocol", spec["protocol"], "--seed", str(seed), "--out", str(rec),
                "--config-json", json.dumps(cfg),
            ]  # fmt: skip
            out.append({"row": row["name"], "replicate": (int(k), int(seed)), "record": rec, "cmd": cmd,
                        "recipe_hash": recipe_hash(cfg)})  # fmt: skip
    return out


def run_one(job: Mapping[str, Any]) -> None:
    """Train one missing record (``job["cmd"]``, one thread) and write its wall time beside it (``.wall.json``), its
    output to ``.log``; a record present is left alone (resumable), a failed run is reported and leaves no record."""
    rec: Path = job["record"]
    if rec.exists():
        return
    rec.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t0 = time.monotonic()
    with open(rec.with_suffix(".log"), "w") as log:
        code = subprocess.call(job["cmd"], stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - t0
    if code != 0:
        print(f"FAILED ({code}): {rec} (log {rec.with_suffix('.log')})", flush=True)
        return
    rec.with_suffix(".wall.json").write_text(json.dumps({"wall_s": wall}))
    print(f"done {rec} in {wall:.0f} s", flush=True)


def train_rows(spec: Mapping[str, Any], only: Sequence[str] | None = None, workers: int = 1) -> None:
    """Train every missing record, row by row (the baseline first), ``workers`` processes at a time (one thread
    each)."""
    from concurrent.futures import ThreadPoolExecutor

    prepare_partitions(spec)
    jobs = [
        job
        for row in spec["rows"]
        if only is None or row["name"] in only
        for job in row_jobs(spec, row, row_config(spec, row))
    ]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(run_one, jobs))


def _read(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """A record's numbers: OA (§7.4 summary), validation OA (last epoch), steps, wall time, transductive."""
    from hsitp.contracts import TRAIN
    from hsitp.train.summary import record_numbers

    rec: Path = job["record"]
    if not rec.exists():
        return None
    ds = TRAIN.read(rec)
    if ds.attrs.get("recipe_hash") != job["recipe_hash"]:
        raise IngredientsError(
            f"{rec} was trained under recipe {ds.attrs.get('recipe_hash')}, its row now resolves to "
            f"{job['recipe_hash']}: the spec or its overlays changed; restore them or delete the row's records"
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


def table(spec: Mapping[str, Any]) -> xr.Dataset:
    """Per row: replicates found, mean OA, mean ΔOA vs the baseline with its 95 % paired interval and verdict
    (margin train.verdict.margin), validation ΔOA, steps, wall time per run and its ratio to the baseline's."""
    from hsitp.evaluate.verdict import paired_verdict

    rows = list(spec["rows"])
    got = []
    for row in rows:
        cfg = row_config(spec, row)
        got.append({j["replicate"]: n for j in row_jobs(spec, row, cfg) if (n := _read(j)) is not None})
    margin = float(row_config(spec, rows[0])["train"]["verdict"]["margin"])
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
    return _dataset(spec, rows, cols, margin)


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


def _dataset(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], cols: Mapping[str, list[Any]],
             margin: float) -> xr.Dataset:  # fmt: skip
    data = {}
    for k, values in cols.items():
        units, long = LONG[k]
        arr = np.asarray(values, dtype=np.int8 if k == "transductive" else str if k == "d_oa_each" else None)
        data[k] = ("row", arr, {"units": units, "long_name": long} if units else {"long_name": long})
    ds = xr.Dataset(data, coords={"row": ("row", [r["name"] for r in rows], {"long_name": "ingredient"})})
    ds["what"] = ("row", [str(r.get("what", "")) for r in rows], {"long_name": "what the row adds"})
    ds.attrs.update({
        "title": "hsitp ingredients ablation: each ingredient alone on the baseline recipe, paired by replicate",
        "plan": f"{spec['plan']} at P = {spec['world_size']} as its single-process equivalent",
        "protocol": spec["protocol"],
        "partitions": json.dumps([int(k) for k in spec["partitions"]]),
        "seeds": json.dumps([int(s) for s in spec["seeds"]]),
        "baseline": rows[0]["name"],
        "recipe": str(spec.get("recipe") or "the base overlays' train keys"),
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
    spec = read_spec(args.spec, args.overlay)
    only = args.rows.split(",") if args.rows else None
    unknown = sorted(set(only or ()) - {r["name"] for r in spec["rows"]})
    if unknown:
        raise IngredientsError(f"--rows: no row named {unknown} in {args.spec}")
    if not args.table:
        train_rows(spec, only, args.workers)
    from hsitp.contracts import TRAIN_INGREDIENTS
    from hsitp.io import provenance, write_netcdf

    ds = table(spec)
    out = Path("results") / spec["run"] / "ingredients.nc"
    inputs = {"spec": Path(args.spec), **{f"overlay{i}": Path(p) for i, p in enumerate(args.overlay)}}
    write_netcdf(ds, out, kind=TRAIN_INGREDIENTS.kind, prov=provenance({}, inputs=inputs))
    text = markdown(ds)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
