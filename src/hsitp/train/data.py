"""The training data: one prepared scene (``results/<run>/data/DATASET.nc``), the train/test partition of its
accuracy protocol, and a seeded sampler of S x S crops that every rank of a TP group draws identically.

The model sees the whole crop's spectra (labelled or not, train or test pixels alike: the cube is unlabelled
input); only train pixels' labels enter the loss: pixels that are not ``TRAIN`` get the ignore mask. The scene also
keeps the labels (1..K) and partition flags, read only by the evaluation (``hsitp.train.inference``), never by the
sampler.

Validation pixels (``train.validation.fraction`` of the train pixels, or one of ``train.validation.folds`` inner
folds of them, :func:`validation_mask`) are train pixels held out of the loss: every recipe decision is taken on
them, never on the test pixels. Their draw depends on the master ``seed`` only (not the job's seed), so every job
of a run, whatever its plan or seed, holds out the same pixels of the same partition.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from hsitp.errors import HsitpError

log = logging.getLogger(__name__)

UNUSED, TRAIN, TEST = 0, 1, 2  # the prepared file's partition flags (hsitp.data.partition)


class TrainDataError(HsitpError, ValueError):
    """The prepared file cannot feed this training run (missing protocol, crop larger than the scene, ...)."""


@dataclass
class Scene:
    """One scene ready for training: cube (L, H, W) float32, targets (H, W) int64 in 0..K-1 (train pixels; -1
    elsewhere), the train mask, the counts the output records, and (for evaluation only) labels and partition."""

    name: str
    cube: torch.Tensor  # (L, H, W) float32
    target: torch.Tensor  # (H, W) int64, -1 where not a train pixel
    train_mask: torch.Tensor  # (H, W) bool
    classes: int
    protocol: str
    counts: dict[str, int]
    labels: np.ndarray  # (H, W) int16, 1..K, 0 = unlabelled: read by the evaluation only
    partition: np.ndarray  # (H, W) int8 partition flags of the protocol (0 unused / 1 train / 2 test)
    validation: np.ndarray  # (H, W) bool: train pixels held out of the loss (validation)
    partition_index: int = 0  # which of the protocol's K partitions (data.partition.draws)
    # (L,) float32: each band's train mean / std, so that brightness scaling of the prepared cube (x -> a x) can be
    # applied to the standardised one (z -> a z + (a - 1) offset); None: zero (a scene built without it)
    offset: torch.Tensor | None = None

    @property
    def bands(self) -> int:
        return int(self.cube.shape[0])

    @property
    def height(self) -> int:
        return int(self.cube.shape[1])

    @property
    def width(self) -> int:
        return int(self.cube.shape[2])


def scene_header(path: str | Path) -> tuple[int, int, int, int]:
    """(bands, classes, height, width) of a prepared file, without loading the cube (for checks before launch)."""
    from hsitp.contracts import DATASET

    ds = DATASET.read(path, load=False)
    try:
        height, width, bands = (int(s) for s in ds["cube"].shape)
        return bands, _n_classes(ds), height, width
    finally:
        ds.close()


def _n_classes(ds: xr.Dataset) -> int:
    names: Any = ds["labels"].attrs.get("class_names") or ds.attrs.get("class_names")
    if isinstance(names, str):
        names = json.loads(names)
    if names:
        return len(names)
    return int(ds["labels"].max())


def standardise(cube: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Each band to zero mean and unit variance over the train pixels' spectra (as the classical baseline's
    StandardScaler; no test pixel enters the statistics). Why: the prepared cube is in [0, 1] per band, all
    positive; on it the per-band patch embeddings start nearly collinear and the transformer sat at the class
    prior for ~200 steps on Indian Pines, against ~60 steps standardised (measured, dim 64, depth 4)."""
    mean, std = band_statistics(cube, train)
    return ((cube - mean) / std).astype(np.float32)  # (H, W, L)


