"""Load, merge and validate the pipeline config against ``schemas/config.schema.yaml``.

The same schema validates the config when the Snakemake DAG starts (``workflow/rules/common.smk``) and when a
stage is run by hand (``hsitp ... --config FILE``). Overlays (``config/smoke.yaml`` on ``config/config.yaml``)
merge recursively, later files winning, exactly as Snakemake merges ``--configfile`` onto ``configfile:``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
import yaml

from hsitp.errors import HsitpError
from hsitp.names import COMPARED_PLANS, DCHAG_PLANS, OP_NAMES, PLAN_NAMES, PLANS, PROTOCOLS
from hsitp.sections import Config

SCHEMA_RESOURCE = "config.schema.yaml"


class ConfigError(HsitpError, ValueError):
    """The config is invalid; the message names the key, the bad value and what is allowed."""


def schema_path() -> Path:
    return Path(str(resources.files("hsitp") / "schemas" / SCHEMA_RESOURCE))


# libyaml's loader where PyYAML has it: the 1,200-line schema loads in 0.03 s instead of 0.3 s, in every rank and
# every `hsitp` call (the same documents, the same safe subset of YAML).
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_load(text: str) -> Any:
    """``yaml.safe_load`` through libyaml when available."""
    return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 (a safe loader)


def load_schema() -> dict[str, Any]:
    """The config schema, its ``$defs`` enums filled in from the name registry (:mod:`hsitp.names`): a copy of the
    one parsed once per process (parsing took 0.02 s, half of every validate_config; the copy 0.001 s)."""
    return copy.deepcopy(_parsed_schema())


@functools.cache
def _parsed_schema() -> dict[str, Any]:
    schema = yaml_load(schema_path().read_text())
    enums = {"plan": PLAN_NAMES, "compared_plan": COMPARED_PLANS, "op": OP_NAMES, "protocol": PROTOCOLS}
    for name, values in enums.items():
        schema["$defs"][name]["enum"] = list(values)
    return schema


def deep_merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge: mappings merge key by key, anything else in ``overlay`` replaces."""
    out = copy.deepcopy(dict(base))
    for key, val in overlay.items():
        if isinstance(val, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], val)
        else:
            out[key] = copy.deepcopy(val)
    return out


def _with_defaults(cls: type[jsonschema.protocols.Validator]) -> type[jsonschema.protocols.Validator]:
    """jsonschema's default-filling recipe, snakemake.utils.validate's too: every subcommand runs without Snakemake."""
    validate_props = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # jsonschema's validator signature
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


