"""Nothing lost while the smoke run gets faster: the files `rule all` builds for config/smoke.yaml, compared with the
list committed from 206be13 (tests/fixtures/smoke_outputs.txt, from `snakemake --summary`, which runs nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "smoke_outputs.txt"
# Deliberate differences from 206be13, each with its reason: path -> why it was added (+) or dropped (-).
_PLAN = "issue 27: `hsitp cost plan` (advise plan over P on the GPU presets) and its figure on the cost page"
_ANSWER = "issue 25: the train page opens with the one-table answer (memory, throughput ratio, verdict vs tp)"
_PER_CLASS = (
    "issue 23: per-class test accuracy of every model beside the baselines (OA hides minority classes)"
)
_EQUIVALENCE = (
    "issue 24: the train page's table of single-process equivalents vs P-rank runs (one row saying none)"
)
_PARETO = "issue 36: memory per rank vs time to accuracy, each over tp's, beside the one-table answer"
_CONTROL = "issue 36: the untuned control beside each plan's own tuned recipe (a row saying none without one)"
_BUDGET = "issue 36: the tuning studies' budget curves (a panel saying none where the run has no tune stage)"
ADDED: dict[str, str] = {
    **{f"results/smoke/figures/train_pareto.{ext}": _PARETO for ext in ("pdf", "png")},
    **{f"results/smoke/figures/train_tune_budget.{ext}": _BUDGET for ext in ("pdf", "png")},
    **{f"results/smoke/tables/train_tuning_effect.{ext}": _CONTROL for ext in ("csv", "md", "tex")},
    **{f"results/smoke/tables/train_equivalence.{ext}": _EQUIVALENCE for ext in ("csv", "md", "tex")},
    "results/smoke/cost/plan.nc": _PLAN,
    "results/smoke/figures/cost_plan.pdf": _PLAN,
    "results/smoke/figures/cost_plan.png": _PLAN,
    **{f"results/smoke/tables/train_answer.{ext}": _ANSWER for ext in ("csv", "md", "tex")},
    **{f"results/smoke/tables/train_per_class_accuracy.{ext}": _PER_CLASS for ext in ("csv", "md", "tex")},
}
DROPPED: dict[str, str] = {}


@pytest.mark.slow
def test_smoke_dag_builds_every_file_it_built_before(workflow_copy) -> None:
    """Catches a speed-up that silently drops an output of the smoke run (a figure, a table, a stage's file), or adds
    one nobody listed."""
    run = workflow_copy.snakemake(
        "--summary", "--cores", "1", "--configfile", "config/smoke.yaml", timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    now = {line.split("\t", 1)[0] for line in run.stdout.splitlines()[1:] if line.strip()}
    before = {ln for ln in FIXTURE.read_text().splitlines() if ln and not ln.startswith("#")}
    assert len(before) > 100
    expected = (before - set(DROPPED)) | set(ADDED)
    assert sorted(now - expected) == [], "new outputs not listed in ADDED"
    assert sorted(expected - now) == [], "outputs lost (not listed in DROPPED)"
