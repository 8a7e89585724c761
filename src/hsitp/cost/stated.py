"""The paper's CCR model exactly as written (§3.2, §3.3, §6, §8), and its quoted numbers beside recomputed ones.

Nothing here corrects the paper: these are its formulas, vectorised (they take floats or numpy arrays).
Its prose rules ("which split wins when") are *claims*, recorded in :func:`paper_quotes` with what the formulas
give, so the claim audit can show where the paper agrees with itself and where it does not.

Notation: P parallel degree, F per-device compute rate [FLOP/s], beta interconnect bandwidth [B/s],
C_in the contraction (channel/feature) dimension of the split layer, N spatial tokens, g D-CHAG groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from hsitp.cost import paper


def threshold(P: ArrayLike, F: ArrayLike, beta: ArrayLike) -> np.ndarray:
    """§6.2 scale threshold P·F/β: a split is compute-bound only if its dimension exceeds it."""
    return np.asarray(P, dtype=float) * F / beta


def ccr_channel(P: ArrayLike, F: ArrayLike, beta: ArrayLike, c_in: ArrayLike) -> np.ndarray:
    """§3.2 channel (column/row) split: CCR_channel ≈ P·F / (β·C_in), independent of N."""
    return threshold(P, F, beta) / np.asarray(c_in, dtype=float)


def ccr_token(P: ArrayLike, F: ArrayLike, beta: ArrayLike, n: ArrayLike) -> np.ndarray:
    """§3.3 token split of self-attention: CCR_token ≈ P·F / (β·N), independent of C."""
    return threshold(P, F, beta) / np.asarray(n, dtype=float)


def rho(c: ArrayLike, n: ArrayLike) -> np.ndarray:
    """§2.2 channel-to-space ratio ρ = C / N (dimensionless)."""
    return np.asarray(c, dtype=float) / np.asarray(n, dtype=float)


def ccr_2d(ccr_c: ArrayLike, ccr_t: ArrayLike) -> np.ndarray:
    """§6.3 2-D split (P = P_c·P_t): "equivalent CCR about sqrt(CCR_channel · CCR_token)"."""
    return np.sqrt(np.asarray(ccr_c, dtype=float) * np.asarray(ccr_t, dtype=float))


def relative_throughput(P: ArrayLike, ccr: ArrayLike) -> np.ndarray:
    """Throughput of P devices relative to one, P / (1 + CCR): no overlap; the form matching §8.2's quoted pairs."""
    return np.asarray(P, dtype=float) / (1.0 + np.asarray(ccr, dtype=float))


def ccr_dchag(ccr_tp: ArrayLike, g: ArrayLike) -> np.ndarray:
    """§8.2: D-CHAG shrinks the cross-channel all-gather to 1/g of pure TP, computation unchanged → CCR / g."""
    return np.asarray(ccr_tp, dtype=float) / np.asarray(g, dtype=float)


def lower_split(c: ArrayLike, n: ArrayLike) -> np.ndarray:
    """Which 1-D split has the lower stated CCR: 'channel' when C > N, 'token' when N > C, 'tie' when equal.

    Follows from the formulas (CCR_channel / CCR_token = N / C_in), not from the paper's prose, which states the
    opposite in §3.3 and §11 (see :func:`paper_quotes`).
    """
    c = np.asarray(c, dtype=float)
    n = np.asarray(n, dtype=float)
    return np.where(c > n, "channel", np.where(n > c, "token", "tie"))


@dataclass(frozen=True)
class Quote:
    """One number or rule the paper states, beside what its own formulas give.

    ``quoted_low``/``quoted_high`` bound the quoted value as read (a "~" value gets a stated tolerance);
    categorical claims use ``quoted_text``/``computed_text`` and NaN numbers.
    """

    key: str
    section: str
    statement: str
    quoted_low: float
    quoted_high: float
    computed: float
    quoted_text: str = ""
    computed_text: str = ""
    how: str = ""

    @property
    def consistent(self) -> bool:
        if self.quoted_text or self.computed_text:
            return self.quoted_text == self.computed_text
        return bool(self.quoted_low <= self.computed <= self.quoted_high)


def _about(value: float, tol: float = 0.2) -> tuple[float, float]:
    """Bounds for a value the paper gives with "about"/"~": ±tol relative (20 % unless said otherwise)."""
    return value * (1 - tol), value * (1 + tol)


