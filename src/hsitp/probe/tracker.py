"""Per-rank memory of one training step of a (parallel) SpectralSpatialTransformer, by part and kind, measured.

Used by the probe (``hsitp.probe``: every plan at every P, and fake-tensor estimates) and by training
(``hsitp.train``: one tracked step per summary epoch); the memory *model* is ``hsitp.cost.memory``.

Parts follow the model's structure: ``tokenisation`` (``aggregate.tokenizer``: per-band patch embedding),
``aggregation`` (the rest of ``aggregate``: cross-band aggregation, TP baseline or D-CHAG), ``blocks`` (position
embedding and the transformer blocks) and ``head`` (final LayerNorm and the per-token classifier).

Kinds: ``parameters``, ``gradients`` and ``optimizer`` state are the bytes of this rank's tensors after the step;
``activations`` are the bytes autograd keeps for backward, counted exactly by a saved-tensors hook (unique storages,
attributed to the part whose module was running when the tensor was saved; tensors saved while backward recomputes
a checkpointed block are transient, not counted) — tracemalloc cannot see tensor storage, see the README. The
``peak`` is measured separately: on CUDA ``max_memory_allocated`` after a peak reset (``reserved`` beside it); on
CPU (and under ``FakeTensorMode``) PyTorch's ``MemTracker`` (it follows every tensor allocation and free of the
step, so the peak includes transient buffers that are never saved for backward). ``transient`` is what the peak
holds beyond the step's parameters, optimizer state and saved activations (gradients in flight, collective
buffers, temporaries, the batch), filed under the part that was running when the peak was reached (forward and
backward part boundaries are watched; ``peak_part``). Storages are identified by their C++ object, so the same
code runs on fake tensors (paper-scale estimates without the memory).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

PARTS = ("tokenisation", "aggregation", "blocks", "head")
KINDS = ("parameters", "gradients", "optimizer", "activations", "transient")
PHASES = ("forward", "backward", "update")


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
    peak_allocated: int | None = None  # CUDA: max_memory_allocated; CPU / fake: MemTracker's peak total
    peak_reserved: int | None = None  # CUDA only: max_memory_reserved (what D-CHAG's paper reports)
    method: str = ""  # how the peak was measured
    peak_part: str = ""  # the part running when the peak was reached ("other": outside every part)
    peak_phase: str = ""  # forward, backward or update
    peak_categories: dict[str, int] = field(default_factory=dict)  # MemTracker's breakdown at the peak (CPU)
    transient: int | None = None  # peak - (parameters + optimizer + activations), wherever the peak fell

    def total(self, kind: str | None = None) -> int:
        return sum(v for p in PARTS for k, v in self.by_part[p].items() if kind in (None, k))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage, shared by its views; works on fake tensors (no data pointer there)."""
    return int(t.untyped_storage()._cdata)


def _in_backward() -> bool:
    """True while autograd's engine runs a node (e.g. a checkpointed block recomputing its forward)."""
    return torch._C._current_autograd_node() is not None


