"""The config sections written as typed models, one module per section: each field's type carries its constraints
and its docstring says what it does, so the model is the schema of its section (``hsitp.schema`` generates
``config.schema.yaml`` from these models alone).
"""

from __future__ import annotations

from typing import Any

from hsitp.sections.audit import AuditSection
from hsitp.sections.base import Section
from hsitp.sections.baseline import BaselineSection
from hsitp.sections.bench import BenchSection
from hsitp.sections.cost import CostSection
from hsitp.sections.data import DataSection
from hsitp.sections.model import ModelSection
from hsitp.sections.parallel import ParallelSection
from hsitp.sections.probe import ProbeSection
from hsitp.sections.resources import ResourcesSection
from hsitp.sections.root import TopKeys
from hsitp.sections.train import TrainSection
from hsitp.sections.tune import TuneSection

# Every section, by its config key, in the order the generated schema lists them after the top-level keys.
SECTIONS: dict[str, type[Section]] = {
    "data": DataSection,
    "model": ModelSection,
    "parallel": ParallelSection,
    "audit": AuditSection,
    "bench": BenchSection,
    "train": TrainSection,
    "baseline": BaselineSection,
    "tune": TuneSection,
    "resources": ResourcesSection,
    "cost": CostSection,
    "probe": ProbeSection,
}


class Config(TopKeys):
    """The whole validated config, typed: the top-level keys and one model per section. Built once where a
    subcommand or the workflow starts (:func:`hsitp.config.typed`) and passed down; a stage reads
    ``config.train.lr``, never a dict. Its JSON form (:meth:`~hsitp.sections.base.Section.as_json`) is the validated config
    key for key and value for value (every number keeps the type it was written with:
    :func:`hsitp.sections.base.number`), so the provenance hash of a config is the same whether taken from the file
    or from this model."""

    data: DataSection = DataSection()
    """The ``data`` section."""
    model: ModelSection = ModelSection()
    """The ``model`` section."""
    parallel: ParallelSection = ParallelSection()
    """The ``parallel`` section."""
    audit: AuditSection = AuditSection()
    """The ``audit`` section."""
    bench: BenchSection = BenchSection()
    """The ``bench`` section."""
    train: TrainSection = TrainSection()
    """The ``train`` section."""
    baseline: BaselineSection = BaselineSection()
    """The ``baseline`` section."""
    tune: TuneSection = TuneSection()
    """The ``tune`` section."""
    resources: ResourcesSection = ResourcesSection()
    """The ``resources`` section."""
    cost: CostSection = CostSection()
    """The ``cost`` section."""
    probe: ProbeSection = ProbeSection()
    """The ``probe`` section."""

    def with_train(self, **keys: Any) -> Config:
        """This config with ``train`` keys replaced (a tuned recipe, a tuning trial's budget), validated as the
        section's own."""
        train = TrainSection.model_validate({**self.train.model_dump(exclude_unset=True), **keys})
        return self.model_copy(update={"train": train})

    def section(self, name: str) -> Section:
        """A section by its config key (a launcher naming its stage's section)."""
        if name not in SECTIONS:
            raise KeyError(f"no config section {name!r} ({', '.join(SECTIONS)})")
        return getattr(self, name)
