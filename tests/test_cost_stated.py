"""The paper's stated CCR model: hand-computed values from its own parameters, identities, and its quotes."""

from __future__ import annotations

import numpy as np
import pytest

from hsitp.cost import stated

F, B_IN, B_OUT = 3e14, 3e11, 2.5e10  # the paper's §8.1 parameters


def test_hand_values_from_paper_parameters():
    """Catches a changed formula: P·F/β = 8e3 at P = 8 (§6.1), CCR_channel(C=256) = 8000/256 = 31.25,
    CCR_token(N=324) = 8000/324, inter-node 96000/256 = 375, and P/(1+CCR) = 8/32.25."""
    assert stated.threshold(8, F, B_IN) == pytest.approx(8000.0)
    assert stated.ccr_channel(8, F, B_IN, 256) == pytest.approx(31.25)
    assert stated.ccr_token(8, F, B_IN, 324) == pytest.approx(8000 / 324)
    assert stated.ccr_token(8, F, B_IN, 5776) == pytest.approx(1.38504155)
    assert stated.ccr_channel(8, F, B_OUT, 256) == pytest.approx(375.0)
    assert stated.ccr_token(4, F, B_OUT, 324) == pytest.approx(48000 / 324)
    assert stated.relative_throughput(8, 31.25) == pytest.approx(8 / 32.25)
    assert stated.ccr_dchag(375.0, 8) == pytest.approx(46.875)
    assert stated.rho(256, 324) == pytest.approx(0.7901234568)


def test_identities():
    """Catches an asymmetric edit of the two formulas: CCR_channel / CCR_token = N / C_in = 1/ρ for any P, F, β,
    and the 2-D estimate is their geometric mean (between the two)."""
    rng = np.random.default_rng(0)
    P = rng.integers(1, 64, 50)
    Fs = rng.uniform(1e12, 1e15, 50)
    beta = rng.uniform(1e9, 1e12, 50)
    C = rng.integers(1, 4096, 50)
    N = rng.integers(1, 100_000, 50)
    cc, ct = stated.ccr_channel(P, Fs, beta, C), stated.ccr_token(P, Fs, beta, N)
    np.testing.assert_allclose(cc / ct, N / C, rtol=1e-12)
    np.testing.assert_allclose(cc / ct, 1 / stated.rho(C, N), rtol=1e-12)
    two = stated.ccr_2d(cc, ct)
    assert np.all(two >= np.minimum(cc, ct) * (1 - 1e-12)) and np.all(two <= np.maximum(cc, ct) * (1 + 1e-12))


def test_monotone_in_P():
    """Catches a formula that stops growing linearly in P: both CCRs strictly increase with P, and the threshold
    is exactly proportional to P."""
    Ps = np.arange(1, 33)
    for ccr in (stated.ccr_channel(Ps, F, B_IN, 256), stated.ccr_token(Ps, F, B_IN, 324)):
        assert np.all(np.diff(ccr) > 0)
    np.testing.assert_allclose(stated.threshold(Ps, F, B_IN) / Ps, F / B_IN)


def test_lower_split_follows_formulas_not_prose():
    """Catches adopting the paper's §3.3 prose (which inverts the rule): with N > C the token split is lower."""
    assert stated.lower_split(256, 324) == "token"
    assert stated.lower_split(256, 100) == "channel"
    assert stated.lower_split(256, 256) == "tie"


def _quotes() -> dict[str, stated.Quote]:
    return {q.key: q for q in stated.paper_quotes()}


def test_quotes_record_where_paper_agrees_and_disagrees():
    """Catches a change in the audit's raw material: which quoted numbers the paper's own formulas reproduce."""
    q = _quotes()
    assert q["threshold_p8_intra"].computed == pytest.approx(8000) and q["threshold_p8_intra"].consistent
    # §8.1 "< 0.1 at N = 324" holds only with the inter-node β: intra gives 8/(1+24.69) = 0.311.
    assert q["rel_tput_n324_below_0p1_intra"].computed == pytest.approx(8 / (1 + 8000 / 324))
    assert not q["rel_tput_n324_below_0p1_intra"].consistent
    assert q["rel_tput_n324_below_0p1_inter"].consistent
    # §8.2: CCR 250 is neither 31.25 (intra) nor 375 (inter); 250/40 is 6.25, not g = 8.
    assert q["dchag_ccr_tp_intra"].computed == pytest.approx(31.25)
    assert q["dchag_ccr_tp_inter"].computed == pytest.approx(375.0)
    assert not q["dchag_ccr_tp_intra"].consistent and not q["dchag_ccr_tp_inter"].consistent
    assert not q["dchag_ccr_ratio_vs_g"].consistent
    assert q["dchag_tput_from_quoted_ccr"].computed == pytest.approx(8 / 41)
    assert q["dchag_tput_from_quoted_ccr"].consistent
    # §4.3 padding 103 -> 104 wastes 1/104.
    assert q["padding_c103_p8"].computed == pytest.approx(1 / 104) and q["padding_c103_p8"].consistent
    # §3.3 and §11 prose state the rule backwards; §8.1 states it the right way round.
    assert not q["rule_rho_lt1_section3_3"].consistent
    assert not q["rule_large_n_small_rho_section11"].consistent
    assert q["rule_large_n_section8_1"].consistent
