"""The train/test partition of labelled pixels, one per accuracy protocol: seeded stratified random, and spatially
disjoint blocks.

The prepared file carries K partitions (``data.partition.draws``) of every protocol of ``data.partition.protocols``
at once (``partition`` (protocol, partition_index, y, x) int8); a consumer picks one by protocol and index with
:func:`read_partition`.

Why K seeded draws: one draw is one sample of which places are train; the SVM's block OA over five draws
of Indian Pines spans 16 pp, so a verdict from one draw can be an accident of it. Each draw is the same algorithm on
its own seeded stream (draw k does not depend on K: raising K keeps every draw a run trained on). For the block
protocol this is K seeded block assignments, not a K-fold over the squares: a fold-wise split would either train on
(K - 1)/K of the squares (eight times the 10 % the protocol trains on: another protocol) or test K - 1 folds from
one, where a class living in a few squares cannot have train and test squares in every fold; K independent draws
keep the protocol (train fraction, rarest class first, the test reserve, the guard band) and estimate the spread
of a new draw directly. Their test sets overlap (each tests most of the scene beyond its train squares), so the
mean over draws is not a mean over disjoint test sets. Why both: with a random 10 %
partition of Indian Pines nearly every test pixel has a training pixel inside its patch, so a patch model's accuracy
on it says little about generalisation; the block protocol is the honest one, the random one is what the literature
quotes. ("Partition", never "split": in this project a TP split is how a layer is cut across ranks.)

``random``: per class, ``max(min_train, round(train_fraction * n))`` pixels (at most n - 1, so every class keeps a
test pixel) go to train, the rest to test. Neighbouring train and test pixels share most of their patches, so
this mode overstates accuracy for patch models; it is the usual protocol in the literature.

``block``: the scene is tiled into ``block`` x ``block`` squares; whole squares go to train. Classes are served
rarest first: squares holding the class are taken in a seeded random order until it reaches its target, skipping
any square whose guard band would leave some class fewer than max(min_train, 10 % of its non-train pixels)
for testing. Test pixels are the labelled pixels outside train squares that are more than ``patch`` pixels
(Chebyshev distance) from every train square: a guard band one patch wide, so no test patch overlaps a train
patch. A class that lives inside one square cannot have both train and test pixels; such cases are reported
as warnings (``PartitionResult.warnings``, stored in the netCDF attrs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.errors import HsitpError
from hsitp.names import PROTOCOLS  # canonical order of the ``protocol`` coordinate
from hsitp.sections.data import Partition

UNUSED, TRAIN, TEST = 0, 1, 2
INDEX = "partition_index"  # the prepared file's dimension of the K partitions of each protocol


class PartitionError(HsitpError):
    """The partition settings cannot be applied to this scene (or the file lacks the protocol asked for)."""


@dataclass(frozen=True)
class PartitionResult:
    partition: np.ndarray  # (y, x) int8: 0 unused, 1 train, 2 test
    counts: dict[int, dict[str, int]]  # label -> {"train", "test", "unused"}
    warnings: tuple[str, ...]


def _targets(n: np.ndarray, train_fraction: float, min_train: int) -> np.ndarray:
    """Train pixels wanted per class: round-half-up of the fraction, at least ``min_train``, at most n - 1."""
    want = np.maximum(np.floor(train_fraction * n + 0.5).astype(np.int64), min_train)
    return np.minimum(want, np.maximum(n - 1, 0))


def check_satisfiable(class_counts: Mapping[int, int], part: Partition, scene: str) -> None:
    """Refuse (PartitionError) a ``train_fraction`` / ``min_train_per_class`` that some class cannot meet while
    keeping a test pixel: its ``max(min_train, round(fraction * n))`` train pixels reach its n labelled pixels.
    The partition would silently train on n - 1 and score on one pixel, a warning in a log nobody reads."""
    fraction, min_train = float(part.train_fraction), int(part.min_train_per_class)
    for c, n in sorted(class_counts.items()):
        want = max(min_train, int(np.floor(fraction * n + 0.5)))
        if n > 0 and want >= n:
            raise PartitionError(
                f"data.partition: train_fraction = {fraction:g}, min_train_per_class = {min_train} ask {want} train "
                f"pixels of class {c} of the {scene} scene, which has {n} (one at least must stay for test); "
                f"lower them so that every class keeps a test pixel (min_train_per_class < {min(class_counts.values())})"
            )


def _counts(labels: np.ndarray, partition: np.ndarray, classes: list[int]) -> dict[int, dict[str, int]]:
    roles = {"train": TRAIN, "test": TEST, "unused": UNUSED}
    return {
        c: {role: int(np.count_nonzero((labels == c) & (partition == v))) for role, v in roles.items()}
        for c in classes
    }


def _warnings(counts: Mapping[int, Mapping[str, int]], min_train: int) -> tuple[str, ...]:
    out = []
    for c, k in counts.items():
        if k["train"] < min_train:
            out.append(f"class {c}: {k['train']} train pixels < min_train_per_class {min_train}")
        if k["test"] == 0:
            out.append(f"class {c}: no test pixels")
    return tuple(out)


def random_partition(
    labels: np.ndarray, classes: list[int], part: Partition, rng: np.random.Generator
) -> PartitionResult:
    """Seeded stratified per-class random partition of the labelled pixels (the random protocol)."""
    train_fraction, min_train = float(part.train_fraction), part.min_train_per_class
    partition = np.zeros(labels.shape, dtype=np.int8)
    flat = partition.reshape(-1)  # a view: writes land in ``partition``
    lab = labels.reshape(-1)
    for c in classes:
        idx = np.flatnonzero(lab == c)
        n_train = int(_targets(np.array([idx.size]), train_fraction, min_train)[0])
        perm = rng.permutation(idx)
        flat[perm[:n_train]] = TRAIN
        flat[perm[n_train:]] = TEST
    counts = _counts(labels, partition, classes)
    return PartitionResult(partition, counts, _warnings(counts, min_train))


def block_partition(
    labels: np.ndarray, classes: list[int], part: Partition, rng: np.random.Generator
) -> PartitionResult:
    """Spatially disjoint partition (the block protocol): whole blocks to train, test only beyond a guard band one
    patch wide."""
    train_fraction, min_train = float(part.train_fraction), part.min_train_per_class
    block, patch = part.block, part.patch
    rows, cols = labels.shape
    if block > min(rows, cols):
        raise PartitionError(
            f"data.partition.block = {block} exceeds the scene ({rows} x {cols}); use a block side <= {min(rows, cols)}"
        )
    n_cls = len(classes)
    cls_of = _class_index(labels, classes)
    nby, nbx = -(-rows // block), -(-cols // block)
    block_id = (np.arange(rows)[:, None] // block) * nbx + np.arange(cols)[None, :] // block  # (y, x)
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
    # rarest class first, so big classes cannot use up its test pixels
    for k in np.argsort(total, kind="stable"):
        for b in order:
            if train_n[k] >= target[k]:
                break
            if chosen[b] or hist[b, k] == 0:
                continue
            by, bx = divmod(int(b), nbx)
            y0, y1, x0, x1 = by * block, min((by + 1) * block, rows), bx * block, min((bx + 1) * block, cols)
            # A block dilated by `patch` (Chebyshev) is the block grown by `patch` on every side.
            win = np.s_[
                max(y0 - patch, 0) : min(y1 + patch, rows), max(x0 - patch, 0) : min(x1 + patch, cols)
            ]
            newly = ~blocked[win] & (cls_of[win] >= 0)
            lost = np.bincount(cls_of[win][newly], minlength=n_cls)
            if ((total > 0) & (avail - lost < reserve)).any():
                continue  # would leave some class too few test pixels
            chosen[b] = True
            blocked[win] = True
            train_area[y0:y1, x0:x1] = True
            avail -= lost
            train_n += hist[b]
    partition = np.zeros(labels.shape, dtype=np.int8)
    partition[lab & train_area] = TRAIN
    partition[lab & ~blocked] = TEST
    counts = _counts(labels, partition, classes)
    return PartitionResult(partition, counts, _warnings(counts, min_train))


def _class_index(labels: np.ndarray, classes: list[int]) -> np.ndarray:
    """(y, x) index of each pixel's label in ``classes``, -1 where unlabelled."""
    lut = np.full(int(max(classes)) + 1, -1, dtype=np.int64)
    lut[classes] = np.arange(len(classes))
    return np.where(labels > 0, lut[np.clip(labels, 0, lut.size - 1)], -1)