def _whole(checker: Any, instance: Any) -> bool:
    """An integer is an int: JSON Schema takes 2.0 as an integer, the stages then fail on it (range(2.0), a shape)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = jsonschema.validators.extend(
    _with_defaults(jsonschema.Draft202012Validator),
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole),
)


def _where(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _number_hint(value: Any, wanted: Any) -> str | None:
    """What to write instead of a boolean or a text where a number is wanted (YAML reads ``true``/``yes`` as a
    boolean and ``1e-3``, without a dot, as text), or None when the key wants something else."""
    kinds = set(wanted if isinstance(wanted, list) else [wanted])
    if not kinds & {"integer", "number"} or not isinstance(value, bool | str):
        return None
    noun = "a number" if "number" in kinds else "a whole number"
    if isinstance(value, bool):
        return f"{value} is a boolean (YAML reads true, yes, on as one) where {noun} is wanted; write {noun}"
    try:
        number = float(value)
    except ValueError:
        return f"{value!r} is text where {noun} is wanted; write {noun}"
    if not math.isfinite(number) or ("number" not in kinds and not number.is_integer()):
        return f"{value!r} is text where {noun} is wanted; write {noun}"
    example = repr(number) if "number" in kinds else str(int(number))
    if "e" in value.lower() and "." not in value:
        return f"{value!r} is text (YAML reads {value} without a dot as text) where {noun} is wanted; write {example}"
    return f"{value!r} is text where {noun} is wanted; write {example} without quotes"


def validate_config(config: Mapping[str, Any]) -> Config:
    """``config`` (a config file's mapping, overlays merged) validated against the schema, its defaults filled in,
    as the typed :class:`~hsitp.sections.Config`; ConfigError naming every bad key otherwise. The caller's mapping
    is not changed."""
    # the schema's defaults are filled into the copy, never the caller's mappings
    cfg = copy.deepcopy(dict(config))
    schema = load_schema()
    bounds = {id(d) for d in schema["$defs"].values() if "maximum" in d}  # the sizes and seeds of $defs
    errors = sorted(_Validator(schema).iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            where = _where(err.absolute_path)
            if err.validator == "additionalProperties":
                allowed = sorted(err.schema.get("properties", {}))
                lines.append(f"{where}: {err.message}; allowed keys: {', '.join(allowed)}")
            elif err.validator == "type" and isinstance(err.instance, float) and err.instance.is_integer():
                lines.append(
                    f"{where}: {err.instance!r} is a float where a whole number is wanted; write {int(err.instance)}"
                )
            elif err.validator == "type" and (hint := _number_hint(err.instance, err.validator_value)):
                lines.append(f"{where}: {hint}")
            elif err.validator == "maximum" and id(err.schema) in bounds:  # a size past any machine, a seed
                lines.append(
                    f"{where}: {err.instance} is above {err.validator_value}; {err.schema['description'].rstrip('.')}"
                )
            else:
                lines.append(f"{where}: {err.message}")
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines) + f"\n(schema: {schema_path()})")
    problems = list(_non_finite(cfg))
    if problems:  # the typed checks below would compare NaNs
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))
    try:  # the schema was generated from these models: what it took, they take
        typed = Config.model_validate(cfg)
    except pydantic.ValidationError as exc:
        raise ConfigError("invalid config:\n  " + "\n  ".join(
            f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors())) from exc  # fmt: skip
    check_values(typed)
    return typed


# --- what cannot exist: what the schema's keywords cannot say, checked once the schema passed ---------------------
# [low, high] pairs: the searched ranges of tune.space (low == high fixes the value: Optuna allows it) and the
# cost model's and the scene's intervals (strict: an empty interval is a grid of one repeated value).
RANGES: dict[str, bool] = {  # key -> low must be strictly below high
    "data.clip_quantiles": True,
    "cost.boundary.rho_range": True,
    "cost.boundary.threshold_range": True,
    "tune.space.lr": False,
    "tune.space.weight_decay": False,
    "tune.space.label_smoothing": False,
    "tune.space.warmup_steps": False,
    "tune.space.per_class": False,
}
# (D, heads) of every model a section builds or prices: every head takes D / heads features, so heads divide D. Each
# pair lies in keys that every rule passing one of them passes too (a subcommand sees schema defaults for the rest).
SHAPES: tuple[tuple[str, str], ...] = (
    ("train.model.dim", "train.model.heads"),
    ("probe.dim", "probe.heads"),
    ("probe.estimate.grid.dim", "probe.estimate.grid.heads"),
    ("cost.embed_dim", "cost.heads"),
    ("cost.scale.embed_dim", "cost.scale.heads"),
    ("bench.D", "parallel.heads"),  # each D of the sweep, when it times an attention
)


def _attends(cfg: Config, dim_key: str) -> bool:
    """Whether the model of ``dim_key`` has attention heads: the bench's sweep only with an attention op (attn_*,
    or agg_*: the cross-band attentions); an MLP or a LayerNorm alone takes any D."""
    if dim_key != "bench.D":
        return True
    return any(op.startswith(("attn_", "agg_")) for op in cfg.bench.ops)


def _get(cfg: Config, dotted: str) -> Any:
    """The value of a dotted key (``train.model.dim``) of the typed config."""
    return functools.reduce(getattr, dotted.split("."), cfg)


MAX_WHOLE = 2**53  # the largest whole number a JSON reader (a float) holds exactly


def _non_finite(node: Any, path: tuple[Any, ...] = ()) -> Iterator[str]:
    """NaN and infinite numbers anywhere in the config (YAML's ``.nan`` and ``.inf``, JSON's ``NaN``): no key takes
    one, and ``minimum`` lets NaN through (every comparison with NaN is false)."""
    if isinstance(node, float) and not math.isfinite(node):
        yield f"{_where(path)}: {node} is not a finite number; give a number"
    elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_WHOLE:
        # no count, size or step of this pipeline comes near it (a typo: 10^20 epochs ran as a job of no end)
        yield f"{_where(path)}: {node} is past 2^53, beyond any count or size a key takes; give a smaller number"
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _non_finite(value, (*path, key))
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            yield from _non_finite(value, (*path, i))


def check_shape(dim: int, heads: int, dim_key: str, heads_key: str) -> str | None:
    """The problem with a model of width ``dim`` and ``heads`` heads (named by their keys or options), or None."""
    if dim % heads:
        heads_is, dim_is = (" " if key.startswith("--") else " = " for key in (heads_key, dim_key))
        return (
            f"{heads_key}{heads_is}{heads} does not divide {dim_key}{dim_is}{dim} (each head takes D / heads "
            "features)"
        )
    return None


# The boundary table's grid cells at most: one table at its largest grid (512 x 512 points, one D), about 2 minutes
# on 2 cores (401 x 401 took 80 s, 2026-12-05); its time grows with the cells.
BOUNDARY_CELLS = 512**2


def value_problems(cfg: Config) -> list[str]:
    """What cannot exist in a schema-valid config, one line each (NaN and infinities were refused before it was
    typed): a reversed range (:data:`RANGES`), a model whose heads do not divide its width (:data:`SHAPES`), a grid
    past what a table computes in minutes, a fold past the folds."""
    out = []
    for key, strict in RANGES.items():
        low, high = _get(cfg, key)
        if low > high or (strict and low == high):
            what = "reversed" if low > high else "empty"
            need = "below" if strict else "at most"
            out.append(f"{key}: [{low}, {high}] is {what}: a range is [low, high] with low {need} high")
    boundary = cfg.cost.boundary
    cells = boundary.points**2 * len(boundary.embed_dims)
    if cells > BOUNDARY_CELLS:
        out.append(
            f"cost.boundary: {boundary.points} points per axis x {len(boundary.embed_dims)} embed_dims is "
            f"{cells:,} grid cells, past the {BOUNDARY_CELLS:,} a table computes in minutes; fewer points or dims"
        )
    validation = cfg.train.validation
    if validation.folds >= 2 and validation.fold >= validation.folds:
        out.append(
            f"train.validation.fold = {validation.fold} is past train.validation.folds = {validation.folds} "
            f"(0-based: 0 to {validation.folds - 1})"
        )
    for dim_key, heads_key in (pair for pair in SHAPES if _attends(cfg, pair[0])):
        dims, heads = _get(cfg, dim_key), int(_get(cfg, heads_key))
        for dim in dims if isinstance(dims, tuple | list) else [dims]:
            problem = check_shape(int(dim), heads, dim_key, heads_key)
            if problem:
                out.append(problem)
    return out


def check_values(cfg: Config) -> None:
    """Refuse (ConfigError, one problem a line) what :func:`value_problems` finds. :func:`validate_config` calls it,
    so every subcommand's config and the DAG's (hsitp.preflight) are checked the same way."""
    problems = value_problems(cfg)
    if problems:
        raise ConfigError("invalid config:\n  " + "\n  ".join(problems))


def check_run(cfg: Config) -> None:
    """What only the whole run's config can show (the DAG's, hsitp.preflight; a subcommand is given only the keys
    its rule passes, the schema's defaults standing in for the others): under ``train.recipe: tuned`` each plan
    trains on its own tuning study, which rule tune makes for the compared plans only, and the P-rank checks of
    ``train.equivalent`` (rule train_check: the config's recipe at ``train.groups``) cannot stand for them; a listed
    stage on a CPU device under ``parallel.backend: nccl``; a train or tune protocol no prepared file carries; the
    equivalence checks and the untuned control where they cannot compare anything."""
    if cfg.train.recipe == "tuned":
        untuned = [p for p in cfg.train.plans if p not in COMPARED_PLANS]
        if untuned:
            them = "it" if len(untuned) == 1 else "them"
            raise ConfigError(
                f"train.recipe: tuned trains each plan on its own tuning study, and `hsitp tune` studies "
                f"{', '.join(COMPARED_PLANS)} only; train.plans has {', '.join(untuned)}: drop {them} from "
                "train.plans or set train.recipe: config"
            )
    problems = (
        _backend_problem(cfg),
        _protocol_problem(cfg),
        _equivalence_problem(cfg),
        _control_problem(cfg),
    )
    for problem in problems:
        if problem:
            raise ConfigError(problem)


# The device key each rank stage runs on (tune's trials run on train.device)
STAGE_DEVICE = {"bench": "bench", "probe": "probe", "train": "train", "tune": "train"}


def _backend_problem(cfg: Config) -> str | None:
    """``parallel.backend: nccl`` with a listed stage whose device is forced to the CPU: every rank job of that stage
    fails at its process group's start (NCCL needs CUDA), after the jobs before it have run."""
    if cfg.parallel.backend != "nccl":
        return None
    keys = dict.fromkeys(f"{STAGE_DEVICE[s]}.device" for s in cfg.stages if s in STAGE_DEVICE)
    on_cpu = [k for k in keys if _get(cfg, k) == "cpu"]
    if not on_cpu:
        return None
    return (
        f"parallel.backend: nccl needs CUDA, but {', '.join(on_cpu)} = cpu: every rank job there would fail at its "
        "process group's start; set parallel.backend: gloo (or auto), or the device to auto or cuda"
    )


def _protocol_problem(cfg: Config) -> str | None:
    """A train or tune protocol the prepared files do not carry (``data.partition.protocols``): each of its jobs
    fails reading the partition, and the training summary pairs its cells with no baseline."""
    stages = [s for s in ("train", "tune") if s in cfg.stages]
    for stage in stages:
        missing = [p for p in getattr(cfg, stage).protocols if p not in cfg.data.partition.protocols]
        if missing:
            return (
                f"{stage}.protocols has {', '.join(missing)}, which data.partition.protocols = "
                f"{list(cfg.data.partition.protocols)} does not prepare: every {stage} job on it would fail reading "
                f"the partition; add it to data.partition.protocols or drop it from {stage}.protocols"
            )
    return None


# The plans without band groups: the single-process equivalent of each, at any P, is the dense model itself
ONE_MODEL_PLANS = tuple(p for p in PLAN_NAMES if not PLANS[p].groups)


def _equivalence_problem(cfg: Config) -> str | None:
    """What ``train.equivalent`` cannot compare: two plans of one model (their runs repeat one another), P-rank
    checks on a tuned recipe (rule train_check trains the config's recipe at ``train.groups``, each equivalent its
    study's) and checks stopped past ``train.epochs`` (compared at an epoch the equivalent never reaches)."""
    train = cfg.train
    if not train.equivalent:
        return None
    same = [p for p in train.plans if p in ONE_MODEL_PLANS]
    if len(same) > 1:
        # each trains the dense model whole in one process, from the same seed: one run, its verdict fixed
        return (
            f"train.equivalent trains each plan's single-process equivalent, and {', '.join(same)} have the same "
            "one (the model without band groups, from the same seed), so their runs repeat one another and their "
            f"verdicts are equal by construction; keep one of {', '.join(same)} in train.plans (tp) or set "
            "train.equivalent: false"
        )
    check = train.equivalence.epochs
    if check and train.recipe == "tuned":
        # a check run on another recipe (and g) than its equivalent's can only report a recipe mismatch
        return (
            f"train.recipe: tuned with train.equivalent: the P-rank checks (train.equivalence.epochs = {check}) "
            "train on the config's recipe at train.groups, not on each plan's study, so every check would fail on "
            "the recipe; set train.equivalence.epochs: 0 and check the equivalents in a run on the config's recipe "
            "(as config/cpu-fair.yaml does)"
        )
    if check > train.epochs:
        return (
            f"train.equivalence.epochs = {check} is past train.epochs = {train.epochs}: each P-rank check would "
            f"train the whole run and be compared at epoch {check}, which its equivalent never reaches; set "
            f"train.equivalence.epochs to at most {train.epochs} (0: no check)"
        )
    return None


def _control_problem(cfg: Config) -> str | None:
    """The untuned control (``train.control``) of D-CHAG plans without tp: its jobs would run and meet no tp run. A
    control that plans nothing (under ``train.recipe: config``, or without a D-CHAG plan) is a key made moot by
    another, as ``train.groups`` under a tuned recipe, and is not refused: an overlay on config/cpu-fair.yaml that
    sets the recipe or the plans would otherwise have to clear the control it never set."""
    train = cfg.train
    sizes = list(train.control.world_sizes)
    dchag = [p for p in train.plans if p in DCHAG_PLANS]
    if sizes and train.recipe == "tuned" and dchag and "tp" not in train.plans:
        return (
            f"train.control.world_sizes = {sizes}: the control trains each D-CHAG plan of train.plans on tp's "
            f"recipe beside tp's runs, and train.plans {list(train.plans)} has no tp (the control is compared with "
            "tp's runs); add it to train.plans or set train.control.world_sizes: []"
        )
    return None


class _StrictLoader(_YAML_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader, refusing a key given twice in one mapping (YAML would keep the last one silently: a
    second ``train:`` section would replace the first without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float):  # unhashable keys: the constructor refuses them itself
                continue
            if key in seen:
                problem = f"key {key!r} given twice (first on line {seen[key].line + 1})"
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error on one line: what is wrong and where (PyYAML's own text spans several lines)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        what = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        return f"{what}{where}"
    return " ".join(str(exc).split())


def read_config_file(path: str | Path) -> dict[str, Any]:
    """One config file's mapping; :class:`ConfigError` naming the file when it is missing, not a regular file,
    unreadable, not UTF-8 text, empty (or only comments: almost always a mistake, never "all defaults"), not YAML,
    has a key twice or holds something other than a mapping."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"config file {p} does not exist")
    if p.is_dir():
        raise ConfigError(f"config file {p} is a directory, not a YAML file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config file {p} cannot be read ({exc.strerror or exc})") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {p} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "expected a YAML config"
        ) from exc
    if not text.strip():
        raise ConfigError(
            f"config file {p} is empty; give a YAML mapping of settings (see config/config.yaml)"
        )
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {_yaml_problem(exc)}") from exc
    if data is None:
        raise ConfigError(
            f"config file {p} holds no settings (only comments); give a YAML mapping of settings"
        )
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"config file {p} must hold a mapping at the top level, found {type(data).__name__}"
        )
    return dict(data)


def load_config(paths: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None) -> Config:
    """Merge YAML files in order, then ``overrides``, and validate (:func:`validate_config`)."""
    merged: dict[str, Any] = {}
    for p in paths:
        merged = deep_merge(merged, read_config_file(p))
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"config overrides must be a mapping, found {type(overrides).__name__}")
    if overrides:
        merged = deep_merge(merged, overrides)
    return validate_config(merged)


def add_config_args(parser: argparse.ArgumentParser) -> None:
    """The config options every subcommand takes: YAML overlays and/or inline JSON (what Snakemake passes).

    Lives here, not in ``hsitp.cli``, so the stage modules that register subcommands need not import the CLI
    that imports them.
    """
    parser.add_argument(
        "--config",
        action="append",
        metavar="FILE",
        help="YAML config; repeat to overlay (e.g. --config config/config.yaml --config config/smoke.yaml). "
        "Default: config/config.yaml when present.",
    )
    parser.add_argument("--config-json", metavar="JSON", help="config (or overrides) as JSON, merged last")


def add_step(
    sub: argparse._SubParsersAction, name: str, help: str, func: Callable[[argparse.Namespace], Any]
) -> argparse.ArgumentParser:
    """A stage's subcommand ``name``, run by ``func(args)``, with the config options every subcommand takes
    (:func:`add_config_args`); the caller adds the subcommand's own arguments to the parser returned."""
    parser = sub.add_parser(name, help=help)
    add_config_args(parser)
    parser.set_defaults(func=func)
    return parser


@functools.cache
def _bounds() -> dict[str, dict[str, Any]]:
    """The schema's bounded ``$defs`` (a seed and the sizes), by name."""
    return {name: d for name, d in load_schema()["$defs"].items() if "maximum" in d}


# Command-line options (argparse dests) standing for a quantity the schema bounds in ``$defs``: every subcommand's
# parsed options are held to the bounds of the config keys of that quantity (:func:`check_options`).
OPTION_BOUNDS: dict[str, str] = {
    "seed": "seed",
    "embed_dim": "dim",
    "heads": "heads",
    "depth": "depth",
    "mlp_ratio": "mlp_ratio",
    "bands": "bands",
    "tokens": "tokens",
    "patch": "pixels",
    "height": "pixels",
    "width": "pixels",
    "groups": "groups",
    "batch": "batch",
    "classes": "classes",
    "world_size": "world_size",
    "devices": "world_size",
    "ranks": "world_size",
    "nodes": "devices",
    "devices_per_node": "devices",
    "ranks_per_node": "devices",
}


# Options standing for one config key: they share its schema bounds (``--level 1.5`` is refused as
# ``train.verdict.level: 1.5`` would be).
OPTION_KEYS: dict[str, str] = {
    "level": "train.verdict.level",
    "margin": "train.verdict.margin",
    "tolerance": "train.equivalence.tolerance",
    "threads": "resources.baseline.threads",
}
# Options with no config key of their own, and what each can be: (low, high or None, low exclusive, high
# exclusive, why).
Limits = tuple[float, float | None, bool, bool, str]
OPTION_LIMITS: dict[str, Limits] = {
    "stop_after": (1, None, False, False, "an epoch, counted from 1"),
    "launch": (0, None, False, False, "a launch index, counted from 0"),
    "partition": (0, None, False, False, "a partition index, counted from 0"),
    "timeout": (1, None, False, False, "seconds"),
    "budget_min": (0, None, True, False, "minutes"),
    "device_memory_gb": (0, None, True, False, "GB"),
    "cpus_per_node": (1, None, False, False, "CPUs per task"),
    "gpus_per_node": (0, None, False, False, "GPUs per task"),
}


def _key_limits(dotted: str) -> Limits:
    """The bounds of a numeric config key, from the schema."""
    node: Mapping[str, Any] = load_schema()
    for part in dotted.split("."):
        node = node["properties"][part]
    low = node.get("exclusiveMinimum", node.get("minimum", -math.inf))
    high = node.get("exclusiveMaximum", node.get("maximum"))
    why = f"as {dotted}: {str(node.get('description', '')).split('. ')[0].rstrip('.')}"
    return low, high, "exclusiveMinimum" in node, "exclusiveMaximum" in node, why


def _option_problem(dest: str, v: float) -> str:
    """What is wrong with one parsed number option that stands for a config key or has limits of its own, or ""."""
    limits = _key_limits(OPTION_KEYS[dest]) if dest in OPTION_KEYS else OPTION_LIMITS.get(dest)
    if limits is None:
        return ""
    low, high, low_excl, high_excl, why = limits
    below = v < low or (low_excl and v == low)
    above = high is not None and (v > high or (high_excl and v == high))
    if not (below or above):
        return ""
    lo = f"{'above' if low_excl else 'at least'} {low}"
    hi = "" if high is None else f", {'below' if high_excl else 'at most'} {high}"
    return f"--{dest.replace('_', '-')} {v} is out of range ({lo}{hi}; {why})"


def _paths(value: Any) -> list[Path]:
    """The values of an option that can name a file (a JSON text cannot)."""
    out = []
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, str | Path) and str(v) and not str(v).lstrip().startswith(("{", "[")):
            out.append(Path(v))
    return out


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except OSError:  # a name too long for the file system names no file
        return False


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse (one line) two outputs of one command on the same path, or an output on one of its input files:
    ``probe merge --memory-out m.nc --throughput-out m.nc`` kept only the second, ``train summary R --out R``
    overwrote its own input; and an output file on an existing folder (``cost rho --out results/`` failed only
    when the table was computed and renamed onto it), unless the subcommand writes a folder (``out_is_folder``).
    Outputs are the options named ``out`` or ``*_out``; inputs every other path option or argument that names an
    existing file."""
    outs = {
        d: p.resolve() for d, v in vars(args).items() if d == "out" or d.endswith("_out") for p in _paths(v)
    }
    seen: dict[Path, str] = {}
    for dest, path in outs.items():
        if path.is_dir() and not getattr(args, "out_is_folder", False):
            flag = "--" + dest.replace("_", "-")
            raise ConfigError(f"{flag} {path} is a folder; give the path of the file to write in it")
        if path in seen:
            raise ConfigError(
                f"--{seen[path].replace('_', '-')} and --{dest.replace('_', '-')} both write {path}"
            )
        seen[path] = dest
    for dest, value in vars(args).items():
        if dest in outs:
            continue
        for p in _paths(value):
            if _is_file(p) and p.resolve() in seen:
                raise ConfigError(
                    f"--{seen[p.resolve()].replace('_', '-')} {p} would overwrite an input of the command"
                )


def check_options(args: argparse.Namespace) -> None:
    """Refuse (ConfigError, one line naming the option) a parsed command-line option that cannot exist: a NaN or
    infinite number (``float`` parses "nan" and "inf", and every later comparison lets them through) or a value
    outside the bound of its quantity (:data:`OPTION_BOUNDS`: ``--depth 1000000000`` as ``cost.depth`` would be,
    ``--seed -1`` before NumPy sees it), and a list option naming one value twice (``--groups 4 4``, two paths
    alike), as a config list may not. ``hsitp.cli.main`` calls it for every subcommand, once parsed."""
    for dest, value in vars(args).items():
        flag = "--" + dest.replace("_", "-")
        # the launched command's own arguments, and overlays (applying one twice changes nothing), may repeat
        if isinstance(value, list) and dest not in ("args", "config"):
            twice = [v for i, v in enumerate(value) if v in value[:i]]
            if twice:
                where = dest if dest in ("partials", "data", "runs") else flag  # the positional lists
                raise ConfigError(f"{where}: {twice[0]} is given twice; give each once")
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f"{flag} {v} is not a finite number")
            if (
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and (problem := _option_problem(dest, v))
            ):
                raise ConfigError(problem)
            bound = _bounds().get(OPTION_BOUNDS.get(dest, ""))
            if not bound or not isinstance(v, int) or isinstance(v, bool):
                continue
            if not bound["minimum"] <= v <= bound["maximum"]:
                raise ConfigError(
                    f"{flag} {v} is outside {bound['minimum']}..{bound['maximum']}: {bound['description'].rstrip('.')}"
                )


def add_protocol_args(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--protocol`` (the accuracy protocol: ``random`` or ``block``; default None, the command says when it
    needs one). Not ``--split``: in this project a split is how a layer is cut across the TP ranks."""
    parser.add_argument("--protocol", choices=PROTOCOLS, help=help_text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when a key repeats (``json.loads`` keeps the last one silently)."""
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ConfigError(f"--config-json: key {', '.join(map(repr, twice))} given twice in one object")
    return dict(pairs)


def config_from_args(args: argparse.Namespace) -> Config:
    """The validated config of a subcommand whose parser got :func:`add_config_args`: ``--config FILE``
    (repeatable overlays) and/or ``--config-json``.

    With neither, ``config/config.yaml`` in the working directory is used when present, else schema defaults.
    """
    paths: list[str | Path] = list(args.config or [])
    config_json = args.config_json
    if not paths and config_json is None and Path("config/config.yaml").exists():
        paths = [Path("config/config.yaml")]
    overrides = None
    if config_json is not None:
        if not config_json.strip():
            raise ConfigError(
                '--config-json is empty; give a JSON object, e.g. --config-json \'{"run": "smoke"}\''
            )
        try:
            overrides = json.loads(config_json, object_pairs_hook=_unique_keys)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--config-json is not valid JSON: {exc}") from exc
        if not isinstance(overrides, dict):
            found = "null" if overrides is None else type(overrides).__name__
            raise ConfigError(f"--config-json must be a JSON object ({{...}}), found {found}")
    return load_config(paths, overrides)
