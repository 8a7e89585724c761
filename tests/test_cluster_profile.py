"""The SLURM profile (slurm/config.yaml) and what a rank job asks SLURM for, without a SLURM: Snakemake's dry run
through `--profile slurm`, and the sbatch / srun options the installed executor plugin builds from those
resources. The real SLURM run is .ci/slurm_smoke.sh (README: "Running on a cluster")."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string
from snakemake_executor_plugin_slurm_jobstep import get_cpu_setting, get_gpu_setting, get_node_setting

from hsitp.launch import rank_layout

ROOT = Path(__file__).resolve().parents[1]
PROFILE = yaml.safe_load((ROOT / "slurm" / "config.yaml").read_text())
# Site settings are overrides (README), never part of the shipped profile.
SITE_KEYS = ("slurm_account", "slurm_partition", "gpu_model", "constraint", "qos", "clusters", "reservation")


def test_profile_is_where_snakemake_looks_and_site_neutral():
    """Catches a profile Snakemake would not find from the repository root (it searches ./slurm, not
    ./profiles/slurm), a status command that needs an accounting database, or a hard-coded site setting."""
    assert (ROOT / "slurm" / "config.yaml").is_file()
    assert PROFILE["executor"] == "slurm"
    assert PROFILE["slurm-status-command"] == "squeue"
    assert isinstance(PROFILE["jobs"], int) and PROFILE["jobs"] >= 1
    assert "set-resources" not in PROFILE  # a --set-resources on the command line would replace it all
    text = yaml.safe_dump({k: v for k, v in PROFILE.items()})
    assert not [k for k in SITE_KEYS if re.search(rf"\b{k}\b", text)], "site settings belong in overrides"
    assert not any(k in PROFILE for k in ("slurm-qos", "slurm-reservation", "slurm-partition-config"))


def test_ci_min_job_age_covers_the_status_delays():
    """squeue forgets a finished job after MinJobAge seconds; the plugin falls back to sacct (no accounting here)
    below 3 x its initial status delay, and polls at most every 180 s. Catches a CI SLURM whose MinJobAge would let
    a finished job vanish between two polls (the job would look queued forever)."""
    slurm_sh = (ROOT / ".ci" / "slurm.sh").read_text()
    min_job_age = int(re.search(r"^MIN_JOB_AGE=(\d+)", slurm_sh, flags=re.M).group(1))
    assert min_job_age >= 3 * PROFILE["slurm-init-seconds-before-status-checks"]
    assert min_job_age > 180


@pytest.fixture
def slurm_workflow(workflow_copy):
    shutil.copytree(ROOT / "slurm", workflow_copy.root / "slurm")
    return workflow_copy


def _dry_run(wf, *args: str) -> dict[str, dict[str, Any]]:
    """{key: {"resources": {...}, "threads": n, "shell": str}} of every job `snakemake -n -p` would run, keyed by
    output. A rank rule (bench_run, probe_run, train) prints its `message:` instead of its resources: that message
    carries the request (`asks for nodes=... tasks=... cpus_per_task=... mem_mb=... runtime=...`), and the job is
    keyed by the log it names (`tail -f LOG`)."""
    run = wf.snakemake("-n", "-p", *args, timeout=180)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    jobs: dict[str, dict[str, Any]] = {}
    job: dict[str, Any] = {}
    lines = run.stdout.splitlines()
    for i, line in enumerate(lines):
        s = line.strip()
        message = re.match(r"^(?:Job \d+: )?(\w+): .*asks for (.*?); .*tail -f (\S+)$", s)
        if message:
            job = {
                "rule": message.group(1),
                "resources": dict(kv.split("=", 1) for kv in message.group(2).split()),
            }
            jobs[message.group(3)] = job
        elif s.startswith("output:"):
            job = {"output": s.split(":", 1)[1].strip()}
            jobs[job["output"]] = job
        elif s.startswith("threads:"):
            job["threads"] = int(s.split(":", 1)[1])
        elif s.startswith("resources:"):
            job["resources"] = dict(kv.split("=", 1) for kv in s.split(":", 1)[1].strip().split(", "))
        elif line.startswith("Shell command:"):
            job["shell"] = line.split(":", 1)[1].strip() or lines[i + 1].strip()
    return jobs


TINY = {"bench": {"world_sizes": [2, 4], "threads_per_rank": 3}}


@pytest.mark.slow
def test_dry_run_through_the_profile_asks_for_every_rank(slurm_workflow):
    """`--profile slurm` as the README runs it, with `--cores 1` on the planning host: the timing job at P still
    asks SLURM for P x threads_per_rank CPUs and P ranks' memory on one exclusive node, also with a site override
    on the command line. Catches requests capped by the submit host's cores, an override that drops the exclusive
    node, or a profile key the installed Snakemake rejects."""
    wf = slurm_workflow
    (wf.root / "config" / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    target = "results/smoke/bench/partial/microbench_P4_l0.nc"
    jobs = _dry_run(wf, "--profile", "slurm", "--cores", "1", "--configfile", "config/smoke.yaml",
                    "config/tiny.yaml", "--set-resources", "bench_run:constraint=h100", "--", target)  # fmt: skip
    job = jobs["logs/smoke/bench/run_P4_l0.log"]
    res = job["resources"]
    assert res["cpus_per_task"] == "12" and res["mem_mb"] == "8000"  # 4 ranks x 3 threads, 4 x 2000 MB
    assert (res["nodes"], res["tasks"]) == ("1", "1")
    # a site override (README) adds to the job's request; the timing job's exclusive node survives it (the
    # override itself is the plugin's: test_sbatch_for_one_node_cpu_and_gpu_jobs)
    assert res["slurm_extra"] == "--exclusive"
    assert job["shell"].startswith(
        "python -m hsitp.torchrun --standalone --nnodes 1 --nproc-per-node 4 -m hsitp bench run"
    )


@pytest.mark.slow
def test_dry_run_over_two_nodes(slurm_workflow):
    """ranks_per_node below P: two nodes, one task of ranks_per_node x threads CPUs each, memory per node, the
    `mpi` marker, GPUs per node, and the `hsitp launch` line. Catches a multi-node job shaped like a one-node one."""
    wf = slurm_workflow
    overlay = TINY | {"resources": {"bench_run": {"ranks_per_node": 2, "gpus_per_rank": 1}}}
    (wf.root / "config" / "two.yaml").write_text(yaml.safe_dump(overlay))
    target = "results/smoke/bench/partial/microbench_P4_l0.nc"
    jobs = _dry_run(wf, "--profile", "slurm", "--cores", "1", "--configfile", "config/smoke.yaml",
                    "config/two.yaml", "--", target)  # fmt: skip
    job = jobs["logs/smoke/bench/run_P4_l0.log"]
    res = job["resources"]
    assert (res["nodes"], res["tasks"], res["cpus_per_task"], res["mem_mb"]) == ("2", "2", "6", "4000")
    # gres per node, mpi and no per-job gpu (RankLayout.resources): test_sbatch_for_multi_node_jobs
    assert job["shell"].startswith(
        "hsitp launch --nodes 2 --ranks-per-node 2 --cpus-per-node 6 --gpus-per-node 2 -- bench run --world-size 4"
    )


class _Resources(dict):
    """The part of Snakemake's job resources the plugin reads: .get() and attribute access."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class _Job:
    def __init__(self, resources: dict[str, Any], threads: int) -> None:
        self.resources = _Resources({k: v for k, v in resources.items() if v is not None})
        self.threads = threads
        self.name = "bench_run"

    def is_group(self) -> bool:
        return False


