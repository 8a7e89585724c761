"""Recovery after a hard kill: the workflow's own profile (profiles/default/, read by Snakemake on every run) makes
outputs a killed job left half-written be redone without a flag; the lock stays Snakemake's own safety."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_workflow_profile_sets_rerun_incomplete_only() -> None:
    """Catches a profile that drops rerun-incomplete (a killed run then stops with IncompleteFilesException), or
    that turns off the lock (nolock: two runs could write one folder) or forces a run-wide setting a user would not
    expect from a file they never named."""
    profile = yaml.safe_load((ROOT / "profiles/default/config.yaml").read_text())
    assert profile == {"rerun-incomplete": True}


@pytest.mark.slow
def test_an_incomplete_output_is_redone_without_a_flag(workflow_copy) -> None:
    """A killed data_fetch leaves its output marked incomplete (what SIGKILL leaves behind). Catches the state
    before this fix, where the next `snakemake` stopped with IncompleteFilesException and the advice to pass
    --rerun-incomplete: the dry run plans to redo that output and says why."""
    wf = workflow_copy
    out = "results/smoke/data/fetch/indian_pines.json"
    (wf.root / out).parent.mkdir(parents=True)
    (wf.root / out).write_text("{half a manifest")
    marker = wf.root / ".snakemake/incomplete" / base64.b64encode(out.encode()).decode()
    marker.parent.mkdir(parents=True)
    marker.touch()
    run = wf.snakemake("-n", "--cores", "1", "--configfile", "config/smoke.yaml", "--", out, timeout=120)
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-3000:]
    assert "IncompleteFilesException" not in text
    assert "Using workflow specific profile profiles/default" in text
    assert "incomplete" in text.lower() and "data_fetch" in text, text[-3000:]
