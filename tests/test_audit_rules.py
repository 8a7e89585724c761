"""The rules of docs/audit.md, one test per rule that can be checked, on the committed reference tables.

Everything reads results/reference/smoke (committed) and, for the quotes, the paper under ../shared when present.
"""

from __future__ import annotations

import dataclasses
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from audit_references import shard_files
from audit_synthetic import labelled, measured_bench_files, probe_files
from nc_checks import described

from hsitp.audit.audit import audit_run, read_claims_csv, write_claims
from hsitp.audit.claims.bench import check_bench_compare, check_bench_trend, check_bench_value
from hsitp.audit.claims.boundary import check_boundary_moves
from hsitp.audit.claims.checks import MEASURED_CHECKS, RUN_MEASURED_CHECKS, AnyOf, Check, parse_check
from hsitp.audit.claims.core import GPU_REFERENCE, Context, Outcome
from hsitp.audit.claims.entries import ClaimEntry, parse_entry
from hsitp.audit.claims.evaluate import evaluate_claim, evaluate_claims
from hsitp.audit.claims.measured import check_measured, check_probe_throughput
from hsitp.audit.claims.render import Row, basis_counts, finding_counts, verdict_counts
from hsitp.audit.claims.validate import config_keys, load_claims, validate_claims
from hsitp.audit.claims.verdicts import (
    approximate,
    circular,
    decide,
    deciding_check,
    hedged,
    knife_edge,
    possibility_hedged,
)
from hsitp.config import load_config
from hsitp.io import provenance, write_netcdf
from hsitp.settings import AuditSettings

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference" / "smoke"
DOC = ROOT / "docs" / "audit.md"
PAPER_DIR = ROOT.parent / "shared" / "paper"  # ../shared/paper; the quote check skips without it
LOCATOR = re.compile(r"§|Table|Figure|abstract|title|method|results|artifact")
PUBLIC_SOURCE = re.compile(r"arXiv[: ]\s*\d{4}\.\d{4,5}|doi:10\.\d{4,}/|https?://|paper §")


@pytest.fixture(scope="module")
def claims() -> list:
    return load_claims()


