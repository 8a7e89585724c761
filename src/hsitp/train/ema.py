"""An exponential moving average of a model's weights (``train.ema.decay``), used for evaluation only.

Every rank averages its own parameters: under a parallel plan a rank's parameters are slices of the dense model's
and every rank applies the same update, so the average of the slices is the slice of the average. The shadow is
updated after the optimizer step, outside the timed (and memory-tracked) step, and swapped into the model for an
evaluation and back out after it (copies, bit-exact), so the training trajectory is that of the raw weights. It is
part of the checkpoint: a resumed run evaluates the same average as an uninterrupted one. Its cost: one more copy
of the weights, live during the memory-tracked step (on CUDA the record's peak includes it), and one lerp per
weight per step.

Warm-up: at update t the decay is min(d, (1 + t) / (10 + t)) (as TensorFlow's ExponentialMovingAverage with
``num_updates``): with d = 0.999 and a few hundred steps a plain average would still hold mostly the initial weights.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


class WeightEMA:
    """The shadow weights of one rank's model (its floating-point state entries); ``decay`` in (0, 1) (the typed
    config holds train.ema.decay in [0, 1), and 0, off, builds none)."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = float(decay)
        self.updates = 0
        self.shadow = {
            k: v.detach().clone() for k, v in model.state_dict().items() if torch.is_floating_point(v)
        }

    def current_decay(self) -> float:
        """The decay of the next update (warmed up)."""
        t = self.updates
        return min(self.decay, (1.0 + t) / (10.0 + t))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """shadow <- d shadow + (1 - d) weights, after an optimizer step."""
        d = self.current_decay()
        state = model.state_dict()
        for k, s in self.shadow.items():
            s.lerp_(state[k].detach(), 1.0 - d)
        self.updates += 1

    @contextmanager
    def swapped(self, model: nn.Module) -> Iterator[None]:
        """The shadow in the model's tensors for the block (an evaluation), the raw weights back after it."""
        state = model.state_dict()
        raw = {k: state[k].detach().clone() for k in self.shadow}
        with torch.no_grad():
            for k, s in self.shadow.items():
                state[k].copy_(s)
        try:
            yield
        finally:
            with torch.no_grad():
                for k, v in raw.items():
                    state[k].copy_(v)

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "updates": self.updates, "shadow": self.shadow}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if set(state["shadow"]) != set(self.shadow):
            raise ValueError("the checkpoint's EMA holds other tensors than this model's")
        self.updates = int(state["updates"])
        for k, v in state["shadow"].items():
            self.shadow[k].copy_(v)
