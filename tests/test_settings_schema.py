"""The typed settings against the config schema (issue 52): the schema and the dataclasses describe the same keys
twice, so a key added to one and not the other must fail here, not silently stay at its default."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from hsitp.config import load_config, load_schema
from hsitp.settings import (
    EstimateGrid,
    ProbeSettings,
)

ROOT = Path(__file__).resolve().parents[1]
SECTIONS: dict[str, type] = {
    "probe": ProbeSettings,
}
# Fields that are no key of their section: the schema key each is read from (None: no key, the config itself).
OTHER_KEYS: dict[type, dict[str, str | None]] = {
    ProbeSettings: {
        "attention_kernel": "model.attention_kernel",  # resolved on the probe's device by its runner
        "height": None,  # a ProbeModel's crop: D-CHAG's configs only
        "width": None,
        "seed": "seed",
        "source": None,
    },
    EstimateGrid: {"attention_kernel": None, "height": None, "width": None},  # the estimate's: sdpa, square
}


def _fields(cls: type) -> dict[str, typing.Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _drift(props: dict, cls: type, where: str) -> list[str]:
    """What the schema's ``props`` and ``cls``'s fields disagree on: a key without a field, a field without a key."""
    fields, out, seen = _fields(cls), [], set()
    for key, sub in props.items():
        dotted = f"{where}.{key}"
        kind = fields.get(key)
        if kind is not None:
            seen.add(key)
            if dataclasses.is_dataclass(kind) and "properties" in sub:
                out += _drift(sub["properties"], kind, dotted)
        else:
            out.append(f"schema key {dotted} has no field in {cls.__name__}")
    other = OTHER_KEYS.get(cls, {})
    out += [
        f"field {cls.__name__}.{name} has no schema key {where}.{name}"
        for name in set(fields) - seen - set(other)
    ]
    return out


@pytest.mark.parametrize("section", SECTIONS)
def test_settings_and_schema_name_the_same_keys(section: str) -> None:
    """Catches a schema key added without its settings field (the key would be validated, then never read) or a
    field the schema lacks (its from_config would fail on every config), and an allowance naming a key that is gone."""
    schema = load_schema()
    props = schema["properties"][section]["properties"]
    assert _drift(props, SECTIONS[section], section) == []
    for dotted in [k for m in OTHER_KEYS.values() for k in m.values() if k]:
        node = schema
        for part in dotted.split("."):
            node = node["properties"][part]


# the ablation's spec and its pilot are no pipeline overlays (python -m hsitp.train.ingredients reads them)
OVERLAYS = sorted(p.name for p in (ROOT / "config").glob("*.yaml") if "places-" not in p.name)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_shipped_config_builds_every_settings(overlay: str) -> None:
    """Catches a from_config that fails on a config the project ships (a key an overlay sets in a shape the
    dataclass does not take), found only when that run's stage starts."""
    cfg = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / overlay])
    for cls in SECTIONS.values():
        assert cls.from_config(cfg) is not None