@pytest.fixture(scope="module")
def ctx() -> Context:
    cfg = load_config([ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"])
    return Context(REF / "cost", AuditSettings.from_config(cfg))


@pytest.fixture(scope="module")
def rows(ctx: Context, claims: list) -> list:
    return evaluate_claims(ctx, claims)


@pytest.fixture(scope="module")
def measured_ctx(tmp_path_factory: pytest.TempPathFactory) -> Context:
    """A run with every measured file (synthetic probe and bench files, made-up numbers) beside the reference's
    cost tables: every measured sub-check decides there."""
    run = tmp_path_factory.mktemp("measured") / "results" / "syn"
    shutil.copytree(REF / "cost", run / "cost")
    probe_files(run)
    measured_bench_files(run)
    shard_files(run.parent / "reference" / GPU_REFERENCE)  # the committed GPU check's shard timings
    return Context(
        run / "cost",
        AuditSettings.from_config(load_config([ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"])),
    )


def _entry(check: dict) -> ClaimEntry:
    return parse_entry({"id": "m", "section": "1", "kind": "number", "zh": "z", "en": "e", "check": check})


def _measured_subchecks(check: Check) -> list:
    """The sub-checks of a claim that read the measured run's probe/bench files at any model size (a sub-check
    bound to the paper's sizes, ``sizes``, is left to test_audit_issue51's scope test: the synthetic probe is not at
    them)."""
    subs = [s for s in _fns(check) if s.get("fn") in RUN_MEASURED_CHECKS]
    # the probe's CCR ratio has no range and never decides (rule 8): test_audit_issue51 pins that
    subs = [s for s in subs if s.get("quantity") != "ccr_ratio"]
    return [] if any(s.get("sizes") for s in subs) else subs


@pytest.fixture(scope="module")
def by_id(rows: list) -> dict:
    return {r.id: r for r in rows}


# --- rule 1: scope ---------------------------------------------------------------------------------------------------
def test_rule1_scope_covers_every_p_the_sentence_names(by_id: dict) -> None:
    """Catches a claim judged on part of its stated scope: §6.2's 'P 取 2 或 4' checked at P = 2 only (it held on
    Indian Pines' refined P = 2 alone), §11's small-model claim checked on one scene."""
    r = by_id["s6_2_lower_p_way_out"]
    assert "P=[2, 4]" in r.how and r.pipeline_number == pytest.approx(10 / 18)
    assert r.verdict == "conditional"
    r = by_id["s11_small_models_fail"]
    assert "27 point(s)" in r.how and r.pipeline_number == pytest.approx(12 / 27)


# --- rule 2: the paper's formulas first; findings ------------------------------------------------------------------
def _fns(check: Check | dict) -> list[dict]:
    """A check and its sub-checks, each as the fields claims.yaml set (whichever kind names them)."""
    fields = check if isinstance(check, dict) else check.model_dump(exclude_unset=True)
    return [fields, *[s for sub in fields.get("checks") or [] for s in _fns(sub)]]


def test_rule2_findings_refine_a_claim_and_stay_out_of_the_counts(
    claims: list, rows: list, tmp_path: Path
) -> None:
    """Catches §8.1/§8.2 counted twice (a refined-model answer counted as a verdict of its own), a finding that
    refines nothing, and a claim whose verdict mixes the stated and the refined model."""
    ids = {c.id: c for c in claims}
    for fid, target in (
        ("s8_1_n5776_refined_order", "s8_1_n5776_order_of_magnitude"),
        ("s8_2_refined_ccr_factor", "s8_2_ratio_vs_g"),
        ("s6_1_both_gt1_refined", "s6_1_both_gt1"),
        ("s8_1_n324_ccr_gt1_refined", "s8_1_n324_ccr_gt1"),
    ):
        assert ids[fid].kind == "finding" and ids[fid].refines == (target,)
    for c in claims:
        if c.kind != "finding" and isinstance(c.check, AnyOf) and c.check.fn == "any_of":
            labels = {s.label for s in c.check.checks}
            assert not {"stated model", "refined model"} <= labels, c.id
        for s in _fns(c.check):  # a CCR read without naming the model would mix stated and refined points
            if s.get("file") in ("ccr", "rho") and s.get("variable") in (
                "ccr",
                "relative_throughput",
                "lower_split",
            ):
                keys = {**(s.get("sel") or {}), **(s.get("lhs") or {}), **(s.get("rhs") or {})}
                assert "model" in keys, c.id
    counts = verdict_counts(rows)
    assert sum(counts.values()) == sum(r.kind != "finding" for r in rows)
    n_find = sum(r.kind == "finding" for r in rows)
    assert n_find >= 10 and sum(finding_counts(rows).values()) == n_find
    paths = write_claims(rows, tmp_path / "paper_claims.csv", {}, {})
    md = paths[1].read_text()
    findings = md.split("## Findings")[1].split("## All claims")[0]
    for r in rows:
        if r.kind == "finding":  # every claim a finding refines is named beside it
            named = all(t in findings for t in r.refines.split("; "))
            assert f"{r.id}: " in findings and named, r.id
    contradicted = md.split("## Contradicted")[1].split("## Findings")[0]
    assert "s8_1_n5776_refined_order" not in contradicted
    raw = {cid: ids[cid].model_dump(exclude_unset=True) for cid in ("s6_1_both_gt1_refined", "s6_1_both_gt1")}
    bad = [{**raw["s6_1_both_gt1_refined"], "refines": "s6_1_both_gt1_refined", "id": "x_f"}]
    bad.append({**raw["s6_1_both_gt1"], "id": "x_c", "refines": "s6_1_both_gt1"})
    bad.append({**raw["s6_1_both_gt1_refined"], "id": "x_n", "refines": []})
    problems = " | ".join(validate_claims(bad))
    assert "refines 's6_1_both_gt1_refined', which is not a claim" in problems
    assert "x_c: refines: Extra inputs are not permitted" in problems  # only a finding refines
    assert "x_n: refines: Tuple should have at least 1 item" in problems  # a finding refines a claim


# --- rule 3: no circular evidence ----------------------------------------------------------------------------------
def test_rule3_evidence_by_construction_is_labelled_and_judged_by_reading(claims: list, by_id: dict) -> None:
    """Catches a verdict computed from a config value we chose (or a layer we left unsplit) presented as a
    computed finding about the paper."""
    for c in claims:
        chosen = any(
            s["fn"] in ("config_value", "table_attr")
            or (s["fn"] == "preset_value" and str(s["preset"]).startswith("paper-"))
            for s in _fns(c.check)
        )
        if chosen:
            assert c.by_construction, c.id
    for cid in (
        "s2_3_pca_lowers_rho",
        "s2_3_pca_tens",
        "s4_3_layernorm_allreduce",
        "s10_4_layernorm_before_split",
    ):
        r = by_id[cid]
        # a reading's not_reproducible that a stage can measure is pending (rule 15), still by construction
        assert r.basis in ("reading", "pending") and r.how.startswith("by construction"), cid
        assert "evidence:" in r.source, cid
    # C = k by construction; with C = embed PCA changes nothing
    assert by_id["s2_3_pca_lowers_rho"].verdict == "conditional"
    bad = [{**claims[0].model_dump(exclude_unset=True), "id": "z", "by_construction": "ours"}]
    assert "z: by_construction evidence needs a reading verdict" in " ".join(validate_claims(bad))
    bad[0]["reading"] = {"verdict": "holds", "reason": "r"}
    assert "z: reading.source: Field required" in " ".join(validate_claims(bad))


# --- rule 4: knife edges -------------------------------------------------------------------------------------------
def test_rule4_knife_edge_marks(by_id: dict) -> None:
    """Catches a verdict resting on a value within 2 % of its band edge (or one point of a share) shown without the
    mark: §8.2's 0.04 from the quoted CCR 250 gives 0.0319 against the edge 0.032."""
    r = by_id["s8_2_tput_004"]
    assert r.knife_edge is True and "from the quoted CCR 250" in r.edge
    assert "intra-node" not in r.edge and "inter-node" not in r.edge
    assert by_id["s6_2_near_critical"].knife_edge is True  # 6 of 9 against 0.75
    assert by_id["s2_1_tokens_indian_pines"].knife_edge is False  # an exact count that matches
    o = Outcome(value=0.99, band=(1.0, math.inf))
    plain = Check(fn="any")
    assert knife_edge(o, plain)[0]
    assert not knife_edge(dataclasses.replace(o, value=0.97), plain)[0]
    assert not knife_edge(Outcome(value=3.0, band=(3.0, 3.0), exact=True), plain)[0]
    assert knife_edge(Outcome(value=3.05, band=(3.0, 3.0), exact=True), plain)[0]
    share = Outcome(fraction=5 / 9, n_points=9)
    assert knife_edge(share, Check(fn="any", min_fraction=0.5))[0]  # 5/9 holds, 4/9 would not
    assert not knife_edge(Outcome(fraction=1.0, n_points=9), plain)[0]  # universal, unanimous
    from hsitp.audit.audit import _md_text

    assert "**knife edge**" in _md_text([r], {})


# --- rule 5: hedged claims -----------------------------------------------------------------------------------------
def test_rule5_hedged_claims(claims: list, by_id: dict) -> None:
    """Catches a 可能-claim judged as universal, a 约-claim without a stated tolerance, and 归约 ('reduce') or 约束
    ('constraint') taken for a hedge."""
    assert hedged("可能达到数万") and hedged("约 250") and hedged("左右")
    assert not hedged("反向时通过 Reduce-Scatter 归约梯度") and not hedged("整除性约束")
    for c in claims:
        assert by_id[c.id].hedged == hedged(c.zh)
        if approximate(c.zh):
            assert c.about and by_id[c.id].tolerance.startswith("about:"), c.id
    one = Outcome(fraction=1 / 9, n_points=9)
    plain = Check(fn="any")
    assert decide(one, plain, existential=True)[0] == "holds"
    assert decide(one, plain)[0] == "conditional"
    assert decide(Outcome(fraction=0.0, n_points=9), plain, existential=True)[0] == "contradicted"
    r = by_id["s7_2_parallelism_dominates"]  # 2(1 - a_s) >= 1 in D-CHAG's six published configs
    assert r.hedged and r.verdict == "holds" and r.pipeline_number == 1.0
    reading = {"fn": "reading", "verdict": "holds", "reason": "r", "source": "s"}
    bad = [{"id": "a", "section": "1", "kind": "number", "zh": "约 5", "en": "e", "check": reading}]
    assert "state the tolerance" in " ".join(validate_claims(bad))


# --- rule 6: a computed verdict can flip ---------------------------------------------------------------------------
def _step(edge: float, width: float) -> float:
    return 0.01 * abs(edge) if edge != 0 else 0.01 * (width if math.isfinite(width) and width > 0 else 1.0)


def _sides(o: Outcome, check: Check, existential: bool) -> list[tuple[Outcome, Outcome]] | None:
    """(just inside, just outside) versions of the outcome at its deciding edge: the band edge nearest the value
    ± 1 % of the edge (or of the band width), the share threshold ± 1 %, or each sub-check of an any_of."""
    check = deciding_check(o, check)
    if o.parts:
        pairs = []
        for i, (label, po, pc) in enumerate(o.parts):
            for a, b in _sides(po, pc, False) or []:
                pa, pb = list(o.parts), list(o.parts)
                pa[i], pb[i] = (label, a, pc), (label, b, pc)
                pairs.append((dataclasses.replace(o, parts=pa), dataclasses.replace(o, parts=pb)))
        return pairs or None
    if o.band is not None:
        lo, hi = o.band
        if o.exact:
            e = (lo + hi) / 2
            return [(dataclasses.replace(o, value=e), dataclasses.replace(o, value=e + _step(e, 0)))]
        finite = [e for e in (lo, hi) if math.isfinite(e)]
        e = min(finite, key=lambda x: abs(float(o.value) - x))
        d = _step(e, hi - lo)
        inside = e + min(d, (hi - lo) / 2) if e == lo else e - min(d, (hi - lo) / 2)
        outside = e - d if e == lo else e + d
        return [(dataclasses.replace(o, value=inside), dataclasses.replace(o, value=outside))]
    if o.fraction is not None and o.n_points:
        m = 0.0 if existential else check.min_fraction
        d = _step(m, 1.0)
        inside = 0.01 if existential else min(1.0, m + d)
        outside = 0.0 if existential else m - d
        return [(dataclasses.replace(o, fraction=inside), dataclasses.replace(o, fraction=outside))]
    return None


def _documented_cannot_flip() -> set[str]:
    text = DOC.read_text()
    part = text.split("### Claims that cannot flip")[1].split("\n## ")[0].split("\n### ")[0]
    return set(re.findall(r"^- `([a-z0-9_]+)`", part, re.M))


def test_rule6_every_computed_verdict_can_flip(ctx: Context, claims: list) -> None:
    """Catches a computed verdict that no value could change (a band on the wrong side, an if_true equal to its
    if_false, an any_of whose sub-checks cannot move it), and a non-flippable claim missing from docs/audit.md."""
    cannot, flipped = set(), 0
    for c in claims:
        o, verdict, basis = evaluate_claim(ctx, c)
        if basis not in ("computed", "circular", "measured", "half-measured") or verdict == "pending":
            continue
        existential = possibility_hedged(c.zh)
        pairs = _sides(o, c.check, existential)
        if pairs is None:
            cannot.add(c.id)
            continue
        moved = [decide(a, c.check, existential)[0] != decide(b, c.check, existential)[0] for a, b in pairs]
        assert any(moved), c.id
        flipped += 1
    assert flipped >= 80
    assert cannot == _documented_cannot_flip()


def test_rule6_every_measured_subcheck_can_flip(measured_ctx: Context, claims: list) -> None:
    """Catches a measured sub-check (probe memory, throughput, bench timings) whose verdict no measurement could
    change: on a run with every measured file, each decides and flips at its edge."""
    n = 0
    for c in claims:
        if not _measured_subchecks(c.check):
            continue
        o, verdict, basis = evaluate_claim(measured_ctx, c)
        # a claim's measured sub-check decides it; a finding's measurement is its whole check
        by = o.decided_by.startswith("measured") or c.check.fn in RUN_MEASURED_CHECKS
        assert basis == "measured" and verdict != "pending" and by, c.id
        existential = possibility_hedged(c.zh)
        pairs = _sides(o, c.check, existential)
        assert pairs, c.id
        assert any(
            decide(a, c.check, existential)[0] != decide(b, c.check, existential)[0] for a, b in pairs
        ), c.id
        n += 1
    assert n >= 12


# --- rule 10: every verdict can come out against the paper ---------------------------------------------------------
def _against(o: Outcome, check: Check) -> Outcome:
    """The outcome as a measurement contradicting the paper everywhere would give it: the value far outside its
    band, a share of 0, the boolean false, every sub-check of an any_of so."""
    check = deciding_check(o, check)
    if o.parts:
        return dataclasses.replace(o, parts=[(lbl, _against(po, pc), pc) for lbl, po, pc in o.parts])
    if o.band is not None:
        lo, hi = o.band
        if o.exact:
            e = (lo + hi) / 2
            return dataclasses.replace(o, value=e + max(abs(e), 1.0))
        if math.isfinite(lo):
            return dataclasses.replace(o, value=lo - max(abs(lo), 1.0))
        return dataclasses.replace(o, value=hi + max(abs(hi), 1.0))
    if o.fraction is not None:
        return dataclasses.replace(o, fraction=0.0)
    return dataclasses.replace(o, ok=False)


def _documented_not_contradictions() -> set[str]:
    text = DOC.read_text()
    part = text.split("### Claims a failed check does not contradict")[1].split("\n## ")[0].split("\n### ")[0]
    return set(re.findall(r"^- `([a-z0-9_]+)`", part, re.M))


def test_rule10_every_computed_or_measured_claim_can_be_contradicted(ctx: Context, claims: list) -> None:
    """Catches a verdict that cannot come out against the paper whatever is measured (the bug: a failed check
    mapped to `conditional` or `not_reproducible`, as eight rows and the equal-accuracy claim did before issue 37):
    every computed or measured claim, fed an outcome that contradicts the paper at every point (a measured claim
    still pending: a share of 0 of its cells), reaches `contradicted`; the exceptions are listed, with why, in
    docs/audit.md."""
    exempt, judged, bad = set(), 0, []
    for c in claims:
        if c.by_construction:
            continue  # a reading decides it (rule 3)
        o, _, basis = evaluate_claim(ctx, c)
        fn = c.check.fn
        if fn in MEASURED_CHECKS and o.verdict is not None:  # pending: no file here; what it would give
            o = Outcome(fraction=0.5, n_points=4, basis=basis)
        elif basis not in ("computed", "circular", "measured"):
            continue
        verdict = decide(_against(o, c.check), c.check, possibility_hedged(c.zh))[0]
        if verdict != "contradicted":
            if c.id in _documented_not_contradictions():
                exempt.add(c.id)
            else:
                bad.append(f"{c.id}: {verdict}")
        judged += 1
    print(f"rule 10: {judged} computed or measured claims fed a contradicting outcome; "
          f"{judged - len(bad) - len(exempt)} reach contradicted, {len(exempt)} documented exceptions")  # fmt: skip
    assert not bad, "\n".join(bad)
    assert exempt == _documented_not_contradictions()
    assert judged >= 100


def test_rule10_every_measured_subcheck_can_be_contradicted(measured_ctx: Context, claims: list) -> None:
    """Catches a measured sub-check that cannot come out against the paper: on a run with every measured file each
    claim's measured sub-check decides (basis measured), and fed an outcome contradicting the paper at every point
    it reaches `contradicted`; the modelled estimate (probe/estimate.nc, which decides where memory.nc is absent)
    too."""
    judged, bad = 0, []
    for c in claims:
        if not _measured_subchecks(c.check):
            continue
        o, _, basis = evaluate_claim(measured_ctx, c)
        assert basis == "measured", c.id
        verdict = decide(_against(o, c.check), c.check, possibility_hedged(c.zh))[0]
        if verdict != "contradicted":
            bad.append(f"{c.id}: {verdict}")
        judged += 1
    est = Context(measured_ctx.cost_dir, AuditSettings(accuracy_run="cpu-fair", measured_run="estimate_only"))
    probe_files(est.measured_dir, memory=False, throughput=False)
    c = next(c for c in claims if c.id == "s8_2_memory_saving_estimate")
    # §8.2's sizes, which the synthetic estimate is not at (issue 51's scope test)
    c = c.model_copy(
        update={"check": parse_check(c.id, c.check.model_dump(exclude_unset=True, exclude={"sizes"}))}
    )
    o, _, basis = evaluate_claim(est, c)
    assert basis == "computed" and "not measured" in o.how  # a finding: modelled (rule 2)
    assert decide(_against(o, c.check), c.check)[0] == "contradicted"
    print(f"rule 10: {judged} claims' measured sub-checks fed a contradicting outcome; "
          f"{judged - len(bad)} reach contradicted; the modelled estimate of s8_2_memory_saving too")  # fmt: skip
    assert not bad, "\n".join(bad)
    assert judged >= 12


# --- rule 7: sources -----------------------------------------------------------------------------------------------
def test_rule7_reading_verdicts_quote_the_paper_and_cite_a_public_source(rows: list) -> None:
    """Catches a reading verdict that cites only our own files or ../shared, and a quote the paper does not contain
    (e.g. '220 → 200', which the paper never writes)."""
    for r in rows:
        if r.basis != "reading" or r.verdict == "needs_gpu":
            continue
        cited = r.source.split("; evidence:")[0]
        assert PUBLIC_SOURCE.search(cited), r.id
        for part in cited.split(
            ";"
        ):  # an arXiv id or DOI names where in it: section, table, figure, abstract, ...
            if re.search(r"arXiv|doi:", part):
                assert LOCATOR.search(part), (r.id, part)
        assert "../shared" not in r.source and "/shared/" not in r.source, r.id
        assert r.zh and r.en, r.id
    text = _paper_text()
    for r in rows:
        for frag in re.split(r"……|…", r.zh):
            assert _norm(frag) in text, (r.id, frag)


def _norm(s: str) -> str:
    """The paper's text and a quote compared without spaces and quotation marks."""
    return re.sub(r"[\s“”\"]", "", s)


def _paper_text() -> str:
    """The paper (../shared/paper), normalised; the test skips without it."""
    papers = sorted(PAPER_DIR.glob("*.txt")) if PAPER_DIR.is_dir() else []
    if not papers:
        pytest.skip("the paper (../shared/paper) is not here")
    return _norm(papers[0].read_text())


CLAUSE_ENDS = set(
    "，。；：！？,;:!?（）()"
)  # an elision may skip whole clauses or a parenthesis, never words inside one


def test_rule7_quotes_elide_no_words_inside_a_clause(rows: list) -> None:
    """Catches a quote whose elision removes decisive words from inside the clause a verdict rests on (the bug issue
    37 names: the abstract's 'a boundary set jointly by three factors' quoted as '存在一条……决策边界', the three factors
    elided): between two fragments of a quote the paper's skipped text must hold a clause boundary or a parenthesis."""
    text = _paper_text()
    bad = []
    for r in rows:
        frags = [_norm(f) for f in re.split(r"……|…", r.zh)]
        if len(frags) < 2:
            continue
        at = text.find(frags[0]) + len(frags[0])
        for frag in frags[1:]:
            nxt = text.find(frag, at)
            gap = text[at:nxt]
            if not set(gap) & CLAUSE_ENDS:
                bad.append(f"{r.id}: '{gap}' elided inside a clause")
            at = nxt + len(frag)
    assert not bad, "\n".join(bad)


# --- rule 8: the measured basis ------------------------------------------------------------------------------------
def _summary(path: Path, verdicts: list[str]) -> None:
    n = len(verdicts)
    ds = xr.Dataset(
        {
            "oa_verdict": ("cell", np.array(verdicts)),
            "oa_mean": ("cell", np.linspace(0.5, 0.6, n)),
            "oa_std": ("cell", np.full(n, 0.01)),
            "seeds": ("cell", np.full(n, 3)),
        },
        coords={
            k: ("cell", [v] * n)
            for k, v in (
                ("dataset", "s"),
                ("plan", "dchag_l"),
                ("P", 2),
                ("g", 1),
                ("protocol", "random"),
                ("N", 9),
            )
        },
    )
    write_netcdf(described(ds), path, kind="train_summary", prov=provenance())


def test_rule8_measured_basis_reads_the_accuracy_run(tmp_path: Path) -> None:
    """Catches a measured-basis claim decided without its file (it must stay pending, naming what it waits for),
    one reading the wrong run (audit.accuracy_run), and a variable read with the wrong share."""
    run = tmp_path / "results" / "smoke"
    ctx = Context(run / "cost", AuditSettings(accuracy_run="acc"))
    raw = {"fn": "measured", "variable": "oa_verdict", "equals": "equal", "waits_for": "issue 24"}
    check = parse_check("t", raw)
    o = check_measured(ctx, check)
    assert decide(o, check) == ("pending", "measured")
    assert str(tmp_path / "results" / "acc" / "train" / "summary.nc") in o.reason and "issue 24" in o.reason
    _summary(tmp_path / "results" / "acc" / "train" / "summary.nc", ["equal", "equal", "not_equal"])
    o = check_measured(ctx, parse_check("t", {**raw, "min_fraction": 0.5}))
    assert o.fraction == pytest.approx(2 / 3) and decide(
        o, parse_check("t", {**raw, "min_fraction": 0.5})
    ) == (
        "holds",
        "measured",
    )
    o = check_measured(ctx, parse_check("t", {"fn": "measured", "variable": "oa_ci_low"}))
    assert o.verdict == "pending" and "no variable 'oa_ci_low'" in o.reason
    o = check_measured(
        ctx,
        parse_check("t", {"fn": "measured", "variable": "oa_mean", "low": 0.56, "sel": {"plan": "dchag_l"}}),
    )
    assert o.fraction == pytest.approx(1 / 3)
    assert config_keys([_entry(raw)]) == ["audit.accuracy_run"]
    default = Context(run / "cost")
    assert default.accuracy_summary == tmp_path / "results" / "cpu-places" / "train" / "summary.nc"


def test_accuracy_claims_read_the_committed_reference_when_the_run_is_absent(tmp_path: Path) -> None:
    """Catches (issue 41) an accuracy claim left pending on a fresh clone although the headline run's reference is
    committed, one decided from the reference without saying so, and the reference preferred over a run present
    here."""
    run = tmp_path / "results" / "smoke"
    ctx = Context(run / "cost", AuditSettings(accuracy_run="acc"))
    raw = {"fn": "measured", "variable": "oa_verdict", "equals": "equal", "min_fraction": 1.0}
    check = parse_check("t", raw)
    ref = tmp_path / "results" / "reference" / "acc" / "train" / "summary.nc"
    _summary(ref, ["equal", "equal", "equal"])
    o = check_measured(ctx, check)
    assert ctx.accuracy_summary == ref and decide(o, check) == ("holds", "measured")
    assert "from the committed reference" in o.reason and "not re-run here" in o.reason
    _summary(tmp_path / "results" / "acc" / "train" / "summary.nc", ["worse", "worse", "worse"])
    fresh = Context(run / "cost", AuditSettings(accuracy_run="acc"))
    o = check_measured(fresh, check)
    assert not fresh.accuracy_from_reference and "committed reference" not in o.reason
    assert decide(o, parse_check("t", {**raw, "if_false": "contradicted"}))[0] == "contradicted"


def test_rule8_measured_subchecks_read_the_runs_own_files(tmp_path: Path, claims: list) -> None:
    """Catches a measured sub-check that decides without its file (it must stay pending, naming the run and the
    file, and leave the verdict to the paper's arithmetic), reads the wrong run (audit.measured_run), lets an
    oversubscribed P or a point within its noise decide, or a verdict that does not say which sub-check decided."""
    by_id = {c.id: c for c in claims}
    run = tmp_path / "results" / "smoke"
    shutil.copytree(REF / "cost", run / "cost")
    ctx = Context(run / "cost")
    assert ctx.measured_run == "smoke" and ctx.measured_dir == run
    c = by_id["s4_2_memory_linear"]
    # no probe here: pending (a model does not stand in for a measurement, rule 2)
    o, verdict, basis = evaluate_claim(ctx, c)
    assert (verdict, basis) == ("pending", "pending") and o.decided_by == "a probe of the tp plan"
    assert f"{run / 'probe' / 'memory.nc'}" in o.others and "run `smoke`" in o.others
    row = evaluate_claims(ctx, [c])[0]
    assert row.reason.startswith("Decided by a probe of the tp plan (basis pending); measured")
    probe_files(run)
    o, verdict, basis = evaluate_claim(ctx, c)
    assert basis == "measured" and o.decided_by == "measured (probe/memory.nc)"
    assert "run `smoke`" in o.how and str(run / "probe" / "memory.nc") in o.source
    row = evaluate_claims(ctx, [c])[0]
    assert row.reason.startswith("Decided by measured (probe/memory.nc) (basis measured); a probe of")
    other = Context(
        run / "cost", AuditSettings(accuracy_run="cpu-fair", measured_run="gpu")
    )  # another run's files, absent here
    assert other.measured_dir == tmp_path / "results" / "gpu"
    assert evaluate_claim(other, c)[2] == "pending"
    # an oversubscribed P decides nothing: at P = 4 alone (synthetic throughput.nc labels it) the check is pending
    o = check_probe_throughput(
        ctx,
        parse_check("t", {"fn": "probe_throughput", "plans": ["dchag_l"], "P": [4], "op": ">", "value": 1.0}),
    )
    assert (
        o.verdict == "pending" and "P = 4 (oversubscribed: 4 ranks on 2 cores: decides nothing)" in o.reason
    )
    o = check_probe_throughput(
        ctx,
        parse_check(
            "t", {"fn": "probe_throughput", "plans": ["dchag_l"], "P_min": 2, "op": ">", "value": 1.0}
        ),
    )
    assert o.n_points == 6 and "left out: P = 4" in o.how  # P = 2 and 8 at g = 2, 4, 8
    # a point within its repeats' IQR decides nothing
    measured_bench_files(run)
    mb = xr.open_dataset(run / "bench/microbench.nc").load()
    mb["ccr_measured_iqr"] = mb["ccr_measured_iqr"] * 1e3
    write_netcdf(mb, run / "bench/microbench_wide.nc", kind="microbench", prov=provenance())
    (run / "bench/microbench_wide.nc").replace(run / "bench/microbench.nc")
    wide = Context(run / "cost")
    o = check_bench_compare(
        wide, parse_check("t", {"fn": "bench_compare", "lhs": "attn_channel", "rhs": "attn_token", "op": "<"})
    )
    assert o.verdict == "pending" and "within the repeats' IQR" in o.reason
    _bench_launch_rules(run)
    assert config_keys([by_id["s4_2_memory_linear"]]) == ["audit.measured_run"]
    bad = [{**c.model_dump(exclude_unset=True), "id": "x", "check": {"fn": "first_decided", "checks": [{"label": "a", "fn": "formula_value",
                                                                           "expr": "1", "expect": 1}]}}]  # fmt: skip
    assert "check.checks: List should have at least 2 items" in " ".join(validate_claims(bad))
    bad[0]["check"]["checks"].append({"label": "b", "fn": "formula_value", "expr": "1", "expect": 1})
    assert "tries a measured check" in " ".join(validate_claims(bad))
    bad[0]["check"] = {"fn": "probe_memory", "lhs": {"plan": "tp"}}
    assert "x: check.against: Field required" in " ".join(validate_claims(bad))
    bad[0]["check"]["against"] = {"plan": "dense"}
    assert "x: check: a probe_memory check needs op/value" in " ".join(validate_claims(bad))


def _rewrite_bench(run: Path, edit) -> Context:
    """microbench.nc of ``run`` with ``edit`` applied (fresh tight synthetic values first), and a new Context."""
    measured_bench_files(run)
    mb = xr.open_dataset(run / "bench/microbench.nc").load()
    mb = labelled(edit(mb))
    write_netcdf(mb, run / "bench/microbench_edit.nc", kind="microbench", prov=provenance())
    (run / "bench/microbench_edit.nc").replace(run / "bench/microbench.nc")
    return Context(run / "cost")


def _bench_launch_rules(run: Path) -> None:
    """The bench sub-checks decide only from >= 3 independent launches lying wholly apart (docs/audit.md)."""
    compare = parse_check("t", {"fn": "bench_compare", "lhs": "attn_channel", "rhs": "attn_token", "op": "<"})
    trend = parse_check("t", {"fn": "bench_trend", "op": "layernorm_sharded", "direction": "falls"})
    value = parse_check("t", {"fn": "bench_value", "of": "layernorm_sharded", "op": ">", "value": 1.0})
    tight = _rewrite_bench(run, lambda mb: mb)
    for check, args in ((check_bench_compare, compare), (check_bench_trend, trend),
                        (check_bench_value, value)):  # fmt: skip
        o = check(tight, args)
        assert o.verdict != "pending" and "3 independent launches" in o.how, (check.__name__, o.reason)

    def one_launch(mb: xr.Dataset) -> xr.Dataset:
        mb = mb.isel(launch=[0])
        mb.attrs["launches"] = 1
        return mb

    ctx = _rewrite_bench(run, one_launch)
    for check, args in ((check_bench_compare, compare), (check_bench_trend, trend),
                        (check_bench_value, value)):  # fmt: skip
        o = check(ctx, args)
        assert o.verdict == "pending" and "1 independent launch(es)" in o.reason and "needs >= 3" in o.reason

    def launches_spread(mb: xr.Dataset) -> xr.Dataset:
        # each launch of every point 0.3x .. 3x the pooled value: the launches of any two points overlap
        mb["ccr_measured_launch"] = mb["ccr_measured"].expand_dims(launch=[0, 1, 2]) * xr.DataArray(
            [0.3, 1.0, 3.0], dims="launch", coords={"launch": [0, 1, 2]}
        )
        return mb

    ctx = _rewrite_bench(run, launches_spread)
    o = check_bench_compare(ctx, compare)
    assert o.verdict == "pending" and "the launches' range" in o.reason
    # a point whose launches (0.3x .. 3x) all lie on one side of 1 still decides; the others are left out
    o = check_bench_value(ctx, value)
    assert "launches straddle 1" in o.how or (o.verdict == "pending" and "launches straddle" in o.reason)


def test_rule8_drift_check_compares_measured_claims_by_presence_and_schema(tmp_path: Path) -> None:
    """Catches a drift check that fails a run because the accuracy run's verdict moved (measured-basis claims are
    compared by presence and schema, not by verdict) or that lets such a claim vanish or lose its basis."""
    run = tmp_path / "run"
    shutil.copytree(REF / "cost", run / "cost")
    ref = tmp_path / "ref"
    shutil.copytree(REF, ref)
    rows = read_claims_csv(REF / "paper_claims.csv")
    target = next(r for r in rows if (r["verdict"], r["basis"]) == ("pending", "pending"))["id"]

    def write(path: Path, verdict: str, basis: str, drop: bool = False) -> None:
        text = path.read_text().splitlines()
        out = []
        for line in text:
            if line.startswith(target + ","):
                if drop:
                    continue
                line = line.replace(",pending,pending,", f",{verdict},{basis},", 1)
            out.append(line)
        path.write_text("\n".join(out) + "\n")

    write(ref / "paper_claims.csv", "pending", "measured")
    new = run / "paper_claims.csv"
    shutil.copy(REF / "paper_claims.csv", new)
    write(new, "holds", "measured")
    rep = audit_run(run, ref, claims_csv=new)
    assert not [d for d in rep.drift if "claims:" in d]
    shutil.copy(REF / "paper_claims.csv", new)
    write(new, "holds", "computed")
    assert any(f"{target} is measured-basis" in d for d in audit_run(run, ref, claims_csv=new).drift)
    shutil.copy(REF / "paper_claims.csv", new)
    write(new, "x", "x", drop=True)
    assert any(
        f"{target} in the reference, missing now" in d for d in audit_run(run, ref, claims_csv=new).drift
    )


# --- rule 9: the record --------------------------------------------------------------------------------------------
def test_rule9_changelog_and_counts_match_the_reference(rows: list) -> None:
    """Catches docs/audit.md's counts or changelog drifting from the committed reference table."""
    text = DOC.read_text()
    counts = verdict_counts([Row(**r) for r in read_claims_csv(REF / "paper_claims.csv")])
    line = ", ".join(f"{v} {n}" for v, n in counts.items())
    assert line in text
    assert verdict_counts(rows) == counts
    log = (ROOT / "docs" / "audit-changelog.md").read_text().split("## Changelog")[1]
    ids = {r.id for r in rows}
    logged = set(re.findall(r"^\| `([a-z0-9_]+)` \|", log, re.M))
    assert logged and logged <= ids


# --- rule 11: circular evidence ------------------------------------------------------------------------------------
def test_rule11_circular_evidence_says_consistent(ctx: Context, rows: list, claims: list) -> None:
    """Catches a verdict that rests on the paper's own formula at the paper's own numbers presented as `holds`
    (issue 37: it cannot come out against the paper, so it says `consistent`, basis `circular`), and the opposite
    mistake: a check that reads our refined model, the registry or a measurement labelled circular."""

    def quote(key: str) -> Check:
        return parse_check("t", {"fn": "quote", "key": key})

    def table(sel: dict) -> Check:
        return parse_check("t", {"fn": "table_value", "file": "ccr", "variable": "ccr", "sel": sel})

    assert circular(Check(fn="formula_value")) and circular(quote("threshold_p8_intra"))
    assert not circular(quote("grid_pavia_university"))  # the registry's scene, not the paper's
    assert circular(table({"model": "stated", "hardware": "paper-intra"}))
    assert not circular(table({"model": "refined", "hardware": "paper-intra"}))
    assert not circular(table({"model": "stated"}))  # every preset, ours among them
    for fn in ("dataset_grid", "measured", "probe_memory", "bench_compare"):
        assert not circular(Check(fn=fn)), fn
    by_id = {c.id: c for c in claims}
    for r in rows:
        c = by_id.get(r.id)
        if c is None or c.by_construction:
            continue
        if r.basis == "circular":
            o, _, _ = evaluate_claim(ctx, c)  # a first_decided claim: the sub-check that decided
            assert circular(deciding_check(o, c.check), o) and r.verdict != "holds", r.id
        if r.verdict == "consistent":
            assert r.basis == "circular", r.id
    counts = basis_counts(rows)
    assert counts["circular"]["consistent"] >= 20 and "holds" not in counts["circular"]


# --- rule 12: a factor that moves a boundary is judged by moving it ------------------------------------------------
def test_rule12_a_factor_that_moves_a_boundary_is_judged_by_moving_it(by_id: dict) -> None:
    """Catches a boundary claim judged by reading instead of recomputing (the bug issue 37 names: 'FP8 moves the
    decision boundary' held by reading), a format change that moves F alone (not the bytes per element with it),
    and a 'jointly set' boundary not judged factor by factor."""
    ctx = Context(REF / "cost")
    base = {
        "fn": "boundary_moves",
        "boundary": "threshold",
        "factor": "dtype",
        "P": [8],
        "direction": "moves",
        "source": "made-up rates",  # a number-format change names where its rates come from
    }
    rate = {"h100-nvlink-ib": {"fp8": 2.0}, "mi250x-frontier": {"int8": 1.0}}
    # H100 FP8: F doubles and the bytes per element halve at once: P F b / (2 beta) stays
    o = check_boundary_moves(
        ctx, parse_check("t", {**base, "hardware": ["h100-nvlink-ib"], "to": ["fp8"], "rate": rate})
    )
    assert o.fraction == 0.0 and "threshold 13186.7 → 13186.7" in o.how
    # MI250X INT8: the rate stays, the bytes halve: the threshold halves
    o = check_boundary_moves(
        ctx, parse_check("t", {**base, "hardware": ["mi250x-frontier"], "to": ["int8"], "rate": rate})
    )
    assert o.fraction == 1.0 and "threshold 22980 → 11490" in o.how
    # a format the hardware lacks is not a point
    o = check_boundary_moves(ctx, parse_check("t", {**base, "hardware": ["h100-nvlink-ib", "mi250x-frontier"], "to": ["int8"],
                                      "rate": rate}))  # fmt: skip
    assert o.n_points == 1 and "not applicable" in o.how
    # the split boundary rho* = 1 moves for no factor of the paper's formulas
    for factor, to in (("dtype", "int8"), ("beta", "paper-intra"), ("preset", "h200-nvlink-ib")):
        o = check_boundary_moves(ctx, parse_check("t", {**base, "boundary": "split", "factor": factor, "to": [to], "rate": rate,
                                          "hardware": ["mi250x-frontier"]}))  # fmt: skip
        assert o.fraction == 0.0, factor
    r = by_id["s9_2_precision"]
    assert r.basis == "computed" and r.verdict == "conditional" and r.pipeline_number == pytest.approx(1 / 6)
    r = by_id["abs_boundary_three_factors"]  # rho and beta enter, memory does not: two of three
    assert r.basis == "computed" and r.verdict == "contradicted"
    assert "per-device memory (H100 80 GB -> H200 141 GB): 0" in r.pipeline_value
    assert by_id["s11_growth_crosses_threshold"].verdict == "conditional"
    assert "holds only under: intra-node beta" in by_id["s11_growth_crosses_threshold"].reason
    assert by_id["s11_faster_links_larger_p"].verdict == "holds"
    assert circular(
        parse_check("t", {**base, "factor": "beta", "hardware": ["paper-inter"], "to": ["paper-intra"]})
    )
    assert not circular(
        parse_check("t", {**base, "factor": "width", "hardware": ["paper-intra"], "to": [2048]})
    )
