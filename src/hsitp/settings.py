"""The stages' settings, typed (torchtitan's ``job_config.py``): one frozen dataclass per config section, built once
from the validated config where a subcommand starts (``XSettings.from_config(cfg)``) and passed to its functions.

A field is the section's key of its name (a nested section is a nested dataclass; lists become tuples); the schema
(``schemas/config.schema.yaml``) says what each does and what it may be, and ``tests/test_settings_schema.py`` fails
when the two drift. A section written as a model (``hsitp.sections``) needs no second copy: its settings are its
model with the fields read from elsewhere added (``BenchSettings``, ``DataSettings``), or the model alone
(``TuneSettings``). A field read from another section (the master ``seed``, a ``parallel`` key) says so; ``source``
is the validated config itself, read for no setting: it is hashed into every output's provenance. One module at the
bottom of the layers (beside ``config``, importing neither torch nor a stage) so any stage, the report and the audit
read any section without importing upward; ``TrainSettings``, ``ParallelSettings``, ``RuntimeSettings`` and
``FetchSettings`` keep their derived logic in their packages. A converted section's settings are its model
(:mod:`hsitp.sections`) plus the fields read from elsewhere: ``CostSettings`` is ``CostSection`` and ``source``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import Field, SkipValidation

from hsitp.sections.audit import AuditSection
from hsitp.sections.bench import BenchSection
from hsitp.sections.cost import CostSection
from hsitp.sections.data import DataSection
from hsitp.sections.model import ModelSection
from hsitp.sections.tune import TuneSection

T = TypeVar("T")


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list | tuple) else value


def from_section(cls: type[T], section: Mapping[str, Any], **other: Any) -> T:
    """``cls`` from a validated section (schema defaults filled in): each field its key, a nested dataclass from its
    sub-section; ``other``: the fields that are not keys of this section (a field with a default may be neither)."""
    hints = typing.get_type_hints(cls)
    values = dict(other)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name not in values and (f.name in section or f.default is dataclasses.MISSING):
            kind = hints[f.name]
            sub = section[f.name]
            values[f.name] = from_section(kind, sub) if dataclasses.is_dataclass(kind) else _frozen(sub)
    return cls(**values)


# --- data ---------------------------------------------------------------------------------------------------------
class DataSettings(DataSection):
    """The ``data`` section (and the master ``seed``, the ``run``)."""

    seed: int
    """The master seed (top-level seed): seeds each partition's stream."""
    run: str
    """The run's name (top-level run): the default output folder."""
    source: SkipValidation[Mapping[str, Any]] = Field(repr=False, exclude=True)
    """The validated config, for provenance only."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DataSettings:
        return cls.model_validate(
            {**config["data"], "seed": config["seed"], "run": config["run"], "source": config}
        )


# --- bench --------------------------------------------------------------------------------------------------------
class BenchSettings(BenchSection):
    """The ``bench`` section (with the ``parallel`` layer keys, the master ``seed`` and the attention kernel)."""

    heads: int
    """parallel.heads: attention heads of every layer."""
    head_padding: bool
    """parallel.head_padding: pad heads the ranks do not divide."""
    attention_kernel: str
    """model.attention_kernel (resolved per device: hsitp.bench.ops.bench_kernel)."""
    seed: int
    """The master seed (top-level seed): the layers' weights."""
    source: SkipValidation[Mapping[str, Any]] = Field(repr=False, exclude=True)
    """The validated config: provenance and RuntimeSettings only."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BenchSettings:
        par = config["parallel"]
        return cls(**config["bench"], heads=int(par["heads"]), head_padding=bool(par["head_padding"]),
                   attention_kernel=ModelSection.of(config).attention_kernel, seed=int(config["seed"]), source=config)  # fmt: skip


# --- tune ---------------------------------------------------------------------------------------------------------
class TuneSettings(TuneSection):
    """The ``tune`` section (the trials' training settings are the ``train`` section's: TrainSettings)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TuneSettings:
        return cls.model_validate(config["tune"])


# --- probe --------------------------------------------------------------------------------------------------------
# the kernel of a section that names none: the estimate's grid and D-CHAG's configs, which price the paper's GPUs,
# where "auto" is sdpa (a probe's section names the kernel its runner resolved)
SECTION_KERNEL = "sdpa"


