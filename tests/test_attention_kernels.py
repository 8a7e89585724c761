"""The single-query cross-attention's exact kernel against the SDPA path (issue 49): the same forward output and
the same gradient of every parameter and input, for the TP baseline's aggregation and every D-CHAG aggregator that
uses a single query (D-CHAG-C's partial and level-2 attentions, the final attention of both variants), at B = 1 and
3, with and without band padding; and a planted error (a swapped head axis) that the comparison must catch.

Tolerances, relative to each tensor's norm (||exact - sdpa|| / ||sdpa||): the two kernels sum the same products in
another order (the exact one folds W_k^T q before the tokens, and the softmax-weighted mean before W_v), so they
differ by rounding only: float64 eps 1.1e-16 over sums of at most a few hundred terms stays under 1e-13 (1e-10 is
the issue's bound); float32 eps 6e-8, measured up to 3e-6 on these shapes (1e-5 is the issue's bound).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import hsitp.parallel.attention_kernels as kernels
from hsitp.models import ModelConfig, SpectralSpatialTransformer
from hsitp.models.config import ModelConfigError, resolve_attention_kernel
from hsitp.parallel.dense import DenseDCHAG, DenseTPAggregator, SingleQueryCrossAttention

BOUND = {torch.float64: 1e-10, torch.float32: 1e-5}  # the relative bounds (see the module docstring)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm()) if b.norm() > 0 else float(a.norm())


def _run(module: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Output, input gradient and every parameter's gradient of one backward of a fixed random projection."""
    xx = x.clone().requires_grad_()
    y = module(xx)
    weight = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=y.dtype)
    (y * weight).sum().backward()
    out = {"output": y.detach(), "input.grad": xx.grad}
    out.update({f"{n}.grad": p.grad for n, p in module.named_parameters() if p.grad is not None})
    return out


def _worst(make: Callable[[str], torch.nn.Module], x: torch.Tensor) -> tuple[float, str]:
    """The largest relative difference between the exact and the sdpa kernel's results, and where."""
    sdpa, exact = _run(make("sdpa"), x), _run(make("exact"), x)
    assert sdpa.keys() == exact.keys()
    # the k half of the kv bias has a zero gradient in exact arithmetic (softmax is shift-invariant): both
    # kernels return rounding noise there, so it is compared within the whole bias's norm, not its own
    return max((_rel(exact[k], sdpa[k]), k) for k in sdpa)


AGGREGATORS = {
    # TP baseline: one single-query attention over all L bands (L = 9)
    "tp": lambda k: DenseTPAggregator(9, 16, 4, 2, seed=3, kernel=k),
    # D-CHAG-C: partials over 9 bands in P = 4 chunks of g = 2 groups (12 slots: padded, one group all padding
    # at the last rank, masked at level 2), level-2 attentions, the final attention over P tokens
    "dchag_c_padded": lambda k: DenseDCHAG(9, 16, 4, 2, 4, variant="C", groups=2, seed=3, kernel=k),
    "dchag_c": lambda k: DenseDCHAG(8, 16, 4, 2, 2, variant="C", groups=1, seed=3, kernel=k),
    # D-CHAG-L: linear partials, the single-query final attention over P = 2 / 4 tokens
    "dchag_l": lambda k: DenseDCHAG(8, 16, 4, 2, 2, variant="L", groups=2, seed=3, kernel=k),
    "dchag_l_padded": lambda k: DenseDCHAG(9, 16, 4, 2, 4, variant="L", groups=2, seed=3, kernel=k),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_exact_kernel_equals_sdpa(name: str, batch: int, dtype: torch.dtype) -> None:
    """Catches an exact kernel whose output or any gradient (tokens', q's, the kv weight's and bias's, the
    query's, upstream the tokenizer's and the input's) is not SDPA's: a wrong softmax backward, a missing bias
    term, a gradient through only one of the two paths (y and the scores), a mask applied to the wrong rows."""
    torch.manual_seed(0)
    make = lambda k: AGGREGATORS[name](k).to(dtype)  # noqa: E731
    x = torch.randn(batch, make("sdpa").tokenizer.bands, 4, 6, dtype=dtype)  # (B, L, H, W)
    worst, where = _worst(make, x)
    assert worst <= BOUND[dtype], f"{name}: {where} differs by {worst:.2e} relative"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_masked_rows_equal_sdpa(dtype: torch.dtype) -> None:
    """Catches a key mask folded onto the wrong rows: per-group masks (g, s) over (M', g) rows, as D-CHAG-C's
    level 1 passes them, each row keeping at least one real key. (A row whose keys are all padding is discarded
    downstream in the model; there SDPA's backward recomputes the weights from a log-sum-exp the mask has
    absorbed, and the two kernels' gradients of such a row's inputs differ; no model path back-propagates one.)"""
    torch.manual_seed(1)
    valid = torch.rand(5, 7) < 0.6  # (g, s)
    valid[:, 0] = True
    x = torch.randn(3, 5, 7, 16, dtype=dtype)  # (M', g, s, D)

    def make(kernel: str) -> torch.nn.Module:
        with torch.random.fork_rng():
            torch.manual_seed(2)
            attn = SingleQueryCrossAttention(16, 4, kernel=kernel).to(dtype)
        return _Masked(attn, valid)

    worst, where = _worst(make, x)
    assert worst <= BOUND[dtype], f"{where} differs by {worst:.2e} relative"


class _Masked(torch.nn.Module):
    def __init__(self, attn: torch.nn.Module, valid: torch.Tensor) -> None:
        super().__init__()
        self.attn, self.valid = attn, valid

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, self.valid)