def protocol_seed(seed_seq: np.random.SeedSequence, protocol: str, index: int = 0) -> np.random.SeedSequence:
    """Each protocol's own stream, independent of which other protocols are configured and of their order, and
    of how many partitions are drawn.

    Partition 0: ``random`` uses the dataset stream itself (so its partition is the one files had before protocols
    existed), ``block`` a child of it (spawn key (1,)). Partition k >= 1: the child (protocol's position, k), a key
    of another length than those, so no draw repeats another protocol's or another index's stream.
    """
    position = PROTOCOLS.index(protocol)
    if index > 0:
        return np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, position, index))
    if position == 0:
        return seed_seq
    return np.random.SeedSequence(seed_seq.entropy, spawn_key=(*seed_seq.spawn_key, position))


def make_partition(
    labels: np.ndarray,
    classes: list[int],
    protocol: str,
    part: Partition,
    seed_seq: np.random.SeedSequence,
    index: int,
) -> PartitionResult:
    """Partition ``index`` of one protocol, with a generator derived from the config seed, the dataset name, the
    protocol and the index (:func:`protocol_seed`)."""
    rng = np.random.default_rng(protocol_seed(seed_seq, protocol, index))
    if protocol == "random":
        return random_partition(labels, classes, part, rng)
    return block_partition(labels, classes, part, rng)


