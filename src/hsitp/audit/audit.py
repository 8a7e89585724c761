"""Write the claims table, and check a run against the committed reference (``hsitp audit check``).

Tolerances (declared here, reported in the report):

- modelled values (cost tables ``cost/*.nc``, and the claims' pipeline numbers computed from them): exact,
  rtol 1e-12 (atol 0); strings, coordinates and dims equal; verdicts equal.
- measured values (bench files, 10-22 % run to run on a shared CPU): schema only (variables, dims, units) and
  broad bands: positive and finite (zero only where ``LEGIT_ZEROS`` says why: a point that communicates nothing),
  medians within 10x of the reference's where the reference has them. Never gated tightly.

Every file is read through its contract (:mod:`hsitp.contracts`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import xarray as xr

from hsitp.analysis.cells import cell_table
from hsitp.audit.claims import COLUMNS, COST_TABLES, VERDICTS, basis_counts, finding_counts, verdict_counts
from hsitp.audit.claims.render import Row
from hsitp.contracts import COST, PROBE_MEMORY, TRAIN_SUMMARY, Cell
from hsitp.errors import HsitpError
from hsitp.io import atomic_write_text, read_netcdf
from hsitp.markdown import markdown_table
from hsitp.outcomes import Basis, Claim
from hsitp.publish.reference import MANIFEST, not_as_collected, read_manifest

MODELLED_RTOL = 1e-12
# A claims row whose evidence is a committed headline or GPU reference (results/reference/<run>/, not the smoke
# reference the drift check compares with): the measured sub-checks read them.
COMMITTED_SOURCE = re.compile(r"reference/(?!smoke/)[\w.-]+/")
MEASURED_BAND = 10.0  # measured medians may differ from the reference by this factor either way
# Attributes that differ on every run (kind: equal by the contract each file is read through), never compared.
VOLATILE_ATTRS = ("provenance", "history", "kind")
# What a bench file must hold: variable -> (dims it must have, units)
BENCH_SCHEMA: dict[str, dict[str, tuple[tuple[str, ...], str | None]]] = {
    "microbench": {
        "time_median": (("op", "P", "N", "D", "L", "dtype", "mode"), None),
        "ccr_measured": (("op", "P", "N", "D", "L", "dtype"), None),
        "coll_time_median": (("collective", "P", "nbytes"), None),
    },
    "calibration": {
        "alpha": (("collective",), "s"),
        "beta": (("collective",), "B/s"),
        "achieved_flops": (("op",), "FLOP/s"),
    },
    "model_vs_measured": {
        "ccr_measured": (("op", "P", "N", "D", "L"), None),
        "ccr_refined": (("op", "P", "N", "D", "L"), None),
        "held_out": (("op", "P", "N", "D", "L"), None),
    },
}
# Measured variables whose values get the positive/finite band (NaN = point not run, allowed).
BENCH_POSITIVE = {
    "microbench": ("time_median", "coll_time_median"),
    "calibration": ("beta", "achieved_flops"),
    "model_vs_measured": ("ccr_measured",),
}


# Ops computed whole on every rank, whose trace is empty at any P: the replicated LayerNorm and the tokeniser.
SILENT_OPS = ("layernorm_replicated", "tokenize")
_SILENT = "P = 1 or op in " + ", ".join(SILENT_OPS)


def _communicates_nothing(ds: xr.Dataset) -> xr.DataArray:
    """Points with no collective at all: one rank (P = 1), or an op of SILENT_OPS."""
    return (ds["P"] == 1) | ds["op"].isin(list(SILENT_OPS))


# The only places a measured value may be exactly 0, each with the reason the schema gives for it: a point that
# communicates nothing has a comm-only replay of zero collectives (time 0) and so a measured CCR of 0. Any other
# zero, negative or non-finite value is drift.
LEGIT_ZEROS: dict[tuple[str, str], tuple[str, Any]] = {
    ("microbench", "time_median"): (
        f"mode = comm where {_SILENT} (nothing to communicate)",
        lambda ds: (ds["mode"] == "comm") & _communicates_nothing(ds),
    ),
    ("microbench", "ccr_measured"): (
        f"{_SILENT} (nothing to communicate)",
        _communicates_nothing,
    ),
    ("model_vs_measured", "ccr_measured"): (
        f"{_SILENT} (nothing to communicate)",
        _communicates_nothing,
    ),
}


# --- claims table --------------------------------------------------------------------------------------------------
def _csv_text(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(r).items()})
    return buf.getvalue()


def _md_text(rows: Sequence[Row], inputs: Mapping[str, str]) -> str:
    out = [*_md_header(rows, inputs), *_md_decided(rows), *_md_findings(rows), *_md_all_claims(rows)]
    return "\n".join(out) + "\n"


def _md_header(rows: Sequence[Row], inputs: Mapping[str, str]) -> list[str]:
    """The title, the counts by verdict and by basis, and what the bases mean."""
    counts = verdict_counts(rows)
    return [
        "# The paper's claims, one by one",
        "",
        f"{sum(r.kind != 'finding' for r in rows)} claims. Verdicts: "
        + ", ".join(f"{v} {n}" for v, n in counts.items())
        + ". Findings (modelled, measured or half-measured answers beside the claims, not counted): "
        + str(sum(r.kind == "finding" for r in rows))
        + "".join(f", {v} {n}" for v, n in finding_counts(rows).items())
        + ".",
        "",
        "By basis: "
        + "; ".join(
            f"{b}: " + ", ".join(f"{v} {n}" for v, n in c.items()) for b, c in basis_counts(rows).items()
        )
        + ".",
        "",
        "Basis: *computed* (from the cost tables, the registry, the stated formulas or the config, under the "
        "tolerance shown), *circular* (the paper's own formulas at the paper's own numbers: agreement is "
        "*consistent* with its own assumptions, not *holds*), *reading* (a source is cited; evidence that holds by our own construction is labelled "
        "so), *pending* (a stage not built yet, or a measurement not made), *measured* (every compared quantity "
        "measured in one run under the guard against run-to-run spread: the run's own probe/ and bench/ files, "
        "or the accuracy run's train/summary.nc), *half-measured* (one half measured, the other modelled: "
        "findings only). A claim rests on the paper's formulas (judged by them) or on a measurement (judged by a "
        "full one; column rests_on). A verdict marked "
        "**knife edge** moves with a 2 % change of its value or one point of its share; *hedged* claims say "
        "可能/约 (rules: docs/audit.md). Inputs: "
        + ", ".join(f"`{k}`: {v}" for k, v in inputs.items())
        + ".",
        "",
    ]


def _md_decided(rows: Sequence[Row]) -> list[str]:
    """The claims a measurement decided, and the contradicted ones."""
    out = ["## Decided by measurement", ""]
    decided = [r for r in rows if r.basis == Basis.MEASURED and r.verdict != Claim.PENDING]
    out += [
        f"- **{r.id}** (§{r.section}, {r.verdict}{', finding' if r.kind == 'finding' else ''}): "
        f"{r.en}; {r.source}"
        for r in decided
    ] or ["(none: no measured file of this run, or of the accuracy run, decided a claim)"]
    out += [
        "",
        "## Contradicted",
        "",
    ]
    out += [
        f"- **{r.id}** (§{r.section}) {r.en}: {r.reason or r.how}"
        for r in rows
        if r.verdict == Claim.CONTRADICTED and r.kind != "finding"
    ]
    return out


def _md_findings(rows: Sequence[Row]) -> list[str]:
    """The findings' table: each beside the claims it bears on, with its basis (modelled, measured, half-measured)."""
    out = [
        "",
        "## Findings",
        "",
        "What our refined model, a measurement or a half-measurement says of claims it does not judge (rules 2 "
        "and 8); each finding's verdict is of its own statement (column *finding*), left out of the counts.",
        "",
    ]
    verdict_of_id = {r.id: r.verdict for r in rows}
    header = ("claims (their verdicts)", "finding", "value", "finding's verdict", "basis", "reason")
    found = [
        (
            ", ".join(f"{t} ({verdict_of_id.get(t, '?')})" for t in str(r.refines).split("; ")),
            f"{r.id}: {r.en}",
            r.pipeline_value,
            r.verdict,
            r.basis,
            r.reason or r.how,
        )
        for r in rows
        if r.kind == "finding"
    ]
    return out + markdown_table(found, header).split("\n")


