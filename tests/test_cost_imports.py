"""Import structure of ``hsitp.cost``: no import cycles (imports inside functions count) and no torch."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file for every module under ``package`` (a package is named by its __init__)."""
    out = {}
    for path in (SRC / package.replace(".", "/")).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(name: str, path: Path) -> set[str]:
    """Every dotted name ``path`` imports, at module level or inside a function, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # ``from pkg import x``: pkg.x if x is a module, else (longest module prefix, see _graph) pkg
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (an imported name resolves to its longest module prefix)."""
    mods = _modules(package)

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    return {m: {o for d in _imported(m, p) if (o := owner(d)) and o != m} for m, p in mods.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path [a, b, ..., a], or [] when the graph is acyclic (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_cycle_finder_finds_a_cycle():
    """Catches a cycle finder that never reports anything (the test below would then pass vacuously)."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_cost_has_no_import_cycle():
    """Catches an import cycle inside hsitp.cost, e.g. hardware -> calibration -> hardware through an import
    tucked inside a function (the calibration reader must not know Hardware)."""
    graph = _graph("hsitp.cost")
    assert "hsitp.cost.calibration" in graph["hsitp.cost.hardware"]  # the graph sees imports at all
    assert _cycle(graph) == []


def test_cost_does_not_import_torch():
    """Catches torch leaking into the cost model, which must run (and its tables build) without it."""
    for name, path in _modules("hsitp.cost").items():
        torch = {d for d in _imported(name, path) if d == "torch" or d.startswith("torch.")}
        assert not torch, f"{path} imports {sorted(torch)}"
