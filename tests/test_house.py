"""House rules of the source a newcomer reads: no function in src/ over 60 lines; docs/house.md's floors true."""

from __future__ import annotations

import ast
import re
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


HOUSE = Path(__file__).resolve().parents[1] / "docs" / "house.md"


def _floors() -> dict[str, int]:
    """docs/house.md's floor table: each module (``io.py``) or package (``data/``) -> its floor, lowest 0."""
    table = HOUSE.read_text().split("| floor | modules |")[1].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    out: dict[str, int] = {}
    for floor, row in enumerate(rows):
        for unit in re.findall(r"`([a-z_]+(?:\.py|/))`", row.split("|")[2]):
            assert unit not in out, f"{unit} in two floors of docs/house.md"
            out[unit] = floor
    return out


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC / "hsitp")
    return f"{rel.parts[0]}/" if len(rel.parts) > 1 else rel.name


def _unit_imports() -> dict[str, set[str]]:
    """Module or package of src/hsitp -> the others it imports (lazy imports inside functions too)."""
    out: dict[str, set[str]] = {}
    for path in SRC.joinpath("hsitp").rglob("*.py"):
        src = _unit(path)
        here = out.setdefault(src, set())
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                parts = name.split(".")
                if parts[0] == "hsitp" and len(parts) > 1:
                    dst = f"{parts[1]}/" if (SRC / "hsitp" / parts[1]).is_dir() else f"{parts[1]}.py"
                    if dst != src:
                        here.add(dst)
    out.pop("__init__.py", None)
    return out


def _upward(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    return [f"{a} (floor {floors[a]}) imports {b} (floor {floors[b]})"
            for a, deps in graph.items() for b in deps if floors[b] > floors[a]]  # fmt: skip


def test_house_floor_table_matches_the_import_graph():
    """Catches docs/house.md's floor table drifting from the code (issue 59: `cost/` imports `data/` while the
    table put it below; `audit/` imported `launch.py` from the top floor): every module in exactly one floor, and
    no import pointing up."""
    floors, graph = _floors(), _unit_imports()
    assert set(graph) == set(floors), (
        f"not in the table: {set(graph) - set(floors)}; gone: {set(floors) - set(graph)}"
    )
    assert _upward(graph, floors) == []
    assert graph["cost/"] >= {"data/"}  # the scan sees imports
    planted = {**graph, "data/": graph["data/"] | {"cost/"}}  # a data module reaching up into the cost model
    assert _upward(planted, floors) == ["data/ (floor 1) imports cost/ (floor 2)"]