def band_statistics(cube: np.ndarray, train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(L,) float64 mean and std of each band over the train pixels (std 1 for a constant band)."""
    pixels = cube[train]  # (train pixels, L)
    mean = pixels.mean(axis=0, dtype=np.float64)
    std = pixels.std(axis=0, dtype=np.float64)
    return mean, np.where(std > 0, std, 1.0)  # a constant band stays constant (0) instead of dividing by 0


def validation_mask(
    labels: np.ndarray,
    train: np.ndarray,
    protocol: str,
    fraction: float,
    seed: int,
    *,
    block: int | None = None,
    folds: int = 1,
    fold: int = 0,
) -> np.ndarray:
    """(H, W) bool: the train pixels held out as validation pixels (never in the loss).

    One hold-out (``folds`` = 1): ``random``: per class, round(fraction x its train pixels) drawn at random, at most
    all but one (a class keeps >= 1 train pixel; a class with one train pixel gives none). ``block``: whole training
    blocks of the partition's ``block`` x ``block`` grid (the prepared file's ``partition_settings``), drawn in
    random order until they hold >= fraction of the train pixels, so validation is spatially apart from most of the
    loss pixels as the test blocks are (no guard band between a validation block and its training neighbours).

    Inner folds (``folds`` >= 2; ``fraction`` is then not read): the train pixels are split into ``folds`` folds and
    fold ``fold`` is held out, so the folds together validate every train pixel once. ``block``: whole training
    blocks, class-stratified over the blocks (scikit-learn's StratifiedGroupKFold, which orders the blocks by their
    class mix: the seed only breaks ties). Why: on Indian Pines
    the block protocol's train squares hold 2,122 pixels of 13 classes; a 20 % hold-out of whole squares held 565
    pixels of 7 classes, and a single hold-out of >= 1,500 pixels would leave a third of the train pixels to learn
    from. ``random``: stratified folds of the pixels. Seeded by ``seed``.
    """
    val = np.zeros(train.shape, dtype=bool)
    if folds >= 2:
        return _fold_mask(labels, train, protocol, seed, block=block, folds=folds, fold=fold)
    if fraction <= 0:
        return val
    rng = np.random.default_rng(seed)
    if protocol == "block":
        block_id = _block_ids(train.shape, _need_block(block, "train.validation.fraction > 0"))
        ids = np.unique(block_id[train])
        want = fraction * int(train.sum())
        held = 0
        for b in rng.permutation(ids)[:-1]:  # the last block always stays in training
            if held >= want:
                break
            inside = train & (block_id == b)
            val |= inside
            held += int(inside.sum())
        return val
    for c in np.unique(labels[train]):
        idx = np.flatnonzero((train & (labels == c)).ravel())
        n = min(int(round(fraction * idx.size)), idx.size - 1)
        if n > 0:
            val.ravel()[rng.choice(idx, size=n, replace=False)] = True
    return val


def _need_block(block: int | None, what: str) -> int:
    if not block:
        raise TrainDataError(
            f"{what} under the block protocol needs the partition's block size (the prepared file's "
            "partition_settings, written by `hsitp data prepare`): re-prepare it or hold out no validation pixels"
        )
    return block


def _block_ids(shape: tuple[int, ...], block: int) -> np.ndarray:
    """(H, W) the ``block`` x ``block`` square of the partition's grid each pixel lies in."""
    yy, xx = np.indices(shape)
    nbx = -(-shape[1] // block)
    return (yy // block) * nbx + (xx // block)


def _fold_mask(
    labels: np.ndarray,
    train: np.ndarray,
    protocol: str,
    seed: int,
    *,
    block: int | None,
    folds: int,
    fold: int,
) -> np.ndarray:
    """Fold ``fold`` of ``folds`` inner folds of the train pixels (:func:`validation_mask`)."""
    import warnings

    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    if not 0 <= fold < folds:
        raise TrainDataError(
            f"train.validation.fold = {fold}: must be in 0..{folds - 1} (train.validation.folds)"
        )
    flat = np.flatnonzero(train.ravel())
    y = labels.ravel()[flat]
    if protocol == "block":
        groups = _block_ids(train.shape, _need_block(block, "train.validation.folds >= 2")).ravel()[flat]
        n_groups = np.unique(groups).size
        if n_groups < folds:
            raise TrainDataError(
                f"train.validation.folds = {folds}, but the block partition's train pixels lie in {n_groups} "
                "blocks: lower the folds"
            )
        splitter: Any = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    else:
        groups = None
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    # a class with fewer members than folds: scikit-learn warns, the split stands
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        split = list(splitter.split(np.zeros(flat.size), y, groups))
    val = np.zeros(train.shape, dtype=bool)
    val.ravel()[flat[split[fold][1]]] = True
    return val


@dataclass(frozen=True)
class ValidationCounts:
    """What a tuning validation holds, per inner fold (one fold: the single hold-out): its pixels and classes, and
    of them the pixels whose class the fold's own training pixels hold (the others no recipe can get right)."""

    pixels: tuple[int, ...]  # validation pixels per fold
    classes: tuple[int, ...]  # classes among them per fold
    learnable_pixels: tuple[int, ...]  # of a class the fold's training pixels also hold
    class_pixels: np.ndarray  # (folds, K) validation pixels per fold and class (labels 1..K)
    learnable_classes: int  # classes with a learnable validation pixel in some fold
    train_pixels: int  # the partition's train pixels (the folds validate all of them when folds >= 2)
    train_classes: int

    @property
    def total_pixels(self) -> int:
        return int(sum(self.pixels))

    @property
    def total_classes(self) -> int:
        return int(np.count_nonzero(self.class_pixels.sum(axis=0)))


def validation_counts(
    path: str | Path,
    protocol: str,
    *,
    partition_index: int = 0,
    fraction: float = 0.0,
    seed: int = 0,
    folds: int = 1,
) -> ValidationCounts:
    """The validation pixels a run with these settings holds out (:func:`validation_mask`), counted per fold and
    class, without loading the cube: what the tuning stage logs, records and checks before its first trial."""
    from hsitp.contracts import DATASET
    from hsitp.data.partition import read_partition

    ds = DATASET.read(path, load=False)
    try:
        labels = np.asarray(ds["labels"].values, dtype=np.int64)  # (H, W)
        partition = read_partition(ds, protocol, partition_index, path=path)
        classes = _n_classes(ds)
        block = _partition_block(ds)
    finally:
        ds.close()
    train = (partition == TRAIN) & (labels > 0)
    masks = [
        validation_mask(labels, train, protocol, fraction, seed, block=block, folds=folds, fold=f)
        for f in range(max(folds, 1))
    ]
    learnable, learned = [], set()
    for val in masks:
        trained = np.unique(labels[train & ~val])
        ok = val & np.isin(labels, trained)
        learnable.append(int(ok.sum()))
        learned |= set(np.unique(labels[ok]).tolist())
    return ValidationCounts(
        pixels=tuple(int(v.sum()) for v in masks),
        classes=tuple(_n_present(np.where(v, labels, 0)) for v in masks),
        learnable_pixels=tuple(learnable),
        class_pixels=np.array(
            [[int(np.count_nonzero(v & (labels == c))) for c in range(1, classes + 1)] for v in masks]
        ),
        learnable_classes=len(learned),
        train_pixels=int(train.sum()),
        train_classes=_n_present(np.where(train, labels, 0)),
    )


def _n_present(labels: np.ndarray) -> int:
    """How many classes (labels > 0) have at least one pixel in ``labels``."""
    return int(np.unique(labels[labels > 0]).size)


def _partition_block(ds: xr.Dataset) -> int | None:
    settings: Any = ds.attrs.get("partition_settings")
    if isinstance(settings, str):
        settings = json.loads(settings)
    return int(settings["block"]) if settings and "block" in settings else None


def load_scene(
    path: str | Path,
    protocol: str,
    *,
    partition_index: int = 0,
    validation: float = 0.0,
    validation_seed: int = 0,
    validation_folds: int = 1,
    validation_fold: int = 0,
) -> Scene:
    """Read the prepared file and keep only what training needs (labels 1..K remapped to 0..K-1), on partition
    ``partition_index`` of the protocol; with ``validation`` > 0 that fraction of the train pixels, or with
    ``validation_folds`` >= 2 fold ``validation_fold`` of them, becomes validation pixels (:func:`validation_mask`)."""
    from hsitp.contracts import DATASET
    from hsitp.data.partition import read_partition

    ds = DATASET.read(path)
    cube = np.asarray(ds["cube"].transpose("y", "x", ...).values, dtype=np.float32)  # (H, W, L)
    labels = np.asarray(ds["labels"].values, dtype=np.int64)  # (H, W), 0 = unlabelled
    partition = read_partition(ds, protocol, partition_index, path=path)
    classes = _n_classes(ds)
    if labels.max() > classes:
        raise TrainDataError(f"{path}: label {labels.max()} exceeds the {classes} classes of class_names")
    train = (partition == TRAIN) & (labels > 0)
    block, folds = _partition_block(ds), {"folds": validation_folds, "fold": validation_fold}
    val = validation_mask(labels, train, protocol, validation, validation_seed, block=block, **folds)
    train = train & ~val
    target = np.where(train, labels - 1, -1)
    counts = _pixel_counts(labels, train, val, (partition == TEST) & (labels > 0))
    if val.any():
        n = [counts[k] for k in ("validation_pixels", "validation_classes", "test_classes", "train_classes")]
        log.info(
            "%s protocol: %d validation pixels of %d classes (the test pixels hold %d classes, the train pixels %d)",
            protocol,
            *n,
        )
    if counts["train_pixels"] == 0:
        raise TrainDataError(f"{path}: the {protocol!r} protocol's partition has no train pixels")
    mean, std = band_statistics(cube, train)
    cube = standardise(cube, train)
    return Scene(
        name=str(ds.attrs.get("dataset", Path(path).stem)),
        cube=torch.from_numpy(np.ascontiguousarray(cube.transpose(2, 0, 1))),  # (L, H, W)
        target=torch.from_numpy(target),
        train_mask=torch.from_numpy(train),
        classes=classes,
        protocol=protocol,
        counts=counts,
        labels=labels.astype(np.int16),
        partition=partition,
        validation=val,
        partition_index=partition_index,
        offset=torch.from_numpy((mean / std).astype(np.float32)),
    )


def _pixel_counts(labels: np.ndarray, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> dict[str, int]:
    """Pixels and classes of the train, validation and test masks (and the labelled pixels)."""
    return {
        "train_pixels": int(train.sum()),
        "validation_pixels": int(val.sum()),
        "test_pixels": int(test.sum()),
        "labelled_pixels": int((labels > 0).sum()),
        # classes with at least one pixel: a validation of few whole blocks can hold few classes (cpu-fair's
        # block protocol: 4 blocks, 7 of 16 classes), and then it ranks recipes on those classes only
        "train_classes": _n_present(labels[train]),
        "validation_classes": _n_present(labels[val]),
        "test_classes": _n_present(labels[test]),
    }


@dataclass(frozen=True)
class Photometric:
    """Strengths of the photometric augmentation of a crop (``train.augmentation``; all 0 = none)."""

    brightness: float = 0.0  # b: a per-pixel factor uniform in [1 - b, 1 + b] on the prepared cube's values
    noise: float = 0.0  # sigma of additive Gaussian noise, in band stds
    band_mask: float = 0.0  # share of the bands set to their train mean (0 standardised)

    @property
    def active(self) -> bool:
        return self.brightness > 0 or self.noise > 0 or self.band_mask > 0

    def apply(self, x: torch.Tensor, offset: torch.Tensor | None, gen: torch.Generator) -> torch.Tensor:
        """A new (L, S, S) crop (``x`` and the scene it views are never written): brightness, then noise, then
        the band mask, each drawn from ``gen`` only when its strength is > 0."""
        bands, h, w = x.shape
        if self.brightness > 0:
            a = 1.0 + self.brightness * (2.0 * torch.rand(1, h, w, generator=gen) - 1.0)  # (1, S, S)
            # x_raw -> a x_raw is z -> a z + (a - 1) mean/std on the standardised band
            shift = 0.0 if offset is None else (a - 1.0) * offset.view(bands, 1, 1)
            x = a * x + shift
        if self.noise > 0:
            x = x + self.noise * torch.randn(bands, h, w, generator=gen)
        if self.band_mask > 0:
            k = max(1, int(round(self.band_mask * bands)))
            masked = torch.randperm(bands, generator=gen)[:k]
            keep = torch.ones(bands, 1, 1)
            keep[masked] = 0.0
            x = x * keep  # the masked bands at 0, their train mean
        return x


class CropSampler:
    """Seeded batches of random S x S crops with random flips and rot90 of the crop and its targets together
    (``augment``), photometric augmentation of the crop only (``photometric``: the labels stay), and
    (``per_class`` = k) stratified loss masks: of the train pixels inside the step's crops, at most k per class keep their label, drawn without
    replacement; the rest get the ignore label. Why: whole-crop training sees the majority classes' gradients
    almost only (FPGA's GS^2 sampling, shared/notes/training.md); k caps each class's share of every step.

    Its own ``torch.Generator`` (not the global RNG) so its state is saved and restored exactly, and every rank of
    a TP group, seeded alike, draws the same crops and the same masks.
    """

    def __init__(
        self,
        scene: Scene,
        size: int,
        batch: int,
        seed: int,
        *,
        augment: bool = True,
        per_class: int | None = None,
        photometric: Photometric | None = None,
    ) -> None:
        if size > scene.height or size > scene.width:
            raise TrainDataError(
                f"crop S = {size} (patch x sqrt(tokens) of an entry of train.crops) does not fit the "
                f"{scene.height} x {scene.width} scene {scene.name}; lower that crop's tokens or patch"
            )
        self.scene, self.size, self.batch, self.augment = scene, size, batch, augment
        self.per_class = per_class
        self.photometric = photometric if photometric is not None and photometric.active else None
        self.gen = torch.Generator().manual_seed(seed)

    def _int(self, high: int) -> int:
        return int(torch.randint(high, (1,), generator=self.gen))

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, S, S) float32 inputs and (B, S, S) int64 targets (-1 = not a train pixel)."""
        s = self.size
        xs, ys = [], []
        for _ in range(self.batch):
            top = self._int(self.scene.height - s + 1)
            left = self._int(self.scene.width - s + 1)
            x = self.scene.cube[:, top : top + s, left : left + s]  # (L, S, S)
            y = self.scene.target[top : top + s, left : left + s]  # (S, S)
            if self.augment:
                if self._int(2):
                    x, y = x.flip(-1), y.flip(-1)
                if self._int(2):
                    x, y = x.flip(-2), y.flip(-2)
                k = self._int(4)
                x, y = torch.rot90(x, k, (-2, -1)), torch.rot90(y, k, (-2, -1))
            if self.photometric is not None:  # nothing drawn when off: the crop stream stays what it was
                x = self.photometric.apply(x, self.scene.offset, self.gen)
            xs.append(x)
            ys.append(y)
        y = torch.stack(ys).contiguous()
        if self.per_class is not None:
            y = self._stratify(y)
        return torch.stack(xs).contiguous(), y

    def _stratify(self, y: torch.Tensor) -> torch.Tensor:
        """At most ``per_class`` train pixels per class keep their label (a class absent from the crops adds
        nothing); one randperm per class present, in class order, from the sampler's generator."""
        flat = y.reshape(-1)
        out = torch.full_like(flat, -1)
        for c in torch.unique(flat[flat >= 0]).tolist():
            idx = torch.nonzero(flat == c).view(-1)
            if idx.numel() > self.per_class:
                idx = idx[torch.randperm(idx.numel(), generator=self.gen)[: self.per_class]]
            out[idx] = c
        return out.view_as(y)

    def state_dict(self) -> dict[str, Any]:
        return {"gen": self.gen.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.gen.set_state(state["gen"])