@dataclass(frozen=True, kw_only=True)
class ProbeModel:
    """The model a probe section sizes (``probe``, ``probe.estimate.grid``, D-CHAG's synthetic benchmark or a probe
    file's ``probe`` attribute), built at each point's L and N (``hsitp.probe.grid.base_config``)."""

    patch: int  # patch side p in pixels
    dim: int  # token width D
    depth: int  # transformer blocks
    heads: int  # attention heads
    mlp_ratio: int  # MLP hidden width / D
    classes: int  # classes per pixel (the head's width is classes x p x p)
    batch: int  # crops per step (B)
    dtype: str  # parameter and activation dtype (the probe's may be auto)
    attention_kernel: str = SECTION_KERNEL  # single-query attention kernel (the probe's: resolved per device)
    height: int | None = None  # crop rows (D-CHAG's configs; None: the square crop of N tokens)
    width: int | None = None  # crop columns (likewise)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> ProbeModel:
        """From a mapping holding these keys among others (a probe file's attribute, ``DCHAG_SETTINGS``)."""
        return cls(**{f.name: section[f.name] for f in dataclasses.fields(cls) if f.name in section})


@dataclass(frozen=True)
class Throughput:
    repeats: int  # interleaved rounds of one sample per plan
    steps: int  # training steps per sample
    warmup: int  # untimed steps of every plan before the first round


@dataclass(frozen=True, kw_only=True)
class EstimateGrid(ProbeModel):
    plans: tuple[str, ...]  # plans estimated (dense at P = 1)
    world_sizes: tuple[int, ...]  # P of the estimated grid
    groups: tuple[int, ...]  # D-CHAG groups per rank (g)
    L: tuple[int, ...]  # spectral bands
    N: tuple[int, ...]  # spatial tokens per crop (square numbers)
    checkpointing: tuple[str, ...]  # checkpointing policies estimated


@dataclass(frozen=True)
class Estimate:
    grid: EstimateGrid  # the paper grid
    dchag: tuple[dict[str, Any], ...]  # D-CHAG-style configs: name, dim, bands, tp
    dchag_plans: tuple[str, ...]  # plans estimated for each D-CHAG config
    dchag_checkpointing: tuple[str, ...]  # checkpointing policies of the D-CHAG configs


@dataclass(frozen=True, kw_only=True)
class ProbeSettings(ProbeModel):
    """The ``probe`` section (and the master ``seed``); its model is a ProbeModel whose ``attention_kernel`` the
    runner resolves from ``model.attention_kernel`` on its device."""

    plans: tuple[str, ...]  # plans probed (dense at P = 1 only)
    world_sizes: tuple[int, ...]  # P, one torchrun launch each
    groups: tuple[int, ...]  # D-CHAG groups per rank (g)
    L: tuple[int, ...]  # spectral bands
    N: tuple[int, ...]  # spatial tokens per crop (square numbers)
    warmup: int  # untimed steps before measuring
    steps: int  # timed steps per mode
    throughput: Throughput  # the interleaved throughput phase
    match_train: bool  # the DAG checks that the probe measures the trained models
    checkpointing: tuple[str, ...]  # activation-checkpointing policies probed
    device: str  # auto, cpu or cuda
    threads_per_rank: int  # torch.set_num_threads per rank
    estimate: Estimate  # ``hsitp probe estimate``
    seed: int  # the master seed (top-level seed): the models' weights and batches
    source: Mapping[str, Any] = field(repr=False)  # the validated config: provenance and RuntimeSettings only

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ProbeSettings:
        return from_section(cls, config["probe"], seed=int(config["seed"]), source=config)


# --- cost ---------------------------------------------------------------------------------------------------------
class CostSettings(CostSection):
    """The ``cost`` section (pure arithmetic: nothing else is read)."""

    # The validated config, read for no setting: its cost section is hashed into the tables' provenance.
    source: SkipValidation[Mapping[str, Any]] = Field(repr=False, exclude=True)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CostSettings:
        return cls.model_validate({**config["cost"], "source": config})


# --- audit --------------------------------------------------------------------------------------------------------
class AuditSettings(AuditSection):
    """The ``audit`` section (the ``report`` stage has none: its subcommands take no config), with the validated
    config its config_value checks read and its provenance hashes (``source``)."""

    # The validated config: config_value checks read it, provenance hashes it (none: no config_value check can).
    source: SkipValidation[Mapping[str, Any]] = Field(default_factory=dict, repr=False, exclude=True)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AuditSettings:
        return cls.model_validate({**config["audit"], "source": config})
