"""Get a dataset's raw files into the local cache, each verified by sha256, from the first source that has them.

Sources, tried in the configured order (``data.sources.<dataset>`` or ``data.source_order``):

- ``cache``: ``<raw_dir>/<dataset>/<file>`` already there and verified;
- ``mirror``: ``data.mirror`` or env ``HSITP_DATA_MIRROR``, a folder or a base URL; the official path layout
  (``<mirror>/6/67/Indian_pines_corrected.mat``) first, then the ``../shared/datasets`` layout
  (``<mirror>/<dataset>/<file>``);
- ``official``: the distributor's URL (short connect timeout: an offline machine moves on in seconds);
- ``package``: a copy shipped inside an installed Python package (Indian Pines in the tensorly 0.10.0 wheel).

Within a source the dataset's variants are tried in registry order (e.g. corrected cube, then uncorrected cube).
Downloads go through pooch (known sha256, atomic move after verification); local copies are hashed while copied
to a temporary file that is renamed only when the hash matches. A cached file whose hash is wrong is moved aside
to ``<file>.rejected``, so no partial or unverified file is ever left where a verified one is expected.
The outcome is written to ``<raw_dir>/<dataset>/fetch.json`` (the manifest the prepare step reads).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, get_args
from urllib.parse import urlparse

from hsitp.data.registry import DatasetSpec, RawFile, Variant
from hsitp.errors import HsitpError
from hsitp.io import atomic_write, atomic_write_text, default_file_mode, sha256_file
from hsitp.sections.data import Source
from hsitp.settings import DataSettings

log = logging.getLogger(__name__)

SOURCES: tuple[str, ...] = get_args(Source)
MANIFEST_NAME = "fetch.json"
MIRROR_ENV = "HSITP_DATA_MIRROR"
REJECTED_SUFFIX = ".rejected"


class FetchError(HsitpError):
    """No source delivered a complete, verified file set for a dataset."""


class ManualDownloadRequired(FetchError):
    """A dataset that needs registration has not been placed in the cache or mirror yet."""


class ManifestError(HsitpError):
    """The fetch manifest is missing, unreadable or lists files that are gone or changed."""


@dataclass(frozen=True)
class FetchSettings:
    """The part of the ``data`` config that decides where files come from."""

    raw_dir: Path
    order: tuple[str, ...]
    connect_timeout_s: float
    read_timeout_s: float
    retries: int
    mirror: str | None = None
    progressbar: bool = False

    @classmethod
    def of(cls, data: DataSettings, dataset: str) -> FetchSettings:
        """The fetch settings of ``dataset`` (its own ``data.sources`` order, else ``data.source_order``)."""
        return cls(
            raw_dir=Path(data.raw_dir),
            order=tuple(data.sources.get(dataset, data.source_order)),
            mirror=data.mirror or os.environ.get(MIRROR_ENV) or None,
            connect_timeout_s=data.connect_timeout_s,
            read_timeout_s=data.read_timeout_s,
            retries=data.retries,
            progressbar=sys.stderr.isatty(),
        )

    def cache_dir(self, dataset: str) -> Path:
        return self.raw_dir / dataset


@dataclass(frozen=True)
class FetchedFile:
    role: str  # "cube" or "gt"
    name: str
    path: str
    sha256: str
    size: int
    source: str  # the source that delivered it in this run
    origin: str  # where the bytes first came from (URL, mirror path, package resource)


@dataclass(frozen=True)
class FetchResult:
    dataset: str
    variant: str
    source: str  # source of the cube file in this run
    files: dict[str, FetchedFile]
    fetched_utc: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def input_sha256(self) -> dict[str, str]:
        return {f.name: f.sha256 for f in self.files.values()}


class _Miss(Exception):
    """One source could not deliver one file: where it looked, why not and the kind of miss (absent | checksum |
    http | connect | cut | manual | unavailable), kept as (source, miss) pairs for the final report."""

    def __init__(self, where: str, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.where, self.reason, self.kind = where, reason, kind


# --- verification and local copies ------------------------------------------------------------------------------
def _expected(f: RawFile) -> str:
    size = f", {f.size} bytes" if f.size is not None else ""
    return f"sha256 {f.sha256}{size}"


def _check(path: Path, f: RawFile) -> str | None:
    """None when ``path`` holds the registered bytes, else what was found instead."""
    size = path.stat().st_size
    if f.size is not None and size != f.size:
        return f"{size} bytes"
    found = sha256_file(path)
    return None if found == f.sha256 else f"sha256 {found} ({size} bytes)"


def _copy_verified(src: BinaryIO, f: RawFile, dest_dir: Path, where: str) -> Path:
    """Stream ``src`` into ``dest_dir/f.name`` via a temporary file, hashing on the way; rename only if it matches
    (:func:`hsitp.io.atomic_write` removes the temporary file when the hash check raises)."""

    def write(tmp: str) -> None:
        h, size = hashlib.sha256(), 0
        with open(tmp, "wb") as out:
            while block := src.read(1 << 20):
                h.update(block)
                out.write(block)
                size += len(block)
        if h.hexdigest() != f.sha256:
            found = f"sha256 {h.hexdigest()} ({size} bytes)"
            raise _Miss(where, f"checksum mismatch: expected {_expected(f)}, found {found}", "checksum")

    return atomic_write(dest_dir / f.name, write)


# --- network ------------------------------------------------------------------------------------------------------
_FOUND_HASH = re.compile(r"but got ([0-9a-f]{64})")


def _root_cause(exc: BaseException) -> str:
    """The innermost error behind a requests exception, e.g. 'gaierror: Name or service not known'."""
    seen = {id(exc)}
    while True:
        nxt = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc.__context__
        if nxt is None or id(nxt) in seen:
            return f"{type(exc).__name__}: {exc}"
        seen.add(id(nxt))
        exc = nxt


def _download(url: str, f: RawFile, dest_dir: Path, s: FetchSettings, dead_hosts: set[str]) -> Path:
    """pooch.retrieve with the known hash; retries only a transfer that broke off, never a 404 or a wrong hash."""
    import pooch
    import requests

    host = urlparse(url).netloc
    if host in dead_hosts:
        raise _Miss(url, f"skipped: {host} did not answer earlier in this run", "connect")
    downloader = pooch.HTTPDownloader(
        progressbar=s.progressbar, timeout=(s.connect_timeout_s, s.read_timeout_s)
    )
    dest_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(s.retries + 1):
        try:
            path = pooch.retrieve(
                url, known_hash=f"sha256:{f.sha256}", fname=f.name, path=dest_dir, downloader=downloader
            )
            Path(path).chmod(default_file_mode())  # pooch's temporary files are created 0600
            return Path(path)
        except requests.exceptions.HTTPError as exc:
            resp = exc.response
            status = f"HTTP {resp.status_code} {resp.reason}" if resp is not None else str(exc)
            raise _Miss(url, f"{status} (expected the file, {_expected(f)})", "http") from exc
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ReadTimeout) as exc:
            miss = _Miss(url, f"connection cut mid-file or stalled ({type(exc).__name__}: {exc})", "cut")
        except requests.exceptions.ConnectionError as exc:
            if "Read timed out" in str(exc):  # a stall in the body surfaces as ConnectionError
                miss = _Miss(url, f"transfer stalled for more than {s.read_timeout_s:g} s", "cut")
            else:
                dead_hosts.add(host)
                raise _Miss(
                    url, f"no connection within {s.connect_timeout_s:g} s ({_root_cause(exc)})", "connect"
                ) from exc
        except ValueError as exc:  # pooch: hash mismatch; the temporary file is already deleted
            m = _FOUND_HASH.search(str(exc))
            found = f"sha256 {m.group(1)}" if m else str(exc)
            raise _Miss(
                url, f"checksum mismatch: expected {_expected(f)}, found {found}", "checksum"
            ) from exc
        if attempt < s.retries:
            log.warning("%s: %s; retrying (%d left)", url, miss.reason, s.retries - attempt)
            time.sleep(min(attempt + 1, 5))
    raise miss


# --- the four sources ----------------------------------------------------------------------------------------------
def _is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _mirror_root(mirror: str) -> Path:
    """A local mirror folder, given as a path or a file:// URL (the one place both forms are accepted)."""
    return Path(mirror.removeprefix("file://")).expanduser()


