"""Small synthetic probe and train files (not measurements) for the report tests: the shapes, dims and attributes
of what `hsitp probe merge`, `hsitp probe estimate` and `hsitp train` write, with made-up numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr
from nc_checks import described

from hsitp.io import provenance, write_netcdf

PARTS = ["tokenisation", "aggregation", "blocks", "head"]
KINDS = ["parameters", "gradients", "optimizer", "activations", "transient"]
DEVICE = "CPU: Synthetic Test CPU (1 threads/rank, gloo)"  # as hsitp.parallel.runtime writes it
DEVICE_SHOWN = "CPU: Synthetic Test CPU (1 thread/rank, gloo)"  # as the figures name it


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
            "probe": json.dumps({"plans": plans, "attention_kernel": "exact"}),
            "run": json.dumps({"device": [DEVICE] * 2}),
            "attention_kernel": "exact",
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
        "memory": write_netcdf(described(ds), folder / "memory.nc", kind="probe_memory", prov=prov),
        "throughput": write_netcdf(
            described(thr), folder / "throughput.nc", kind="probe_throughput", prov=prov
        ),
        "estimate": write_netcdf(described(est), folder / "estimate.nc", kind="probe_estimate", prov=prov),
    }


def train_record(
    folder: Path,
    plan: str,
    P: int,  # noqa: N803
    g: int,
    *,
    accuracy: bool,
    prediction: bool,
    protocol: str = "random",
    seed: int = 0,
    oa: float = 0.7,
) -> Path:
    """One train record of 4 epochs of 3 steps; OA, AA and kappa at epochs 2 and 4 (last OA ``oa`` + 0.01 x seed)
    and a 20 x 27 predicted map if asked."""
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
        last_oa = oa + 0.01 * seed
        ds["oa"] = ("epoch", [np.nan, min(0.5, last_oa), np.nan, last_oa])
        ds["aa"] = ("epoch", [np.nan, 0.4, np.nan, last_oa - 0.1])
        ds["kappa"] = ("epoch", [np.nan, 0.45, np.nan, last_oa - 0.05])
        for m in ("oa", "aa", "kappa"):
            ds[f"{m}_summary"] = ds[m].isel(epoch=-1, drop=True)  # the last evaluation (one in the window)
    if prediction:
        ds["prediction"] = (("y", "x"), rng.integers(1, 4, (20, 27)))  # labels 1..3 over the synthetic scene
    ds.attrs.update({"dataset": "synthetic", "plan": plan, "P": P, "g": g, "protocol": protocol, "seed": seed, "tokens": 9,
                     "dtype": "float32", "device": DEVICE, "summary_epochs": 2, "epochs": E, "steps_per_epoch": 3,
                     "activation_checkpointing": "none", "partition_index": 0, "attention_kernel": "exact"})  # fmt: skip
    name = f"{plan}_N9_P{P}_g{g}_{protocol}_s{seed}.nc"
    return write_netcdf(described(ds), folder / "train" / "synthetic" / name, kind="train", prov=provenance())


def baseline_file(folder: Path, protocol: str, seed: int) -> Path:
    """One classical-baseline file (classifiers svm, rf) on the synthetic scene's ``protocol``."""
    oa = np.array([0.8, 0.75]) - (0.3 if protocol == "block" else 0.0) + 0.01 * seed
    ds = xr.Dataset(
        {
            "overall_accuracy": ("classifier", oa),
            "average_accuracy": ("classifier", oa - 0.1),
            "kappa": ("classifier", oa - 0.05),
        },
        coords={"classifier": ["svm", "rf"]},
        attrs={"dataset": "synthetic", "protocol": protocol, "seed": seed, "partition_index": 0},
    )
    return write_netcdf(
        described(ds),
        folder / "baseline" / f"synthetic_{protocol}_s{seed}.nc",
        kind="baseline",
        prov=provenance(),
    )


