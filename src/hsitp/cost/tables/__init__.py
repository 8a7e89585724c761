"""The cost model's tables as xarray Datasets (``results/RUN/cost/{rho,ccr,boundary,scale,plan}.nc``).

Everything here is modelled, never measured: each Dataset says so in its ``origin`` attribute and names the
hardware presets (peak numbers, efficiencies, sources) it used. Grid sizes come from the dataset registry, never
from cached files, so the tables are the same on every machine.

One module per table, each with its helpers and the paper's numbers it quotes; :mod:`.common` holds what they
share. ``TABLES`` maps a table's name to its builder (``hsitp cost TABLE``).
"""

from __future__ import annotations

from collections.abc import Callable

import xarray as xr

from hsitp.cost.tables.boundary import boundary_table
from hsitp.cost.tables.ccr import ccr_table
from hsitp.cost.tables.plan import plan_table
from hsitp.cost.tables.rho import rho_table
from hsitp.cost.tables.scale import scale_table
from hsitp.settings import CostSettings

TABLES: dict[str, Callable[[CostSettings], xr.Dataset]] = {
    "rho": rho_table,
    "ccr": ccr_table,
    "boundary": boundary_table,
    "scale": scale_table,
    "plan": plan_table,
}