def _mirror_paths(spec: DatasetSpec, f: RawFile) -> list[str]:
    """Where a file may sit under a mirror: the official path layout first, then DATASET/FILE (../shared)."""
    return ([f.official_path] if f.official_path else []) + [f"{spec.name}/{f.name}"]


def _from_mirror(
    spec: DatasetSpec, f: RawFile, dest: Path, s: FetchSettings, dead: set[str]
) -> tuple[Path, str]:
    if not s.mirror:
        raise _Miss("", f"no mirror configured (data.mirror or {MIRROR_ENV})", "unavailable")
    misses: list[_Miss] = []
    for r in _mirror_paths(spec, f):
        try:
            if _is_url(s.mirror):
                url = s.mirror.rstrip("/") + "/" + r
                return _download(url, f, dest, s, dead), url
            path = _mirror_root(s.mirror) / r
            if not path.is_file():
                raise _Miss(str(path), f"not present (expected {_expected(f)})", "absent")
            with path.open("rb") as src:
                return _copy_verified(src, f, dest, str(path)), str(path)
        except _Miss as miss:
            misses.append(miss)
    raise ExceptionGroup("every mirror layout missed", misses)


def _from_official(f: RawFile, dest: Path, s: FetchSettings, dead: set[str]) -> tuple[Path, str]:
    if f.manual:
        raise _Miss(f.url or "official", "needs registration: manual download (see below)", "manual")
    if f.url is None:
        raise _Miss("", "no public URL is known for this file", "unavailable")
    return _download(f.url, f, dest, s, dead), f.url