def study_files(folder: Path) -> list[Path]:
    """Two tiny tuning studies (tp, dchag_l) under the block protocol, as ``hsitp tune`` writes them: 5 trials, the best
    so far rising then flat, Dodge et al.'s expected best over 3 start-up trials."""
    from hsitp.tune.budget import best_so_far, expected_best

    out = []
    for plan, scores in (
        ("tp", [0.40, 0.55, np.nan, 0.58, 0.57]),
        ("dchag_l", [0.45, 0.50, 0.61, 0.60, 0.62]),
    ):
        mean, std = expected_best(scores[:3], n_max=3)
        ds = xr.Dataset(
            {
                "score": ("trial", np.array(scores)),
                "best_so_far": ("trial", best_so_far(scores)),
                "expected_best": ("n", mean),
                "expected_best_std": ("n", std),
                "val_oa": (("trial", "epoch"), np.tile(np.array(scores)[:, None], (1, 2))),
                "state": ("trial", np.where(np.isnan(scores), "pruned", "complete")),
                "wall_s": ("trial", np.full(5, 60.0)),
            },
            coords={"trial": np.arange(1, 6), "n": np.arange(1, 4), "epoch": [1, 2]},
            attrs={
                "plan": plan,
                "protocol": "block",
                "budget_trials": 5,
                "steps_per_trial": 80,
                "startup_trials": 3,
                "best_params": json.dumps(
                    {
                        "lr": 0.003,
                        "weight_decay": 0.1,
                        "label_smoothing": 0.1,
                        "warmup_steps": 20,
                        "per_class": 16,
                    }
                    | ({"groups": 2} if plan == "dchag_l" else {})
                ),
            },
        )
        path = folder / "tune" / f"{plan}_block.nc"
        out.append(write_netcdf(described(ds), path, kind="tune_study", prov=provenance({})))
    return out


def train_summary(folder: Path, oa: float = 0.7) -> tuple[Path, list[Path]]:
    """train/summary.nc made by the real `summarize` from synthetic records (tp, dchag_l at P = 2; both protocols;
    seeds 0, 1; last OA ``oa`` + 0.01 x seed: 0.1 is a smoke run's, far below the baselines' 0.5-0.8) and baseline
    files; returns it and the records."""
    from hsitp.contracts import TRAIN_SUMMARY
    from hsitp.train.summary import summarize

    records = [
        train_record(folder, plan, 2, g, accuracy=True, prediction=True, protocol=protocol, seed=seed, oa=oa)
        for plan, g in (("tp", 1), ("dchag_l", 2))
        for protocol in ("random", "block")
        for seed in (0, 1)
    ]
    baselines = [baseline_file(folder, protocol, seed) for protocol in ("random", "block") for seed in (0, 1)]
    ds = summarize(records, baselines)
    return write_netcdf(
        ds, folder / "train" / "summary.nc", kind=TRAIN_SUMMARY.kind, prov=provenance()
    ), records


def scene_file(folder: Path) -> Path:
    """A synthetic 20 x 27 scene with 6 bands and 3 classes, written as a `dataset` file (not real data)."""
    rng = np.random.default_rng(0)
    labels = np.zeros((20, 27), np.int16)
    labels[2:10, 3:12], labels[11:18, 5:20], labels[3:9, 15:25] = 1, 2, 3
    partition = np.stack(  # protocol "random": pixel by pixel; "block": left part train, right part test
        [
            np.where(labels > 0, np.where(rng.random(labels.shape) < 0.2, 1, 2), 0),
            np.where(labels > 0, np.where(np.arange(27)[None, :] < 9, 1, 2), 0),
        ]
    ).astype(np.int8)
    ds = xr.Dataset(
        {
            "cube": (("y", "x", "band"), rng.random((20, 27, 6), dtype=np.float32)),
            "labels": (("y", "x"), labels),
            "partition": (("protocol", "partition_index", "y", "x"), partition[:, None]),
        },
        coords={"y": np.arange(20), "x": np.arange(27), "band": np.arange(1, 7), "protocol": ["random", "block"],
                "partition_index": [0]},
        attrs={"dataset": "synthetic", "title": "synthetic test scene", "seed": 0,
               "class_names": json.dumps({"1": "a", "2": "b", "3": "c"})},
    )  # fmt: skip
    return write_netcdf(described(ds), folder / "synthetic.nc", kind="dataset", prov=provenance())