def test_a_swapped_head_axis_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a parity check too weak to see a wrong head layout: the exact kernel reading the kv weight with
    its head and head-dim axes swapped (rows (hd, h) instead of (h, hd)) must fail the comparison by far."""
    torch.manual_seed(0)
    make = lambda k: AGGREGATORS["tp"](k).to(torch.float64)  # noqa: E731
    x = torch.randn(1, 9, 4, 6, dtype=torch.float64)
    assert _worst(make, x)[0] <= BOUND[torch.float64]
    monkeypatch.setattr(
        kernels,
        "_by_head",
        lambda w, h, hd: w.view(2, hd, h, w.shape[-1]).transpose(1, 2),  # (2, h, hd, D), axes swapped
    )
    worst, where = _worst(make, x)
    assert worst > 1e-3, f"a swapped head axis passed: {where} within {worst:.2e}"


def test_the_model_builds_each_kernel_and_auto_follows_the_device() -> None:
    """Catches the kernel choice not reaching the model's attentions (every single-query attention of the TP
    baseline and of D-CHAG-C must run the configured kernel), an unknown kernel accepted, or "auto" choosing SDPA
    on the CPU or the exact kernel on CUDA before a GPU has timed both (issue 49's rule)."""
    base = ModelConfig(bands=8, height=4, width=4, classes=3, patch=2, dim=16, heads=4, depth=1)
    for kernel in ("exact", "sdpa"):
        for cfg in (
            base,
            ModelConfig(
                **{**base.__dict__, "aggregation": "hierarchical", "partial": "cross-attention", "parts": 2}
            ),
        ):
            model = SpectralSpatialTransformer(ModelConfig(**{**cfg.__dict__, "attention_kernel": kernel}))
            found = {m.kernel for m in model.modules() if isinstance(m, SingleQueryCrossAttention)}
            assert found == {kernel}
    with pytest.raises(ModelConfigError, match="attention_kernel"):
        ModelConfig(**{**base.__dict__, "attention_kernel": "flash"})
    assert resolve_attention_kernel("auto", "cpu") == "exact"
    assert resolve_attention_kernel("auto", "cuda") == "sdpa"
    assert resolve_attention_kernel("sdpa", "cpu") == "sdpa"
    with pytest.raises(ModelConfigError):
        resolve_attention_kernel("fast", "cpu")


def test_config_kernel_choices_are_the_registry_kernels() -> None:
    """Catches model.attention_kernel's choices (hsitp.sections.model) and the kernels the layers run
    (hsitp.names.ATTENTION_KERNELS) drifting apart, or a config without a model section not resolving to auto."""
    import typing

    from hsitp.config import validate_config
    from hsitp.models.config import config_attention_kernel
    from hsitp.names import ATTENTION_KERNELS
    from hsitp.sections.model import ModelSection

    kinds = typing.get_args(ModelSection.model_fields["attention_kernel"].annotation)
    assert kinds == ("auto", *ATTENTION_KERNELS)
    assert config_attention_kernel(validate_config({}), "cpu") == resolve_attention_kernel("auto", "cpu")
    assert config_attention_kernel(validate_config({"model": {"attention_kernel": "sdpa"}}), "cpu") == "sdpa"
