"""The dataset stage through Snakemake, as the README runs it (smoke config, Indian Pines from the tensorly wheel)."""

from __future__ import annotations

import numpy as np
import pytest

from hsitp.io import read_netcdf

TARGET = "results/smoke/data/indian_pines.nc"  # config/smoke.yaml sets run: smoke


@pytest.mark.slow
def test_smoke_indian_pines_then_nothing_to_do_and_runs_share_the_download_cache(workflow_copy):
    """Catches: a broken data rule (paths, params, log), a non-offline smoke config, a DAG that re-runs forever;
    outputs or logs that ignore the config's `run` (a paper-scale dry run planning to overwrite the smoke results,
    or a second run whose download makes the first one's jobs look out of date). One data run serves both checks."""
    # the target goes before --configfile, which takes several values in Snakemake 9
    smoke = ["--cores", "1", "--configfile", "config/smoke.yaml"]
    first = workflow_copy.snakemake(TARGET, *smoke)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    ds = read_netcdf(workflow_copy.root / TARGET, kind="dataset")
    assert ds["cube"].shape == (145, 145, 200) and ds.attrs["source"] == "package"
    assert np.bincount(ds.labels.values.ravel())[1:].tolist() == [
        46, 1428, 830, 237, 483, 730, 28, 478, 20, 972, 2455, 593, 205, 1265, 386, 93
    ]  # fmt: skip
    assert (workflow_copy.root / "logs/smoke/data/prepare_indian_pines.log").is_file()

    # every target of the paper-scale config and of another run name: nothing of theirs writes into results/smoke/
    other = [*smoke, "--config", "run=other"]
    for args in (["--configfile", "config/config.yaml"], other):
        plan = workflow_copy.planned(*args)
        assert plan, "the dry run planned nothing: the check below would pass vacuously"
        assert [p for p in plan if p.startswith("results/smoke/") or p.startswith("logs/smoke/")] == []

    # a second run takes its own fetch manifest from the shared cache (its download: preparing its copy of the scene
    # touches nothing the first run's jobs read); the first run's outputs stay up to date, and asking that once
    # after both runs also catches a first run that re-runs forever
    second = workflow_copy.snakemake("results/other/data/fetch/indian_pines.json", *other)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert (
        workflow_copy.root / "resources/raw/indian_pines/fetch.json"
    ).is_file()  # the cache's own manifest
    assert workflow_copy.planned(TARGET, *smoke) == {}
