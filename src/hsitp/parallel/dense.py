"""Single-process reference modules: every parallel layer is built by slicing one of these (the "master"), so a
sharded layer equals its dense reference for the same seed, and the parity tests compare against them.

Parameter names match the parallel layers' (``fc1``, ``fc2``, ``qkv``, ``proj``, ``q``, ``kv``, ...), so a
sharded gradient can be compared with the slice of the dense gradient of the same name.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from hsitp.names import BY_VARIANT
from hsitp.parallel.attention_kernels import attend, check_kernel, single_query_attention
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.padding import Split
from hsitp.shape import slot_product_rows

VARIANTS = tuple(BY_VARIANT)  # D-CHAG's partial aggregators: "L" (linear), "C" (cross-attention)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Draw initial weights from ``seed`` on the CPU without disturbing the caller's RNG streams."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def clone_module(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` whose parameters and buffers are fresh clones.

    ``copy.deepcopy`` would copy a FakeTensor's ``fake_mode`` along with it, and the copy could then not be mixed
    with the original mode's tensors; cloning keeps every tensor in its own mode (and device, dtype).
    """
    memo: dict[int, object] = {}
    for p in module.parameters():
        memo[id(p)] = nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad)
    for b in module.buffers():
        memo[id(b)] = b.detach().clone()
    return copy.deepcopy(module, memo)


def move(module: nn.Module, device: torch.device | str | None, dtype: torch.dtype | None) -> nn.Module:
    """``module.to(device, dtype)``, skipped when both are None. Under FakeTensorMode ``nn.Module.to`` swaps
    tensors and fails, so a model built there (in place, device and dtype None) must never be moved."""
    if device is None and dtype is None:
        return module
    return module.to(device=device, dtype=dtype)


def head_dim(dim: int, heads: int) -> int:
    if heads < 1 or dim % heads:
        raise ShardingError(
            f"feature dim D = {dim} is not divisible by heads = {heads}; pick heads dividing D"
        )
    return dim // heads


def trunc_normal_(tensor: torch.Tensor, std: float = 0.02, bound: float = 2.0) -> torch.Tensor:
    """Fill ``tensor`` from Normal(0, std) truncated to +-bound std, by inverse-CDF sampling.

    A fixed number of random draws and no data-dependent branch: ``nn.init.trunc_normal_`` rejection-samples
    with ``.item()`` / ``.any()``, which FakeTensorMode cannot run (paper-scale memory estimates build models
    under it).
    """
    # CDF mass inside [-bound, bound] is (1 + edge) / 2 - (1 - edge) / 2
    edge = math.erf(bound / math.sqrt(2.0))
    with torch.no_grad():
        tensor.uniform_(-edge, edge)  # 2 u - 1 for u uniform on [cdf(-bound), cdf(bound)]
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        return tensor.clamp_(-bound * std, bound * std)


def sincos_1d(positions: int, dim: int) -> torch.Tensor:
    """(positions, dim) 1-D sin-cos embedding (as ClimaX's per-variable embedding initialisation)."""
    half = dim // 2
    omega = 1.0 / 10000 ** (torch.arange(half, dtype=torch.float64) / max(half, 1))
    angle = torch.arange(positions, dtype=torch.float64)[:, None] * omega[None, :]  # (positions, half)
    emb = torch.cat([angle.sin(), angle.cos()], dim=1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros(positions, 1, dtype=torch.float64)], dim=1)
    return emb.float()


class DenseMLP(nn.Module):
    """fc1 (D -> hidden), GELU, fc2 (hidden -> D): the reference for ParallelMLP."""

    def __init__(self, dim: int, hidden: int, *, seed: int = 0) -> None:
        super().__init__()
        with seeded(seed):
            self.fc1 = nn.Linear(dim, hidden)
            self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, D) -> (B, N, D)
        return self.fc2(F.gelu(self.fc1(x)))


class DenseAttention(nn.Module):
    """Multi-head self-attention, qkv rows laid out (3, heads, head_dim): the reference for every split."""

    def __init__(self, dim: int, heads: int, *, seed: int = 0) -> None:
        super().__init__()
        self.dim, self.heads, self.head_dim = dim, heads, head_dim(dim, heads)
        with seeded(seed):
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, key_valid: torch.Tensor | None = None) -> torch.Tensor:
        b, n, _ = x.shape  # (B, N, D)
        qkv = self.qkv(x).view(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, B, h, N, hd)
        o = attend(qkv[0], qkv[1], qkv[2], key_valid)  # (B, h, N, hd)
        return self.proj(o.transpose(1, 2).reshape(b, n, self.dim))  # (B, N, D)


