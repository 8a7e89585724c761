"""The ground floor: every netCDF the project writes or reads goes through here.

Each file carries ``schema_version`` and ``kind`` (what stage wrote it) and a ``provenance`` attribute: JSON with
the git commit, the hash of the config the stage read, package versions, the device, the sha256 of every input
file and the UTC time. Writes are atomic (temporary file in the same folder, then ``os.replace``) so a killed
run never leaves a half-written file where a complete one is expected.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import xarray as xr
from pydantic import BaseModel

from hsitp.errors import HsitpError

SCHEMA_VERSION = "1"  # the schema version of every kind not in SCHEMA_VERSIONS
# Kinds whose files changed their layout, per kind -> its version. "2": every file says what its numbers rest on, so
# no reader guesses: a prepared scene holds `partition` (protocol, partition_index, y, x) with its partition_*
# attributes; a training record and a baseline file name their partition_index; a training record, a reference's
# train/runs.nc and every probe file name the attention kernel that ran. A file of an earlier version is refused,
# naming the stage that writes it again (:func:`read_netcdf`).
SCHEMA_VERSIONS: dict[str, str] = {
    kind: "2"
    for kind in (
        "dataset",
        "train",
        "baseline",
        "reference_runs",
        "probe_partial",
        "probe_memory",
        "probe_throughput",
    )
}
NETCDF_ENGINE = "netcdf4"

# Packages whose versions can change a number in a result; recorded in every file's provenance.
_TRACKED_PACKAGES = (
    "hsitp",
    "numpy",
    "scipy",
    "xarray",
    "netCDF4",
    "torch",
    "pooch",
    "tensorly",
    "snakemake",
)


# kind -> the command (and rule) that writes it, for errors that tell the user what to re-run.
KIND_PRODUCERS: dict[str, str] = {
    "dataset": "`hsitp data prepare` (rule data_prepare)",
    "microbench": "`hsitp bench run` + `hsitp bench merge` (rules bench_run, bench_merge)",
    "calibration": "`hsitp bench calibrate` (rule bench_calibrate)",
    "model_vs_measured": "`hsitp bench compare` (rule bench_compare)",
    "bench_shard": "`hsitp bench shard` (benchmarks/gpu_check.sh)",
    "bench_roofline": "`hsitp bench roofline` (benchmarks/gpu_check.sh)",
    "probe_partial": "`hsitp probe run` (rule probe_run)",
    "probe_memory": "`hsitp probe run` + `hsitp probe merge` (rules probe_run, probe_merge)",
    "probe_throughput": "`hsitp probe run` + `hsitp probe merge` (rules probe_run, probe_merge)",
    "probe_estimate": "`hsitp probe estimate` (rule probe_estimate)",
    "train": "`hsitp train` (rule train)",
    "baseline": "`hsitp baseline` (rule baseline)",
    "train_ingredients": "`python -m hsitp.train.ingredients config/cpu-places-ablation.yaml` (not in the DAG)",
}


def producer(kind: str | None) -> str:
    """Which stage writes a kind of file (cost tables: one kind per table)."""
    if kind is None:
        return "the stage that writes it"
    if kind in KIND_PRODUCERS:
        return KIND_PRODUCERS[kind]
    if kind.startswith("cost_"):
        return f"`hsitp cost {kind.removeprefix('cost_')}` (rule cost_table)"
    return f"the stage that writes {kind!r} files"


def schema_version(kind: str | None) -> str:
    """The schema version this hsitp writes and reads for files of ``kind``."""
    return SCHEMA_VERSIONS.get(kind, SCHEMA_VERSION) if kind is not None else SCHEMA_VERSION


class ResultFileError(HsitpError):
    """A result file is missing, unreadable (truncated, not netCDF) or of another kind or schema version.

    The message is one line naming the file and the stage that writes it."""


class IncompleteMetadataError(HsitpError, ValueError):
    """A dataset about to be written lacks a long_name, units or a title (:func:`metadata_problems`): refused, so
    no file the pipeline writes leaves its reader guessing. The message names the file, its kind and each name."""


class SchemaVersionError(ResultFileError):
    """A netCDF file was written by an incompatible version of the pipeline (or holds another kind)."""


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in chunks so large cubes do not need to fit in memory."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def config_hash(config: BaseModel | Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of a config (a typed section's: the keys the validated config holds; key order
    does not matter)."""
    if isinstance(config, BaseModel):
        config = config.model_dump(mode="json", exclude_unset=True)
    canon = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def git_commit() -> str:
    """The commit of the checkout holding this package (suffix ``-dirty`` when it has changes), or 'unknown'."""
    run = functools.partial(
        subprocess.run, cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=10
    )
    try:
        sha = run(["git", "rev-parse", "HEAD"], check=True).stdout.strip()
        dirty = run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def package_versions(names: Iterable[str] = _TRACKED_PACKAGES) -> dict[str, str]:
    """Each package's installed version ('absent' where none)."""
    return {name: _version(name) for name in names}


