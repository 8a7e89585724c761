"""The per-part memory tracker on a real model step (CPU): exact byte counts, every part present."""

from __future__ import annotations

import torch

from hsitp.models import ModelConfig, SpectralSpatialTransformer
from hsitp.probe.tracker import KINDS, PARTS, measure_step, part_of

CFG = ModelConfig(bands=6, height=8, width=8, classes=3, patch=2, dim=16, heads=2, depth=2)


def _step(model, opt, x):
    def step():
        opt.zero_grad(set_to_none=False)
        model(x).square().mean().backward()
        opt.step()

    return step


def test_parts_and_kinds_add_up_exactly():
    """Catches a tracker that misses a part (a hook on a module that never runs, like the blocks' ModuleList),
    counts parameters as activations, or double-counts views: parameters, gradients and AdamW state are exact
    byte counts, and the saved activations equal what one hook over the whole step sees, less views of the
    parameters (state, already counted as parameters)."""
    torch.manual_seed(0)
    model = SpectralSpatialTransformer(CFG, seed=0)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(2, CFG.bands, CFG.height, CFG.width)
    step = _step(model, opt, x)
    step()  # AdamW creates its state lazily
    mem = measure_step(model, step, optimizer=opt)
    n_param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert mem.total("parameters") == mem.total("gradients") == n_param_bytes
    assert mem.total("optimizer") == 2 * n_param_bytes + 4 * len(
        list(model.parameters())
    )  # exp_avg(_sq), step
    for part in PARTS:
        assert mem.by_part[part]["parameters"] > 0, part
        assert set(mem.by_part[part]) == set(KINDS)
    for part in ("tokenisation", "aggregation", "blocks", "head"):
        assert mem.by_part[part]["activations"] > 0, part
    storages: dict[int, int] = {}
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in weights:  # a linear layer saves its weight transposed: a view of the parameter
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = model(x)
    y.square().mean().backward()  # the loss lies outside every part: not counted by either
    assert mem.total("activations") == sum(storages.values())  # every storage the model saved, once
    assert mem.peak_allocated and mem.peak_allocated >= mem.total("parameters") + mem.total("optimizer")
    assert "MemTracker" in mem.method


def test_part_names():
    """Catches a parameter of a plan's wrapped model (``model.`` prefix) filed under the wrong part."""
    assert part_of("model.aggregate.tokenizer.weight") == "tokenisation"
    assert part_of("aggregate.query") == "aggregation"
    assert part_of("model.blocks.3.mlp.fc1.weight") == part_of("pos.weight") == "blocks"
    assert part_of("head.bias") == part_of("norm.weight") == "head"
