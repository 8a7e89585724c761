"""The training-recipe ablation (``config/cpu-ablation.yaml``): one row per recipe step, each row trained on both
accuracy protocols and several seeds through the pipeline's own ``hsitp train`` (one process, P = 1: the plan's
single-process equivalent, which the parity tests show equals tp), then reduced to one table.

    python -m hsitp.train.ablation config/cpu-ablation.yaml            # train what is missing (resumable)
    python -m hsitp.train.ablation config/cpu-ablation.yaml --table    # the table only (markdown + netCDF)

The ablation file is not a pipeline overlay: ``base`` lists the overlays every row starts from. The rows are a
greedy chain: the first is the control; every later row adds its ``train`` keys on top of the steps kept so far
and is kept when its validation OA (``val_oa``, mean over protocols and the seeds both rows ran) beats the best kept
row's; a row marked ``final: true`` is the kept recipe plus its keys (e.g. more steps), run whatever it scores. A
row with ``from: NAME`` (``on`` would read as YAML's true) starts a new stretch of the chain from an earlier row (a final one, say, at its step count):
it is that row's recipe plus its own keys, judged against that row, and the chain goes on from there. The
rule is applied to the records, so the table and the configs are rebuilt from them alone. Test OA stands beside validation OA and
decides nothing. Records go to results/<run>/train/DATASET/<row>/, each with a ``.wall.json`` beside it (the run's
wall time), the table to results/<run>/ablation.{nc,md}.
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import yaml

from hsitp.config import deep_merge, load_config
from hsitp.errors import HsitpError
from hsitp.train.plan import crop_patch, recipe_hash, run_name
from hsitp.train.settings import TrainSettings

log = logging.getLogger(__name__)

KIND = "train_ablation"
METRICS = ("val_oa", "oa", "val_aa", "aa", "val_kappa", "kappa")
FIT = "train_oa"  # OA of the final map on the run's own loss pixels: under- or over-fitting


class AblationError(HsitpError, ValueError):
    """The ablation file is malformed (names the key)."""


def read_spec(path: str | Path) -> dict[str, Any]:
    """The ablation file, checked: base overlays, run, data (the prepared scene), dataset, plan, protocols (the
    accuracy protocols), seeds, rows (unique names; a row may set its own ``seeds`` and ``protocols``). ``splits``,
    the name of ``protocols`` before issue 38, is accepted for one release with a warning."""
    spec = yaml.safe_load(Path(path).read_text())
    for where in (spec, *spec.get("rows", ())):
        if "splits" in where:
            if "protocols" in where:
                raise AblationError(
                    f"{path}: both `splits` and `protocols`; `splits` is the old name: keep `protocols`"
                )
            where["protocols"] = where.pop("splits")
            log.warning("%s: `splits` is deprecated, use `protocols` (accepted until the next release)", path)
    for key in ("base", "run", "data", "dataset", "plan", "protocols", "seeds", "rows"):
        if key not in spec:
            raise AblationError(f"{path}: `{key}` missing")
    names = [r.get("name") for r in spec["rows"]]
    if len(set(names)) != len(names) or not all(names):
        raise AblationError(f"{path}: rows need unique non-empty `name`s, got {names}")
    for i, row in enumerate(spec["rows"]):
        if "from" in row and row["from"] not in names[:i]:
            raise AblationError(f"{path}: row {row['name']!r}: `from: {row['from']}` names no earlier row")
    return spec


def row_config(
    spec: Mapping[str, Any], row: Mapping[str, Any], kept: Mapping[str, Any] | None = None
) -> dict:
    """The full validated config of one row: base overlays, the kept steps' train keys, the row's, the run name."""
    train = deep_merge(dict(kept or {}), dict(row.get("train") or {}))
    key = json.dumps([spec["base"], spec["run"], train], sort_keys=True)
    if key not in _CONFIGS:  # schema validation takes seconds; the chain is re-walked after every row
        _CONFIGS[key] = load_config([Path(p) for p in spec["base"]], {"run": spec["run"], "train": train})
    return copy.deepcopy(_CONFIGS[key])


_CONFIGS: dict[str, dict[str, Any]] = {}


def _row_jobs(
    spec: Mapping[str, Any], row: Mapping[str, Any], cfg: Mapping[str, Any]
) -> list[dict[str, Any]]:
    out = []
    results = Path("results") / spec["run"]
    settings = TrainSettings.from_config(cfg)
    tokens = settings.crops[0].tokens
    patch = crop_patch(settings, spec["dataset"], tokens)
    for protocol in row.get("protocols", spec["protocols"]):
        for seed in row.get("seeds", spec["seeds"]):
            name = run_name(spec["plan"], tokens, 1, 1, protocol, int(seed))
            rec = results / "train" / spec["dataset"] / row["name"] / f"{name}.nc"
            cmd = [
                sys.executable, "-m", "hsitp", "train", str(spec["data"]), "--plan", spec["plan"],
                "--tokens", str(tokens), "--patch", str(patch), "--world-size", "1", "--protocol", protocol,
                "--seed", str(seed), "--out", str(rec), "--config-json", json.dumps(cfg),
            ]  # fmt: skip
            job = {"row": row["name"], "protocol": protocol, "seed": str(seed), "record": rec, "cmd": cmd}
            out.append({**job, "recipe_hash": recipe_hash(cfg)})
    return out


def _val_oa(jobs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], float] | None:
    """Validation OA of each (protocol, seed) record of a row; None while any is missing."""
    from hsitp.io import read_netcdf

    if not all(j["record"].exists() for j in jobs):
        return None
    out = {}
    for j in jobs:
        ds = read_netcdf(j["record"], kind="train")
        if ds.attrs.get("recipe_hash") != j["recipe_hash"]:
            raise AblationError(
                f"{j['record']} was trained under recipe {ds.attrs.get('recipe_hash')}, but its row now resolves to "
                f"{j['recipe_hash']}: the ablation file, its base overlays or an earlier verdict changed; restore "
                "them or delete the row's records"
            )
        out[(j["protocol"], j["seed"])] = float(ds["val_oa"].values[-1])
    return out


def _beats(mine: Mapping[tuple[str, str], float], best: Mapping[tuple[str, str], float]) -> bool:
    """Higher mean validation OA than the best kept row over the (protocol, seed) runs both have (rows screened
    with fewer seeds are compared on those seeds only)."""
    common = sorted(set(mine) & set(best))
    if not common:
        raise AblationError("two rows of the chain share no (protocol, seed): they cannot be compared")
    return float(np.mean([mine[k] for k in common])) > float(np.mean([best[k] for k in common]))


def resolve(spec: Mapping[str, Any], *, upto: int | None = None) -> list[dict[str, Any]]:
    """Walk the greedy chain over the records present: per row its config, jobs, validation OA, whether it was kept,
    and the steps kept before it. Stops at the first row whose records are incomplete (its config is known, its
    verdict is not), or after row ``upto``."""
    kept: dict[str, Any] = {}
    best: dict[tuple[str, str], float] | None = None
    out: list[dict[str, Any]] = []
    for i, row in enumerate(spec["rows"]):
        if upto is not None and i > upto:
            break
        if "from" in row:  # a new stretch: the named row's recipe is what is kept, its score what to beat
            ref = next(e for e in out if e["row"]["name"] == row["from"])
            kept = deep_merge(ref["kept_before"], dict(ref["row"].get("train") or {}))
            best = ref["val"]
        cfg = row_config(spec, row, kept)
        jobs = _row_jobs(spec, row, cfg)
        val = _val_oa(jobs)
        entry = {
            "row": row,
            "config": cfg,
            "jobs": jobs,
            "val_oa": None if val is None else float(np.mean(list(val.values()))),
            "kept_before": dict(kept),
            "val": val,  # (protocol, seed) -> validation OA
        }
        out.append(entry)
        if val is None:
            entry["kept"] = None
            break
        final = bool(row.get("final"))
        entry["kept"] = i == 0 or final or (best is not None and _beats(val, best))
        if entry["kept"] and not final:
            kept = deep_merge(kept, dict(row.get("train") or {}))
            best = val
    return out


def _run_one(job: Mapping[str, Any]) -> None:
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


def train_chain(spec: Mapping[str, Any], workers: int, only: Sequence[str] | None = None) -> None:
    """Train the chain row by row (a row's config needs the verdicts before it), ``workers`` processes at a time,
    one thread each; rows not in ``only`` (when given) are not trained, so the chain stops at the first of them
    whose records are missing."""
    if not Path(spec["data"]).exists():
        raise AblationError(
            f"{spec['data']} (`data`) missing: make it with snakemake {spec['data']} --cores 1 "
            f"--configfile {' '.join(spec['base'][1:])}"
        )
    for i, row in enumerate(spec["rows"]):
        entry = resolve(spec, upto=i)[-1]
        if entry["row"] is not row:
            return  # an earlier row is incomplete
        if entry["val_oa"] is None:
            if only is not None and row["name"] not in only:
                return
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(_run_one, entry["jobs"]))
        print(f"row {row['name']}: val OA {resolve(spec, upto=i)[-1]['val_oa']}", flush=True)


def table(spec: Mapping[str, Any]) -> xr.Dataset:
    """(row, protocol) means over the seeds found of validation and test OA/AA/kappa and wall time; steps, the
    verdict of each row, and what it changes."""
    from hsitp.io import read_netcdf

    chain = resolve(spec)
    protocols = list(spec["protocols"])
    shape = (len(chain), len(protocols))
    vals = {m: np.full(shape, np.nan) for m in (*METRICS, FIT, "wall_s", "seeds")}
    steps = np.zeros(len(chain), dtype=np.int64)
    for i, entry in enumerate(chain):
        settings = TrainSettings.from_config(entry["config"])
        steps[i] = settings.epochs * settings.steps_per_epoch
        for j, protocol in enumerate(protocols):
            got: dict[str, list[float]] = {m: [] for m in (*METRICS, FIT, "wall_s")}
            for job in entry["jobs"]:
                rec = job["record"]
                if job["protocol"] != protocol or not rec.exists():
                    continue
                ds = read_netcdf(rec, kind="train")
                if ds.attrs.get("recipe_hash") != job["recipe_hash"]:
                    raise AblationError(f"{rec}: trained under another recipe than its row's (see resolve)")
                for m in METRICS:
                    got[m].append(float(ds[m].values[-1]))
                if "prediction" in ds:
                    got[FIT].append(_train_oa(spec, entry["config"], protocol, ds["prediction"].values))
                wall = rec.with_suffix(".wall.json")
                if wall.exists():
                    got["wall_s"].append(float(json.loads(wall.read_text())["wall_s"]))
            vals["seeds"][i, j] = len(got["oa"])
            for m, v in got.items():
                if v:
                    vals[m][i, j] = float(np.mean(v))
    data = {
        m: (("row", "protocol"), v, {"units": "s" if m == "wall_s" else "1", "long_name": _long(m)})
        for m, v in vals.items()
    }
    data["steps"] = ("row", steps, {"units": "1", "long_name": "optimizer steps (epochs x steps_per_epoch)"})
    verdict = ["pending" if e["kept"] is None else "kept" if e["kept"] else "dropped" for e in chain]
    verdict[0] = "control" if chain else verdict[0]
    for i, e in enumerate(chain):
        if e["row"].get("final"):
            verdict[i] = "final"
    ds = xr.Dataset(
        data,
        coords={
            "row": (
                "row",
                [e["row"]["name"] for e in chain],
                {"long_name": "recipe step (cpu-ablation.yaml)"},
            ),
            "protocol": ("protocol", protocols, {"long_name": "accuracy protocol"}),
        },
    )
    ds["what"] = (
        "row",
        [str(e["row"].get("what", "")) for e in chain],
        {"long_name": "what the row changes"},
    )
    ds["verdict"] = ("row", verdict, {"long_name": "control / kept / dropped (by validation OA) / final"})
    ds["recipe_hash"] = (
        "row",
        [read_netcdf(e["jobs"][0]["record"], kind="train").attrs["recipe_hash"] if e["jobs"][0]["record"].exists()
         else "" for e in chain],
        {"long_name": "recipe hash of the row's records (hsitp.train.plan.recipe_hash)"},
    )  # fmt: skip
    ds.attrs.update(
        {
            "title": "hsitp training-recipe ablation: validation and test accuracy per recipe step",
            "decision": "greedy: a row is kept when its validation OA (mean over protocols and seeds; train pixels "
            "held out of the loss) beats the best kept row's; test OA decides nothing",
            "plan": f"{spec['plan']} at P = 1 in one process (the single-process equivalent of tp)",
            "hardware": "CPU, OMP_NUM_THREADS=1 per run, on a 2-core machine shared with other jobs",
        }
    )
    return ds


def _train_oa(
    spec: Mapping[str, Any], cfg: Mapping[str, Any], protocol: str, prediction: np.ndarray
) -> float:
    """OA of a record's final map on the pixels its loss saw (train pixels less the validation ones)."""
    from hsitp.train.data import load_scene

    settings = TrainSettings.from_config(cfg)
    key = (protocol, settings.validation_fraction, settings.seed)
    if key not in _SCENES:
        scene = load_scene(spec["data"], protocol, validation=key[1], validation_seed=key[2])
        _SCENES[key] = (scene.labels, scene.train_mask.numpy())
    labels, loss_pixels = _SCENES[key]
    return float((prediction[loss_pixels] == labels[loss_pixels]).mean())


_SCENES: dict[tuple[str, float, int], tuple[np.ndarray, np.ndarray]] = {}


def _long(m: str) -> str:
    if m == "wall_s":
        return (
            "mean wall time of one run (one process, one thread; load of the shared machine not controlled)"
        )
    if m == "seeds":
        return "seeds found"
    if m == FIT:
        return "mean over seeds of the overall accuracy of the final map on the run's loss pixels (fit, not skill)"
    where = "validation pixels" if m.startswith("val_") else "test pixels"
    return f"mean over seeds of {m.removeprefix('val_')} on the {where} after the last epoch"


def markdown(ds: xr.Dataset) -> str:
    """The ablation table in markdown: one line per row, validation and test OA (and AA) per protocol."""
    protocols = [str(s) for s in ds["protocol"].values]
    head = ["row", "what", "verdict", "steps"]
    for s in protocols:
        head += [f"{s} train OA", f"{s} val OA", f"{s} test OA", f"{s} test AA"]
    head += ["seeds", "wall/run (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, name in enumerate(ds["row"].values):
        cells = [
            str(name),
            str(ds["what"].values[i]),
            str(ds["verdict"].values[i]),
            str(int(ds["steps"].values[i])),
        ]
        for j in range(len(protocols)):
            cells += [f"{ds[m].values[i, j]:.3f}" for m in (FIT, "val_oa", "oa", "aa")]
        cells += [f"{int(np.nanmin(ds['seeds'].values[i]))}", f"{np.nanmean(ds['wall_s'].values[i]):.0f}"]
        cells = [c.replace("nan", "–") for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hsitp.train.ablation", description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="config/cpu-ablation.yaml")
    ap.add_argument("--rows", help="comma-separated row names to train (default: every row, in chain order)")
    ap.add_argument("--workers", type=int, default=1, help="training processes at a time (one thread each)")
    ap.add_argument("--table", action="store_true", help="only build the table from the records present")
    args = ap.parse_args(argv)
    spec = read_spec(args.spec)
    only = args.rows.split(",") if args.rows else None
    unknown = sorted(set(only or ()) - {r["name"] for r in spec["rows"]})
    if unknown:
        raise AblationError(f"--rows: no row named {unknown} in {args.spec}")
    if not args.table:
        train_chain(spec, args.workers, only)
    from hsitp.io import provenance, write_netcdf

    ds = table(spec)
    out = Path("results") / spec["run"] / "ablation.nc"
    write_netcdf(ds, out, kind=KIND, prov=provenance({}, inputs={"spec": Path(args.spec)}))
    text = markdown(ds)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
