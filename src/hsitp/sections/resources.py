"""The ``resources`` section: what each job asks the executor for. The workflow reads it as the validated dict
(workflow/rules/resources.smk); these models are its schema."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, create_model

from hsitp.sections.base import Section

Count = Annotated[int, Field(ge=1)]
RANKS_PER_NODE = (
    "Ranks one node runs (null = every launch on one node). A P above it spans P / ranks_per_node nodes of a SLURM "
    "allocation (snakemake --profile slurm), one torchrun per node; it must divide every such P. A local run (no SLURM) "
    "refuses it before its first job."
)
JOB_MEMORY, JOB_MINUTES = "Memory for the job.", "Minutes for the job."


class _Sub(Section):
    """The base of ``_sub``'s models. Their fields carry their descriptions, so pydantic's attribute-docstring
    lookup is off: for a model made by create_model it finds no class statement and walks every frame up to the
    interpreter's, each a scan of sys.modules (about 1 s of every Snakemake start, 0.3 s of every ``hsitp``)."""

    model_config = ConfigDict(use_attribute_docstrings=False)


def _sub(name: str, **fields: tuple[Any, Any, str]) -> Any:
    """A sub-section model named ``name`` with ``fields`` (type, default, description); absent, it takes them all."""
    specs = {key: (kind, Field(default, description=doc)) for key, (kind, default, doc) in fields.items()}
    model = create_model(name, __base__=_Sub, __module__=__name__, **specs)  # type: ignore[call-overload]
    globals()[name] = model  # found by its name: a config travels pickled to a job's ranks
    return Annotated[model, Field(default_factory=model)]


def job(
    name: str, mem_mb: int, runtime: int, mem_doc: str = JOB_MEMORY, runtime_doc: str = JOB_MINUTES
) -> Any:
    """A single-process job: its memory (MB) and runtime (minutes)."""
    return _sub(name, mem_mb=(Count, mem_mb, mem_doc), runtime=(Count, runtime, runtime_doc))


def rank_job(
    name: str, mem_mb_per_rank: int, mem_doc: str, gpus_doc: str, runtime: int, runtime_doc: str
) -> Any:
    """A job starting ranks (hsitp.launch.rank_layout): memory and GPUs per rank, ranks per node, runtime."""
    return _sub(
        name,
        mem_mb_per_rank=(Count, mem_mb_per_rank, mem_doc),
        gpus_per_rank=(Annotated[int, Field(ge=0)], 0, gpus_doc),
        ranks_per_node=(Count | None, None, RANKS_PER_NODE),
        runtime=(Count, runtime, runtime_doc),
    )


class ResourcesSection(Section):
    """What each job asks the executor for (Snakemake `threads` and `resources`), taken from here and never from the
    machine that plans the DAG, so a cluster profile gets the same requests a laptop does. Memory in MB, runtime in
    minutes (what a Slurm executor turns into --mem and --time). Single-process jobs use one thread."""

    data_fetch: job(  # type: ignore[valid-type]
        "DataFetch", 1000, 60, "Memory for one download and its sha256 check.",
        "Minutes for every file of one dataset from the slowest source.",
    )  # fmt: skip
    """`hsitp data fetch` (runs on the machine that plans the DAG: it needs the network)."""
    data_prepare: job(  # type: ignore[valid-type]
        "DataPrepare", 8000, 30, "Memory for the largest registered cube and its working copies.",
        "Minutes for one scene.",
    )  # fmt: skip
    """`hsitp data prepare`: one scene's cube, normalised, PCA and partition (a few copies of the cube in memory)."""
    probe_run: rank_job(  # type: ignore[valid-type]
        "ProbeRun", 8000, "Memory per rank.", "GPUs per rank.", 120, "Minutes for the job."
    )
    """`hsitp probe run` at P: P ranks under one torchrun (threads = P x probe.threads_per_rank)."""
    tune: job("Tune", 16000, 1440)  # type: ignore[valid-type]
    """`hsitp tune`: one tuning study (one process, one thread; hours at the paper's budget)."""
    train_summary: job("TrainSummary", 2000, 15)  # type: ignore[valid-type]
    """`hsitp train summary`: the training records (and baseline files) reduced over seeds."""
    probe_merge: job("ProbeMerge", 2000, 15)  # type: ignore[valid-type]
    """`hsitp probe merge`: the per-P files and the memory model."""
    probe_estimate: job("ProbeEstimate", 4000, 60)  # type: ignore[valid-type]
    """`hsitp probe estimate`: fake tensors, one process."""
    cost_table: job("CostTable", 2000, 30, "Memory for one table.", "Minutes for one table.")  # type: ignore[valid-type]
    """`hsitp cost TABLE`: one cost-model table (pure arithmetic)."""
    report: job(  # type: ignore[valid-type]
        "Report", 4000, 15, "Memory for one notebook and its figures.", "Minutes for one notebook."
    )
    """`hsitp report notebook STAGE`: one stage's notebook, figures and tables (run where Snakemake runs)."""
    bench_run: rank_job(  # type: ignore[valid-type]
        "BenchRun", 8000, "Memory per rank; the job asks for P times this (per node: ranks_per_node times this).",
        "GPUs per rank; the job asks for P times this. 0 on CPU; 1 where bench.device runs on CUDA.",
        240, "Minutes for the whole sweep at one P (warmup, every pass and the collective sweep).",
    )  # fmt: skip
    """`hsitp bench run` at one P (src/hsitp/launch.py): on one node, one task in which torchrun starts P ranks of
    bench.threads_per_rank threads each (the job's threads = P x bench.threads_per_rank); over several nodes
    (ranks_per_node < P, SLURM only), one task per node, each running torchrun for ranks_per_node ranks."""
    bench_merge: job("BenchMerge", 2000, 15, "Memory for every per-P file at once.", "Minutes.")  # type: ignore[valid-type]
    """`hsitp bench merge`: joins the per-P files."""
    bench_calibrate: job("BenchCalibrate", 2000, 15, "Memory.", "Minutes.")  # type: ignore[valid-type]
    """`hsitp bench calibrate`: least-squares fits of alpha, beta and the per-op compute model."""
    bench_compare: job("BenchCompare", 2000, 15, "Memory.", "Minutes.")  # type: ignore[valid-type]
    """`hsitp bench compare`: both cost models at every measured point."""
    baseline: _sub(  # type: ignore[valid-type]
        "Baseline",
        threads=(
            Annotated[int, Field(ge=1, le=1024)], 1,
            "Parallel grid-search fits (the job's threads), at most 1,024 (more cores than any node has).",
        ),
        mem_mb=(Count, 4000, "Memory for the cube and the fitted models."),
        runtime=(Count, 60, "Minutes for every method's grid search."),
    )  # fmt: skip
    """`hsitp baseline`: grid search and test scoring of the classical baseline on one dataset, protocol and seed."""
    train: rank_job(  # type: ignore[valid-type]
        "Train", 16000, "Memory per rank; the job asks for P times this.",
        "GPUs per rank; the job asks for P times this. 0 on CPU.", 720,
        "Minutes for one whole training run (every epoch).",
    )  # fmt: skip
    """`hsitp train`: one training job at P, one task on one node, torchrun starts P ranks of train.threads_per_rank
    threads each."""