def _from_package(f: RawFile, dest: Path) -> tuple[Path, str]:
    if f.package is None:
        raise _Miss("", "no installed package ships this file", "unavailable")
    from importlib import metadata, resources

    pkg, rel = f.package
    try:
        res = resources.files(pkg).joinpath(rel)
        version = metadata.version(pkg)
    except (ModuleNotFoundError, metadata.PackageNotFoundError):
        raise _Miss(
            pkg, f"package {pkg} is not installed (pip install the version in pyproject.toml)", "unavailable"
        ) from None
    where = f"{pkg} {version}: {pkg}/{rel}"
    if not res.is_file():
        raise _Miss(where, "not present in the installed package", "absent")
    with res.open("rb") as src:
        return _copy_verified(src, f, dest, where), where


# --- the fetch loop ------------------------------------------------------------------------------------------------
def _sweep_cache(spec: DatasetSpec, dest: Path) -> tuple[set[str], dict[str, list[tuple[str, _Miss]]]]:
    """Verify every registered file already in the cache; move a mismatching one aside (never leave it in place)."""
    good: set[str] = set()
    notes: dict[str, list[tuple[str, _Miss]]] = {f.name: [] for f in spec.files}
    for f in spec.files:
        path = dest / f.name
        if not path.is_file():
            continue
        found = _check(path, f)
        if found is None:
            good.add(f.name)
            continue
        rejected = path.with_name(path.name + REJECTED_SUFFIX)
        os.replace(path, rejected)
        log.warning("%s: expected %s, found %s; moved to %s", path, _expected(f), found, rejected)
        reason = f"checksum mismatch: expected {_expected(f)}, found {found}; moved aside to {rejected.name}"
        notes[f.name].append(("cache", _Miss(str(path), reason, "checksum")))
    return good, notes


