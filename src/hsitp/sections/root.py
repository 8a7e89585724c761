"""The config's top-level keys that are no section: the run's name and the master seed."""

from __future__ import annotations

from pydantic import Field, field_validator

from hsitp.sections.base import RUN_NAME, Section, sized


class TopKeys(Section):
    """hsitp pipeline configuration (config/config.yaml = paper scale; config/smoke.yaml = CPU overlay)"""

    run: str = Field("paper", pattern=RUN_NAME, json_schema_extra={"not": {"enum": ["reference"]}})
    """Name of this run. Every output goes under results/<run>/ and every log under logs/<run>/, so two configs
    (paper scale, smoke) never overwrite each other or make each other's jobs look out of date. The raw download
    cache (data.raw_dir) is shared by all runs. Not `reference` (results/reference/ holds committed reference
    tables)."""
    seed: sized("seed") = 0  # type: ignore[valid-type]
    """Master seed; every stage derives its random streams from it."""

    @field_validator("run")
    @classmethod
    def _not_reference(cls, run: str) -> str:
        if run == "reference":
            raise ValueError(
                "run may not be `reference` (results/reference/ holds committed reference tables)"
            )
        return run
