"""What every config section's model shares: unknown keys refused, values frozen, field docstrings as the schema's
descriptions.

A size that the config bounds once for every key standing for it (heads, a seed, ...) is marked with
:func:`sized`: the generated schema refers to its ``$defs`` entry, so a value past the bound gets the one message
naming the bound and why (``hsitp.config.validate_config``), and the model keeps the same bounds.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from hsitp.names import COMPARED_PLANS, OP_NAMES, PLAN_NAMES, PROTOCOLS

# The marker the generator turns into ``{"$ref": "#/$defs/NAME"}`` (pydantic cannot refer to a definition it did
# not make itself).
DEF_MARKER = "x-hsitp-def"
RUN_NAME = r"^[A-Za-z0-9_-]+$"


def number(**bounds: float) -> Any:
    """A JSON number bounded by ``bounds`` (gt, ge, lt, le) that keeps an integer an integer: a grid value passed on
    as written (scikit-learn reads ``max_features: 1`` as one feature, ``1.0`` as all of them)."""
    keyword = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
    schema = {"type": "number", **{keyword[k]: v for k, v in bounds.items()}}
    return Annotated[int | float, Field(**bounds), WithJsonSchema(schema)]  # type: ignore[arg-type]


# What a run can hold: a seed, and every size, each bounded far above the largest published model or machine. A
# value past the bound is a typo, refused in one line when the config is read (a depth of 10^9 was planned for
# days); the options of `hsitp advise` and the other subcommands that stand for the same quantity take the same
# bounds (hsitp.config.check_options). "A shape that cannot form a model" (heads not dividing D, a reversed range,
# NaN) is no JSON-schema keyword: hsitp.config.check_values, docs/refused.md. By name: (minimum, maximum, what).
BOUNDS: dict[str, tuple[int, int, str]] = {
    "seed": (0, 2**32 - 1, "A seed, 0 to 2^32 - 1: what NumPy's and PyTorch's generators take."),
    "dim": (1, 65536, "A token width D, at most 65,536 (the widest published transformers use 16,384-25,600)."),
    "heads": (1, 4096, "Attention heads, at most 4,096."),
    "depth": (1, 1024, "Transformer blocks, at most 1,024 (the deepest published models have about 130); the memory "
              "model's timeline is linear in it."),
    "mlp_ratio": (1, 64, "MLP hidden width over D, at most 64."),
    "bands": (1, 65536, "Spectral bands L, at most 65,536 (imaging spectrometers record a few hundred)."),
    "tokens": (1, 1048576, "Spatial tokens N of one sample, at most 1,048,576 (a 1,024 x 1,024 token grid)."),
    "pixels": (1, 65536, "A side in pixels (a patch, a block, an image), at most 65,536."),
    "groups": (1, 65536, "D-CHAG groups per rank g, at most 65,536 (no more than the bands a rank holds)."),
    "batch": (1, 65536, "Samples per step, at most 65,536."),
    "classes": (1, 65536, "Classes, at most 65,536."),
    "world_size": (1, 65536, "A parallel degree P (the ranks of one TP group or launch), at most 65,536 (a "
                   "1,024-node x 64-device machine)."),
    "devices": (1, 1048576, "Nodes, or devices of a node or of a whole allocation, at most 1,048,576."),
}  # fmt: skip


def sized(name: str, maximum: int | None = None, minimum: int | None = None) -> Any:
    """An integer bounded like ``$defs/name`` (:data:`BOUNDS`), referring to it in the generated schema; a bound
    given here must be the one of ``BOUNDS`` (the model and the schema would disagree)."""
    low, high, _ = BOUNDS[name]
    if (minimum is not None and minimum != low) or (maximum is not None and maximum != high):
        raise ValueError(
            f"sized({name!r}): bounds [{minimum}, {maximum}] are not $defs/{name}'s [{low}, {high}]"
        )
    return Annotated[int, Field(ge=low, le=high, strict=False), WithJsonSchema({DEF_MARKER: name})]


# The registry's lists a config string may name, by their ``$defs`` entry (``hsitp.config.load_schema`` fills the
# generated schema's enums from the same lists).
NAMED: dict[str, tuple[str, ...]] = {
    "plan": tuple(PLAN_NAMES),
    "compared_plan": tuple(COMPARED_PLANS),
    "op": tuple(OP_NAMES),
    "protocol": tuple(PROTOCOLS),
}
NAMED_WHAT = {
    "plan": "A parallel plan (hsitp.names.PLAN_NAMES): dense, tp, dchag_l, dchag_c, token.",
    "compared_plan": "A plan compared by its aggregation (hsitp.names.COMPARED_PLANS): tp, dchag_l, dchag_c.",
    "op": "A benchmarked op (hsitp.names.OP_NAMES).",
    "protocol": "An accuracy protocol (hsitp.names.PROTOCOLS): how the train/test partition of the labelled "
    "pixels is drawn, random or block.",
}


def schema_defs() -> dict[str, dict[str, Any]]:
    """The schema's ``$defs``: the registry's names (their enums filled by ``hsitp.config.load_schema``), then the
    bounded sizes."""
    names = {k: {"description": what, "type": "string"} for k, what in NAMED_WHAT.items()}
    sizes = {k: {"description": what, "type": "integer", "minimum": lo, "maximum": hi} for k, (lo, hi, what) in
             BOUNDS.items()}  # fmt: skip
    return {**names, **sizes}


def named(name: str) -> Any:
    """A string from the registry's list ``name`` (plan, compared_plan, op, protocol), referring to ``$defs/name``
    in the generated schema."""
    allowed = NAMED[name]

    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not a {name} ({', '.join(allowed)})")
        return value

    return Annotated[str, AfterValidator(check), WithJsonSchema({DEF_MARKER: name})]


def _no_repeats(value: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(set(value)) != len(value):
        raise ValueError(f"{list(value)} repeats an item")
    return value


def distinct(item: Any, min_items: int = 1) -> Any:
    """A tuple of at least ``min_items`` different ``item``s (``uniqueItems`` and ``minItems`` in the schema; 0: no
    ``minItems``)."""
    return Annotated[
        tuple[item, ...],
        Field(min_length=min_items or None, json_schema_extra={"uniqueItems": True}),
        AfterValidator(_no_repeats),
    ]


class Section(BaseModel):
    """A config section: unknown keys refused, values frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    def as_json(self, **include: Any) -> dict[str, Any]:
        """The section as the validated config holds it: the keys given or filled in by the schema's defaults (a
        key the schema has no default for and nobody set stays out), as JSON: what provenance hashes and what the
        workflow's rules pass on. ``include``: as pydantic's ``model_dump``."""
        return self.model_dump(mode="json", exclude_unset=True, **include)