@functools.cache  # once per process: metadata.version scans sys.path (7 ms for the tracked set, twice per file)
def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def device_description() -> dict[str, str]:
    """What the numbers were computed on: CPU model, its core count and, when this process computed with PyTorch
    (it is loaded), the SIMD kernels it dispatches to (two machines with the same CPU name can run different
    kernels, whose float sums differ in the last bits) and the GPU it sees. A stage that never loads torch (a
    summary, a cost table, the classical baseline) computed nothing with it: it is not imported only to be
    described (about 1.5 s of every such job)."""
    desc = {
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": str(os.cpu_count()),
        "python": platform.python_version(),
    }
    torch = sys.modules.get("torch")
    if torch is None:
        desc |= {"gpu": "none", "torch": "not loaded (this process computed without it)"}
        return desc
    desc["torch_threads"] = str(torch.get_num_threads())
    desc["torch_cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())  # e.g. AVX2, AVX512
    if torch.cuda.is_available():
        desc["gpu"] = torch.cuda.get_device_name(0)
        desc["gpu_count"] = str(torch.cuda.device_count())
    else:
        desc["gpu"] = "none"
    return desc


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance(
    config: BaseModel | Mapping[str, Any] | None = None,
    inputs: Mapping[str, str | os.PathLike[str]] | None = None,
    input_sha256: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Provenance record for a result.

    ``inputs`` are files hashed now, by name; ``input_sha256`` are hashes already known (e.g. verified on download).
    """
    hashes = dict(input_sha256 or {}) | {str(key): sha256_file(path) for key, path in (inputs or {}).items()}
    record: dict[str, Any] = {
        "git_commit": git_commit(),
        "config_hash": config_hash(config or {}),
        "packages": package_versions(),
        "device": device_description(),
        "input_sha256": hashes,
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if extra:
        record.update(extra)
    return record


def default_file_mode() -> int:
    """Mode a normal ``open()`` would give a new file (mkstemp's 0600 would hide results from other users)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def variable(
    dims: str | tuple[str, ...], values: Any, long_name: str, units: str = "1", **attrs: Any
) -> tuple[Any, Any, dict[str, Any]]:
    """A Dataset variable ``(dims, values, attrs)``, its attrs CF's ``units`` and ``long_name`` then ``attrs``."""
    return dims, values, {"units": units, "long_name": long_name, **attrs}


def describe(ds: xr.Dataset, attrs: Mapping[str, Mapping[str, Any]], *, keep: bool = False) -> xr.Dataset:
    """Set ``units``, ``long_name`` (and any other attribute) of the named variables and coordinates that ``ds``
    holds, in place; names ``ds`` does not hold are skipped, so one table can describe several files. ``keep``: an
    attribute the variable already has stays, so a stage's table of defaults fills what its writers left out and a
    writer's more specific ``long_name`` stays."""
    for name, extra in attrs.items():
        if name in ds.variables:
            own = ds[name].attrs
            own.update(extra | own if keep else extra)
    return ds


def generic_title(kind: str) -> str:
    """The fallback title ``write_netcdf`` gives a file whose writer named none (metadata_problems flags it)."""
    return f"hsitp {kind}"


def metadata_problems(ds: xr.Dataset) -> list[str]:
    """What a reader of the file would miss, one line per problem (empty when none).

    Every data variable and coordinate needs a ``long_name``; a numeric one also needs ``units`` (``1`` for
    ratios and counts), except flag variables (``flag_values``: their meaning is in ``flag_meanings``). The
    file's ``title`` must say more than the generic ``hsitp KIND``.
    """
    problems: list[str] = []
    for name, var in ds.variables.items():
        what = "coordinate" if name in ds.coords else "variable"
        if not var.attrs.get("long_name"):
            problems.append(f"{what} {name!r} has no long_name")
        numeric = var.dtype.kind in "iufc"
        if numeric and "flag_values" not in var.attrs and "units" not in var.attrs:
            problems.append(f"{what} {name!r} has no units")
    title = ds.attrs.get("title", "")
    if not title or title == generic_title(str(ds.attrs.get("kind", ""))):
        problems.append(f"title {title!r} does not say what the file holds")
    return problems


def tree_metadata_problems(root: str | os.PathLike[str]) -> dict[Path, list[str]]:
    """Every ``.nc`` file under ``root`` (a run's results folder) with what its reader would miss
    (:func:`metadata_problems`); files with no problem are left out, so an empty dict means all are described.
    CI calls it on its smoke run (``hsitp report check-metadata results/smoke``)."""
    out: dict[Path, list[str]] = {}
    for path in sorted(Path(root).rglob("*.nc")):
        with open_netcdf(path, decode_times=False, decode_timedelta=False) as ds:
            problems = metadata_problems(ds)
        if problems:
            out[path] = problems
    return out


def write_netcdf(
    ds: xr.Dataset,
    path: str | os.PathLike[str],
    *,
    kind: str,
    prov: Mapping[str, Any],
    title: str | None = None,
) -> Path:
    """Write ``ds`` atomically with schema version, kind, CF-style attrs and provenance JSON.

    Refused (:class:`IncompleteMetadataError`, nothing written) when a variable or coordinate lacks ``units`` or
    ``long_name`` or the file a descriptive title (:func:`metadata_problems`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    now = datetime.now(UTC).isoformat(timespec="seconds")
    ds.attrs.update(
        {
            "Conventions": "CF-1.8",
            "title": title or ds.attrs.get("title", generic_title(kind)),
            "history": f"{now} written by hsitp {package_versions(['hsitp'])['hsitp']} ({kind})",
            "schema_version": schema_version(kind),
            "kind": kind,
            "provenance": json.dumps(dict(prov), sort_keys=True, default=str),
        }
    )
    # netCDF attrs hold str/number/arrays only: serialise anything else as JSON, and bools as ints.
    for obj in [ds, *ds.variables.values()]:
        for key, val in list(obj.attrs.items()):
            if isinstance(val, bool):
                obj.attrs[key] = int(val)
            elif isinstance(val, Mapping | list | tuple) or val is None:
                obj.attrs[key] = json.dumps(val, default=str)
    problems = metadata_problems(ds)
    if problems:
        raise IncompleteMetadataError(
            f"{path} ({kind}): not written, incomplete metadata: {'; '.join(problems)} (set them where the "
            "stage builds the dataset; hsitp.io.describe)"
        )
    return atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine=NETCDF_ENGINE))


def _open_error(exc: BaseException) -> str:
    """The reason netCDF4/xarray gave, on one line and without the path they quote again."""
    if isinstance(exc, OSError) and exc.strerror:
        return " ".join(str(exc.strerror).split())
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_netcdf(
    path: str | os.PathLike[str],
    *,
    rerun: str = "re-run the stage that writes it",
    load: bool = False,
    **kwargs: Any,
) -> xr.Dataset:
    """``xr.open_dataset`` (``kwargs`` passed on; ``load``: read it all and close the file) with every way a path
    can fail to be a netCDF file a one-line :class:`ResultFileError` naming it and ending in ``rerun``: missing, a
    folder, empty, unreadable, not netCDF, truncated."""
    path = Path(path)
    if not path.exists():
        raise ResultFileError(f"{path}: no such result; {rerun} (see README).")
    if path.is_dir():
        raise ResultFileError(f"{path}: is a directory, not a netCDF file; {rerun}.")
    try:
        if path.stat().st_size == 0:
            raise ResultFileError(f"{path}: is empty (0 bytes), not a netCDF file; delete it and {rerun}.")
        ds = xr.open_dataset(path, engine=NETCDF_ENGINE, **kwargs)
        if load:
            ds = ds.load()
            ds.close()
    except (OSError, ValueError, RuntimeError) as exc:
        raise ResultFileError(
            f"{path}: not a readable netCDF (truncated or not written by hsitp: {_open_error(exc)}); "
            f"delete it and {rerun}."
        ) from exc
    return ds


def read_netcdf(
    path: str | os.PathLike[str],
    *,
    kind: str | None = None,
    load: bool = True,
    require_dims: Iterable[str] = (),
    require_vars: Iterable[str] = (),
    require_attrs: Iterable[str] = (),
) -> xr.Dataset:
    """Open a project netCDF, checking its schema version (and kind, if given).

    Every failure is a :class:`ResultFileError` whose one-line message names the file and the stage that writes
    it: missing, a folder, empty, truncated or foreign (not netCDF, or not written by hsitp), other schema
    version, other kind, or lacking a dimension, variable or attribute the reader needs (``require_*``: an older
    hsitp's file; :mod:`hsitp.contracts` names them).
    """
    path = Path(path)
    rerun = f"re-run {producer(kind)}"
    ds = open_netcdf(path, rerun=rerun, load=load)
    found, have = ds.attrs.get("schema_version"), ds.attrs.get("kind")
    if found is None:
        raise SchemaVersionError(f"{path}: not written by hsitp (no schema_version attribute); {rerun}.")
    if kind is not None and have != kind:
        raise SchemaVersionError(
            f"{path}: holds kind {have!r} (written by {producer(have)}), expected {kind!r}; {rerun}."
        )
    rerun = f"re-run {producer(have)}" if kind is None and isinstance(have, str) else rerun
    want = schema_version(have if isinstance(have, str) else None)
    if found != want:
        older = str(found).isdigit() and int(found) < int(want)
        raise SchemaVersionError(
            f"{path}: written by {'an older' if older else 'another'} hsitp (schema_version {found!r}, this hsitp "
            f"reads {want!r}); delete the file and {rerun}."
        )
    lacking = [f"dimension {d!r}" for d in require_dims if d not in ds.dims]
    lacking += [f"variable {v!r}" for v in require_vars if v not in ds.variables]
    lacking += [f"attribute {a!r}" for a in require_attrs if a not in ds.attrs]
    if lacking:
        raise SchemaVersionError(
            f"{path}: lacks {', '.join(lacking)} that this hsitp reads (written by an older version?); "
            f"delete it and {rerun}."
        )
    return ds


def read_provenance(ds: xr.Dataset) -> dict[str, Any]:
    return json.loads(ds.attrs.get("provenance", "{}"))


def json_attr(ds: xr.Dataset | xr.DataArray, key: str) -> Any:
    """Decode an attribute that ``write_netcdf`` stored as JSON."""
    return json.loads(ds.attrs[key])


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write a small text file (JSON, logs, tables) atomically."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text))


def atomic_write(path: str | os.PathLike[str], write: Callable[[str], object]) -> Path:
    """Write ``path`` by ``write(tmp)`` on a temporary file in its folder, then ``os.replace``: a reader sees the
    old file or the whole new one, never a part, and a failed or interrupted write leaves the old file and no
    temporary behind. The file gets the mode a plain ``open()`` would give (mkstemp's 0600 would hide it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
