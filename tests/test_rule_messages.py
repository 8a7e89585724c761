"""The long-running rules say where their output goes: Snakemake prints each job's message instead of its rule
block, so a terminal is not silent for minutes without a hint (issue 26)."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_long_rules_name_their_log_in_the_terminal(workflow_copy) -> None:
    """Catches bench_run, probe_run or train losing its `message:` (minutes of silence), a message that does not
    name the job's log, or a dry-run parser (conftest's WorkflowCopy.jobs) that stops seeing jobs with a message."""
    run = workflow_copy.dry_run("--configfile", "config/smoke.yaml", timeout=180)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("Job ")]
    for rule, log in (
        ("bench_run", "logs/smoke/bench/run_P2_l0.log"),
        ("probe_run", "logs/smoke/probe/run_P2.log"),
        ("train", "logs/smoke/train/indian_pines/tp_N324_P2_g1_random_s0.log"),
    ):
        assert any(f": {rule}: " in ln and ln.endswith(f"tail -f {log}") for ln in lines), (rule, lines)
    plan = workflow_copy.jobs(run)  # the same dry run, read by the parser the other DAG tests use
    assert plan["logs/smoke/bench/run_P2_l0.log"][0] == "bench_run"
    rule, reason = plan["logs/smoke/train/indian_pines/tp_N324_P2_g1_random_s0.log"]
    assert rule == "train" and "results/smoke/train/indian_pines/tp_N324_P2_g1_random_s0.nc" in reason
    assert plan["results/smoke/bench/microbench.nc"][0] == "bench_merge"  # rules without a message as before
