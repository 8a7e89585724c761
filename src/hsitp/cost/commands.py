"""``hsitp cost TABLE --out FILE`` (one Snakemake job per table: rho, ccr, boundary, scale) and ``hsitp advise``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hsitp.config import add_config_args, config_from_args

TABLE_HELP = {
    "rho": "rho = C/N per registry dataset x patch x definition of C, and the lower-CCR split (paper 2.2)",
    "ccr": "the paper's 8.1/8.2 CCR grid under both models, D-CHAG schemes and its quoted numbers",
    "boundary": "decision boundary over (rho, P F/beta)",
    "scale": "projection to many devices: TP in a node x data/FSDP across nodes, memory by part",
}
# Config keys holding hardware names, per table (measured:PATH entries become provenance inputs).
_HARDWARE_KEYS = {
    "rho": ("rho", "hardware"),
    "ccr": ("ccr", "hardware"),
    "boundary": ("boundary", "point_hardware"),
    "scale": ("scale", "hardware"),
}


def _measured_inputs(cost: dict[str, Any], table: str) -> dict[str, str]:
    from hsitp.cost.hardware import MEASURED_PREFIX

    section, key = _HARDWARE_KEYS[table]
    names = list(cost[section][key])
    if table == "boundary":
        names.append(cost["boundary"]["hardware"])
    return {n: n[len(MEASURED_PREFIX) :] for n in names if n.startswith(MEASURED_PREFIX)}


def _table(args: argparse.Namespace) -> int:
    from hsitp.cost.tables import TABLES
    from hsitp.io import provenance, write_netcdf

    cfg = config_from_args(args)
    cost = cfg["cost"]
    ds = TABLES[args.table](cost)
    prov = provenance(config={"cost": cost}, inputs=_measured_inputs(cost, args.table))
    write_netcdf(ds, args.out, kind=f"cost_{args.table}", prov=prov)
    print(f"wrote {args.out} ({', '.join(f'{k}={v}' for k, v in ds.sizes.items())})")
    return 0


def _advise(args: argparse.Namespace) -> int:
    from hsitp.cost.advise import advise, format_text

    cost = config_from_args(args)["cost"]
    result = advise(
        cost,
        dataset=args.dataset,
        patch=args.patch,
        devices=args.devices,
        hardware=args.hardware,
        embed_dim=args.embed_dim,
    )
    print(json.dumps(result, indent=2) if args.json else format_text(result))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from hsitp.cost.hardware import preset_names

    cost = sub.add_parser("cost", help="cost-model tables (modelled, not measured) -> results/RUN/cost/*.nc")
    csub = cost.add_subparsers(dest="table", required=True, metavar="TABLE")
    for name, text in TABLE_HELP.items():
        p = csub.add_parser(name, help=text)
        p.add_argument(
            "--out", required=True, type=Path, help=f"netCDF to write (e.g. results/paper/cost/{name}.nc)"
        )
        add_config_args(p)
        p.set_defaults(func=_table)

    p = sub.add_parser(
        "advise",
        help="which dimension to split (channel, token, 2-D) for a dataset, patch, device count and hardware",
        description="Predicted CCR under the paper's stated model and the refined model for channel, token and "
        "2-D split of one transformer block, per-layer compute and communication time, and one recommendation. "
        "Modelled, not measured. Hardware presets: "
        + ", ".join(preset_names())
        + ", or measured:PATH (a calibration file from the microbenchmark stage).",
    )
    p.add_argument(
        "--dataset", required=True, help="registry name (see `hsitp data list`), e.g. indian_pines"
    )
    p.add_argument("--patch", type=int, required=True, help="patch size p: N = floor(H/p) * floor(W/p)")
    p.add_argument("--devices", type=int, required=True, help="parallel degree P")
    p.add_argument("--hardware", default="paper-intra", help="preset or measured:PATH (default paper-intra)")
    p.add_argument("--embed-dim", type=int, default=None, help="D (default: cost.embed_dim of the config)")
    p.add_argument("--json", action="store_true", help="emit the same fields as JSON")
    add_config_args(p)
    p.set_defaults(func=_advise)
