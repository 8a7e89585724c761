"""The N split: token-parallel attention. Each rank holds N/P spatial tokens and full (replicated) weights,
computes queries for its own tokens and all-gathers keys and values (backward: reduce-scatter). N not divisible
by P is zero padded; padded tokens are masked as keys and produce zero output rows.

Weights are replicated, so their gradients are partial sums over each rank's tokens: call
``reduce_replicated_grads()`` after backward.
"""

from __future__ import annotations

from hsitp.parallel.groups import Mesh2D, TPGroup
from hsitp.parallel.two_d import Attention2D


class TokenParallelAttention(Attention2D):
    """Attention over N tokens split across ``tp``; input/output this rank's (B, N_local, D)."""

    op_name = "attn_token"

    def __init__(self, dim: int, heads: int, tp: TPGroup, *, n_tokens: int, **kwargs: object) -> None:
        mesh = Mesh2D(channel=TPGroup.single(), token=tp)
        super().__init__(dim, heads, mesh, n_tokens=n_tokens, **kwargs)
