"""Reading a stage's netCDF for a table or a figure: the file's kind checked, the variables the table needs named
when one is missing (one line, not a KeyError deep in a plot)."""

from __future__ import annotations

import json
import os
from typing import Any

import xarray as xr

from hsitp.contracts import Contract
from hsitp.errors import HsitpError
from hsitp.io import read_netcdf


class ReportError(HsitpError):
    """A result file lacks what a figure or table needs (the message names the file and the variable)."""


def load(path: str | os.PathLike[str], contract: Contract, *required: str) -> xr.Dataset:
    """A stage's netCDF, schema and kind checked (``hsitp.io``), loaded into memory; the path is kept in attrs.
    Only the ``required`` variables are checked (:func:`need`), not all of its contract's: a page draws an older
    file of the kind too, and names what a figure lacks."""
    ds = read_netcdf(path, kind=contract.kind)
    ds.attrs["_source_path"] = str(path)
    need(ds, *required)
    return ds


def need(ds: xr.Dataset, *names: str) -> None:
    """Fail with the file and the missing variables, not a KeyError deep in a plot."""
    missing = [n for n in names if n not in ds.variables]
    if missing:
        where = ds.attrs.get("_source_path", f"a {ds.attrs.get('kind', '?')} file")
        raise ReportError(
            f"{where}: lacks {', '.join(missing)} (written by an older hsitp? re-run its stage)"
        )


def json_attr(ds: xr.Dataset, key: str, default: Any = None) -> Any:
    raw = ds.attrs.get(key)
    if raw is None:
        return default
    return json.loads(raw) if isinstance(raw, str) else raw
