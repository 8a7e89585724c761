"""Fitting the calibration: alpha and beta per collective, achieved F per op, on a training subset only.

The model of a collective is the ring model of docs/contracts.md, t = alpha + factor(P) * bytes / beta, with bytes the
full (unsharded) tensor. It is linear in (alpha, 1/beta), so the fit is a non-negative least-squares problem;
residuals are *relative* (divided by the measured time) because sizes span orders of magnitude and an absolute fit
would ignore every small message, which is exactly where alpha lives.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

log = logging.getLogger(__name__)


def ring_factor(collective: str, world_size: int | np.ndarray) -> float | np.ndarray:
    """The cost model's ring factor (all_reduce 2(P-1)/P, gather/scatter (P-1)/P), vectorised over P.

    Delegates to :func:`hsitp.cost.refined.ring_factor` so the fit and the model can never disagree on it.
    """
    from hsitp.cost.refined import ring_factor as model_factor

    p = np.asarray(world_size)
    out = np.vectorize(lambda n: model_factor(collective, int(n)), otypes=[float])(p)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class AlphaBetaFit:
    """Result of one collective's fit; stderr are NaN when there are too few points to estimate them."""

    collective: str
    alpha: float  # s
    beta: float  # B/s
    alpha_stderr: float
    beta_stderr: float
    n_points: int

    def predict(self, world_size: np.ndarray | int, full_bytes: np.ndarray | float) -> np.ndarray:
        x = ring_factor(self.collective, world_size) * np.asarray(full_bytes, dtype=float)
        return self.alpha + x / self.beta


class FitError(ValueError):
    """Not enough usable points to fit."""


