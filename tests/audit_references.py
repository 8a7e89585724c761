"""Synthetic committed references for the audit tests (issue 51), with made-up numbers: the one-GPU check's shard
timings (``results/reference/h200-check/shard_*.nc``, kind bench_shard) and a headline accuracy summary with its
classical baseline (``train/summary.nc``), shaped as the pipeline writes them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr
from audit_synthetic import labelled

from hsitp.io import provenance, write_netcdf

SHARD_OPS = ["mlp", "attn_channel", "attn_token", "agg_tp", "agg_dchag_l", "agg_dchag_c"]


def shard_files(folder: Path, ccr: dict[str, float] | None = None, spread: float = 0.02) -> None:
    """shard_N324.nc and shard_N5776.nc: every op at P = 1, 2, 4, 8, 5 repeats of rank 0's compute time within
    ±``spread`` of 1 ms, the modelled communication set so the median CCR is ``ccr[op]`` (default 0.5 + 0.1 × the
    op's index: ops apart, every CCR below 1)."""
    ccr = ccr or {op: 0.5 + 0.1 * i for i, op in enumerate(SHARD_OPS)}
    Ps, reps = [1, 2, 4, 8], 5
    for N in (324, 5776):
        coords = {"op": SHARD_OPS, "P": Ps, "N": [N], "D": [256], "L": [200]}
        t = np.ones((len(SHARD_OPS), len(Ps), 1, 1, 1, reps)) * 1e-3
        t = t * np.linspace(1 - spread, 1 + spread, reps)
        time = xr.DataArray(t, dims=(*coords, "rep"), coords={**coords, "rep": np.arange(reps)})
        med = time.median("rep")
        c = xr.DataArray([ccr[o] for o in SHARD_OPS], dims="op", coords={"op": SHARD_OPS})
        comm = (med * c).where(time["P"] > 1, 0.0)
        ds = xr.Dataset(
            {
                "time": time,
                "t_comp_measured": med,
                "t_comm_modelled": comm,
                "ccr_half_measured": comm / med,
            }
        )
        ds.attrs.update(
            {
                "measured": "compute of rank 0's shard on one device: synthetic GPU",
                "modelled": "communication from a synthetic preset",
                "dtype": "bfloat16",
                "title": "synthetic shard file for the audit tests",
            }
        )
        write_netcdf(labelled(ds), folder / f"shard_N{N}.nc", kind="bench_shard", prov=provenance())


def accuracy_summary(
    path: Path,
    cells: Sequence[tuple[str, int, str, str, float, float]],
    baseline: dict[str, float],
    seeds: int = 3,
) -> None:
    """A train/summary.nc: one cell per (plan, P, protocol, oa_verdict, oa_mean, oa_std); the SVM's OA per
    protocol (std 0.002, 3 seeds)."""
    n = len(cells)
    protos = [c[2] for c in cells]
    base = np.array([[baseline[p], baseline[p] - 0.05] for p in protos])
    ds = xr.Dataset(
        {
            "oa_verdict": ("cell", np.array([c[3] for c in cells])),
            "oa_mean": ("cell", np.array([c[4] for c in cells])),
            "oa_std": ("cell", np.array([c[5] for c in cells])),
            "seeds": ("cell", np.full(n, seeds)),
            "d_oa_vs_tp_mean": ("cell", np.zeros(n)),
            "d_oa_vs_tp_ci_low": ("cell", np.full(n, -0.01)),
            "d_oa_vs_tp_ci_high": ("cell", np.full(n, 0.01)),
            "baseline_oa_mean": (("cell", "classifier"), base),
            "baseline_oa_std": (("cell", "classifier"), np.full((n, 2), 0.002)),
            "baseline_seeds": ("cell", np.full(n, 3)),
        },
        coords={
            "dataset": ("cell", ["synthetic"] * n),
            "plan": ("cell", [c[0] for c in cells]),
            "P": ("cell", [c[1] for c in cells]),
            "g": ("cell", [1] * n),
            "protocol": ("cell", protos),
            "N": ("cell", [324] * n),
            "classifier": ["svm", "rf"],
        },
    )
    ds.attrs["title"] = "synthetic accuracy summary for the audit tests"
    write_netcdf(labelled(ds), path, kind="train_summary", prov=provenance())
