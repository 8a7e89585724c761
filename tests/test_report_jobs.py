"""`hsitp report jobs RUN`: per-stage sums of Snakemake's per-job benchmark files."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from hsitp.cli import main
from hsitp.errors import HsitpError
from hsitp.publish.jobs import Job, read_jobs, span_s, table_rows

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _cells(text: str) -> list[list[str]]:
    """The cells of every Markdown table line in ``text``, stripped (whatever the column padding)."""
    return [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if "|" in line
    ]


def _bench(root: Path, rule: str, name: str, wall: float, rss: str, cpu: str, end: float) -> None:
    f = root / rule / f"{name}.tsv"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(HEADER + f"{wall}\t0:00:01\t{rss}\t1\t1\t1\t0\t0\t50\t{cpu}\n")
    os.utime(f, (end, end))


def test_jobs_table_sums_per_stage_and_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a jobs table that drops a job in a wildcard sub-folder (train/<dataset>/...), sums RSS instead of
    taking the largest, counts an unmeasured 'NA' as 0 in the largest RSS, or files report_*, audit* and the
    untuned control's train_control rules under stages of their own."""
    bench = tmp_path / "logs" / "r" / "benchmarks"
    _bench(bench, "train", "indian_pines/tp_N324_P2_g1_random_s0", 10.0, "300.5", "18.0", 1000.0)
    _bench(bench, "train", "indian_pines/tp_N324_P1_g1_random_s0", 6.0, "NA", "5.0", 1004.0)
    _bench(bench, "report_train", "job", 3.0, "200", "2.5", 1010.0)
    _bench(bench, "report_cost", "job", 2.0, "150", "1.5", 1012.0)
    _bench(bench, "audit_claims", "job", 1.0, "90", "0.8", 1013.0)
    jobs = read_jobs(bench)
    assert len(jobs) == 5
    rows = {r["stage"]: r for r in table_rows(jobs)}
    assert rows["train"] == {"stage": "train", "jobs": 2, "wall_s": 16.0, "cpu_s": 23.0, "max_rss_mb": 300.5}
    control = read_jobs(bench) + [Job("train_control", "c", 4.0, 1.0, 100.0, 1014.0)]
    assert {r["stage"]: r["jobs"] for r in table_rows(control)}["train"] == 3
    assert rows["report"]["jobs"] == 2 and rows["report"]["max_rss_mb"] == 200.0
    assert rows["audit"]["jobs"] == 1
    assert rows["total"]["jobs"] == 5 and rows["total"]["wall_s"] == 22.0
    assert span_s(jobs) == pytest.approx(1013.0 - (1000.0 - 10.0))

    assert (
        main(["report", "jobs", "r", "--logs", str(tmp_path / "logs"), "--results", str(tmp_path / "res")])
        == 0
    )
    out = capsys.readouterr().out
    assert ["train", "2", "16.0", "23.0", "300.5"] in _cells(
        out
    )  # the cells as str() gives them, none reformatted
    with (tmp_path / "res" / "r" / "tables" / "jobs_time.csv").open() as fh:
        stages = [r["stage"] for r in csv.DictReader(fh)]
    assert stages[0] == "train" and stages[-1] == "total"  # by wall time, then the total
    assert (tmp_path / "res" / "r" / "tables" / "jobs_time_rules.md").read_text().count("| report_") == 2


def test_jobs_table_without_benchmarks_says_where_it_looked(tmp_path: Path) -> None:
    """Catches a bare traceback (or an empty table) for a run that has not run yet."""
    with pytest.raises(HsitpError, match="no benchmark files"):
        read_jobs(tmp_path / "logs" / "nope" / "benchmarks")


def test_jobs_table_reports_the_last_complete_call_that_built_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches a table that folds later re-renders and audits into the run (a 196 s span for a 138 s run), that
    reports a killed (incomplete) call, or that leaves out which call it reports."""
    from hsitp.publish.jobs import finish_invocation, start_invocation

    monkeypatch.chdir(tmp_path)
    logs = Path("logs")
    bench = logs / "r" / "benchmarks"
    _bench(bench, "train", "a", 10.0, "300", "9.0", 1000.0)
    _bench(bench, "train", "b", 20.0, "310", "19.0", 1010.0)
    _bench(bench, "report_train", "job", 3.0, "200", "2.5", 5000.0)
    main_call = start_invocation(
        logs / "r",
        [("train", f"{bench}/train/a.tsv"), ("train", f"{bench}/train/b.tsv"), ("all", None)],
        ["x"],
    )
    finish_invocation(main_call)
    rerender = start_invocation(logs / "r", [("report_train", f"{bench}/report_train/job.tsv")], ["y"])
    finish_invocation(rerender)
    start_invocation(
        logs / "r", [("train", f"{bench}/train/a.tsv"), ("all", None)], ["killed"]
    )  # never finished
    assert main(["report", "jobs", "r", "--logs", str(logs), "--results", "res"]) == 0
    out = capsys.readouterr().out
    assert "one snakemake call: the last complete one that built `all`" in out
    assert "3 Snakemake steps (2 jobs with a benchmark file)" in out
    assert "1 later call(s) (re-renders, audits) left out" in out
    stages = out.split("| stage ")[1]  # the stage table (its header, then its rows)
    assert ["train", "2", "30.0", "28.0", "310.0"] in _cells(out) and "report" not in stages
