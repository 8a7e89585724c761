"""How a rank job is laid out and launched (src/hsitp/launch.py): resources, torchrun / srun lines, and a real
two-"node" torchrun world on this machine (two `hsitp launch --node` processes given the variables srun sets)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hsitp.io import read_netcdf
from hsitp.launch import (
    PORT_BASE,
    PORT_SPAN,
    RESOURCE_KEYS,
    TORCHRUN,
    LaunchError,
    first_host,
    launch_prefix,
    node_torchrun_argv,
    rank_layout,
    rendezvous_port,
    srun_argv,
)

HSITP = str(Path(sys.executable).with_name("hsitp"))
BIN = str(Path(sys.executable).parent)


def layout(P: int, rpn: int | None = None, *, threads: int = 2, mem: int = 1000, gpus: int = 0):
    return rank_layout(
        P, ranks_per_node=rpn, threads_per_rank=threads, mem_mb_per_rank=mem, gpus_per_rank=gpus
    )


def test_one_node_layout_asks_for_every_rank_in_one_task():
    """Catches a job that asks SLURM for one rank's CPUs or memory while torchrun starts P ranks in it, or that
    lets the plugin turn `tasks` into --ntasks-per-gpu on a GPU job."""
    lay = layout(4, None, threads=2, mem=1000, gpus=1)
    assert (lay.nodes, lay.ranks_per_node, lay.threads) == (1, 4, 8)
    res = lay.resources()
    assert tuple(res) == RESOURCE_KEYS
    assert res == {
        "mem_mb": 4000,
        "nodes": 1,
        "tasks": 1,
        "cpus_per_task": 8,
        "gpu": 4,
        "gres": None,
        "tasks_per_gpu": 0,
        "mpi": None,
    }
    # ranks_per_node at or above P is still one node
    assert layout(4, 8).resources() == layout(4, None).resources() | {"gpu": 0}
    assert (
        launch_prefix(lay) == "python -m hsitp.torchrun --standalone --nnodes 1 --nproc-per-node 4 -m hsitp"
    )


def test_one_rank_starts_without_a_launcher():
    """Catches a P = 1 job started under torchrun, whose agent is a second Python importing torch (about 2 s of CPU
    a job) for a rank that needs no rendezvous, or a one-rank job whose resources differ from a one-node job's."""
    lay = layout(1, None, threads=2, mem=1000)
    assert launch_prefix(lay) == "hsitp"
    assert lay.resources() == layout(1, 4, threads=2, mem=1000).resources()
    assert (lay.resources()["tasks"], lay.resources()["cpus_per_task"]) == (1, 2)


def test_multi_node_layout_asks_per_node_and_marks_the_job_mpi():
    """Catches memory or GPUs asked per job where SLURM reads them per node (--mem, --gres), a missing `mpi`
    resource (the job step would wrap the launch in a one-node `srun -n1`), or a launch line for the wrong
    shape."""
    lay = layout(8, 4, threads=3, mem=1000, gpus=1)
    assert (lay.nodes, lay.ranks_per_node, lay.cpus_per_node, lay.gpus_per_node) == (2, 4, 12, 4)
    assert lay.resources() == {
        "mem_mb": 4000,
        "nodes": 2,
        "tasks": 2,
        "cpus_per_task": 12,
        "gpu": None,
        "gres": "gpu:4",
        "tasks_per_gpu": 0,
        "mpi": "srun",
    }
    assert layout(8, 4).resources()["gres"] is None  # CPU ranks ask for no GPU
    assert launch_prefix(lay) == (
        "hsitp launch --nodes 2 --ranks-per-node 4 --cpus-per-node 12 --gpus-per-node 4 --"
    )


