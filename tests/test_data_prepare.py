"""Prepare: normalisation, bad-band removal, registry checks, train/test partitions, PCA; real Indian Pines and
Salinas-A."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from nc_checks import assert_described
from scipy.ndimage import distance_transform_cdt

from hsitp.config import validate_config
from hsitp.data import registry
from hsitp.data.fetch import FetchSettings, fetch, manifest_path, read_manifest
from hsitp.data.partition import PROTOCOLS, TEST, TRAIN, PartitionError, read_partition
from hsitp.data.prepare import PrepareError, normalise_bands, prepare, prepare_arrays, write_prepared
from hsitp.data.registry import DatasetSpec
from hsitp.io import json_attr, read_netcdf, read_provenance
from hsitp.settings import DataSettings

IP_COUNTS = [46, 1428, 830, 237, 483, 730, 28, 478, 20, 972, 2455, 593, 205, 1265, 386, 93]  # published
SA_COUNTS = {1: 391, 10: 1343, 11: 616, 12: 1525, 13: 674, 14: 799}  # published


def cfg(**data) -> dict:
    """Validated config; the synthetic scenes below are smaller than a 16-pixel block, so they default to the
    random protocol alone (tests of the block protocol set it and a smaller block)."""
    data.setdefault("partition", {"protocols": ["random"]})
    return validate_config({"data": data})


def _data(config: dict, seed: int = 0) -> DataSettings:
    return DataSettings.from_config(config.model_copy(update={"seed": seed}))


def scene(rows: int = 40, cols: int = 40) -> np.ndarray:
    """Labels: class 1 left half, class 2 right half, class 3 a 4x5 patch (20 px, like Oats), a border of 0."""
    lab = np.zeros((rows, cols), np.uint8)
    lab[2:-2, 2 : cols // 2] = 1
    lab[2:-2, cols // 2 : -2] = 2
    lab[5:9, 5:10] = 3
    return lab


def spec_for(labels: np.ndarray, bands: int, **kw) -> DatasetSpec:
    counts = {c: int((labels == c).sum()) for c in (1, 2, 3)}
    base = dict(
        name="synthetic",
        title="Synthetic",
        rows=labels.shape[0],
        cols=labels.shape[1],
        bands=bands,
        raw_bands=None,
        classes={1: "a", 2: "b", 3: "c"},
        class_counts=counts,
        sensor="none",
        citation="none",
        licence="none",
        verified=True,
        variants=(),
        band_numbers=tuple(range(1, bands + 1)),
    )
    base.update(kw)
    return DatasetSpec(**base)


def test_normalisation_clips_to_quantiles_and_scales():
    """Catches: min/max scaling (one outlier squashing a band), a constant band turning into NaN, or lost stats."""
    rng = np.random.default_rng(0)
    cube = rng.integers(100, 200, size=(30, 30, 3)).astype(np.int16)
    cube[0, 0, 0] = 30000  # outlier
    cube[..., 2] = 7  # constant band
    out, low, high = normalise_bands(cube, (0.01, 0.99))
    assert out.dtype == np.float32 and out.min() >= 0 and out.max() <= 1 and not np.isnan(out).any()
    assert np.allclose([low[0], high[0]], np.quantile(cube[..., 0].astype(float), [0.01, 0.99]))
    assert out[0, 0, 0] == 1.0 and high[0] < 300  # clipped, and the outlier did not set the scale
    assert (out[..., 2] == 0).all()


def test_uncorrected_bands_removed_and_numbered():
    """Catches: removing the wrong (off-by-one) bands, band coords not the original 1-based numbers, or a
    wavelength coord invented when unknown (or dropped when known)."""
    labels = scene(12, 12)
    removed = (3, 4, 10)
    kept = tuple(b for b in range(1, 11) if b not in removed)
    cube = np.stack(
        [np.full(labels.shape, 100 * b) + np.arange(144).reshape(12, 12) % 7 for b in range(1, 11)], -1
    )
    spec = spec_for(labels, bands=7, raw_bands=10, removed_bands=removed, band_numbers=kept)
    ds = prepare_arrays(spec, cube, labels, uncorrected=True, settings=_data(cfg()))
    assert ds["cube"].dims == ("y", "x", "band") and ds.sizes["band"] == 7
    assert (
        list(ds.band.values) == list(kept) and "wavelength" not in ds.coords
    )  # unknown: omitted, not invented
    known = dataclasses.replace(spec, wavelengths_nm=tuple(400.0 + 10 * b for b in kept))
    with_wl = prepare_arrays(known, cube, labels.astype(float), uncorrected=True, settings=_data(cfg()))
    assert with_wl.wavelength.attrs["units"] == "nm" and with_wl.wavelength.values[2] == 450.0
    assert with_wl.labels.dtype == np.int16  # a MATLAB double label map is accepted when integral
    assert list((ds.norm_low.values // 100).astype(int)) == list(kept)  # each kept band is the right raw band
    assert json.loads(json.dumps(ds.attrs["bad_bands_removed"])) == list(removed)


def test_class_count_mismatch_verified_is_error_unverified_is_warning():
    """Catches: a ground truth with different counts accepted silently (or an unverified registry fact blocking use)."""
    labels = scene()
    spec = spec_for(labels, bands=2)
    wrong = dataclasses.replace(spec, class_counts={**spec.class_counts, 3: 21})
    cube = np.random.default_rng(1).random((*labels.shape, 2))
    with pytest.raises(PrepareError, match=r"class counts differ.*3: \(20, 21\)"):
        prepare_arrays(wrong, cube, labels, uncorrected=False, settings=_data(cfg()))
    unverified = dataclasses.replace(wrong, verified=False, unverified={"class_counts": "commonly reported"})
    ds = prepare_arrays(unverified, cube, labels, uncorrected=False, settings=_data(cfg()))
    assert "class counts differ" in ds.attrs["registry_check"]


def test_grid_and_labels_checked():
    """Catches: a cube on the wrong grid or a ground truth with labels the registry does not know being accepted."""
    labels = scene()
    cube = np.zeros((*labels.shape, 2))
    with pytest.raises(PrepareError, match="grid 40 x 40, registry 41 x 40"):
        prepare_arrays(spec_for(labels, 2, rows=41), cube, labels, uncorrected=False, settings=_data(cfg()))
    stray = labels.copy()
    stray[0, 0] = 9
    with pytest.raises(PrepareError, match=r"labels \[9\] are not classes"):
        prepare_arrays(spec_for(labels, 2), cube, stray, uncorrected=False, settings=_data(cfg()))


def test_random_partition_stratified_min_per_class_and_seeded():
    """Catches: an unstratified partition, small classes (Oats: 20 px) without training pixels, or unseeded
    partitions."""
    labels = scene()
    spec = spec_for(labels, bands=2)
    cube = np.random.default_rng(2).random((*labels.shape, 2))
    c = cfg(partition={"protocols": ["random"], "train_fraction": 0.1, "min_train_per_class": 5})
    a = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(c, 3))
    b = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(c, 3))
    other = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(c, 4))
    counts = {int(k): v for k, v in a.attrs["partition_counts"]["random"][0].items()}
    for cls, n in spec.class_counts.items():
        assert counts[cls]["train"] == max(5, int(np.floor(0.1 * n + 0.5)))
        assert counts[cls]["train"] + counts[cls]["test"] == n
    assert counts[3]["train"] == 5  # the minimum, not round(0.1 * 20) = 2
    assert np.array_equal(a.partition, b.partition) and not np.array_equal(a.partition, other.partition)
    assert a.partition.dtype == np.int8 and ((read_partition(a, "random") > 0) == (labels > 0)).all()


def test_block_partition_leaves_one_patch_guard_band():
    """Catches: test pixels within one patch of a train pixel (overlapping patches leak) in block mode."""
    labels = scene(64, 64)
    spec = spec_for(labels, bands=2)
    cube = np.random.default_rng(3).random((*labels.shape, 2))
    patch = 3
    c = cfg(
        partition={
            "protocols": ["block"],
            "train_fraction": 0.2,
            "block": 8,
            "patch": patch,
            "min_train_per_class": 5,
        }
    )
    ds = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(c))
    part = read_partition(ds, "block")
    dist = distance_transform_cdt(
        part != TRAIN, metric="chessboard"
    )  # (y, x) distance to nearest train pixel
    assert (part == TEST).any() and (part == TRAIN).any()
    assert dist[part == TEST].min() > patch
    counts = {int(k): v for k, v in ds.attrs["partition_counts"]["block"][0].items()}
    assert ds.attrs["partition_test_near_train"]["block"] == [0.0]  # the guard band, measured the same way
    assert (
        counts[1]["train"] > 0 and counts[2]["train"] > 0 and counts[1]["test"] > 0 and counts[2]["test"] > 0
    )


def test_file_carries_both_protocols_each_seeded_on_its_own():
    """Catches: a prepared file with one partition only (training could not pick the honest one), a protocol whose
    partition depends on which other protocols are configured (or their order), counts or warnings not per protocol,
    or a reader that returns the wrong protocol or fails without naming the ones present."""
    labels = scene(64, 64)
    spec = spec_for(labels, bands=2)
    cube = np.random.default_rng(5).random((*labels.shape, 2))
    part_cfg = {"train_fraction": 0.2, "block": 8, "patch": 3, "min_train_per_class": 5}
    both = prepare_arrays(
        spec,
        cube,
        labels,
        uncorrected=False,
        settings=_data(cfg(partition={**part_cfg, "protocols": ["block", "random"]}), 1),
    )
    assert (
        both.partition.dims == ("protocol", "partition_index", "y", "x") and both.partition.dtype == np.int8
    )
    assert list(both.protocol.values) == list(PROTOCOLS) == ["random", "block"]  # canonical order
    assert set(np.unique(both.partition.values)) <= {0, 1, 2}
    for p in PROTOCOLS:
        alone = prepare_arrays(
            spec,
            cube,
            labels,
            uncorrected=False,
            settings=_data(cfg(partition={**part_cfg, "protocols": [p]}), 1),
        )
        assert list(alone.protocol.values) == [p]
        assert np.array_equal(read_partition(both, p), read_partition(alone, p))
        assert np.array_equal(
            read_partition(both, p), both.partition.sel(protocol=p).isel(partition_index=0).values
        )
        counts = both.attrs["partition_counts"][p][0]
        got = read_partition(both, p)
        for cls in (1, 2, 3):
            m = labels == cls
            assert counts[str(cls)] == {
                "train": int((m & (got == TRAIN)).sum()),
                "test": int((m & (got == TEST)).sum()),
                "unused": int((m & (got == 0)).sum()),
            }
        assert isinstance(both.attrs["partition_warnings"][p][0], list)
    assert not np.array_equal(read_partition(both, "random"), read_partition(both, "block"))
    # random: nearly every test pixel sees a train pixel within the patch radius; block: none (guard band)
    assert both.attrs["partition_test_near_train"]["random"][0] > 0.9
    assert both.attrs["partition_test_near_train"]["block"] == [0.0]
    with pytest.raises(
        PartitionError, match=r"'block' is not in the prepared file, which holds \['random'\]"
    ):
        read_partition(both.sel(protocol=["random"]), "block")


def test_pca_replaces_band_dim_with_component():
    """Catches: PCA output on the wrong dim, unsorted components, or nondeterministic signs."""
    labels = scene(16, 16)
    rng = np.random.default_rng(4)
    cube = rng.random((*labels.shape, 6)) @ rng.random((6, 6))
    spec = spec_for(labels, bands=6)
    a = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(cfg(pca_components=3)))
    b = prepare_arrays(spec, cube, labels, uncorrected=False, settings=_data(cfg(pca_components=3)))
    assert a["cube"].dims == ("y", "x", "component") and a.sizes["component"] == 3
    ratio = a.pca_explained_variance_ratio.values
    assert (np.diff(ratio) <= 0).all() and 0 < ratio.sum() <= 1
    assert a.pca_components.dims == ("component", "band") and np.array_equal(a.cube, b.cube)
    assert_described(a, "dataset with PCA")


def _fetch_prepare_write(name: str, tmp_path, data_cfg: dict):
    c = cfg(raw_dir=str(tmp_path / "raw"), **data_cfg)
    spec = registry.get(name)
    data = DataSettings.from_config(c)
    settings = FetchSettings.of(data, name)
    fetch(spec, settings)
    fetched, variant = read_manifest(manifest_path(settings, name), spec)
    out = write_prepared(prepare(spec, fetched, variant, data), tmp_path / f"{name}.nc", data, fetched)
    return read_netcdf(out, kind="dataset"), fetched


def test_indian_pines_from_package(tmp_path):
    """Catches: the offline Indian Pines (tensorly wheel) not giving 145 x 145 x 200 with the 16 published counts."""
    ds, fetched = _fetch_prepare_write("indian_pines", tmp_path, {"sources": {"indian_pines": ["package"]}})
    assert ds["cube"].dims == ("y", "x", "band") and ds["cube"].shape == (145, 145, 200)
    assert ds["cube"].dtype == np.float32 and ds.labels.dtype == np.int16 and ds.partition.dtype == np.int8
    counts = np.bincount(ds.labels.values.ravel(), minlength=17)[1:]
    assert counts.tolist() == IP_COUNTS
    assert json_attr(ds, "class_names")["9"] == "Oats" and ds.attrs["source"] == "package"
    assert 104 not in ds.band.values and ds.band.values[-1] == 219  # 1-based AVIRIS numbers, bad bands gone
    assert float(ds["cube"].min()) == 0.0 and float(ds["cube"].max()) == 1.0
    assert read_provenance(ds)["input_sha256"] == fetched.input_sha256()


@pytest.mark.shared
def test_salinas_a_from_shared_mirror(tmp_path, shared_datasets):
    """Catches: uncorrected SalinasA.mat (224 bands) not reduced to 83 x 86 x 204 with its 6 published counts."""
    ds, fetched = _fetch_prepare_write(
        "salinas_a", tmp_path, {"mirror": str(shared_datasets), "sources": {"salinas_a": ["cache", "mirror"]}}
    )
    assert fetched.variant == "uncorrected" and ds.attrs["source"] == "mirror"
    assert ds["cube"].shape == (83, 86, 204)
    values, counts = np.unique(ds.labels.values[ds.labels.values > 0], return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist(), strict=True)) == SA_COUNTS
    assert not set(range(108, 113)) & set(ds.band.values.tolist()) and 224 not in ds.band.values
    assert json_attr(ds, "class_names")["10"] == "Corn_senesced_green_weeds"
