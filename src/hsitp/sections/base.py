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


def sized(name: str, maximum: int, minimum: int = 1) -> Any:
    """An integer bounded like ``$defs/name`` of the schema, referring to it in the generated schema."""
    return Annotated[int, Field(ge=minimum, le=maximum, strict=False), WithJsonSchema({DEF_MARKER: name})]


# The registry's lists a config string may name, by their ``$defs`` entry (``hsitp.config.load_schema`` fills the
# generated schema's enums from the same lists).
NAMED: dict[str, tuple[str, ...]] = {
    "plan": tuple(PLAN_NAMES),
    "compared_plan": tuple(COMPARED_PLANS),
    "op": tuple(OP_NAMES),
    "protocol": tuple(PROTOCOLS),
}


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
    """A tuple of at least ``min_items`` different ``item``s (``uniqueItems`` and ``minItems`` in the schema)."""
    return Annotated[
        tuple[item, ...],
        Field(min_length=min_items, json_schema_extra={"uniqueItems": True}),
        AfterValidator(_no_repeats),
    ]


class Section(BaseModel):
    """A config section: unknown keys refused, values frozen once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
