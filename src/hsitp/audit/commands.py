"""``hsitp audit claims`` (the claims table from a run's cached results) and ``hsitp audit check`` (a run against
the committed reference; exits 1 with a readable diff on drift, 2 with one line when the reference is
missing, lacks a file the run made or one its manifest lists, or holds a damaged file: never a PASS on
nothing)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hsitp.config import add_config_args, config_from_args


def _claims(args: argparse.Namespace) -> int:
    from hsitp.audit.audit import write_claims
    from hsitp.audit.claims import CLAIMS_FILE, Context, evaluate_claims, load_claims, verdict_counts
    from hsitp.audit.claims.coherence import refuse_incoherent
    from hsitp.io import provenance
    from hsitp.settings import AuditSettings

    s = AuditSettings.from_config(config_from_args(args))
    ctx = Context(Path(args.run_dir) / "cost", s)
    claims = load_claims()
    rows, inputs = evaluate_claims(ctx, claims), ctx.inputs
    refuse_incoherent(claims, rows)
    prov = provenance(
        config=s.config, inputs={**{k: str(v) for k, v in inputs.items()}, "claims.yaml": CLAIMS_FILE}
    )
    paths = write_claims(rows, args.out, inputs, prov)
    counts = ", ".join(f"{k} {v}" for k, v in verdict_counts(rows).items())
    n_findings = sum(r.kind == "finding" for r in rows)
    print(
        f"wrote {', '.join(map(str, paths))}: {len(rows) - n_findings} claims ({counts}) "
        f"and {n_findings} findings"
    )
    return 0


def _evidence(args: argparse.Namespace) -> int:
    """The list of which rows read each committed reference, and why the others do not (docs/audit.md)."""
    from hsitp.audit.claims import load_claims
    from hsitp.audit.claims.coherence import evidence_markdown
    from hsitp.audit.claims.validate import load_tags

    text = evidence_markdown(load_claims(), load_tags())
    if args.out is None:
        sys.stdout.write(text)
    else:
        from hsitp.io import atomic_write_text

        atomic_write_text(args.out, text)
    return 0


def _check(args: argparse.Namespace) -> int:
    from hsitp.audit.audit import audit_run, report_text
    from hsitp.io import atomic_write_text

    run_dir, ref = Path(args.run_dir), Path(args.reference)
    rep = audit_run(run_dir, ref, Path(args.claims) if args.claims else None)
    text = report_text(rep, run_dir, ref)
    atomic_write_text(args.out, text)
    if rep.drift:
        print(text, file=sys.stderr)
        # Under Snakemake the report is a failed job's output, deleted on exit 1: the last line then names the log
        # that holds this text (--log), which Snakemake keeps.
        where = f"listed above in {args.log}" if args.log else f"in {args.out}"
        print(
            f"hsitp: audit: {len(rep.drift)} difference line(s) against {ref}, {where}",
            file=sys.stderr,
        )
        return 1
    print(f"audit passed ({rep.coverage()}); report {args.out}")
    return 0


def _verdict(args: argparse.Namespace) -> int:
    """The auditor's line: the run's present outputs re-checked against the reference, nothing written."""
    import time

    from hsitp.audit.audit import audit_run, read_claims_csv, table_counts
    from hsitp.errors import HsitpError

    t0 = time.monotonic()
    run_dir, ref = Path(args.run_dir), Path(args.reference)
    claims = Path(args.claims) if args.claims else run_dir / "tables" / "paper_claims.csv"
    if not claims.is_file():
        raise HsitpError(f"audit verdict: {claims} does not exist (build the run's audit first)")
    rep = audit_run(run_dir, ref, claims)
    counts = table_counts(read_claims_csv(claims))
    summary = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
    took = time.monotonic() - t0
    state = "FAIL" if rep.drift else "PASS"
    diff = f"{len(rep.drift)} difference line(s)" if rep.drift else "no differences"
    print(
        f"hsitp audit: {state}: {run_dir} against {ref}: {rep.coverage()}, {diff}; "
        f"{sum(counts.values())} claims: {summary} (re-checked now from the present outputs in {took:.1f} s)"
    )
    if rep.drift:
        for line in rep.drift[:10]:
            print(f"  {line}")
        if len(rep.drift) > 10:
            print(f"  ... and {len(rep.drift) - 10} more: `hsitp audit check` writes them all")
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser(
        "audit", help="the paper's claims, one by one, and the drift check against the reference"
    )
    asub = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    p = asub.add_parser(
        "claims", help="claims table (csv, md, json) from a run's cost tables, registry and config"
    )
    p.add_argument("--run-dir", required=True, type=Path, help="results/RUN (reads RUN/cost/*.nc)")
    p.add_argument(
        "--out",
        required=True,
        type=Path,
        help="CSV to write (e.g. results/RUN/tables/paper_claims.csv); .md and .json beside it",
    )
    add_config_args(p)
    p.set_defaults(func=_claims)
    p = asub.add_parser(
        "evidence", help="which claims read each committed reference, and why the others do not (Markdown)"
    )
    p.add_argument("--out", type=Path, default=None, help="file to write (default: standard output)")
    p.set_defaults(func=_evidence)
    p = asub.add_parser("check", help="compare a run with the committed reference; exit 1 on drift")
    p.add_argument("--run-dir", required=True, type=Path, help="results/RUN")
    p.add_argument(
        "--reference",
        default=Path("results/reference/smoke"),
        type=Path,
        help="reference folder (default results/reference/smoke)",
    )
    p.add_argument(
        "--claims", type=Path, default=None, help="claims CSV (default RUN/tables/paper_claims.csv)"
    )
    p.add_argument(
        "--out", required=True, type=Path, help="report to write (e.g. results/RUN/audit/report.md)"
    )
    p.add_argument(
        "--log",
        type=Path,
        default=None,
        help="the log this command's output goes to (the rule's log:); named on failure, since Snakemake "
        "deletes the report of a failed job",
    )
    p.set_defaults(func=_check)
    p = asub.add_parser(
        "verdict",
        help="re-check a finished run's outputs against the reference now; one line: PASS or FAIL and the "
        "claims' counts (writes nothing; exit 1 on FAIL)",
    )
    p.add_argument("--run-dir", required=True, type=Path, help="results/RUN")
    p.add_argument("--reference", default=Path("results/reference/smoke"), type=Path, help="reference folder")
    p.add_argument(
        "--claims", type=Path, default=None, help="claims CSV (default RUN/tables/paper_claims.csv)"
    )
    p.set_defaults(func=_verdict)
    from hsitp.audit.reproduce import register as register_reproduce  # the spot check

    register_reproduce(asub)
