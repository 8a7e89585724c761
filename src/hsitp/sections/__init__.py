"""The config sections written as typed models, one module per section: each field's type carries its constraints
and its docstring says what it does, so the model is the schema of its section (``hsitp.schema`` generates
``config.schema.yaml`` from these models alone).
"""

from __future__ import annotations

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
