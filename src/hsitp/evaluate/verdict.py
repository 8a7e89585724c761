"""Is a plan as accurate as pure TP? A verdict from seed-paired differences and a confidence interval.

"At equal accuracy" (paper §7.1) is decided, not eyeballed: per seed s, d_s = metric(plan) − metric(tp) (the same
seed drives both runs' initialisation, sampling and augmentation, so pairing removes the shared part of the seed
noise). With k seeds, mean d̄, sample standard deviation sd (ddof 1), the two-sided 95 % interval is
d̄ ± t(0.975, k − 1) · sd / √k, and with an equivalence margin δ (1 percentage point of OA by default):

- *equal*     if −δ ≤ low and high ≤ δ (the whole interval inside the margin);
- *better*    else if low > 0;
- *worse*     else if high < 0;
- *undecided* otherwise, with ``seeds_to_decide``: the smallest k' with t(0.975, k' − 1) · sd / √k' ≤ δ − |d̄|
  (enough seeds for the interval to fit inside the margin if the mean and sd stay as they are), or none when
  |d̄| ≥ δ (no number of seeds makes it equal) or sd is unknown (one seed).

95 % holds per comparison; a table of N comparisons has N such intervals (no multiplicity correction).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hsitp.errors import HsitpError
from hsitp.outcomes import ACCURACY_FLAGS, Accuracy

# Flag values of the `*_verdict` variables (CF flag_values / flag_meanings), in this order.
VERDICTS: tuple[str, ...] = tuple(v.value for v in ACCURACY_FLAGS)
DEFAULT_MARGIN = 0.01  # δ: 1 percentage point of OA (or AA) as a fraction
LEVEL = 0.95  # two-sided confidence level of each interval
MAX_SEEDS = 10_000  # seeds_to_decide beyond this is reported as none


@dataclass(frozen=True)
class Verdict:
    """One comparison: the paired differences' mean, sd, k, the interval, the verdict and seeds_to_decide."""

    mean: float
    sd: float  # NaN with one seed
    k: int
    ci_low: float  # -inf/inf with one seed
    ci_high: float
    verdict: Accuracy
    seeds_to_decide: int | None  # only for 'undecided'; None where no k decides it


def t_quantile(k: int, level: float = LEVEL) -> float:
    """t(1 − (1 − level)/2, k − 1): the two-sided quantile for k paired seeds."""
    from scipy.stats import t

    return float(t.ppf(1 - (1 - level) / 2, k - 1))


def half_width(sd: float, k: int, level: float) -> float:
    """Half the two-sided t interval of a mean over ``k`` paired units of spread ``sd``."""
    return t_quantile(k, level) * sd / math.sqrt(k)


def seeds_to_decide(
    mean: float, sd: float, margin: float = DEFAULT_MARGIN, level: float = LEVEL
) -> int | None:
    """The smallest k ≥ 2 whose interval half-width fits in margin − |mean|; None if none does (|mean| ≥ margin, an
    unknown sd) or it exceeds MAX_SEEDS."""
    from scipy.stats import t

    room = margin - abs(mean)
    if room <= 0 or not math.isfinite(sd):
        return None
    ks = np.arange(2, MAX_SEEDS + 1)
    fits = t.ppf(1 - (1 - level) / 2, ks - 1) * sd / np.sqrt(ks) <= room
    return int(ks[np.argmax(fits)]) if fits.any() else None


def paired_verdict(
    plan: Sequence[float], reference: Sequence[float], margin: float = DEFAULT_MARGIN, level: float = LEVEL
) -> Verdict:
    """The verdict on ``plan`` vs ``reference`` (per-seed metric values, paired by position = seed)."""
    a, b = np.asarray(plan, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise HsitpError(f"paired verdict: need two equal-length seed series, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise HsitpError("paired verdict: a seed's metric is NaN or infinite (a run that did not finish?)")
    if margin <= 0:
        raise HsitpError(f"paired verdict: the margin must be > 0, got {margin}")
    d = a - b
    k = int(d.size)
    mean = float(d.mean())
    if k < 2:
        return Verdict(mean, math.nan, k, -math.inf, math.inf, Accuracy.UNDECIDED, None)
    sd = float(d.std(ddof=1))
    hw = half_width(sd, k, level)
    low, high = mean - hw, mean + hw
    if -margin <= low and high <= margin:
        verdict = Accuracy.EQUAL
    elif low > 0:
        verdict = Accuracy.BETTER
    elif high < 0:
        verdict = Accuracy.WORSE
    else:
        verdict = Accuracy.UNDECIDED
    need = seeds_to_decide(mean, sd, margin, level) if verdict == Accuracy.UNDECIDED else None
    return Verdict(mean, sd, k, low, high, verdict, need)