def dense_layernorm(dim: int, *, seed: int = 0, eps: float = 1e-5) -> nn.LayerNorm:
    """LayerNorm with non-trivial affine parameters drawn from ``seed`` (so parity tests exercise them)."""
    ln = nn.LayerNorm(dim, eps=eps)
    with seeded(seed), torch.no_grad():
        ln.weight.copy_(1.0 + 0.1 * torch.randn(dim))
        ln.bias.copy_(0.1 * torch.randn(dim))
    return ln


_PATCH_CHUNK_BYTES = 1 << 20  # patches a chunk of bands may copy at least (see ``_band_chunk``)
_PATCH_CHUNKS = 8  # ... and at most this many chunks per pass


def _band_chunk(x: torch.Tensor, patch: int) -> int:
    """Bands per chunk of the tokenizer's patch copies: as many as fit in ``_PATCH_CHUNK_BYTES`` of patches, but
    at least 1/``_PATCH_CHUNKS`` of the bands (a bounded count of batched products per pass). A whole-input copy
    of the patches is a transient as large as the batch (B L H W; at p p > D larger than the tokens): chunks keep
    it to max(1 MiB, batch / 8), and a chunk that fits in cache is read back by its product faster."""
    b, bands, height, width = x.shape
    per_band = b * (height // patch) * (width // patch) * patch * patch * x.element_size()
    return min(bands, max(1, _PATCH_CHUNK_BYTES // max(per_band, 1), math.ceil(bands / _PATCH_CHUNKS)))


def _band_patches(x: torch.Tensor, patch: int, start: int, count: int) -> torch.Tensor:
    """(B, L, H, W) -> (count, B N, p p): bands start..start+count's non-overlapping p x p patches, location-major.

    One copying op reads them straight from x's storage (``as_strided_copy``): no op returns a view of x. (A view
    of the batch, made inside a step measured by ``MemTracker``, registers the batch's whole storage with the
    tracker, which then counts the batch, allocated before the step, in the step's peak; the grouped convolution
    took x only as an input.)"""
    b, _, height, width = x.shape
    h, w = height // patch, width // patch
    sb, sl, sh, sw = x.stride()
    patches = torch.as_strided_copy(
        x,
        (count, b, h, w, patch, patch),  # (count, B, h, w, p, p)
        (sl, sb, patch * sh, patch * sw, sh, sw),
        x.storage_offset() + start * sl,
    )
    return patches.view(count, b * h * w, patch * patch)  # (count, B N, p p)


class _BandPatchEmbed(torch.autograd.Function):
    """The per-band patch embedding (grouped Conv2d, kernel = stride = p) written location-major.

    forward: tokens[b, n, l] = patches[l, (b, n)] @ W[l] + bias[l], (B, N, L, D) contiguous. A grouped
    convolution writes (B, L D, H/p, W/p); folding that to (B N, L, D) for the cross-band aggregator is a
    transposing copy of every token (the slowest operation of a CPU step). Here, chunk by chunk of bands
    (``_band_chunk``), the chunk's patches are copied out of x, one batched product per band writes (c, B N, D),
    and a row copy puts it into the (B N, L, D) tokens: one token-sized tensor plus a chunk's patches and
    products, where the convolution took two token-sized tensors (its output and the band-embedded copy).
    backward: the weight's gradient, chunk by chunk, one batched product per band of the tokens' gradient with
    the chunk's patches (recomputed from x, which the convolution saved too) written in the weight's layout; the
    bias's, the tokens' gradient summed over locations. x gets one only when it asks (the parity tests' inputs; a
    model's batch needs none).

    Memory: patches copied for all bands at once are a transient the size of the
    batch, B L H W, in forward and again in backward, where the tokenizer's gradient then set the training peak
    (smoke dchag_l at P = 1: 23.1 -> 49.9 MiB, tracked); chunks bound it to max(1 MiB, batch / 8).
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, patch: int) -> torch.Tensor:
        b, bands, height, width = x.shape  # (B, L, H, W)
        dim = bias.shape[-1]
        n = b * (height // patch) * (width // patch)  # B N
        chunk = _band_chunk(x, patch)
        w = weight.view(bands, dim, patch * patch).transpose(1, 2)  # (L, p p, D)
        tokens = x.new_empty(n, bands, dim)  # (B N, L, D)
        for start in range(0, bands, chunk):
            stop = min(bands, start + chunk)
            patches = _band_patches(x, patch, start, stop - start)  # (c, B N, p p)
            per_band = torch.baddbmm(bias[start:stop, None, :], patches, w[start:stop])  # (c, B N, D)
            del patches
            tokens[:, start:stop].copy_(per_band.transpose(0, 1))
            del per_band
        ctx.save_for_backward(x, weight)  # the batch and a parameter: neither costs activation memory
        ctx.patch = patch
        return tokens.view(b, -1, bands, dim)  # (B, N, L, D)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        bands, dim = grad.shape[2], grad.shape[3]
        g = grad.reshape(-1, bands, dim)  # (B N, L, D)
        grad_weight = grad_bias = None
        if ctx.needs_input_grad[1]:
            p = ctx.patch
            chunk = _band_chunk(x, p)
            g_t = g.permute(1, 2, 0)  # (L, D, B N), a view
            gw = weight.new_empty(bands, dim, p * p)  # (L, D, p p): the weight's own layout
            for start in range(0, bands, chunk):
                stop = min(bands, start + chunk)
                torch.bmm(g_t[start:stop], _band_patches(x, p, start, stop - start), out=gw[start:stop])
            grad_weight = gw.view(weight.shape)  # (L D, 1, p, p)
        if ctx.needs_input_grad[2]:
            grad_bias = g.sum(dim=0)  # (L, D)
        grad_x = None
        if ctx.needs_input_grad[0]:  # the parity tests' input gradient (a model's batch needs none)
            b, _, height, width = x.shape
            p = ctx.patch
            weight_view = weight.view(bands, dim, p * p)  # (L, D, p p)
            gp = torch.bmm(g.transpose(0, 1), weight_view)  # (L, B N, p p)
            # (B, L, h, p, w, p)
            gp = gp.view(bands, b, height // p, width // p, p, p).permute(1, 0, 2, 4, 3, 5)
            grad_x = gp.reshape(x.shape)
        return grad_x, grad_weight, grad_bias, None


def band_patch_embed(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, patch: int) -> torch.Tensor:
    """Per-band patch embedding: x (B, L, H, W), weight (L D, 1, p, p) as a grouped Conv2d's, bias (L, D)
    -> (B, N, L, D) tokens, location-major and contiguous (see ``_BandPatchEmbed``).

    Under autocast it runs in the autocast dtype, as the convolution it replaces would (conv2d is on autocast's
    lower-precision list); the casts' backward returns the parameters' gradients in their own dtype."""
    device = x.device.type
    if device in ("cpu", "cuda") and torch.is_autocast_enabled(device):  # (meta: no autocast)
        low = torch.get_autocast_dtype(device)
        with torch.autocast(device, enabled=False):
            return _BandPatchEmbed.apply(x.to(low), weight.to(low), bias.to(low), patch)
    return _BandPatchEmbed.apply(x, weight, bias, patch)


class BandTokenizer(nn.Module):
    """Per-band patch embedding: band l has its own Conv2d(1 -> D, kernel = stride = p), plus a learned
    per-band embedding initialised sin-cos (ClimaX / D-CHAG tokenisation).

    Stored as one grouped convolution (groups = bands), which is exactly the stack of the per-band Conv2d's
    (same default initialisation: fan_in = p * p), but computed by ``band_patch_embed``: one batched product per
    band written location-major, (B, N, L, D) contiguous, the layout the cross-band aggregators fold into
    (B * N, L, D) without a copy; the band embedding rides in the bias.
    """

    def __init__(self, bands: int, dim: int, patch: int, *, first_band: int = 0) -> None:
        super().__init__()
        self.bands, self.dim, self.patch, self.first_band = bands, dim, patch, first_band
        self.proj = nn.Conv2d(bands, bands * dim, kernel_size=patch, stride=patch, groups=bands)
        self.band_embed = nn.Parameter(sincos_1d(first_band + bands, dim)[first_band:])  # (L, D)

    def subset(self, start: int, count: int) -> BandTokenizer:
        """A tokenizer for bands [start, start + count) holding copies of this one's parameters (same device and
        dtype: the copies are slices, so no module move, which FakeTensorMode cannot do)."""
        with seeded(0):  # the throw-away initial values must not consume the caller's RNG stream
            sub = BandTokenizer(count, self.dim, self.patch, first_band=self.first_band + start)
        d = self.dim
        rows = slice(start * d, (start + count) * d)
        sub.proj.weight = nn.Parameter(self.proj.weight.detach()[rows].clone())  # (count D, 1, p, p)
        sub.proj.bias = nn.Parameter(self.proj.bias.detach()[rows].clone())  # (count D,)
        sub.band_embed = nn.Parameter(self.band_embed.detach()[start : start + count].clone())  # (count, D)
        return sub

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, bands, h, w = x.shape  # (B, L, H, W)
        if bands != self.bands or h % self.patch or w % self.patch:
            raise ShardingError(
                f"tokenizer expects (B, {self.bands}, H, W) with H, W multiples of patch {self.patch}; "
                f"got {tuple(x.shape)}"
            )
        bias = self.proj.bias.view(bands, self.dim) + self.band_embed  # (L, D): conv bias + band embedding
        return band_patch_embed(x, self.proj.weight, bias, self.patch)  # (B, N, L, D)


class SingleQueryCrossAttention(nn.Module):
    """One learned query cross-attends over S tokens at each location (folded into the batch).

    The baseline's cross-band aggregator, D-CHAG-C's partial aggregator (unsharded) and the reference for the
    head-sharded HeadParallelCrossAttention. ``key_valid`` (S,) or broadcastable to tokens' (..., S) masks padding.
    """

    def __init__(self, dim: int, heads: int, *, kernel: str = "exact") -> None:
        super().__init__()
        self.dim, self.heads, self.head_dim = dim, heads, head_dim(dim, heads)
        # exact or sdpa: the same numbers (hsitp.parallel.attention_kernels)
        self.kernel = check_kernel(kernel)
        self.query = nn.Parameter(torch.empty(1, 1, dim))
        trunc_normal_(self.query, std=0.02)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens: torch.Tensor, key_valid: torch.Tensor | None = None) -> torch.Tensor:
        *batch, s, _ = tokens.shape  # (..., S, D)
        m = math.prod(batch)
        q = self.q(self.query).view(self.heads, self.head_dim)  # (h, hd)
        o = single_query_attention(
            tokens.reshape(m, s, self.dim), q, self.kv.weight, self.kv.bias, key_valid, kernel=self.kernel
        )  # (M, D)
        return self.proj(o).view(*batch, self.dim)  # (..., D)


class PartialAggregator(nn.Module):
    """D-CHAG's rank-local aggregation of a rank's band tokens to one token per location.

    The rank's ``slots`` band slots are cut into ``groups`` consecutive groups; one shared-weight aggregator
    (``level1``) reduces every group to a token, then (groups > 1) ``level2`` reduces the group tokens to one.
    Variant "L": a Linear over the channel axis (s -> 1); variant "C": a full multi-head single-query
    cross-attention with its own query. Padded slots (``valid`` False) must hold zeros; they are masked, and a
    group that is entirely padding is masked out at level 2. ``valid`` is None when nothing is padded (decided
    from the split's sizes in Python, so no host sync; FakeTensorMode can trace it). Used unchanged by the dense emulation and by each
    rank of DCHAGAggregator, so the two differ only in how tokens and gradients move.
    """

    def __init__(
        self, variant: str, slots: int, groups: int, dim: int, heads: int, *, kernel: str = "exact"
    ) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ShardingError(f"D-CHAG variant must be one of {VARIANTS}, got {variant!r}")
        if groups < 1 or slots % groups:
            raise ShardingError(f"D-CHAG: {slots} band slots per rank cannot form {groups} equal groups")
        self.variant, self.slots, self.groups, self.dim = variant, slots, groups, dim
        self.linear = BY_VARIANT[variant].partial == "linear"  # linear partials, else cross-attention
        size = slots // groups
        if self.linear:
            self.level1: nn.Module = nn.Linear(size, 1)
            self.level2: nn.Module | None = nn.Linear(groups, 1) if groups > 1 else None
        else:
            self.level1 = SingleQueryCrossAttention(dim, heads, kernel=kernel)
            self.level2 = SingleQueryCrossAttention(dim, heads, kernel=kernel) if groups > 1 else None

    def level1_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """D-CHAG-L's level 1 as (g, s) weights and (g,) biases, one row per group (the groups share the Linear's
        weights: the rows are its expansion, so their gradients sum into it)."""
        g, s = self.groups, self.slots // self.groups
        return self.level1.weight.expand(g, s), self.level1.bias.expand(g)

    def forward(self, tokens: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        m = tokens.shape[0]  # tokens (M, slots, D); valid (slots,) bool, or None when no slot is padding
        g = self.groups
        t = tokens.view(m, g, self.slots // g, self.dim)  # (M, g, s, D)
        v = valid.view(g, -1) if valid is not None else None  # (g, s)
        if self.linear:
            if v is not None:
                t = t * v[None, :, :, None].to(t.dtype)
            h = slot_mix(t, *self.level1_rows())  # (M, g, D)
        else:
            h = self.level1(t, v)  # (M, g, D)
        return self.finish(h, v)

    def finish(self, h: torch.Tensor, v: torch.Tensor | None = None) -> torch.Tensor:
        """Level 2 over the (M, g, D) group tokens of level 1 (``v``: the (g, s) valid slots, None unpadded)."""
        if self.level2 is None:
            return h[:, 0]  # (M, D)
        group_valid = v.any(dim=1) if v is not None else None  # (g,)
        if self.linear:
            if group_valid is not None:
                h = h * group_valid[None, :, None].to(h.dtype)
            return slot_mix(h[:, None], self.level2.weight, self.level2.bias)[:, 0]  # (M, D)
        return self.level2(h, group_valid)  # (M, D)


class _SlotMix(torch.autograd.Function):
    """D-CHAG-L's Linear(s -> 1) over the slots of every group, reading the tokens where they lie.

    forward: h[m, j] = sum_k w[j, k] t[m, j, k] + b[j], one batched product per group j of a stride-0 weight row
    with t[:, j] (M, s, D), any strides: no copy of the tokens (``F.linear`` of the transposed tokens folded them to
    a (..., D, s) copy, and its backward copied the fold's gradient back). backward: the tokens' gradient written
    in one (M, G, s, D) tensor, group by group (dt[m, j, k] = w[j, k] dh[m, j]: an outer product), and the weights'
    from chunked products summed over D (``_slot_weight_grad``). Inputs: t (M, G, s, D), w (G, s), b (G,); output
    (M, G, D).
    """

    @staticmethod
    def forward(ctx, t: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m, groups, s, d = t.shape
        h = t.new_empty(m, groups, d)  # (M, G, D)
        for j in range(groups):
            row = w[j].view(1, 1, s).expand(m, 1, s)  # (M, 1, s), stride 0 over the rows
            h[:, j] = torch.bmm(row, t[:, j]).squeeze(1)  # (M, D)
        h.add_(b.view(1, groups, 1))
        ctx.save_for_backward(t, w)
        return h

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        t, w = ctx.saved_tensors
        m, groups, s, d = t.shape
        grad_t = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            # (M, G, s, D), contiguous: one broadcast product writes it whole
            grad_t = torch.mul(w.view(1, groups, s, 1), grad.view(m, groups, 1, d))
        if ctx.needs_input_grad[1]:
            grad_w = _slot_weight_grad(t, grad)  # (G, s)
        if ctx.needs_input_grad[2]:
            grad_b = grad.sum(dim=(0, 2))  # (G,)
        return grad_t, grad_w, grad_b


def _slot_weight_grad(t: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """dw[j, k] = sum over (m, d) of t[m, j, k, d] dh[m, j, d]: (M, G, s, D), (M, G, D) -> (G, s).

    Chunks of rows (``hsitp.shape.slot_product_rows``) of one broadcast product summed over D (the contiguous
    axis), then over the rows. A batched product per group (bmm of t[:, j] (M, s, D) with dh (M, D, 1)) copied
    every group's strided tokens and ran M matrix-vector products: 15.6 ms against 1.0 ms here, in isolation at
    the cpu sizes (docs/measured-history.md, "Step speed")."""
    m, groups, s, d = t.shape
    rows = slot_product_rows(groups, s, d)
    acc = t.new_zeros(groups, s)  # (G, s)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        acc += torch.mul(t[start:stop], grad[start:stop, :, None, :]).sum(dim=-1).sum(dim=0)
    return acc


def slot_mix(t: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(M, G, s, D) tokens of G groups -> (M, G, D): group j's Linear(s -> 1) (weight row w[j] (s,), bias b[j]);
    see ``_SlotMix``. ``w`` (G, s) or (1, s) and ``b`` (G,) or (1,) broadcast over the groups."""
    groups, s = t.shape[1], t.shape[2]
    return _SlotMix.apply(t, w.expand(groups, s), b.expand(groups))


class DenseTPAggregator(nn.Module):
    """Reference for the TP baseline: tokenise all L bands, one single-query cross-attention over them."""

    def __init__(
        self, bands: int, dim: int, heads: int, patch: int, *, seed: int = 0, kernel: str = "exact"
    ) -> None:
        super().__init__()
        with seeded(seed):
            self.tokenizer = BandTokenizer(bands, dim, patch)
            self.attn = SingleQueryCrossAttention(dim, heads, kernel=kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tok = self.tokenizer(x)  # (B, N, L, D)
        b, n, bands, d = tok.shape
        return self.attn(tok.reshape(b * n, bands, d)).view(b, n, d)  # (B, N, D)


class DenseDCHAG(nn.Module):
    """Single-process emulation of D-CHAG over P ranks: P rank-local partial aggregators (each with its own
    weights) on the P band chunks, their tokens stacked, then the final single-query cross-attention.

    Weights are drawn in the order tokenizer, partials[0..P-1], final; DCHAGAggregator on rank r takes the band
    slice r of the tokenizer, ``partials[r]`` and a head shard of ``final``.
    """

    def __init__(
        self,
        bands: int,
        dim: int,
        heads: int,
        patch: int,
        parts: int,
        *,
        variant: str = "L",
        groups: int = 1,
        seed: int = 0,
        kernel: str = "exact",
    ) -> None:
        super().__init__()
        self.band_parts = Split("bands", bands, parts, multiple=groups)  # the band partition: P chunks
        self.variant, self.groups = variant, groups
        with seeded(seed):
            self.tokenizer = BandTokenizer(bands, dim, patch)
            self.partials = nn.ModuleList(
                [
                    PartialAggregator(variant, self.band_parts.local, groups, dim, heads, kernel=kernel)
                    for _ in range(parts)
                ]
            )
            self.final = SingleQueryCrossAttention(dim, heads, kernel=kernel)

    def slot_valid(self, rank: int, device: torch.device | None = None) -> torch.Tensor | None:
        """(slots,) bool mask of rank ``rank``'s real band slots, None when none of them is padding."""
        parts = self.band_parts
        return parts.valid_mask(rank, device) if parts.count(rank) < parts.local else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tok = self.tokenizer(x)  # (B, N, L, D)
        b, n, bands, d = tok.shape
        tok = tok.reshape(b * n, bands, d)  # (B*N, L, D)
        parts = self.band_parts
        if self.partials[0].linear and not parts.is_padded:
            # D-CHAG-L, no padding: every rank's groups are consecutive slots of the tokens, so level 1 of all P
            # ranks is one slot_mix over (B*N, P g, s, D), a view: its tokens' gradient is the (B*N, L, D) one,
            # no per-rank split and concatenation
            g = self.groups
            t = tok.view(b * n, parts.parts * g, parts.local // g, d)  # (B*N, P g, s, D)
            rows = [p.level1_rows() for p in self.partials]
            h = slot_mix(t, torch.cat([w for w, _ in rows]), torch.cat([c for _, c in rows]))  # (B*N, P g, D)
            outs = [p.finish(h[:, r * g : (r + 1) * g]) for r, p in enumerate(self.partials)]
            return self.final(torch.stack(outs, dim=1)).view(b, n, d)  # (B, N, D)
        # one split into the P chunks (its backward is one concatenation; a slice per rank made a zero-filled
        # gradient of the whole tokens per rank, then summed them), each padded to the rank's slots
        chunks = tok.split([parts.count(r) for r in range(parts.parts)], dim=1)
        outs = [
            agg(pad_slots(chunk, parts.local), self.slot_valid(r, tok.device))  # (B*N, D)
            for r, (agg, chunk) in enumerate(zip(self.partials, chunks, strict=True))
        ]
        gathered = torch.stack(outs, dim=1)  # (B*N, P, D)
        return self.final(gathered).view(b, n, d)  # (B, N, D)


def pad_slots(chunk: torch.Tensor, slots: int) -> torch.Tensor:
    """(M, count, D) -> (M, slots, D): zero band slots appended (a rank's padding, as ``Split.shard`` pads)."""
    pad = slots - chunk.shape[1]
    if pad == 0:
        return chunk
    return torch.cat([chunk, chunk.new_zeros(chunk.shape[0], pad, chunk.shape[2])], dim=1)
