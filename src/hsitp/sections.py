"""The config sections written as typed models: each field's type carries its constraints and its docstring says
what it does, so the model is the schema of its section (``hsitp.schema`` generates ``config.schema.yaml`` from
these models and the sections not yet converted, ``schemas/unconverted.schema.yaml``).

A size that the config bounds once for every key standing for it (heads, a seed, ...) is marked with
:func:`sized`: the generated schema refers to its ``$defs`` entry, so a value past the bound gets the one message
naming the bound and why (``hsitp.config.validate_config``), and the model keeps the same bounds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

# The marker the generator turns into ``{"$ref": "#/$defs/NAME"}`` (pydantic cannot refer to a definition it did
# not make itself).
DEF_MARKER = "x-hsitp-def"
RUN_NAME = r"^[A-Za-z0-9_-]+$"


def sized(name: str, maximum: int, minimum: int = 1) -> Any:
    """An integer bounded like ``$defs/name`` of the schema, referring to it in the generated schema."""
    return Annotated[int, Field(ge=minimum, le=maximum, strict=False), WithJsonSchema({DEF_MARKER: name})]


class Section(BaseModel):
    """A config section: unknown keys refused, values frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ParallelSection(Section):
    """Tensor-parallel layers (src/hsitp/parallel): process-group backend and timeout, attention heads and head
    padding. The microbenchmarks build every layer with these (LayerNorm's two placements are two bench ops,
    layernorm_replicated and layernorm_sharded, not a setting)."""

    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Process-group backend; auto = nccl when CUDA is available, gloo on CPU."""
    timeout_s: float = Field(300, gt=0)
    """Process-group timeout in seconds; a dead or stuck rank makes the others raise after this, never hang."""
    heads: sized("heads", 4096) = 8  # type: ignore[valid-type]
    """Attention heads of every attention and cross-attention layer the bench builds and its cost model prices
    (attn_channel, attn_token, attn_2d, agg_*)."""
    head_padding: bool = False
    """Heads the ranks splitting them do not divide (attn_channel, agg_* over P; attn_2d over P_c): false = the bench
    refuses the run before timing, with an error naming this key; true = pad with zero heads, which are computed and
    communicated (larger traced bytes, and the cost model prices the padded heads)."""


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


# The converted sections, by their config key, in the order the generated schema lists them after the others.
SECTIONS: dict[str, type[Section]] = {"parallel": ParallelSection, "audit": AuditSection}
