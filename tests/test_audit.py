"""The claims list (schema), its verdicts on the committed reference tables, and `hsitp audit check` on drift.

Everything reads results/reference/smoke (committed): no cost table is recomputed here (test_reference does that).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import xarray as xr
from audit_synthetic import bench_files, measured_bench_files, probe_files
from nc_checks import described

from hsitp.audit.audit import audit_run, read_claims_csv, report_text
from hsitp.audit.claims.checks import Check, ClaimsError, parse_check
from hsitp.audit.claims.computed import check_formula_identity, check_formula_value
from hsitp.audit.claims.core import CLAIMS_FILE, KINDS, VERDICTS, Context, Outcome
from hsitp.audit.claims.evaluate import evaluate_claims
from hsitp.audit.claims.registry import evaluate_check
from hsitp.audit.claims.validate import load_claims, validate_claims
from hsitp.audit.claims.verdicts import circular, decide
from hsitp.cli import main
from hsitp.config import load_config
from hsitp.io import provenance, read_netcdf, write_netcdf
from hsitp.settings import AuditSettings

REF = Path(__file__).resolve().parent.parent / "results" / "reference" / "smoke"
CONFIGS = ["--config", "config/config.yaml", "--config", "config/smoke.yaml"]


@pytest.fixture(scope="module")
def claims() -> list:
    return load_claims()


@pytest.fixture(scope="module")
def ref_rows(repo_root: Path, claims: list) -> list:
    cfg = load_config([repo_root / "config/config.yaml", repo_root / "config/smoke.yaml"])
    return evaluate_claims(Context(REF / "cost", AuditSettings.from_config(cfg)), claims)


def test_claims_yaml_schema(claims: list) -> None:
    """Catches a claim without id/section/kind/quote/check, a duplicate id, an unknown kind/check/verdict, a key no
    row reads (``abuot`` for ``about``), and a number format without its rates."""
    assert validate_claims(claims) == []
    assert len(claims) >= 100
    assert len({c.id for c in claims}) == len(claims)
    assert {c.kind for c in claims} == set(KINDS)  # every kind is used at least once
    bad = [c.model_dump(exclude_unset=True) for c in claims[:3]]
    bad[1]["id"] = bad[0]["id"]
    bad[2]["kind"] = "opinion"
    bad.append({**bad[0], "id": "t", "abuot": "10 %"})
    bad.append({"id": "x", "section": "1", "kind": "number", "zh": "z", "en": "e", "check": {"fn": "guess"}})
    bad.append(
        {
            "id": "y",
            "section": "1",
            "kind": "number",
            "zh": "z",
            "en": "e",
            "check": {"fn": "reading", "verdict": "probably", "reason": "r", "source": "s"},
        }
    )
    bad.append(
        {
            "id": "w",
            "section": "1",
            "kind": "number",
            "zh": "z",
            "en": "e",
            "check": {"fn": "formula_value", "expr": "1", "if_false": "maybe"},
        }
    )
    bad.append({"id": "v", "section": "1", "kind": "number", "en": "e", "check": {"fn": "reading"}})
    bad.append(
        {
            "id": "u",
            "section": "1",
            "kind": "number",
            "zh": "z",
            "en": "e",
            "check": {
                "fn": "boundary_moves",
                "boundary": "edge",
                "factor": "dtype",
                "hardware": ["paper-intra"],
                "to": ["fp4"],
                "direction": "sideways",
            },  # fmt: skip
        }
    )
    bad.append({**bad[-1], "id": "s", "check": {**bad[-1]["check"], "boundary": "split", "P": [8],
                                                "direction": "moves"}})  # fmt: skip
    bad.append({**bad[-1], "id": "r", "check": {**bad[-1]["check"], "rate": {"paper-intra": {"fp4": 4}},
                                                "source": "s"}})  # fmt: skip
    problems = " | ".join(validate_claims(bad))
    for needle in (
        "duplicate id",
        "kind: Input tag 'opinion'",
        "t: abuot: Extra inputs are not permitted",
        "x: check.fn: Input tag 'guess'",
        "check.verdict: Input should be 'holds'",
        "check.if_false: Input should be",
        "v: zh: Field required",
        "check.reason: Field required",
        "check.boundary: Input should be 'threshold'",
        "check.direction: Input should be",
        "s: check: a number-format change needs its rates (rate) and their source",
        "r: check: format 'fp4' not in",
    ):
        assert needle in problems, needle


def test_verdict_mapping() -> None:
    """Catches a fraction or boolean outcome mapped to the wrong verdict (e.g. partial support called 'holds')."""
    plain = Check(fn="any")  # the mapping's defaults
    assert decide(Outcome(ok=True), plain) == ("holds", "computed")
    assert decide(Outcome(ok=False), plain) == ("contradicted", "computed")
    assert decide(Outcome(ok=False), Check(fn="any", if_false="conditional")) == (
        "conditional",
        "computed",
    )
    half = Check(fn="any", min_fraction=0.5)
    assert decide(Outcome(fraction=0.4), half) == ("conditional", "computed")
    assert decide(Outcome(fraction=0.6), half) == ("holds", "computed")
    assert decide(Outcome(fraction=0.0), plain) == ("contradicted", "computed")
    assert decide(Outcome(verdict="pending"), plain) == ("pending", "pending")
    assert decide(Outcome(verdict="contradicted"), plain) == ("contradicted", "reading")


def test_formula_checks_compute() -> None:
    """Catches a formula check that passes whatever the algebra says (identity and value, with tolerance)."""
    ctx = Context(REF / "cost")
    ok = check_formula_identity(
        ctx,
        parse_check(
            "t",
            {
                "fn": "formula_identity",
                "lhs": "ccr_channel(8, F, beta_intra, C)",
                "rhs": "8 * F / (beta_intra * C)",
                "points": [{"C": 256}, {"C": 103}],
            },
        ),
    )
    assert ok.ok and ok.value < 1e-15
    wrong = {
        "fn": "formula_identity",
        "lhs": "ccr_channel(8, F, beta_intra, 256)",
        "rhs": "ccr_token(8, F, beta_intra, 324)",
    }
    assert not check_formula_identity(ctx, parse_check("t", wrong)).ok
    value = {"fn": "formula_value", "expr": "n_tokens(610, 340, 8)"}
    assert check_formula_value(ctx, parse_check("t", {**value, "expect": 3192})).ok
    assert not check_formula_value(ctx, parse_check("t", {**value, "expect": 5776})).ok
    with pytest.raises(ClaimsError, match="cannot be evaluated"):
        check_formula_value(
            ctx, parse_check("t", {"fn": "formula_value", "expr": "__import__('os')", "expect": 1})
        )


def test_verdicts_on_reference_match_committed(ref_rows: list) -> None:
    """Catches a check function or a claim whose verdict changes silently: the committed expected verdicts
    (results/reference/smoke/paper_claims.csv) are recomputed from the committed cost tables."""
    expected = {r["id"]: r["verdict"] for r in read_claims_csv(REF / "paper_claims.csv")}
    got = {r.id: r.verdict for r in ref_rows}
    assert got == expected
    for r in ref_rows:
        assert r.verdict in VERDICTS
        if r.basis == "reading":
            assert r.reason and r.source, r.id  # a verdict resting on reading cites its source


def test_known_contradictions_are_computed(ref_rows: list) -> None:
    """The contradictions found by hand (README) come out of the numbers, not out of typed verdicts."""
    by_id = {r.id: r for r in ref_rows}
    for cid, value in (
        ("s2_1_tokens_pavia", 3192.0),
        ("s2_1_grid_pavia_university", None),
        ("s8_2_ccr_250", None),
        ("s8_2_tput_004", None),
    ):
        # computed, or circular where the paper's prose disagrees with its own formulas (rule 11)
        assert by_id[cid].verdict == "contradicted" and by_id[cid].basis in ("computed", "circular"), cid
        if value is not None:
            assert by_id[cid].pipeline_number == value
    # the prose rules the paper's own formulas contradict (rule 1: the formulas judge them; the half-measured GPU
    # shards, which order the splits the other way at the paper's sizes, are a finding beside them)
    for cid in ("s3_3_rule_rho_lt1", "s11_rule_large_n_channel"):
        assert (by_id[cid].verdict, by_id[cid].basis) == ("contradicted", "circular"), cid
    assert (by_id["split_rule_gpu_shards"].verdict, by_id["split_rule_gpu_shards"].basis) == (
        "holds",
        "half-measured",
    )
    # true only under a condition the paper does not state
    assert by_id["s8_1_n324_tput_below_0p1"].verdict == "conditional"
    assert "inter-node" in by_id["s8_1_n324_tput_below_0p1"].reason
    # §8.2's memory estimate waits for a probe at its sizes; the refined model's -29.6 % is a finding
    assert by_id["s8_2_memory_saving"].verdict == "pending"
    assert "D-CHAG-L: 0.2958" in by_id["s8_2_memory_saving_refined"].pipeline_value


def _write_cost(run: Path) -> None:
    """The reference cost tables as a run writes them: kind cost_TABLE (issue 8's rename of model_TABLE)."""
    for table in ("rho", "ccr", "boundary", "scale", "plan"):
        ds = read_netcdf(REF / "cost" / f"{table}.nc")
        # the committed reference files predate labels on every name (write_netcdf now refuses them unlabelled)
        write_netcdf(described(ds), run / "cost" / f"{table}.nc", kind=f"cost_{table}", prov=provenance())


@pytest.fixture(scope="module")
def run_template(tmp_path_factory: pytest.TempPathFactory, repo_root: Path) -> Path:
    """A run folder: the reference cost tables and the claims table the CLI writes from them (built once)."""
    run = tmp_path_factory.mktemp("audit") / "run"
    _write_cost(run)
    # the committed references beside the run, as in a clone (results/reference/: the headline run, the GPU check)
    (run.parent / "reference").symlink_to(REF.parent, target_is_directory=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(repo_root)
        args = [
            "audit",
            "claims",
            "--run-dir",
            str(run),
            *CONFIGS,
            "--out",
            str(run / "tables/paper_claims.csv"),
        ]
        assert main(args) == 0
    return run


def _fresh_run(tmp_path: Path, template: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(template, run)
    (tmp_path / "reference").symlink_to(REF.parent, target_is_directory=True)  # the committed references
    return run


def test_audit_check_passes_then_fails_on_planted_change(tmp_path: Path, run_template: Path, capsys) -> None:
    """Catches an audit that passes a drifted modelled table: one stated CCR changed by 1e-6 relative in a copied
    ccr.nc must fail with a diff naming the variable, its coordinates, and reference vs new; the claims table
    built on it also changes."""
    run = _fresh_run(tmp_path, run_template)
    for ext in ("md", "json"):
        assert (run / f"tables/paper_claims.{ext}").stat().st_size > 0
    out = run / "audit/report.md"
    assert main(["audit", "check", "--run-dir", str(run), "--reference", str(REF), "--out", str(out)]) == 0
    assert "PASS" in out.read_text()

    ds = read_netcdf(run / "cost/ccr.nc")
    ds["ccr"].loc[
        {"case": "paper_N324", "P": 8, "hardware": "paper-intra", "split": "channel", "model": "refined"}
    ] *= 1 + 1e-6
    write_netcdf(ds, run / "cost/ccr.nc", kind="cost_ccr", prov=provenance())
    capsys.readouterr()
    assert main(["audit", "check", "--run-dir", str(run), "--reference", str(REF), "--out", str(out)]) == 1
    text = out.read_text()
    assert "DRIFT" in text
    assert "cost/ccr.nc:ccr: 1 of" in text
    assert "case=paper_N324, P=8, hardware=paper-intra, split=channel, model=refined" in text
    assert "reference 4.868877223" in text and "new 4.868882092" in text
    assert "DRIFT" in capsys.readouterr().err


def test_audit_check_claim_verdict_drift(tmp_path: Path, run_template: Path) -> None:
    """Catches a claim whose verdict flips while the tables stay equal (e.g. an edited claims.yaml)."""
    run = _fresh_run(tmp_path, run_template)
    csv_path = run / "tables/paper_claims.csv"
    text = csv_path.read_text().replace(",pending,pending,", ",holds,computed,", 1)
    csv_path.write_text(text)
    rep = audit_run(run, REF)
    assert any("verdict: reference pending, new holds" in d for d in rep.drift)
    assert "DRIFT" in report_text(rep, run, REF)


def test_audit_bench_schema_and_bands(tmp_path: Path) -> None:
    """Catches a measured file that lost a variable or holds a non-positive time; bench values are never compared
    tightly (schema and positive/finite only when the reference has no bench files)."""
    run = tmp_path / "run"
    _write_cost(run)
    shutil.copy(REF / "paper_claims.csv", run / "paper_claims.csv")
    cal = xr.Dataset(
        {
            "alpha": ("collective", [1e-3, 2e-3], {"units": "s"}),
            "beta": ("collective", [1e9, -1.0], {"units": "B/s"}),
        },
        coords={"collective": ["all_reduce", "all_gather"]},
    )
    write_netcdf(described(cal), run / "bench/calibration.nc", kind="calibration", prov=provenance())
    rep = audit_run(run, REF, claims_csv=run / "paper_claims.csv")
    joined = "\n".join(rep.drift)
    assert "calibration.nc: variable achieved_flops missing" in joined
    assert "calibration.nc:beta: 1 of 2 value(s) zero, negative or non-finite" in joined
    assert not any("cost/" in d for d in rep.drift)


def test_audit_bench_zeros_only_where_nothing_is_communicated(tmp_path: Path, run_template: Path) -> None:
    """A finished smoke run has comm time 0 and measured CCR 0 at P = 1 and for the replicated LayerNorm (nothing to
    communicate): the audit passes them. Catches the audit that failed every complete smoke run on those zeros, and
    one that lets a zero through anywhere else (a planted zero in mlp at P = 2 fails, named by its coordinates)."""
    run = _fresh_run(tmp_path, run_template)
    bench_files(run)
    rep = audit_run(run, REF)
    assert not rep.drift, rep.drift
    assert any(c.startswith("bench/microbench.nc: schema") for c in rep.checked)

    bench_files(run, zero_at={"op": "mlp", "P": 2})
    joined = "\n".join(audit_run(run, REF).drift)
    assert "bench/microbench.nc:time_median: 1 of 12 value(s) zero, negative or non-finite" in joined
    assert "at op=mlp, P=2, N=144, D=64, L=8, dtype=float32, mode=full: 0" in joined
    assert "bench/microbench.nc:ccr_measured: 1 of" in joined
    assert "bench/model_vs_measured.nc:ccr_measured: 1 of" in joined


def test_audit_failure_names_the_log_that_holds_the_differences(tmp_path: Path, run_template: Path) -> None:
    """As the audit rule runs it (`--log LOG > LOG 2>&1`): on drift the differences are in the log and the last line
    names the log, not the report Snakemake deletes with a failed job's outputs. Catches a failure that points the
    user at a file that no longer exists."""
    import subprocess
    import sys

    run = _fresh_run(tmp_path, run_template)
    bench_files(run, zero_at={"op": "mlp", "P": 2})
    log = tmp_path / "check.log"
    out = run / "audit/report.md"
    cmd = [sys.executable, "-m", "hsitp", "audit", "check", "--run-dir", str(run), "--reference", str(REF),
           "--out", str(out), "--log", str(log)]  # fmt: skip
    with log.open("w") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    assert rc == 1
    text = log.read_text()
    assert "at op=mlp, P=2, N=144, D=64, L=8, dtype=float32, mode=full: 0" in text
    assert text.strip().splitlines()[-1].endswith(f"listed above in {log}")


@pytest.mark.slow
def test_audit_job_reads_thebench_files(workflow_copy) -> None:
    """Dry run of the smoke config: the audit job lists every file `hsitp audit check` reads, the bench files
    included. Catches an audit that runs before the bench (it then prints 'not checked') or, under SLURM's order or
    any rerun, checks bench files it never declared."""
    run = workflow_copy.snakemake(
        "-n", "--configfile", "config/smoke.yaml", "--", "results/smoke/audit/report.md"
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    block = run.stdout.split("rule audit:", 1)[1].split("\n\n", 1)[0]
    inputs = block.split("input:", 1)[1].split("\n", 1)[0]
    for f in ("microbench.nc", "calibration.nc", "model_vs_measured.nc"):
        assert f"results/smoke/bench/{f}" in inputs, inputs
    assert "results/smoke/cost/ccr.nc" in inputs


def test_audit_claims_on_a_measured_run_say_what_decided(tmp_path: Path, run_template: Path) -> None:
    """Catches a run's own probe and bench files left unread (no claim decided by measurement), a claims table
    that does not list what a measurement decided, and a drift check that fails a run because its measurement
    decided where the reference (no such files) fell back to the paper's arithmetic."""
    run = _fresh_run(tmp_path, run_template)
    probe_files(run)
    measured_bench_files(run)
    out = run / "tables/paper_claims.csv"
    assert main(["audit", "claims", "--run-dir", str(run), *CONFIGS, "--out", str(out)]) == 0
    rows = {r["id"]: r for r in read_claims_csv(out)}
    decided = {cid for cid, r in rows.items() if r["basis"] == "measured" and r["verdict"] != "pending"}
    # s8_2_memory_saving's probe sub-check is bound to §8.2's sizes (issue 51), which no synthetic probe is at
    # s7_3_dchag_lowers_ccr waits: the probe's CCR has no range (rule 8), measured or synthetic
    assert {"s4_2_memory_linear", "s7_2_intermediate_width", "split_rule_bench_rho_lt1"} <= decided and len(
        decided
    ) >= 10
    for cid in decided:
        finding = rows[cid]["kind"] == "finding"  # a finding's measurement is its whole check
        assert finding or rows[cid]["reason"].startswith(("Decided by measured", "Decided by D-CHAG")), cid
        # the run's own bench; its toy-size probe (depth 2 < the headline's 4) defers to the committed reference
        # (issue 51), and the GPU shards are the committed one-GPU check's
        assert (
            str(run) in rows[cid]["source"]
            or "toy-size" in rows[cid]["how"]
            or "/reference/" in rows[cid]["source"]  # the committed headline and GPU references
        ), cid
    assert "is toy-size" in rows["s4_2_memory_linear"]["how"]
    md = out.with_suffix(".md").read_text()
    listed = md.split("## Decided by measurement")[1].split("## Contradicted")[0]
    assert all(f"**{cid}**" in listed for cid in decided)
    rep = audit_run(run, REF, claims_csv=out)
    assert not [d for d in rep.drift if d.startswith("claims:")], rep.drift


def test_audit_check_compares_a_headline_run_with_its_reference(tmp_path: Path) -> None:
    """Catches (issue 41) `hsitp audit check` passing a headline run whose accuracy moved past its seeds' spread, whose
    verdict vs tp changed, that lost a cell, or whose measured memory ratio vs tp moved more than 2 %."""
    import json

    import numpy as np
    from report_synthetic import probe_files as report_probe_files
    from report_synthetic import train_summary

    from hsitp.audit.audit import audit_run
    from hsitp.io import read_netcdf, write_netcdf

    run, ref = tmp_path / "results" / "fair", tmp_path / "results" / "reference" / "fair"
    summary = train_summary(tmp_path / "made")[0]
    probe = report_probe_files(tmp_path / "made")
    for folder in (run, ref):
        (folder / "train").mkdir(parents=True)
        (folder / "probe").mkdir()
        shutil.copy(summary, folder / "train" / "summary.nc")
        shutil.copy(probe["memory"], folder / "probe" / "memory.nc")
    rep = audit_run(run, ref)
    assert rep.drift == [] and any(c.startswith("train/summary.nc") for c in rep.checked)
    ds = read_netcdf(summary, kind="train_summary")
    moved = ds.copy(deep=True)
    moved["oa_mean"].values[1] += 0.05
    write_netcdf(
        moved, run / "train" / "summary.nc", kind="train_summary", prov=json.loads(ds.attrs["provenance"])
    )
    drift = audit_run(run, ref).drift
    assert len(drift) == 1 and "OA" in drift[0] and str(ds["plan"].values[1]) in drift[0]
    mem = read_netcdf(probe["memory"], kind="probe_memory")
    planted = mem.copy(deep=True)
    dchag = int(np.flatnonzero(mem["plan"].values == "dchag_l")[0])
    planted["peak_allocated"].values[dchag] *= 1.05
    write_netcdf(
        planted, run / "probe" / "memory.nc", kind="probe_memory", prov=json.loads(mem.attrs["provenance"])
    )
    assert any(line.startswith("probe/memory.nc: peak vs tp") for line in audit_run(run, ref).drift)


def test_every_check_is_its_kinds_typed_model(tmp_path: Path) -> None:
    """Catches a check or a row whose misspelt field was ignored (``lw: 5`` for ``low: 5``: the band silently
    open; ``abuot`` for ``about``) or whose number was text: each row is validated as its kind's model (a claim or
    a finding, its check a union tagged by ``fn``) when claims.yaml loads, and a bad file is refused in one line
    naming the claim and the field; a dataset_attr with nothing to compare, or a table_fraction's op without its
    value, would compare against None and decide unseen."""
    import yaml

    from hsitp.audit.claims.checks import check_errors
    from hsitp.audit.claims.entries import Finding, PaperClaim

    claims = load_claims()
    assert all(isinstance(c.check, Check) for c in claims)
    assert {type(c) for c in claims} == {PaperClaim, Finding}
    raw = yaml.safe_load(CLAIMS_FILE.read_text())
    raw["claims"][1]["check"]["lw"] = 5
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True))
    with pytest.raises(ClaimsError, match=rf"^\S+: {raw['claims'][1]['id']}: check.lw: Extra inputs") as err:
        load_claims(tmp_path / "claims.yaml")
    assert "\n" not in str(err.value)
    assert check_errors("x", {"fn": "table_value", "file": "ccr", "variable": "ccr", "lw": 5}) == [
        "x: check.lw: Extra inputs are not permitted"
    ]
    assert check_errors("x", {"fn": "formula_value", "expr": "1", "expect": "one"})[0].startswith(
        "x: check.expect: Input should be a valid"
    )
    # a check the model's defaults cannot complete: it compared against None, unseen
    assert check_errors("x", {"fn": "dataset_attr", "dataset": "indian_pines", "attr": "bands"}) == [
        "x: check: a dataset_attr check needs equals or contains"
    ]
    assert check_errors("x", {"fn": "table_fraction", "file": "ccr", "variable": "ccr", "op": "=="}) == [
        "x: check: a table_fraction check with op needs its value"
    ]
    nested = {
        "fn": "any_of",
        "checks": [{"fn": "quote", "label": "a"}, {"fn": "quote", "key": "k", "label": "b"}],
    }
    assert check_errors("x", nested) == ["x: check.checks.0.key: Field required"]


def test_quote_agrees_with_sets_two_prose_rules_side_by_side() -> None:
    """Catches the folded kind (``quote_texts_agree`` became ``quote`` with ``agrees_with``) judging the first
    quote alone, taking a key ccr.nc lacks, or calling two prose rules side by side circular (they recompute no
    formula: the verdict stays computed); the old kind is refused when claims.yaml loads."""
    from hsitp.audit.claims.checks import check_errors

    ctx = Context(REF / "cost")
    a, b = "rule_rho_lt1_section3_3", "rule_large_n_section8_1"  # channel vs token: the paper disagrees
    both = parse_check("x", {"fn": "quote", "key": a, "agrees_with": b})
    o = evaluate_check(ctx, both)
    assert not o.ok and o.value == f"{a}: channel; {b}: token" and o.tolerance == "same split"
    assert not circular(both, o) and circular(parse_check("x", {"fn": "quote", "key": a}))
    assert evaluate_check(ctx, parse_check("x", {"fn": "quote", "key": b, "agrees_with": b})).ok
    with pytest.raises(ClaimsError, match="'nope' not in ccr.nc"):
        evaluate_check(ctx, parse_check("x", {"fn": "quote", "key": a, "agrees_with": "nope"}))
    assert check_errors("x", {"fn": "quote_texts_agree", "a": a, "b": b})[0].startswith(
        "x: check.fn: Input tag 'quote_texts_agree'"
    )
