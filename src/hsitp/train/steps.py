"""What the training loop and the pretraining (``hsitp.train.pretrain``) share: the learning-rate schedule and the
whole batch's loss on every rank. Its own module so that neither imports the other."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.distributed as dist

from hsitp.parallel.groups import TPGroup


def lr_lambda(warmup: int, total: int) -> Callable[[int], float]:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``total`` steps."""

    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        span = max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, (step - warmup) / span)))

    return f


def global_loss(loss: torch.Tensor, plan: str, tp: TPGroup) -> float:
    """The full batch's loss on every rank (token plan: the ranks' partial sums, one scalar all-reduce, not
    counted as the model's communication)."""
    value = loss.detach().double()
    if plan == "token" and tp.size > 1:
        # raw torch call: not timed (a metric, not the model's traffic)
        dist.all_reduce(value, group=tp.group)
    return float(value)
