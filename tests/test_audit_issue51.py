"""Issue 51's rules (docs/audit.md: rules 1, 8, 11, 13, 14, 15), on planted rows and on every row of the committed
reference's claims table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from audit_references import accuracy_summary, shard_files
from audit_synthetic import probe_files

from hsitp.audit.claims.accuracy import beats_baseline, check_accuracy_verdicts, variant_outcome
from hsitp.audit.claims.checks import parse_check
from hsitp.audit.claims.core import GPU_REFERENCE, Context, Outcome
from hsitp.audit.claims.entries import ClaimEntry, parse_entry
from hsitp.audit.claims.evaluate import evaluate_claim, evaluate_claims, measuring_stage
from hsitp.audit.claims.measured import check_probe_memory, check_probe_throughput
from hsitp.audit.claims.registry import evaluate_check
from hsitp.audit.claims.shard import check_shard_compare, check_shard_value
from hsitp.audit.claims.validate import load_claims, validate_claims
from hsitp.audit.claims.verdicts import circular, decide, deciding_check, possibility_hedged
from hsitp.config import load_config
from hsitp.settings import AuditSettings

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "results" / "reference" / "smoke"


@pytest.fixture(scope="module")
def claims() -> list:
    return load_claims()


@pytest.fixture(scope="module")
def ctx() -> Context:
    return Context(
        REF / "cost",
        AuditSettings.from_config(load_config([ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"])),
    )


@pytest.fixture(scope="module")
def rows(ctx: Context, claims: list) -> list:
    return evaluate_claims(ctx, claims)


def _by_id(rows: list) -> dict:
    return {r.id: r for r in rows}


# --- rule 13: equal accuracy per variant and protocol ------------------------------------------------------------
GOOD = {"random": 0.80, "block": 0.55}


def _acc(tmp_path: Path, cells: list, name: str = "acc") -> Outcome:
    accuracy_summary(tmp_path / "results" / name / "train" / "summary.nc", cells, GOOD)
    ctx = Context(tmp_path / "results" / "smoke" / "cost", AuditSettings(accuracy_run=name))
    return check_accuracy_verdicts(
        ctx, parse_check("t", {"fn": "accuracy_verdicts", "variants": ["dchag_l", "dchag_c"]})
    )


def test_rule13_equal_accuracy_per_variant_and_protocol(tmp_path: Path, rows: list) -> None:
    """Catches the bug issue 51 names: 'better than tp' counted as a contradiction, D-CHAG-L and D-CHAG-C pooled into
    one verdict, and a protocol where no model beats the SVM (block, on the committed reference) deciding the claim."""
    check = parse_check("t", {"fn": "accuracy_verdicts", "min_fraction": 1.0})
    tp_r, tp_b = ("tp", 2, "random", "reference", 0.85, 0.01), ("tp", 2, "block", "reference", 0.45, 0.01)
    cases = [
        # (D-CHAG-L cells, D-CHAG-C cells) -> verdict
        (
            [("dchag_l", 2, "random", "better", 0.90, 0.01)],
            [("dchag_c", 2, "random", "worse", 0.60, 0.01)],
            "conditional",
        ),
        (
            [("dchag_l", 2, "random", "better", 0.90, 0.01)],
            [("dchag_c", 2, "random", "equal", 0.85, 0.01)],
            "holds",
        ),
        (
            [("dchag_l", 2, "random", "worse", 0.70, 0.01)],
            [("dchag_c", 2, "random", "worse", 0.60, 0.01)],
            "contradicted",
        ),
        (
            [("dchag_l", 2, "random", "undecided", 0.84, 0.05)],
            [("dchag_c", 2, "random", "undecided", 0.8, 0.05)],
            "pending",
        ),
        # the block protocol, where nothing beats the SVM's 55 %, does not count: its "worse" is ignored
        (
            [("dchag_l", 2, "random", "equal", 0.85, 0.01), ("dchag_l", 2, "block", "worse", 0.40, 0.01)],
            [("dchag_c", 2, "random", "equal", 0.85, 0.01), ("dchag_c", 2, "block", "worse", 0.40, 0.01)],
            "holds",
        ),
    ]
    for i, (lcells, ccells, want) in enumerate(cases):
        o = _acc(tmp_path / str(i), [tp_r, tp_b, *lcells, *ccells])
        assert decide(o, check)[0] == want, (i, o.how)
        if want == "pending":
            assert "train stage" in o.reason and "not_reproducible" not in o.reason
    o = _acc(tmp_path / "block", [tp_r, tp_b, ("dchag_l", 2, "block", "worse", 0.40, 0.01),
                                  ("dchag_c", 2, "random", "better", 0.9, 0.01)])  # fmt: skip
    assert "block protocol reported, does not count" in o.how and "random protocol counts" in o.how
    assert "D-CHAG-C: better (conservative" in o.how
    r = _by_id(rows)["s7_4_same_accuracy"]  # the committed headline reference
    assert r.verdict == "conditional" and r.basis == "measured" and r.variant == "both"
    assert r.reason.startswith("Decided by D-CHAG-L on random (better); D-CHAG-C on random (worse)")
    assert "block protocol reported, does not count" in r.how


def test_rule13_the_row_states_the_replicates_and_the_tp_cell_the_file_has(rows: list) -> None:
    """Catches s7_4_same_accuracy's reason saying its intervals were over "3 seeds paired" while the committed
    cpu-places summary pairs 5 partitions of 1 seed each, and its cells at P = 4 and 8 read as compared with tp at
    the same P while tp ran at P = 2 only (its single-process equivalent stands for every P), and D-CHAG-C's random
    cells (tuned recipe, g = 4) shown beside its block ones (g = 1) with no g: the row now names all three from the
    file."""
    import re

    import xarray as xr

    r = _by_id(rows)["s7_4_same_accuracy"]
    ds = xr.open_dataset(ROOT / "results/reference/cpu-places/train/summary.nc")
    n_part, n_seed = int(ds["partitions"].max()), int(ds["seeds"].max())
    assert f"paired by partition, {n_part} partitions × {n_seed} seed(s)" in r.how
    assert not re.search(r"\b\d+ seeds paired", r.reason)
    tp_ps = {int(p) for p, plan in zip(ds["P"].values, ds["plan"].values, strict=True) if plan == "tp"}
    assert tp_ps == {2} and "P = 8 better +5.1 [+3.8, +6.3] vs tp P = 2" in r.how
    assert "P = 2 better +6.3 [+5.0, +7.7] vs tp" not in r.how  # tp at the cell's own P: nothing to say
    # each variant's tuned recipe names its band groups: D-CHAG-C's random cells ran at another g than its block ones
    gs = {int(g) for p, pr, g in zip(ds["plan"].values, ds["protocol"].values, ds["g"].values, strict=True)
          if p == "dchag_c" and pr == "random"}  # fmt: skip
    assert gs == {4} and "D-CHAG-C random (g = 4): worse" in r.how and "D-CHAG-C block (g = 1)" in r.how


def test_beats_baseline_is_an_interval_not_a_mean() -> None:
    """Catches a protocol counted because one model's mean lies a hair above the SVM's (53.7 % vs 53.5 % with a 2.3 pp
    spread over 3 seeds is not beating it: the block cell of the committed reference)."""
    ok, low = beats_baseline(0.537, 0.023, 3, 0.535, 0.0, 3)
    assert not ok and low < 0
    ok, low = beats_baseline(0.902, 0.004, 3, 0.803, 0.002, 3)
    assert ok and low > 0
    assert (
        variant_outcome(["better", "worse"]) == "worse" and variant_outcome(["equal", "better"]) == "better"
    )


# --- rule 8: the committed references ----------------------------------------------------------------------------
def _run_with_reference(tmp_path: Path) -> tuple[Path, Path]:
    """results/smoke (the reference's cost tables, no probe) beside results/reference/cpu-places/probe (synthetic)."""
    run = tmp_path / "results" / "smoke"
    shutil.copytree(REF / "cost", run / "cost")
    ref = tmp_path / "results" / "reference" / "cpu-places"
    probe_files(ref, estimate=False)
    return run, ref


def test_rule8_measured_subchecks_read_the_committed_references(tmp_path: Path, claims: list) -> None:
    """Catches a memory or throughput claim left to the model while the headline run's committed probe could decide
    it, one decided from the reference without saying so, and a toy-size run file deciding a claim (the smoke run's
    probe deciding s7_3_dchag_lowers_ccr opposite to the committed table): the same claim gets the same verdict from
    the run and from the reference."""
    run, ref = _run_with_reference(tmp_path)
    c = next(c for c in claims if c.id == "s4_2_memory_linear")
    ctx = Context(run / "cost")
    o, verdict, basis = evaluate_claim(ctx, c)
    assert basis == "measured" and "from the committed reference" in o.how and str(ref / "probe") in o.how
    row = evaluate_claims(ctx, [c])[0]
    assert "not re-run here" in row.reason
    # a toy-size probe of the run itself (depth 1 < the reference's 2) tests the machinery and defers
    import json

    import xarray as xr

    from hsitp.io import provenance, write_netcdf

    probe_files(run, estimate=False)
    for name in ("memory", "throughput"):
        ds = xr.open_dataset(run / f"probe/{name}.nc").load()
        p = json.loads(ds.attrs["probe"])
        ds.attrs["probe"] = json.dumps({**p, "depth": 1})
        if name == "memory":  # numbers that would decide otherwise: the run's file must not be read
            ds["peak_allocated"].loc[{"plan": "tp"}] = ds["peak_allocated"].sel(plan="tp") * 3
        write_netcdf(ds, run / f"probe/{name}_toy.nc", kind=f"probe_{name}", prov=provenance())
        (run / f"probe/{name}_toy.nc").replace(run / f"probe/{name}.nc")
    toy = Context(run / "cost")
    o2, verdict2, basis2 = evaluate_claim(toy, c)
    assert (verdict2, basis2) == (verdict, basis) and "is toy-size (depth 1 < 2)" in o2.how
    assert "tests the machinery" in o2.how


def test_rule8_a_plan_without_groups_is_one_point_per_measurement(tmp_path: Path, rows: list) -> None:
    """Catches tp's memory counted once per band-group count g: the probe measures a plan without groups (dense, tp,
    token) once and repeats it along g, and s4_2_memory_linear said 0 of 12 points (s7_2_tp_divides_all 0 of 48)
    for 4 (16) measurements on the committed cpu-places probe; a grouped plan's g still counts."""
    run, _ = _run_with_reference(tmp_path)
    ctx = Context(run / "cost")
    tp = {
        "lhs": {"plan": "tp"},
        "against": {"plan": "dense", "P": 1},
        "scale_P": True,
        "low": 0.8,
        "high": 1.2,
    }
    o = check_probe_memory(ctx, parse_check("t", {"fn": "probe_memory", **tp}))
    assert o.n_points == 3 and ", g=" not in o.how  # synthetic: tp at P = 2, 4, 8, one checkpointing policy
    grouped = {"lhs": {"plan": ["dchag_c"]}, "against": {"plan": "tp"}, "op": "<", "value": 1.0}
    o = check_probe_memory(ctx, parse_check("t", {"fn": "probe_memory", **grouped}))
    assert o.n_points == 9 and ", g=8" in o.how  # D-CHAG-C at g = 2, 4, 8 are three models
    by = _by_id(rows)
    assert (
        "share of 4 point(s)" in by["s4_2_memory_linear"].how and ", g=" not in by["s4_2_memory_linear"].how
    )
    assert "share of 16 point(s)" in by["s7_2_tp_divides_all"].how
    assert "share of 12 point(s)" in by["s7_2_fewer_parameters"].how


def test_rule8_a_probe_ccr_is_one_ranks_own(rows: list) -> None:
    """Catches the probe's CCR taken as the largest collective time over the largest compute time across ranks,
    which mixed two ranks (tp at P = 2 on the committed cpu-places probe: rank 0's collectives over rank 1's compute)
    while the row said "the slowest rank's": each point's CCR is now one rank's collective over its own compute
    time, at the rank with the largest full step, and the listed medians are those."""
    import numpy as np
    import xarray as xr

    ds = xr.open_dataset(ROOT / "results/reference/cpu-places/probe/throughput.nc")

    def ccr(plan: str, g: int, ck: str) -> float:
        pt = {"plan": plan, "P": 2, "g": g, "checkpointing": ck}
        coll = ds["time_collectives"].sel(pt).sum("time_part").squeeze().values
        comp = ds["time_compute"].sel(pt).sum("time_part").squeeze().values
        r = int(np.argmax(ds["time_with_collectives"].sel(pt).sum("time_part").squeeze().values))
        return float(coll[r] / comp[r])

    want = ccr("dchag_l", 1, "none") / ccr("tp", 1, "none")
    mixed = (
        ds["time_collectives"].sel(plan="tp", P=2, g=1, checkpointing="none").sum("time_part").max()
        / ds["time_compute"].sel(plan="tp", P=2, g=1, checkpointing="none").sum("time_part").max()
    )
    assert abs(float(mixed) - ccr("tp", 1, "none")) > 0.01  # the two readings differ on this file
    reason = _by_id(rows)["dchag_ccr_probe"].reason
    assert f"g=1, checkpointing=none {want:.6g} (one median" in reason


def test_rule8_a_cpu_bench_does_not_decide_a_gpu_claim(tmp_path: Path, claims: list) -> None:
    """Catches s4_3_layernorm_small_batch (the LayerNorm all-reduce a bottleneck at small batch, on NVLink/NCCL)
    decided by a CPU bench over gloo, whose own fallback says CPU gloo latency is not representative: a GPU bench
    decides it, a CPU one leaves it to needs_gpu, and a claim without that condition still takes the CPU bench."""
    import xarray as xr
    from audit_synthetic import measured_bench_files

    from hsitp.io import provenance, write_netcdf

    run = tmp_path / "results" / "syn"
    shutil.copytree(REF / "cost", run / "cost")
    measured_bench_files(run)  # a GPU's, synthetic
    by = {c.id: c for c in claims}
    gpu = evaluate_claim(Context(run / "cost"), by["s4_3_layernorm_small_batch"])
    assert gpu[2] == "measured" and gpu[1] in ("holds", "contradicted", "conditional")
    path = run / "bench/microbench.nc"
    ds = xr.open_dataset(path).load()
    ds.attrs["device"] = "CPU: AMD EPYC (1 thread/rank, gloo)"
    write_netcdf(ds, tmp_path / "cpu.nc", kind="microbench", prov=provenance())
    (tmp_path / "cpu.nc").replace(path)
    row = evaluate_claims(Context(run / "cost"), [by["s4_3_layernorm_small_batch"]])[0]
    assert row.verdict == "needs_gpu" and "which a CPU (gloo) timing does not stand in for" in row.reason
    assert evaluate_claim(Context(run / "cost"), by["s3_4_sync_points_small_tensors"])[2] == "measured"


def test_rule8_a_ratio_decides_only_outside_its_range(tmp_path: Path) -> None:
    """Catches a ratio deciding while its measured range straddles the threshold (the committed probe's CCR ratio at
    0.36-1.12 called 'lower' with no noise guard), and the GPU shards ordering two ops whose repeats overlap."""
    folder = tmp_path / "results" / "reference" / GPU_REFERENCE
    shard_files(folder, spread=0.02)
    ctx = Context(tmp_path / "results" / "smoke" / "cost")
    o = check_shard_compare(
        ctx, parse_check("t", {"fn": "shard_compare", "lhs": "agg_dchag_l", "rhs": "agg_tp", "op": "<"})
    )
    # synthetic: dchag_l's CCR is higher than tp's at every point
    assert o.fraction == 0.0 and o.n_points == 6 and "half-measured" in o.how
    o = check_shard_value(
        ctx,
        parse_check("t", {"fn": "shard_value", "ops": ["mlp"], "op": ">", "value": 1.0, "sel": {"N": 324}}),
    )
    assert o.fraction == 0.0 and o.n_points == 3
    wide = tmp_path / "wide" / "results" / "reference" / GPU_REFERENCE
    shard_files(wide, ccr=dict.fromkeys(["mlp", "attn_channel", "attn_token", "agg_tp", "agg_dchag_l",
                                         "agg_dchag_c"], 1.0), spread=0.3)  # fmt: skip
    wctx = Context(tmp_path / "wide" / "results" / "smoke" / "cost")
    o = check_shard_value(
        wctx, parse_check("t", {"fn": "shard_value", "ops": ["mlp"], "op": ">", "value": 1.0})
    )
    assert o.verdict == "pending" and "repeats on both sides of 1" in o.reason
    o = check_shard_compare(
        wctx, parse_check("t", {"fn": "shard_compare", "lhs": "attn_channel", "rhs": "attn_token", "op": "<"})
    )
    assert o.verdict == "pending" and "ranges overlap" in o.reason
    # the probe's CCR ratio records one median per point: it never decides, and lists its medians
    run, _ = _run_with_reference(tmp_path / "probe")
    pctx = Context(run / "cost")
    o = check_probe_throughput(
        pctx,
        parse_check(
            "t",
            {
                "fn": "probe_throughput",
                "quantity": "ccr_ratio",
                "plans": ["dchag_l"],
                "op": "<",
                "value": 1.0,
            },
        ),
    )
    assert o.verdict == "pending" and "no repeat range" in o.reason and "medians" in o.reason


def test_rule8_committed_table_names_the_reference_and_its_numbers(rows: list) -> None:
    """Catches the committed table's memory, throughput and CCR claims decided by the model while the committed
    references decide them (issue 51's examples), and a reference read without naming it."""
    by = _by_id(rows)
    for cid in ("s4_2_memory_linear", "s7_2_tp_divides_all", "s7_2_fewer_parameters"):
        assert by[cid].basis == "measured" and "results/reference/cpu-places/probe/memory.nc" in by[cid].how
    # a claim on real hardware whose only full measurement has no range waits (rule 8); its half-measured shards
    # are a finding, never its verdict (rule 2)
    r = by["s7_3_dchag_lowers_ccr"]
    assert r.verdict == "pending" and "no repeat range" in r.reason
    assert (
        "medians 0.127885-2.56153" in r.reason
    )  # one rank's own CCR (test_rule8_a_probe_ccr_is_one_ranks_own)
    r = by["dchag_ccr_gpu_shards"]
    assert r.basis == "half-measured" and "h200-check" in r.how and "s7_3_dchag_lowers_ccr" in r.refines
    # the paper's formulas under §6.1's constants judge §6.1's sentence; what one H200 gives is a finding
    assert (by["s6_1_comm_always_dominates"].verdict, by["s6_1_comm_always_dominates"].basis) == (
        "consistent",
        "circular",
    )
    r = by["n324_gpu_shards"]
    assert r.verdict == "contradicted" and r.basis == "half-measured" and "N=324, P=8" in r.how


# --- rule 1: scope -----------------------------------------------------------------------------------------------
def test_rule1_a_measurement_decides_only_at_the_claims_sizes(tmp_path: Path, rows: list) -> None:
    """Catches a probe at the trained size (D = 64, N = 324) deciding a claim about the paper's model at N = 5776
    (§8.2's memory estimate), and a sizes rule that refuses a probe that is at the claim's sizes."""
    run, _ = _run_with_reference(tmp_path)
    ctx = Context(run / "cost")
    base = {"lhs": {"plan": ["dchag_l"]}, "against": {"plan": "tp"}, "low": 0.75, "high": 0.85}
    o = check_probe_memory(
        ctx, parse_check("t", {"fn": "probe_memory", **base, "sizes": {"dim": 256, "N": 5776}})
    )
    assert (
        o.verdict == "pending" and "not at the sizes the claim speaks of: dim 256 (measured: 64)" in o.reason
    )
    o = check_probe_memory(
        ctx, parse_check("t", {"fn": "probe_memory", **base, "sizes": {"dim": 64, "N": 324}})
    )
    assert o.verdict is None and o.fraction is not None
    r = _by_id(rows)["s8_2_memory_saving"]
    assert r.verdict == "pending" and "not at the sizes the claim speaks of" in r.reason


def test_rule1_a_pair_is_judged_at_one_condition(ctx: Context, rows: list) -> None:
    """Catches §8.2's '约 40' held conditional by the inter-node 46.9 while that bandwidth's companion is 375, not the
    quoted 250 (issue 51): a number that ends a pair holds only where its companion holds too."""
    r = _by_id(rows)["s8_2_ccr_40"]
    assert r.verdict == "contradicted" and r.knife_edge is False
    pair = {"fn": "any_of", "checks": [
        {"label": "both", "fn": "any_of", "checks": [
            {"label": "a", "fn": "formula_value", "expr": "1", "expect": 1},
            {"label": "b", "fn": "formula_value", "expr": "2", "expect": 2}]},
        {"label": "half", "fn": "any_of", "checks": [
            {"label": "a", "fn": "formula_value", "expr": "1", "expect": 1},
            {"label": "b", "fn": "formula_value", "expr": "3", "expect": 2}]}]}  # fmt: skip
    pair = parse_check("pair", pair)
    o = evaluate_check(ctx, pair)
    assert decide(o, pair)[0] == "conditional" and o.labels == ["both"]
    # 可能 stays a possibility (rule 5)
    assert possibility_hedged("可能") and not possibility_hedged("约")


# --- rule 11: every row's basis by code --------------------------------------------------------------------------
def test_rule11_every_rows_basis_is_decided_by_code(ctx: Context, rows: list, claims: list) -> None:
    """Catches a row whose evidence is only the paper's own formulas at its own numbers labelled computed (issue 51:
    s8_1_tp_unusable, s6_1_prefer_dp, s3_2_ccr_channel_*, s10_1_rule_* and others said holds), one reading
    registry scenes labelled circular, and a basis typed into claims.yaml."""
    by_id = {c.id: c for c in claims}
    for c in claims:
        assert "basis" not in type(c).model_fields and "basis" not in type(c.check).model_fields, c.id
    for r in rows:
        if r.basis not in ("computed", "circular"):
            continue
        o, _, _ = evaluate_claim(ctx, by_id[r.id])
        own = circular(deciding_check(o, by_id[r.id].check), o)
        assert (r.basis == "circular") == own, r.id
        if r.basis == "computed":
            assert r.verdict != "consistent", r.id
    by = _by_id(rows)
    for cid in ("s8_1_tp_unusable", "s6_1_prefer_dp", "s5_3_ccr_token_inverse_n", "abs_token_robust_large_n",
                "s3_2_ccr_channel_indep_n", "s3_2_ccr_channel_grows_p", "s3_2_ccr_channel_p_proportional",
                "s6_2_thousands", "s10_1_rule_drop_tp", "s10_1_rule_lower"):  # fmt: skip
        assert (by[cid].basis, by[cid].verdict) == ("circular", "consistent"), cid
    # planted: the same table read at the paper's presets and cases, at a registry scene, and by the refined model
    own = {"fn": "table_value", "file": "ccr", "variable": "ccr", "reduce": "min", "low": 1,
           "sel": {"case": "paper_N324", "model": "stated"}}  # fmt: skip
    assert evaluate_claim(ctx, _claim(own))[2] == "circular"
    scene = {**own, "sel": {"case": "pavia_university", "model": "stated", "split": "token"}}
    assert evaluate_claim(ctx, _claim(scene))[2] == "computed"
    # the stated channel CCR P F/(beta C) has no N: the same at every scene
    flat = {**own, "sel": {"case": "pavia_university", "model": "stated", "split": "channel"}}
    assert evaluate_claim(ctx, _claim(flat))[2] == "circular"
    refined = {**own, "sel": {"case": "paper_N324", "model": "refined"}}
    assert evaluate_claim(ctx, _claim(refined))[2] == "computed"


def _claim(check: dict) -> ClaimEntry:
    return parse_entry({"id": "p", "section": "1", "kind": "number", "zh": "x", "en": "x", "check": check})


# --- rule 14: the D-CHAG variant ---------------------------------------------------------------------------------
def test_rule14_every_row_naming_dchag_says_which_variant(rows: list, claims: list) -> None:
    """Catches a row that judges 'D-CHAG' without saying whether D-CHAG-L, D-CHAG-C or both (issue 51:
    s7_1_dynamic_weights mixed them), and a claims.yaml entry that drops its variant."""
    from hsitp.audit.claims.entries import names_dchag

    by_id = {c.id: c for c in claims}
    n = 0
    for r in rows:
        if names_dchag(by_id[r.id]):
            assert r.variant in ("L", "C", "both"), r.id
            n += 1
    assert n >= 30
    by = _by_id(rows)
    assert by["s7_3_dchag_lowers_ccr"].variant == "L" and by["s11_dchag_mid_c"].variant == "C"
    assert by["s7_1_dynamic_weights"].variant == "both"
    bad = [{**by_id["s7_2_fewer_parameters"].model_dump(exclude_unset=True), "id": "x"}]
    bad[0].pop("variant")
    assert "say which variant" in " ".join(validate_claims(bad))
    bad[0]["variant"] = "D"
    assert "x: variant: Input should be 'L', 'C' or 'both' (got 'D')" in " ".join(validate_claims(bad))


# --- rule 15: not reproducible only where no stage could measure -------------------------------------------------
def test_rule15_not_reproducible_only_where_no_stage_could_measure(ctx: Context, rows: list,
                                                                    claims: list) -> None:  # fmt: skip
    """Catches a claim called not reproducible although a stage of this project can measure it (issue 51:
    s3_4_sync_points_small_tensors, which the bench times), and one made pending without naming the stage."""
    by_id = {c.id: c for c in claims}
    for r in rows:
        if r.verdict == "not_reproducible":
            assert not measuring_stage(by_id[r.id].check), r.id
    r = _by_id(rows)["s3_4_sync_points_small_tensors"]
    assert r.verdict == "pending" and "bench (>= 3 launches) stage" in r.reason
    reading = {"fn": "reading", "verdict": "not_reproducible", "reason": "r", "source": "paper §1"}
    planted = {"id": "p", "zh": "x", "en": "x", "section": "1", "kind": "conclusion", "check": reading}
    assert evaluate_claims(ctx, [parse_entry(planted)])[0].verdict == "not_reproducible"
    measurable = {**planted, "check": {"fn": "first_decided", "checks": [
        {"label": "m", "fn": "probe_memory", "lhs": {"plan": "tp"}, "against": {"plan": "dense"}, "op": "<",
         "value": 1, "sizes": {"dim": 9999}},
        {"label": "r", **reading}]}}  # fmt: skip
    row = evaluate_claims(ctx, [parse_entry(measurable)])[0]
    assert row.verdict == "pending" and "Pending (rule 15): stage probe" in row.reason
