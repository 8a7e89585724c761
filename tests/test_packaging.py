"""The repo's install files agree with each other."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    assert m, req
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def _pyproject_deps() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(_split(r) for r in proj["dependencies"])


# envs/*.yaml against pyproject.toml and constraints.txt: tests/test_cluster_envs.py


def test_constraints_pin_every_dependency():
    """Catches a dependency CI did not pin (constraints.txt must hold the versions CI tested)."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, spec = _split(line)
            pins[name] = spec
    for name in _pyproject_deps():
        assert name in pins and pins[name].startswith("=="), f"{name} not pinned in constraints.txt"


def _hsitp_imports() -> dict[str, set[str]]:
    """Module -> hsitp modules it imports, at module level or inside functions (lazy imports count too)."""
    src = ROOT / "src"
    modules = {
        ".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (src / "hsitp").rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from hsitp.bench import commands` imports the submodule hsitp.bench.commands
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                    for a in node.names
                ]
            else:
                continue
            deps |= {t for t in targets if t in modules and t != name}
        graph[name] = deps
    return graph


def test_no_import_cycles_in_package():
    """Catches an import cycle inside src/hsitp (e.g. hsitp.cli <-> a stage's commands.py), including imports
    made inside functions, which only fail (or half-initialise a module) when that code path runs."""
    graph = _hsitp_imports()
    assert "hsitp.cli" in graph and "hsitp.config" in graph["hsitp.data.commands"]  # the scan sees imports
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_cost_does_not_import_torch():
    """Catches torch creeping into the cost model (pure arithmetic; `hsitp advise` must run without torch)."""
    offenders = []
    for path in (ROOT / "src" / "hsitp" / "cost").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "torch"]
    assert offenders == []
