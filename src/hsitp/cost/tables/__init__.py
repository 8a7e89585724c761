"""The cost model's tables as xarray Datasets (``results/model/{rho,ccr,boundary,scale,plan}.nc``).

Everything here is modelled, never measured: each Dataset says so in its ``origin`` attribute and names the
hardware presets (peak numbers, efficiencies, sources) it used. Grid sizes come from the dataset registry, never
from cached files, so the tables are the same on every machine.

One module per table, each with its helpers and the paper's numbers it quotes; :mod:`.common` holds what they
share. ``TABLES`` maps a table's name to its builder (``hsitp model TABLE``).
"""

from __future__ import annotations

from collections.abc import Callable

import xarray as xr

from hsitp.cost.tables.boundary import REGIONS, boundary_table
from hsitp.cost.tables.ccr import LAYER_NAMES, ccr_table
from hsitp.cost.tables.common import ORIGIN
from hsitp.cost.tables.plan import plan_table
from hsitp.cost.tables.rho import C_DEFINITIONS, rho_table
from hsitp.cost.tables.scale import scale_table
from hsitp.settings import CostSettings

__all__ = [
    "C_DEFINITIONS",
    "LAYER_NAMES",
    "ORIGIN",
    "REGIONS",
    "TABLES",
    "boundary_table",
    "ccr_table",
    "plan_table",
    "rho_table",
    "scale_table",
]

TABLES: dict[str, Callable[[CostSettings], xr.Dataset]] = {
    "rho": rho_table,
    "ccr": ccr_table,
    "boundary": boundary_table,
    "scale": scale_table,
    "plan": plan_table,
}