def fit_alpha_beta(
    collective: str, world_size: Sequence[int], full_bytes: Sequence[float], seconds: Sequence[float]
) -> AlphaBetaFit:
    """Fit t = alpha + factor(P) * bytes / beta minimising relative residuals, with alpha >= 0 and beta > 0."""
    p = np.asarray(world_size, dtype=float)
    b = np.asarray(full_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    ok = np.isfinite(p) & np.isfinite(b) & np.isfinite(t) & (t > 0) & (p >= 2)
    p, b, t = p[ok], b[ok], t[ok]
    if t.size < 2:
        raise FitError(f"{collective}: need at least 2 timed points with P >= 2, got {t.size}")
    x = ring_factor(collective, p) * b
    if np.ptp(x) == 0:
        raise FitError(f"{collective}: all points have the same factor*bytes; sweep more than one size")
    a = np.column_stack([1.0 / t, x / t])  # relative residual: (alpha + x*s)/t - 1
    coef, _ = nnls(a, np.ones_like(t))
    alpha, slope = float(coef[0]), float(coef[1])
    if slope <= 0:
        raise FitError(f"{collective}: fitted bandwidth term is zero (times do not grow with size)")
    alpha_se = beta_se = float("nan")
    dof = t.size - 2
    if dof > 0:
        resid = a @ coef - 1.0
        sigma2 = float(resid @ resid) / dof
        try:
            cov = sigma2 * np.linalg.inv(a.T @ a)
            alpha_se = float(np.sqrt(max(cov[0, 0], 0.0)))
            beta_se = float(np.sqrt(max(cov[1, 1], 0.0)) / slope**2)  # delta method on beta = 1/slope
        except np.linalg.LinAlgError:
            pass
    return AlphaBetaFit(collective, alpha, 1.0 / slope, alpha_se, beta_se, int(t.size))


def achieved_flops(flops: Sequence[float], seconds: Sequence[float]) -> float:
    """Achieved FLOP/s of one op: the median over its training points of FLOPs / compute-only time.

    The median of per-point rates (not total FLOPs / total time) keeps the largest point from dominating, so the
    rate is representative of the sizes the model is asked about.
    """
    f = np.asarray(flops, dtype=float)
    t = np.asarray(seconds, dtype=float)
    ok = np.isfinite(f) & np.isfinite(t) & (t > 0) & (f > 0)
    if not ok.any():
        raise FitError("no point with positive FLOPs and compute time")
    return float(np.median(f[ok] / t[ok]))


@dataclass(frozen=True)
class ComputeFit:
    """One op's compute-time model t = overhead + flops / rate + traffic / bandwidth (inf: term fitted to 0)."""

    op: str
    overhead: float  # s
    rate: float  # FLOP/s
    bandwidth: float  # B/s
    n_points: int

    def predict(self, flops: np.ndarray | float, traffic: np.ndarray | float) -> np.ndarray:
        f = np.asarray(flops, dtype=float)
        b = np.nan_to_num(np.asarray(traffic, dtype=float))
        return self.overhead + f / self.rate + b / self.bandwidth


def fit_compute(
    op: str, flops: Sequence[float], traffic: Sequence[float], seconds: Sequence[float]
) -> ComputeFit:
    """Fit t = c0 + flops / F + traffic / B (all terms >= 0) minimising relative residuals.

    One FLOP rate cannot follow ops whose time is not FLOP-proportional (tokenisation's short-contraction
    GEMM, elementwise work) nor the fixed per-call cost of launching a layer's kernels on a CPU. Terms beyond
    the FLOP term are only fitted with at least one point more than terms (else the fit would interpolate): the
    traffic term from 3 points (and only where traffic is known), the overhead from one more.
    """
    f = np.asarray(flops, dtype=float)
    b = np.asarray(traffic, dtype=float)
    t = np.asarray(seconds, dtype=float)
    ok = np.isfinite(f) & np.isfinite(t) & (t > 0) & (f > 0)
    f, b, t = f[ok], b[ok], t[ok]
    if t.size == 0:
        raise FitError(f"{op}: no point with positive FLOPs and compute time")
    cols = {"flops": f}
    if t.size >= 3 and np.all(np.isfinite(b)) and np.ptp(b) > 0:
        cols["traffic"] = b
    if t.size >= len(cols) + 2:
        cols["overhead"] = np.ones_like(t)
    a = np.column_stack(list(cols.values())) / t[:, None]  # relative residual: model / t - 1
    coef, _ = nnls(a, np.ones_like(t))
    c = dict(zip(cols, coef, strict=True))
    inv = {k: (1.0 / c[k] if c.get(k, 0.0) > 0 else float("inf")) for k in ("flops", "traffic")}
    if not np.isfinite(inv["flops"]) and not np.isfinite(inv["traffic"]):
        # Times that do not grow with the work (tiny ops timed on a loaded machine, where the scheduler's noise
        # swamps the work) still have a model: their constant per-call cost. Only no term at all is an error.
        if c.get("overhead", 0.0) <= 0:
            raise FitError(f"{op}: compute time does not grow with FLOPs or traffic, and no overhead fits")
        log.warning(
            "%s: compute time does not grow with FLOPs or traffic over %d points (timing noise, e.g. a loaded "
            "machine?): modelled as a constant %.1f us per call",
            op,
            t.size,
            c["overhead"] * 1e6,
        )
    return ComputeFit(op, float(c.get("overhead", 0.0)), inv["flops"], inv["traffic"], int(t.size))


def _stable_unit(key: Hashable, seed: int) -> float:
    """A number in [0, 1) fixed by (key, seed) alone, the same on every machine and Python run."""
    digest = hashlib.sha256(f"{seed}:{key!r}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def holdout_mask(
    keys: Sequence[Hashable],
    groups: Sequence[Hashable],
    fraction: float,
    seed: int,
    anchors: Sequence[bool] | None = None,
) -> np.ndarray:
    """Which points are held out of the fit: about ``fraction`` per group, chosen by a seeded hash of each key.

    Each group with two or more points keeps at least one point for training and holds out at least one (of its
    points that are not ``anchors``), so every op and collective is both fitted and tested. An anchor is never
    held out: a collective's smallest and largest size carry the fit's span, and holding out the largest one
    left three small sizes whose times, on a loaded machine, did not grow with size at all (CI, 2026-12-03:
    all_reduce 11.6, 6.3, 8.0 ms at 4 KiB, 1 MiB, 4 MiB: no bandwidth term to fit). Adding points to a sweep
    does not reshuffle old ones more than necessary, since the order depends only on each point's own key.
    ``fraction`` is ``bench.fit.holdout_fraction``, in [0, 1) (the config refuses any other).
    """
    keys = list(keys)
    groups = list(groups)
    anchored = [False] * len(keys) if anchors is None else [bool(a) for a in anchors]
    if not len(keys) == len(groups) == len(anchored):
        raise ValueError("keys, groups and anchors differ in length")
    mask = np.zeros(len(keys), dtype=bool)
    by_group: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    for idx in by_group.values():
        free = [i for i in idx if not anchored[i]]
        if len(idx) < 2 or not free or fraction == 0.0:
            continue
        order = sorted(free, key=lambda i: _stable_unit(keys[i], seed))
        n_out = min(len(idx) - 1, len(free), max(1, round(fraction * len(idx))))
        mask[order[:n_out]] = True
    return mask
