"""Fetch: source order, verification, and every bad-input case of issue 2, against a loopback server only."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import time
from pathlib import Path

import pytest

from hsitp.data import registry
from hsitp.data.fetch import (
    MANIFEST_NAME,
    FetchError,
    FetchSettings,
    ManifestError,
    ManualDownloadRequired,
    fetch,
    local_status,
    read_manifest,
)
from hsitp.data.registry import DatasetSpec, RawFile, Variant

CUBE = bytes(range(256)) * 64  # 16 KiB of known bytes
GT = b"ground truth bytes" * 10


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _flip(b: bytes, at: int = 100) -> bytes:
    return b[:at] + bytes([b[at] ^ 0xFF]) + b[at + 1 :]


def tiny_spec(base_url: str = "http://127.0.0.1:9/uploads/", manual: bool = False) -> DatasetSpec:
    """A two-file dataset whose 'official' URLs point at ``base_url`` (a loopback server in these tests)."""
    base = base_url.rstrip("/") + "/"
    files = (
        RawFile("tiny.mat", _sha(CUBE), len(CUBE), "tiny", url=base + "1/1a/tiny.mat", manual=manual),
        RawFile("tiny_gt.mat", _sha(GT), len(GT), "tiny_gt", url=base + "2/2b/tiny_gt.mat", manual=manual),
    )
    return DatasetSpec(
        name="tiny",
        title="Tiny",
        rows=2,
        cols=2,
        bands=1,
        raw_bands=None,
        classes={1: "a"},
        class_counts={1: 1},
        sensor="none",
        citation="none",
        licence="none",
        verified=True,
        variants=(Variant("corrected", *files),),
        band_numbers=(1,),
        manual="download tiny by hand into {raw_dir}/tiny/" if manual else None,
    )


def settings(
    tmp_path: Path, order: tuple[str, ...], mirror: str | None = None, retries: int = 0
) -> FetchSettings:
    return FetchSettings(
        raw_dir=tmp_path / "raw",
        order=order,
        mirror=mirror,
        connect_timeout_s=2,
        read_timeout_s=5,
        retries=retries,
    )


def leftovers(folder: Path) -> list[str]:
    """Anything in the cache folder that is not a verified file or the manifest (temporary/partial files)."""
    if not folder.exists():
        return []
    return sorted(
        p.name for p in folder.iterdir() if p.name not in {"tiny.mat", "tiny_gt.mat", MANIFEST_NAME}
    )


def test_download_verified_then_served_from_cache(loopback_http, tmp_path):
    """Catches: downloads not landing in raw_dir/<dataset>/, no manifest, or the cache not being used next time."""
    loopback_http.serve("/uploads/1/1a/tiny.mat", CUBE)
    loopback_http.serve("/uploads/2/2b/tiny_gt.mat", GT)
    spec = tiny_spec(loopback_http.url + "/uploads/")
    s = settings(tmp_path, ("cache", "official"))
    first = fetch(spec, s)
    assert first.source == "official" and first.files["cube"].origin.endswith("/1/1a/tiny.mat")
    assert (tmp_path / "raw/tiny/tiny.mat").read_bytes() == CUBE
    assert leftovers(tmp_path / "raw/tiny") == []
    n_hits = len(loopback_http.hits)
    second = fetch(spec, s)
    assert second.source == "cache" and len(loopback_http.hits) == n_hits
    assert second.files["cube"].origin == first.files["cube"].origin  # origin survives a cache hit
    result, variant = read_manifest(tmp_path / "raw/tiny" / MANIFEST_NAME, spec)
    assert variant.name == "corrected" and result.input_sha256() == {
        "tiny.mat": _sha(CUBE),
        "tiny_gt.mat": _sha(GT),
    }


@pytest.mark.parametrize("where", ["http", "folder"])
def test_byte_flipped_file_is_rejected(loopback_http, tmp_path, where):
    """Catches: a corrupted copy (one byte flipped) accepted, kept in the cache, or reported without both hashes."""
    flipped = _flip(CUBE)
    if where == "http":
        loopback_http.serve("/uploads/1/1a/tiny.mat", flipped)
        spec, s = tiny_spec(loopback_http.url + "/uploads/"), settings(tmp_path, ("official",))
    else:
        (tmp_path / "mirror/tiny").mkdir(parents=True)
        (tmp_path / "mirror/tiny/tiny.mat").write_bytes(flipped)
        spec, s = tiny_spec(), settings(tmp_path, ("mirror",), mirror=str(tmp_path / "mirror"))
    with pytest.raises(FetchError) as err:
        fetch(spec, s)
    msg = str(err.value)
    assert "tiny.mat" in msg and "checksum mismatch" in msg
    assert f"expected sha256 {_sha(CUBE)}" in msg and _sha(flipped) in msg
    assert "What to do" in msg
    assert not (tmp_path / "raw/tiny/tiny.mat").exists() and leftovers(tmp_path / "raw/tiny") == []


def test_connection_cut_mid_file_leaves_nothing_then_retry_succeeds(loopback_http, tmp_path):
    """Catches: a truncated transfer kept as a partial file, or a broken-off download never retried."""
    url = loopback_http.serve("/uploads/1/1a/tiny.mat", CUBE, cut_after=len(CUBE) // 2)
    loopback_http.serve("/uploads/2/2b/tiny_gt.mat", GT)
    spec = tiny_spec(loopback_http.url + "/uploads/")
    with pytest.raises(FetchError) as err:
        fetch(spec, settings(tmp_path, ("official",), retries=0))
    assert "cut mid-file" in str(err.value) and url in str(err.value)
    assert not (tmp_path / "raw/tiny/tiny.mat").exists() and leftovers(tmp_path / "raw/tiny") == []

    loopback_http.serve("/uploads/1/1a/tiny.mat", CUBE, cut_after=len(CUBE) // 2, cut_times=1)
    result = fetch(spec, settings(tmp_path, ("official",), retries=1))
    assert result.files["cube"].sha256 == _sha(CUBE)
    assert loopback_http.hits.count("/uploads/1/1a/tiny.mat") == 3  # cut, then cut + full on the retry run


def test_http_404_names_url_and_status(loopback_http, tmp_path):
    """Catches: a 404 retried pointlessly, reported vaguely, or leaving an HTML error page as the file."""
    spec = tiny_spec(loopback_http.url + "/uploads/")
    with pytest.raises(FetchError) as err:
        fetch(spec, settings(tmp_path, ("official",), retries=2))
    msg = str(err.value)
    assert "HTTP 404" in msg and loopback_http.url + "/uploads/1/1a/tiny.mat" in msg and "tiny.mat" in msg
    assert loopback_http.hits == ["/uploads/1/1a/tiny.mat"]  # no retry of a 404, no gt request for a dead set
    assert leftovers(tmp_path / "raw/tiny") == [] and not (tmp_path / "raw/tiny/tiny.mat").exists()


def test_mirror_folder_missing_file(tmp_path):
    """Catches: a mirror without the file failing silently or without saying which paths were looked at."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with pytest.raises(FetchError) as err:
        fetch(tiny_spec(), settings(tmp_path, ("cache", "mirror"), mirror=str(mirror)))
    msg = str(err.value)
    assert (
        str(mirror / "uploads/1/1a/tiny.mat") in msg and str(mirror / "tiny/tiny.mat") in msg
    )  # both layouts tried
    assert "not present" in msg and "data.mirror" in msg


