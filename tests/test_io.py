"""The netCDF ground floor: atomic writes, provenance, schema checks."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr

from hsitp import io


def _ds(scale: float = 1.0) -> xr.Dataset:
    return xr.Dataset(
        {
            "v": (
                ("a",),
                scale * np.arange(3, dtype="float32"),
                {"units": "1", "long_name": "v", "flags": {"x": 1}},
            )
        },
        coords={"a": ("a", [0, 1, 2], {"units": "1", "long_name": "index"})},
        attrs={"names": {"1": "Oats"}, "ok": True, "title": "io test data"},
    )


def test_roundtrip_carries_provenance(tmp_path):
    """Catches a writer that drops provenance or mangles dict attrs (JSON) and bools (netCDF has none)."""
    src = tmp_path / "in.bin"
    src.write_bytes(b"abc")
    prov = io.provenance(config={"seed": 1}, inputs={"raw": src})
    out = io.write_netcdf(_ds(), tmp_path / "r.nc", kind="test", prov=prov)
    back = io.read_netcdf(out, kind="test")
    xr.testing.assert_allclose(back["v"], _ds()["v"])
    got = io.read_provenance(back)
    assert got["input_sha256"]["raw"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert got["config_hash"] == io.config_hash({"seed": 1})
    assert {"git_commit", "packages", "device", "created_utc"} <= set(got)
    # the SIMD path and core count: a rerun on another machine can say why its last bits differ
    assert {"cpu", "cpu_count"} <= set(got["device"])
    assert json.loads(back.attrs["names"]) == {"1": "Oats"}
    assert back.attrs["ok"] == 1
    assert back.attrs["schema_version"] == io.SCHEMA_VERSION


def test_device_names_torch_kernels_only_where_torch_computed() -> None:
    """Catches a provenance that imports torch only to describe it (1.5 s of every summary, cost table and
    baseline job), or one that loses the SIMD path of a process that computed with torch."""
    import subprocess
    import sys

    code = "import json, sys; from hsitp.io import device_description as d; {}print(json.dumps([d(), 'torch' in sys.modules]))"
    bare, loaded = (json.loads(subprocess.run([sys.executable, "-c", code.format(pre)], capture_output=True, text=True,
                                              check=True).stdout) for pre in ("", "import torch; "))  # fmt: skip
    assert (
        bare[1] is False
        and "torch_cpu_capability" not in bare[0]
        and bare[0]["torch"].startswith("not loaded")
    )
    assert loaded[1] is True and {"torch_threads", "torch_cpu_capability"} <= set(loaded[0])


def test_config_hash_ignores_key_order():
    """Catches a hash that changes when YAML key order changes (false cache misses)."""
    assert io.config_hash({"a": 1, "b": {"c": 2, "d": 3}}) == io.config_hash({"b": {"d": 3, "c": 2}, "a": 1})


def test_failed_write_leaves_previous_file(tmp_path, monkeypatch):
    """Catches a non-atomic writer: a crash mid-write must leave the old complete file and no temp files."""
    path = tmp_path / "r.nc"
    io.write_netcdf(_ds(), path, kind="test", prov={})

    def boom(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    with pytest.raises(OSError, match="disk full"):
        io.write_netcdf(_ds(2.0), path, kind="test", prov={})
    assert os.listdir(tmp_path) == ["r.nc"]
    monkeypatch.undo()
    xr.testing.assert_allclose(io.read_netcdf(path)["v"], _ds()["v"])


def test_reader_rejects_other_schema_or_kind(tmp_path):
    """Catches silently reading a file written by an incompatible pipeline version or another stage."""
    path = io.write_netcdf(_ds(), tmp_path / "r.nc", kind="test", prov={})
    with pytest.raises(io.SchemaVersionError, match="expected 'dataset'"):
        io.read_netcdf(path, kind="dataset")
    old = xr.open_dataset(path).load()
    old.attrs["schema_version"] = "0"
    old.to_netcdf(tmp_path / "old.nc")
    with pytest.raises(io.SchemaVersionError, match="re-run"):
        io.read_netcdf(tmp_path / "old.nc")
    with pytest.raises(io.ResultFileError, match="no such result; re-run `hsitp data prepare`"):
        io.read_netcdf(tmp_path / "missing.nc", kind="dataset")


def test_truncated_or_foreign_input_is_one_clear_line(tmp_path, capsys):
    """Catches a truncated or non-hsitp netCDF ending in a long HDF traceback instead of one line naming the file
    and the stage that writes it (issue 9)."""
    from hsitp.cli import main

    path = io.write_netcdf(_ds(), tmp_path / "microbench.nc", kind="microbench", prov={})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a copy cut short
    with pytest.raises(io.ResultFileError, match=r"microbench\.nc: not a readable netCDF.*hsitp bench merge"):
        io.read_netcdf(path, kind="microbench")
    foreign = tmp_path / "foreign.nc"
    foreign.write_text("not a netCDF at all\n")
    with pytest.raises(io.ResultFileError, match="foreign.nc: not a readable netCDF"):
        io.read_netcdf(foreign)
    plain = tmp_path / "plain.nc"
    xr.Dataset({"v": ("x", [1.0, 2.0])}).to_netcdf(plain)  # a valid netCDF not written by hsitp
    with pytest.raises(io.ResultFileError, match="not written by hsitp"):
        io.read_netcdf(plain, kind="calibration")
    code = main(["bench", "calibrate", "--microbench", str(path), "--out", str(tmp_path / "cal.nc")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "microbench.nc" in err[0] and "hsitp bench" in err[0]
    assert not (tmp_path / "cal.nc").exists()


def test_writer_refuses_unlabelled_variables_and_the_walk_finds_them(tmp_path):
    """Catches a stage that writes a variable or coordinate without long_name/units (a reader cannot tell what
    or in which unit): write_netcdf must refuse and leave no file, and tree_metadata_problems must name every such
    name in files already on disk (the walk CI runs over its smoke results)."""
    bare = _ds().assign(w=("a", np.ones(3)))  # no long_name, no units
    bare["a"].attrs.clear()
    with pytest.raises(
        io.IncompleteMetadataError, match=r"r\.nc \(test\).*'w' has no long_name.*'w' has no units"
    ):
        io.write_netcdf(bare, tmp_path / "r.nc", kind="test", prov={})
    assert os.listdir(tmp_path) == []
    io.write_netcdf(_ds(), tmp_path / "ok.nc", kind="test", prov={})
    (tmp_path / "sub").mkdir()
    bare.drop_attrs().to_netcdf(tmp_path / "sub" / "old.nc")  # written before the writer refused
    found = io.tree_metadata_problems(tmp_path)
    assert list(found) == [tmp_path / "sub" / "old.nc"]
    assert set(found[tmp_path / "sub" / "old.nc"]) == {
        "variable 'w' has no long_name",
        "variable 'w' has no units",
        "coordinate 'a' has no long_name",
        "coordinate 'a' has no units",
        "variable 'v' has no long_name",
        "variable 'v' has no units",
        "title '' does not say what the file holds",
    }
    from hsitp.cli import main

    assert main(["report", "check-metadata", str(tmp_path)]) == 1  # what CI runs on its smoke results
    (tmp_path / "sub" / "old.nc").unlink()
    assert main(["report", "check-metadata", str(tmp_path)]) == 0
