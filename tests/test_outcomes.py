"""The vocabularies of outcomes live in ``hsitp.outcomes`` alone."""

from __future__ import annotations

import ast
from pathlib import Path

import hsitp
from hsitp import outcomes
from hsitp.audit.claims import core
from hsitp.evaluate.verdict import VERDICTS

SRC = Path(hsitp.__file__).parent
VERDICT_WORDS = {m.value for enum in (outcomes.Accuracy, outcomes.Claim, outcomes.Reproduction) for m in enum}
# Where one of those words is not a verdict: each place and why.
NOT_A_VERDICT = {
    ("audit/claims/grounds.py", "pending"): "the check kind `pending`",
    ("audit/claims/checks.py", "pending"): "the check kind `pending` (its model's tag)",
    ("audit/claims/checks.py", "needs_gpu"): "the check kind `needs_gpu` (its model's tag)",
    ("audit/claims/core.py", "pending"): "the check kinds that wait (WAITING_CHECKS)",
    ("audit/claims/core.py", "needs_gpu"): "the check kinds that wait (WAITING_CHECKS)",
    ("audit/reproduce.py", "reproduced"): "the report's JSON field of the value this machine reproduced",
    ("report/style.py", "holds"): "an English verb in the list of words a caption may start with",
    ("report/bench.py", "equal"): "matplotlib's aspect ratio",
    ("tune/study.py", "failed"): "an optuna trial's state",
    ("publish/measured.py", "failed"): "an optuna trial's state, counted per tuning study",
    ("audit/claims/computed.py", "equal"): "the tolerance text of a config value compared for equality",
    ("audit/claims/measured.py", "undecided"): "the claims.yaml key `undecided` of a measured check",
}


def _string_constants(path: Path) -> set[str]:
    """Every whole-string literal of a module, docstrings left out (they explain the words, they type none)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_no_verdict_word_is_typed_outside_the_outcomes_module() -> None:
    """Bug: a module compares against or writes ``"undecided"`` (or ``"holds"``, ``"reproduced"``, ...) by hand,
    and one day spells it differently from the others: the table counts it nowhere. Every verdict is a member of
    an enum in hsitp.outcomes; the few places where such a word means something else say what."""
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "outcomes.py":
            continue
        for word in _string_constants(path) & VERDICT_WORDS:
            if (rel, word) not in NOT_A_VERDICT:
                found.add(f"{rel}: {word!r}")
    assert not found, "verdict words typed outside hsitp.outcomes: " + ", ".join(sorted(found))
    stale = [k for k in NOT_A_VERDICT if k[1] not in _string_constants(SRC / k[0])]
    assert not stale, f"allow-list entries no longer needed: {stale}"


def test_the_files_keep_their_strings() -> None:
    """Bug: an enum member renamed or reordered changes the strings the stages write (a committed reference no
    longer reads the same) or the summary's flag values (a verdict read back as another)."""
    assert VERDICTS == ("equal", "better", "worse", "undecided")
    assert core.VERDICTS == (
        "holds", "consistent", "conditional", "contradicted", "not_reproducible", "needs_gpu", "pending",
    )  # fmt: skip
    assert core.BASES == ("computed", "circular", "reading", "pending", "measured", "half-measured")
    assert [m.value for m in outcomes.Reproduction] == ["reproduced", "differs", "failed"]
    assert all(type(v) is str for v in VERDICTS + core.VERDICTS + core.BASES)  # flag_meanings, YAML-safe
