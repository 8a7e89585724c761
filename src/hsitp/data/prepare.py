"""Turn a fetched scene into the analysis-ready netCDF every later stage reads (``results/<run>/data/<dataset>.nc``).

Contents: ``cube`` (y, x, band) float32 with bad bands removed (uncorrected sources only) and each band clipped to
its 1st/99th percentile over all pixels (the paper's "0.01 quantile") then scaled to [0, 1]; optionally PCA to k
components (dim ``component``); ``labels`` (y, x) int16 (0 = unlabelled); the train/test ``partition`` int8 (0
unused, 1 train, 2 test) per accuracy protocol and partition index: ``partition`` (protocol, partition_index, y,
x), K = ``data.partition.draws`` seeded draws for each of ``data.partition.protocols``
(``hsitp.data.partition.read_partition`` picks one). Normalisation and PCA statistics use every pixel of the scene and never the labels, so they
leak nothing from test pixels into training beyond what an unsupervised preprocessing step sees.
The grid, band count and class counts are checked against the registry: a mismatch is an error for a verified
fact and a recorded warning for an unverified one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from hsitp.contracts import DATASET
from hsitp.data.fetch import FetchResult
from hsitp.data.matfile import load_array
from hsitp.data.partition import (
    INDEX,
    TEST,
    TRAIN,
    UNUSED,
    PartitionResult,
    check_satisfiable,
    make_partition,
    near_train_fraction,
)
from hsitp.data.registry import DatasetSpec, Variant
from hsitp.errors import HsitpError
from hsitp.io import provenance, variable, write_netcdf
from hsitp.names import PROTOCOLS
from hsitp.sections.data import Partition
from hsitp.settings import DataSettings

log = logging.getLogger(__name__)

NORMALISATION = (
    "per band: clip to the [q_low, q_high] quantiles of all pixels of the scene (labels unused; numpy linear "
    "quantiles), then (v - low) / (high - low) into [0, 1]; a constant band becomes 0"
)


class PrepareError(HsitpError):
    """A fetched file does not hold what the registry says (grid, bands, labels, counts)."""


def normalise_bands(
    cube: np.ndarray, quantiles: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, x, L) any dtype -> float32 in [0, 1], plus the per-band low/high clip values (raw units); ``quantiles``
    (low, high) with low < high, as the config's check of ``data.clip_quantiles`` holds them."""
    q_lo, q_hi = float(quantiles[0]), float(quantiles[1])
    n_bands = cube.shape[-1]
    out = np.empty(cube.shape, dtype=np.float32)
    low = np.empty(n_bands)
    high = np.empty(n_bands)
    for b in range(n_bands):  # one band at a time keeps peak memory at one float64 band
        band = cube[..., b].astype(np.float64)  # (y, x)
        low[b], high[b] = np.quantile(band, [q_lo, q_hi])
        span = high[b] - low[b]
        out[..., b] = (np.clip(band, low[b], high[b]) - low[b]) / span if span > 0 else 0.0
    return out, low, high


