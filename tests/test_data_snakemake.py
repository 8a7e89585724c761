"""The dataset stage through Snakemake, as the README runs it (smoke config, Indian Pines from the tensorly wheel)."""

from __future__ import annotations

import numpy as np
import pytest

from hsitp.io import read_netcdf

TARGET = "results/data/indian_pines.nc"


@pytest.mark.slow
def test_smoke_indian_pines_then_nothing_to_do(workflow_copy):
    """Catches: a broken data rule (paths, params, log), a non-offline smoke config, or a DAG that re-runs forever."""
    # the target goes before --configfile, which takes several values in Snakemake 9
    args = [TARGET, "--cores", "1", "--configfile", "config/smoke.yaml"]
    run = workflow_copy.snakemake(*args)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ds = read_netcdf(workflow_copy.root / TARGET, kind="dataset")
    assert ds["cube"].shape == (145, 145, 200) and ds.attrs["source"] == "package"
    assert np.bincount(ds.labels.values.ravel())[1:].tolist() == [
        46, 1428, 830, 237, 483, 730, 28, 478, 20, 972, 2455, 593, 205, 1265, 386, 93
    ]  # fmt: skip
    dry = workflow_copy.snakemake(*args, "--dry-run", timeout=120)
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
