"""How a dimension of size ``size`` is split over P ranks, with padding when it does not divide.

Layout ("balanced"): rank r owns ``count(r) = size // P + (r < size % P)`` consecutive real indices starting at
``start(r)``, stored at local slots ``[0, count(r))``; slots ``[count(r), local)`` are zero padding. Every rank
has the same ``local`` length (collectives need equal shapes), so the padded total is ``P * local`` and the
wasted fraction is ``(P * local - size) / (P * local)`` (e.g. L = 103 bands at P = 8: local 13, padded 104,
0.96 %). With P <= size every rank owns at least one real index, so no rank is pure padding. When the size
divides, this is the usual contiguous split with no padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from hsitp.parallel.errors import ShardingError


@dataclass(frozen=True)
class Split:
    """``size`` real entries over ``parts`` ranks, ``local`` slots each (a multiple of ``multiple``)."""

    name: str
    size: int
    parts: int
    multiple: int = 1

    def __post_init__(self) -> None:
        if self.size < 1 or self.parts < 1 or self.multiple < 1:
            raise ShardingError(f"{self.name}: size, P and multiple must be >= 1 (got {self})")
        if self.parts > self.size:
            raise ShardingError(
                f"cannot split {self.name} = {self.size} over P = {self.parts}: P is larger than the dimension "
                f"being split; use P <= {self.size} or split another dimension"
            )

    @property
    def local(self) -> int:
        per_rank = -(-self.size // self.parts)
        return -(-per_rank // self.multiple) * self.multiple

    @property
    def padded(self) -> int:
        return self.local * self.parts

    @property
    def pad_fraction(self) -> float:
        """Share of the padded total that is padding (0 when the size divides)."""
        return (self.padded - self.size) / self.padded

    @property
    def is_padded(self) -> bool:
        return self.padded != self.size

    def pads(self, rank: int) -> bool:
        """Whether rank ``rank``'s slots include padding (decided from sizes, never from tensor values)."""
        return self.count(rank) < self.local

    def count(self, rank: int) -> int:
        return self.size // self.parts + (rank < self.size % self.parts)

    def start(self, rank: int) -> int:
        return rank * (self.size // self.parts) + min(rank, self.size % self.parts)

    def valid_mask(self, rank: int, device: torch.device | None = None) -> torch.Tensor:
        """(local,) bool: True at this rank's real slots."""
        return torch.arange(self.local, device=device) < self.count(rank)

    def padded_valid_mask(self, device: torch.device | None = None) -> torch.Tensor:
        """(padded,) bool over the gathered, padded axis (rank-major)."""
        return torch.cat([self.valid_mask(r, device) for r in range(self.parts)])

    @cached_property
    def gather_index(self) -> torch.Tensor:
        """(size,) positions of the real entries in the gathered, padded axis, in real order."""
        return torch.cat([torch.arange(self.count(r)) + r * self.local for r in range(self.parts)])

    def shard(self, full: torch.Tensor, rank: int, dim: int) -> torch.Tensor:
        """This rank's slots of a full tensor along ``dim`` (zero padded). Differentiable."""
        part = full.narrow(dim, self.start(rank), self.count(rank))
        pad = self.local - self.count(rank)
        if pad == 0:
            return part
        shape = list(full.shape)
        shape[dim] = pad
        return torch.cat([part, full.new_zeros(shape)], dim=dim)

    def unpad(self, padded: torch.Tensor, dim: int) -> torch.Tensor:
        """Drop the padding from a gathered, padded axis."""
        if not self.is_padded:
            return padded
        return padded.index_select(dim, self.gather_index.to(padded.device))

    def report(self) -> dict[str, float | int | str]:
        """What the run logs: the real size, the padded size and the wasted fraction."""
        return {
            "dim": self.name,
            "size": self.size,
            "parts": self.parts,
            "local": self.local,
            "padded": self.padded,
            "pad_fraction": self.pad_fraction,
        }


def split_heads(heads: int, parts: int, *, head_padding: bool) -> Split:
    """Whole heads per rank; an indivisible count is an error unless head padding is enabled."""
    if heads % parts and not head_padding:
        raise ShardingError(
            f"heads = {heads} is not divisible by P = {parts}: every rank must hold whole heads. Choose P "
            f"dividing {heads}, change parallel.heads, or set parallel.head_padding: true (adds "
            f"{-(-heads // parts) * parts - heads} zero heads)"
        )
    return Split("heads", heads, parts)


def zero_pad_grads(param: torch.nn.Parameter, valid: torch.Tensor | None) -> None:
    """Keep padded entries of ``param`` at zero whatever the optimiser does: mask their gradient.

    ``valid`` broadcasts against ``param`` (True = real entry); None means nothing is padded and adds no hook.
    Callers decide that from the split's sizes (``Split.pads``), never from the mask's values: reading a
    tensor's values is a host sync, and impossible under FakeTensorMode.
    """
    if valid is None:
        return
    cache = {"mask": valid.detach().clone()}

    def hook(grad: torch.Tensor) -> torch.Tensor:
        mask = cache["mask"]
        if mask.device != grad.device or mask.dtype != grad.dtype:
            mask = cache["mask"] = mask.to(device=grad.device, dtype=grad.dtype)  # moved once, then reused
        return grad * mask

    param.register_hook(hook)


def local_state_from_full(module: torch.nn.Module, full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Map full-size tensors (a dense state dict, or the dense gradients) to this rank's parameters.

    For each parameter of ``module`` the innermost enclosing module defining ``local_from_full(rel_name, full)``
    slices it (rel_name is relative to that module); parameters nobody claims are replicated and returned whole.
    """
    out: dict[str, torch.Tensor] = {}
    for name, _ in module.named_parameters():
        parts = name.split(".")
        tensor = full[name]
        for cut in range(len(parts) - 1, -1, -1):
            owner = module.get_submodule(".".join(parts[:cut])) if cut else module
            fn = getattr(owner, "local_from_full", None)
            if fn is not None:
                tensor = fn(".".join(parts[cut:]), tensor)
                break
        out[name] = tensor
    return out
