"""Checks that walk a run's outputs: the audit passes, every netCDF file says what each variable is, every figure is
readable.

By default (the README's test command) they walk small synthetic stage files built here. CI walks its whole smoke
run through `--profile slurm` the same way: `pytest tests/test_run_outputs.py --run-dir results/smoke` (.ci/run).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from audit_synthetic import bench_files
from report_synthetic import baseline_file, probe_files, train_summary

from hsitp.audit.audit import audit_run, report_text
from hsitp.cli import main
from hsitp.io import metadata_problems, provenance, read_netcdf, write_netcdf

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "results" / "reference" / "smoke"


def _synthetic_run(run: Path) -> Path:
    """A run folder as the smoke DAG leaves it, small: the reference cost tables, the claims table the CLI writes
    from them, bench, probe, baseline and train files."""
    for table in ("rho", "ccr", "boundary", "scale", "plan"):
        ds = read_netcdf(REF / "cost" / f"{table}.nc")
        write_netcdf(ds, run / "cost" / f"{table}.nc", kind=f"cost_{table}", prov=provenance())
    cfg = ["--config", str(ROOT / "config/config.yaml"), "--config", str(ROOT / "config/smoke.yaml")]
    out = run / "tables/paper_claims.csv"
    assert main(["audit", "claims", "--run-dir", str(run), *cfg, "--out", str(out)]) == 0
    bench_files(run)
    probe_files(run / "probe")
    for protocol in ("random", "block"):
        baseline_file(run, protocol, 0)
    train_summary(run)
    return run


@pytest.fixture(scope="module")
def run_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = request.config.getoption("--run-dir")
    if given:
        path = Path(given)
        assert (path / "cost").is_dir(), f"--run-dir {path}: not a finished run (no cost/ folder)"
        return path
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        return _synthetic_run(tmp_path_factory.mktemp("run") / "smoke")


def test_audit_passes_on_the_run(run_dir: Path) -> None:
    """The audit forced on a finished run: modelled tables and claims equal to the reference, bench files within
    their bands (zeros only where nothing is communicated). Catches a clean run that the audit fails (the smoke
    run's comm-only zeros did), and any drift of a modelled number."""
    rep = audit_run(run_dir, REF, run_dir / "tables" / "paper_claims.csv")
    assert not rep.drift, report_text(rep, run_dir, REF)
    assert any(c.startswith("bench/microbench.nc") for c in rep.checked), rep.notes


def test_every_netcdf_names_and_units_every_variable(run_dir: Path) -> None:
    """Every data variable and coordinate of every netCDF file has a long_name and, where numeric, units, and the
    file a title of its own. Catches a stage that writes numbers a reader cannot interpret."""
    files = sorted(run_dir.rglob("*.nc"))
    assert len(files) >= 8, files
    problems = {str(f.relative_to(run_dir)): p for f in files if (p := metadata_problems(read_netcdf(f)))}
    assert not problems, "\n".join(f"{k}: {'; '.join(v)}" for k, v in problems.items())


def test_every_figure_is_readable(run_dir: Path) -> None:
    """Every figure of the run readable at page width: text inside the figure, nothing overlapping, fonts >= 7 pt,
    width <= 2400 px, aspect <= 3:1 (hsitp.report.style, recorded in each PNG when saved). Catches a figure whose
    title or legend is cut off or whose labels overlap, as a reader at page width would see it."""
    from hsitp.report.style import check_figures

    figures = run_dir / "figures"
    if not figures.is_dir():
        pytest.skip("synthetic run: its figures are rendered and checked by tests/test_report_figures.py")
    pngs = sorted(figures.rglob("*.png"))
    assert len(pngs) >= 10, pngs
    problems = check_figures(figures)
    assert not problems, "\n".join(f"{p.name}: {'; '.join(v)}" for p, v in problems.items())
