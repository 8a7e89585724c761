"""Issue 36, deliverable 3: time to accuracy (MLPerf's training metric) in train/summary.nc: the steps each cell
needs until its seed-mean test OA first reaches the SVM baseline's OA and tp's OA less the verdict margin."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from report_synthetic import baseline_file

from hsitp.contracts import TRAIN_SUMMARY
from hsitp.io import provenance, write_netcdf
from hsitp.probe.tracker import KINDS, PARTS
from hsitp.train.record import build_dataset
from hsitp.train.summary import TARGETS, summarize

NAN = float("nan")
STEPS = 5  # train.steps_per_epoch of every record
# test OA per epoch 1..6; epochs 1 and 3 not evaluated (train.eval_every 2; the last 2 are the summary window)
CURVES: dict[tuple[str, str], list[list[float]]] = {
    ("tp", "random"): [
        [NAN, 0.60, NAN, 0.82, 0.84, 0.86],
        [NAN, 0.70, NAN, 0.78, 0.80, 0.82],
        [NAN, 0.50, NAN, 0.74, 0.83, 0.84],
    ],
    ("dchag_l", "random"): [
        [
            NAN,
            0.90,
            NAN,
            0.84,
            0.84,
            0.84,
        ],  # above both targets at epoch 2, then falls: the first crossing counts
        [NAN, 0.80, NAN, 0.86, 0.86, 0.86],
        [NAN, 0.75, NAN, 0.78, 0.78, 0.78],  # never reaches the svm target (0.805) nor tp - delta (0.8217)
    ],
    ("dchag_c", "random"): [[NAN, 0.40, NAN, 0.50, 0.50, 0.50 + 0.01 * s] for s in range(3)],  # never reaches
    ("dchag_l", "block"): [
        [NAN, 0.99, NAN, 0.99, 0.99, 0.99] for _ in range(2)
    ],  # no baseline, no tp: no target
}


def _record(folder: Path, plan: str, protocol: str, seed: int, oa: list[float]) -> Path:
    """A training record built by the real ``build_dataset`` (P = 2), OA curve ``oa``."""
    p = 2
    history = [
        {
            "epoch": e,
            **dict.fromkeys(("oa", "aa", "kappa"), v),
            "per_class": [v, v],
            "loss": 1.0,
            "lr": 0.1,
            "tokens_per_s": 100.0,
            "step_time": [0.1] * p,
            "comm_time": [0.01] * p,
            "ccr_inline": [0.1] * p,
            "peak_allocated": [1.0] * p,
            "peak_reserved": [NAN] * p,
            "memory": np.ones((p, len(PARTS), len(KINDS))),
        }
        for e, v in enumerate(oa, start=1)
    ]
    attrs = {
        "title": f"synthetic training record {plan} {protocol} s{seed}",
        "dataset": "synthetic",
        "plan": plan,
        "P": p,
        "ranks": p,
        "g": 1 if plan == "tp" else 2,
        "protocol": protocol,
        "seed": seed,
        "tokens": 9,
        "recipe_hash": "r",
        "recipe": json.dumps({"train": {"steps_per_epoch": STEPS, "eval_every": 2}, "seed": 0}),
        "eval_every": 2,
        "steps_per_epoch": STEPS,
        "partition_index": 0,
        "attention_kernel": "exact",
    }
    ds = build_dataset(history, world_size=p, summary_epochs=2, attrs=attrs)
    path = folder / f"{plan}_{protocol}_s{seed}.nc"
    return write_netcdf(ds, path, kind="train", prov=provenance({}))


def test_steps_to_target_from_the_seed_mean_curve_and_each_seed(tmp_path: Path) -> None:
    """Catches steps counted from the epoch's index instead of its number (x steps_per_epoch), a crossing taken at
    a later (or the last) epoch instead of the first, a NaN (not evaluated) epoch counted as reached, the
    tp - delta target taken from tp's last epoch instead of its summary OA, a target borrowed from another protocol
    (no baseline or tp there must give NaN), a cell that never reaches its target given a step count instead of
    NaN, a seed that never reaches it hidden from steps_to_target_max, and a summary that write_netcdf refuses
    (no units or long_name)."""
    records = [
        _record(tmp_path, plan, protocol, s, oa)
        for (plan, protocol), curves in CURVES.items()
        for s, oa in enumerate(curves)
    ]
    baselines = [baseline_file(tmp_path, "random", seed) for seed in (0, 1)]  # svm OA 0.80, 0.81: mean 0.805
    written = write_netcdf(
        summarize(records, baselines, margin=0.01),
        tmp_path / "summary.nc",
        kind=TRAIN_SUMMARY.kind,
        prov=provenance({}),
    )
    ds = TRAIN_SUMMARY.read(written)
    assert list(ds["target"].values) == list(TARGETS) == ["svm", "tp_minus_delta"]
    assert "eval_every" in ds.attrs["time_to_accuracy"]

    def cell(plan: str, protocol: str) -> xr.Dataset:
        i = np.flatnonzero((ds["plan"].values == plan) & (ds["protocol"].values == protocol))
        assert i.size == 1
        return ds.isel(cell=int(i[0]))

    def row(c: xr.Dataset, var: str) -> list[float]:
        return [float(v) for v in c[var].sel(target=list(TARGETS)).values]

    tp_oa = np.mean(
        [np.mean(c[-2:]) for c in CURVES[("tp", "random")]]
    )  # 0.8317: the window mean, not the last
    target = [0.805, tp_oa - 0.01]
    eq = {"nan_ok": True}

    tp = cell("tp", "random")
    assert row(tp, "target_oa") == pytest.approx(target)
    # seed mean: 0.60 (e2), 0.78 (e4), 0.8233 (e5), 0.84 (e6): both targets first reached at epoch 5
    assert row(tp, "steps_to_target") == [25.0, 25.0]
    assert row(tp, "target_reached") == [1, 1]
    # svm: seeds at epochs 4, 6, 5; tp - delta (0.8217): epochs 5, never (0.82 < 0.8217), 5
    assert row(tp, "steps_to_target_min") == [20.0, 25.0]
    assert row(tp, "steps_to_target_max") == pytest.approx([30.0, NAN], **eq)
    assert row(tp, "seeds_reaching_target") == [3, 2]

    dl = cell("dchag_l", "random")  # steps_per_epoch from the recipe JSON only
    assert row(dl, "target_oa") == pytest.approx(target)
    # seed mean: 0.8167 (e2, >= 0.805 but < 0.8217), 0.8267 (e4 on): svm at epoch 2, tp - delta at epoch 4
    assert row(dl, "steps_to_target") == [10.0, 20.0]
    assert row(dl, "steps_to_target_min") == [10.0, 10.0]
    assert row(dl, "steps_to_target_max") == pytest.approx([NAN, NAN], **eq)  # seed 2 never reaches either
    assert row(dl, "seeds_reaching_target") == [2, 2]
    assert float(dl["steps_per_epoch"]) == STEPS

    dc = cell("dchag_c", "random")  # never reaches: NaN, not reached
    assert row(dc, "target_oa") == pytest.approx(target)
    for var in ("steps_to_target", "steps_to_target_min", "steps_to_target_max"):
        assert np.isnan(row(dc, var)).all(), var
    assert row(dc, "target_reached") == [0, 0]
    assert row(dc, "seeds_reaching_target") == [0, 0]

    blk = cell("dchag_l", "block")  # no baseline under the block protocol and no tp there: no target at all
    assert np.isnan(row(blk, "target_oa")).all()
    assert np.isnan(row(blk, "steps_to_target")).all()
    assert row(blk, "target_reached") == [0, 0]

    for var in ("steps_to_target", "steps_to_target_min", "steps_to_target_max", "target_oa"):
        assert ds[var].dims == ("cell", "target")
        assert ds[var].attrs["units"] == "1" and ds[var].attrs["long_name"]


def test_time_to_accuracy_without_baselines(tmp_path: Path) -> None:
    """Catches a summary that fails (or invents an svm target) when no baseline file is given."""
    records = [_record(tmp_path, "tp", "random", s, oa) for s, oa in enumerate(CURVES[("tp", "random")])]
    ds = summarize(records)
    tp = ds.isel(cell=0)
    assert np.isnan(float(tp["target_oa"].sel(target="svm")))
    assert int(tp["target_reached"].sel(target="svm")) == 0
    assert int(tp["target_reached"].sel(target="tp_minus_delta")) == 1
    assert float(tp["steps_to_target"].sel(target="tp_minus_delta")) > 0
    assert float(tp["steps_per_epoch"]) == STEPS
