"""House rules of the source a newcomer reads (issue 52): no function in src/ over 60 lines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 60  # end_lineno - lineno + 1 of the def (decorators excluded)

# Functions allowed over the limit, each with its reason (none today); test_allowance_lists_only_long_functions
# fails for an entry that got short or moved, so the set can only shrink.
ALLOWED: frozenset[str] = frozenset()


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included ("Class.method", "f.inner")."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node.end_lineno - node.lineno + 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _long_functions() -> dict[str, int]:
    """``path:qualified name`` -> lines of every function in src/ over MAX_LINES."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        for name, lines in _functions(ast.parse(path.read_text())):
            if lines > MAX_LINES:
                out[f"{where}:{name}"] = lines
    return out


def test_no_function_over_60_lines():
    """Catches a function in src/ that grew past 60 lines (split it into named steps), outside the allowance."""
    found = _long_functions()
    over = {k: v for k, v in found.items() if k not in ALLOWED}
    assert over == {}, "functions over 60 lines: " + ", ".join(f"{k} ({v})" for k, v in sorted(over.items()))


def test_allowance_lists_only_long_functions():
    """Catches an allowance entry whose function was split, renamed or moved: the entry would let a new long
    function of that name in unnoticed."""
    stale = sorted(ALLOWED - set(_long_functions()))
    assert stale == [], f"no longer over 60 lines (remove from ALLOWED): {stale}"


def test_the_scan_counts_methods_and_nested_functions_without_decorators():
    """Catches a scan that misses methods or nested functions (a long one would pass unseen), or counts a
    decorator's lines."""
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    source = f"@decorated\ndef a():\n{body}\n\n\nclass C:\n    def m(self):\n        def inner():\n            pass\n"
    assert dict(_functions(ast.parse(source))) == {"a": 60, "C.m": 3, "C.m.inner": 2}
