"""``hsitp cost TABLE --out FILE`` (one Snakemake job per table: rho, ccr, boundary, scale, plan) and ``hsitp advise
split|plan``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hsitp.config import ConfigError, add_config_args, check_shape, config_from_args
from hsitp.settings import CostSettings

TABLE_HELP = {
    "rho": "rho = C/N per registry dataset x patch x definition of C, and the lower-CCR split (paper 2.2)",
    "ccr": "the paper's 8.1/8.2 CCR grid under both models, pure TP vs the D-CHAG plans and its quoted numbers",
    "boundary": "decision boundary over (rho, P F/beta)",
    "scale": "projection to many devices: TP in a node x data/FSDP across nodes, memory by part",
    "plan": "hsitp advise plan over P: per-rank memory and tokens/s per plan, dataset and GPU preset",
}


def _measured_inputs(cost: CostSettings, table: str) -> dict[str, str]:
    """The calibration files a table's ``measured:PATH`` hardware names: provenance inputs."""
    from hsitp.cost.hardware import MEASURED_PREFIX

    sec = getattr(cost, table)  # every table's section names hardware; the boundary's a list and one preset
    names = [*sec.point_hardware, sec.hardware] if table == "boundary" else list(sec.hardware)
    return {n: n[len(MEASURED_PREFIX) :] for n in names if n.startswith(MEASURED_PREFIX)}


def _table(args: argparse.Namespace) -> int:
    from hsitp.contracts import COST
    from hsitp.cost.tables import TABLES
    from hsitp.io import provenance, write_netcdf

    cost = CostSettings.from_config(config_from_args(args))
    ds = TABLES[args.table](cost)
    prov = provenance(config={"cost": cost.as_json()}, inputs=_measured_inputs(cost, args.table))
    write_netcdf(ds, args.out, kind=COST[args.table].kind, prov=prov)
    print(f"wrote {args.out} ({', '.join(f'{k}={v}' for k, v in ds.sizes.items())})")
    return 0


def _advise(args: argparse.Namespace) -> int:
    from hsitp.cost.advise import advise, format_text

    cost = CostSettings.from_config(config_from_args(args))
    _check_model(cost, args)
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

    adv = sub.add_parser(
        "advise",
        help="split: which dimension to split; plan: which plan, P, g and checkpointing fit and train fastest",
        description="`hsitp advise split` is what `hsitp advise` answered before (same flags); `hsitp advise plan` "
        "sizes a whole allocation. Modelled, not measured.",
    )
    asub = adv.add_subparsers(dest="action", required=True, metavar="{split,plan}")
    p = asub.add_parser(
        "split",
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
    _register_plan(asub, preset_names())


def _register_plan(asub: argparse._SubParsersAction, presets: list[str]) -> None:
    p = asub.add_parser(
        "plan",
        help="which plan (tp, dchag_l/dchag_c with g, token), P and checkpointing fit and train fastest",
        description="Per-rank peak memory by part against the device memory (less cost.advise.headroom), step "
        "time split into compute and exposed communication, tokens/s of the whole allocation (data-parallel "
        "replicas less their gradient all-reduce), a why-not for every candidate below the best. Modelled, not "
        "measured. Hardware: "
        + ", ".join(presets)
        + " or measured:PATH. Defaults for the model come from the "
        "config's cost section (the paper's 7.4 model: D 256, depth 12, 8 heads).",
    )
    p.add_argument("--embed-dim", type=int, default=None, help="D (default cost.embed_dim)")
    p.add_argument("--depth", type=int, default=None, help="transformer blocks (default cost.depth)")
    p.add_argument("--heads", type=int, default=None, help="attention heads (default cost.heads)")
    p.add_argument("--mlp-ratio", type=int, default=None, help="MLP hidden / D (default cost.mlp_ratio)")
    p.add_argument("--dataset", default=None, help="registry name: bands, grid and classes of the scene")
    p.add_argument("--bands", type=int, default=None, help="L (instead of --dataset, with --height/--width)")
    p.add_argument("--height", type=int, default=None, help="scene rows H (instead of --dataset)")
    p.add_argument("--width", type=int, default=None, help="scene columns W (instead of --dataset)")
    p.add_argument(
        "--classes", type=int, default=None, help="output classes (default: the dataset's, else 16)"
    )
    p.add_argument("--patch", type=int, default=8, help="patch size p (default 8: Indian Pines N = 324)")
    p.add_argument(
        "--batch", type=int, default=None, help="scenes (crops) per group per step (default cost.batch)"
    )
    p.add_argument(
        "--hardware", default="h100-nvlink-ib", help="preset or measured:PATH (default h100-nvlink-ib)"
    )
    p.add_argument("--nodes", type=int, default=1, help="nodes in the allocation (default 1)")
    p.add_argument(
        "--devices-per-node", type=int, default=None, help="devices per node (default: the preset's)"
    )
    p.add_argument(
        "--device-memory-gb",
        type=float,
        default=None,
        help="device memory in GB (1e9 B; default: the preset's)",
    )
    p.add_argument("--devices", type=int, default=None, help="fix the TP degree P (default: every divisor)")
    p.add_argument(
        "--groups", type=int, nargs="+", default=None, help="D-CHAG g values (default cost.advise.groups)"
    )
    p.add_argument(
        "--dtype", choices=["bfloat16", "float16", "float32"], default=None, help="default cost.dtype"
    )
    p.add_argument(
        "--master-fp32",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="fp32 master weights and AdamW state in 16-bit training (default cost.master_fp32)",
    )
    p.add_argument(
        "--checkpointing", nargs="+", choices=["none", "blocks"], default=["none", "blocks"], help="policies"
    )
    p.add_argument("--json", action="store_true", help="emit rows, inputs, versions and sources as JSON")
    add_config_args(p)
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from hsitp.cost.planner import run_plan

    cost = CostSettings.from_config(config_from_args(args))
    _check_model(cost, args)
    print(run_plan(cost, args))
    return 0


def _check_model(cost: CostSettings, args: argparse.Namespace) -> None:
    """Refuse a model that cannot exist as the options give it over the config's cost section (heads that do not
    divide D), before anything is planned with it; the message names the options given, else the keys."""
    given = {k: getattr(args, k, None) for k in ("embed_dim", "heads")}
    names = [f"--{k.replace('_', '-')}" if v is not None else f"cost.{k}" for k, v in given.items()]
    dim, heads = (int(getattr(cost, k)) if v is None else v for k, v in given.items())
    problem = check_shape(dim, heads, *names)
    if problem:
        raise ConfigError(problem)