def near_train_fraction(partition: np.ndarray, radius: int) -> float:
    """Fraction of test pixels with a train pixel within Chebyshev distance ``radius`` (inside their
    (2r+1) x (2r+1) window): how much a patch around a test pixel has seen in training. NaN without test pixels."""
    test = partition == TEST
    if not test.any():
        return float("nan")
    if not (partition == TRAIN).any():
        return 0.0
    # scipy.ndimage here, not at the top: every Snakemake run imports this module to check the partition
    # (hsitp.preflight), and scipy.ndimage costs it 0.3 s
    from scipy.ndimage import distance_transform_cdt

    # (y, x) distance to nearest train pixel
    dist = distance_transform_cdt(partition != TRAIN, metric="chessboard")
    return float(np.count_nonzero(dist[test] <= radius) / np.count_nonzero(test))


def per_partition(value: Sequence[Any], index: int) -> Any:
    """Partition ``index``'s entry of one protocol's value of a per-protocol attribute of the prepared file
    (``partition_counts``, ``partition_warnings``, ``partition_test_near_train``: a list over the partitions)."""
    if not 0 <= index < len(value):
        raise PartitionError(f"partition index {index}: the prepared file holds {len(value)} partition(s)")
    return value[index]


def read_partition(
    ds: xr.Dataset, protocol: str, index: int = 0, *, path: str | Path | None = None
) -> np.ndarray:
    """The (y, x) int8 partition (0 unused, 1 train, 2 test) of one protocol and partition index from a prepared
    ``dataset`` file (``path``, when given, names it in the errors).

    The error names the protocols the file holds, so a training config asking for one the data stage was not
    configured with (``data.partition.protocols``) says what to change; likewise for an index beyond the file's
    ``data.partition.draws``.
    """
    where = f"{path}: " if path is not None else ""
    if "partition" not in ds:
        raise PartitionError(
            f"{where}the prepared file has no `partition` variable; re-run `hsitp data prepare`"
        )
    var = ds["partition"]
    present = [str(p) for p in var["protocol"].values]
    if protocol not in present:
        raise PartitionError(
            f"{where}accuracy protocol {protocol!r} is not in the prepared file, which holds {present}; pick one "
            "of those, or add it to data.partition.protocols and re-run `hsitp data prepare`"
        )
    have = int(var.sizes[INDEX])
    if not 0 <= index < have:
        raise PartitionError(
            f"{where}partition index {index} is not in the prepared file, which holds {have} partition(s) per "
            "protocol (data.partition.draws); raise data.partition.draws and re-run `hsitp data prepare`"
        )
    var = var.sel(protocol=protocol).isel({INDEX: index})
    return np.asarray(var.transpose("y", "x").values, dtype=np.int8)  # (y, x)