def _old_origins(dest: Path) -> dict[str, str]:
    """Origins recorded by an earlier fetch, so a cache hit still says where its bytes first came from."""
    try:
        old = json.loads((dest / MANIFEST_NAME).read_text())
        return {f["sha256"]: f["origin"] for f in old["files"].values()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def fetch(spec: DatasetSpec, settings: FetchSettings) -> FetchResult:
    """Obtain one complete variant of ``spec`` into the cache and write the manifest; FetchError otherwise."""
    bad = [src for src in settings.order if src not in SOURCES]
    if bad:
        raise FetchError(f"unknown data source(s) {bad} for {spec.name}; valid sources: {', '.join(SOURCES)}")
    dest = settings.cache_dir(spec.name)
    good, attempts = _sweep_cache(spec, dest)
    origins = _old_origins(dest)
    have: dict[str, tuple[Path, str, str]] = {}  # name -> (path, source, origin), delivered in this run
    dead_hosts: set[str] = set()

    failed: set[tuple[str, str]] = set()  # (source, file) pairs already tried without success in this run

    def obtain(source: str, f: RawFile) -> bool:
        if f.name in have:
            return True
        if (source, f.name) in failed:
            return False
        try:
            if source == "cache":
                if f.name not in good:
                    raise _Miss(str(dest / f.name), "not present", "absent")
                path = dest / f.name
                origin = origins.get(f.sha256, f"cache (origin not recorded): {path}")
            elif source == "mirror":
                path, origin = _from_mirror(spec, f, dest, settings, dead_hosts)
            elif source == "official":
                path, origin = _from_official(f, dest, settings, dead_hosts)
            else:
                path, origin = _from_package(f, dest)
        except* _Miss as misses:  # one miss, or the mirror's per layout
            attempts[f.name].extend((source, m) for m in misses.exceptions)
        else:
            have[f.name] = (path, source, origin)
            good.add(f.name)
            return True
        failed.add((source, f.name))
        return False

    for source in settings.order:
        for variant in spec.variants:
            if source == "cache":  # cheap: look at every file, so a partly cached set can be completed later
                complete = all([obtain(source, f) for f in variant.files])
            else:  # stop at the first missing file: no network call for the rest of an incomplete set
                complete = all(obtain(source, f) for f in variant.files)
            if complete:
                return _finish(spec, variant, have, dest)
    raise _failure(spec, settings, attempts, have)


def _finish(
    spec: DatasetSpec, variant: Variant, have: dict[str, tuple[Path, str, str]], dest: Path
) -> FetchResult:
    files: dict[str, FetchedFile] = {}
    for role, f in zip(("cube", "gt"), variant.files, strict=False):
        path, source, origin = have[f.name]
        files[role] = FetchedFile(role, f.name, str(path), f.sha256, path.stat().st_size, source, origin)
    result = FetchResult(spec.name, variant.name, files["cube"].source, files)
    atomic_write_text(dest / MANIFEST_NAME, json.dumps(asdict(result), indent=2, sort_keys=True) + "\n")
    for ff in files.values():
        log.info("%s: %s verified (%s, from %s)", spec.name, ff.name, ff.source, ff.origin)
    return result


def _failure(
    spec: DatasetSpec,
    s: FetchSettings,
    attempts: dict[str, list[tuple[str, _Miss]]],
    have: dict[str, tuple[Path, str, str]],
) -> FetchError:
    dest = s.cache_dir(spec.name)
    lines = [
        f"could not fetch dataset {spec.name!r}: no source delivered a complete set of verified files.",
        f"Sources tried, in order: {', '.join(s.order)} (config data.sources.{spec.name} or data.source_order).",
    ]
    kinds: set[str] = set()
    shown: set[str] = set()
    for variant in spec.variants:
        missing = [f for f in variant.files if f.name not in have]
        if not missing:
            continue
        lines.append(f"Variant {variant.name!r} ({' + '.join(f.name for f in variant.files)}):")
        for f in missing:
            if f.name in shown:
                lines.append(f"  {f.name}: see above")
                continue
            shown.add(f.name)
            tried = attempts.get(f.name, [])
            lines.append(f"  {f.name}: expected {_expected(f)} [{f.hash_source}]")
            if not tried:
                lines.append("    not tried (an earlier file of this variant was missing from every source)")
            for source, miss in tried:
                lines.append(f"    {source:<8} {miss.where + ': ' if miss.where else ''}{miss.reason}")
                kinds.add(miss.kind)
    todo: list[str] = []
    manual = spec.manual is not None and any(f.manual and f.name not in have for f in spec.files)
    if manual:
        todo.append(spec.manual.format(raw_dir=s.raw_dir))  # type: ignore[union-attr]
    if "checksum" in kinds:
        todo.append(
            "A source holds different bytes than registered (a corrupt copy or another release): replace that copy "
            "with the registered file, or remove it from the mirror."
        )
    if kinds & {"http", "connect", "cut", "absent", "unavailable"} and not manual:
        todo.append(
            f"Check the network, or point data.mirror (or {MIRROR_ENV}) at a folder or URL holding "
            f"<dataset>/<file> (the ../shared/datasets layout) or the official layout, or put the file into "
            f"{dest}/ yourself; `hsitp data list` shows every dataset's status."
        )
    lines.append("What to do: " + " ".join(todo))
    lines.append(f"No partial or unverified file was left in {dest}/.")
    cls = ManualDownloadRequired if manual else FetchError
    return cls("\n".join(lines))


# --- reading the manifest back ---------------------------------------------------------------------------------------
def manifest_path(settings: FetchSettings, dataset: str) -> Path:
    return settings.cache_dir(dataset) / MANIFEST_NAME


def read_manifest(path: str | os.PathLike[str], spec: DatasetSpec) -> tuple[FetchResult, Variant]:
    """The manifest written by ``fetch``, with every listed file re-checked against the registry."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
        files = {role: FetchedFile(**ff) for role, ff in raw.pop("files").items()}
        result = FetchResult(files=files, **raw)
    except FileNotFoundError:
        raise ManifestError(f"{path}: no fetch manifest; run `hsitp data fetch {spec.name}` first.") from None
    except IsADirectoryError:
        raise ManifestError(
            f"{path}: is a directory, not a fetch manifest (the fetch.json file `hsitp data fetch` writes)."
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ManifestError(
            f"{path}: unreadable fetch manifest ({exc}); delete it and run `hsitp data fetch`."
        ) from exc
    if result.dataset != spec.name:
        raise ManifestError(f"{path}: manifest is for {result.dataset!r}, expected {spec.name!r}")
    variants = {v.name: v for v in spec.variants}
    if result.variant not in variants:
        raise ManifestError(
            f"{path}: unknown variant {result.variant!r} for {spec.name}; re-run `hsitp data fetch`."
        )
    variant = variants[result.variant]
    for f, ff in zip(variant.files, files.values(), strict=True):
        p = Path(ff.path)
        found = _check(p, f) if p.is_file() else "no file"
        # the bytes are the registry's but the record is not: it would be carried into the prepared file's provenance
        if found is None and ff.sha256 != f.sha256:
            raise ManifestError(
                f"{path}: records sha256 {ff.sha256} for {p}, whose bytes are the registry's {f.sha256} (the "
                f"manifest was edited, or is another fetch's); run `hsitp data fetch {spec.name}` again."
            )
        if found is not None:
            raise ManifestError(
                f"{p}: listed in {path} but expected {_expected(f)}, found {found}; "
                f"run `hsitp data fetch {spec.name}` again."
            )
    return result, variant


# --- status for `hsitp data list` -------------------------------------------------------------------------------------
def local_status(spec: DatasetSpec, s: FetchSettings) -> tuple[str, str]:
    """(status, detail) a fetch would find, without network or hashing, trying sources in ``s.order`` as fetch
    does: cached / preparable offline (cache, local mirror, package) / needs download (official URL or a mirror
    URL) / needs manual step. Sizes are checked here; hashes are checked when the files are fetched.
    """
    dest = s.cache_dir(spec.name)

    def sized(path: Path, f: RawFile) -> bool:
        return path.is_file() and (f.size is None or path.stat().st_size == f.size)

    if "cache" in s.order:
        for v in spec.variants:
            if all(sized(dest / f.name, f) for f in v.files):
                return "cached", f"{dest}/ ({v.name})"
    local_mirror = s.mirror if "mirror" in s.order and s.mirror and not _is_url(s.mirror) else None
    for v in spec.variants:
        where: list[str] = []
        for f in v.files:
            if "cache" in s.order and sized(dest / f.name, f):
                where.append("cache")
            elif local_mirror and any(
                sized(_mirror_root(local_mirror) / r, f) for r in _mirror_paths(spec, f)
            ):
                where.append(f"mirror {local_mirror}")
            elif "package" in s.order and f.package and _package_has(f):
                where.append(f"package {f.package[0]}")
            else:
                break
        else:
            return "preparable offline", f"{v.name} files from {', '.join(sorted(set(where)))}"
    if spec.manual:
        return "needs manual step", spec.manual.format(raw_dir=s.raw_dir)
    urls = []
    if "mirror" in s.order and s.mirror and _is_url(s.mirror):
        urls.append(f"mirror {s.mirror.rstrip('/')}/")
    if "official" in s.order:
        urls += [f.url for f in spec.variants[0].files if f.url]
    if not urls:
        return "unavailable", f"no source in data.source_order {list(s.order)} can supply it"
    return "needs download", ", ".join(urls)


def _package_has(f: RawFile) -> bool:
    from importlib import resources

    assert f.package is not None
    try:
        return resources.files(f.package[0]).joinpath(f.package[1]).is_file()
    except ModuleNotFoundError:
        return False


__all__ = [
    "SOURCES",
    "FetchError",
    "FetchResult",
    "FetchSettings",
    "FetchedFile",
    "ManifestError",
    "ManualDownloadRequired",
    "fetch",
    "local_status",
    "manifest_path",
    "read_manifest",
]
