"""The check that stops a SLURM run before submitting a job that no node of its partition can hold (hsitp.cluster
and the workflow's onstart hook), and the smoke config's requests. No SLURM needed: fake client tools on PATH (sinfo, squeue, sacct, scontrol, sbatch, scancel)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
import yaml

from hsitp.cluster import (
    ClusterFitError,
    JobRequest,
    NodeSize,
    misfits,
    parse_gres_gpus,
    parse_sinfo,
    read_partitions,
    request_from_resources,
)
from hsitp.config import validate_config

ROOT = Path(__file__).resolve().parents[1]


def _job(rule: str = "probe_run", cpus: int = 4, mem: int = 8000, gpus: int = 0, part: str | None = None):
    return JobRequest(rule, "P=4", part, cpus, mem, gpus, "probe.threads_per_rank x 4", "mem key", "gpu key")


def test_parse_sinfo_and_gres():
    """Catches a parser that misreads sinfo's partition marker, CPU ranges ('2+') or typed/socket-bound GPU gres, and
    so compares jobs with the wrong node."""
    nodes = parse_sinfo("gpu|64|512000|gpu:h100:4(S:0-1)\ncpu*|2+|24151|(null)\nmix|8|1000|gpu:2,shard:8\n")
    assert nodes[0] == NodeSize("gpu", 64, 512000, 4, default=False)
    assert nodes[1] == NodeSize("cpu", 2, 24151, 0, default=True)
    assert nodes[2].gpus == 2
    assert [parse_gres_gpus(g) for g in ("(null)", "gpu:1", "gpu", "gpu:a100:8")] == [0, 1, 1, 8]
    with pytest.raises(ClusterFitError, match="unexpected line"):
        parse_sinfo("only|three|fields")


def test_misfits_one_line_per_rule_naming_the_key_and_the_node():
    """Catches a check that lets a job larger than every node through (it would stay PENDING forever), that repeats
    a rule once per job, or whose line does not say which config key to lower and what the node has."""
    nodes = [NodeSize("ci", 2, 24000, 0, default=True), NodeSize("gpu", 16, 64000, 2)]
    assert misfits([_job(cpus=2, mem=4000)], nodes) == []
    lines = misfits([_job(), _job(), _job("train", cpus=1, mem=100, gpus=1)], nodes)
    assert len(lines) == 2
    assert lines[0].startswith("probe_run (P=4) on partition ci: needs 4 CPUs per node")
    assert "probe.threads_per_rank x 4" in lines[0] and "largest node 2" in lines[0]
    assert "1 GPUs per node (gpu key), largest node 0" in lines[1]
    # the GPU partition holds the GPU job; an unknown partition is named with the ones that exist
    assert misfits([_job("train", cpus=1, mem=100, gpus=2, part="gpu")], nodes) == []
    assert "partition nope not found (partitions: ci, gpu)" in misfits([_job(part="nope")], nodes)[0]
    # every amount fits some node, but no single node has all three
    split = [NodeSize("p", 16, 1000, 0, True), NodeSize("p", 2, 64000, 0)]
    assert "no single node of partition p has all three" in misfits([_job(cpus=8, mem=8000)], split)[0]


def test_request_reads_resources_as_the_slurm_plugin_does():
    """Catches a request computed differently from what sbatch gets: --cpus-per-task (else threads), --mem per node,
    --gpus per job spread over the nodes, --gres per node."""
    keys = {"cpus": "c", "mem": "m", "gpus": "g"}
    one = request_from_resources(
        "r", "", {"cpus_per_task": 8, "mem_mb": 16000, "gpu": 4, "nodes": 1}, 8, keys
    )
    assert (one.cpus_per_node, one.mem_mb_per_node, one.gpus_per_node) == (8, 16000, 4)
    multi = request_from_resources(
        "r", "", {"cpus_per_task": 2, "mem_mb": 4000, "gres": "gpu:2", "nodes": 2}, 4, keys
    )
    assert (multi.cpus_per_node, multi.gpus_per_node) == (2, 2)
    single = request_from_resources("r", "", {"mem_mb": 1000, "slurm_partition": "x"}, 3, keys)
    assert (single.cpus_per_node, single.gpus_per_node, single.partition) == (3, 0, "x")


def test_read_partitions_reports_a_failing_sinfo():
    """Catches a check that would treat a broken sinfo (no controller) as 'no nodes' and stop with a misleading
    line, or pass silently."""

    class Failed:
        returncode, stdout, stderr = 1, "", "slurm_load_partitions: Unable to contact slurm controller"

    with pytest.raises(ClusterFitError, match="Unable to contact"):
        read_partitions(run=lambda *a, **k: Failed())


def test_smoke_config_asks_for_no_gpu():
    """Catches a smoke run that inherits a GPU request from config/config.yaml (sbatch then rejects the job on a
    CPU-only cluster: 'Invalid generic resource (gres) specification')."""
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    smoke = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())

    def merge(a: dict, b: dict) -> dict:
        return {**a, **{k: merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
                        for k, v in b.items()}}  # fmt: skip

    merged = validate_config(merge(cfg, smoke))
    gpus = {
        rule: res["gpus_per_rank"]
        for rule, res in merged.resources.model_dump().items()
        if "gpus_per_rank" in res
    }
    assert gpus and set(gpus.values()) == {0}, gpus


# Every SLURM client tool the executor plugin (snakemake-executor-plugin-slurm 2.x) or the fit check runs. The
# plugin refuses to load when neither `sacct` nor `squeue` is on PATH and asks `scontrol show config` for MinJobAge,
# so faking `sinfo` alone made the test pass only where SLURM's client tools happen to be installed (CI) and fail on
# a plain machine. `sbatch` leaves a marker: the test asserts nothing was submitted.
FAKE_SLURM = {
    "sinfo": "echo 'ci*|2|24000|(null)'",
    "squeue": "exit 0",
    "sacct": "exit 0",
    "scontrol": "echo 'MinJobAge               = 300 sec'",
    "scancel": "exit 0",
    "sbatch": 'touch "$HSITP_FAKE_SBATCH_MARK"; echo "fake sbatch: no job may be submitted" >&2; exit 1',
}


def _fake_slurm_client(bindir: Path, *, submitted: Path) -> Path:
    """A directory of fake SLURM client tools (a cluster of 2-CPU nodes) for the front of PATH."""
    bindir.mkdir()
    for tool, body in FAKE_SLURM.items():
        body = body.replace("$HSITP_FAKE_SBATCH_MARK", str(submitted))
        (bindir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / tool).chmod(0o755 | stat.S_IXUSR)
    return bindir


@pytest.mark.slow
def test_slurm_run_stops_before_submitting_a_job_no_node_holds(workflow_copy):
    """The whole smoke DAG through `--profile slurm` against a cluster of 2-CPU nodes (a fake sinfo): probe_run at
    P = 4 asks for 4 CPUs on one node. Catches a workflow that submits it anyway (it would sit PENDING, reason
    PartitionConfig, while Snakemake waits without a word) instead of stopping at once with one line naming
    probe.threads_per_rank and the node's 2 CPUs."""
    wf = workflow_copy
    (wf.root / "slurm").mkdir()
    (wf.root / "slurm" / "config.yaml").write_text((ROOT / "slurm" / "config.yaml").read_text())
    fake = _fake_slurm_client(wf.root / "bin", submitted=wf.root / "sbatch_called")
    wf.env["PATH"] = f"{fake}{os.pathsep}{wf.env['PATH']}"
    t0 = time.monotonic()
    run = wf.snakemake(
        "--cores", "all", "--profile", "slurm", "--configfile", "config/smoke.yaml", timeout=120
    )
    took = time.monotonic() - t0
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert took < 60, took
    lines = [ln for ln in out.splitlines() if ln.startswith("  probe_run (P=4) on partition ci")]
    assert len(lines) == 1, out[-3000:]
    assert "4 CPUs per node (probe.threads_per_rank = 1 x 4 ranks per node" in lines[0]
    assert "largest node 2" in lines[0]
    assert "submitted with SLURM jobid" not in out
    assert not (wf.root / "sbatch_called").exists(), "sbatch was called"


def test_local_run_stops_before_a_rank_job_spread_over_nodes(workflow_copy):
    """Off SLURM, resources.bench_run.ranks_per_node = 1 below P = 2 planned `hsitp launch --nodes 2`, which fails
    at its start for want of an allocation (after the jobs before it ran). Catches a local run that starts any
    job: it stops at once with one line naming the key and what to set."""
    wf = workflow_copy
    (wf.root / "config" / "spread.yaml").write_text("resources: {bench_run: {ranks_per_node: 1}}\n")
    target = "results/smoke/bench/partial/microbench_P2_l0.nc"
    run = wf.snakemake(
        target, "--cores", "2", "--configfile", "config/smoke.yaml", "config/spread.yaml", timeout=120
    )
    out = run.stdout + run.stderr
    assert run.returncode != 0, out[-3000:]
    assert "hsitp: resources.bench_run.ranks_per_node = 1 < P = 2 spreads the ranks over nodes" in out, out[
        -3000:
    ]
    assert not (wf.root / "logs" / "smoke" / "bench").exists(), "a job started"
