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
