"""The audit's place in the DAG: the claims wait for every file of the run that their measured sub-checks read."""

from __future__ import annotations

import re

import pytest
import yaml

CLAIMS = "results/smoke/tables/paper_claims.csv"


def _claims_inputs(workflow_copy, *configfiles: str) -> str:
    """The input line Snakemake's dry run prints for audit_claims (the rule has no message, so its block is shown)."""
    run = workflow_copy.snakemake(
        CLAIMS, "--dry-run", "--forcerun", "audit_claims", "--configfile", *configfiles, timeout=180
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    block = run.stdout.split("rule audit_claims:", 1)[1]
    return re.search(r"input: (.*)", block).group(1)


@pytest.mark.slow
def test_claims_wait_for_the_runs_own_training_summary_when_it_is_the_accuracy_run(workflow_copy) -> None:
    """Catches the audit of a run that is its own accuracy run (audit.accuracy_run == run, as cpu-fair with the audit
    stage) scheduled before its training summary exists: its accuracy claims would read no summary (pending) or a
    stale one from an earlier run. Another run's summary (the smoke run reading cpu-fair) is not an input."""
    own = workflow_copy.root / "config" / "own_accuracy.yaml"
    own.write_text(yaml.safe_dump({"audit": {"accuracy_run": "smoke"}}))
    assert "results/smoke/train/summary.nc" in _claims_inputs(workflow_copy, "config/smoke.yaml", str(own))
    assert "train/summary.nc" not in _claims_inputs(workflow_copy, "config/smoke.yaml")


@pytest.mark.slow
def test_claims_wait_for_the_runs_own_probe_when_measured_run_names_the_run(workflow_copy) -> None:
    """Catches audit.measured_run written as the run's own name (smoke) treated as another run's: the claims did not
    wait for the run's probe and bench files (null did), so their measured sub-checks read none (pending) or a
    stale copy, depending on the order the scheduler picked."""
    own = workflow_copy.root / "config" / "own_measured.yaml"
    own.write_text(yaml.safe_dump({"audit": {"measured_run": "smoke"}}))
    named = _claims_inputs(workflow_copy, "config/smoke.yaml", str(own))
    assert "results/smoke/probe/memory.nc" in named and "results/smoke/bench/microbench.nc" in named
    assert named == _claims_inputs(workflow_copy, "config/smoke.yaml")