def paper_quotes(
    F: float = paper.PAPER_F,
    beta_intra: float = paper.PAPER_BETA_INTRA,
    beta_inter: float = paper.PAPER_BETA_INTER,
    C: int = paper.PAPER_C,
) -> list[Quote]:
    """The paper's quoted numbers and rules recomputed with its own formulas and parameters.

    Quotes needing the registry or the refined memory model (Pavia's grid, §8.2 memory) are added by
    :mod:`hsitp.cost.tables`.
    """
    return [
        *_scale_quotes(F, beta_intra, C),
        *_throughput_quotes(F, beta_intra, beta_inter, C),
        *_dchag_quotes(F, beta_intra, beta_inter, C),
        *_arithmetic_quotes(),
        *_rule_quotes(F, beta_intra, C),
    ]


def _scale_quotes(F: float, beta_intra: float, C: int) -> list[Quote]:
    """§6: the scale threshold P·F/β, and communication dominating both splits at N = 324."""
    n_small = paper.PAPER_N[0]
    cc = float(ccr_channel(8, F, beta_intra, C))
    ct = float(ccr_token(8, F, beta_intra, n_small))
    return [
        Quote(
            "threshold_p8_intra",
            "6.1/6.2",
            "P·F/β ≈ 8e3 at P = 8 inside a node",
            *_about(8e3),
            float(threshold(8, F, beta_intra)),
            how="8 · F / β_intra",
        ),
        Quote(
            "both_ccr_gt1_n324_p8_intra",
            "6.1",
            f"C_in = {C}, N = {n_small}, P = 8: both splits have CCR ≫ 1 (communication dominates)",
            1.0,
            np.inf,
            min(cc, ct),
            how=f"min(CCR_channel = {cc:.4g}, CCR_token = {ct:.4g})",
        ),
    ]


def _throughput_quotes(F: float, beta_intra: float, beta_inter: float, C: int) -> list[Quote]:
    """§8.1: relative throughput of both splits at the paper's two N, inside and across nodes."""
    n_small, n_large = paper.PAPER_N
    q: list[Quote] = []
    for level, beta in (("intra", beta_intra), ("inter", beta_inter)):
        tputs = [
            float(relative_throughput(P, ccr(P, F, beta, dim)))
            for P in paper.PAPER_P
            for ccr, dim in ((ccr_channel, C), (ccr_token, n_small))
        ]
        q.append(
            Quote(
                f"rel_tput_n324_below_0p1_{level}",
                "8.1",
                f"N = {n_small}: relative throughput of both splits < 0.1 (P in {paper.PAPER_P}, {level}-node β)",
                0.0,
                0.1,
                max(tputs),
                how="max over P and split of P/(1+CCR)",
            )
        )
        ratios = [
            float(
                relative_throughput(P, ccr_token(P, F, beta, n_large))
                / relative_throughput(P, ccr_channel(P, F, beta, C))
            )
            for P in paper.PAPER_P
        ]
        q.append(
            Quote(
                f"token_vs_channel_tput_n5776_{level}",
                "8.1",
                f"N = {n_large}: token split's relative throughput an order of magnitude above channel split "
                f"({level}-node β; read as 10^(1±0.5))",
                10**0.5,
                10**1.5,
                min(ratios),
                how="min over P of tput_token / tput_channel",
            )
        )
    return q


def _dchag_quotes(F: float, beta_intra: float, beta_inter: float, C: int) -> list[Quote]:
    """§8.2: D-CHAG against pure TP (CCR and throughput per level), and the internal consistency of its own pairs."""
    levels = (("intra", beta_intra), ("inter", beta_inter))
    return [
        *(q for level, beta in levels for q in _dchag_level_quotes(level, F, beta, C)),
        *_dchag_pair_quotes(),
    ]


def _dchag_level_quotes(level: str, F: float, beta: float, C: int) -> list[Quote]:
    """§8.2 at one level (intra- or inter-node β): pure TP's and D-CHAG's CCR and relative throughput."""
    n_large = paper.PAPER_N[1]
    P, g = paper.PAPER_DCHAG["P"], paper.PAPER_DCHAG["g"]
    c_tp = float(ccr_channel(P, F, beta, C))
    c_dc = float(ccr_dchag(c_tp, g))
    return [
        Quote(
            f"dchag_ccr_tp_{level}",
            "8.2",
            f"N = {n_large}, P = {P}, g = {g}: pure-TP CCR ≈ 250 ({level}-node β, channel formula, C = {C})",
            *_about(250),
            c_tp,
            how="P·F/(β·C)",
        ),
        Quote(
            f"dchag_ccr_{level}",
            "8.2",
            f"D-CHAG CCR ≈ 40 ({level}-node β; stated model CCR_channel/g)",
            *_about(40),
            c_dc,
            how="P·F/(β·C) / g",
        ),
        Quote(
            f"dchag_tput_tp_{level}",
            "8.2",
            f"pure-TP relative throughput ≈ 0.04 ({level}-node β)",
            *_about(0.04),
            float(relative_throughput(P, c_tp)),
            how="P/(1 + P·F/(β·C))",
        ),
        Quote(
            f"dchag_tput_{level}",
            "8.2",
            f"D-CHAG relative throughput ≈ 0.2 ({level}-node β)",
            *_about(0.2),
            float(relative_throughput(P, c_dc)),
            how="P/(1 + P·F/(β·C·g))",
        ),
    ]