def _md_all_claims(rows: Sequence[Row]) -> list[str]:
    """The table of every claim."""
    header = ("id", "§", "kind", "paper", "paper value", "pipeline value", "how / source", "tolerance", "verdict",
              "basis", "reason")  # fmt: skip
    table = [
        (
            r.id,
            r.section,
            r.kind,
            f"{r.zh} ({r.en})" + (" *hedged*" if r.hedged else ""),
            r.paper_value,
            r.pipeline_value,
            f"{r.how}; {r.source}",
            r.tolerance,
            r.verdict + (f" **knife edge** ({r.edge})" if r.knife_edge else ""),
            r.basis,
            r.reason,
        )
        for r in rows
    ]
    return ["", "## All claims", "", *markdown_table(table, header).split("\n")]


def write_claims(
    rows: Sequence[Row], out_csv: Path, inputs: Mapping[str, Path | str], prov: Mapping[str, Any]
) -> list[Path]:
    """``paper_claims.csv`` (the table), ``.md`` (readable, with counts and the contradicted list) and ``.json``
    (rows + counts + provenance) side by side."""
    out_csv = Path(out_csv)
    md, js = out_csv.with_suffix(".md"), out_csv.with_suffix(".json")
    atomic_write_text(out_csv, _csv_text(rows))
    atomic_write_text(md, _md_text(rows, {k: str(v) for k, v in inputs.items()}))
    clean = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(r).items()}
        for r in rows
    ]
    doc = {
        "counts": verdict_counts(rows),
        "n_claims": sum(r.kind != "finding" for r in rows),
        "finding_counts": finding_counts(rows),
        "n_findings": sum(r.kind == "finding" for r in rows),
        "provenance": dict(prov),
        "claims": clean,
    }
    atomic_write_text(js, json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    return [out_csv, md, js]


CLAIMS_COLUMNS = ("id", "kind", "verdict")  # what the comparison and the counts read from every row


def read_claims_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a claims table; :class:`HsitpError` naming the file when it is missing, a folder, not UTF-8
    text, empty or lacks the ``id`` and ``verdict`` columns (not a table ``hsitp audit claims`` wrote)."""
    path = Path(path)
    rerun = "run `hsitp audit claims` (rule audit_claims)"
    if not path.exists():
        raise HsitpError(f"{path}: no claims table; {rerun}")
    if path.is_dir():
        raise HsitpError(f"{path}: is a directory, not a claims table (CSV); {rerun}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise HsitpError(
            f"{path}: not a claims table (not UTF-8 text: {exc.reason} at byte {exc.start})"
        ) from exc
    if not text.strip():
        raise HsitpError(f"{path}: empty claims table; {rerun}")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in CLAIMS_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise HsitpError(
            f"{path}: not a claims table (no {', '.join(missing)} column in its header {reader.fieldnames}); {rerun}"
        )
    return _whole_rows(path, reader, text, rerun)


def table_counts(rows: Sequence[Mapping[str, str]]) -> dict[str, int]:
    """The verdicts of a claims table's claims, as read (:func:`read_claims_csv`); findings left out, as in the
    table's own counts (:func:`~hsitp.audit.claims.render.verdict_counts`)."""
    return {v: sum(r["verdict"] == v for r in rows if r["kind"] != "finding") for v in VERDICTS}


def _whole_rows(path: Path, reader: csv.DictReader, text: str, rerun: str) -> list[dict[str, str]]:
    """Every row of ``reader``, refused (one line naming the file) when a row lacks fields or has extra
    ones, or the text stops mid-row: a table cut short (a full disk, an interrupted copy) would otherwise
    compare as claims "missing now" or "new", or pass with its last row's verdict cut in half; a claim listed
    twice (which of its verdicts would count?) or none at all is refused the same way."""
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for row in reader:
        if None in row or None in row.values():
            have = sum(v is not None for k, v in row.items() if k is not None)
            raise HsitpError(
                f"{path}: truncated or damaged claims table (line {reader.line_num} has "
                f"{have + len(row.get(None) or [])} of {len(reader.fieldnames or [])} fields); {rerun}"
            )
        if row["id"] in seen:
            raise HsitpError(f"{path}: claim {row['id']} listed twice (line {reader.line_num}); {rerun}")
        if row["verdict"] not in VERDICTS:  # an edited verdict compared as drift, in a many-line report
            raise HsitpError(
                f"{path}: claim {row['id']} has the verdict {row['verdict']!r} (line {reader.line_num}), not one of "
                f"{', '.join(VERDICTS)}; {rerun}"
            )
        seen.add(row["id"])
        rows.append(row)
    if not text.endswith("\n"):
        raise HsitpError(f"{path}: truncated claims table (it ends mid-row, line {reader.line_num}); {rerun}")
    if not rows:
        raise HsitpError(f"{path}: a claims table with no claim; {rerun}")
    return rows


# --- comparisons ---------------------------------------------------------------------------------------------------
@dataclass
class Report:
    """Differences found (each one line: file, variable, coordinates, reference vs new) and what was checked."""

    drift: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # the reference's files (manifest.json left out)
    compared: list[str] = field(default_factory=list)  # those of them the check read and compared

    def coverage(self) -> str:
        """What was compared, against what the reference holds (``6 of 7 reference files compared, 6
        checks``): a count of checks alone passed an empty reference as "3 checks, no differences"."""
        return (
            f"{len(self.compared)} of {len(self.held)} reference files compared, {len(self.checked)} checks"
        )


def _coords_text(da: xr.DataArray, index: tuple[int, ...]) -> str:
    parts = []
    for dim, i in zip(da.dims, index, strict=True):
        label = da[dim].values[i] if dim in da.coords else i
        parts.append(f"{dim}={label.item() if hasattr(label, 'item') else label}")
    return ", ".join(parts)


def _show(x: Any) -> str:
    return (
        f"{float(x):.12g}"
        if isinstance(x, float | np.floating)
        else repr(x.item() if hasattr(x, "item") else x)
    )


MAX_LISTED = 5  # points named per differing variable; the rest counted


def _listed(bad: np.ndarray, line: Callable[[tuple[int, ...]], str]) -> list[str]:
    """``line`` of each of the first :data:`MAX_LISTED` points where ``bad`` holds, then how many more."""
    idx = np.argwhere(bad)
    lines = [line(tuple(int(x) for x in i)) for i in idx[:MAX_LISTED]]
    return lines + ([f"    ... {len(idx) - MAX_LISTED} more"] if len(idx) > MAX_LISTED else [])


def _compare_values(name: str, ref: xr.DataArray, new: xr.DataArray, rtol: float) -> list[str]:
    """Lines describing where ``new`` differs from ``ref`` (empty: equal within rtol; NaN equals NaN)."""
    if ref.dims != new.dims or ref.shape != new.shape:
        return [f"{name}: dims {dict(ref.sizes)} in the reference, {dict(new.sizes)} now"]
    a, b = np.asarray(ref.values), np.asarray(new.values)
    if a.dtype.kind in "fciub" and b.dtype.kind in "fciub":
        a, b = a.astype(float), b.astype(float)
        both_nan = np.isnan(a) & np.isnan(b)
        with np.errstate(invalid="ignore"):
            bad = ~(both_nan | (a == b) | (np.abs(a - b) <= rtol * np.abs(a)))
    else:
        bad = a.astype(str) != b.astype(str)
    if not bad.any():
        return []
    return [f"{name}: {int(bad.sum())} of {a.size} value(s) differ (rtol {rtol:g})"] + _listed(
        bad,
        lambda t: f"    at {_coords_text(ref, t) or 'scalar'}: reference {_show(a[t])}, new {_show(b[t])}",
    )


def _attr_value(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v.tolist() if hasattr(v, "tolist") else v


def compare_modelled(ref: xr.Dataset, new: xr.Dataset, label: str, rtol: float = MODELLED_RTOL) -> list[str]:
    """Every variable and coordinate by value (rtol), the set of variables, and non-volatile attributes."""
    out: list[str] = []
    rv, nv = set(ref.variables), set(new.variables)
    if rv - nv:
        out.append(f"{label}: variables missing now: {', '.join(sorted(rv - nv))}")
    if nv - rv:
        out.append(f"{label}: variables not in the reference: {', '.join(sorted(nv - rv))}")
    for name in sorted(rv & nv):
        out += [
            line if line.startswith(" ") else f"{label}:{line}"
            for line in _compare_values(name, ref[name], new[name], rtol)
        ]
    for k in sorted((set(ref.attrs) | set(new.attrs)) - set(VOLATILE_ATTRS)):
        a, b = _attr_value(ref.attrs.get(k)), _attr_value(new.attrs.get(k))
        if a != b:
            out.append(f"{label}: attribute {k}: reference {str(a)[:120]!r}, new {str(b)[:120]!r}")
    return out


def check_cost(run_dir: Path, ref_dir: Path, rep: Report) -> None:
    for table in COST_TABLES:
        ref_path, new_path = ref_dir / "cost" / f"{table}.nc", run_dir / "cost" / f"{table}.nc"
        if not ref_path.exists():
            rep.notes.append(f"cost/{table}.nc: not in the reference, not compared")
            continue
        if not new_path.exists():
            rep.drift.append(
                f"cost/{table}.nc: missing in {run_dir} (run `hsitp cost {table}`, rule cost_table)"
            )
            continue
        # one line naming a file of another kind, or a damaged one
        ref, new = read_reference(ref_path, COST[table].read), COST[table].read(new_path)
        rep.compared.append(f"cost/{table}.nc")
        rep.drift += compare_modelled(ref, new, f"cost/{table}.nc")
        rep.checked.append(f"cost/{table}.nc: {len(new.variables)} variables, exact (rtol {MODELLED_RTOL:g})")


def check_claims(new_csv: Path, ref_csv: Path, rep: Report, run_dir: Path | None = None) -> None:
    if not ref_csv.exists():
        rep.notes.append(f"{ref_csv.name}: not in the reference, claims not compared")
        return
    if not new_csv.exists():
        rep.drift.append(f"{new_csv}: missing (run `hsitp audit claims`, rule audit_claims)")
        return
    ref = {r["id"]: r for r in read_reference(ref_csv, read_claims_csv)}
    new = {r["id"]: r for r in read_claims_csv(new_csv)}
    rep.compared.append(ref_csv.name)
    for cid in sorted(set(ref) - set(new)):
        rep.drift.append(f"claims: {cid} in the reference, missing now")
    for cid in sorted(set(new) - set(ref)):
        rep.drift.append(
            f"claims: {cid} is new (not in the reference; update results/reference/ if intended)"
        )
    beside = run_dir is not None and (Path(run_dir).resolve().parent / "reference").exists()
    for cid in sorted(set(ref) & set(new)):
        r, n = ref[cid], new[cid]
        if run_dir is not None and not beside and COMMITTED_SOURCE.search(r.get("source", "")):
            # the reference's row rests on a committed headline or GPU reference; a run folder with no
            # results/reference/ beside it (outside a clone) cannot read it: said, not counted as drift
            rep.notes.append(
                f"claims: {cid}: the reference's row rests on a committed reference; no results/reference/ "
                "beside this run, not compared"
            )
            continue
        if "measured" in (r.get("basis"), n.get("basis")):
            # decided by measurements (the run's probe/bench files, the accuracy run): compared by presence and
            # schema, never by verdict; a reference decided by paper arithmetic (its measured sub-check pending, as
            # on the smoke reference) accepts a run whose measurement decided
            if n.get("basis") != "measured" or n.get("verdict") not in VERDICTS:
                rep.drift.append(
                    f"claims: {cid} is measured-basis in the reference; new basis {n.get('basis')!r}, "
                    f"verdict {n.get('verdict')!r}"
                )
            continue
        if r["verdict"] != n["verdict"]:
            rep.drift.append(
                f"claims: {cid} verdict: reference {r['verdict']}, new {n['verdict']} "
                f"(pipeline value {r['pipeline_value']} -> {n['pipeline_value']})"
            )
        a, b = r["pipeline_number"], n["pipeline_number"]
        if a or b:
            fa, fb = float(a or "nan"), float(b or "nan")
            if not (math.isnan(fa) and math.isnan(fb)) and not abs(fa - fb) <= MODELLED_RTOL * abs(fa):
                rep.drift.append(f"claims: {cid} pipeline_number: reference {a}, new {b}")
    counts = table_counts(list(new.values()))
    rep.checked.append(
        f"{new_csv.name}: {len(new)} claims and findings, verdicts equal (measured-basis claims by presence), "
        f"numbers exact; counts {counts}"
    )


def _band_lines(kind: str, var: str, ds: xr.Dataset) -> list[str]:
    """Drift lines for values of ``var`` that are not positive and finite (NaN = a point not run, allowed), apart
    from the zeros LEGIT_ZEROS allows for this variable; each bad point is named by its coordinates."""
    da = ds[var]
    v = np.asarray(da.values, dtype=float)
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(v) & ~(np.isfinite(v) & (v > 0))
    reason = None
    if (kind, var) in LEGIT_ZEROS:
        reason, where = LEGIT_ZEROS[(kind, var)]
        allowed = np.asarray(where(ds).broadcast_like(da).transpose(*da.dims).values, dtype=bool)
        bad &= ~(allowed & (v == 0))
    label = f"bench/{kind}.nc:{var}"
    if not np.any(~np.isnan(v)):
        return [f"{label}: no measured value (every point NaN)"]
    if not bad.any():
        return []
    allowed_text = f"; zero allowed only where {reason}" if reason else ""
    return [
        f"{label}: {int(bad.sum())} of {v.size} value(s) zero, negative or non-finite{allowed_text}"
    ] + _listed(bad, lambda t: f"    at {_coords_text(da, t)}: {_show(v[t])}")


def check_bench(run_dir: Path, ref_dir: Path, rep: Report) -> None:
    """Measured files: schema and broad bands only."""
    for kind, schema in BENCH_SCHEMA.items():
        path = run_dir / "bench" / f"{kind}.nc"
        if not path.exists():
            rep.notes.append(f"bench/{kind}.nc: not in this run, not checked")
            continue
        ds = read_netcdf(path, kind=kind)
        for var, (dims, units) in schema.items():
            if var not in ds:
                rep.drift.append(f"bench/{kind}.nc: variable {var} missing")
                continue
            missing = [d for d in dims if d not in ds[var].dims]
            if missing:
                rep.drift.append(f"bench/{kind}.nc:{var}: dims {ds[var].dims}, missing {missing}")
            if units and ds[var].attrs.get("units") != units:
                rep.drift.append(
                    f"bench/{kind}.nc:{var}: units {ds[var].attrs.get('units')!r}, expected {units!r}"
                )
        for var in dict.fromkeys((*BENCH_POSITIVE[kind], *(v for k, v in LEGIT_ZEROS if k == kind))):
            if var in ds:
                rep.drift += _band_lines(kind, var, ds)
        ref_path = ref_dir / "bench" / f"{kind}.nc"
        if ref_path.exists():
            ref = read_reference(ref_path, lambda p, kind=kind: read_netcdf(p, kind=kind))
            rep.compared.append(f"bench/{kind}.nc")
            for var in BENCH_POSITIVE[kind]:
                if var in ds and var in ref:
                    m_new, m_ref = float(ds[var].median()), float(ref[var].median())
                    if not (m_ref / MEASURED_BAND <= m_new <= m_ref * MEASURED_BAND):
                        rep.drift.append(
                            f"bench/{kind}.nc:{var}: median {m_new:.3g}, reference {m_ref:.3g} "
                            f"(outside {MEASURED_BAND:g}x)"
                        )
        rep.checked.append(
            f"bench/{kind}.nc: schema, positive/finite"
            + (f", medians within {MEASURED_BAND:g}x of the reference" if ref_path.exists() else "")
        )


ACCURACY_FLOOR = 0.005  # OA: the smallest tolerance (0.5 pp) when the reference's seeds agree closely
ACCURACY_SIGMAS = 3.0  # OA: a cell's mean may move this many of the reference's standard errors over seeds
MEMORY_RTOL = 0.02  # measured memory ratios vs tp (deterministic allocations): within 2 %


def check_summary(run_dir: Path, ref_dir: Path, name: str, rep: Report) -> None:
    """A headline run's accuracy summary against its reference: the same cells and seeds (replicates:
    partition x seed), each cell's mean OA within max(0.5 pp, 3 standard errors of the reference's
    replicates), the same verdict vs tp."""
    ref_path, new_path = ref_dir / "train" / name, run_dir / "train" / name
    if not ref_path.exists():
        return
    if not new_path.exists():
        rep.notes.append(f"train/{name}: not in this run, not compared (the reference holds it)")
        return
    ref, new = read_reference(ref_path, TRAIN_SUMMARY.read), TRAIN_SUMMARY.read(new_path)
    rep.compared.append(f"train/{name}")
    ref_cells, new_cells = (cell_table(ds).set_index(list(Cell._fields)) for ds in (ref, new))
    for cell in sorted(set(ref_cells.index) ^ set(new_cells.index), key=str):
        where = "the reference only" if cell in ref_cells.index else "this run only"
        rep.drift.append(f"train/{name}: cell {cell} in {where}")
    # replicates (partition, seed) where both summaries count them, else seeds (cpu-fair's count none)
    count = "replicates" if "replicates" in ref and "replicates" in new else "seeds"
    for cell in sorted(set(ref_cells.index) & set(new_cells.index), key=str):
        r, n = ref_cells.loc[cell], new_cells.loc[cell]
        seeds = int(r[count])
        if int(n[count]) != seeds:
            rep.drift.append(f"train/{name}: cell {cell}: {int(n[count])} {count}, reference {seeds}")
        std = float(r["oa_std"])
        tol = (
            max(ACCURACY_FLOOR, ACCURACY_SIGMAS * std / math.sqrt(seeds))
            if np.isfinite(std)
            else ACCURACY_FLOOR
        )
        a, b = float(r["oa_mean"]), float(n["oa_mean"])
        if not abs(b - a) <= tol:
            rep.drift.append(f"train/{name}: cell {cell}: OA {b:.4f}, reference {a:.4f} (allowed ±{tol:.4f})")
        if r["verdict"] != n["verdict"]:
            rep.drift.append(f"train/{name}: cell {cell}: verdict {n['verdict']}, reference {r['verdict']}")
    rep.checked.append(
        f"train/{name}: {len(ref_cells)} cells, OA within max({ACCURACY_FLOOR:g}, {ACCURACY_SIGMAS:g} standard "
        "errors of the reference's seeds), verdicts equal"
    )


def check_probe_memory(run_dir: Path, ref_dir: Path, rep: Report) -> None:
    """A headline run's measured per-rank memory against its reference: each plan's fullest-rank peak over tp's at
    the same point within 2 % (allocations are deterministic; timings are never gated here)."""
    ref_path, new_path = ref_dir / "probe" / "memory.nc", run_dir / "probe" / "memory.nc"
    if not (ref_path.exists() and new_path.exists()):
        if ref_path.exists():
            rep.notes.append("probe/memory.nc: not in this run, not compared")
        return

    def ratio(ds: xr.Dataset) -> xr.DataArray:
        peak = ds["peak_allocated"].max("rank", skipna=True)
        return peak / peak.sel(plan="tp")

    ref, new = ratio(read_reference(ref_path, PROBE_MEMORY.read)), ratio(PROBE_MEMORY.read(new_path))
    rep.compared.append("probe/memory.nc")
    ref, new = xr.align(ref, new, join="inner")
    bad = np.abs(new - ref) > MEMORY_RTOL * np.abs(ref)
    for idx in zip(*np.nonzero(bad.values), strict=True):
        where = {d: ref[d].values[k].item() for d, k in zip(ref.dims, idx, strict=True)}
        rep.drift.append(
            f"probe/memory.nc: peak vs tp at {where}: {float(new.values[idx]):.4f}, reference "
            f"{float(ref.values[idx]):.4f} (allowed ±{100 * MEMORY_RTOL:g} %)"
        )
    rep.checked.append(
        f"probe/memory.nc: peak per rank vs tp within {100 * MEMORY_RTOL:g} % of the reference"
    )


# --- the reference: what it must hold ----------------------------------------------------------------------------------
SUMMARIES = ("summary.nc", "control_summary.nc")  # a headline run's accuracy summaries
# The files a run's stages make that the check compares by value with the reference's copy (modelled:
# every run's cost tables and claims table); a reference without a manifest must hold each one the run holds.
MODELLED_FILES = (*(f"cost/{t}.nc" for t in COST_TABLES), "paper_claims.csv")
_T = TypeVar("_T")
RESTORE = "restore its committed copy (git checkout) or regenerate it (results/reference/README.md)"
RESTORE_ALL = "restore the committed files (git checkout) or regenerate them (results/reference/README.md)"


class ReferenceFolderError(HsitpError):
    """A reference the check cannot stand on: missing, empty, lacking a file the run made or one its
    manifest lists, or holding a damaged file. A usage error (exit 2, one line naming the files), never a
    PASS on nothing."""


def read_reference(path: Path, read: Callable[[Path], _T]) -> _T:
    """A file of the reference read by ``read``; a damaged one (truncated, not of its kind) is one line
    naming it that says to restore it, not the run's advice to delete it and re-run a stage."""
    try:
        return read(path)
    except HsitpError as exc:
        what = str(exc).split("; ")[0].rstrip(".")
        raise ReferenceFolderError(f"{what}; a file of the reference: {RESTORE}") from exc


def reference_files(ref_dir: Path) -> list[str]:
    """The files the reference holds (relative, sorted), its manifest and hidden files left out."""
    return sorted(
        f.relative_to(ref_dir).as_posix()
        for f in ref_dir.rglob("*")
        if f.is_file()
        and f.name != MANIFEST
        and not any(part.startswith(".") for part in f.relative_to(ref_dir).parts)
    )


def _listed_files(ref_dir: Path) -> list[str]:
    """The files ``manifest.json`` lists (``hsitp report reference`` writes each one's size and sha256)."""
    manifest = read_manifest(ref_dir)  # one line naming it when it is not JSON
    files = manifest.get("files")
    if not isinstance(files, Mapping | list) or not all(isinstance(f, str) for f in files):
        raise ReferenceFolderError(
            f"{ref_dir / MANIFEST}: no list of files (its 'files' is {type(files).__name__}); {RESTORE}"
        )
    return list(files)


def check_reference(run_dir: Path, ref_dir: Path, run_claims: Path) -> list[str]:
    """The reference's files, once it is known to hold what the check needs; :class:`ReferenceFolderError`
    otherwise.

    A reference with a manifest must hold every file the manifest lists (what it holds is declared: a
    headline reference has no cost tables). One without must hold each modelled file the run holds (its
    cost tables, its claims table): a file the reference lacked was never compared, and an empty folder
    passed as "no differences". That something is compared at all is :func:`audit_run`'s last check."""
    held = reference_files(ref_dir)
    if (ref_dir / MANIFEST).is_file():
        absent = [f for f in _listed_files(ref_dir) if not (ref_dir / f).is_file()]
        if absent:
            raise ReferenceFolderError(
                f"{ref_dir}: reference incomplete: {', '.join(absent)} listed in its {MANIFEST} but not "
                f"there; {RESTORE_ALL}"
            )
    else:
        made = [
            f for f in MODELLED_FILES if (run_claims if f == "paper_claims.csv" else run_dir / f).exists()
        ]
        lacking = [f for f in made if not (ref_dir / f).is_file()]
        if lacking:
            empty = "is empty: it " if not held else ""
            raise ReferenceFolderError(
                f"{ref_dir}: reference {empty}lacks {', '.join(lacking)}, made by this run's stages "
                f"(nothing to compare them with); pass the run's reference (--reference) or {RESTORE_ALL}"
            )
    return held


def audit_run(run_dir: Path, ref_dir: Path, claims_csv: Path | None = None) -> Report:
    """``run_dir`` against the reference ``ref_dir`` (modelled files exact, claims' verdicts equal, measured
    files by schema and bands). Refused (:class:`HsitpError`, exit 2) when either folder is missing,
    ``--claims`` names no file, or the reference cannot stand behind a PASS (:func:`check_reference`, a
    damaged reference file)."""
    rep = Report()
    if not run_dir.is_dir():
        raise HsitpError(f"{run_dir}: no such run folder (--run-dir: results/RUN)")
    if not ref_dir.is_dir():
        raise ReferenceFolderError(f"{ref_dir}: no reference folder (committed under results/reference/)")
    # A table the user named (--claims) that is absent is a typo, not a run's missing output (that is drift).
    if claims_csv is not None and not claims_csv.exists():
        raise HsitpError(
            f"{claims_csv}: no such claims table (--claims); run `hsitp audit claims` (rule audit_claims)"
        )
    run_claims = claims_csv or run_dir / "tables" / "paper_claims.csv"
    rep.held = check_reference(run_dir, ref_dir, run_claims)
    check_cost(run_dir, ref_dir, rep)
    check_claims(run_claims, ref_dir / "paper_claims.csv", rep, run_dir)
    check_bench(run_dir, ref_dir, rep)
    for name in SUMMARIES:
        check_summary(run_dir, ref_dir, name, rep)
    check_probe_memory(run_dir, ref_dir, rep)
    # a folder of other files, or a headline reference against a run that made none of them
    if not rep.compared:
        raise ReferenceFolderError(
            f"{ref_dir}: nothing was compared: the reference holds none of the files the drift check compares "
            f"that this run ({run_dir}) made ({len(rep.held)} file(s) there); pass the run's own reference "
            "(--reference results/reference/RUN)"
        )
    unread = [f for f in rep.held if f not in rep.compared]
    if unread:
        rep.notes.append(f"in the reference, not compared by this check: {', '.join(unread)}")
    # compared by value all the same; said, as audit reproduce says it
    edited = not_as_collected(ref_dir, read_manifest(ref_dir)) if (ref_dir / MANIFEST).is_file() else []
    if edited:
        rep.notes.append(f"not as collected (sha256 differs from manifest.json): {', '.join(edited)}")
    return rep


def report_text(rep: Report, run_dir: Path, ref_dir: Path) -> str:
    status = "DRIFT" if rep.drift else "PASS"
    out = [
        f"# Audit of {run_dir} against {ref_dir}: {status}",
        "",
        f"Tolerances: modelled values exact (rtol {MODELLED_RTOL:g}, NaN = NaN); claims' verdicts equal; measured "
        f"(bench) files by schema, positive/finite (zero only where nothing is communicated: comm time and "
        f"measured CCR at {_SILENT}), medians within {MEASURED_BAND:g}x of the "
        "reference's.",
        "",
        "## Differences" if rep.drift else "## No differences",
        "",
        *([f"- {d}" if not d.startswith("    ") else f"  {d.strip()}" for d in rep.drift] or ["(none)"]),
        "",
        "## Checked",
        "",
        f"{rep.coverage()}.",
        "",
        *[f"- {c}" for c in rep.checked],
        "",
        "## Notes",
        "",
        *([f"- {n}" for n in rep.notes] or ["(none)"]),
    ]
    return "\n".join(out) + "\n"
