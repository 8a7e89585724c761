"""Issue 58's rules on the committed claims table (docs/audit.md rules 2, 8, 16 and 17): a claim is judged by what its sentence
rests on, `measured` means fully measured, one verdict per rule, evidence used evenly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hsitp.audit.audit import read_claims_csv
from hsitp.audit.claims import core
from hsitp.audit.claims.checks import ClaimsError
from hsitp.audit.claims.coherence import (
    evidence_markdown,
    incoherences,
    references_read,
    refuse_incoherent,
    uneven,
)
from hsitp.audit.claims.grounds import leaf_checks
from hsitp.audit.claims.render import Row
from hsitp.audit.claims.validate import load_claims, load_tags, validate_claims

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "results" / "reference" / "smoke" / "paper_claims.csv"
DOC = ROOT / "docs" / "audit.md"


@pytest.fixture(scope="module")
def claims() -> list:
    return load_claims()


@pytest.fixture(scope="module")
def tags() -> dict:
    return load_tags()


@pytest.fixture(scope="module")
def rows() -> list:
    return [Row(**r) for r in read_claims_csv(TABLE)]


def _by_id(items: list) -> dict:
    return {str(r.id): r for r in items}


def test_rule2_a_claim_is_judged_by_what_its_sentence_rests_on(claims: list, rows: list) -> None:
    """Catches a formula claim decided by a measurement (issue 58: §6.1's worked example at the paper's F and beta
    was called contradicted by one H200's launch-bound compute), and a claim about real hardware decided by a
    model (§7.3's throughput estimate called holds by the refined model, which the paper says needs measuring)."""
    by = _by_id(rows)
    for c in claims:
        if c.kind == "finding":
            continue
        r = by[c.id]
        if c.rests_on == "formulas":
            assert r.basis in ("computed", "circular", "reading"), c.id
        if c.rests_on == "measurement":
            assert r.basis in ("measured", "pending", "reading"), c.id
    for cid in ("s6_1_both_gt1", "s6_1_comm_always_dominates", "s8_1_n324_ccr_gt1", "s8_1_n5776_token_lower"):
        assert (by[cid].verdict, by[cid].basis) == ("consistent", "circular"), cid
    for cid in (
        "s7_3_dchag_wins_mid_c_high_p",
        "s11_dchag_mid_c",
        "s8_2_memory_saving",
        "s3_4_directional_value",
    ):
        assert by[cid].verdict == "pending", cid
    formula = _by_id(claims)["s6_1_both_gt1"].model_dump(exclude_unset=True)
    formula["check"] = {"fn": "first_decided", "checks": [
        {"label": "m", "fn": "bench_value", "of": "mlp", "op": ">", "value": 1},
        {"label": "f", **formula["check"]}]}  # fmt: skip
    assert "belongs in a finding" in " ".join(validate_claims([formula]))
    hardware = _by_id(claims)["s7_3_dchag_wins_mid_c_high_p"].model_dump(exclude_unset=True)
    hardware["check"]["checks"][1] = {
        "label": "r",
        **_by_id(claims)["s7_3_dchag_wins_mid_c_high_p_refined"].check.model_dump(exclude_unset=True),
    }
    assert "table_compare may not decide it" in " ".join(validate_claims([hardware]))
    hardware.pop("rests_on")
    assert "say what the sentence rests on" in " ".join(validate_claims([hardware]))


def test_rule2_a_variable_only_the_refined_model_computes_is_the_refined_model(
    claims: list, rows: list
) -> None:
    """Catches a claim decided by our refined model through a variable that has no model coordinate to select
    (ccr.nc's per-layer layer_t_comm): s3_3_token_mlp_no_comm, s5_1_pointwise_no_comm, s5_1_attention_allgather and
    s4_2_comm_not_growing_n were computed verdicts of the refined model, which rule 2's guard (it looked for `model:
    refined` only) let through. Such a check is refused, or is by-construction evidence whose reading decides, or
    sits in a finding; and every refined-only variable of the committed cost tables is in the guard's list."""
    import xarray as xr

    by = _by_id(rows)
    for cid in ("s3_3_token_mlp_no_comm", "s5_1_pointwise_no_comm", "s5_1_attention_allgather"):
        assert by[cid].basis == "reading" and by[cid].how.startswith("by construction"), cid
    assert (by["s4_2_comm_not_growing_n"].verdict, by["s4_2_comm_not_growing_n"].basis) == (
        "contradicted",
        "circular",
    )
    assert by["s4_2_comm_not_growing_n_refined"].kind == "finding"
    planted = _by_id(claims)["s5_1_attention_allgather"].model_dump(exclude_unset=True)
    planted.pop("by_construction"), planted.pop("reading")
    assert "the refined model's answer is a finding" in " ".join(validate_claims([planted]))
    for name, only in core.REFINED_VARIABLES.items():
        ds = xr.open_dataset(TABLE.parent / "cost" / f"{name}.nc")
        for v in ds.data_vars:
            if "refined" in str(ds[v].attrs.get("long_name", "")) and "model" not in ds[v].dims:
                assert v in only or v.endswith("_refined"), (name, v)


def test_rule16_one_sentence_one_verdict(rows: list) -> None:
    """Catches one sentence of the paper decided twice: s8_2_memory_vs_dchag_paper held "单卡显存可再降约 15%–25%"
    conditional from D-CHAG's published 1.7B-26B runs while s8_2_memory_saving, the same words, waited for a probe at
    the sizes the sentence estimates (rule 1). Claims quoting the same words share a verdict, or a tag under which
    rule 16 holds their scopes apart; evidence at other sizes refines the claim as a finding."""
    from collections import defaultdict

    same: dict[str, list] = defaultdict(list)
    for r in rows:
        if r.kind != "finding":
            same[r.zh].append(r)
    for zh, rs in same.items():
        if len({r.verdict for r in rs}) > 1:
            assert len({r.tag for r in rs}) == 1 and rs[0].tag, (zh, [(r.id, r.verdict) for r in rs])
    r = _by_id(rows)["s8_2_memory_vs_dchag_paper"]
    assert r.kind == "finding" and r.refines == "s8_2_memory_saving"


def test_rule8_measured_means_fully_measured(claims: list, rows: list) -> None:
    """Catches a verdict labelled measured whose deciding half was modelled (issue 58: eight rows rested on the GPU
    shards, compute timed and communication modelled), and a half-measured value setting any claim's verdict."""
    by_claim = _by_id(claims)
    for r in rows:
        if r.basis == "half-measured":
            assert r.kind == "finding", r.id
        if r.basis == "measured" and r.kind != "finding" and r.verdict != "pending":
            fns = {x.fn for x in leaf_checks(by_claim[r.id].check)}
            assert fns & core.FULLY_MEASURED_CHECKS and not fns & core.HALF_MEASURED_CHECKS, r.id
            # names its run and file
            assert "results/reference/cpu-places/" in r.source + r.how, r.id
    assert sum(r.basis == "half-measured" for r in rows) >= 4
    planted = by_claim["split_rule_gpu_shards"].model_dump(exclude_unset=True)
    planted.update(kind="directional_rule", id="x", rests_on="measurement")
    planted.pop("refines")
    assert "may sit in a finding only" in " ".join(validate_claims([planted]))


def test_rule16_one_verdict_per_rule(claims: list, tags: dict, rows: list) -> None:
    """Catches the table contradicting itself (issue 58: s3_3_rule_rho_lt1 held by a measurement while
    s3_3_rule_shorter_all_points, the same rule, was contradicted by the formulas; s8_1_consistent_with_3_3's
    reason took §8.1's token split as right while s8_1_n5776_token_lower was contradicted), and `hsitp audit
    claims` writing such a table."""
    verdicts = {r.id: r.verdict for r in rows}
    assert incoherences(claims, verdicts) == []
    assert validate_claims(claims, tags) == []
    planted = {**verdicts, "s3_3_rule_rho_lt1": "holds"}
    found = incoherences(claims, planted)
    assert any("s3_3_rule_rho_lt1 holds (affirms) against s3_3_rule_shorter_all_points contradicted" in f
               for f in found), found  # fmt: skip
    assert any(
        "s8_1_consistent_with_3_3: its reason takes s3_3_rule_rho_lt1 as contradicted" in f for f in found
    )
    with pytest.raises(ClaimsError, match="contradicts itself, nothing written"):
        refuse_incoherent(claims, [dataclasses.replace(r, verdict=planted[r.id]) for r in rows])
    # a negating row: contradicted, aligned, says the rule holds, against every other row of the tag
    planted = {**verdicts, "s8_1_n5776_token_lower": "contradicted"}
    assert any("s8_1_n5776_token_lower contradicted (negates)" in f for f in incoherences(claims, planted))
    # a reason naming another row's verdict without declaring it
    named = [c.model_dump(exclude_unset=True) for c in claims]
    next(c for c in named if c["id"] == "s3_3_rule_rho_gt1").pop("relies_on")
    assert "names s3_3_rule_rho_lt1; declare it" in " ".join(validate_claims(named, tags))


def test_rule17_evidence_used_evenly(claims: list, tags: dict) -> None:
    """Catches a committed reference read for one row of a rule and ignored for its twin (issue 58: the GPU shards
    decided s7_3_dchag_lowers_ccr while the probe's real collectives, which disagree, were not shown; they bore on
    s3_4_directional_value without being read), and a docs/audit.md list that no longer matches claims.yaml."""
    assert uneven(claims, tags) == []
    reads = references_read(claims)
    assert reads["s7_3_dchag_lowers_ccr"] == reads["s8_2_ccr_drop"] == {"h200-check", "cpu-places"}
    assert "h200-check" in reads["s3_4_directional_value"]
    shards = _by_id(claims)["split_rule_gpu_shards"]
    fewer = shards.model_copy(
        update={"refines": tuple(x for x in shards.refines if x != "s8_1_n5776_token_lower")}
    )
    planted = [fewer if c is shards else c for c in claims]
    assert any(
        u.startswith("s8_1_n5776_token_lower (tag split_rule) reads []") for u in uneven(planted, tags)
    )
    text = DOC.read_text()
    block = text.split("<!-- evidence: begin -->\n")[1].split("<!-- evidence: end -->")[0]
    assert block == evidence_markdown(claims, tags), (
        "run `hsitp audit evidence` and paste it into docs/audit.md"
    )


def test_every_rule_is_a_short_principle_naming_its_test() -> None:
    """Catches docs/audit.md's rules growing back into history (issue 58: each <= 6 lines, examples in the
    changelog) and a rule naming a test that does not exist."""
    import re

    part = DOC.read_text().split("## Rules")[1].split("\n### ")[0]
    rules = re.split(r"\n(?=\d+\. )", part)[1:]
    assert len(rules) == 17
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for text in rules:
        assert len(text.strip().splitlines()) <= 6, text[:40]
        names = re.findall(r"`(test_[a-z0-9_]+)`", text)
        assert names and all(f"def {n}(" in tests for n in names), text[:40]
    assert len(DOC.read_text().splitlines()) <= 250