def _dchag_pair_quotes() -> list[Quote]:
    """The internal consistency of §8.2's own pairs, independent of any parameter."""
    P, g = paper.PAPER_DCHAG["P"], paper.PAPER_DCHAG["g"]
    return [
        Quote(
            "dchag_ccr_ratio_vs_g",
            "8.2",
            f"all-gather shrinks to 1/{g}, so CCR should shrink {g}×; the quoted 250 → 40 shrinks 6.25×",
            *_about(250 / 40, 0.05),
            float(g),
            how="g (stated model) vs quoted 250/40",
        ),
        Quote(
            "dchag_tput_from_quoted_ccr_tp",
            "8.2",
            "throughput 0.04 from the quoted CCR 250 via P/(1+CCR)",
            *_about(0.04),
            float(relative_throughput(P, 250.0)),
            how="8/(1+250)",
        ),
        Quote(
            "dchag_tput_from_quoted_ccr",
            "8.2",
            "throughput 0.2 from the quoted CCR 40 via P/(1+CCR)",
            *_about(0.2),
            float(relative_throughput(P, 40.0)),
            how="8/(1+40)",
        ),
    ]


def _arithmetic_quotes() -> list[Quote]:
    """§4.3 and §5.3: padding and tokens per rank, plain arithmetic."""
    n_small = paper.PAPER_N[0]
    return [
        Quote(
            "padding_c103_p8",
            "4.3",
            "C = 103, P = 8 pads to 104, wasting about 1 %",
            0.005,
            0.015,
            (8 * int(np.ceil(103 / 8)) - 103) / (8 * int(np.ceil(103 / 8))),
            how="(8·ceil(103/8) − 103) / (8·ceil(103/8))",
        ),
        Quote(
            "tokens_per_rank_n324_p8",
            "5.3",
            "N = 324, P = 8: about 40 tokens per rank",
            *_about(40, 0.05),
            n_small / 8,
            how="324/8",
        ),
    ]


def _rule_quotes(F: float, beta_intra: float, C: int) -> list[Quote]:
    """The prose rules against the formulas: at ρ < 1 (N > C) the formulas give CCR_token < CCR_channel."""
    n_large = paper.PAPER_N[1]
    c_ex, n_ex = C, 2 * C

    def rule(key: str, section: str, statement: str, quoted: str, c: int, n: int, how: str) -> Quote:
        """The split a rule names against the lower of the two formulas at C = c, N = n."""
        ratio = float(ccr_channel(8, F, beta_intra, c) / ccr_token(8, F, beta_intra, n))
        return Quote(key, section, statement, np.nan, np.nan, ratio, quoted, str(lower_split(c, n)), how)

    return [
        rule(
            "rule_rho_lt1_section3_3",
            "3.3",
            "when ρ < 1 (N > C) the channel split has the lower CCR",
            "channel",
            c_ex,
            n_ex,
            f"lower of the two formulas at C = {c_ex}, N = {n_ex}; computed = CCR_channel/CCR_token",
        ),
        rule(
            "rule_rho_gt1_section3_3",
            "3.3",
            "when ρ > 1 (C > N) the token split has the lower CCR",
            "token",
            n_ex,
            c_ex,
            f"lower of the two formulas at C = {n_ex}, N = {c_ex}; computed = CCR_channel/CCR_token",
        ),
        rule(
            "rule_large_n_section8_1",
            "8.1",
            f"N = {n_large} (> C): the token split has the lower CCR",
            "token",
            C,
            n_large,
            "lower of the two formulas; computed = CCR_channel/CCR_token",
        ),
        rule(
            "rule_large_n_small_rho_section11",
            "11",
            "when N is large and ρ small the channel split has the lower CCR",
            "channel",
            C,
            n_large,
            f"lower of the two formulas at C = {C}, N = {n_large}",
        ),
    ]
