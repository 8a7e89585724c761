"""What the workflow checks when the DAG is built, before any job runs (workflow/rules/common.smk).

The config's schema first, then every stage's sizes at every P it will run: the microbenchmark's sweep at each
``bench.world_sizes``, the probe's grid at each ``probe.world_sizes`` and the estimate's grid, every training job,
and the probe against the trained sizes. Each of these is the very check its job runs again before its runtime
starts, so the DAG refuses exactly what a job would refuse, only minutes earlier and in one line instead of the
ranks' lines run together behind a rule's message. Nothing here imports torch (the DAG is built in about a second).

A refusal is one line on the terminal naming the key (and, for a schema error, the allowed values or keys); the
full text, every error and the traceback go to ``logs/<run>/config_error.log``.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hsitp.config import ConfigError, check_run, validate_config
from hsitp.errors import HsitpError
from hsitp.sections import Config
from hsitp.settings import BenchSettings, ProbeSettings

__all__ = ["check_stage_sizes", "error_log_path", "one_line", "preflight"]


def preflight(config: Mapping[str, Any]) -> Config:
    """The typed config (schema defaults filled) of the workflow's config mapping, once every stage's sizes were
    checked; HsitpError otherwise."""
    cfg = validate_config(config)
    check_run(cfg)
    check_stage_sizes(cfg)
    return cfg


def check_stage_sizes(config: Config) -> None:
    """Refuse, naming the key, a P that a stage listed in ``stages`` cannot run (ConfigError / PlanError); tune's
    too under ``train.recipe: tuned``, whose training jobs read its studies whether tune is listed or not."""
    stages = set(config.stages)
    if "train" in stages and config.train.recipe == "tuned":
        stages.add("tune")
    _check_names(config, stages)
    if stages & {"data", "train", "baseline", "tune"}:  # each reads the prepared files, listed data or not
        _check_data(config)
    if "tune" in stages:
        _check_tune(config)
    if "bench" in stages:
        _check_bench(config)
    if "probe" in stages:
        _check_probe(ProbeSettings.from_config(config))
    if "train" in stages:
        from hsitp.train.plan import check_jobs
        from hsitp.train.settings import TrainSettings

        check_jobs(TrainSettings.from_config(config))
    # probe.match_train holds whether or not this run trains: the train section is its model either way
    if "probe" in stages:
        from hsitp.probe.match import check_matches_train

        check_matches_train(config)


def _check_data(config: Config) -> None:
    """Refuse what ``data prepare`` would refuse minutes later, from the registry's facts of every listed scene:
    a partition block larger than the scene, more PCA components than the scene has bands, a partition that
    leaves some class no test pixel."""
    from hsitp.data.partition import check_satisfiable
    from hsitp.data.registry import get

    partition = config.data.partition
    block, k = partition.block, config.data.pca_components
    for name in config.datasets:
        spec = get(name)
        if block > min(spec.rows, spec.cols):
            raise ConfigError(
                f"data.partition.block = {block} exceeds the {name} scene ({spec.rows} x {spec.cols}); use a "
                f"block side <= {min(spec.rows, spec.cols)}"
            )
        if k is not None and k > spec.bands:
            raise ConfigError(f"data.pca_components = {k}: the {name} scene has {spec.bands} bands")
        if spec.class_counts is not None:
            try:
                check_satisfiable({c: spec.class_counts[c] for c in spec.classes}, partition, name)
            except HsitpError as exc:
                raise ConfigError(str(exc)) from exc


def _check_names(config: Config, stages: set[str]) -> None:
    """Refuse a name the registry or the hardware presets lack (which a job would meet minutes later, or never:
    the bench's shard mode runs on a GPU machine only), and a tuned P whose ranks cannot hold whole heads."""
    from hsitp.cost.hardware import preset_names
    from hsitp.data.registry import names

    hardware = config.bench.shard.hardware
    if not hardware.startswith("measured:") and hardware not in preset_names():
        raise ConfigError(
            f"bench.shard.hardware = {hardware!r}: no such preset; one of {', '.join(preset_names())}, or "
            "measured:PATH"
        )
    unknown = [d for d in config.cost.plan.datasets if d not in names()]
    if "cost" in stages and unknown:
        raise ConfigError(
            f"cost.plan.datasets: {', '.join(unknown)} not in the registry (`hsitp data list`: {', '.join(names())})"
        )
    P, heads = config.tune.world_size, config.train.model.heads  # noqa: N806
    if "tune" in stages and heads % P:
        raise ConfigError(
            f"tune.world_size = {P} does not divide train.model.heads = {heads} (every rank holds whole heads)"
        )


def _check_tune(config: Config) -> None:
    """Refuse a g of ``tune.space.groups`` past every trained scene's bands: it fits no plan's band partition at
    any P, and the study drops what does not fit without a word (a typo such as 512 for 5 tuned silently)."""
    from hsitp.data.registry import get, names

    scenes = [d for d in config.train.datasets or config.datasets if d in names()]
    if not scenes:
        return
    bands = max(config.data.pca_components or get(d).bands for d in scenes)
    past = [g for g in config.tune.space.groups if g > bands]
    if past:
        raise ConfigError(
            f"tune.space.groups = {past[0]} D-CHAG groups per rank, but the trained scenes have at most {bands} "
            f"bands: every group needs a band (g <= {bands})"
        )


def _check_bench(config: Config) -> None:
    from hsitp.bench.ops import sweep_points
    from hsitp.bench.predict import check_points
    from hsitp.bench.runner import check_passes
    from hsitp.cost.budget import ANY_MACHINE_BYTES, check_bench_sizes

    s = BenchSettings.from_config(config)
    if all(P < 2 for P in s.world_sizes):  # noqa: N806
        # bench calibrate fits alpha and beta to the collective sweep, which a single rank has nothing to time
        raise ConfigError(
            f"bench.world_sizes = {list(s.world_sizes)}: the calibration fits alpha and beta to collectives timed at "
            "P >= 2 only, so bench calibrate would fail after every launch; add a P >= 2 (e.g. [1, 2])"
        )
    check_passes(s)
    check_bench_sizes(s.roofline.shapes, s.roofline.copy_bytes, s.collectives.sizes_bytes, ANY_MACHINE_BYTES)
    # "auto" is bfloat16 on CUDA, float32 on CPU: the element type does not decide whether a split fits
    dtypes = list(dict.fromkeys("float32" if d == "auto" else d for d in s.dtypes))
    for P in s.world_sizes:  # noqa: N806
        try:
            check_points([pt for _, pt in sweep_points(s, int(P), dtypes)], head_padding=s.head_padding)
        except HsitpError as exc:
            raise ConfigError(f"bench.world_sizes: P = {P}: {exc}") from exc


def _check_probe(pc: ProbeSettings) -> None:
    from hsitp.probe.grid import estimate_points, points

    for P in pc.world_sizes:  # noqa: N806
        try:
            points(pc, int(P))
        except HsitpError as exc:
            # points() names the plan, P, L, N and g already ("probe: plan 'tp' at P = 3, ...")
            raise ConfigError(f"probe.world_sizes: {str(exc).removeprefix('probe: ')}") from exc
    try:
        estimate_points(pc.estimate)
    except HsitpError as exc:
        raise ConfigError(f"probe.estimate: {str(exc).removeprefix('probe.estimate: ')}") from exc


def error_log_path(config: Mapping[str, Any]) -> Path:
    """Where the full text of a refused config goes: ``logs/<run>/config_error.log`` (``logs/`` when the run's
    name is itself what is wrong)."""
    run = config.get("run")
    ok = isinstance(run, str) and run and "/" not in run and not run.startswith(".")
    return Path("logs") / (run if ok else "") / "config_error.log"


def one_line(exc: BaseException, log_path: Path | None = None) -> str:
    """The terminal's line for a refused config: the first error (key and message) and how many more there are;
    with ``log_path``, the full text and the traceback are written there and the line points to it."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    head, details = (lines[0], lines[1:]) if lines else (type(exc).__name__, [])
    errors = [ln for ln in details if not ln.startswith("(schema:")]
    if head.endswith(":") and errors:  # "invalid config:" then one error a line
        head, errors = f"{head} {errors[0]}", errors[1:]
    more = f" (and {len(errors)} more)" if errors else ""
    where = ""
    if log_path is not None:
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(text + "\n\n" + "".join(traceback.format_exception(exc)))
            where = f"; full text in {log_path}"
        except OSError:
            pass  # an unwritable log must not hide the error itself
    return f"hsitp: {head}{more}{where}"
