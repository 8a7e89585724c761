"""Read one array from a raw file: MATLAB v5 .mat (scipy), MATLAB v7.3 .mat (HDF5, h5py) or .npy.

MATLAB v7.3 files are HDF5 files written column-major, so h5py sees every array with its axes reversed
(a MATLAB (rows, cols, bands) cube reads as (bands, cols, rows)); ``load_mat_variable`` transposes it back, so
both formats give the array MATLAB shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from hsitp.errors import HsitpError

_HDF5_INTERNAL = ("#refs#", "#subsystem#")


class MatFileError(HsitpError):
    """A raw file cannot be read, or lacks the expected variable."""


def _is_hdf5(path: Path) -> bool:
    import h5py

    try:
        return bool(h5py.is_hdf5(path))
    except OSError:
        return False


def list_mat_variables(path: str | os.PathLike[str]) -> list[str]:
    """Names of the variables stored in a .mat file (either format), without loading them."""
    path = Path(path)
    if _is_hdf5(path):
        import h5py

        with h5py.File(path, "r") as fh:
            return [k for k in fh if k not in _HDF5_INTERNAL]
    import scipy.io

    try:
        return [name for name, _shape, _cls in scipy.io.whosmat(path)]
    except Exception as exc:  # scipy raises ValueError/IndexError/TypeError... for non-MAT bytes
        raise MatFileError(
            f"{path}: not a readable MATLAB .mat file ({exc}); expected a MAT v5 or v7.3 file. "
            "Delete it and fetch it again (`hsitp data fetch`)."
        ) from exc


def load_mat_variable(path: str | os.PathLike[str], variable: str) -> np.ndarray:
    """Load ``variable`` from a .mat file, v5 via scipy.io.loadmat or v7.3 via h5py (axes restored)."""
    path = Path(path)
    found = list_mat_variables(path)
    if variable not in found:
        raise MatFileError(
            f"{path}: no variable {variable!r}; variables found: {', '.join(found) or '(none)'}. "
            "The registry expects the file as distributed; if this is a different release, replace it with the "
            "registered one (`hsitp data list` shows the expected files)."
        )
    if _is_hdf5(path):
        import h5py

        with h5py.File(path, "r") as fh:
            node = fh[variable]
            if not isinstance(node, h5py.Dataset):
                raise MatFileError(
                    f"{path}: variable {variable!r} is a MATLAB struct/cell, expected a numeric array"
                )
            arr = node[()]
        # HDF5 stores MATLAB's column-major array with reversed axes: (bands, cols, rows) -> (rows, cols, bands)
        return np.ascontiguousarray(np.transpose(arr))
    import scipy.io

    return np.asarray(scipy.io.loadmat(path, variable_names=[variable])[variable])


def load_array(path: str | os.PathLike[str], variable: str | None) -> np.ndarray:
    """One array from a raw file: ``.npy`` (variable None) or ``.mat`` (variable required)."""
    path = Path(path)
    if path.suffix == ".npy":
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise MatFileError(
                f"{path}: not a readable .npy array ({exc}); delete it and fetch again."
            ) from exc
    if path.suffix == ".mat":
        if variable is None:
            raise MatFileError(f"{path}: the registry names no MATLAB variable for this file")
        return load_mat_variable(path, variable)
    raise MatFileError(f"{path}: unsupported raw file type {path.suffix!r}; expected .mat or .npy")
