"""The plan registry (hsitp.names.PLANS) against what cannot import it: the config schema's enums, and the
Snakemake rules' wildcard constraints (derived from it, never typed out)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hsitp.config import load_schema, schema_path
from hsitp.models.config import AGGREGATIONS, PARTIALS
from hsitp.names import (
    BY_OP,
    BY_VARIANT,
    COMPARED_PLANS,
    DCHAG_PLANS,
    OP_NAMES,
    PARALLEL_PLANS,
    PLAN_NAMES,
    PLANS,
    PROTOCOLS,
)

ROOT = Path(__file__).resolve().parents[1]
PLAN_WORDS = {*PLAN_NAMES, *BY_OP}


def _nodes(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping of the schema, with its path."""
    if isinstance(node, dict):
        yield path, node
        for key, sub in node.items():
            yield from _nodes(sub, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _nodes(sub, f"{path}[{i}]")


def _enums(schema: Any) -> dict[str, list[str]]:
    """Every enum of the schema that names a plan or an aggregation op, by its path."""
    return {
        path: n["enum"]
        for path, n in _nodes(schema)
        if isinstance(n.get("enum"), list) and PLAN_WORDS & set(n["enum"])
    }


REGISTRY_DEFS = {
    f"#/$defs/{name}" for name in ("plan", "compared_plan", "op", "protocol")
}  # from hsitp.names


def _refs(schema: Any) -> dict[str, str]:
    """Every ``$ref`` of the schema to a registry's ``$defs`` (not the bounded sizes and seeds), by its path."""
    return {
        path: n["$ref"]
        for path, n in _nodes(schema)
        if isinstance(n.get("$ref"), str) and n["$ref"] in REGISTRY_DEFS
    }


def test_schema_plan_enums_equal_the_registry():
    """Catches a plan or op spelled out in config.schema.yaml (it would drift from hsitp.names): the only enums of
    plans or aggregation ops are the schema's ``$defs``, filled in from the registry, and every list of plans or
    ops refers to one of them."""
    schema = load_schema()
    expected = {
        "$defs.plan": list(PLAN_NAMES),
        "$defs.compared_plan": list(COMPARED_PLANS),
        "$defs.op": list(OP_NAMES),
    }
    assert _enums(schema) == expected
    assert _refs(schema) == {
        "properties.bench.properties.ops.items": "#/$defs/op",
        "properties.train.properties.plans.items": "#/$defs/plan",
        "properties.probe.properties.plans.items": "#/$defs/plan",
        "properties.probe.properties.estimate.properties.grid.properties.plans.items": "#/$defs/plan",
        "properties.probe.properties.estimate.properties.dchag_plans.items": "#/$defs/compared_plan",
        "properties.tune.properties.plans.items": "#/$defs/compared_plan",
        # the accuracy protocols (random, block): hsitp.names.PROTOCOLS
        "properties.data.properties.partition.properties.protocols.items": "#/$defs/protocol",
        "properties.train.properties.protocols.items": "#/$defs/protocol",
        "properties.tune.properties.protocols.items": "#/$defs/protocol",
    }
    assert schema["$defs"]["protocol"]["enum"] == list(PROTOCOLS)
    raw = schema_path().read_text()
    assert not re.search(r"enum: \[[^\]]*\b(dchag_l|agg_tp)\b", raw)


def test_schema_groups_keys_are_the_dchag_plans():
    """Catches train.groups keyed by a plan without band groups, or missing a D-CHAG plan."""
    groups = load_schema()["properties"]["train"]["properties"]["groups"]
    assert list(groups["properties"]) == list(DCHAG_PLANS)
    assert set(groups["default"]) <= set(DCHAG_PLANS)


def test_rules_derive_their_plan_constraints():
    """Catches a wildcard constraint that spells plans out again (it would drift from the registry)."""
    typed = [
        f"{p.name}: {m.group(0)}"
        for p in sorted((ROOT / "workflow" / "rules").glob("*.smk"))
        for m in re.finditer(r"\bplan\s*=\s*r?\"\w+(\|\w+)*\"", p.read_text())
    ]
    assert typed == []


def test_registry_ties_plan_op_variant_and_model():
    """Catches a plan whose op is no op the bench knows, or a model setting no plan produces."""
    assert set(BY_OP) <= set(OP_NAMES)
    assert [BY_OP[p.op].name for p in PLANS.values() if p.op] == list(COMPARED_PLANS)
    assert [BY_VARIANT[p.variant].name for p in PLANS.values() if p.variant] == list(DCHAG_PLANS)
    assert set(PARTIALS) == {PLANS[p].partial for p in DCHAG_PLANS}
    assert set(AGGREGATIONS) == {p.aggregation for p in PLANS.values() if p.aggregation}
    assert PLANS["dchag_l"].label == "D-CHAG-L" and PLANS["dchag_l"].op == "agg_dchag_l"
    assert "dense" not in PARALLEL_PLANS and set(DCHAG_PLANS) < set(PARALLEL_PLANS)
