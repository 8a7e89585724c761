"""Calibration fits: alpha/beta recovery, ring factors, achieved F and the held-out split (no timing involved)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from hsitp.bench.fit import (
    FitError,
    achieved_flops,
    fit_alpha_beta,
    fit_compute,
    holdout_mask,
    ring_factor,
)


def test_ring_factors_match_contract():
    """Catches a swapped or off-by-one ring factor (docs/contracts.md: all_reduce 2(P-1)/P, gather/scatter (P-1)/P)."""
    assert ring_factor("all_reduce", 2) == pytest.approx(1.0)
    assert ring_factor("all_reduce", 8) == pytest.approx(1.75)
    assert ring_factor("all_gather", 4) == pytest.approx(0.75)
    assert ring_factor("reduce_scatter", 2) == pytest.approx(0.5)
    np.testing.assert_allclose(ring_factor("all_gather", np.array([1, 2])), [0.0, 0.5])
    with pytest.raises(ValueError, match="broadcast"):
        ring_factor("broadcast", 2)


def _synthetic(collective: str, alpha: float, beta: float, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = np.repeat([2, 4, 8], 6)
    b = np.tile(np.logspace(3, 8, 6), 3)
    t = alpha + ring_factor(collective, p) * b / beta
    return p, b, t * (1.0 + noise * rng.standard_normal(t.shape))


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter"])
def test_fit_recovers_known_alpha_beta_exactly(collective):
    """Catches a fit that mixes up the factor, bytes or 1/beta (noise-free data must be recovered exactly)."""
    alpha, beta = 3e-5, 2.5e9
    p, b, t = _synthetic(collective, alpha, beta, noise=0.0)
    fit = fit_alpha_beta(collective, p, b, t)
    assert fit.alpha == pytest.approx(alpha, rel=1e-6)
    assert fit.beta == pytest.approx(beta, rel=1e-6)
    assert fit.n_points == t.size
    np.testing.assert_allclose(fit.predict(p, b), t, rtol=1e-6)


def test_fit_recovers_alpha_beta_under_noise_with_stderr():
    """Catches an absolute-residual fit, which loses alpha (small messages) under 2 % multiplicative noise."""
    alpha, beta = 5e-5, 1e10
    p, b, t = _synthetic("all_reduce", alpha, beta, noise=0.02, seed=3)
    fit = fit_alpha_beta("all_reduce", p, b, t)
    assert fit.alpha == pytest.approx(alpha, rel=0.05)
    assert fit.beta == pytest.approx(beta, rel=0.05)
    assert 0 < fit.alpha_stderr < alpha and 0 < fit.beta_stderr < beta


def test_fit_ignores_p1_and_rejects_too_few_points():
    """Catches a fit that uses P = 1 points (factor 0, no communication) or silently fits one point."""
    with pytest.raises(FitError, match="at least 2"):
        fit_alpha_beta("all_gather", [1, 1, 2], [1e3, 1e6, 1e6], [1e-5, 1e-5, 1e-3])
    with pytest.raises(FitError, match="same factor"):
        fit_alpha_beta("all_gather", [2, 2], [1e6, 1e6], [1e-3, 1.1e-3])


def test_achieved_flops_is_median_rate_over_valid_points():
    """Catches a rate dominated by the largest point or poisoned by unmeasured (NaN) points."""
    flops = [1e9, 2e9, 4e12, np.nan]
    secs = [1e-3, 1e-3, 1.0, 1e-3]  # rates 1e12, 2e12, 4e12
    assert achieved_flops(flops, secs) == pytest.approx(2e12)
    with pytest.raises(FitError):
        achieved_flops([np.nan], [1.0])


def test_holdout_keeps_train_and_test_in_every_group_and_is_deterministic():
    """Catches a split that leaves an op with no training point (no F) or no held-out point (untested)."""
    keys = [("mlp", n) for n in range(6)] + [("attn", n) for n in range(2)] + [("agg", 0)]
    groups = [k[0] for k in keys]
    mask = holdout_mask(keys, groups, 0.34, seed=0)
    for g in ("mlp", "attn"):
        sel = mask[[i for i, k in enumerate(keys) if k[0] == g]]
        assert sel.any() and not sel.all()
    assert not mask[-1]  # a lone point always trains
    assert mask[:6].sum() == 2  # round(0.34 * 6)
    np.testing.assert_array_equal(mask, holdout_mask(keys, groups, 0.34, seed=0))
    # order of the points does not change which keys are held out
    rev = holdout_mask(keys[::-1], groups[::-1], 0.34, seed=0)[::-1]
    np.testing.assert_array_equal(mask, rev)
    assert not holdout_mask(keys, groups, 0.0, seed=0).any()


def test_holdout_never_takes_an_anchor_and_the_sweeps_ends_always_train():
    """Catches the CI failure of 2026-12-03: the hash held out all_reduce's largest size (16 MiB), the three small
    sizes left did not grow with size on a loaded machine, and calibration stopped ("fitted bandwidth term is
    zero"). The ends of each collective's sweep are anchors now; here, on those measured times, the fit works."""
    from hsitp.bench.calibrate import collective_points

    keys = [("c", n) for n in range(4)]
    for seed in range(50):
        mask = holdout_mask(keys, ["c"] * 4, 0.34, seed=seed, anchors=[True, False, False, True])
        assert not mask[0] and not mask[3] and mask[1:3].sum() == 1
    # every point an anchor: nothing held out, nothing fails
    assert not holdout_mask(keys, ["c"] * 4, 0.34, seed=0, anchors=[True] * 4).any()
    with pytest.raises(ValueError, match="differ in length"):
        holdout_mask(keys, ["c"] * 4, 0.34, seed=0, anchors=[True])

    sizes = [4096, 1048576, 4194304, 16777216]
    t_ms = [11.57, 6.33, 7.98, 37.47]  # the CI's all_reduce at P = 2 (mean over repeats)
    mb = xr.Dataset(
        {
            "coll_time_mean": (("collective", "P", "nbytes"), np.array(t_ms)[None, None, :] * 1e-3),
            "coll_bytes": (("collective", "P", "nbytes"), np.array(sizes, dtype=float)[None, None, :]),
        },
        coords={"collective": ["all_reduce"], "P": [2], "nbytes": sizes},
    )
    rows = collective_points(mb, fraction=0.34, seed=0)
    assert [r["held_out"] for r in rows if r["nbytes"] in (sizes[0], sizes[-1])] == [False, False]
    train = [r for r in rows if not r["held_out"]]
    fit = fit_alpha_beta(
        "all_reduce", [r["P"] for r in train], [r["nbytes"] for r in train], [r["t_measured"] for r in train]
    )
    assert 0 < fit.beta < np.inf


def test_more_passes_than_repeats_is_a_config_error():
    """Catches a round-robin schedule that would leave some pass with no repeat (NaN timings, silent)."""
    from hsitp.bench.runner import check_passes
    from hsitp.config import ConfigError, validate_config
    from hsitp.settings import BenchSettings

    bc = BenchSettings.from_config(validate_config({"bench": {"passes": 4, "repeats": 3}}))
    with pytest.raises(ConfigError, match="bench.passes = 4"):
        check_passes(bc)
    check_passes(BenchSettings.from_config(validate_config({"bench": {"passes": 3, "repeats": 3}})))


def test_compute_fit_recovers_overhead_rate_and_bandwidth():
    """Catches a compute model that cannot follow work that is not FLOP-proportional: times built from a known
    per-call overhead, FLOP rate and memory bandwidth (traffic not proportional to FLOPs, as in tokenisation)
    are recovered, and with too few points the extra terms are not fitted (no interpolation)."""
    flops = np.array([1e8, 2e8, 4e8, 1e8, 3e8, 8e8])
    traffic = np.array([4e7, 2e7, 8e7, 1e8, 1e7, 5e7])
    t = 2e-4 + flops / 5e10 + traffic / 2e10
    fit = fit_compute("agg_tp", flops, traffic, t)
    assert fit.overhead == pytest.approx(2e-4, rel=1e-6)
    assert fit.rate == pytest.approx(5e10, rel=1e-6)
    assert fit.bandwidth == pytest.approx(2e10, rel=1e-6)
    np.testing.assert_allclose(fit.predict(flops, traffic), t, rtol=1e-9)
    two = fit_compute("mlp", flops[:2], traffic[:2], flops[:2] / 4e10)
    assert (two.overhead, two.bandwidth, two.n_points) == (0.0, float("inf"), 2)
    assert two.rate == pytest.approx(4e10)
    unknown = fit_compute("mlp", flops, np.full(6, np.nan), 1e-4 + flops / 4e10)  # no traffic estimate
    assert unknown.bandwidth == float("inf") and unknown.overhead == pytest.approx(1e-4, rel=1e-6)


def test_compute_fit_of_times_that_do_not_grow_is_a_constant_not_a_crash(caplog):
    """Catches a calibration that dies on one tiny op timed on a loaded machine (the smoke run failed so on a
    2-core VM at load 10: layernorm_sharded's times fell as its work grew): times that do not grow with FLOPs or
    traffic give a constant per-call model with a warning."""
    flops = np.array([1e6, 2e6, 4e6, 8e6])
    traffic = np.array([1e6, 2e6, 4e6, 8e6])
    t = np.array([9e-4, 8e-4, 7e-4, 6e-4])  # falling: noise, not work
    with caplog.at_level("WARNING", logger="hsitp.bench.fit"):
        fit = fit_compute("layernorm_sharded", flops, traffic, t)
    assert fit.rate == fit.bandwidth == float("inf") and 6e-4 <= fit.overhead <= 9e-4
    np.testing.assert_allclose(fit.predict(flops, traffic), fit.overhead)
    assert "does not grow" in caplog.text
    few = fit_compute("mlp", flops[:2], traffic[:2], np.array([2e-4, 1e-4]))  # too few points for an overhead
    assert np.isfinite(few.rate) and few.overhead == 0.0  # the FLOP term alone still fits
