"""``hsitp report reference|measured|jobs|check``: what leaves a run for readers, added to the ``report`` group by
``hsitp.cli`` (report never imports publish)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(rsub: argparse._SubParsersAction) -> None:
    """Add the publishing actions to the ``report`` group's subparsers (``hsitp.report.commands.register``'s result)."""
    _register_check(rsub)
    _register_jobs(rsub)
    _register_measured(rsub)
    _register_reference(rsub)


def _register_check(rsub: argparse._SubParsersAction) -> None:
    ck = rsub.add_parser(
        "check",
        help="open a Snakemake report in headless Chromium: every figure decodes, captions name the hardware, "
        "no console error; screenshots of the front page and one figure page",
    )
    ck.add_argument("report", help="the report, e.g. results/smoke/report.html")
    ck.add_argument(
        "--shots", required=True, help="folder for front.png and figure.png, e.g. results/smoke/report"
    )
    ck.add_argument(
        "--figure",
        default="bench_predicted_vs_measured",
        help="figure to open through the navigation (name prefix)",
    )
    ck.set_defaults(func=_check)


def _register_jobs(rsub: argparse._SubParsersAction) -> None:
    jb = rsub.add_parser(
        "jobs",
        help="per stage: jobs, summed wall and CPU s, largest max RSS, from Snakemake's per-job benchmark files "
        "(logs/RUN/benchmarks/); writes results/RUN/tables/jobs_time{,_rules}.{csv,md}",
    )
    jb.add_argument("run", help="the run name (config `run`), e.g. smoke")
    jb.add_argument("--logs", default="logs", type=Path, help="logs root (default logs)")
    jb.add_argument("--results", default="results", type=Path, help="results root (default results)")
    jb.set_defaults(func=_jobs)


def _register_measured(rsub: argparse._SubParsersAction) -> None:
    ms = rsub.add_parser(
        "measured",
        help="rewrite the generated blocks of docs/measured.md, docs/measured-history.md and README.md from committed references "
        "(results/reference/RUN); --check: exit 1 when a block differs from its regeneration",
    )
    ms.add_argument(
        "--reference", nargs="+", required=True, help="reference folders, e.g. results/reference/cpu-fair"
    )
    ms.add_argument(
        "--doc",
        nargs="+",
        default=["docs/measured.md", "docs/measured-history.md", "README.md"],
        help="documents holding generated blocks",
    )
    ms.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 when a block would change")
    ms.set_defaults(func=_measured)


def _register_reference(rsub: argparse._SubParsersAction) -> None:
    rf = rsub.add_parser(
        "reference",
        help="collect a run's reported numbers for committing (results/reference/RUN): summaries, one row per "
        "training record (train/runs.nc), tuning studies, probe files, manifest.json; no checkpoint or cube",
    )
    rf.add_argument("--run-dir", required=True, type=Path, help="the run, e.g. results/cpu-fair")
    rf.add_argument(
        "--out", required=True, type=Path, help="the reference folder, e.g. results/reference/cpu-fair"
    )
    rf.set_defaults(out_is_folder=True)  # hsitp.config.check_outputs: a folder is what --out names here
    rf.add_argument(
        "--logs-dir",
        type=Path,
        help="the run's logs (wall times of its jobs); default logs/RUN beside results/",
    )
    rf.add_argument(
        "--config",
        action="append",
        default=[],
        help="the run's YAML overlays, in order (recorded with their hash)",
    )
    rf.set_defaults(func=_reference)


def _reference(args: argparse.Namespace) -> int:
    from hsitp.publish.reference import collect, describe_manifest

    manifest = collect(args.run_dir, args.out, logs_dir=args.logs_dir, config_paths=args.config)
    print(describe_manifest(manifest, args.out))
    return 0


def _measured(args: argparse.Namespace) -> int:
    from hsitp.publish.measured import update

    changed = update(args.doc, args.reference, check=args.check)
    for doc in changed:
        print(f"{doc}: {'differs from its regeneration' if args.check else 'rewritten'}")
    if not changed:
        print(f"{', '.join(args.doc)}: every generated block matches {', '.join(args.reference)}")
    return 1 if changed and args.check else 0


def _jobs(args: argparse.Namespace) -> int:
    from hsitp.io import cpu_model
    from hsitp.publish.jobs import write_jobs_tables

    machine = f"{cpu_model()}, {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} now)"
    text, paths = write_jobs_tables(args.run, args.logs, args.results, machine)
    print(text)
    print(f"wrote {', '.join(map(str, paths))}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from hsitp.publish.browser import check_report

    res = check_report(args.report, args.shots, figure=args.figure)
    print(
        f"{args.report}: {len(res.entries)} entries, {len(res.image_widths)} embedded images, all decode; "
        f"no console error; screenshots {', '.join(str(p) for p in res.screenshots)}"
    )
    return 0
