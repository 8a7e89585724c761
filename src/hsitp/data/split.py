"""Train/test split of labelled pixels: seeded, stratified per class, or spatially disjoint blocks.

``random``: per class, ``max(min_train, round(train_fraction * n))`` pixels (at most n - 1, so every class keeps a
test pixel) go to train, the rest to test. Neighbouring train and test pixels share most of their patches, so
this mode overstates accuracy for patch models; it is the usual protocol in the literature.

``block``: the scene is tiled into ``block`` x ``block`` squares; whole squares go to train. Classes are served
rarest first: squares holding the class are taken in a seeded random order until it reaches its target, skipping
any square whose guard band would leave some class fewer than max(min_train, 10 % of its non-train pixels)
for testing. Test pixels are the labelled pixels outside train squares that are more than ``patch`` pixels
(Chebyshev distance) from every train square: a guard band one patch wide, so no test patch overlaps a train
patch. A class that lives inside one square cannot have both train and test pixels; such cases are reported
as warnings (``SplitResult.warnings``, stored in the netCDF attrs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hsitp.errors import HsitpError

UNUSED, TRAIN, TEST = 0, 1, 2


class SplitError(HsitpError):
    """The split settings cannot be applied to this scene."""


@dataclass(frozen=True)
class SplitResult:
    split: np.ndarray  # (y, x) int8: 0 unused, 1 train, 2 test
    counts: dict[int, dict[str, int]]  # label -> {"train", "test", "unused"}
    warnings: tuple[str, ...]


def _targets(n: np.ndarray, train_fraction: float, min_train: int) -> np.ndarray:
    """Train pixels wanted per class: round-half-up of the fraction, at least ``min_train``, at most n - 1."""
    want = np.maximum(np.floor(train_fraction * n + 0.5).astype(np.int64), min_train)
    return np.minimum(want, np.maximum(n - 1, 0))


def _counts(labels: np.ndarray, split: np.ndarray, classes: list[int]) -> dict[int, dict[str, int]]:
    out = {}
    for c in classes:
        m = labels == c
        out[c] = {
            "train": int(np.count_nonzero(m & (split == TRAIN))),
            "test": int(np.count_nonzero(m & (split == TEST))),
            "unused": int(np.count_nonzero(m & (split == UNUSED))),
        }
    return out


def _warnings(counts: Mapping[int, Mapping[str, int]], min_train: int) -> tuple[str, ...]:
    out = []
    for c, k in counts.items():
        if k["train"] < min_train:
            out.append(f"class {c}: {k['train']} train pixels < min_train_per_class {min_train}")
        if k["test"] == 0:
            out.append(f"class {c}: no test pixels")
    return tuple(out)


def random_split(
    labels: np.ndarray, classes: list[int], *, train_fraction: float, min_train: int, rng: np.random.Generator
) -> SplitResult:
    """Seeded stratified per-class random split of the labelled pixels."""
    split = np.zeros(labels.shape, dtype=np.int8)
    flat = split.reshape(-1)  # a view: writes land in ``split``
    lab = labels.reshape(-1)
    for c in classes:
        idx = np.flatnonzero(lab == c)
        n_train = int(_targets(np.array([idx.size]), train_fraction, min_train)[0])
        perm = rng.permutation(idx)
        flat[perm[:n_train]] = TRAIN
        flat[perm[n_train:]] = TEST
    counts = _counts(labels, split, classes)
    return SplitResult(split, counts, _warnings(counts, min_train))


def block_split(
    labels: np.ndarray,
    classes: list[int],
    *,
    train_fraction: float,
    min_train: int,
    block: int,
    patch: int,
    rng: np.random.Generator,
) -> SplitResult:
    """Spatially disjoint split: whole blocks to train, test only beyond a guard band one patch wide."""
    rows, cols = labels.shape
    if block > min(rows, cols):
        raise SplitError(
            f"data.split.block = {block} exceeds the scene ({rows} x {cols}); use a block side <= {min(rows, cols)}"
        )
    n_cls = len(classes)
    lut = np.full(int(max(classes)) + 1, -1, dtype=np.int64)
    lut[classes] = np.arange(n_cls)
    cls_of = np.where(
        labels > 0, lut[np.clip(labels, 0, lut.size - 1)], -1
    )  # (y, x) class index, -1 unlabelled
    nby, nbx = -(-rows // block), -(-cols // block)
    yy, xx = np.indices(labels.shape)
    block_id = (yy // block) * nbx + (xx // block)  # (y, x)
    lab = cls_of >= 0
    hist = np.bincount(block_id[lab] * n_cls + cls_of[lab], minlength=nby * nbx * n_cls).reshape(-1, n_cls)
    total = hist.sum(axis=0)  # (classes,)
    target = _targets(total, train_fraction, min_train)
    # Test pixels each class must keep: max(min_train, 10 % of its non-train pixels), at most what it has.
    reserve = np.minimum(np.maximum(min_train, (total - target) // 10), total - target)
    avail = total.copy()  # labelled pixels neither in train nor in a guard band
    train_n = np.zeros(n_cls, dtype=np.int64)
    chosen = np.zeros(nby * nbx, dtype=bool)
    blocked = np.zeros(labels.shape, dtype=bool)  # train blocks + their guard bands
    train_area = np.zeros(labels.shape, dtype=bool)
    order = rng.permutation(nby * nbx)
    for k in np.argsort(
        total, kind="stable"
    ):  # rarest class first, so big classes cannot use up its test pixels
        for b in order:
            if train_n[k] >= target[k]:
                break
            if chosen[b] or hist[b, k] == 0:
                continue
            by, bx = divmod(int(b), nbx)
            y0, y1, x0, x1 = by * block, min((by + 1) * block, rows), bx * block, min((bx + 1) * block, cols)
            # A block dilated by `patch` (Chebyshev) is the block grown by `patch` on every side.
            win = (
                slice(max(y0 - patch, 0), min(y1 + patch, rows)),
                slice(max(x0 - patch, 0), min(x1 + patch, cols)),
            )
            newly = ~blocked[win] & (cls_of[win] >= 0)
            lost = np.bincount(cls_of[win][newly], minlength=n_cls)
            if ((total > 0) & (avail - lost < reserve)).any():
                continue  # would leave some class too few test pixels
            chosen[b] = True
            blocked[win] = True
            train_area[y0:y1, x0:x1] = True
            avail -= lost
            train_n += hist[b]
    split = np.zeros(labels.shape, dtype=np.int8)
    split[lab & train_area] = TRAIN
    split[lab & ~blocked] = TEST
    counts = _counts(labels, split, classes)
    return SplitResult(split, counts, _warnings(counts, min_train))


def make_split(
    labels: np.ndarray,
    classes: list[int],
    *,
    mode: str,
    train_fraction: float,
    min_train: int,
    patch: int,
    block: int,
    seed_seq: np.random.SeedSequence,
) -> SplitResult:
    """Dispatch on ``data.split.mode`` with a generator derived from the config seed and the dataset name."""
    rng = np.random.default_rng(seed_seq)
    if mode == "random":
        return random_split(labels, classes, train_fraction=train_fraction, min_train=min_train, rng=rng)
    if mode == "block":
        return block_split(
            labels,
            classes,
            train_fraction=train_fraction,
            min_train=min_train,
            block=block,
            patch=patch,
            rng=rng,
        )
    raise SplitError(f"data.split.mode = {mode!r}; expected 'random' or 'block'")
