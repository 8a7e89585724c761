"""Accuracy inside training: whole-scene tiled inference, scored on the accuracy protocol's test pixels.

The scene is covered by S x S tiles (S, the model's crop size) on a stride-S grid, plus one last row and column of
tiles flush with the far edges (overlapping their neighbours) when S does not divide the scene. Every tile goes
through the plan's ``shard_input`` -> ``forward`` -> ``gather_output`` (a collective under ``token``: every rank of
the TP group runs the same tiles in the same order), the model in eval mode under ``torch.no_grad``. Overlapping
logits are summed, then argmax -> labels 1..K -> :func:`hsitp.evaluate.metrics.score_map` on the test pixels.

Test-time augmentation (``train.tta``): with ``flips`` every tile is also predicted flipped left-right, up-down and
both, with ``dihedral`` also transposed (the 8 symmetries of the square); each output is mapped back by the inverse
transform before the logits are averaged. Tiles are square, and S is a multiple of the patch, so every transform
keeps the patch grid.

No randomness is drawn (no random augmentation, no sampler, no dropout): evaluating never moves the training RNG streams,
so a resumed run stays bitwise equal to an uninterrupted one. Every rank of a TP group holds the same full logits
(replicated outputs, or gathered ones under ``token``); the record is rank 0's. Data-parallel replicas do not exist
in this stage (one TP group per job), so there is no cross-replica reduction of the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hsitp.evaluate.metrics import Scores, score_map
from hsitp.train.data import TEST, Scene


@dataclass(frozen=True)
class Evaluation:
    """One evaluation: the predicted map (H, W) int16 in 1..K and its scores on the test pixels."""

    prediction: np.ndarray  # (H, W) int16, labels 1..K
    scores: Scores  # on the test pixels
    validation: Scores | None = None  # on the validation pixels (None when the run holds none out)

    @classmethod
    def of(cls, scene: Scene, prediction: np.ndarray) -> Evaluation:
        """A whole-scene prediction (:func:`predict_scene`) scored on the test pixels of the scene's accuracy
        protocol, and on its validation pixels (from the same map)."""
        validation = None
        if scene.validation.any():
            flags = np.where(scene.validation, TEST, 0).astype(
                np.int8
            )  # score_map scores TEST-flagged pixels
            validation = score_map(prediction, scene.labels, flags, scene.classes)
        return cls(
            prediction, score_map(prediction, scene.labels, scene.partition, scene.classes), validation
        )


def tile_origins(extent: int, size: int) -> list[int]:
    """Start offsets of tiles of ``size`` covering ``0..extent`` (stride ``size``; the last one flush with the
    far edge, overlapping its neighbour when ``size`` does not divide ``extent``)."""
    if size > extent:
        raise ValueError(f"tile {size} larger than the extent {extent}")
    starts = list(range(0, extent - size + 1, size))
    if starts[-1] + size < extent:
        starts.append(extent - size)
    return starts


# (transpose, flip rows, flip columns) of each test-time transform: x -> flips(transpose(x))
TTA: dict[str, tuple[tuple[bool, bool, bool], ...]] = {
    "none": ((False, False, False),),
    "flips": ((False, False, False), (False, False, True), (False, True, False), (False, True, True)),
}
TTA["dihedral"] = TTA["flips"] + tuple((True, r, c) for _, r, c in TTA["flips"])


def transform(x: torch.Tensor, t: tuple[bool, bool, bool]) -> torch.Tensor:
    """One symmetry of the square on the last two dims of ``x``: transpose, then flip rows and/or columns."""
    transpose, rows, cols = t
    if transpose:
        x = x.transpose(-2, -1)
    dims = [d for d, on in ((-2, rows), (-1, cols)) if on]
    return x.flip(dims) if dims else x


def untransform(x: torch.Tensor, t: tuple[bool, bool, bool]) -> torch.Tensor:
    """The inverse of :func:`transform`: the flips undone first, then the transpose."""
    transpose, rows, cols = t
    dims = [d for d, on in ((-2, rows), (-1, cols)) if on]
    if dims:
        x = x.flip(dims)
    return x.transpose(-2, -1) if transpose else x


def predict_scene(
    model: Any,
    scene: Scene,
    size: int,
    *,
    batch: int,
    device: torch.device,
    autocast: Any,
    tta: str = "none",
) -> np.ndarray:
    """(H, W) int16 predicted labels 1..K of the whole scene from tiled inference (every rank must call it);
    ``tta``: a key of :data:`TTA`, the logits of its transforms averaged."""
    transforms = TTA[tta]
    tiles = [(t, left) for t in tile_origins(scene.height, size) for left in tile_origins(scene.width, size)]
    total = torch.zeros(scene.classes, scene.height, scene.width, dtype=torch.float64)  # (K, H, W) logits
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(tiles), max(1, batch)):
                chunk = tiles[i : i + max(1, batch)]
                # (B, L, S, S)
                x = torch.stack([scene.cube[:, t : t + size, left : left + size] for t, left in chunk])
                logits = _tile_logits(model, x.to(device), transforms, autocast)  # (B, K, S, S)
                for (t, left), tile in zip(chunk, logits, strict=True):
                    total[:, t : t + size, left : left + size] += tile
    finally:
        model.train(was_training)
    return (total.argmax(0) + 1).numpy().astype(np.int16)  # (H, W), labels 1..K


def _tile_logits(
    model: Any, x: torch.Tensor, transforms: tuple[tuple[bool, bool, bool], ...], autocast: Any
) -> torch.Tensor:
    """(B, K, S, S) float64 full logits of a batch of tiles (B, L, S, S), averaged over ``transforms`` (each output
    mapped back by its inverse)."""
    total = None
    for t in transforms:
        x_local = model.shard_input(transform(x, t).contiguous())
        with autocast:
            out = model(x_local)  # this rank's part of (B, K, S, S)
        logits = untransform(model.gather_output(out).float().cpu().double(), t)
        total = logits if total is None else total + logits
    assert total is not None
    return total if len(transforms) == 1 else total / len(transforms)
