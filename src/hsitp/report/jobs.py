"""``hsitp report jobs RUN``: where a run's time went, from Snakemake's own per-job measurements.

Every rule has a ``benchmark:`` directive writing ``logs/<run>/benchmarks/<rule>/<wildcards>.tsv`` (Snakemake's
columns: ``s`` wall seconds, ``max_rss`` MB, ``cpu_time`` s, ...; under SLURM the job step writes the same file).
This sums them per stage: jobs, wall s, CPU s, the largest max RSS, and the run's span (first job start to last
job end, from the files' modification times: meaningful when one snakemake call wrote them all). Measured on the
machine that ran the jobs; nothing is modelled.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hsitp.errors import HsitpError
from hsitp.io import atomic_write_text

# Rule -> stage (the README's stage table); report_* and audit* by prefix.
STAGE_OF_RULE = {
    "data_fetch": "data",
    "data_prepare": "data",
    "cost_table": "cost",
    "bench_run": "bench",
    "bench_merge": "bench",
    "bench_calibrate": "bench",
    "bench_compare": "bench",
    "probe_run": "probe",
    "probe_merge": "probe",
    "probe_estimate": "probe",
    "train": "train",
    "train_summary": "train",
    "train_check": "train",
    "train_equivalence": "train",
    "baseline": "baseline",
}


def stage_of(rule: str) -> str:
    if rule.startswith("report_"):
        return "report"
    if rule.startswith("audit"):
        return "audit"
    return STAGE_OF_RULE.get(rule, rule)


@dataclass(frozen=True)
class Job:
    rule: str
    name: str  # the wildcards part of the file name
    wall_s: float
    cpu_s: float  # NaN where Snakemake could not measure it
    max_rss_mb: float  # NaN likewise
    end: float  # the file's modification time (the job's end), epoch s


def _num(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "", "NA", "-") else math.nan
    except ValueError:
        return math.nan


def read_jobs(bench_dir: Path) -> list[Job]:
    """Every ``<rule>/<name>.tsv`` under ``bench_dir`` (the last row of each: a rerun appends none, it rewrites)."""
    if not bench_dir.is_dir():
        raise HsitpError(
            f"{bench_dir}: no benchmark files (each rule's `benchmark:` writes them when its job runs)"
        )
    jobs = []
    for f in sorted(bench_dir.rglob("*.tsv")):
        rows = list(csv.DictReader(f.read_text().splitlines(), delimiter="\t"))
        if not rows:
            continue
        row = rows[-1]
        rel = f.relative_to(bench_dir)
        jobs.append(
            Job(
                rule=rel.parts[0],
                name=str(Path(*rel.parts[1:]).with_suffix("")),
                wall_s=_num(row.get("s")),
                cpu_s=_num(row.get("cpu_time")),
                max_rss_mb=_num(row.get("max_rss")),
                end=os.stat(f).st_mtime,
            )
        )
    if not jobs:
        raise HsitpError(f"{bench_dir}: no benchmark rows")
    return jobs


def _nansum(xs: Sequence[float]) -> float:
    vals = [x for x in xs if not math.isnan(x)]
    return sum(vals) if vals else math.nan


def _nanmax(xs: Sequence[float]) -> float:
    vals = [x for x in xs if not math.isnan(x)]
    return max(vals) if vals else math.nan


def table_rows(jobs: Sequence[Job], by: str = "stage") -> list[dict[str, object]]:
    """Rows per stage (or per rule): jobs, summed wall s, summed CPU s, largest max RSS MB; then a total row."""
    key = (lambda j: stage_of(j.rule)) if by == "stage" else (lambda j: j.rule)
    groups: dict[str, list[Job]] = {}
    for j in jobs:
        groups.setdefault(key(j), []).append(j)
    order = sorted(groups, key=lambda k: -_nansum([j.wall_s for j in groups[k]]))
    rows = []
    for k in [*order, "total"]:
        js = list(jobs) if k == "total" else groups[k]
        rows.append(
            {
                by: k,
                "jobs": len(js),
                "wall_s": round(_nansum([j.wall_s for j in js]), 1),
                "cpu_s": round(_nansum([j.cpu_s for j in js]), 1),
                "max_rss_mb": round(_nanmax([j.max_rss_mb for j in js]), 1),
            }
        )
    return rows


def span_s(jobs: Sequence[Job]) -> float:
    """First job start to last job end (s), from the files' times and each job's wall time."""
    return max(j.end for j in jobs) - min(j.end - (0.0 if math.isnan(j.wall_s) else j.wall_s) for j in jobs)


def _csv(rows: Sequence[dict[str, object]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _md(rows: Sequence[dict[str, object]], note: str) -> str:
    cols = list(rows[0])
    out = [note, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"


def write_jobs_tables(run: str, logs_root: Path, results_root: Path, machine: str) -> tuple[str, list[Path]]:
    """Read ``logs_root/<run>/benchmarks``, write ``results_root/<run>/tables/jobs_time.{csv,md}`` (per stage) and
    ``jobs_time_rules.{csv,md}`` (per rule); return the printed text and the paths."""
    jobs = read_jobs(logs_root / run / "benchmarks")
    note = (
        f"Measured by Snakemake's `benchmark:` per job (logs/{run}/benchmarks/), run `{run}`, on {machine}. "
        f"wall_s and cpu_s are summed over jobs (jobs run side by side, so the sum exceeds the elapsed time); "
        f"max_rss_mb is the largest job's. Span of the run (first job start to last end): {span_s(jobs):.0f} s."
    )
    out_dir = results_root / run / "tables"
    paths = []
    text = [note]
    for name, by in (("jobs_time", "stage"), ("jobs_time_rules", "rule")):
        rows = table_rows(jobs, by=by)
        paths.append(atomic_write_text(out_dir / f"{name}.csv", _csv(rows)))
        md = _md(rows, note)
        paths.append(atomic_write_text(out_dir / f"{name}.md", md))
        text.append(md.split("\n", 2)[2])
    return "\n".join(text), paths
