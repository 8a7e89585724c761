"""``hsitp report jobs RUN``: where a run's time went, from Snakemake's own per-job measurements.

Every rule has a ``benchmark:`` directive writing ``logs/<run>/benchmarks/<rule>/<wildcards>.tsv`` (Snakemake's
columns: ``s`` wall seconds, ``max_rss`` MB, ``cpu_time`` s, ...; under SLURM the job step writes the same file).
This sums them per stage: jobs, wall s, CPU s, the largest max RSS, and the run's span. Measured on the machine
that ran the jobs; nothing is modelled.

One invocation, not a folder's history: the workflow records each snakemake call that runs jobs
(``logs/<run>/invocations/<start>.json``, written by the ``onstart`` / ``onsuccess`` hooks of hooks.smk: start,
end, the command, each job's benchmark file, whether it built the ``all`` target). The table is the last complete
invocation that built ``all`` (the main job, or the resumed part of a killed one), its span that call's start to
end; later re-renders and audits are left out and said so. Without a complete record that built ``all`` (a run
never finished, or whose logs have none) every benchmark file is read, and the note says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hsitp.errors import HsitpError
from hsitp.io import atomic_write_text
from hsitp.markdown import markdown_table

INVOCATIONS = "invocations"  # logs/<run>/invocations/: one JSON record per snakemake call that ran jobs


def stage_of(rule: str) -> str:
    """The stage a rule belongs to: its name up to the first ``_`` (every rule is named after its stage:
    ``data_prepare``, ``bench_calibrate``, ``train_control``, ``report_cost``, ``audit_claims``, ``tune``)."""
    return rule.split("_", 1)[0]


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


def _nan(fn: Callable[[list[float]], float], xs: Iterable[float]) -> float:
    """``fn`` (sum, max) of the numbers among ``xs``; NaN where all are NaN."""
    vals = [x for x in xs if not math.isnan(x)]
    return fn(vals) if vals else math.nan


def table_rows(jobs: Sequence[Job], by: str = "stage") -> list[dict[str, object]]:
    """Rows per stage (or per rule): jobs, summed wall s, summed CPU s, largest max RSS MB; then a total row."""
    key = (lambda j: stage_of(j.rule)) if by == "stage" else (lambda j: j.rule)
    groups: dict[str, list[Job]] = {}
    for j in jobs:
        groups.setdefault(key(j), []).append(j)
    order = sorted(groups, key=lambda k: -_nan(sum, (j.wall_s for j in groups[k])))
    sets = [(k, groups[k]) for k in order] + [("total", list(jobs))]
    return [
        {
            by: k,
            "jobs": len(js),
            "wall_s": round(_nan(sum, (j.wall_s for j in js)), 1),
            "cpu_s": round(_nan(sum, (j.cpu_s for j in js)), 1),
            "max_rss_mb": round(_nan(max, (j.max_rss_mb for j in js)), 1),
        }
        for k, js in sets
    ]


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
    """``note``, then the rows as a Markdown table, each cell as ``str`` gives it (no number reformatted)."""
    cols = list(rows[0])
    return f"{note}\n\n{markdown_table([[r[c] for c in cols] for r in rows], cols)}\n"


def start_invocation(run_logs: Path, jobs: Sequence[tuple[str, str | None]], command: Sequence[str]) -> Path:
    """Record a snakemake call that is about to run ``jobs`` ((rule, benchmark file or None) each); returns the
    record, which :func:`finish_invocation` completes."""
    start = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(start)) + f"{start % 1:.6f}"[1:]
    record = {
        "start": start,
        "end": None,
        "complete": False,
        "command": list(command),
        "builds_all": any(rule == "all" for rule, _ in jobs),
        "jobs": [{"rule": rule, "benchmark": bench} for rule, bench in jobs],
    }
    return atomic_write_text(run_logs / INVOCATIONS / f"{stamp}.json", json.dumps(record, indent=1) + "\n")


def finish_invocation(record: Path) -> None:
    """Mark the call of ``record`` complete (every job done) with its end time."""
    data = json.loads(record.read_text())
    data.update(end=time.time(), complete=True)
    atomic_write_text(record, json.dumps(data, indent=1) + "\n")


@dataclass(frozen=True)
class Invocation:
    start: float  # epoch s
    end: float  # epoch s
    benchmarks: list[str]  # the benchmark files of its jobs (relative to the working directory)
    steps: int  # its jobs as Snakemake counts them (the `all` target and rules without a benchmark included)
    later: int  # complete invocations after it (re-renders, audits) left out of the table


def last_complete_invocation(run_logs: Path) -> Invocation | None:
    """The last complete snakemake call that built ``all``, or None without such a record."""
    records = []
    for f in sorted((run_logs / INVOCATIONS).glob("*.json")):
        try:
            records.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue  # a record being written by a running call
    complete = [r for r in records if r.get("complete")]
    full = [r for r in complete if r.get("builds_all")]
    if not full:
        return None
    last = full[-1]
    later = sum(r["start"] > last["start"] for r in complete)
    benches = [j["benchmark"] for j in last["jobs"] if j.get("benchmark")]
    start, end = float(last["start"]), float(last["end"])
    return Invocation(start, end, benches, len(last["jobs"]), later)


def write_jobs_tables(run: str, logs_root: Path, results_root: Path, machine: str) -> tuple[str, list[Path]]:
    """Read ``logs_root/<run>/benchmarks``, write ``results_root/<run>/tables/jobs_time.{csv,md}`` (per stage) and
    ``jobs_time_rules.{csv,md}`` (per rule); return the printed text and the paths."""
    bench_dir = logs_root / run / "benchmarks"
    jobs = read_jobs(bench_dir)
    inv = last_complete_invocation(logs_root / run)
    if inv is None:
        which = (
            f"every benchmark file under logs/{run}/benchmarks/ (no complete invocation record that built `all`, "
            f"so later re-renders and audits are folded in). Span (first job start to last end): "
            f"{span_s(jobs):.0f} s."
        )
    else:
        mine = {str(Path(b).relative_to(f"logs/{run}/benchmarks")) for b in inv.benchmarks}
        jobs = [j for j in jobs if str(Path(j.rule) / j.name) + ".tsv" in mine]
        if not jobs:
            raise HsitpError(f"{bench_dir}: none of the last complete invocation's benchmark files is there")
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(inv.start))
        left = f"; {inv.later} later call(s) (re-renders, audits) left out" if inv.later else ""
        which = (
            f"one snakemake call: the last complete one that built `all`, started {started}, "
            f"{inv.steps} Snakemake steps ({len(jobs)} job{'' if len(jobs) == 1 else 's'} with a benchmark file), "
            f"{inv.end - inv.start:.0f} s from start to end{left}."
        )
    note = (
        f"Measured by Snakemake's `benchmark:` per job (logs/{run}/benchmarks/), run `{run}`, on {machine}: "
        f"{which} wall_s and cpu_s are summed over jobs (jobs run side by side, so the sum exceeds the elapsed "
        f"time); max_rss_mb is the largest job's."
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
