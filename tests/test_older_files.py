"""Files and command lines of an older hsitp: a result file of a kind whose layout changed since (its schema
version behind this hsitp's) is refused in one line naming the file, saying an older hsitp wrote it and which stage
writes it again, never read by guessing what it lacks; the old config keys and `--split` are refused."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import pytest
import xarray as xr
from nc_checks import described
from train_utils import write_scene

from hsitp import contracts
from hsitp.io import SCHEMA_VERSIONS, SchemaVersionError, producer, write_netcdf

CONTRACTS = {c.kind: c for c in vars(contracts).values() if isinstance(c, contracts.Contract)}


def _as_version(path: Path, version: str) -> Path:
    """``path`` with its ``schema_version`` attribute set to ``version`` (what an older hsitp stamped)."""
    with netCDF4.Dataset(path, "a") as nc:
        nc.setncattr("schema_version", version)
    return path


@pytest.mark.parametrize("kind", sorted(SCHEMA_VERSIONS))
def test_a_file_of_an_earlier_schema_version_is_refused_naming_its_stage(kind: str, tmp_path: Path) -> None:
    """Catches a reader that reads a file of an earlier layout (a record naming no partition or kernel, a scene
    with its partition called `split`) by guessing what it lacks, or refuses it without saying what to do."""
    path = write_netcdf(
        described(xr.Dataset(attrs={"title": "x"})), tmp_path / f"{kind}.nc", kind=kind, prov={}
    )
    _as_version(path, "1")
    with pytest.raises(SchemaVersionError) as exc:
        CONTRACTS[kind].read(path)
    line = str(exc.value)
    assert "\n" not in line and line.startswith(f"{path}: written by an older hsitp"), line
    assert f"schema_version '1', this hsitp reads '{SCHEMA_VERSIONS[kind]}'" in line
    assert line.endswith(f"delete the file and re-run {producer(kind)}."), line


def test_an_older_prepared_scene_stops_the_baseline_in_one_line(tmp_path: Path, capsys) -> None:
    """Catches a stage that reads a prepared scene of an older hsitp (its partition named `split`, one draw per
    protocol) and fails later with a traceback, or silently on the wrong pixels: one line, exit 2, nothing written."""
    from hsitp.cli import main

    scene = _as_version(write_scene(tmp_path / "scene.nc"), "1")
    out = tmp_path / "baseline.nc"
    code = main(["baseline", "synthetic", "--protocol", "random", "--data", str(scene), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert str(scene) in err[0] and "written by an older hsitp" in err[0] and "hsitp data prepare" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("command", ["train", "tune"])
def test_split_option_is_refused(command: str, capsys) -> None:
    """Catches `--split` (the name of --protocol before "split" meant the TP split only) still accepted as --protocol:
    an old command line must stop with argparse's one line, exit 2, not run some other protocol."""
    from hsitp.cli import build_parser

    parser = build_parser()
    tail = ["--out", "x.nc"] + (["--plan", "tp", "--tokens", "9"] if command == "tune" else [])
    with pytest.raises(SystemExit) as exc:
        parser.parse_args([command, "scene.nc", "--split", "block", *tail])
    assert exc.value.code == 2 and "--split" in capsys.readouterr().err
    assert parser.parse_args([command, "scene.nc", "--protocol", "random", *tail]).protocol == "random"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("train.splits", "train.protocols"),
        ("tune.splits", "tune.protocols"),
        ("data.split", "data.partition"),
    ],
)
def test_old_config_key_is_refused_naming_the_allowed_ones(old: str, new: str) -> None:
    """Catches an old config key (the name of `protocols` and `partition` before "split" meant the TP split only)
    silently accepted, or refused without naming it and the keys allowed there, the new one among them."""
    from hsitp.config import ConfigError, validate_config

    section, leaf = old.split(".")
    value = {"block": 8} if section == "data" else ["block"]
    with pytest.raises(ConfigError) as exc:
        validate_config({section: {leaf: value}})
    line = str(exc.value).splitlines()[1].strip()
    assert line.startswith(f"{section}: Additional properties are not allowed ('{leaf}' was unexpected)"), (
        line
    )
    assert new.split(".")[1] in line.split("allowed keys: ")[1].split(", "), line


def test_tune_without_protocol_names_the_option(tmp_path: Path, capsys) -> None:
    from hsitp.cli import main

    code = main(["tune", str(tmp_path / "scene.nc"), "--plan", "tp", "--tokens", "9", "--out", "x.nc"])
    assert code == 2 and "--protocol required" in capsys.readouterr().err
