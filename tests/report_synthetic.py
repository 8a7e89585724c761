"""Small synthetic probe and train files (not measurements) for the report tests: the shapes, dims and attributes
of what `hsitp probe merge`, `hsitp probe estimate` and `hsitp train` write, with made-up numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from hsitp.io import provenance, write_netcdf

PARTS = ["tokenisation", "aggregation", "blocks", "head"]
KINDS = ["parameters", "gradients", "optimizer", "activations", "transient"]
DEVICE = "CPU: Synthetic Test CPU (1 threads/rank, gloo)"


def probe_files(folder: Path) -> dict[str, Path]:
    """memory.nc, throughput.nc, estimate.nc: plans dense, tp, dchag_l; P 1, 2; g 2; one L, N; both policies."""
    rng = np.random.default_rng(1)
    plans, Ps, gs, ck = ["dense", "tp", "dchag_l"], [1, 2], [2], ["none", "blocks"]  # noqa: N806
    pt = {"plan": plans, "P": Ps, "g": gs, "L": [20], "N": [16], "checkpointing": ck}
    shape = tuple(len(v) for v in pt.values())
    mem = rng.integers(1, 1000, (*shape, 4, 5, 2)).astype(float) * 1024
    mem[0, 1] = np.nan  # dense only at P = 1
    mem[:, 0, ..., 1] = np.nan  # rank 1 beyond P = 1
    model = mem[..., 0] * (1 + rng.uniform(-0.2, 0.2, mem.shape[:-1]))
    peak = np.nansum(mem, axis=(-3, -2)) * 1.1
    peak[np.isnan(mem).all(axis=(-3, -2))] = np.nan
    dims = tuple(pt)
    ds = xr.Dataset(
        {
            "memory": ((*dims, "part", "kind", "rank"), mem),
            "memory_model": ((*dims, "part", "kind"), model),
            "rel_err": ((*dims, "part", "kind"), (model - mem[..., 0]) / mem[..., 0]),
            "peak_allocated": ((*dims, "rank"), peak),
            "peak_model": (dims, peak[..., 0] * 1.2),
            "peak_rel_err": (dims, np.full(shape, 0.2)),
            "device": ("P", [DEVICE, DEVICE]),
        },
        coords={**pt, "part": PARTS, "kind": KINDS, "rank": [0, 1]},
        attrs={
            "dtype": "float32",
            "probe": json.dumps({"plans": plans}),
            "run": json.dumps({"device": [DEVICE] * 2}),
        },
    )
    tokens = np.where(np.isnan(peak[..., 0]), np.nan, rng.uniform(100, 1000, shape))
    rounds = rng.uniform(0.5, 2.0, (*shape, 1)) * np.array([0.8, 0.9, 1.0, 1.1, 1.2])  # 5 rounds
    ratio = np.where(np.isnan(tokens)[..., None], np.nan, rounds)
    ratio[1] = 1.0  # tp vs itself
    ratio[:, 0] = np.nan  # P = 1: no tp to compare with
    thr = xr.Dataset({"tokens_per_s": (dims, tokens), "device": ("P", [DEVICE, DEVICE]),
                      "ratio_vs_tp_median": (dims, np.median(ratio, -1)), "ratio_vs_tp_min": (dims, ratio.min(-1)),
                      "ratio_vs_tp_max": (dims, ratio.max(-1)),
                      "oversubscribed_note": ("P", ["", "oversubscribed: 2 ranks on 1 core"])}, coords=pt,
                     attrs={"dtype": "float32"})  # fmt: skip
    configs = ["grid/tp/8/1/200/5776/none", "dchag/small/dchag_l/blocks"]
    est = xr.Dataset(
        {
            "memory": (("config", "part", "kind"), rng.uniform(1, 9, (2, 4, 5)) * 2**30),
            "memory_model": (("config", "part", "kind"), rng.uniform(1, 9, (2, 4, 5)) * 2**30),
            "peak_allocated": ("config", [40.0 * 2**30, 20.0 * 2**30]),
            "peak_model": ("config", [42.0 * 2**30, 19.0 * 2**30]),
            "reported_reserved_gib": ("config", [np.nan, 25.0]),
            "plan": ("config", ["tp", "dchag_l"]),
            "P": ("config", [8, 4]),
            "checkpointing": ("config", ["none", "blocks"]),
        },
        coords={"config": configs, "part": PARTS, "kind": KINDS},
        attrs={"estimated": "estimated with fake tensors"},
    )
    prov = provenance()
    return {
        "memory": write_netcdf(ds, folder / "memory.nc", kind="probe_memory", prov=prov),
        "throughput": write_netcdf(thr, folder / "throughput.nc", kind="probe_throughput", prov=prov),
        "estimate": write_netcdf(est, folder / "estimate.nc", kind="probe_estimate", prov=prov),
    }


def train_record(
    folder: Path,
    plan: str,
    P: int,  # noqa: N803
    g: int,
    *,
    accuracy: bool,
    prediction: bool,
    split: str = "random",
    seed: int = 0,
) -> Path:
    """One train record of 4 epochs; OA, AA and kappa at epochs 2 and 4 and a 6 x 5 predicted map if asked."""
    rng = np.random.default_rng(P + len(plan) + 10 * seed)
    E = 4  # noqa: N806
    ds = xr.Dataset(
        {
            "loss": ("epoch", np.linspace(2.0, 1.0, E) + rng.uniform(0, 0.1, E)),
            "tokens_per_s": ("epoch", rng.uniform(100, 200, E)),
            "step_time": (("epoch", "rank"), rng.uniform(0.1, 0.2, (E, P))),
            "ccr_inline": (("epoch", "rank"), rng.uniform(0.1, 0.5, (E, P))),
            "peak_allocated": (("epoch", "rank"), rng.uniform(1, 2, (E, P)) * 2**20),
            "memory": (("epoch", "rank", "part", "kind"), rng.uniform(1, 2, (E, P, 4, 4)) * 2**18),
        },
        coords={"epoch": np.arange(1, E + 1), "rank": np.arange(P), "part": PARTS, "kind": KINDS[:4]},
    )
    last = ds.isel(epoch=slice(-2, None)).mean("epoch")
    for name in ("loss", "tokens_per_s", "step_time", "ccr_inline", "peak_allocated"):
        ds[f"{name}_summary"] = last[name]
    if accuracy:
        last_oa = 0.7 + 0.01 * seed
        ds["oa"] = ("epoch", [np.nan, 0.5, np.nan, last_oa])
        ds["aa"] = ("epoch", [np.nan, 0.4, np.nan, last_oa - 0.1])
        ds["kappa"] = ("epoch", [np.nan, 0.45, np.nan, last_oa - 0.05])
    if prediction:
        ds["prediction"] = (("y", "x"), rng.integers(0, 4, (6, 5)))
    ds.attrs.update({"dataset": "synthetic", "plan": plan, "P": P, "g": g, "split": split, "seed": seed, "tokens": 9,
                     "dtype": "float32", "device": DEVICE, "summary_epochs": 2,
                     "activation_checkpointing": "none"})  # fmt: skip
    name = f"{plan}_N9_P{P}_g{g}_{split}_s{seed}.nc"
    return write_netcdf(ds, folder / "train" / "synthetic" / name, kind="train", prov=provenance())


def baseline_file(folder: Path, split: str, seed: int) -> Path:
    """One classical-baseline file (classifiers svm, rf) on the synthetic scene's ``split``."""
    oa = np.array([0.8, 0.75]) - (0.3 if split == "block" else 0.0) + 0.01 * seed
    ds = xr.Dataset(
        {
            "overall_accuracy": ("classifier", oa),
            "average_accuracy": ("classifier", oa - 0.1),
            "kappa": ("classifier", oa - 0.05),
        },
        coords={"classifier": ["svm", "rf"]},
        attrs={"dataset": "synthetic", "protocol": split, "seed": seed},
    )
    return write_netcdf(
        ds, folder / "baseline" / f"synthetic_{split}_s{seed}.nc", kind="baseline", prov=provenance()
    )


def train_summary(folder: Path) -> tuple[Path, list[Path]]:
    """train/summary.nc made by the real `summarize` from synthetic records (tp, dchag_l at P = 2; both splits;
    seeds 0, 1) and baseline files; returns it and the records."""
    from hsitp.train.summary import KIND, summarize

    records = [
        train_record(folder, plan, 2, g, accuracy=True, prediction=True, split=split, seed=seed)
        for plan, g in (("tp", 1), ("dchag_l", 2))
        for split in ("random", "block")
        for seed in (0, 1)
    ]
    baselines = [baseline_file(folder, split, seed) for split in ("random", "block") for seed in (0, 1)]
    ds = summarize(records, baselines)
    return write_netcdf(ds, folder / "train" / "summary.nc", kind=KIND, prov=provenance()), records