def render_every_figure(folder: Path) -> dict[str, Path]:
    """Every figure of the five report pages, saved by the real ``Publisher`` under ``folder/figures``, from small
    files: the committed smoke cost tables, the bench fixture (tests/fixtures/report_bench) and the synthetic
    scene, probe and train files above. Returns figure name -> PNG."""
    from hsitp.analysis import answer as analysis_answer
    from hsitp.analysis import cells as analysis_cells
    from hsitp.report import bench as rb
    from hsitp.report import cost as rc
    from hsitp.report import data as rd
    from hsitp.report import probe as rp
    from hsitp.report import train as rt
    from hsitp.report.common import Publisher, load_cost

    root = Path(__file__).resolve().parents[1]
    cost = {
        t: load_cost(root / "results/reference/smoke/cost" / f"{t}.nc", t)
        for t in ("rho", "ccr", "boundary", "scale", "plan")
    }
    bench = root / "tests/fixtures/report_bench"
    mvm = rb.load_model_vs_measured(bench / "model_vs_measured.nc")
    mb = rb.load_microbench(bench / "microbench.nc")
    scene = rd.load_scene(scene_file(folder))
    probe = probe_files(folder)
    mem, thr, est = (rp.load_memory(probe["memory"]), rp.load_throughput(probe["throughput"]),
                     rp.load_estimate(probe["estimate"]))  # fmt: skip
    summary_path, record_paths = train_summary(folder)
    runs, summary = rt.load_records(record_paths), analysis_cells.load_summary(summary_path)
    pages = {
        "data": {"scene": lambda: rd.scene_figure(scene)},
        "cost": {
            "rho": lambda: rc.rho_figure(cost["rho"]),
            "ccr_vs_p": lambda: rc.ccr_vs_p_figure(cost["ccr"]),
            "boundary": lambda: rc.boundary_figure(cost["boundary"]),
            "scale": lambda: rc.scale_figure(cost["scale"]),
            "plan": lambda: rc.plan_figure(cost["plan"]),
        },
        "bench": {
            "ccr_vs_p": lambda: rb.ccr_vs_p_figure(mvm),
            "predicted_vs_measured": lambda: rb.predicted_vs_measured_figure(mvm),
            "compute_vs_comm": lambda: rb.compute_vs_comm_figure(mb),
        },
        "probe": {
            "memory_parts": lambda: rp.memory_parts_figure(mem),
            "memory_vs_p": lambda: rp.memory_vs_p_figure(mem),
            "throughput": lambda: rp.throughput_figure(thr),
            "estimate": lambda: rp.estimate_figure(est),
        },
        "train": {
            "pareto": lambda: rt.pareto_figure(
                *analysis_answer.load_probe(probe["memory"], probe["throughput"]), summary
            ),
            "tune_budget": lambda: rt.budget_figure(rt.load_studies(study_files(folder))),
            "curves": lambda: rt.curves_figure(runs, summary),
            "accuracy_plot": lambda: rt.accuracy_figure(summary, runs),
            "resources": lambda: rt.resources_figure(runs),
            "prediction": lambda: rt.prediction_figure(runs, [scene], summary),
        },
    }
    out: dict[str, Path] = {}
    for stage, figures in pages.items():
        pub = Publisher(folder, stage)
        for name, make in figures.items():
            dataset = "synthetic" if (stage, name) == ("data", "scene") else None
            out[f"{stage}_{name}"] = pub.figure(make(), name, dataset).png
    return out
