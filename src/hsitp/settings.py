"""The stages' settings, typed (torchtitan's ``job_config.py``): per config section its model (:mod:`hsitp.sections`)
plus the fields read from elsewhere, built once from the validated config where a subcommand starts
(``XSettings.from_config(cfg)``, ``cfg`` the typed :class:`~hsitp.sections.Config`) and passed to its functions;
there is no second copy of a key to drift from the schema, which the models generate. A field read from another
section (the master ``seed``, a ``parallel`` key) says so; ``config`` is the whole typed config, read for no setting
of the stage's own: provenance hashes it, a rank job's launcher reads its section's device keys.
One module at the bottom of the layers (beside ``config``, importing neither torch nor a stage) so any stage, the
report and the audit read any section without importing upward; ``TrainSettings``, ``RuntimeSettings`` and
``FetchSettings`` keep their derived logic in their packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, SkipValidation

from hsitp.sections import Config
from hsitp.sections.audit import AuditSection
from hsitp.sections.base import Section
from hsitp.sections.bench import BenchSection
from hsitp.sections.cost import CostSection
from hsitp.sections.data import DataSection
from hsitp.sections.probe import EstimateGridSection, EstimateSection, ProbeSection
from hsitp.sections.tune import TuneSection

# The whole typed config beside a stage's own settings, taken as it is (not validated again, not copied).
CONFIG = SkipValidation[Config]


# --- data ---------------------------------------------------------------------------------------------------------
class DataSettings(DataSection):
    """The ``data`` section (and the master ``seed``, the ``run``)."""

    seed: int
    """The master seed (top-level seed): seeds each partition's stream."""
    run: str
    """The run's name (top-level run): the default output folder."""
    config: CONFIG = Field(repr=False, exclude=True)
    """The whole config, for provenance only."""

    @classmethod
    def from_config(cls, config: Config) -> DataSettings:
        return cls(**dict(config.data), seed=config.seed, run=config.run, config=config)


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
    config: CONFIG = Field(repr=False, exclude=True)
    """The whole config: provenance and RuntimeSettings only."""

    @classmethod
    def from_config(cls, config: Config) -> BenchSettings:
        par = config.parallel
        return cls(**dict(config.bench), heads=par.heads, head_padding=par.head_padding,
                   attention_kernel=config.model.attention_kernel, seed=config.seed, config=config)  # fmt: skip


# --- tune ---------------------------------------------------------------------------------------------------------
class TuneSettings(TuneSection):
    """The ``tune`` section (the trials' training settings are the ``train`` section's: TrainSettings)."""

    @classmethod
    def from_config(cls, config: Config) -> TuneSettings:
        return cls(**dict(config.tune))


# --- probe --------------------------------------------------------------------------------------------------------
# the kernel of a section that names none: the estimate's grid and D-CHAG's configs, which price the paper's GPUs,
# where "auto" is sdpa (a probe's section names the kernel its runner resolved)
SECTION_KERNEL = "sdpa"


class ProbeModel(Section):
    """The model a probe section sizes (``probe``, ``probe.estimate.grid``, D-CHAG's synthetic benchmark or a probe
    file's ``probe`` attribute), built at each point's L and N (``hsitp.probe.grid.base_config``)."""

    patch: int
    """Patch side p in pixels."""
    dim: int
    """Token width D."""
    depth: int
    """Transformer blocks."""
    heads: int
    """Attention heads."""
    mlp_ratio: int
    """MLP hidden width / D."""
    classes: int
    """Classes per pixel (the head's width is classes x p x p)."""
    batch: int
    """Crops per step (B)."""
    dtype: str
    """Parameter and activation dtype (the probe's may be auto)."""
    attention_kernel: str = SECTION_KERNEL
    """Single-query attention kernel (the probe's: resolved per device)."""
    height: int | None = None
    """Crop rows (D-CHAG's configs; None: the square crop of N tokens)."""
    width: int | None = None
    """Crop columns (likewise)."""

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> ProbeModel:
        """From a mapping holding these keys among others (a probe file's attribute, ``DCHAG_SETTINGS``)."""
        return ProbeModel.model_validate({k: section[k] for k in ProbeModel.model_fields if k in section})


class EstimateGrid(EstimateGridSection, ProbeModel):
    """``probe.estimate.grid`` as the model it sizes (sdpa, square crops)."""


class Estimate(EstimateSection):
    """``probe.estimate``, its grid an EstimateGrid."""

    grid: EstimateGrid = EstimateGrid()
    """The paper grid."""


class ProbeSettings(ProbeSection, ProbeModel):
    """The ``probe`` section (and the master ``seed``); its model is a ProbeModel whose ``attention_kernel`` the
    runner resolves from ``model.attention_kernel`` on its device."""

    estimate: Estimate = Estimate()
    """``hsitp probe estimate``."""
    seed: int
    """The master seed (top-level seed): the models' weights and batches."""
    config: CONFIG = Field(repr=False, exclude=True)
    """The whole config: provenance and RuntimeSettings only."""

    @classmethod
    def from_config(cls, config: Config) -> ProbeSettings:
        return cls.model_validate(
            {**config.probe.model_dump(exclude_unset=True), "seed": config.seed, "config": config}
        )


# --- cost ---------------------------------------------------------------------------------------------------------
class CostSettings(CostSection):
    """The ``cost`` section (pure arithmetic: nothing else is read)."""

    @classmethod
    def from_config(cls, config: Config) -> CostSettings:
        return cls.model_validate(config.cost.model_dump(exclude_unset=True))  # its keys set as the config's


# --- audit --------------------------------------------------------------------------------------------------------
class AuditSettings(AuditSection):
    """The ``audit`` section (the ``report`` stage has none: its subcommands take no config), with the whole config
    its config_value checks read and its provenance hashes."""

    config: CONFIG = Field(default_factory=Config, repr=False, exclude=True)
    """The whole config: config_value checks read it, provenance hashes it."""

    @classmethod
    def from_config(cls, config: Config) -> AuditSettings:
        return cls(**dict(config.audit), config=config)