def _sbatch(P: int, rpn: int | None, *, threads: int = 1, gpus: int = 0) -> tuple[str, _Job]:
    lay = rank_layout(
        P, ranks_per_node=rpn, threads_per_rank=threads, mem_mb_per_rank=1000, gpus_per_rank=gpus
    )
    res = lay.resources() | {"runtime": 30, "slurm_extra": "--exclusive"}
    job = _Job(res, threads=2)  # threads as capped by a 2-core submit host: must not matter
    params = {
        "run_uuid": "RUN",
        "slurm_logfile": "logs/slurm/x/%j.log",
        "comment_str": "rule_bench_run",
        "account": "",
        "partition": "",
        "workdir": "/work",
    }
    return get_submit_command(job, params) + set_gres_string(job), job


def test_sbatch_for_one_node_cpu_and_gpu_jobs():
    """Catches the plugin's defaults reshaping a one-node rank job: --ntasks-per-gpu from `tasks` on GPU jobs, CPUs
    from the (host-capped) threads instead of cpus_per_task, or GPUs missing from the job step."""
    cpu, job = _sbatch(4, None, threads=2)
    assert "--ntasks=1" in cpu and "--cpus-per-task=8" in cpu and "--mem 4000" in cpu and "--nodes=1" in cpu
    assert "--exclusive" in cpu and "-t 30" in cpu and "--gpus" not in cpu
    gpu, job = _sbatch(4, None, threads=2, gpus=1)
    assert "--gpus=4" in gpu and "--cpus-per-task=8" in gpu and "ntasks-per-gpu" not in gpu
    # inside the allocation the job step runs the job as one task with all of it
    step = f"{get_cpu_setting(job, True)} {get_gpu_setting(job)} {get_node_setting(job)}"
    assert step == "--cpus-per-task=8 --gpus=4 --nodes=1"
    assert "mpi" not in job.resources  # so the step wraps it in `srun -n1` on one node


def test_sbatch_for_multi_node_jobs():
    """Catches a multi-node job that gets one task, GPUs per job instead of per node, or no `mpi` marker."""
    cpu, job = _sbatch(8, 4, threads=2)
    assert "--nodes=2" in cpu and "--ntasks=2" in cpu and "--cpus-per-task=8" in cpu and "--mem 4000" in cpu
    assert "mpi" in job.resources  # the job step runs `hsitp launch` itself: it calls srun
    gpu, job = _sbatch(8, 4, threads=2, gpus=1)
    assert "--nodes=2" in gpu and "--ntasks=2" in gpu and "--gres=gpu:4" in gpu
    assert "--gpus=" not in gpu and "ntasks-per-gpu" not in gpu
