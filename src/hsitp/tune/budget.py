"""How far a tuning budget went: the best validation score against trials.

Two curves, as ``shared/notes/training.md`` (Dodge et al., EMNLP 2019, "Show your work") asks:

- ``best_so_far``: the search as run, the best score among the first k trials (TPE's later trials depend on the
  earlier ones, so this is the honest curve of a Bayesian search);
- ``expected_best``: Dodge et al.'s estimator of the expected best of n i.i.d. draws from the trials' empirical
  distribution, E[max of n] = sum_i v(i) (F(v(i))^n - F(v(i-1))^n) over the sorted scores, with its spread
  sqrt(sum_i p_i (v(i) - mu)^2). It assumes independent draws: applied to TPE's random start-up trials it is
  unbiased, applied to all trials it is an approximation (the attrs of the study file say which).

Pure numpy: no torch, no Optuna.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def best_so_far(scores: Sequence[float]) -> np.ndarray:
    """(k,) the best of the first 1..k scores (NaN, a failed trial, is skipped; NaN until a score exists)."""
    out = np.full(len(scores), np.nan)
    best = -np.inf
    for i, s in enumerate(scores):
        if np.isfinite(s):
            best = max(best, float(s))
        out[i] = best if np.isfinite(best) else np.nan
    return out


def expected_best(scores: Sequence[float], n_max: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Expected best score of n i.i.d. trials and its spread, for n = 1..n_max (default: as many as scores).

    Returns (mean, std), each (n_max,); NaN everywhere when no score is finite."""
    v = np.sort(np.asarray([s for s in scores if np.isfinite(s)], dtype=float))
    n_max = len(scores) if n_max is None else n_max
    if v.size == 0:
        return np.full(n_max, np.nan), np.full(n_max, np.nan)
    cdf = (
        np.arange(1, v.size + 1) / v.size
    )  # F(v(i)), ties resolved by position (the estimator's own convention)
    mean, std = np.empty(n_max), np.empty(n_max)
    for n in range(1, n_max + 1):
        p = cdf**n - np.concatenate([[0.0], cdf[:-1]]) ** n  # P(max of n draws = v(i))
        mu = float(np.sum(p * v))
        mean[n - 1] = mu
        std[n - 1] = float(np.sqrt(np.sum(p * (v - mu) ** 2)))
    return mean, std
