"""Checks on a finished smoke workflow (config/smoke.yaml run through Snakemake): the bench files, the rendered
pages, the Snakemake report in headless Chromium, and the DAG's answers to edits (nothing to do; an edit to a
notebook, to report code or to a key only calibration reads re-runs only what it touches).

They need a whole DAG run, so they skip in the README's test command and run where one exists:
- CI, after its SLURM smoke run: ``pytest tests/test_workflow_run.py --workflow-dir $HSITP_SLURM_WORK
  --workflow-config config/slurm_ci.yaml`` (.ci/run);
- after the README's main job, from the checkout: ``python -m pytest tests/test_workflow_run.py --workflow-dir .``.

The finished workflow is copied to a temporary folder first (sources, results/RUN, logs/RUN and Snakemake's
metadata, modification times kept), so the edits below never touch the given folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
import yaml
from conftest import WorkflowCopy

from hsitp.config import load_config
from hsitp.contracts import CALIBRATION
from hsitp.io import json_attr, read_netcdf
from hsitp.report import rules
from hsitp.report.outputs import OUTPUTS, STAGES

SOURCES = ("Snakefile", "workflow", "profiles", "config", "envs", "notebooks", "src", "results/reference")
RENDER_JOBS = {f"report_{stage}" for stage in STAGES}


@dataclass
class FinishedRun(WorkflowCopy):
    """A copy of a finished workflow folder, with the config files the run used."""

    configs: list[str] = field(default_factory=list)  # config files after config/config.yaml
    cfg: dict[str, Any] = field(default_factory=dict)  # the merged, validated config
    run: str = "smoke"  # the config's `run`: outputs in results/<run>

    @property
    def results(self) -> str:
        return f"results/{self.run}"

    def args(self, *extra: str) -> list[str]:
        """Arguments for `all` under the run's config files (and ``extra`` ones after them)."""
        return ["--cores", "2", "--configfile", *self.configs, *extra]

    def planned_rules(self, *extra: str) -> set[str]:
        return {rule for rule, _ in self.planned(*self.args(*extra)).values()}


