"""Single-process checks of the parallel package: split arithmetic, errors raised before any collective,
padding semantics of the D-CHAG partial aggregator, build_op, and the config section. No processes spawned."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hsitp.config import ConfigError, load_config
from hsitp.parallel.dense import DenseMLP, PartialAggregator
from hsitp.parallel.errors import ShardingError
from hsitp.parallel.groups import Mesh2D, TPGroup, make_mesh_2d
from hsitp.parallel.ops import OP_NAMES, build_op, token_grid
from hsitp.parallel.padding import Split, split_heads
from hsitp.parallel.tensor_parallel import ParallelMLP
from hsitp.parallel.token_parallel import TokenParallelAttention
from hsitp.shape import LayerShape


def test_split_pavia_bands_over_eight() -> None:
    """Catches wrong padding arithmetic: Pavia U's L = 103 bands at P = 8 must pad to 104 (0.96 %), with every
    rank holding 12 or 13 real bands and the real bands recoverable in order."""
    s = Split("bands", 103, 8)
    assert (s.local, s.padded) == (13, 104)
    assert s.pad_fraction == pytest.approx(1 / 104)
    assert [s.count(r) for r in range(8)] == [13] * 7 + [12]
    assert sum(s.count(r) for r in range(8)) == 103 and s.start(7) == 91
    full = torch.arange(103.0)[None, :]
    padded = torch.cat([s.shard(full, r, dim=1) for r in range(8)], dim=1)  # (1, 104): every rank's slots
    assert padded.shape == (1, 104) and torch.equal(s.unpad(padded, dim=1), full)
    assert int(s.padded_valid_mask().sum()) == 103


def test_split_balanced_never_leaves_a_rank_empty() -> None:
    """Catches a tail-padding layout in which the last rank gets only padding (size 9 at P = 4 with a multiple
    of 2 per rank): every rank must own at least one real entry."""
    s = Split("bands", 9, 4, multiple=2)
    assert s.local == 4 and all(s.count(r) >= 1 for r in range(4))


def test_p_larger_than_dimension_is_a_clear_error() -> None:
    """Catches a split that silently produces empty shards (and then hangs or crashes inside a collective)
    when P exceeds the dimension: the error must name the dimension and say what to do."""
    with pytest.raises(ShardingError, match="P is larger than the dimension"):
        Split("tokens", 3, 4)
    g = TPGroup(None, 4, 0, comm="noop")
    with pytest.raises(ShardingError, match="tokens = 3 over P = 4"):
        TokenParallelAttention(16, 4, g, n_tokens=3)


def test_heads_not_divisible_error_and_padding() -> None:
    """Catches heads split across ranks (a rank holding part of a head) instead of an error, and head padding
    that miscounts the zero heads."""
    with pytest.raises(ShardingError, match="head_padding"):
        split_heads(6, 4, head_padding=False)
    s = split_heads(6, 4, head_padding=True)
    assert (s.local, s.padded, s.pad_fraction) == (2, 8, 0.25)


def test_mesh_shape_must_match_world() -> None:
    """Catches a 2-D mesh whose P_c x P_t differs from the world size (ranks outside every group)."""
    with pytest.raises(ShardingError, match="does not match the world size"):
        make_mesh_2d(TPGroup(None, 4, 0, comm="noop"), 3, 2)


@pytest.mark.parametrize("variant", ["L", "C"])
def test_partial_aggregator_ignores_padding(variant: str) -> None:
    """Catches padded band slots or fully padded groups leaking into D-CHAG's partial aggregation (the parity
    test cannot: the dense emulation shares this module). Garbage in padded slots must not change the result,
    and a fully padded group must not count at level 2."""
    torch.manual_seed(0)
    agg = PartialAggregator(variant, slots=6, groups=3, dim=8, heads=2).double()
    valid = torch.tensor([True, True, True, False, False, False])  # group 0 real, 1 half, 2 empty
    tokens = torch.randn(5, 6, 8, dtype=torch.float64)
    clean = tokens * valid[None, :, None]
    out = agg(clean, valid)
    garbage = clean + 100.0 * torch.randn_like(clean) * (~valid)[None, :, None]
    torch.testing.assert_close(agg(garbage, valid), out)
    # Reference computed without masks: only the real slots of groups 0 and 1 exist, group 2 does not.
    t = clean.view(5, 3, 2, 8)
    if variant == "L":
        w1, b1 = agg.level1.weight[0], agg.level1.bias  # (2,), (1,)
        h0 = (t[:, 0] * w1[:, None]).sum(1) + b1  # (5, 8)
        h1 = t[:, 1, 0] * w1[0] + b1  # only slot 0 of group 1 is real
        w2, b2 = agg.level2.weight[0], agg.level2.bias
        ref = w2[0] * h0 + w2[1] * h1 + b2
    else:
        h0 = agg.level1(t[:, 0])  # (5, 8)
        h1 = agg.level1(t[:, 1, :1])
        ref = agg.level2(torch.stack([h0, h1], dim=1))
    torch.testing.assert_close(out, ref)


def test_build_op_every_op_noop_world() -> None:
    """Catches an op name from hsitp.names that build_op does not build, or shapes that do not line up for
    P = 4 ranks (run without communication: comm='noop', one process)."""
    trace: list = []
    g = TPGroup(None, 4, 1, comm="noop", trace=trace)
    for op in OP_NAMES:
        tp = (
            Mesh2D(dataclasses.replace(g, size=2, rank=1), dataclasses.replace(g, size=2, rank=0))
            if op == "attn_2d"
            else g
        )
        shape = LayerShape(N=13, D=16, L=10, heads=4, groups=2, patch=2, dtype="float32")
        module, make_input = build_op(op, tp=tp, shape=shape)
        y = module(*make_input())
        y.float().sum().backward()
        assert y.dtype == torch.float32, op
        want = 4 if op == "layernorm_sharded" else 16  # sharded LayerNorm returns its D / P slice
        assert y.shape[-1] == want and torch.isfinite(y).all(), op
    assert {c.name for c in trace} == {"all_reduce", "all_gather", "reduce_scatter"}


def test_p1_layers_equal_dense_for_same_seed() -> None:
    """Catches seeded construction drawing different weights from the dense reference (sharded != dense)."""
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ParallelMLP(8, 32, TPGroup.single(), seed=7)(x), DenseMLP(8, 32, seed=7)(x))


def test_token_grid() -> None:
    """Catches a token grid whose product is not N (aggregator inputs of the wrong size)."""
    assert token_grid(324) == (18, 18) and token_grid(3192) == (56, 57) and token_grid(13) == (1, 13)


def test_parallel_config_section() -> None:
    """Catches the parallel section missing from the schema or config files, or a bad value accepted."""
    cfg = (
        load_config(["config/config.yaml"])
        if __import__("os").path.exists("config/config.yaml")
        else load_config()
    )
    s = cfg.parallel
    assert s.heads >= 1 and isinstance(s.head_padding, bool)
    # LayerNorm placement is not a setting: both placements are ops (layernorm_replicated, layernorm_sharded).
    with pytest.raises(Exception, match="layernorm"):
        load_config(overrides={"parallel": {"layernorm": "sharded"}})
    with pytest.raises(ConfigError, match="parallel.heads"):
        load_config(overrides={"parallel": {"heads": 0}})


def test_group_noop_and_traced_twins() -> None:
    """Catches a no-op twin that still communicates or loses rank/size, and a traced twin that communicates,
    records into the original group, or files the records under no group."""
    real = object()  # stands in for a ProcessGroup: nothing here may call a collective on it
    g = TPGroup(real, 4, 1)
    twin = g.noop()
    assert (twin.comm, twin.group, twin.size, twin.rank, twin.trace) == ("noop", real, 4, 1, None)
    assert g.comm == "real"
    traced, axes = g.traced()
    assert traced.comm == "noop" and len(axes) == 1 and axes[0].group is g and axes[0].records is traced.trace
    module, make_input = build_op("mlp", tp=traced, shape=LayerShape(N=5, D=16, heads=4))
    module(*make_input()).sum().backward()
    assert [(r.name, r.phase, r.group_size) for r in axes[0].records] == [
        ("all_reduce", "forward", 4),
        ("all_reduce", "backward", 4),
    ]
    assert g.trace is None


def test_mesh_noop_and_traced_keep_axes_apart() -> None:
    """Catches a mesh twin that leaves one axis communicating, or token records filed under the channel axis
    (replaying them on the wrong group would time the wrong collective)."""
    mesh = Mesh2D(channel=TPGroup(object(), 2, 1), token=TPGroup(object(), 3, 2))  # P = 6, rank 5
    twin = mesh.noop()
    assert twin.channel.comm == twin.token.comm == "noop" and mesh.channel.comm == mesh.token.comm == "real"
    assert (twin.channel.size, twin.token.size, twin.channel.rank, twin.token.rank) == (2, 3, 1, 2)
    traced, axes = mesh.traced()
    (ch_group, ch), (tok_group, tok) = axes
    assert ch_group is mesh.channel and tok_group is mesh.token
    assert traced.channel.trace is ch and traced.token.trace is tok and ch is not tok
    assert traced.channel.comm == traced.token.comm == "noop"
    module, make_input = build_op("attn_2d", tp=traced, shape=LayerShape(N=13, D=16, heads=4))
    module(*make_input()).sum().backward()
    assert {r.name for r in tok} >= {"all_gather", "reduce_scatter"} and {r.group_size for r in tok} == {3}
    assert {r.name for r in ch} == {"all_reduce"} and {r.group_size for r in ch} == {2}


@pytest.mark.parametrize(
    ("dtype", "tol"),
    [
        # float64: both sides sum the same p p products per output, in a different order: rounding only
        (torch.float64, 1e-12),
        # float32: the weight's gradient sums B N products per element (here 3 x 12): a few ulps of its size
        (torch.float32, 1e-5),
    ],
)
@pytest.mark.parametrize("batch", [1, 3])
def test_band_patch_embed_equals_the_grouped_convolution(dtype: torch.dtype, tol: float, batch: int) -> None:
    """Catches a location-major tokenizer that is not the grouped convolution plus band embedding it replaces
    (the bugs: a patch's pixels read in the wrong order, bands or locations swapped in the output, the band
    embedding added per location instead of per band, a weight gradient summed over the wrong axis, an input
    gradient scattered back to the wrong pixels): forward, input, weight, bias and band-embedding gradients against
    ``F.conv2d(groups=L)`` permuted to (B, N, L, D), with a random output gradient."""
    import torch.nn.functional as F  # noqa: N812

    from hsitp.parallel.dense import BandTokenizer

    torch.manual_seed(0)
    bands, dim, patch = 5, 6, 2
    tok = BandTokenizer(bands, dim, patch).to(dtype)
    x = torch.randn(batch, bands, 6, 8, dtype=dtype, requires_grad=True)
    out = tok(x)  # (B, N, L, D)
    grad = torch.randn_like(out)
    got = [out, *torch.autograd.grad(out, [x, tok.proj.weight, tok.proj.bias, tok.band_embed], grad)]

    ref_out = F.conv2d(x, tok.proj.weight, tok.proj.bias, stride=patch, groups=bands)  # (B, L D, h, w)
    ref_out = ref_out.view(batch, bands, dim, -1).permute(0, 3, 1, 2) + tok.band_embed  # (B, N, L, D)
    ref = [ref_out, *torch.autograd.grad(ref_out, [x, tok.proj.weight, tok.proj.bias, tok.band_embed], grad)]
    assert out.is_contiguous()  # location-major: the aggregator folds it to (B N, L, D) without a copy
    for name, a, b in zip(("output", "input", "weight", "bias", "band_embed"), got, ref, strict=True):
        assert a.shape == b.shape, name
        torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=name)
