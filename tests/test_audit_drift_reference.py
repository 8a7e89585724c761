"""Issue 58 (deliverable 6): the drift check never passes on nothing.

`hsitp audit check` and `hsitp audit verdict` once printed PASS ("3 checks, no differences") against an empty
folder. A reference that lacks a file the run's stages made, lists a file in its manifest that is not there,
or holds a damaged file is now refused with one line naming it (exit 2), and a pass says how many of the
reference's files it compared. The run here is a copy of the committed smoke reference (its cost tables, and
its claims table as the run's own), so it equals the reference and nothing is recomputed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hsitp.audit.audit import MODELLED_FILES, ReferenceFolderError, audit_run, read_claims_csv
from hsitp.cli import main
from hsitp.errors import HsitpError

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "results" / "reference" / "smoke"
HEADLINE = ROOT / "results" / "reference" / "cpu-fair"  # a reference with a manifest.json


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A finished smoke run's compared outputs: the committed cost tables and claims table (= SMOKE)."""
    out = tmp_path / "run"
    shutil.copytree(SMOKE / "cost", out / "cost")
    (out / "tables").mkdir()
    shutil.copy(SMOKE / "paper_claims.csv", out / "tables" / "paper_claims.csv")
    return out


@pytest.fixture
def ref(tmp_path: Path) -> Path:
    """A copy of the committed smoke reference, free to be damaged."""
    out = tmp_path / "ref"
    shutil.copytree(SMOKE, out)
    return out


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``hsitp argv`` in-process; assert exit 2, no traceback and one stderr line; return that line."""
    code = main(argv)
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert "Traceback" not in captured.err, captured.err
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hsitp: error: "), (code, captured.err)
    assert "PASS" not in captured.out, captured.out
    return lines[0]


def _check(run: Path, ref: Path, out: Path) -> list[str]:
    return ["audit", "check", "--run-dir", str(run), "--reference", str(ref), "--out", str(out)]


def _verdict(run: Path, ref: Path) -> list[str]:
    return ["audit", "verdict", "--run-dir", str(run), "--reference", str(ref)]


def _cut(path: Path) -> None:
    """Keep the first half of the file's bytes (an interrupted copy, a full disk)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# --- (1) an empty folder ------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["check", "verdict"])