@pytest.mark.parametrize(
    ("P", "rpn", "message"),
    [
        (6, 4, "resources.bench_run.ranks_per_node = 4 does not divide P = 6"),
        (4, 0, "resources.bench_run.ranks_per_node must be an integer >= 1 or null, got 0"),
        (4, "2", "resources.bench_run.ranks_per_node must be an integer >= 1 or null, got '2'"),
        (0, None, "ranks (P) must be an integer >= 1, got 0"),
    ],
)
def test_bad_layouts_name_the_config_key(P, rpn, message):
    """Catches uneven nodes (torchrun starts the same --nproc-per-node everywhere) or a silent fallback."""
    with pytest.raises(LaunchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rank_layout(
            P,
            ranks_per_node=rpn,
            threads_per_rank=1,
            mem_mb_per_rank=1,
            gpus_per_rank=0,
            key="resources.bench_run.ranks_per_node",
        )


@pytest.mark.parametrize(
    ("nodelist", "head"),
    [
        ("node01", "node01"),
        ("ci1,ci2", "ci1"),
        ("gpu[003-005,010],cpu01", "gpu003"),
        ("rack[2-3]-n[07,09]", "rack2-n07"),
        ("a[1],b[1-2]", "a1"),
    ],
)
def test_first_host_of_a_slurm_node_list(nodelist, head):
    """Catches a rendezvous address that is not node 0 of the step (ranks would wait for a master that is not
    listening), e.g. a zero-padded range read as an int or a comma inside brackets taken as a separator."""
    assert first_host(nodelist) == head


def test_first_host_refuses_what_it_cannot_read():
    with pytest.raises(LaunchError):
        first_host("")
    with pytest.raises(LaunchError):
        first_host("node[01-")


def test_rendezvous_port_is_stable_and_below_the_ephemeral_range():
    """Catches a port that differs between the nodes of one job (they would never meet) or lands in the range
    the kernel hands to outgoing connections."""
    assert rendezvous_port("123456") == rendezvous_port("123456") == PORT_BASE + 123456 % PORT_SPAN
    assert PORT_BASE <= rendezvous_port("987_3") < PORT_BASE + PORT_SPAN < 32768
    with pytest.raises(LaunchError, match="not a job id"):
        rendezvous_port("abc")


def test_node_torchrun_line_from_srun_variables():
    """Catches a node rank, node count or master taken from the wrong variable (job vs step)."""
    env = {
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
        "SLURM_JOB_ID": "4242",
    }
    argv = node_torchrun_argv(2, 4, env)
    assert argv == [
        *TORCHRUN,
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--nproc-per-node",
        "4",
        "--master-addr",
        "gpu07",
        "--master-port",
        str(PORT_BASE + 4242),
        "-m",
        "hsitp",
    ]
    with pytest.raises(LaunchError, match="spans 3 nodes but the launch expects 2"):
        node_torchrun_argv(2, 4, env | {"SLURM_STEP_NUM_NODES": "3"})
    with pytest.raises(LaunchError, match="SLURM_NODEID unset"):
        node_torchrun_argv(2, 4, {k: v for k, v in env.items() if k != "SLURM_NODEID"})


def test_srun_line_one_task_per_node_with_explicit_cpus():
    """Catches an srun step that inherits one CPU per task (the job step strips SLURM_CPUS_PER_TASK) or starts
    one task per rank instead of one torchrun per node."""
    argv = srun_argv(2, 4, 12, 4, ["bench", "run", "--world-size", "8"])
    assert argv[:7] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=12",
        "--gres=gpu:4",
        "--kill-on-bad-exit=1",
    ]
    assert argv[7:10] == ["hsitp", "launch", "--node"] and argv[-4:] == ["bench", "run", "--world-size", "8"]
    assert not any(a.startswith("--gres") for a in srun_argv(2, 1, 1, 0, ["x"]))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return env | {"PATH": BIN + os.pathsep + env.get("PATH", "")} | extra


def test_multi_node_launch_outside_slurm_is_a_clear_error():
    """Catches a multi-node rule run locally (`--cores all` without the profile) hanging or calling srun, which
    on a login node would ask SLURM for a fresh allocation."""
    run = subprocess.run(
        [HSITP, "launch", "--nodes", "2", "--ranks-per-node", "1", "--", "bench", "run"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "need a SLURM allocation of 2 nodes" in run.stderr and "ranks_per_node to null" in run.stderr


def test_launch_inside_an_allocation_execs_srun(tmp_path):
    """Catches the outer launch not handing over to srun with the step's shape (a fake srun records its argv)."""
    fake = tmp_path / "bin" / "srun"
    fake.parent.mkdir()
    record = tmp_path / "argv.txt"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = _env(SLURM_JOB_ID="77")
    env["PATH"] = f"{fake.parent}{os.pathsep}{env['PATH']}"
    run = subprocess.run(
        [
            HSITP,
            "launch",
            "--nodes",
            "2",
            "--ranks-per-node",
            "3",
            "--cpus-per-node",
            "6",
            "--",
            "bench",
            "run",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert record.read_text().split() == srun_argv(2, 3, 6, 0, ["bench", "run"])[1:]


def _free_rendezvous_port() -> int:
    for port in range(PORT_BASE + 5000, PORT_BASE + PORT_SPAN):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in the rendezvous range")


TINY = {
    "run": "launch",
    "bench": {
        "ops": ["mlp"],
        "N": [16],
        "D": [16],
        "L": [4],
        "warmup": 1,
        "repeats": 2,
        "passes": 1,
        "min_region_s": 0.0,
        "collectives": {
            "names": ["all_reduce"],
            "sizes_bytes": [4096, 16384, 65536],
            "warmup": 1,
            "repeats": 2,
        },
    },
}


@pytest.mark.slow
def test_two_node_launch_makes_one_world(repo_root, tmp_path):
    """Two `hsitp launch --node` processes, given what srun gives the tasks of a two-node step, start one torchrun
    each and form one P = 2 world (static rendezvous on node 0). Catches node ranks or master address/port that
    differ between nodes, or a world that is two P = 1 worlds."""
    port = _free_rendezvous_port()
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "P2.nc"
    cmd = [HSITP, "launch", "--node", "--nodes", "2", "--ranks-per-node", "1", "--", "bench", "run"]
    cmd += ["--world-size", "2", "--out", str(out), "--config", str(repo_root / "config/config.yaml")]
    cmd += ["--config", str(cfg)]
    common = {
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NODELIST": "127.0.0.1,127.0.0.1",
        "SLURM_JOB_ID": str(port - PORT_BASE),
    }
    procs = [
        subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(**common, SLURM_NODEID=str(node), OMP_NUM_THREADS="1"),
            cwd=tmp_path,
        )
        for node in (0, 1)
    ]
    logs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(logs)[-4000:]
    for node, log in enumerate(logs):
        assert f"hsitp launch: node {node} of 2" in log and f"--node-rank {node}" in log
        assert f"rendezvous 127.0.0.1:{port}" in log
    mb = read_netcdf(out, kind="microbench")
    assert mb["P"].values.tolist() == [2] and mb.attrs["backend"] == "gloo"
