"""Registry facts: names, the contract's band counts, classes/counts, bad bands, files, schema agreement."""

from __future__ import annotations

import re

import pytest

from hsitp.config import load_schema
from hsitp.data import registry

CONTRACT_BANDS = {  # docs/contracts.md: bands of the prepared cube
    "indian_pines": 200,
    "salinas": 204,
    "salinas_a": 204,
    "pavia_university": 103,
    "pavia_centre": 102,
    "ksc": 176,
    "botswana": 145,
    "houston2013": 144,
    "whu_hi_longkou": 270,
}


def test_names_in_registry_order_and_unknown_name():
    """Catches: a reordered/missing dataset, or an unknown name raising a bare KeyError without the valid names."""
    assert registry.names() == list(CONTRACT_BANDS)
    with pytest.raises(registry.UnknownDatasetError) as err:
        registry.get("pavia")
    assert "unknown dataset 'pavia'" in str(err.value) and "pavia_centre" in str(err.value)


@pytest.mark.parametrize("name", list(CONTRACT_BANDS))
def test_spec_is_consistent(name):
    """Catches: band counts, band numbers, removed-band lists, classes and counts that disagree with each other."""
    s = registry.get(name)
    assert s.bands == CONTRACT_BANDS[name] and len(s.band_numbers) == s.bands
    assert list(s.band_numbers) == sorted(set(s.band_numbers)) and s.band_numbers[0] >= 1
    if s.raw_bands is not None:
        assert s.raw_bands - len(s.removed_bands) == s.bands
        assert not set(s.removed_bands) & set(s.band_numbers) and max(s.band_numbers) <= s.raw_bands
    assert 0 not in s.classes and all(s.classes.values())
    if s.class_counts is not None:
        assert set(s.class_counts) == set(s.classes) and min(s.class_counts.values()) > 0
    assert s.verified == ("grid" not in s.unverified and "class_counts" not in s.unverified)
    assert s.wavelengths_nm is None or len(s.wavelengths_nm) == s.bands
    for f in s.files:
        assert re.fullmatch(r"[0-9a-f]{64}", f.sha256) and f.hash_source
    assert (s.manual is not None) == any(f.manual for f in s.files)


def test_published_facts():
    """Catches: typos in the facts the shared README verified against real files (counts, labels, removed bands)."""
    ip, sa = registry.get("indian_pines"), registry.get("salinas_a")
    assert sum(ip.class_counts.values()) == 10249 and ip.classes[9] == "Oats" and ip.class_counts[9] == 20
    assert sorted(sa.classes) == [1, 10, 11, 12, 13, 14] and sum(sa.class_counts.values()) == 5348
    assert sa.classes[10] == "Corn_senesced_green_weeds" and (sa.rows, sa.cols) == (83, 86)
    assert ip.removed_bands == (*range(104, 109), *range(150, 164), 220)
    assert sa.removed_bands == (*range(108, 113), *range(154, 168), 224)
    assert sum(registry.get("salinas").class_counts.values()) == 54129
    assert sum(registry.get("pavia_university").class_counts.values()) == 42776
    uncorrected = {v.name: v for v in sa.variants}["uncorrected"]
    assert (
        uncorrected.uncorrected
        and uncorrected.cube.name == "SalinasA.mat"
        and uncorrected.cube.variable == "salinasA"
    )


def test_package_copy_is_the_installed_tensorly_file():
    """Catches: the offline Indian Pines pointing at a resource the installed tensorly wheel does not ship."""
    from importlib import metadata, resources

    from hsitp.io import sha256_file

    assert metadata.version("tensorly") == "0.10.0"
    pkg = {v.name: v for v in registry.get("indian_pines").variants}["package"]
    for f in pkg.files:
        res = resources.files(f.package[0]).joinpath(f.package[1])
        with resources.as_file(res) as path:
            assert sha256_file(path) == f.sha256 and path.stat().st_size == f.size


def test_schema_enums_match_registry():
    """Catches: a dataset added to the registry but not to the config schema (or a typo in either)."""
    props = load_schema()["properties"]
    assert props["datasets"]["items"]["enum"] == registry.names()
    assert props["data"]["properties"]["sources"]["propertyNames"]["enum"] == registry.names()
