"""The training-recipe ablation (``config/cpu-ablation.yaml``): one row per recipe step, each row trained on both
split protocols and several seeds through the pipeline's own ``hsitp train`` (one process, P = 1: the plan's
single-process equivalent, which the parity tests show equals tp), then reduced to one table.

    python -m hsitp.train.ablation config/cpu-ablation.yaml            # train what is missing (resumable)
    python -m hsitp.train.ablation config/cpu-ablation.yaml --table    # the table only (markdown + netCDF)

The ablation file is not a pipeline overlay: ``base`` lists the overlays every row starts from, each row adds its
``train`` keys (validated by the config schema like any overlay). Every keep/drop decision reads validation OA
(``val_oa``); test OA stands beside it and decides nothing. Records go to results/<run>/train/DATASET/<row>/, each
with a ``.wall.json`` beside it (the run's wall time), the table to results/<run>/ablation.{nc,md}.
"""

from __future__ import annotations

import argparse
import json
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

from hsitp.config import load_config
from hsitp.errors import HsitpError
from hsitp.train.plan import crop_patch, run_name

KIND = "train_ablation"
METRICS = ("val_oa", "oa", "val_aa", "aa", "val_kappa", "kappa")


class AblationError(HsitpError, ValueError):
    """The ablation file is malformed (names the key)."""


def read_spec(path: str | Path) -> dict[str, Any]:
    """The ablation file, checked: base overlays, run, data (the prepared scene), dataset, plan, splits, seeds,
    rows (unique names; a row may set its own ``seeds``)."""
    spec = yaml.safe_load(Path(path).read_text())
    for key in ("base", "run", "data", "dataset", "plan", "splits", "seeds", "rows"):
        if key not in spec:
            raise AblationError(f"{path}: `{key}` missing")
    names = [r.get("name") for r in spec["rows"]]
    if len(set(names)) != len(names) or not all(names):
        raise AblationError(f"{path}: rows need unique non-empty `name`s, got {names}")
    return spec


def row_config(spec: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """The full validated config of one row (base overlays, then the row's train keys, then the run name)."""
    overrides = {"run": spec["run"], "train": dict(row.get("train") or {})}
    return load_config([Path(p) for p in spec["base"]], overrides)


def _jobs(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    results = Path("results") / spec["run"]
    data = Path(spec["data"])
    for row in rows:
        cfg = row_config(spec, row)
        crop = cfg["train"]["crops"][0]
        tokens = int(crop["tokens"])
        patch = crop_patch(cfg["train"], spec["dataset"], tokens)
        for split in spec["splits"]:
            for seed in row.get("seeds", spec["seeds"]):
                name = run_name(spec["plan"], tokens, 1, 1, split, int(seed))
                rec = results / "train" / spec["dataset"] / row["name"] / f"{name}.nc"
                cmd = [
                    sys.executable, "-m", "hsitp", "train", str(data), "--plan", spec["plan"],
                    "--tokens", str(tokens), "--patch", str(patch), "--world-size", "1", "--split", split,
                    "--seed", str(seed), "--out", str(rec), "--config-json", json.dumps(cfg),
                ]  # fmt: skip
                out.append({"row": row["name"], "record": rec, "cmd": cmd, "data": data})
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


def train_rows(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], workers: int) -> None:
    """Train every missing record of ``rows`` (``workers`` processes at a time, one thread each)."""
    jobs = _jobs(spec, rows)
    if not jobs[0]["data"].exists():
        raise AblationError(
            f"{jobs[0]['data']} (`data`) missing: make it with snakemake {jobs[0]['data']} --cores 1 "
            f"--configfile {' '.join(spec['base'][1:])}"
        )
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_run_one, jobs))