@pytest.fixture(scope="module")
def finished(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FinishedRun:
    given = request.config.getoption("--workflow-dir")
    if not given:
        pytest.skip(
            "needs a finished smoke run: pytest tests/test_workflow_run.py --workflow-dir DIR "
            "(CI gives its SLURM smoke run; after the README's main job, DIR is the checkout)"
        )
    src = Path(given).resolve()
    configs = ["config/smoke.yaml", *request.config.getoption("--workflow-config")]
    cfg = load_config([src / "config" / "config.yaml", *(src / c for c in configs)]).as_json()
    run = cfg["run"]
    assert (src / "results" / run / "audit" / "report.md").is_file(), f"{src}: no finished {run} run"
    root = tmp_path_factory.mktemp("finished")
    for item in (*SOURCES, f"results/{run}", f"logs/{run}", ".snakemake/metadata"):
        path = src / item
        if path.is_dir():  # copy2: modification times kept, so Snakemake sees the same ages
            shutil.copytree(path, root / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif path.exists():
            shutil.copy2(path, root / item)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    return FinishedRun(root, env, configs, cfg, run)


def test_nothing_to_do_after_the_run(finished: FinishedRun) -> None:
    """Catches rule params, inputs or code that change between runs (a DAG that re-runs forever), and a copy of
    the run that Snakemake no longer recognises (the edit checks below would then prove nothing)."""
    assert finished.planned(*finished.args()) == {}


def test_the_auditors_command_says_the_verdict_every_time(finished: FinishedRun) -> None:
    """The README's audit command on a finished run: PASS with the claims' counts, from a re-check of the present
    outputs (only the audit job runs; its time is measured in docs/measured.md, not asserted); then a planted drift in a cost table: FAIL, exit 1. Catches
    the command that printed only "Nothing to be done" on a finished run, and a verdict that is not re-checked."""
    target = f"{finished.results}/audit/report.md"
    run = finished.snakemake(*finished.args("--forcerun", "audit", "--", target), timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    lines = [ln for ln in out.splitlines() if ln.startswith("hsitp audit: ")]
    assert len(lines) == 1 and lines[0].startswith("hsitp audit: PASS"), out[-3000:]
    assert "claims: holds " in lines[0] and "contradicted " in lines[0]
    assert "1 of 1 steps" in out, out[-3000:]  # the audit re-ran, nothing upstream did

    # a drift planted straight into the verdict's inputs (the claims table), then the verdict alone
    claims = finished.root / finished.results / "tables/paper_claims.csv"
    text = claims.read_text()
    planted = text.replace(",holds,", ",contradicted,", 1)
    assert planted != text
    claims.write_text(planted)
    try:
        check = subprocess.run(
            ["hsitp", "audit", "verdict", "--run-dir", finished.results],
            cwd=finished.root,
            env=finished.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        claims.write_text(text)
    assert check.returncode == 1, check.stdout + check.stderr
    assert check.stdout.startswith("hsitp audit: FAIL"), check.stdout


def test_bench_files_hold_every_op_p_and_collective(finished: FinishedRun) -> None:
    """Catches a broken torchrun launch line, partials that do not merge, a calibration the cost model rejects, a
    comparison without held-out points, and a merge that drops the partials' attributes."""
    res, bench = finished.root / finished.results, finished.cfg["bench"]
    mb = read_netcdf(res / "bench/microbench.nc", kind="microbench")
    assert mb["P"].values.tolist() == bench["world_sizes"] == [1, 2]
    assert json_attr(mb, "world_sizes") == [1, 2] and mb.attrs["backend"] in ("gloo", "nccl")
    L = bench["L"][0]
    comm = mb["time_median"].sel(mode="comm", dtype="float32", L=L)
    moved = (
        mb["bytes_moved"].sel(P=2, L=L) > 0
    )  # ops that communicate at P = 2 (a sharded LayerNorm need not)
    assert moved.any() and (mb["bytes_moved"].sel(P=1, L=L) == 0).all()
    assert (comm.sel(P=1) == 0).all() and ((comm.sel(P=2) > 0) == moved).all()  # timed where something moved
    assert np.isfinite(mb["sanity_ratio"].sel(P=2, L=L)).all()
    assert np.isfinite(mb["time"].sel(L=L)).all()  # every pass filled its share of the repeats
    assert np.isfinite(mb["coll_time"].sel(P=2)).all()
    assert not {"flops", "traffic_bytes", "trace_factor_bytes"} & set(mb.variables)  # measurements only
    assert mb["time"].attrs["units"] == "s" and mb["bytes_moved"].attrs["units"] == "B"

    cal = CALIBRATION.read(res / "bench/calibration.nc")  # its contract, values checked
    assert json_attr(cal, "world_sizes") == [2]
    assert cal["op"].values.tolist() == list(bench["ops"])

    mvm = read_netcdf(res / "bench/model_vs_measured.nc", kind="model_vs_measured")
    flags = mvm["held_out"].sel(P=2).values
    assert (flags == 1).any() and (flags == 0).any()
    summary = json_attr(mvm, "summary")
    assert summary["held_out"]["n_points"] >= 3
    assert np.isfinite(summary["held_out"]["median_abs_rel_err_refined"])
    assert not list(res.rglob("*.tmp"))  # no temporary file left behind
    for name in ("merge", "calibrate", "compare"):  # every step logs what it read and found
        assert (finished.root / f"logs/{finished.run}/bench/{name}.log").read_text().strip(), name


def test_keys_no_bench_rule_reads_rerun_nothing_and_a_fit_key_reruns_only_the_fit(
    finished: FinishedRun,
) -> None:
    """Catches bench rules whose params take whole config sections (an edit to the cost model's overlap or to job
    resources would re-run every timing job), and calibration params not wired (a changed fit not re-fitted)."""
    unread = {
        "bench": {"roofline": {"copy_bytes": 4096}, "shard": {"hardware": "paper-intra"}},
        "cost": {"overlap": 0.5},
        "resources": {"bench_run": {"mem_mb_per_rank": 123, "runtime": 7}},
    }
    bench = [
        f"{finished.results}/bench/{name}.nc" for name in ("microbench", "calibration", "model_vs_measured")
    ]
    (finished.root / "config" / "unread.yaml").write_text(yaml.safe_dump(unread))
    assert finished.planned(*bench, *finished.args("config/unread.yaml")) == {}
    (finished.root / "config" / "fit.yaml").write_text(
        yaml.safe_dump({"bench": {"fit": {"holdout_fraction": 0.5}}})
    )
    plan = finished.planned(*bench, *finished.args("config/fit.yaml"))
    assert {rule for rule, _ in plan.values()} == {"bench_calibrate", "bench_compare"}, plan  # no timing job
    assert "params" in plan[bench[1]][1].lower(), plan


def test_every_page_written_from_the_rule_inputs(finished: FinishedRun) -> None:
    """Catches a figure or table a notebook forgets to write, a notebook whose HTML is not produced, and a page
    executed with the notebook's default paths instead of the rule's."""
    datasets = list(finished.cfg["datasets"])
    for path in rules.targets(finished.results, datasets):
        assert (finished.root / path).stat().st_size > 0, path
    html = (finished.root / finished.results / "notebooks" / "bench.html").read_text()
    assert "data:image/png;base64" in html and "Predicted vs measured CCR" in html
    executed = nbformat.read(finished.root / finished.results / "notebooks" / "cost.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and f'out_dir = "{finished.results}"' in injected[0].source


def test_editing_a_notebook_or_report_code_reruns_only_rendering(finished: FinishedRun) -> None:
    """Catches notebooks or src/hsitp/report missing from the rendering rules' inputs (stale figures after an
    edit), or rendering code wired into an upstream rule (an edit would recompute a stage)."""
    root = finished.root
    edits = [
        (root / "notebooks" / "cost.ipynb", {"report_cost"}),
        (root / "src" / "hsitp" / "report" / "bench.py", {"report_bench"}),
        (root / "src" / "hsitp" / "report" / "common.py", RENDER_JOBS),
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
            assert finished.planned_rules() == expected, path.name
        finally:
            path.write_text(original)
    assert finished.planned_rules() == set()  # content back: nothing to do (Snakemake compares checksums)


def test_snakemake_report_opens_in_chromium_with_every_figure(finished: FinishedRun) -> None:
    """Catches a report that misses a figure or table, a figure whose embedded image does not decode, captions
    that do not name the hardware, or a report page that logs errors in a browser."""
    from hsitp.publish.browser import CAPTION_HARDWARE, check_report, chromium_path

    exe = chromium_path()
    if not exe:
        pytest.skip("chromium not installed (CI: apt-get install chromium, see .ci/run)")
    pytest.importorskip("playwright.sync_api", reason="playwright not installed (pip install '.[test]')")
    report = finished.root / finished.results / "report.html"
    rep = finished.snakemake("--report", str(report), *finished.args(), timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    seen = check_report(report, report.with_suffix(""), figure="bench_predicted_vs_measured", chromium=exe)
    datasets = list(finished.cfg["datasets"])
    expected = {f.rsplit("/", 1)[1] for f in rules.targets(finished.results, datasets)
                if f.endswith((".png", ".csv"))}  # fmt: skip
    assert set(seen.entries) == expected
    for name, caption in seen.entries.items():
        stage = name.split("_", 1)[0]
        assert any(h in caption for h in CAPTION_HARDWARE[stage]), (name, caption)
    figures = {o.base(d) + ".png" for o in OUTPUTS if o.kind == "figure"
               for d in (datasets if o.per_dataset else [None])}  # fmt: skip
    assert set(seen.image_widths) == figures and all(w > 0 for w in seen.image_widths.values())
    assert seen.errors == []