def test_empty_reference_is_refused_naming_what_it_lacks(run: Path, tmp_path: Path, command: str) -> None:
    """Catches the PASS on nothing: `hsitp audit check` / `verdict` against an empty folder printed "3 checks,
    no differences" and exited 0. Run as the auditor runs it (a subprocess): exit 2, one line naming every
    file of the run the reference lacks, no report written."""
    empty, out = tmp_path / "empty", tmp_path / "report.md"
    empty.mkdir()
    argv = _check(run, empty, out) if command == "check" else _verdict(run, empty)
    proc = subprocess.run([sys.executable, "-m", "hsitp", *argv], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "PASS" not in proc.stdout and not out.exists()
    line = lines[0]
    assert line.startswith(f"hsitp: error: {empty}: reference is empty"), line
    for name in MODELLED_FILES:
        assert name in line, (name, line)


@pytest.mark.parametrize("command", ["check", "verdict"])
def test_absent_reference_folder_is_refused(
    run: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a typo in --reference (a folder that does not exist) read as a reference holding nothing."""
    nope = tmp_path / "nope"
    argv = _check(run, nope, tmp_path / "r.md") if command == "check" else _verdict(run, nope)
    line = _refused(argv, capsys)
    assert f"{nope}: no reference folder" in line, line


def test_reference_holding_nothing_the_check_compares_is_refused(tmp_path: Path) -> None:
    """Catches a pass where neither side holds a compared file (an empty run against a folder of other files):
    the check compared nothing, so it cannot pass."""
    empty_run, ref = tmp_path / "run", tmp_path / "ref"
    empty_run.mkdir()
    shutil.copytree(SMOKE / "data", ref / "data")
    with pytest.raises(ReferenceFolderError, match="holds none of the files the drift check compares"):
        audit_run(empty_run, ref)


# --- (2) a missing file -------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["cost/plan.nc", "paper_claims.csv"])
@pytest.mark.parametrize("command", ["check", "verdict"])
def test_reference_missing_one_file_is_refused_naming_it(
    run: Path, ref: Path, missing: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a reference lacking one file the run made (a cost table, the claims table) passing with that
    file left uncompared (once a note in the report, "not in the reference, not compared", and exit 0)."""
    (ref / missing).unlink()
    out = ref.parent / "report.md"
    line = _refused(_check(run, ref, out) if command == "check" else _verdict(run, ref), capsys)
    assert f"{ref}: reference lacks {missing}," in line, line
    assert not out.exists()
    assert all(other not in line for other in MODELLED_FILES if other != missing), line


# --- (3) a truncated file -----------------------------------------------------------------------------------
@pytest.mark.parametrize("damaged", ["cost/ccr.nc", "paper_claims.csv"])
@pytest.mark.parametrize("command", ["check", "verdict"])
def test_truncated_reference_file_is_refused_naming_it(
    run: Path, ref: Path, damaged: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a reference file cut in half read anyway: a cost table's HDF error as a traceback, or a claims
    table cut mid-row compared row by row (86 claims "new", the last row's verdict half gone) instead of one
    line naming the file and saying it is the reference's copy to restore."""
    _cut(ref / damaged)
    line = _refused(
        _check(run, ref, ref.parent / "r.md") if command == "check" else _verdict(run, ref), capsys
    )
    assert f"{ref / damaged}: " in line and "truncated" in line, line
    assert "a file of the reference: restore its committed copy" in line, line


def test_truncated_run_claims_table_is_refused_naming_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches the run's own claims table cut mid-row compared as claims "missing now" (drift with a hundred
    lines) rather than one line naming the damaged file."""
    _cut(run / "tables" / "paper_claims.csv")
    line = _refused(_verdict(run, SMOKE), capsys)
    assert f"{run / 'tables' / 'paper_claims.csv'}: truncated" in line, line


def test_claims_table_cut_inside_its_last_field_is_refused(tmp_path: Path) -> None:
    """Catches a table cut inside the last field of a row: every row keeps its number of fields, only the
    missing final newline (the writer always ends with one) shows the cut."""
    text = (SMOKE / "paper_claims.csv").read_text()
    whole = tmp_path / "whole.csv"
    whole.write_text(text)
    assert len(read_claims_csv(whole)) > 100
    cut = tmp_path / "cut.csv"
    cut.write_text(text.rstrip("\n") + "x")  # the last row, all its fields, its last one cut (no newline)
    with pytest.raises(HsitpError, match="ends mid-row"):
        read_claims_csv(cut)


# --- (4) a manifest listing an absent file ------------------------------------------------------------------
def _with_manifest(ref: Path, listed: list[str]) -> None:
    """A manifest.json as `hsitp report reference` writes it (files: path -> bytes, sha256)."""
    files = {f: {"bytes": 0, "sha256": ""} for f in listed}
    (ref / "manifest.json").write_text(json.dumps({"files": files}))


@pytest.mark.parametrize("command", ["check", "verdict"])
def test_manifest_listing_an_absent_file_is_refused_naming_it(
    run: Path, ref: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a reference whose manifest lists a file that is not there (a partial copy of a headline
    reference) passing on what is left."""
    _with_manifest(ref, [*MODELLED_FILES, "train/summary.nc"])
    line = _refused(
        _check(run, ref, ref.parent / "r.md") if command == "check" else _verdict(run, ref), capsys
    )
    assert (
        f"{ref}: reference incomplete: train/summary.nc listed in its manifest.json but not there" in line
    ), line


def test_truncated_manifest_is_refused_naming_it(
    run: Path, ref: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches a manifest cut short (not JSON) ignored, or ending in a JSONDecodeError traceback."""
    _with_manifest(ref, list(MODELLED_FILES))
    _cut(ref / "manifest.json")
    line = _refused(_verdict(run, ref), capsys)
    assert f"{ref / 'manifest.json'}: not JSON" in line, line


# --- (5) the good case --------------------------------------------------------------------------------------
def test_good_reference_passes_counting_its_files(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches the good case broken by the refusals above, and a pass that does not say what it compared:
    against the committed smoke reference, 6 of its 7 files (the data summary is not the drift check's) are
    compared."""
    out = tmp_path / "report.md"
    assert main(_check(run, SMOKE, out)) == 0
    said = capsys.readouterr().out
    assert "audit passed (6 of 7 reference files compared, 6 checks)" in said, said
    report = out.read_text()
    assert "PASS" in report and "6 of 7 reference files compared, 6 checks." in report
    assert "in the reference, not compared by this check: data/indian_pines_summary.nc" in report
    assert main(_verdict(run, SMOKE)) == 0
    line = capsys.readouterr().out
    assert line.startswith(
        f"hsitp audit: PASS: {run} against {SMOKE}: 6 of 7 reference files compared, 6 checks,"
    )


def test_headline_reference_with_manifest_passes_without_cost_tables(tmp_path: Path) -> None:
    """Catches the refusal applied to a reference that declares what it holds: a headline reference (cpu-fair,
    with a manifest and no cost tables) compared with a rerun that made cost tables too passes, counting the
    files its manifest lists."""
    rerun = tmp_path / "cpu-fair"
    shutil.copytree(HEADLINE, rerun)
    shutil.copytree(SMOKE / "cost", rerun / "cost")
    rep = audit_run(rerun, HEADLINE)
    assert rep.drift == [], rep.drift
    listed = json.loads((HEADLINE / "manifest.json").read_text())["files"]
    assert sorted(rep.held) == sorted(listed)
    assert rep.compared == ["train/summary.nc", "train/control_summary.nc", "probe/memory.nc"]
    assert rep.coverage().startswith(f"3 of {len(listed)} reference files compared")
    assert not any("not as collected" in n for n in rep.notes), rep.notes


def test_a_reference_edited_after_collection_is_said(tmp_path: Path) -> None:
    """Catches `audit check` saying nothing of a reference whose manifest records another sha256 than its file has
    (edited after `hsitp report reference` collected it): compared by value all the same, and noted, as `audit
    reproduce` notes it."""
    ref = tmp_path / "cpu-fair"
    shutil.copytree(HEADLINE, ref)
    manifest = json.loads((ref / "manifest.json").read_text())
    manifest["files"]["probe/memory.nc"]["sha256"] = "0" * 64
    (ref / "manifest.json").write_text(json.dumps(manifest))
    rep = audit_run(HEADLINE, ref)
    assert rep.drift == [], rep.drift
    assert "not as collected (sha256 differs from manifest.json): probe/memory.nc" in rep.notes, rep.notes


# --- (5) a check that compares nothing, a claims table with a claim twice or none -------------------------------
def test_a_check_that_compares_nothing_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a PASS on "0 of 12 reference files compared, 0 checks": a headline reference (every file listed
    by its manifest, none of them a file this run made) against a smoke run compares nothing."""
    line = _refused(_verdict(run, HEADLINE), capsys)
    assert "nothing was compared" in line and str(HEADLINE) in line, line


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("twice", "listed twice"),
        ("id,verdict\nA1,holds\n", "no kind column"),
        ("header", "a claims table with no claim"),
        ("verdict", "has the verdict 'maybe' (line 2), not one of holds, consistent"),
    ],
)
def test_a_claims_table_with_a_claim_twice_or_none_is_refused(
    run: Path, capsys: pytest.CaptureFixture[str], table: str, says: str
) -> None:
    """Catches a claims table whose duplicated row passed the check (which of its two verdicts counts?), one
    without the kind column ending in a KeyError, a header-only table reported as 213 claims "missing", and a
    verdict outside the vocabulary (`maybe`, a hand edit) reported as drift in a many-line report."""
    path = run / "tables" / "paper_claims.csv"
    text = path.read_text()
    if table == "verdict":
        head, first, *rest = text.splitlines(keepends=True)
        verdict = next(v for v in ("holds", "consistent", "conditional", "contradicted") if f",{v}," in first)
        path.write_text(head + first.replace(f",{verdict},", ",maybe,", 1) + "".join(rest))
    elif table == "twice":
        path.write_text(text + text.splitlines()[-1] + "\n")
    elif table == "header":
        path.write_text(text.splitlines()[0] + "\n")
    else:
        path.write_text(table)
    line = _refused(_verdict(run, SMOKE), capsys)
    assert says in line and str(path) in line, line
