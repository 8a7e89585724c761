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