def test_mirror_url_falls_back_to_shared_layout(loopback_http, tmp_path):
    """Catches: a URL mirror tried only in the official layout, not the ../shared/datasets one."""
    loopback_http.serve("/m/tiny/tiny.mat", CUBE)
    loopback_http.serve("/m/tiny/tiny_gt.mat", GT)
    result = fetch(tiny_spec(), settings(tmp_path, ("mirror",), mirror=loopback_http.url + "/m"))
    assert result.source == "mirror"
    assert loopback_http.hits[:2] == ["/m/uploads/1/1a/tiny.mat", "/m/tiny/tiny.mat"]


def test_corrupt_cached_file_moved_aside_and_replaced(tmp_path):
    """Catches: a corrupt cached file trusted, or left where a verified one is expected."""
    cache = tmp_path / "raw/tiny"
    cache.mkdir(parents=True)
    (cache / "tiny.mat").write_bytes(_flip(CUBE))
    (tmp_path / "mirror/tiny").mkdir(parents=True)
    (tmp_path / "mirror/tiny/tiny.mat").write_bytes(CUBE)
    (tmp_path / "mirror/tiny/tiny_gt.mat").write_bytes(GT)
    result = fetch(tiny_spec(), settings(tmp_path, ("cache", "mirror"), mirror=str(tmp_path / "mirror")))
    assert result.files["cube"].source == "mirror" and (cache / "tiny.mat").read_bytes() == CUBE
    assert (cache / "tiny.mat.rejected").read_bytes() == _flip(CUBE)


