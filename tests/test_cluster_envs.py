"""The conda environments (envs/) agree with pyproject.toml and constraints.txt, checked statically (no conda
channel is reachable where CI runs), and their post-deploy scripts install exactly what CI tested."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
ENVS = {"hsitp": "cpu", "hsitp-cuda": "cuda"}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("env", ENVS)
def test_conda_env_gives_only_the_interpreter(env):
    """Catches a conda-forge package creeping into an env file (its build and version would differ from the PyPI
    wheel CI tested) or an interpreter the package does not support."""
    spec = yaml.safe_load((ROOT / "envs" / f"{env}.yaml").read_text())
    assert spec["channels"] == ["conda-forge", "nodefaults"]
    deps = spec["dependencies"]
    assert all(isinstance(d, str) for d in deps), "no pip: section; envs/*.post-deploy.sh installs packages"
    names = {re.split(r"[=<>]", d)[0]: d for d in deps}
    assert set(names) == {"python", "pip"}
    python = names["python"].split("=", 1)[1]
    assert re.fullmatch(r"\d+\.\d+", python), "python pinned to a minor version"
    assert Version(python) in SpecifierSet(_project()["requires-python"])
    ci_minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert python == ci_minor, f"envs pin python {python}, CI tests {ci_minor}"


def test_every_dependency_pinned_within_its_pyproject_range():
    """Catches a constraints.txt pin outside the range pyproject.toml allows (pip would refuse the install), or a
    dependency (e.g. the SLURM executor plugin the profile needs) that CI did not pin."""
    pins = _pins()
    for dep in _project()["dependencies"]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} not in {req.specifier}"
        )
    assert "snakemake-executor-plugin-slurm" in {Requirement(d).name for d in _project()["dependencies"]}
    assert "snakemake-executor-plugin-slurm-jobstep" in pins  # the plugin's job-side half, pulled in by it


def _run_post_deploy(
    env: str, cwd: Path, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run envs/<env>.post-deploy.sh as Snakemake does (bash, from the workflow directory) with a fake `python`
    that records its arguments instead of installing anything."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    record = tmp_path / "calls.txt"
    fake = bindir / "python"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {record}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env_vars = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    script = ROOT / "envs" / f"{env}.post-deploy.sh"
    run = subprocess.run(
        ["bash", str(script)], cwd=cwd, capture_output=True, text=True, env=env_vars, timeout=60
    )
    calls = record.read_text().splitlines() if record.exists() else []
    return run, calls


@pytest.mark.parametrize("env", ENVS)
def test_post_deploy_installs_the_ci_pins_and_the_package(env, tmp_path):
    """Catches a post-deploy script that installs another torch than CI tested, pulls the multi-GB CUDA build on
    CPU nodes (or the CPU build on GPU nodes), ignores constraints.txt, or installs the package from elsewhere."""
    script = ROOT / "envs" / f"{env}.post-deploy.sh"
    assert script.read_text().startswith("#!/usr/bin/env bash")  # Snakemake runs it with its shebang
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, work / name)
    run, calls = _run_post_deploy(env, work, tmp_path)
    assert run.returncode == 0, run.stderr
    torch = f"torch=={_pins()['torch']}"
    index = ["--index-url", CPU_INDEX] if ENVS[env] == "cpu" else []
    assert [c.split() for c in calls] == [
        ["-m", "pip", "install", "--no-cache-dir", torch, *index],
        ["-m", "pip", "install", "--no-cache-dir", "-c", "constraints.txt", "-e", "."],
    ]


def test_post_deploy_outside_the_repository_is_a_clear_error(tmp_path):
    """Catches an environment built from the wrong directory installing nothing (or something else) silently."""
    run, calls = _run_post_deploy("hsitp", tmp_path, tmp_path)
    assert run.returncode == 1 and calls == []
    assert "run snakemake from the hsitp repository root" in run.stderr


def test_rules_name_existing_env_files():
    """Catches a `conda:` directive or ENV constant pointing at an env file that does not exist."""
    common = (ROOT / "workflow/rules/common.smk").read_text()
    paths = re.findall(r'^ENV\w* = "([^"]+)"', common, flags=re.M)
    assert len(paths) == 2
    for rel in paths:
        assert (ROOT / "workflow/rules" / rel).resolve().is_file(), rel
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        for line in re.findall(r"conda:\n\s+(.+)", smk.read_text()):
            assert line.strip() in {"ENV", 'rank_env("bench_run")'} or line.startswith("rank_env("), line
