"""What every netCDF the pipeline writes must tell its reader: units and long names, ratios in units of 1, a title.

:func:`hsitp.io.metadata_problems` is the general rule (``write_netcdf`` warns about the same problems); this
adds the one it cannot know by itself: which variables are ratios of like quantities and so must say ``1``, not
the ``s`` xarray carries over from the times they are computed from.
"""

from __future__ import annotations

import re

import xarray as xr

from hsitp.io import metadata_problems

# Names of ratios in every kind: CCRs (measured, modelled, per layer or scheme), relative errors, rho = C/N, the
# stated threshold P F/beta, throughputs relative to one device, efficiencies, sanity and roofline ratios and the
# calibration's sequence factor.
RATIO = re.compile(
    r"^(.*ccr.*|rel_err_.*|rho|point_rho|threshold|point_threshold|.*relative_throughput|scaling_efficiency"
    r"|.*_ratio|sequence_factor)$"
)


def assert_described(ds: xr.Dataset, where: str = "") -> None:
    """Every variable and coordinate of ``ds`` has a long_name and (numeric, not a flag) units, ratios have units
    '1', and the title says more than 'hsitp KIND'."""
    problems = metadata_problems(ds)
    for name, var in ds.variables.items():
        if RATIO.match(str(name)) and var.dtype.kind in "iufc" and var.attrs.get("units") != "1":
            problems.append(f"ratio {name!r} has units {var.attrs.get('units')!r}, not '1'")
    assert not problems, f"{where or ds.attrs.get('kind')}:\n  " + "\n  ".join(problems)


def described(ds: xr.Dataset, title: str = "synthetic test data") -> xr.Dataset:
    """``ds`` with a placeholder long_name (and units '1' where numeric) on every name that lacks one, and a title:
    for made-up fixture data only (``write_netcdf`` refuses unlabelled variables; real stages label their own)."""
    for var in ds.variables.values():
        var.attrs.setdefault("long_name", "synthetic test value")
        if var.dtype.kind in "iufc" and "flag_values" not in var.attrs:
            var.attrs.setdefault("units", "1")
    ds.attrs.setdefault("title", title)
    return ds