def test_manual_only_dataset_not_placed(tmp_path, monkeypatch):
    """Catches: Houston 2013 (registration needed) downloaded behind the user's back or failing without instructions."""
    monkeypatch.delenv("HSITP_DATA_MIRROR", raising=False)
    spec = registry.get("houston2013")
    with pytest.raises(ManualDownloadRequired) as err:
        fetch(spec, settings(tmp_path, ("cache", "mirror", "official", "package")))
    msg = str(err.value)
    assert "2013_DFTC.zip" in msg and "machinelearning.ee.uh.edu/?page_id=459" in msg
    assert f"{tmp_path / 'raw'}/houston2013/2013_DFTC.zip" in msg and spec.files[0].sha256 in msg
    assert not (tmp_path / "raw/houston2013").exists() or leftovers(tmp_path / "raw/houston2013") == []


def test_offline_official_moves_on_to_package_quickly(tmp_path):
    """Catches: an unreachable server stalling the fetch, or the package copy (tensorly wheel) not used after it."""
    with socket.socket() as sock:  # a port with nothing listening: connection refused at once
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    spec = registry.get("indian_pines")
    variants = tuple(
        dataclasses.replace(
            v,
            cube=dataclasses.replace(v.cube, url=dead + v.cube.name if v.cube.url else None),
            gt=dataclasses.replace(v.gt, url=dead + v.gt.name if v.gt.url else None),
        )
        for v in spec.variants
    )
    offline = dataclasses.replace(spec, variants=variants)
    t0 = time.perf_counter()
    result = fetch(offline, settings(tmp_path, ("cache", "official", "package"), retries=2))
    assert time.perf_counter() - t0 < 10
    assert result.variant == "package" and result.source == "package"
    assert "tensorly 0.10.0" in result.files["cube"].origin
    assert result.files["cube"].sha256 == "8f038e4d81569e38ebfc72a15c9984c150de42580ab260be10a13442e912e451"


def test_manifest_detects_changed_file(tmp_path):
    """Catches: prepare trusting a manifest whose file was changed after fetch."""
    (tmp_path / "mirror/tiny").mkdir(parents=True)
    (tmp_path / "mirror/tiny/tiny.mat").write_bytes(CUBE)
    (tmp_path / "mirror/tiny/tiny_gt.mat").write_bytes(GT)
    spec = tiny_spec()
    fetch(spec, settings(tmp_path, ("mirror",), mirror=str(tmp_path / "mirror")))
    (tmp_path / "raw/tiny/tiny_gt.mat").write_bytes(_flip(GT, 3))
    with pytest.raises(ManifestError, match=r"tiny_gt\.mat.*expected sha256"):
        read_manifest(tmp_path / "raw/tiny" / MANIFEST_NAME, spec)


def test_manifest_with_a_wrong_sha256_is_refused(tmp_path):
    """Catches: prepare taking a manifest whose recorded sha256 is not its file's (edited, or another fetch's) and
    carrying that record into the prepared file's provenance, the file itself being the registry's."""
    (tmp_path / "mirror/tiny").mkdir(parents=True)
    (tmp_path / "mirror/tiny/tiny.mat").write_bytes(CUBE)
    (tmp_path / "mirror/tiny/tiny_gt.mat").write_bytes(GT)
    spec = tiny_spec()
    fetch(spec, settings(tmp_path, ("mirror",), mirror=str(tmp_path / "mirror")))
    path = tmp_path / "raw/tiny" / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    manifest["files"]["gt"]["sha256"] = "0" * 64
    path.write_text(json.dumps(manifest))
    with pytest.raises(
        ManifestError, match=r"records sha256 0{64} for .*tiny_gt\.mat, whose bytes are the registry"
    ):
        read_manifest(path, spec)