def _top_part_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(part, module) for the modules whose forward defines a part (the tokenizer before its aggregator)."""
    for name, mod in model.named_modules():
        short = name.removeprefix("model.")
        is_block = short.startswith("blocks.") and short.count(".") == 1  # the ModuleList itself never runs
        if is_block or short in ("aggregate.tokenizer", "aggregate", "pos", "norm", "head"):
            yield part_of(short), mod


class PartTimeline:
    """Which part of the model runs when: forward pre/post hooks of the part modules, and in backward a hook on
    each part module's output that fires when its gradient is complete (the module's backward starts then; it ends
    when the next gradient hook, of the module before it, fires). Parts never interleave in this model, so these
    boundaries split the step into intervals of one part and phase each.

    At every boundary the timeline reads ``clock()`` (seconds) and ``peak()`` (the running peak in bytes, or None),
    accumulating ``seconds[(part, phase)]`` and finding the interval where the step's peak was reached. Call
    ``mark(phase)`` for work outside the model (``"update"``: gradient reduction and the optimizer step).

    With ``saved`` (part -> bytes), it also counts the bytes autograd saves for backward, by the part running on
    top of the same stack of parts (a tensor saved by the tokenizer inside the aggregator counts as
    tokenisation). Each storage counts once (views share it). Views of parameters (a linear layer saves its
    weight transposed) are state, not activations; tensors saved while backward runs (a checkpointed block
    recomputing its forward) are transient: neither is counted.
    """

    active: PartTimeline | None = None  # the timeline of the step now running (one at a time per process)

    @classmethod
    def mark_active(cls, phase: str) -> None:
        """``mark(phase)`` on the running timeline, if any (steps call it without knowing who watches)."""
        if cls.active is not None:
            cls.active.mark(phase)

    def __init__(
        self,
        model: nn.Module,
        *,
        clock: Callable[[], float] | None = None,
        peak: Callable[[], int | None] | None = None,
        saved: dict[str, int] | None = None,
    ) -> None:
        import time

        self.model = model
        self.saved = saved
        self._seen: set[int] = set()  # storages already counted (or parameters')
        self._saving: Any = None  # the saved-tensors hooks while ``saved`` is counted
        self.clock = clock or time.perf_counter
        self.peak = peak or (lambda: None)
        self.seconds: dict[tuple[str, str], float] = {}
        self.peak_at: tuple[str, str] = ("other", "forward")
        self._stack: list[str] = []
        self._state: tuple[str, str] = ("other", "forward")
        self._t = 0.0
        self._peak: int | None = None
        self._handles: list[Any] = []

    def _switch(self, state: tuple[str, str]) -> None:
        now = self.clock()
        self.seconds[self._state] = self.seconds.get(self._state, 0.0) + (now - self._t)
        peak = self.peak()
        if peak is not None and (self._peak is None or peak > self._peak):
            self._peak = peak
            self.peak_at = self._state  # the peak rose during the interval that ends here
        self._state, self._t = state, self.clock()

    def mark(self, phase: str) -> None:
        """Start an interval outside the model's parts (``phase``: forward, backward or update)."""
        self._switch(("other", phase))

    def _enter(self, part: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            if _in_backward():  # a checkpointed block recomputing: still that block's backward
                return
            self._stack.append(part)
            self._switch((part, "forward"))

        return hook

    def _leave(self, part: str) -> Callable[..., None]:
        def hook(_mod: nn.Module, _args: Any, out: Any) -> None:  # returns None: the output is kept
            if _in_backward():
                return
            self._stack.pop()
            self._switch((self._stack[-1] if self._stack else "other", "forward"))
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(self._grad_arrived(part))

        return hook

    def _grad_arrived(self, part: str) -> Callable[[torch.Tensor], None]:
        def hook(_grad: torch.Tensor) -> None:
            self._switch((part, "backward"))

        return hook

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        """Count a tensor autograd saves into ``saved`` under the running part (once per storage)."""
        if self._stack and not _in_backward():
            key = _storage_key(t)
            if key not in self._seen:
                self._seen.add(key)
                part = self._stack[-1]
                self.saved[part] = self.saved.get(part, 0) + t.untyped_storage().nbytes()
        return t

    def __enter__(self) -> PartTimeline:
        for part, mod in _top_part_modules(self.model):
            self._handles.append(mod.register_forward_pre_hook(self._enter(part)))
            self._handles.append(mod.register_forward_hook(self._leave(part)))
        if self.saved is not None:
            self._seen = {_storage_key(p) for p in self.model.parameters()}
            self._saving = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
            self._saving.__enter__()
        self._peak = self.peak()
        self._t = self.clock()
        PartTimeline.active = self
        return self

    def __exit__(self, *_: Any) -> None:
        if self._saving is not None:
            self._saving.__exit__(None, None, None)
            self._saving = None
        self._switch(("other", "update"))
        PartTimeline.active = None
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def by_part(self) -> dict[str, dict[str, float]]:
        """Seconds per part (PARTS and "other") and phase."""
        out = {p: dict.fromkeys(PHASES, 0.0) for p in (*PARTS, "other")}
        for (part, phase), sec in self.seconds.items():
            out[part][phase] += sec
        return out


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


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def measure_step(
    model: nn.Module,
    step: Callable[[], Any],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    device: torch.device | None = None,
) -> StepMemory:
    """Run ``step()`` (forward, backward, optimizer step: one training iteration) once and measure it.

    Run it after a warm-up step so the optimizer state exists (AdamW creates it lazily at the first step). A
    :class:`PartTimeline` finds where the peak was reached; a step may call ``PartTimeline.mark_active("update")``
    before its gradient reduction (the optimizer's step is marked by a hook when ``optimizer`` is given). Works
    under FakeTensorMode (MemTracker follows fake allocations)."""
    first = next(model.parameters())
    device = device or first.device
    memory = StepMemory()
    acts: dict[str, int] = {}
    hook = (
        optimizer.register_step_pre_hook(lambda *_: PartTimeline.mark_active("update"))
        if optimizer is not None
        else None
    )
    try:
        _measure(model, step, optimizer, device, first, memory, acts)
    finally:
        if hook is not None:
            hook.remove()
    return memory


def _measure(model, step, optimizer, device, first, memory, acts) -> None:  # noqa: ANN001
    if device.type == "cuda" and not _is_fake(first):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        running = lambda: int(torch.cuda.max_memory_allocated(device))  # noqa: E731
        with PartTimeline(model, peak=running, saved=acts) as tl:
            step()
        torch.cuda.synchronize(device)
        memory.peak_allocated = int(torch.cuda.max_memory_allocated(device))
        memory.peak_reserved = int(torch.cuda.max_memory_reserved(device))
        memory.method = "torch.cuda.max_memory_allocated/max_memory_reserved after reset_peak_memory_stats"
    else:
        from torch.distributed._tools.mem_tracker import MemTracker

        tracker = MemTracker()
        tracker.track_external(model, *([optimizer] if optimizer is not None else []))
        with tracker:
            running = lambda: int(sum(tracker._peak_mem.values()))  # noqa: E731 (private: torch pinned)
            with PartTimeline(model, peak=running, saved=acts) as tl:
                step()
        peak = tracker.get_tracker_snapshot("peak")
        memory.peak_allocated = int(sum(v.get("Total", 0) for v in peak.values()))
        cats: Counter[str] = Counter()
        for snap in peak.values():
            cats.update({str(k): int(v) for k, v in snap.items() if k != "Total"})
        memory.peak_categories = dict(cats)
        fake = " under FakeTensorMode (estimated with fake tensors)" if _is_fake(first) else " (CPU)"
        memory.method = "torch.distributed._tools.mem_tracker.MemTracker peak" + fake
    for part, nbytes in acts.items():
        memory.by_part[part]["activations"] = nbytes
    _state_bytes(model, optimizer, memory)
    memory.peak_part, memory.peak_phase = tl.peak_at
    steady = memory.total("parameters") + memory.total("optimizer") + memory.total("activations")
    if memory.peak_allocated is not None:
        memory.transient = memory.peak_allocated - steady
        if memory.peak_part in PARTS:
            memory.by_part[memory.peak_part]["transient"] = memory.transient