def pca_reduce(cube: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PCA over all pixels: (y, x, L) -> scores (y, x, k) float32, components (k, L), mean (L), explained ratio (k).

    Signs are fixed (largest-magnitude loading positive) so the same input always gives the same output.
    """
    rows, cols, n_bands = cube.shape
    if not 1 <= k <= n_bands:
        raise PrepareError(f"data.pca_components = {k}: must be between 1 and the {n_bands} bands")
    x = cube.reshape(-1, n_bands).astype(np.float64)  # (N, L)
    mean = x.mean(axis=0)
    x -= mean
    cov = x.T @ x / max(x.shape[0] - 1, 1)  # (L, L)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1][:k]
    comps = evecs[:, order].T  # (k, L)
    flip = np.sign(comps[np.arange(k), np.abs(comps).argmax(axis=1)])
    comps *= flip[:, None]
    scores = (x @ comps.T).reshape(rows, cols, k).astype(np.float32)  # (y, x, k)
    ratio = np.clip(evals[order], 0, None) / max(float(np.clip(evals, 0, None).sum()), np.finfo(float).tiny)
    return scores, comps, mean, ratio


def dataset_seed(seed: int, dataset: str) -> np.random.SeedSequence:
    """A stream per (config seed, dataset): stable across runs, machines and registry order."""
    name_key = int.from_bytes(hashlib.sha256(dataset.encode()).digest()[:4], "little")
    return np.random.SeedSequence([seed, name_key])


def _check_or_warn(spec: DatasetSpec, fact: str, message: str, where: str, warnings: list[str]) -> None:
    if fact in spec.unverified:
        warnings.append(f"{message} (registry value unverified: {spec.unverified[fact]})")
        log.warning("%s: %s", where, warnings[-1])
    else:
        raise PrepareError(
            f"{where}: {message}. The registry value is verified, so the file is not the registered one: "
            f"delete it and run `hsitp data fetch {spec.name}` again."
        )


def prepare_arrays(
    spec: DatasetSpec,
    cube: np.ndarray,
    labels: np.ndarray,
    *,
    uncorrected: bool,
    settings: DataSettings,
    where: str = "input",
) -> xr.Dataset:
    """The prepared Dataset from in-memory arrays (no file access; ``where`` names the source in errors)."""
    warnings: list[str] = []  # unverified registry facts the file disagrees with
    cube = _checked_cube(spec, cube, labels, uncorrected=uncorrected, where=where, warnings=warnings)
    labels16, counts = _checked_labels(spec, labels, where=where, warnings=warnings)
    q = settings.clip_quantiles
    cube01, low, high = normalise_bands(cube, q)
    part = settings.partition
    protocols = [
        p for p in PROTOCOLS if p in part.protocols
    ]  # canonical order: a reordered list, the same file
    partitions = _partitions(spec, labels16, part, protocols, settings.seed)
    coords = _coords(spec, labels16.shape, protocols, draws=part.draws)
    data_vars = _label_vars(spec, labels16)
    data_vars.update(_partition_vars(partitions, protocols))
    data_vars.update(_clip_vars(low, high, q))
    pca_text = _cube_vars(cube01, settings.pca_components, data_vars, coords)
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(
        {
            "title": f"{spec.title}: prepared scene",
            "dataset": spec.name,
            "class_names": {str(c): n for c, n in spec.classes.items()},
            "class_counts": {str(c): n for c, n in counts.items()},
            **_partition_attrs(partitions, protocols, part),
            "seed": settings.seed,
            "normalisation": NORMALISATION.replace("q_low", str(q[0])).replace("q_high", str(q[1])),
            "pca": pca_text,
            "bad_bands_removed": list(spec.removed_bands) if uncorrected else [],
            "band_numbering": spec.band_numbering,
            "registry_verified": spec.verified,
            "registry_check": "; ".join(warnings) or "grid, band count and class counts match the registry",
            "unverified_registry_facts": dict(spec.unverified),
            "sensor": spec.sensor,
            "citation": spec.citation,
            "licence": spec.licence,
        }
    )
    return ds


def _checked_cube(
    spec: DatasetSpec,
    cube: np.ndarray,
    labels: np.ndarray,
    *,
    uncorrected: bool,
    where: str,
    warnings: list[str],
) -> np.ndarray:
    """The cube on the label map's grid, checked against the registry (grid, band count), bad bands removed from
    an uncorrected source."""
    if cube.ndim != 3 or labels.ndim != 2 or cube.shape[:2] != labels.shape:
        raise PrepareError(
            f"{where}: expected a (rows, cols, bands) cube and a (rows, cols) label map on the same grid, "
            f"found cube {cube.shape} and labels {labels.shape}"
        )
    rows, cols, n_in = cube.shape
    if (rows, cols) != (spec.rows, spec.cols):
        _check_or_warn(
            spec, "grid", f"grid {rows} x {cols}, registry {spec.rows} x {spec.cols}", where, warnings
        )
    expected_in = spec.raw_bands if uncorrected else spec.bands
    if n_in != expected_in:
        raise PrepareError(
            f"{where}: {n_in} bands, expected {expected_in} ({'uncorrected' if uncorrected else 'corrected'} "
            f"{spec.name}); the file is not the registered one: delete it and fetch again."
        )
    if uncorrected:
        drop = {b - 1 for b in spec.removed_bands}
        cube = cube[..., [i for i in range(n_in) if i not in drop]]  # (y, x, bands)
    return cube


def _checked_labels(
    spec: DatasetSpec, labels: np.ndarray, *, where: str, warnings: list[str]
) -> tuple[np.ndarray, dict[int, int]]:
    """The label map as int16 and the pixels per registry class; PrepareError for a label that is no class."""
    if np.issubdtype(labels.dtype, np.floating) and np.array_equal(labels, np.round(labels)):
        labels = labels.astype(np.int64)  # MATLAB often stores label maps as double
    if (
        not np.issubdtype(labels.dtype, np.integer)
        or labels.min() < 0
        or labels.max() > np.iinfo(np.int16).max
    ):
        raise PrepareError(
            f"{where}: ground truth must hold non-negative integer labels below 32768, found {labels.dtype} "
            f"values {labels.min()}..{labels.max()}"
        )
    labels16 = labels.astype(np.int16)
    classes = sorted(spec.classes)
    found = {int(v): int(n) for v, n in zip(*np.unique(labels16, return_counts=True), strict=True) if v != 0}
    stray = sorted(set(found) - set(classes))
    if stray:
        raise PrepareError(
            f"{where}: labels {stray} are not classes of {spec.name} (registry labels {classes}); "
            "the ground truth is not the registered file: delete it and fetch again."
        )
    counts = {c: found.get(c, 0) for c in classes}
    if spec.class_counts is not None and counts != dict(spec.class_counts):
        diff = {c: (counts[c], spec.class_counts[c]) for c in classes if counts[c] != spec.class_counts[c]}
        _check_or_warn(
            spec, "class_counts", f"class counts differ (label: (found, registry)) {diff}", where, warnings
        )
    return labels16, counts


def _partitions(
    spec: DatasetSpec, labels16: np.ndarray, part: Partition, protocols: Sequence[str], seed: int
) -> dict[str, list[PartitionResult]]:
    """Every configured protocol's K = ``data.partition.draws`` partitions, each from its own seeded stream (draw k
    the same whatever K); their warnings logged."""
    classes, seed_seq = sorted(spec.classes), dataset_seed(seed, spec.name)
    check_satisfiable({c: int(np.count_nonzero(labels16 == c)) for c in classes}, part, spec.name)
    partitions = {
        p: [make_partition(labels16, classes, p, part, seed_seq, k) for k in range(part.draws)]
        for p in protocols
    }
    for p, results in partitions.items():
        for k, res in enumerate(results):
            for w in res.warnings:
                log.warning("%s %s partition %d: %s", spec.name, p, k, w)
    return partitions


def _coords(
    spec: DatasetSpec, grid: tuple[int, ...], protocols: Sequence[str], *, draws: int
) -> dict[str, Any]:
    """protocol, partition_index, y, x, band (the original numbers) and, where the registry knows them, the
    wavelengths."""
    rows, cols = grid
    coords: dict[str, Any] = {
        "protocol": (
            "protocol",
            np.array(protocols, dtype=object),
            {
                "long_name": "accuracy protocol (how the train/test partition is drawn)",
                "comment": "random = stratified per class; block = spatially disjoint blocks, test pixels beyond "
                "a guard band one patch wide",
            },
        ),
        INDEX: variable(
            INDEX,
            np.arange(draws, dtype=np.int32),
            "partition index: the K seeded draws of each protocol's partition (data.partition.draws)",
            comment="a replicate is (partition index, training seed); draw k is the same whatever the number of draws",
        ),
        "y": variable("y", np.arange(rows, dtype=np.int32), "row (pixel index)"),
        "x": variable("x", np.arange(cols, dtype=np.int32), "column (pixel index)"),
        "band": variable(
            "band",
            np.asarray(spec.band_numbers, dtype=np.int32),
            "original band number (1-based)",
            comment=spec.band_numbering,
        ),
    }
    if spec.wavelengths_nm is not None:
        wavelengths = np.asarray(spec.wavelengths_nm, dtype=np.float64)
        coords["wavelength"] = variable("band", wavelengths, "band centre wavelength", "nm")
    return coords


def _label_vars(spec: DatasetSpec, labels16: np.ndarray) -> dict[str, Any]:
    """The label map with CF flag attributes: one blank-free word per class (the exact names in class_names)."""
    labelled = [c for c in sorted(spec.classes) if c != 0]
    class_words = ["unlabelled"] + [re.sub(r"\s+", "_", spec.classes[c].strip()) for c in labelled]
    return {
        "labels": (
            ("y", "x"),
            labels16,
            {
                "long_name": "class label (0 = unlabelled)",
                "class_names": dict(spec.classes),
                "flag_values": np.array([0, *labelled], dtype=np.int16),
                "flag_meanings": " ".join(class_words),
            },
        )
    }


def _partition_vars(
    partitions: Mapping[str, Sequence[PartitionResult]], protocols: Sequence[str]
) -> dict[str, Any]:
    return {
        "partition": (
            ("protocol", INDEX, "y", "x"),
            # (protocol, k, y, x)
            np.stack([np.stack([r.partition for r in partitions[p]]) for p in protocols]),
            {
                "long_name": "train/test partition of labelled pixels, K per accuracy protocol",
                "flag_values": np.array([UNUSED, TRAIN, TEST], dtype=np.int8),
                "flag_meanings": "unused train test",
                "comment": "read one with hsitp.data.partition.read_partition(ds, protocol, index)",
            },
        )
    }


def _clip_vars(low: np.ndarray, high: np.ndarray, q: Sequence[float]) -> dict[str, Any]:
    """The per-band clip bounds, in raw units: the source file's values (sensor digital numbers or scaled
    reflectance, dimensionless)."""
    return {
        f"norm_{end}": variable("band", v, f"per-band clip {end} (q={qv}) in the source file's raw values")
        for end, v, qv in (("low", low, q[0]), ("high", high, q[1]))
    }


def _cube_vars(cube01: np.ndarray, k: Any, data_vars: dict[str, Any], coords: dict[str, Any]) -> str:
    """The normalised cube into ``data_vars`` (with PCA to ``k`` components: its scores, loadings, mean and
    explained variance, and the ``component`` coordinate); returns the ``pca`` attribute's text."""
    if k is None:
        cube_attrs = {
            "long_name": "per-band robust-normalised radiance/reflectance",
            "units": "1",
            "comment": NORMALISATION,
        }
        data_vars["cube"] = (("y", "x", "band"), cube01, cube_attrs)
        return "off"
    scores, comps, mean, ratio = pca_reduce(cube01, int(k))
    coords["component"] = variable(
        "component", np.arange(1, int(k) + 1, dtype=np.int32), "PCA component (1-based)"
    )
    data_vars["cube"] = (
        ("y", "x", "component"),
        scores,
        {
            "long_name": "PCA scores of the normalised cube",
            "units": "1",
            "comment": NORMALISATION + "; then PCA",
        },
    )
    data_vars["pca_components"] = variable(("component", "band"), comps, "PCA loadings")
    data_vars["pca_mean"] = variable("band", mean, "per-band mean removed before PCA")
    data_vars["pca_explained_variance_ratio"] = variable(
        "component", ratio, "fraction of the variance each component explains"
    )
    return f"{k} components fitted on all pixels of the normalised cube (labels unused)"


