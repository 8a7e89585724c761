"""The dataset stage through Snakemake, as the README runs it (smoke config, Indian Pines from the tensorly wheel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hsitp.io import read_netcdf

TARGET = "results/data/indian_pines.nc"


@pytest.mark.slow
def test_smoke_indian_pines_then_nothing_to_do(repo_root, tmp_path):
    """Catches: a broken data rule (paths, params, log), a non-offline smoke config, or a DAG that re-runs forever."""
    for item in ("Snakefile", "workflow", "config", "envs"):
        src = repo_root / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / item)
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    # the target goes before --configfile, which takes several values in Snakemake 9
    cmd = [snakemake, TARGET, "--cores", "1", "--configfile", "config/smoke.yaml"]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ds = read_netcdf(tmp_path / TARGET, kind="dataset")
    assert ds["cube"].shape == (145, 145, 200) and ds.attrs["source"] == "package"
    assert np.bincount(ds.labels.values.ravel())[1:].tolist() == [
        46, 1428, 830, 237, 483, 730, 28, 478, 20, 972, 2455, 593, 205, 1265, 386, 93
    ]  # fmt: skip
    dry = subprocess.run([*cmd, "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
