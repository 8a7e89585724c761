"""The standalone scripts in benchmarks/ that nothing else runs: each is run once at tiny sizes as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_tp_vs_torch_model_runs_and_agrees(repo_root: Path) -> None:
    """Catches benchmarks/tp_vs_torch_model.py rotting unnoticed: the ``tp`` plan drifting from PyTorch's
    Colwise/Rowwise split of the same dense model (a renamed parameter, a changed qkv/kv row layout, a missing
    all-reduce in a backward), which the script reports as differing outputs or gradients and exits 1, or a torch
    upgrade breaking its parallelize_module side. P = 2 gloo ranks, whole model, tiny sizes, one timed pair."""
    args = ["--world-size", "2", "--tokens", "16", "--dim", "32", "--heads", "4", "--depth", "1"]
    args += ["--bands", "4", "--patch", "2", "--repeats", "1", "--warmup", "0", "--device", "cpu"]
    proc = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "tp_vs_torch_model.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "median ratio ours/torch (P = 2, model): " in proc.stdout, proc.stdout
    assert "DIFFER" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_step_speed_against_a_revision_times_both_and_compares_losses(repo_root: Path) -> None:
    """benchmarks/step_speed.py --against HEAD: HEAD's code in a temporary worktree against the checkout's, one
    alternating round. Catches a worker that imports the checkout's hsitp for both sides (losses then trivially
    equal, ratios meaningless), a worktree left behind, or an output line the docs' table cannot be read from."""
    import re

    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/step_speed.py",
            "--against",
            "HEAD",
            "--rounds",
            "1",
            "--steps",
            "1",
            "--loss-steps",
            "2",
            "--plans",
            "dchag_l",
            "--profile-steps",
            "1",
            "--tiny",
            "--eval-repeats",
            "1",
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    line = re.search(r"^dchag_l: old/new (\S+) \[(\S+), (\S+)\], max rel diff (\S+);", proc.stdout, re.M)
    assert line, proc.stdout
    assert float(line.group(1)) > 0 and float(line.group(4).rstrip(";")) < 1e-5
    assert "GEMM rate" in proc.stdout and "FLOP floor" in proc.stdout
    assert "aten::copy_ + aten::cat + aten::fill_" in proc.stdout
    assert re.search(
        r"dchag_l \(today's\): \S+ s per prediction; .*cpu-accuracy \(\d+ evaluations, 2000 steps\)",
        proc.stdout,
    )
    worktrees = subprocess.run(
        ["git", "worktree", "list"], cwd=repo_root, capture_output=True, text=True
    ).stdout
    assert "step_speed_" not in worktrees


def test_attention_floor_prints_its_ratios(repo_root: Path) -> None:
    """benchmarks/attention_floor.py at tiny sizes: catches the script rotting (a torch upgrade renaming SDPA's
    arguments, a shape error in the explicit attention) or its lines changing so the docs' numbers cannot be found
    again, and a ratio that is not a positive number (a floor computed as zero)."""
    import re

    args = ["--tokens", "16", "--dim", "16", "--heads", "2", "--gemm", "64", "--calls", "2", "--rounds", "1"]
    proc = subprocess.run(
        [sys.executable, str(repo_root / "benchmarks" / "attention_floor.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^GEMM rate \d+ GFLOP/s", proc.stdout, re.M), proc.stdout
    ratio = re.search(r"SDPA / FLOP floor (\S+)x", proc.stdout)
    assert ratio and float(ratio.group(1)) > 0, proc.stdout
    assert "explicit QK^T-softmax-PV" in proc.stdout and "one exp over the scores" in proc.stdout


def test_kernel_check_times_both_kernels_on_the_cpu(repo_root: Path, tmp_path: Path) -> None:
    """benchmarks/kernel_check.py (the kernel step of benchmarks/gpu_check.sh, whose timings set CUDA's attention
    kernel default) at smoke size on the CPU: catches the script rotting between GPU sessions, as it did when the
    config became typed and it still read the probe section as a dict, and a file without both kernels' rounds."""
    import xarray as xr

    out = tmp_path / "kernels.nc"
    proc = subprocess.run(
        [sys.executable,  # one rank: no torchrun, as the workflow starts a P = 1 job (hsitp.launch)
         str(repo_root / "benchmarks" / "kernel_check.py"), "--configfile", "config/config.yaml",
         "config/smoke.yaml", "--device", "cpu", "--out", str(out), "--repeats", "2", "--steps", "1",
         "--warmup", "1"],
        capture_output=True, text=True, timeout=300, cwd=repo_root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ds = xr.open_dataset(out)
    assert sorted(ds["kernel"].values.tolist()) == ["exact", "sdpa"] and ds.sizes["repeat"] == 2
    assert (ds["ratio_exact_vs_sdpa"] > 0).all() and (ds["peak_allocated"] > 0).all()