def test_local_status_per_dataset(tmp_path, monkeypatch):
    """Catches: `data list` calling a package-backed scene 'needs download' or a manual one anything but manual."""
    monkeypatch.delenv("HSITP_DATA_MIRROR", raising=False)
    s = settings(tmp_path, ("cache", "mirror", "official", "package"))
    assert local_status(registry.get("indian_pines"), s)[0] == "preparable offline"
    assert local_status(registry.get("salinas"), s)[0] == "needs download"
    assert local_status(registry.get("whu_hi_longkou"), s)[0] == "needs manual step"
    (tmp_path / "raw/salinas").mkdir(parents=True)
    for f in registry.get("salinas").variants[0].files:
        with open(tmp_path / "raw/salinas" / f.name, "wb") as fh:
            fh.truncate(f.size)  # right size: list checks sizes, fetch checks hashes
    assert local_status(registry.get("salinas"), s)[0] == "cached"


def test_local_status_sees_the_mirror_as_fetch_does(tmp_path, monkeypatch):
    """Catches: `data list` saying 'needs download' for a scene the configured mirror holds (path or file:// URL,
    either mirror layout), or counting a source that data.source_order leaves out."""
    monkeypatch.delenv("HSITP_DATA_MIRROR", raising=False)
    spec = registry.get("salinas")
    mirror = tmp_path / "mirror"
    (mirror / "salinas").mkdir(parents=True)
    for f in spec.variants[0].files:
        with open(mirror / "salinas" / f.name, "wb") as fh:
            fh.truncate(f.size)
    order = ("cache", "mirror", "official")
    for given in (str(mirror), f"file://{mirror}"):
        status, detail = local_status(spec, settings(tmp_path, order, mirror=given))
        assert status == "preparable offline", (given, status, detail)
        assert "mirror" in detail
    # the mirror is not in the source order: fetch would not look there, so neither does list
    assert (
        local_status(spec, settings(tmp_path, ("cache", "official"), mirror=str(mirror)))[0]
        == "needs download"
    )
    # a URL mirror cannot be checked offline: it is named as a download source
    status, detail = local_status(spec, settings(tmp_path, order, mirror="http://127.0.0.1:9/m"))
    assert status == "needs download" and "http://127.0.0.1:9/m/" in detail
    # package-only order for a scene no package ships
    assert local_status(spec, settings(tmp_path, ("package",)))[0] == "unavailable"


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from hsitp.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_unknown_dataset(capsys):
    """Catches: a typo in a dataset name giving a traceback instead of the list of valid names."""
    code, _, err = _cli(capsys, "data", "fetch", "indian_pine", "--config-json", "{}")
    assert (
        code == 2
        and "unknown dataset 'indian_pine'" in err
        and "indian_pines" in err
        and "whu_hi_longkou" in err
    )


def test_cli_prepare_unsupported_source_says_why(capsys, tmp_path):
    """Catches: `data prepare houston2013` downloading or crashing instead of saying it cannot read the GeoTIFF yet."""
    raw = json.dumps({"data": {"raw_dir": str(tmp_path)}})
    code, _, err = _cli(capsys, "data", "prepare", "houston2013", "--config-json", raw)
    assert code == 2 and "houston2013: cannot be prepared yet" in err and "GeoTIFF" in err


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"data": {"partition": {"train_fraction": 1.5}}}, "data.partition.train_fraction"),
        ({"data": {"sources": {"indian_pine": ["package"]}}}, "data.sources"),
        ({"data": {"source_order": ["cache", "ftp"]}}, "data.source_order"),
    ],
)
def test_cli_invalid_config_value(capsys, override, key):
    """Catches: a bad data.* value (or a typo'd dataset key) accepted, or rejected without naming the key."""
    code, _, err = _cli(capsys, "data", "list", "--config-json", json.dumps(override))
    assert code == 2 and key in err


def test_cli_list_json(capsys, tmp_path, monkeypatch):
    """Catches: `hsitp data list` missing a dataset or a field the README promises (grid, citation, terms, status)."""
    monkeypatch.delenv("HSITP_DATA_MIRROR", raising=False)
    code, out, _ = _cli(
        capsys, "data", "list", "--json", "--config-json", json.dumps({"data": {"raw_dir": str(tmp_path)}})
    )
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and list(rows) == registry.names()
    assert (
        rows["houston2013"]["status"] == "needs manual step"
        and rows["indian_pines"]["status"] == "preparable offline"
    )
    for r in rows.values():
        assert r["citation"] and r["licence"] and r["rows"] * r["cols"] * r["bands"] > 0
    assert os.listdir(tmp_path) == []  # listing never writes
