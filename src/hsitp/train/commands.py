"""``hsitp train``: one training job (dataset, plan, N, P, g, protocol, partition, seed), launched by torchrun with P
ranks::

    torchrun --standalone --nnodes 1 --nproc_per_node P -m hsitp train results/RUN/data/DATASET.nc \\
        --plan tp --tokens 324 --patch 8 --world-size P --groups 1 --protocol random --seed 0 \\
        --out results/RUN/train/DATASET/NAME.nc

``--tokens N`` picks the crop; ``--patch`` defaults to the patch of the ``train.crops`` entry with that N for the
scene's dataset (the Snakemake rule passes both). ``--partition K`` picks the protocol's partition (default 0; the
prepared file holds ``data.partition.draws`` of them).

``hsitp train summary RECORD... [--baseline FILE...] --out results/RUN/train/summary.nc`` reduces the records over
seeds (``hsitp.train.summary``).

``--ranks 1`` trains the single-process equivalent of (plan, P, g) (``train.equivalent``); ``--stop-after E`` stops
after epoch E on the whole run's schedule (the equivalence check). ``hsitp train equivalence RECORD... --out
results/RUN/train/equivalence.nc`` compares each check run with its equivalent (``hsitp.train.equivalence``).

A P the model does not fit is refused (``hsitp.models.check_plan``, via ``check_job``) before the runtime starts.
The train settings are read once here (``hsitp.train.settings.TrainSettings``) and passed down. SIGINT and SIGTERM
stop the job at a safe point (``hsitp.signals``, as ``hsitp bench run``): every rank after the same epoch's
checkpoint (in one process, before the next step), exit status 128 + the signal (130, 143); under torchrun (P > 1)
every rank leaves through ``hsitp.signals.exit_rank`` after its own teardown, so a failure on one rank never hangs
the job.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hsitp.config import add_config_args, add_protocol_args, config_from_args
from hsitp.errors import HsitpError
from hsitp.train.plan import TrainJob
from hsitp.train.settings import TrainSettings

if TYPE_CHECKING:
    from hsitp.parallel.runtime import Runtime
    from hsitp.signals import StopRequest
from hsitp.names import PLAN_NAMES

log = logging.getLogger(__name__)


def _summary(args: argparse.Namespace) -> int:
    from hsitp.contracts import TRAIN_SUMMARY
    from hsitp.io import provenance, write_netcdf
    from hsitp.train.summary import summarize

    records, baselines = args.data[1:], list(args.baseline)
    given = {k: v for k, v in (("margin", args.margin), ("level", args.level)) if v is not None}
    ds = summarize(records, baselines, **given)  # unset: hsitp.evaluate.verdict's defaults
    inputs = {str(p): p for p in [*records, *baselines]}
    write_netcdf(ds, args.out, kind=TRAIN_SUMMARY.kind, prov=provenance({}, inputs=inputs))
    print(f"wrote {args.out} ({ds.sizes['cell']} cells from {len(records)} records)")
    return 0


def _equivalence(args: argparse.Namespace) -> int:
    from hsitp.contracts import TRAIN_EQUIVALENCE
    from hsitp.io import provenance, write_netcdf
    from hsitp.train.equivalence import compare, failures

    records = args.data[1:]
    ds = compare(records, **({} if args.tolerance is None else {"tolerance": args.tolerance}))
    write_netcdf(
        ds, args.out, kind=TRAIN_EQUIVALENCE.kind, prov=provenance({}, inputs={str(p): p for p in records})
    )
    bad = failures(ds)
    print(f"wrote {args.out} ({ds.sizes['check']} checks, {len(bad)} outside the tolerance)")
    for line in bad:
        print(f"hsitp: equivalence: {line}", file=sys.stderr)
    return 1 if bad else 0


def _dispatch(args: argparse.Namespace) -> int:
    """``hsitp train summary ...``, ``hsitp train equivalence ...`` or ``hsitp train DATA --plan ...`` (one parser
    for the three forms: the positional word says which)."""
    if args.data[0] == "summary":
        return _summary(args)
    if args.data[0] == "equivalence":
        return _equivalence(args)
    if len(args.data) != 1:
        raise HsitpError(f"hsitp train: one prepared scene expected, got {args.data}")
    missing = [
        f"--{k.replace('_', '-')}"
        for k in ("plan", "tokens", "world_size", "protocol", "seed")
        if getattr(args, k) is None
    ]
    if missing:
        raise HsitpError(f"hsitp train: {', '.join(missing)} required")
    if args.baseline:
        raise HsitpError("hsitp train: --baseline belongs to `hsitp train summary`")
    args.data = args.data[0]
    return _train(args)


def _train(args: argparse.Namespace) -> int:
    from hsitp.signals import stop_on_signals

    settings, job = _job(args)
    from hsitp.parallel.runtime import RuntimeSettings, start
    from hsitp.train.loop import train_rank

    # SIGINT / SIGTERM are recorded (hsitp.signals) and stop every rank together at the next epoch's end, after its
    # checkpoint (in one process, before the next step); the job leaves with 128 + the signal, no record written
    with stop_on_signals(f"train {job.name}") as stop:
        rt = start(RuntimeSettings.from_config(settings.config, section="train", world_size=job.launched))
        if rt.world_size == 1:
            try:
                train_rank(rt, settings, job, stop=stop)
            finally:
                rt.stop()
            return 0
        _run_rank(rt, settings, job, stop)


def _memory(settings: TrainSettings, job: TrainJob) -> float:
    """What one rank of this job may hold: this machine's memory shared by the ranks launched here on its CPU
    (a GPU's own limit is CUDA's to report), else any machine's."""
    from hsitp.cost.budget import ANY_MACHINE_BYTES, host_bytes

    device = settings.device
    if device == "cuda" or (device == "auto" and _cuda()):
        return ANY_MACHINE_BYTES
    return host_bytes() / job.launched


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _job(args: argparse.Namespace) -> tuple[TrainSettings, TrainJob]:
    """The settings (read once from the validated config, with ``--recipe`` applied) and the job; a job whose P or
    crop does not fit is refused here, before any rank starts."""
    from hsitp.contracts import dataset_name
    from hsitp.train.data import scene_header
    from hsitp.train.plan import check_job, crop_patch

    cfg, recipe_plan = config_from_args(args), None
    if args.recipe:
        from hsitp.train.recipe import apply_recipe

        cfg, recipe_plan = apply_recipe(
            cfg,
            args.recipe,
            plan=args.plan,
            protocol=args.protocol,
            groups=args.groups,
            recipe_plan=args.recipe_plan,
        )
    elif args.recipe_plan:
        raise HsitpError(
            "hsitp train: --recipe-plan names whose --recipe STUDY a job trains on; give --recipe"
        )
    if args.partition < 0:
        raise HsitpError(f"hsitp train: --partition {args.partition}: a partition index is >= 0")
    settings = TrainSettings.from_config(cfg, recipe_plan=recipe_plan)
    dataset = dataset_name(Path(args.data))
    patch = args.patch if args.patch is not None else crop_patch(settings, dataset, args.tokens)
    job = TrainJob(
        data=Path(args.data),
        out=Path(args.out),
        plan=args.plan,
        world_size=args.world_size,
        groups=args.groups,
        protocol=args.protocol,
        seed=args.seed,
        tokens=args.tokens,
        patch=patch,
        ranks=args.ranks or 0,
        stop_after=args.stop_after,
        partition=args.partition,
    )
    if job.launched not in (1, job.world_size):
        raise HsitpError(f"hsitp train: --ranks {args.ranks}: 1 (the single-process equivalent) or P")
    bands, classes, rows, cols = scene_header(job.data)
    # before any rank starts: a P the model does not fit, a crop larger than the scene
    check_job(
        settings, job.plan, job.world_size, job.groups, bands, classes,
        patch=job.patch, tokens=job.tokens, rows=rows, cols=cols, dataset=dataset, memory=_memory(settings, job),
    )  # fmt: skip
    return settings, job


