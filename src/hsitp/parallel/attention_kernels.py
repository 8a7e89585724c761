"""Attention kernels: ``attend`` (PyTorch's scaled-dot-product attention with an additive key mask, for every
attention of the model) and the single-query cross-attention's two kernels: ``sdpa`` (project every token to k and v, then PyTorch's
scaled-dot-product attention) and ``exact`` (the same numbers without ever forming k or v).

One learned query per head (q_h, hd values) attends over S tokens x_1..x_S (D values each) of every row. With the
kv projection k_l = W_k x_l + b_k, v_l = W_v x_l + b_v, per head h:

    score_hl = q_h . k_hl / sqrt(hd) = x_l . u_h + c_h,     u_h = W_kh^T q_h / sqrt(hd),  c_h = b_kh . q_h / sqrt(hd)
    o_h      = sum_l p_hl v_hl       = y_h W_vh^T + b_vh,    y_h = sum_l p_hl x_l,          p_h = softmax_l(score_h)

(sum_l p_hl = 1; c_h shifts every score of the row alike, so the softmax ignores it). The forward thus needs a
(D, h) matrix U instead of a (2 D)-wide projection of every token, and the backward is rank-structured: with
g_h = dL/do_h, dy_h = g_h W_vh, dp_hl = dy_h . x_l, ds = softmax's backward of dp,

    dx_l   = sum_h p_hl dy_h + sum_h ds_hl u_h        (one token-sized tensor, nothing else token-sized)
    dW_vh  = sum_rows g_h^T y_h,   db_vh = sum_rows g_h
    dU     = sum_rows X^T ds   ->  dW_kh = q_h dU_h^T / sqrt(hd),  dq_h = W_kh dU_h / sqrt(hd) + b_kh sum(ds_h) / sqrt(hd)
    db_kh  = q_h sum(ds_h) / sqrt(hd)                 (zero in exact arithmetic: sum_l ds_hl = 0)

which is the gradient SDPA's path computes (dk = ds q^T, dv = p g^T, then through the kv linear), without the
token-sized dk and dv. Saved for backward: the tokens (which the sdpa path's kv linear saves too), p (rows, h, S)
and y (rows, h, D); where the sdpa path saves its kv input, k and v (3 token-sized tensors at D = 64, tp at P = 2)
the exact one saves the tokens and two tensors h / D and h / S of their size.

A key mask is additive (0 where real, the dtype's most negative finite value at padding; ``additive_key_mask``),
as the sdpa path adds it, so a row whose keys are all padding gives the same finite output in both kernels.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hsitp.names import ATTENTION_KERNELS

KERNELS = ATTENTION_KERNELS  # the single-query attention's kernels: exact (rank-structured), PyTorch SDPA


def additive_key_mask(key_valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where a key is real, the dtype's most negative finite value where it is padding.

    Finite (not -inf) so that a row whose keys are all padding yields finite values instead of NaN; such rows
    are always discarded downstream (padded query rows, fully padded D-CHAG groups).
    """
    zero = torch.zeros((), dtype=dtype, device=key_valid.device)
    return torch.where(key_valid, zero, torch.finfo(dtype).min)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor | None) -> torch.Tensor:
    """Softmax attention; q (B, h, Nq, hd), k/v (B, h, Nk, hd), key_valid broadcastable to (B, Nk) or None."""
    mask = None
    if key_valid is not None:
        kv = key_valid.reshape(-1, key_valid.shape[-1]) if key_valid.dim() > 1 else key_valid[None]
        mask = additive_key_mask(kv, q.dtype)[:, None, None, :]  # (B or 1, 1, 1, Nk)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, h, Nq, hd)


def check_kernel(kernel: str) -> str:
    if kernel not in KERNELS:
        raise ValueError(f"attention kernel must be one of {KERNELS}, got {kernel!r}")
    return kernel


