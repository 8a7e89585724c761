"""The bench stage through Snakemake and torchrun (P = 1 and 2, gloo), on a tiny sweep; then nothing to re-run,
also after editing keys no bench rule reads. The same run builds a dataset and a cost table, so that every kind of
file the DAG writes can be checked for units, long names and a title in one workflow copy.

The smoke sweep itself (config/smoke.yaml, a few minutes) is too slow for CI; this test runs the same rules,
launcher and subcommands on a sweep of seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from nc_checks import assert_described

from hsitp.cost.calibration import load_calibration
from hsitp.io import json_attr, read_netcdf

TARGETS = [  # config/smoke.yaml sets run: smoke
    "results/smoke/bench/microbench.nc",
    "results/smoke/bench/calibration.nc",
    "results/smoke/bench/model_vs_measured.nc",
]
# Other stages' outputs built in the same run (kinds dataset and cost_ccr), for the metadata walk.
OTHER_TARGETS = ["results/smoke/data/indian_pines.nc", "results/smoke/cost/ccr.nc"]
# Collective sizes reach 16 MB so the bandwidth term stands out of gloo's per-call jitter (several ms on a busy
# 2-core machine): with 1 MB or 4 MB at most, a fit sometimes found no size dependence and calibration failed.
TINY = {
    "bench": {
        "world_sizes": [1, 2],
        "ops": ["mlp", "attn_token", "layernorm_sharded", "agg_dchag_l"],
        "N": [16, 36],
        "D": [16],
        "L": [4],
        "warmup": 1,
        "repeats": 3,
        "passes": 3,
        "min_region_s": 0.0,
        "collectives": {
            "sizes_bytes": [4096, 1048576, 4194304, 16777216],
            "warmup": 1,
            "repeats": 6,
            "min_region_s": 0.0,
        },
    }
}


@pytest.mark.slow
def test_bench_dag_writes_three_files_then_nothing_to_do(workflow_copy):
    """Catches: a broken torchrun launch line, partials that do not merge, a calibration the cost model rejects,
    a comparison without held-out points, or rules whose params change between runs (re-running forever)."""
    tmp_path = workflow_copy.root
    (tmp_path / "config" / "tiny_bench.yaml").write_text(yaml.safe_dump(TINY))
    args = [*TARGETS, "--cores", "2", "--configfile", "config/smoke.yaml", "config/tiny_bench.yaml"]
    run = workflow_copy.snakemake(*OTHER_TARGETS, *args, timeout=300)
    logs = "".join(p.read_text() for p in sorted((tmp_path / "logs" / "smoke" / "bench").glob("*.log")))
    assert run.returncode == 0, run.stderr[-3000:] + logs[-3000:]

    mb = read_netcdf(tmp_path / TARGETS[0], kind="microbench")
    assert mb["P"].values.tolist() == [1, 2]
    assert json_attr(mb, "world_sizes") == [1, 2] and mb.attrs["backend"] == "gloo"
    comm = mb["time_median"].sel(mode="comm", dtype="float32", L=4)
    assert (comm.sel(P=1) == 0).all() and (comm.sel(P=2) > 0).all()
    assert (mb["bytes_moved"].sel(P=2, L=4) > 0).all() and (mb["bytes_moved"].sel(P=1, L=4) == 0).all()
    assert np.isfinite(mb["sanity_ratio"].sel(P=2, L=4)).all()
    assert np.isfinite(mb["time"].sel(L=4)).all()  # every pass filled its share of the repeats
    assert np.isfinite(mb["coll_time"].sel(P=2)).all()
    assert not {"flops", "traffic_bytes", "trace_factor_bytes"} & set(mb.variables)  # measurements only
    assert json_attr(mb, "layer_shape")["heads"] == 8 and int(mb.attrs["head_padding"]) == 0

    cal = load_calibration(tmp_path / TARGETS[1])  # the cost model's own schema check
    assert json_attr(cal, "world_sizes") == [2]
    assert cal["op"].values.tolist() == TINY["bench"]["ops"]

    mvm = read_netcdf(tmp_path / TARGETS[2], kind="model_vs_measured")
    flags = mvm["held_out"].sel(P=2).values
    assert (flags == 1).any() and (flags == 0).any()
    summary = json_attr(mvm, "summary")
    assert summary["held_out"]["n_points"] >= 3
    assert np.isfinite(summary["held_out"]["median_abs_rel_err_refined"])

    # Every netCDF of the run (partials, merged, calibration, comparison, dataset, cost table) says what it holds.
    written = sorted((tmp_path / "results" / "smoke").rglob("*.nc"))
    kinds = {read_netcdf(p).attrs["kind"] for p in written}
    assert kinds == {"microbench", "calibration", "model_vs_measured", "dataset", "cost_ccr"}, kinds
    for path in written:
        assert_described(read_netcdf(path), str(path.relative_to(tmp_path)))
    # the merge keeps the partial files' per-variable attributes
    assert mb["time"].attrs["units"] == "s" and mb["bytes_moved"].attrs["units"] == "B"
    assert not list((tmp_path / "results").rglob("*.tmp"))  # no temporary file left behind
    # every step logs what it read and found
    for name in ("merge", "calibrate", "compare"):
        assert (tmp_path / f"logs/smoke/bench/{name}.log").read_text().strip(), f"{name}.log is empty"

    assert workflow_copy.planned(*args) == {}

    # Keys no bench rule reads (the one-GPU checks', the cost model's, job resources): nothing to re-run.
    unread = {
        "bench": {"roofline": {"copy_bytes": 4096}, "shard": {"hardware": "paper-intra"}},
        "cost": {"overlap": 0.5},
        "resources": {"bench_run": {"mem_mb_per_rank": 123, "runtime": 7}},
    }
    (tmp_path / "config" / "unread.yaml").write_text(yaml.safe_dump(unread))
    assert workflow_copy.planned(*args, "config/unread.yaml") == {}

    # A key only calibrate reads: calibrate and compare re-run (params changed), no timing job does.
    (tmp_path / "config" / "fit.yaml").write_text(
        yaml.safe_dump({"bench": {"fit": {"holdout_fraction": 0.5}}})
    )
    plan = workflow_copy.planned(*args, "config/fit.yaml")
    assert {rule for rule, _ in plan.values()} == {"bench_calibrate", "bench_compare"}, plan
    assert "params" in plan[TARGETS[1]][1].lower(), plan[TARGETS[1]]