def _run_rank(rt: Runtime, settings: TrainSettings, job: TrainJob, stop: StopRequest) -> NoReturn:
    """One rank of a torchrun launch: train, tear the group down, and leave through ``exit_rank`` whatever
    happened, so a failure on one rank never hangs the job (the others are stopped by torchrun)."""
    from hsitp.signals import Interrupted, exit_rank
    from hsitp.train.loop import train_rank

    code = 0
    try:
        train_rank(rt, settings, job, stop=stop)
        rt.stop()
    except Interrupted as exc:  # every rank stopped after the same epoch's checkpoint: one line, from rank 0
        rt.stop()
        if rt.rank == 0:
            print(f"hsitp: {exc}; nothing written (the checkpoints stay: a re-run resumes)", file=sys.stderr)
        code = exc.exit_code
    except HsitpError as exc:
        print(f"hsitp: error (rank {rt.rank}): {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        print(f"hsitp: interrupted (rank {rt.rank})", file=sys.stderr)
        code = 130
    except BaseException:
        log.exception("rank %d failed", rt.rank)
        code = 1
    # after a failure the peers may be stuck in a collective: leave without waiting (hsitp.signals.exit_rank)
    exit_rank(code)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train one plan at one P under torchrun (per-epoch record, checkpoints); "
        "`hsitp train summary RECORD... --out FILE`: mean/std over seeds per cell",
    )
    p.add_argument(
        "data",
        nargs="+",
        help="prepared scene, results/RUN/data/DATASET.nc; or `summary` followed by the training records",
    )
    _job_args(p)
    p.add_argument(
        "--margin", type=float, help="(summary) verdict margin delta (train.verdict.margin; default 0.01)"
    )
    p.add_argument(
        "--level", type=float, help="(summary) verdict confidence level (train.verdict.level; default 0.95)"
    )
    p.add_argument(
        "--tolerance",
        type=float,
        help="(equivalence) largest |OA difference| that passes (train.equivalence.tolerance; default 0.0005)",
    )
    p.add_argument(
        "--baseline",
        nargs="*",
        default=[],
        help="(summary) classical baseline files DATASET_{protocol}[_kK]_s{seed}.nc",
    )
    p.add_argument(
        "--out", required=True, help="per-epoch record (netCDF, written by rank 0), or the summary's netCDF"
    )
    add_config_args(p)
    p.set_defaults(func=_dispatch)


