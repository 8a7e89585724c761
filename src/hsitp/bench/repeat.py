"""How much the microbenchmarks move between runs: each run's held-out error and the run-to-run spread of the
measured CCR per point (``benchmarks/repeat_bench.sh`` prints this after running the bench-cpu sweep (config/bench-cpu.yaml) several times).

``python -m hsitp.bench.repeat RUN_DIR [RUN_DIR ...]`` reads ``RUN_DIR/bench/model_vs_measured.nc`` of each run.
A point's run-to-run deviation is |CCR of one run / mean over the runs - 1|; its median over points and runs is
what the held-out error of a model that predicted every point's mean CCR exactly would be, i.e. the part of the
held-out error that measurement noise alone accounts for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.bench.compare import FLAG_HELD_OUT
from hsitp.contracts import MODEL_VS_MEASURED
from hsitp.errors import HsitpError
from hsitp.io import json_attr
from hsitp.names import COST_MODELS

POINT = ("op", "P", "N", "D", "L")


def load_runs(run_dirs: Sequence[str | Path]) -> list[xr.Dataset]:
    """Each run's ``model_vs_measured.nc`` (one dtype: the calibrated one)."""
    return [
        MODEL_VS_MEASURED.read(Path(d) / "bench" / "model_vs_measured.nc").isel(dtype=0, drop=True)
        for d in run_dirs
    ]


def ccr_table(runs: Sequence[xr.Dataset]) -> xr.DataArray:
    """Measured CCR (run, point) at every point with P >= 2 that communicates (CCR > 0: not the replicated
    LayerNorm) and was measured in every run."""
    stacked = xr.concat([ds["ccr_measured"] for ds in runs], dim="run").stack(point=POINT)
    stacked = stacked.dropna("point", how="any")
    return stacked.isel(point=((stacked["P"] > 1) & (stacked > 0).all("run")).values)


def spread(ccr: xr.DataArray) -> dict[str, Any]:
    """Run-to-run spread: per point (max - min) / mean, and |one run / mean - 1| pooled over points and runs."""
    mean = ccr.mean("run")
    rel_range = (ccr.max("run") - ccr.min("run")) / mean
    deviation = np.abs(ccr / mean - 1)
    return {
        "n_points": int(ccr.sizes["point"]),
        "median_range": float(rel_range.median()),
        "q90_range": float(rel_range.quantile(0.9)),
        "median_deviation": float(deviation.median()),
        "rel_range": rel_range,
    }


def report(run_dirs: Sequence[str | Path], *, points: bool = True) -> str:
    """The text ``repeat_bench.sh`` prints."""
    runs = load_runs(run_dirs)
    lines = [f"machine: {runs[0].attrs.get('device', '?')}"]
    lines.append("held-out (and fitted) median |rel. error| of the CCR, points with P >= 2 and CCR > 0:")
    for d, ds in zip(run_dirs, runs, strict=True):
        # held-out and fitted median |relative error| per model, point counts
        summary = json_attr(ds, "summary")
        held, fit = summary["held_out"], summary["fitted"]
        models = "  ".join(
            f"{m} {100 * held[f'median_abs_rel_err_{m}']:5.1f} % ({100 * fit[f'median_abs_rel_err_{m}']:5.1f} %)"
            for m in COST_MODELS
        )
        lines.append(f"  {Path(d).name}: {held['n_points']} held out, {fit['n_points']} fitted: {models}")
    ccr = ccr_table(runs)
    s = spread(ccr)
    lines.append(
        f"run-to-run spread of the measured CCR over {s['n_points']} points (P >= 2, CCR > 0), {len(runs)} runs: "
        f"(max - min) / mean median {100 * s['median_range']:.1f} %, 90th percentile {100 * s['q90_range']:.1f} %; "
        f"|one run / mean - 1| median {100 * s['median_deviation']:.1f} % (the held-out error that measurement "
        "noise alone gives)"
    )
    held = runs[0]["held_out"].stack(point=POINT).sel(point=ccr["point"]) == FLAG_HELD_OUT
    if points:
        lines.append("per point: measured CCR in each run, (max - min) / mean; * = held out")
        for i, key in enumerate(ccr["point"].values):
            op, p, n, d, bands = key
            values = " ".join(f"{v:8.4f}" for v in ccr.isel(point=i).values)
            star = "*" if bool(held.isel(point=i)) else " "
            lines.append(
                f"  {star} {op:<21} P={p} N={n:<4} D={d:<4} L={bands:<3} {values}  "
                f"{100 * float(s['rel_range'].isel(point=i)):5.1f} %"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hsitp.bench.repeat",
        description="Held-out error per run and run-to-run spread of the measured CCR (benchmarks/repeat_bench.sh)",
    )
    parser.add_argument("runs", nargs="+", help="results/RUN folders, one per run of the bench")
    parser.add_argument("--no-points", action="store_true", help="summary only, no per-point table")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give at least two runs")
    try:
        print(report(args.runs, points=not args.no_points))
    except HsitpError as exc:
        print(f"hsitp: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
