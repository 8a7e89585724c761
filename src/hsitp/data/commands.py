"""``hsitp data fetch|prepare|list``: the dataset stage's command line (one rule calls one of these)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from hsitp.config import add_config_args, config_from_args
from hsitp.settings import DataSettings

log = logging.getLogger(__name__)

DEFAULT_OUT = "results/{run}/data/{dataset}.nc"  # the path the Snakemake rule writes
# what `hsitp data list` shows of each DatasetSpec, in this order (--json: these keys)
LIST_FACTS = ("name", "title", "rows", "cols", "bands", "raw_bands", "classes", "class_counts", "sensor", "citation",
              "licence", "verified", "unverified")  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``data`` with its three subcommands to the ``hsitp`` parser."""
    data = sub.add_parser("data", help="dataset registry, verified downloads, preprocessing")
    dsub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    p = dsub.add_parser("fetch", help="get a dataset's raw files into the cache, verified by sha256")
    p.add_argument("dataset", help="registry name (see `hsitp data list`)")
    p.add_argument(
        "--out",
        help="also write the fetch manifest here (the cache's own copy, <raw_dir>/DATASET/fetch.json, "
        "is always written; default: only that one)",
    )
    add_config_args(p)
    p.set_defaults(func=_fetch)

    p = dsub.add_parser("prepare", help="write the analysis-ready netCDF (results/RUN/data/DATASET.nc)")
    p.add_argument("dataset", help="registry name (see `hsitp data list`)")
    p.add_argument(
        "--manifest", help="fetch manifest (default: <raw_dir>/DATASET/fetch.json; fetched if absent)"
    )
    p.add_argument(
        "--out", help="netCDF to write (default: results/RUN/data/DATASET.nc, RUN = the config's `run`)"
    )
    add_config_args(p)
    p.set_defaults(func=_prepare)

    p = dsub.add_parser("list", help="every dataset: grid, bands, classes, citation, terms and local status")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_config_args(p)
    p.set_defaults(func=_list)


def _fetch(args: argparse.Namespace) -> int:
    from hsitp.data import registry
    from hsitp.data.fetch import FetchSettings, fetch, manifest_path
    from hsitp.io import atomic_write_text

    spec = registry.get(args.dataset)
    settings = FetchSettings.of(DataSettings.from_config(config_from_args(args)), spec.name)
    result = fetch(spec, settings)
    manifest = manifest_path(settings, spec.name)
    if args.out and Path(args.out).resolve() != manifest.resolve():
        atomic_write_text(args.out, manifest.read_text())
        manifest = Path(args.out)
    for f in result.files.values():
        print(f"{f.name}: sha256 {f.sha256} OK ({f.size} bytes, {f.source}: {f.origin})")
    print(f"{spec.name}: variant {result.variant!r} ready; manifest {manifest}")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from hsitp.data import registry
    from hsitp.data.fetch import FetchSettings, fetch, manifest_path, read_manifest
    from hsitp.data.prepare import PrepareError, prepare, write_prepared

    spec = registry.get(args.dataset)
    if spec.prepare_unsupported:  # say so before any download
        raise PrepareError(f"{spec.name}: cannot be prepared yet: {spec.prepare_unsupported}")
    data = DataSettings.from_config(config_from_args(args))
    settings = FetchSettings.of(data, spec.name)
    manifest = Path(args.manifest) if args.manifest else manifest_path(settings, spec.name)
    if args.manifest is None and not manifest.exists():
        log.info("%s: no fetch manifest yet; fetching first", spec.name)
        fetch(spec, settings)
    fetched, variant = read_manifest(manifest, spec)
    ds = prepare(spec, fetched, variant, data)
    out = write_prepared(ds, args.out or DEFAULT_OUT.format(run=data.run, dataset=spec.name), data, fetched)
    dims = " x ".join(f"{ds.sizes[d]}" for d in ds["cube"].dims)
    print(f"{spec.name}: wrote {out} (cube {dims}, {len(spec.classes)} classes, source {fetched.source})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from hsitp.data import registry
    from hsitp.data.fetch import FetchSettings, local_status

    data = DataSettings.from_config(config_from_args(args))
    rows = []
    for spec in registry.all_specs():
        status, detail = local_status(spec, FetchSettings.of(data, spec.name))
        # the registry's facts by name (json writes the class labels as strings), then the local status
        row = {k: getattr(spec, k) for k in LIST_FACTS}
        rows.append(
            row | {"status": status, "status_detail": detail, "prepare_unsupported": spec.prepare_unsupported}
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        raw = f", {r['raw_bands']} raw" if r["raw_bands"] else ""
        grid = f"{r['rows']} x {r['cols']} x {r['bands']}{raw}"
        flag = "" if r["verified"] else "  [grid/counts unverified]"
        print(f"{r['name']:<17} {grid:<22} {len(r['classes']):>2} classes  {r['sensor']}{flag}")
        print(f"    {r['title']}")
        print("    classes: " + ", ".join(f"{k}={v}" for k, v in r["classes"].items()))
        print(f"    status:   {r['status']}: {r['status_detail']}")
        if r["prepare_unsupported"]:
            print(f"    prepare:  not supported yet: {r['prepare_unsupported']}")
        print(f"    citation: {r['citation']}")
        print(f"    terms:    {r['licence']}")
    return 0
