"""The ``audit`` section: which runs decide the claims' measured checks."""

from __future__ import annotations

from pydantic import Field

from hsitp.sections.base import RUN_NAME, Section


class AuditSection(Section):
    """Settings of the claims audit (`hsitp audit claims`, rule audit_claims; rules in docs/audit.md)."""

    accuracy_run: str = Field("cpu-places", pattern=RUN_NAME)
    """Name of the run whose results/<accuracy_run>/train/summary.nc decides the measured-basis claims (equal
    accuracy of the plans). The smoke run's tiny training says nothing about accuracy, and config/cpu.yaml's
    500-step models are under-trained, so the default is the fair matrix on 5 partitions of config/cpu-places.yaml
    (each plan on its own tuned recipe, partitions as replicates: one draw of places can decide by accident). When
    results/<accuracy_run>/ is absent its committed reference results/reference/<accuracy_run>/ decides, the verdict
    saying so; with neither, those claims stay pending."""
    measured_run: str | None = Field(None, pattern=RUN_NAME)
    """Name of the run whose probe/ and bench/ files (results/<measured_run>/probe/memory.nc, throughput.nc,
    estimate.nc, bench/microbench.nc, model_vs_measured.nc) decide the claims' measured sub-checks (memory,
    throughput and communication; docs/audit.md rule 8). null: the audited run itself (the folder above the cost
    tables it reads). While a file (or a point in a check's scope) is absent, or every point in scope is
    oversubscribed, the sub-check is pending and the claim's next sub-check decides."""
