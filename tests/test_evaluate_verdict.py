"""The equal-accuracy verdict (hsitp.evaluate.verdict): seed-paired differences, a t interval, a 1 pp margin."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from hsitp.errors import HsitpError
from hsitp.evaluate.verdict import paired_verdict, seeds_to_decide, t_quantile


def test_interval_is_the_paired_t_interval():
    """Catches an unpaired interval (it would add the seeds' shared noise), a z instead of a t quantile (too narrow
    with 3 seeds), or a population sd (ddof 0)."""
    plan, tp = [0.812, 0.805, 0.820], [0.808, 0.803, 0.811]
    v = paired_verdict(plan, tp)
    d = np.subtract(plan, tp)
    low, high = stats.t.interval(0.95, df=2, loc=d.mean(), scale=stats.sem(d))
    assert (v.ci_low, v.ci_high) == pytest.approx((low, high), rel=1e-12)
    assert v.sd == pytest.approx(d.std(ddof=1)) and v.k == 3
    assert t_quantile(3) == pytest.approx(4.302652729911275)


@pytest.mark.parametrize(
    ("plan", "tp", "expected"),
    [
        (
            [0.800, 0.801, 0.799, 0.800],
            [0.800, 0.800, 0.800, 0.800],
            "equal",
        ),  # |d| tiny, interval inside ±1 pp
        ([0.850, 0.860, 0.855], [0.800, 0.801, 0.799], "better"),  # clearly above
        ([0.700, 0.705, 0.702], [0.800, 0.801, 0.799], "worse"),  # clearly below
        ([0.80, 0.83, 0.79], [0.80, 0.80, 0.80], "undecided"),  # too noisy for 3 seeds
    ],
)
def test_four_outcomes(plan, tp, expected):
    """Catches a verdict that calls two close means 'equal' without looking at the interval, or mixes up the sign
    (plan − tp, not tp − plan)."""
    assert paired_verdict(plan, tp).verdict == expected


def test_seeds_to_decide_is_the_smallest_k_that_fits():
    """Catches an off-by-one (the k found must fit, k − 1 must not) and a count offered where no number of seeds
    can make the two equal (|mean| ≥ δ)."""
    sd, mean = 0.01, 0.002
    k = seeds_to_decide(mean, sd)
    hw = lambda n: stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)  # noqa: E731
    assert k is not None and hw(k) <= 0.01 - mean < hw(k - 1)
    assert seeds_to_decide(0.012, sd) is None and seeds_to_decide(0.0, math.nan) is None
    v = paired_verdict([0.80, 0.83, 0.79], [0.80, 0.80, 0.80])
    assert v.verdict == "undecided" and v.seeds_to_decide == seeds_to_decide(v.mean, v.sd)


def test_one_seed_and_bad_input():
    """Catches a verdict claimed from one seed (no spread, so no interval), and NaN metrics or unpaired series
    passing silently."""
    v = paired_verdict([0.8], [0.7])
    assert v.verdict == "undecided" and math.isinf(v.ci_high) and v.seeds_to_decide is None
    with pytest.raises(HsitpError, match="NaN"):
        paired_verdict([0.8, math.nan], [0.7, 0.7])
    with pytest.raises(HsitpError, match="equal-length"):
        paired_verdict([0.8, 0.7], [0.7])