def _by_head(kv_weight: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """The kv linear's (2 h hd, D) weight as (k | v, h, hd, D): its rows are [k of head 0..h-1 | v of head
    0..h-1], hd rows per head (the sdpa path's ``view(M, S, 2, h, hd)`` of the projection)."""
    return kv_weight.view(2, heads, head_dim, kv_weight.shape[-1])


class _ExactSingleQuery(torch.autograd.Function):
    """forward: per head, softmax(X u_h + mask) over the S tokens, then (p^T X) W_vh^T + b_vh, (M, h hd);
    backward: the rank-structured gradients of the module docstring (tokens, q, the kv weight and bias).

    Inputs: tokens (M, S, D); q (h, hd), the projected query; kv_weight (2 h hd, D) and kv_bias (2 h hd,) laid
    out [k heads | v heads] as the kv linear's; mask (R, S) additive with M a multiple of R (row i uses mask row
    i mod R: D-CHAG's per-group masks over (M', g) rows folded to M' g) or None.
    """

    @staticmethod
    def forward(
        ctx,
        tokens: torch.Tensor,
        q: torch.Tensor,
        kv_weight: torch.Tensor,
        kv_bias: torch.Tensor,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        m, s, d = tokens.shape  # (M, S, D)
        h, hd = q.shape
        scale = 1.0 / math.sqrt(hd)
        w = _by_head(kv_weight, h, hd)  # (k | v, h, hd, D)
        u = torch.einsum("he,hed->hd", q, w[0]).mul_(scale)  # (h, D): u_h = W_kh^T q_h / sqrt(hd)
        # scores head-major, (M, h, S): the softmax runs over the contiguous last axis
        scores = torch.bmm(u.expand(m, h, d), tokens.transpose(1, 2))  # (M, h, S)
        if mask is not None:
            r = mask.shape[0]
            scores.view(m // r, r, h, s).add_(mask[None, :, None, :])
        p = torch.softmax(scores, dim=-1)  # (M, h, S): weights over the S tokens, per row and head
        del scores
        y = torch.bmm(p, tokens)  # (M, h, D): each head's weighted mean token
        o = torch.einsum("mhd,hed->mhe", y, w[1]).reshape(m, h * hd)  # (M, h hd)
        o = o + kv_bias[h * hd :]  # + b_v (the weights sum to 1)
        ctx.save_for_backward(tokens, q, kv_weight, kv_bias, p, y, u)
        return o

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        tokens, q, kv_weight, kv_bias, p, y, u = ctx.saved_tensors
        m, s, d = tokens.shape
        h, hd = q.shape
        scale = 1.0 / math.sqrt(hd)
        w = _by_head(kv_weight, h, hd)
        g = grad.reshape(m, h, hd)  # (M, h, hd)
        dy = torch.bmm(g.transpose(0, 1), w[1]).transpose(0, 1)  # (M, h, D), a view of a head-major product
        ds = torch.bmm(dy, tokens.transpose(1, 2))  # dp (M, h, S), then in place softmax's backward:
        ds.sub_((p * ds).sum(dim=-1, keepdim=True)).mul_(p)  # ds = p (dp - sum_l p dp)
        grad_tokens = None
        if ctx.needs_input_grad[0]:
            grad_tokens = torch.bmm(p.transpose(1, 2), dy)  # (M, S, D): through y
            grad_tokens.baddbmm_(ds.transpose(1, 2), u.expand(m, h, d))  # + through the scores
        # released before the weights' gradients are made (the backward's peak is the tokens' gradient)
        del dy
        du = torch.bmm(ds, tokens).sum(dim=0)  # (h, D): sum over rows and tokens of ds x
        ds_sum = ds.sum(dim=(0, 2)) * scale  # (h,): zero in exact arithmetic
        del ds
        b = kv_bias.view(2, h, hd)
        grad_q = grad_w = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_q = torch.einsum("hed,hd->he", w[0], du) * scale + b[0] * ds_sum[:, None]  # (h, hd)
        if ctx.needs_input_grad[2]:
            grad_w = kv_weight.new_empty(2, h, hd, d)  # (k | v, h, hd, D)
            torch.mul(q[:, :, None], du[:, None, :], out=grad_w[0]).mul_(scale)  # dW_k = q dU^T
            torch.bmm(g.permute(1, 2, 0), y.transpose(0, 1), out=grad_w[1])  # dW_v (h, hd, D)
            grad_w = grad_w.view(kv_weight.shape)
        if ctx.needs_input_grad[3]:
            grad_b = torch.stack([q * ds_sum[:, None], g.sum(dim=0)]).view(kv_bias.shape)  # (2 h hd,)
        return grad_tokens, grad_q, grad_w, grad_b, None


def fold_key_mask(key_valid: torch.Tensor | None, rows: int, dtype: torch.dtype) -> torch.Tensor | None:
    """An additive (R, S) key mask for ``rows`` rows from ``key_valid``: (S,) for every row, or (..., S) whose
    leading dims are the trailing dims of the rows' batch (D-CHAG's (g, s) over (M', g) rows), R = their product."""
    if key_valid is None:
        return None
    valid = key_valid.reshape(-1, key_valid.shape[-1])  # (R, S)
    if rows % valid.shape[0]:
        raise ValueError(f"key mask of {valid.shape[0]} rows does not tile {rows} rows")
    return additive_key_mask(valid, dtype)


def single_query_attention(
    tokens: torch.Tensor,
    q: torch.Tensor,
    kv_weight: torch.Tensor,
    kv_bias: torch.Tensor,
    key_valid: torch.Tensor | None = None,
    *,
    kernel: str = "exact",
) -> torch.Tensor:
    """One learned query per head over the S tokens of each row: tokens (M, S, D), q (h, hd) the projected
    query, kv_weight (2 h hd, D) / kv_bias (2 h hd,) the kv linear's parameters (this rank's heads), key_valid
    None, (S,) or (..., S) tiling the rows (see ``fold_key_mask``) -> (M, h hd), before the output projection.

    ``kernel``: "exact" (``_ExactSingleQuery``: neither k nor v formed) or "sdpa" (the kv linear, then
    ``F.scaled_dot_product_attention``); the two give the same output and gradients up to rounding."""
    m, s, d = tokens.shape
    h, hd = q.shape
    if check_kernel(kernel) == "exact":
        device = tokens.device.type
        if device in ("cpu", "cuda") and torch.is_autocast_enabled(device):  # (meta: no autocast)
            # in the autocast dtype, as the kv linear and SDPA would run (matmuls are on autocast's
            # lower-precision list); the casts' backward returns the parameters' gradients in their own dtype
            low = torch.get_autocast_dtype(device)
            with torch.autocast(device, enabled=False):
                mask = fold_key_mask(key_valid, m, low)
                args = (t.to(low) for t in (tokens, q, kv_weight, kv_bias))
                return _ExactSingleQuery.apply(*args, mask)
        mask = fold_key_mask(key_valid, m, tokens.dtype)
        return _ExactSingleQuery.apply(tokens, q, kv_weight, kv_bias, mask)
    kv = F.linear(tokens, kv_weight, kv_bias).view(m, s, 2, h, hd)  # (M, S, 2, h, hd)
    k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)  # (M, h, S, hd) each
    qe = q.view(1, h, 1, hd).expand(m, -1, -1, -1)  # (M, h, 1, hd)
    if key_valid is not None and key_valid.dim() > 1:  # per-row masks tiling the rows: one per row
        valid = key_valid.reshape(-1, s)  # (R, S)
        key_valid = valid.expand(m // valid.shape[0], -1, -1).reshape(m, s)  # (M, S)
    o = attend(qe, k, v, key_valid)  # (M, h, 1, hd)
    return o.reshape(m, h * hd)
