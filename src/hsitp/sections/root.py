"""The config's top-level keys that are no section: the run's name, the master seed, the stages and the scenes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from hsitp.sections.base import RUN_NAME, Section, distinct, sized
from hsitp.sections.data import DatasetName

Stage = Literal["data", "cost", "bench", "probe", "train", "baseline", "tune", "audit"]


class TopKeys(Section):
    """hsitp pipeline configuration (config/config.yaml = paper scale; config/smoke.yaml = CPU overlay)"""

    run: str = Field("paper", pattern=RUN_NAME, json_schema_extra={"not": {"enum": ["reference"]}})
    """Name of this run. Every output goes under results/<run>/ and every log under logs/<run>/, so two configs
    (paper scale, smoke) never overwrite each other or make each other's jobs look out of date. The raw download
    cache (data.raw_dir) is shared by all runs. Not `reference` (results/reference/ holds committed reference
    tables)."""
    seed: sized("seed") = 0  # type: ignore[valid-type]
    """Master seed; every stage derives its random streams from it."""
    stages: distinct(Stage) = ("data", "cost", "bench", "probe", "train", "baseline", "audit")  # type: ignore[valid-type]
    """Which stages `snakemake` (rule all) builds, with their report pages: data, cost, bench, probe, train,
    baseline, audit. Every rule stays defined, so a single file of a stage left out can still be asked for by name.
    A stage's inputs are built whether listed or not (train needs data). audit needs data and cost. config/cpu.yaml
    lists data, baseline and train only."""
    datasets: distinct(DatasetName) = ("indian_pines",)  # type: ignore[valid-type]
    """Registry names of the scenes the pipeline fetches and prepares (see `hsitp data list`)."""

    @field_validator("run")
    @classmethod
    def _not_reference(cls, run: str) -> str:
        if run == "reference":
            raise ValueError(
                "run may not be `reference` (results/reference/ holds committed reference tables)"
            )
        return run
