"""``hsitp baseline DATASET --protocol P [--partition K] --seed S --out FILE``: the classical baseline (rule
``baseline``)."""

from __future__ import annotations

import argparse

from hsitp.config import add_config_args, config_from_args
from hsitp.names import PROTOCOLS, partition_tag  # not data.partition: it imports xarray and scipy

DEFAULT_DATA = "results/{run}/data/{dataset}.nc"  # what rule data_prepare writes
DEFAULT_OUT = (
    "results/{run}/baseline/{dataset}_{protocol}{tag}_s{seed}.nc"  # rule baseline's (tag: partition_tag)
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``baseline`` to the ``hsitp`` parser."""
    p = sub.add_parser(
        "baseline",
        help="RBF SVM and random forest on pixel spectra, tuned on train pixels, scored on one protocol's test pixels",
    )
    p.add_argument("dataset", help="registry name (see `hsitp data list`)")
    p.add_argument(
        "--protocol",
        required=True,
        choices=PROTOCOLS,
        help="accuracy protocol: which train/test partition of the prepared file",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the CV folds and the forest (not of the partition)"
    )
    p.add_argument(
        "--partition",
        type=int,
        default=0,
        help="which of the protocol's partitions of the prepared file (0..data.partition.draws - 1; default 0)",
    )
    p.add_argument("--data", help="prepared netCDF (default: results/RUN/data/DATASET.nc)")
    p.add_argument(
        "--out", help="netCDF to write (default: results/RUN/baseline/DATASET_PROTOCOL[_kK]_sSEED.nc)"
    )
    p.add_argument("--threads", type=int, default=1, help="parallel grid-search fits (default 1)")
    add_config_args(p)
    p.set_defaults(func=_baseline)


def _baseline(args: argparse.Namespace) -> int:
    from hsitp.baseline.classical import BaselineError, run_baseline
    from hsitp.contracts import BASELINE, DATASET
    from hsitp.io import provenance, write_netcdf

    cfg = config_from_args(args)
    data = args.data or DEFAULT_DATA.format(run=cfg.run, dataset=args.dataset)
    out = args.out or DEFAULT_OUT.format(
        run=cfg.run,
        dataset=args.dataset,
        protocol=args.protocol,
        tag=partition_tag(args.partition),
        seed=args.seed,
    )
    ds = DATASET.read(data)
    if (
        str(ds.attrs.get("dataset", args.dataset)) != args.dataset
    ):  # scores would be filed under the wrong scene
        raise BaselineError(
            f"hsitp baseline: {data} holds the scene {ds.attrs['dataset']!r}, not {args.dataset!r}; pass the "
            f"{args.dataset} scene (--data) or name its scene"
        )
    res = run_baseline(
        ds, args.protocol, args.seed, cfg.baseline, threads=args.threads, partition=args.partition
    )
    prov = provenance(
        config=cfg.as_json(include={"baseline"}),
        inputs={"dataset": data},
        extra={
            "dataset": args.dataset,
            "protocol": args.protocol,
            "partition": args.partition,
            "seed": args.seed,
        },
    )
    write_netcdf(res, out, kind=BASELINE.kind, prov=prov)
    for i, m in enumerate(res["classifier"].values.tolist()):
        oa, aa, kappa = (float(res[v].values[i]) for v in ("overall_accuracy", "average_accuracy", "kappa"))
        print(
            f"{args.dataset} {args.protocol} partition {args.partition} seed {args.seed} {m}: OA {oa:.4f} "
            f"AA {aa:.4f} kappa {kappa:.4f}"
        )
    print(f"wrote {out}")
    return 0
