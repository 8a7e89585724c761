"""The report stage through Snakemake: render every page from the stages' files, re-render only what an edit
touches, build the Snakemake report and open it in headless Chromium.

One module-scoped run (about a minute on 2 cores): the data stage runs for real (Indian Pines from the tensorly
wheel); the cost tables (results/reference/smoke/cost) and the bench files (tests/fixtures/report_bench) are
placed where their rules write them and marked up to date with `snakemake --touch`, so no cost or bench job runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

from hsitp.report import rules
from hsitp.report.outputs import OUTPUTS

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = {
    **{f"{t}.nc": ROOT / "results" / "reference" / "smoke" / "cost" / f"{t}.nc" for t in ("rho", "ccr", "boundary", "scale", "plan")},
    **{p.name: p for p in (ROOT / "tests" / "fixtures" / "report_bench").glob("*.nc")},
}  # fmt: skip
UPSTREAM_RULES = re.compile(r"^(cost_table|model_table|bench_\w+)$")
CONFIG = ["--configfile", "config/smoke.yaml"]
RENDER_JOBS = {"report_data", "report_cost", "report_bench"}
TESTED_STAGES = ("data", "cost", "bench")


@dataclass
class Run:
    root: Path
    env: dict[str, str]
    results: str  # this run's results folder, relative to root
    datasets: list[str]
    first_jobs: set[str]

    def snakemake(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        exe = str(Path(sys.executable).with_name("snakemake"))
        return subprocess.run(
            [exe, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout, env=self.env
        )

    def targets(self) -> list[str]:
        """The data, cost and bench pages: the stages below them are placed from fixtures; the probe and train
        pages would need those stages run (their functions are tested on synthetic files)."""
        return rules.targets(self.results, self.datasets, TESTED_STAGES)

    def planned_jobs(self) -> set[str]:
        """Rules a dry run of the rendering targets would execute (from its 'Job stats' table)."""
        dry = self.snakemake("--dry-run", *self.targets(), *CONFIG)
        assert dry.returncode == 0, dry.stderr[-3000:]
        return _job_names(dry.stdout + dry.stderr)


def _job_names(log: str) -> set[str]:
    if "Job stats" not in log:
        return set()
    table = log.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+\s*$", table, re.M)}


def _results_dir() -> str:
    """results/<run> once the config has `run` (the layout the report rules follow), else results."""
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    return f"results/{cfg['run']}" if "run" in cfg else "results"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    root = tmp_path_factory.mktemp("report_run")
    for item in ("Snakefile", "workflow", "config", "envs", "notebooks", "src", "results/reference"):
        src = ROOT / item  # src/: the report and audit code and data are rule inputs
        if src.is_dir():
            shutil.copytree(src, root / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(src, root / item)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    r = Run(root, env, _results_dir(), list(cfg["datasets"]), set())

    summary = r.snakemake("--summary", *CONFIG)
    assert summary.returncode == 0, summary.stderr[-3000:]
    rows = [line.split("\t") for line in summary.stdout.splitlines()[1:] if "\t" in line]
    data_files = [path for path, _, rule, *_ in rows if rule == "data_prepare"]
    placed = [(path, FIXTURES[Path(path).name]) for path, _, rule, *_ in rows if UPSTREAM_RULES.match(rule)]
    assert data_files and len(placed) == 10, (
        rows
    )  # 5 cost tables, 2 partials, merged, calibration, comparison

    prep = r.snakemake(*data_files, "--cores", "2", *CONFIG, timeout=240)
    assert prep.returncode == 0, prep.stderr[-3000:]
    for path, fixture in placed:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture, root / path)
    touch = r.snakemake(*(p for p, _ in placed), "--touch", "--cores", "1", *CONFIG)
    assert touch.returncode == 0, touch.stderr[-3000:]

    render = r.snakemake(*r.targets(), "--cores", "2", *CONFIG, timeout=400)
    logs = "".join(p.read_text() for p in sorted(root.glob("logs/**/report/*.log")))
    assert render.returncode == 0, render.stderr[-4000:] + logs[-4000:]
    r.first_jobs = _job_names(render.stdout + render.stderr)
    rep = r.snakemake(*r.targets(), "--report", f"{r.results}/report.html", *CONFIG, timeout=120)
    assert rep.returncode == 0, rep.stderr[-3000:]
    return r


@pytest.mark.slow
def test_rendering_runs_only_report_jobs_and_writes_every_output(run):
    """Catches: a rendering rule that makes Snakemake recompute a stage, a figure or table a notebook forgets to
    write (missing output), or a notebook whose HTML is not produced."""
    assert run.first_jobs == RENDER_JOBS
    for path in run.targets():
        assert (run.root / path).stat().st_size > 0, path
    html = (run.root / run.results / "notebooks" / "bench.html").read_text()
    assert "data:image/png;base64" in html and "Predicted vs measured CCR" in html
    executed = nbformat.read(run.root / run.results / "notebooks" / "cost.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert (
        injected and f'out_dir = "{run.results}"' in injected[0].source
    )  # the rule's paths, not the defaults
    assert run.planned_jobs() == set()  # nothing left to do


@pytest.mark.slow
def test_editing_a_notebook_or_report_code_reruns_only_rendering(run):
    """Catches: notebooks or src/hsitp/report missing from the rendering rules' inputs (stale figures after an
    edit), or rendering code wired into an upstream rule (an edit would recompute a stage)."""
    edits = [
        (run.root / "notebooks" / "cost.ipynb", {"report_cost"}),
        (run.root / "src" / "hsitp" / "report" / "bench.py", {"report_bench"}),
        (run.root / "src" / "hsitp" / "report" / "common.py", RENDER_JOBS),
    ]
    for path, expected in edits:
        original = path.read_text()
        if path.suffix == ".ipynb":
            nb = nbformat.reads(original, as_version=4)
            nb.cells.append(nbformat.v4.new_markdown_cell("An edit: one more note."))
            path.write_text(nbformat.writes(nb))
        else:
            path.write_text(original + "\n# an edit\n")
        try:
            assert run.planned_jobs() == expected, path.name
        finally:
            path.write_text(original)
    assert (
        run.planned_jobs() == set()
    )  # content back as rendered: nothing to do (Snakemake compares checksums)


def _chromium() -> str:
    from hsitp.report.browser import chromium_path

    exe = chromium_path()
    if not exe:
        pytest.skip("chromium not installed (CI: apt-get install chromium, see .ci/run)")
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install '.[test]')")
    return exe


@pytest.mark.slow
def test_snakemake_report_opens_in_chromium_with_every_figure(run):
    """Catches: a report that misses a figure or table, a figure whose embedded image does not decode, captions
    that do not name the hardware, or a report page that logs errors in a browser."""
    from hsitp.report.browser import check_report

    exe = _chromium()  # skips without chromium or playwright
    report = run.root / run.results / "report.html"
    shots = run.root / run.results / "report"
    seen = check_report(
        report, shots, figure="bench_predicted_vs_measured", chromium=exe
    )  # raises on failure
    expected = {f.rsplit("/", 1)[1] for f in run.targets() if f.endswith((".png", ".csv"))}
    assert set(seen.entries) == expected
    for name, caption in seen.entries.items():
        hardware = {"data": "no hardware-dependent number", "cost": "modelled for paper-intra",
                    "bench": "measured on CPU"}[name.split("_", 1)[0]]  # fmt: skip
        assert hardware in caption, name
    figures = {o.base(d) + ".png" for o in OUTPUTS if o.kind == "figure" and o.stage in TESTED_STAGES
               for d in (run.datasets if o.per_dataset else [None])}  # fmt: skip
    assert set(seen.image_widths) == figures and all(w > 0 for w in seen.image_widths.values())
    assert seen.errors == []
    assert (shots / "front.png").stat().st_size > 0 and (shots / "figure.png").stat().st_size > 0
