"""Whole-model parity checks run inside every rank of a spawned gloo world (see dist_utils.run_world).

For each plan, the dense SpectralSpatialTransformer of the plan's architecture and this rank's parallel model are
built from the same seed (master weights sliced by ``parallelize``), then trained side by side for two AdamW
steps on the same inputs and loss. At every step this rank compares: the output, the input gradient and every
parameter gradient (dense tensors mapped to this rank's parameters by ``ParallelModel.local_state``); after the
last step, every weight. Each rank reports which dense parameters it covered, so the parent can check that the
ranks together compared all of them. Any mismatch raises AssertionError naming the case, step and tensor.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.testing import assert_close

from hsitp.models import ModelConfig, SpectralSpatialTransformer, architecture_for, parallelize
from hsitp.parallel.groups import TPGroup
from hsitp.parallel.runtime import Runtime

# Tiny sizes: L = 10 bands (uneven over P = 4 with g = 2: 3, 3, 2, 2 bands in 4 slots), D = 32, 4 heads (1 per
# rank at P = 4), depth 2, a 6 x 10 crop with patch 2: a 3 x 5 grid, N = 15 (uneven over P = 2 and 4; the grid
# is not square, so a swapped h / w in (un)patchify shows), 3 classes.
BASE = ModelConfig(bands=10, height=6, width=10, classes=3, patch=2, dim=32, heads=4, depth=2)
BATCH = 2
STEPS = 2

# (case name, plan, architecture overrides for ModelConfig, D-CHAG g)
CASES: list[tuple[str, str, dict[str, object], int]] = [
    ("tp", "tp", {}, 1),
    ("dchag_l[g=1]", "dchag_l", {}, 1),
    ("dchag_l[g=2]", "dchag_l", {}, 2),
    ("dchag_c[g=1]", "dchag_c", {}, 1),
    ("dchag_c[g=2]", "dchag_c", {}, 2),
    ("token[attention]", "token", {}, 1),
    # token split of the D-CHAG architecture (its band chunks need not match P: the token plan keeps them whole)
    (
        "token[hierarchical-C,parts=2,g=2]",
        "token",
        {"aggregation": "hierarchical", "partial": "cross-attention", "parts": 2, "groups": 2},
        1,
    ),
]

# Tolerances by dtype. The parallel model computes the same maths with another summation order (partial sums
# over P ranks then all-reduce, a gathered softmax, a strip-shaped convolution), so it differs from dense by
# rounding only, accumulated through depth 2 and two optimizer steps:
# - float64: rounding ~1e-16 relative; 1e-9 / 1e-10 leaves a wide margin (worst measured at P = 4: 1e-14, a
#   bias gradient), while any logic error (a missing or doubled all-reduce, a wrong slice, padding leaking) is
#   many orders larger.
# - float32: eps ~1.2e-7; gradients are sums of up to B N p^2 = 120 products over 2 blocks. rtol 1e-4 / atol 5e-5:
#   the worst measured error (P = 4, a bias gradient summed over B N locations) is 0.2 of it.
TOL = {
    torch.float64: {"rtol": 1e-9, "atol": 1e-10},
    torch.float32: {"rtol": 1e-4, "atol": 5e-5},
}
# AdamW. Its first step moves every weight by about lr * g / (|g| + eps): a gradient that is zero in exact
# arithmetic (the key biases: softmax ignores a shift common to all keys) comes out as rounding noise that
# differs between the two models, and with a small eps would move by up to +-lr. eps must dwarf that noise:
# up to ~1e-14 in float64 (eps 1e-6 keeps the difference near lr * 1e-8 = 1e-11; with the default 1e-8 the
# measured difference was 4e-11, too close to atol), up to ~1e-6 in float32 (eps 1e-3: below lr * 1e-3 = 1e-6),
# while real gradients (1e-3 .. 1) are still normalised. Weight decay is on, so decoupled decay is compared too.
ADAMW = {
    torch.float64: {"lr": 1e-3, "eps": 1e-6, "weight_decay": 0.1},
    torch.float32: {"lr": 1e-3, "eps": 1e-3, "weight_decay": 0.1},
}


def _rand(seed: int, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def _same(actual: torch.Tensor, expected: torch.Tensor, tol: dict[str, float], what: str) -> None:
    assert_close(actual, expected, **tol, msg=lambda m: f"{what} differs\n{m}")


def check_model(
    name: str, config: ModelConfig, plan: str, tp: TPGroup, dtype: torch.dtype
) -> tuple[set[str], list[str]]:
    """Train the dense model and this rank's parallel model side by side; returns the dense parameter names this
    rank compared and all of them."""
    tol = TOL[dtype]
    dense = SpectralSpatialTransformer(config, seed=11).to(dtype)
    par = parallelize(dense, plan, tp)
    opt_d = torch.optim.AdamW(dense.parameters(), **ADAMW[dtype])
    opt_p = torch.optim.AdamW(par.parameters(), **ADAMW[dtype])
    shape = (BATCH, config.bands, config.height, config.width)
    # Loss: sum of logits times fixed random weights (same on every rank): every output element gets a distinct
    # gradient, so a misplaced pixel or class changes the gradients.
    weight = _rand(99, BATCH, config.classes, config.height, config.width, dtype=dtype)
    covered: set[str] = set()
    for step in range(STEPS):
        where = f"{name} ({dtype}, step {step})"
        x = _rand(100 + step, *shape, dtype=dtype)
        opt_d.zero_grad()
        opt_p.zero_grad()

        xd = x.clone().requires_grad_()
        yd = dense(xd)
        (yd * weight).sum().backward()

        xs = par.shard_input(x).detach().clone().requires_grad_()
        ys = par(xs)
        (ys * par.shard_output(weight)).sum().backward()
        par.reduce_grads()

        _same(par.gather_output(ys.detach()), yd.detach(), tol, f"{where}: output")
        _same(xs.grad, par.shard_input(xd.grad), tol, f"{where}: input gradient")
        expected = par.local_state({n: p.grad for n, p in dense.named_parameters()})
        for pname, p in par.named_parameters():
            assert p.grad is not None, f"{where}: parameter {pname} received no gradient"
            _same(p.grad, expected[pname], tol, f"{where}: grad of {pname}")
            covered.add(par.dense_name(pname))
        opt_d.step()
        opt_p.step()

    where = f"{name} ({dtype}, after {STEPS} AdamW steps)"
    expected = par.local_state({n: p.detach() for n, p in dense.named_parameters()})
    for pname, p in par.named_parameters():
        _same(p.detach(), expected[pname], tol, f"{where}: weight {pname}")
    return covered, [n for n, _ in dense.named_parameters()]


def model_parity_suite(
    rt: Runtime, dtype_names: tuple[str, ...] = ("float64", "float32")
) -> dict[str, dict[str, list[str]]]:
    """Every case in each dtype on this rank (``rt``: this rank's runtime, see dist_utils.run_world):
    {"dtype:case": {"covered": [...], "all": [...]}}."""
    tp = rt.world
    out: dict[str, dict[str, list[str]]] = {}
    for dtype_name in dtype_names:
        dtype = getattr(torch, dtype_name)
        for name, plan, overrides, g in CASES:
            config = architecture_for(dataclasses.replace(BASE, **overrides), plan, tp.size, g)
            covered, names = check_model(name, config, plan, tp, dtype)
            out[f"{dtype_name}:{name}"] = {"covered": sorted(covered), "all": names}
    return out
