"""Raw-array loading: MATLAB v5 (scipy), MATLAB v7.3 (HDF5 via h5py, axes restored), wrong variable, junk bytes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io

from hsitp.data.matfile import MatFileError, list_mat_variables, load_array


def _cube() -> np.ndarray:
    return np.arange(3 * 4 * 5, dtype=np.uint16).reshape(3, 4, 5)  # (rows, cols, bands), all sizes distinct


def test_v5_mat_roundtrip(tmp_path):
    """Catches: a MAT v5 variable loaded with wrong shape/dtype (scipy path)."""
    path = tmp_path / "cube.mat"
    scipy.io.savemat(path, {"cube": _cube(), "other": np.zeros(2)})
    arr = load_array(path, "cube")
    assert arr.dtype == np.uint16 and np.array_equal(arr, _cube())


def test_v73_mat_loads_with_axes_restored(tmp_path):
    """Catches: a MATLAB v7.3 (HDF5) file rejected, or returned with h5py's reversed axes (bands, cols, rows)."""
    import h5py

    path = tmp_path / "cube73.mat"
    with h5py.File(
        path, "w", userblock_size=512
    ) as fh:  # MATLAB puts a 512-byte text header before the HDF5 data
        # MATLAB writes column-major, so HDF5 holds the transpose of what MATLAB shows
        fh.create_dataset("cube", data=_cube().T)
        fh["cube"].attrs["MATLAB_class"] = np.bytes_("uint16")
        fh.create_group("#refs#")
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: hsitp test HDF5 schema 1.00 .")
    assert list_mat_variables(path) == ["cube"]  # MATLAB's internal '#refs#' group is not a variable
    arr = load_array(path, "cube")
    assert arr.shape == (3, 4, 5) and np.array_equal(arr, _cube())


@pytest.mark.parametrize("fmt", ["v5", "v7.3"])
def test_missing_variable_lists_what_was_found(tmp_path, fmt):
    """Catches: a .mat without the expected variable failing with a KeyError instead of naming what is there."""
    path = tmp_path / "gt.mat"
    if fmt == "v5":
        scipy.io.savemat(path, {"salinas_gt": np.zeros((2, 2), np.uint8), "extra": np.ones(1)})
    else:
        import h5py

        with h5py.File(path, "w") as fh:
            fh.create_dataset("salinas_gt", data=np.zeros((2, 2), np.uint8))
            fh.create_dataset("extra", data=np.ones(1))
    with pytest.raises(MatFileError) as err:
        load_array(path, "salinasA_gt")
    msg = str(err.value)
    assert str(path) in msg and "'salinasA_gt'" in msg and "salinas_gt" in msg and "extra" in msg


def test_not_a_mat_file(tmp_path):
    """Catches: junk bytes (e.g. an HTML error page saved as .mat) surfacing as a scipy IndexError traceback."""
    path = tmp_path / "page.mat"
    path.write_bytes(b"<html><body>404 Not Found</body></html>")
    with pytest.raises(MatFileError, match="not a readable MATLAB .mat file"):
        load_array(path, "x")