def table(spec: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> xr.Dataset:
    """(row, split) means over the seeds found of validation and test OA/AA/kappa, steps and wall time."""
    from hsitp.io import read_netcdf

    splits = list(spec["splits"])
    shape = (len(rows), len(splits))
    vals = {m: np.full(shape, np.nan) for m in (*METRICS, "wall_s", "seeds")}
    steps = np.zeros(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        cfg = row_config(spec, row)
        steps[i] = int(cfg["train"]["epochs"]) * int(cfg["train"]["steps_per_epoch"])
        for j, split in enumerate(splits):
            got: dict[str, list[float]] = {m: [] for m in (*METRICS, "wall_s")}
            for job in _jobs(spec, [row]):
                rec = job["record"]
                if f"_{split}_s" not in rec.name or not rec.exists():
                    continue
                ds = read_netcdf(rec, kind="train")
                for m in METRICS:
                    got[m].append(float(ds[m].values[-1]))
                wall = rec.with_suffix(".wall.json")
                if wall.exists():
                    got["wall_s"].append(float(json.loads(wall.read_text())["wall_s"]))
            vals["seeds"][i, j] = len(got["oa"])
            for m, v in got.items():
                if v:
                    vals[m][i, j] = float(np.mean(v))
    data = {
        m: (("row", "split"), v, {"units": "s" if m == "wall_s" else "1", "long_name": _long(m)})
        for m, v in vals.items()
    }
    data["steps"] = ("row", steps, {"units": "1", "long_name": "optimizer steps (epochs x steps_per_epoch)"})
    ds = xr.Dataset(
        data,
        coords={
            "row": (
                "row",
                [r["name"] for r in rows],
                {"long_name": "recipe step (config/cpu-ablation.yaml)"},
            ),
            "split": ("split", splits, {"long_name": "split protocol"}),
        },
    )
    ds["what"] = ("row", [str(r.get("what", "")) for r in rows], {"long_name": "what the row changes"})
    ds.attrs.update(
        {
            "title": "hsitp training-recipe ablation: validation and test accuracy per recipe step",
            "decision": "keep/drop by validation OA (train pixels held out of the loss); test OA decides nothing",
            "plan": f"{spec['plan']} at P = 1 in one process (the single-process equivalent of tp)",
            "hardware": "CPU, OMP_NUM_THREADS=1 per run, on a 2-core machine shared with other jobs",
        }
    )
    return ds


def _long(m: str) -> str:
    if m == "wall_s":
        return (
            "mean wall time of one run (one process, one thread; load of the shared machine not controlled)"
        )
    if m == "seeds":
        return "seeds found"
    where = "validation pixels" if m.startswith("val_") else "test pixels"
    return f"mean over seeds of {m.removeprefix('val_')} on the {where} after the last epoch"


def markdown(ds: xr.Dataset) -> str:
    """The ablation table in markdown: one line per row, validation and test OA (and AA) per split."""
    splits = [str(s) for s in ds["split"].values]
    head = ["row", "what", "steps"]
    for s in splits:
        head += [f"{s} val OA", f"{s} test OA", f"{s} test AA"]
    head += ["seeds", "wall/run (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, name in enumerate(ds["row"].values):
        cells = [str(name), str(ds["what"].values[i]), str(int(ds["steps"].values[i]))]
        for j in range(len(splits)):
            cells += [f"{ds[m].values[i, j]:.3f}" for m in ("val_oa", "oa", "aa")]
        cells += [f"{int(np.nanmin(ds['seeds'].values[i]))}", f"{np.nanmean(ds['wall_s'].values[i]):.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hsitp.train.ablation", description=__doc__.split("\n")[0])
    ap.add_argument("spec", help="config/cpu-ablation.yaml")
    ap.add_argument("--rows", help="comma-separated row names (default: every row)")
    ap.add_argument("--workers", type=int, default=1, help="training processes at a time (one thread each)")
    ap.add_argument("--table", action="store_true", help="only build the table from the records present")
    args = ap.parse_args(argv)
    spec = read_spec(args.spec)
    rows = spec["rows"]
    if args.rows:
        wanted = args.rows.split(",")
        unknown = sorted(set(wanted) - {r["name"] for r in rows})
        if unknown:
            raise AblationError(f"--rows: no row named {unknown} in {args.spec}")
        rows = [r for r in rows if r["name"] in wanted]
    if not args.table:
        train_rows(spec, rows, args.workers)
    from hsitp.io import provenance, write_netcdf

    ds = table(spec, rows)
    out = Path("results") / spec["run"] / "ablation.nc"
    write_netcdf(ds, out, kind=KIND, prov=provenance({}, inputs={"spec": Path(args.spec)}))
    text = markdown(ds)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
