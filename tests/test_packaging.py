"""The repo's install files agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge names that differ from PyPI names
CONDA_TO_PYPI = {"pytorch": "torch"}


def _split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    assert m, req
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def _pyproject_deps() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return dict(_split(r) for r in proj["dependencies"])


def _conda_deps() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "envs/hsitp.yaml").read_text())
    out: dict[str, str] = {}
    for dep in env["dependencies"]:
        reqs = dep["pip"] if isinstance(dep, dict) else [dep]
        for req in reqs:
            if req.startswith("-e") or req.split(">")[0].split("=")[0] in {"python", "pip"}:
                continue
            name, spec = _split(req)
            out[CONDA_TO_PYPI.get(name, name)] = spec
    return out


def test_conda_env_matches_pyproject():
    """Catches a dependency added to pyproject.toml but not to envs/hsitp.yaml (or with another version)."""
    assert _conda_deps() == _pyproject_deps()


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
