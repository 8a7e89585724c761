"""Per-rank memory of one training step of a (parallel) SpectralSpatialTransformer, by part and kind.

Parts follow the model's structure: ``tokenisation`` (``aggregate.tokenizer``: per-band patch embedding),
``aggregation`` (the rest of ``aggregate``: cross-band aggregation, TP baseline or D-CHAG), ``blocks`` (position
embedding and the transformer blocks) and ``head`` (final LayerNorm and the per-token classifier).

Kinds: ``parameters``, ``gradients`` and ``optimizer`` state are the bytes of this rank's tensors after the step;
``activations`` are the bytes autograd keeps for backward, counted exactly by a saved-tensors hook (unique storages,
attributed to the part whose module was running when the tensor was saved) — tracemalloc cannot see tensor
storage, see the README. The ``peak`` is measured separately: on CUDA ``max_memory_allocated`` after a peak reset
(``reserved`` beside it); on CPU PyTorch's ``MemTracker`` (it follows every tensor allocation and free of the
step, so the peak includes transient buffers that are never saved for backward). Works on real tensors; under
``FakeTensorMode`` use the estimate path of ``hsitp probe`` (no storage pointers to deduplicate).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

PARTS = ("tokenisation", "aggregation", "blocks", "head")
KINDS = ("parameters", "gradients", "optimizer", "activations")


def part_of(name: str) -> str:
    """The part of a parameter or module named relative to the transformer (``model.`` prefixes stripped)."""
    name = name.removeprefix("model.")
    if name.startswith("aggregate.tokenizer"):
        return "tokenisation"
    if name.startswith("aggregate"):
        return "aggregation"
    if name.startswith(("pos", "blocks")):
        return "blocks"
    if name.startswith(("norm", "head")):
        return "head"
    raise ValueError(f"{name!r} belongs to no part of the spectral-spatial transformer ({', '.join(PARTS)})")


@dataclass
class StepMemory:
    """Bytes by (part, kind) on this rank, and the step's peak (None where the device gives no measurement)."""

    by_part: dict[str, dict[str, int]] = field(
        default_factory=lambda: {p: dict.fromkeys(KINDS, 0) for p in PARTS}
    )
    peak_allocated: int | None = None  # CUDA: max_memory_allocated; CPU: MemTracker's peak total
    peak_reserved: int | None = None  # CUDA only: max_memory_reserved (what D-CHAG's paper reports)
    method: str = ""  # how the peak was measured

    def total(self, kind: str | None = None) -> int:
        return sum(v for p in PARTS for k, v in self.by_part[p].items() if kind in (None, k))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _top_part_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(part, module) for the modules whose forward defines a part (the tokenizer before its aggregator)."""
    for name, mod in model.named_modules():
        short = name.removeprefix("model.")
        is_block = short.startswith("blocks.") and short.count(".") == 1  # the ModuleList itself never runs
        if is_block or short in ("aggregate.tokenizer", "aggregate", "pos", "norm", "head"):
            yield part_of(short), mod


@contextlib.contextmanager
def saved_activations(model: nn.Module, into: dict[str, int]) -> Iterator[None]:
    """Count the bytes autograd saves for backward inside the block, by part, into ``into`` (part -> bytes).

    Forward pre/post hooks keep a stack of the running parts, so a tensor saved by the tokenizer inside the
    aggregator counts as tokenisation. Each storage counts once (views share it)."""
    stack: list[str] = []
    seen: set[int] = set()
    handles = []

    def enter(part: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            stack.append(part)

        return hook

    def leave(*_: Any) -> None:  # returns None: a forward hook's return value would replace the output
        stack.pop()

    for part, mod in _top_part_modules(model):
        handles.append(mod.register_forward_pre_hook(enter(part)))
        handles.append(mod.register_forward_hook(leave))

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if stack and key not in seen and not isinstance(t, nn.Parameter):
            seen.add(key)
            into[stack[-1]] = into.get(stack[-1], 0) + storage.nbytes()
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield
    finally:
        for h in handles:
            h.remove()


def _state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer | None, memory: StepMemory) -> None:
    seen: set[int] = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        part = memory.by_part[part_of(name)]
        part["parameters"] += _nbytes(p)
        if p.grad is not None:
            part["gradients"] += _nbytes(p.grad)
        if optimizer is not None and p in optimizer.state:
            part["optimizer"] += sum(_nbytes(v) for v in optimizer.state[p].values() if torch.is_tensor(v))


def measure_step(
    model: nn.Module,
    step: Callable[[], Any],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    device: torch.device | None = None,
) -> StepMemory:
    """Run ``step()`` (forward, backward, optimizer step: one training iteration) once and measure it.

    Run it after a warm-up step so the optimizer state exists (AdamW creates it lazily at the first step)."""
    device = device or next(model.parameters()).device
    memory = StepMemory()
    acts: dict[str, int] = {}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        with saved_activations(model, acts):
            step()
        torch.cuda.synchronize(device)
        memory.peak_allocated = int(torch.cuda.max_memory_allocated(device))
        memory.peak_reserved = int(torch.cuda.max_memory_reserved(device))
        memory.method = "torch.cuda.max_memory_allocated/max_memory_reserved after reset_peak_memory_stats"
    else:
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
        tracker.track_external(model, *([optimizer] if optimizer is not None else []))
        with tracker, saved_activations(model, acts):
            step()
        peak = tracker.get_tracker_snapshot("peak")
        memory.peak_allocated = int(sum(v.get("Total", 0) for v in peak.values()))
        memory.method = "torch.distributed._tools.mem_tracker.MemTracker peak (CPU)"
    for part, nbytes in acts.items():
        memory.by_part[part]["activations"] = nbytes
    _state_bytes(model, optimizer, memory)
    return memory