def _job_args(p: argparse.ArgumentParser) -> None:
    """The options of one training job (plan, crop, P, g, ranks, recipe, protocol, partition, seed)."""
    p.add_argument("--plan", choices=PLAN_NAMES, help="(training) plan")
    p.add_argument(
        "--tokens", type=int, help="(training) N, spatial tokens per crop: one crop of train.crops"
    )
    p.add_argument(
        "--patch",
        type=int,
        help="(training) patch edge p of the crop; default: that of the train.crops entry with N = --tokens",
    )
    p.add_argument("--world-size", type=int, help="(training) P; must equal torchrun's --nproc_per_node")
    p.add_argument("--groups", type=int, default=1, help="D-CHAG groups per rank g (dchag plans; else 1)")
    p.add_argument(
        "--ranks",
        type=int,
        help="(training) processes: P (default) or 1, the single-process equivalent of (plan, P, g)",
    )
    p.add_argument(
        "--stop-after", type=int, help="(training) stop after this epoch, on the whole run's LR schedule"
    )
    p.add_argument(
        "--recipe",
        help="(training) a tuning study (results/RUN/tune/DATASET/PLAN_PROTOCOL.nc): train on its best trial's lr, "
        "weight decay, label smoothing, warm-up and per_class (train.recipe: tuned)",
    )
    p.add_argument(
        "--recipe-plan",
        help="(training) the plan whose study --recipe is (default: the job's own plan): tp for the untuned control, "
        "a D-CHAG job on tp's recipe at its own g (train.control)",
    )
    add_protocol_args(
        p, help_text="(training) accuracy protocol: which train/test partition of the prepared file"
    )
    p.add_argument("--seed", type=int, help="(training) seed")
    p.add_argument(
        "--partition",
        type=int,
        default=0,
        help="(training) which of the protocol's partitions of the prepared file (0..data.partition.draws - 1; "
        "default 0)",
    )