def _partition_attrs(
    partitions: Mapping[str, Sequence[PartitionResult]], protocols: Sequence[str], part: Partition
) -> dict[str, Any]:
    """What the partitions hold, per protocol a list over the partition indices: counts per class, warnings, and
    the leak (test pixels near a train one); and the settings."""
    patch = part.patch
    return {
        "partition_protocols": protocols,
        "partition_counts": {
            p: [{str(c): v for c, v in r.counts.items()} for r in rs] for p, rs in partitions.items()
        },
        "partition_settings": part.attrs(),
        "partition_warnings": {p: [list(r.warnings) for r in rs] for p, rs in partitions.items()},
        # leakage: test pixels whose (2 patch + 1)^2 window holds a train pixel (0 for block by construction)
        "partition_test_near_train": {
            p: [near_train_fraction(r.partition, patch) for r in rs] for p, rs in partitions.items()
        },
        "partition_test_near_train_radius": patch,
    }


def prepare(spec: DatasetSpec, fetched: FetchResult, variant: Variant, settings: DataSettings) -> xr.Dataset:
    """Load the fetched files and build the prepared Dataset (source attrs included); a scene the registry marks
    ``prepare_unsupported`` was refused by `hsitp data prepare` before any download."""
    cube_f = fetched.files["cube"]
    gt_f = fetched.files.get("gt")
    if gt_f is None or variant.gt is None:
        raise PrepareError(f"{spec.name}: variant {variant.name!r} has no ground-truth file")
    cube = load_array(cube_f.path, variant.cube.variable)
    labels = load_array(gt_f.path, variant.gt.variable)
    where = f"{cube_f.path} + {gt_f.path}"
    ds = prepare_arrays(spec, cube, labels, uncorrected=variant.uncorrected, settings=settings, where=where)
    ds.attrs.update(
        {
            "source": fetched.source,
            "variant": variant.name,
            "source_files": [
                {"name": f.name, "sha256": f.sha256, "source": f.source, "origin": f.origin}
                for f in fetched.files.values()
            ],
        }
    )
    return ds


def write_prepared(
    ds: xr.Dataset, path: str | os.PathLike[str], settings: DataSettings, fetched: FetchResult
) -> Path:
    """Atomic netCDF write through hsitp.io with provenance (input sha256s = the verified raw files)."""
    prov = provenance(
        config=settings.config,
        input_sha256=fetched.input_sha256(),
        extra={"dataset": fetched.dataset, "source": fetched.source, "variant": fetched.variant},
    )
    return write_netcdf(ds, path, kind=DATASET.kind, prov=prov, title=ds.attrs.get("title"))
