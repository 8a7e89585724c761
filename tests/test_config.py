"""Config loading: overlays merge like Snakemake's, the schema rejects bad keys and values by name."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from hsitp.config import (
    ConfigError,
    deep_merge,
    load_config,
    load_schema,
    read_config_file,
    schema_path,
    validate_config,
)

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_configs_validate():
    """Catches a config/config.yaml or smoke overlay that drifted from the schema."""
    cfg = load_config([ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"])
    assert cfg.datasets == ("indian_pines",)
    assert cfg.data.sources["indian_pines"] == ("package",)
    assert cfg.run == "smoke" and load_config([ROOT / "config/config.yaml"]).run == "paper"


def test_paper_config_is_complete():
    """Catches a schema key missing from config/config.yaml (the paper-scale file must spell out every key)."""
    raw = yaml.safe_load((ROOT / "config/config.yaml").read_text())

    def missing(schema: dict, data: dict, where: str) -> list[str]:
        out = []
        for key, sub in schema.get("properties", {}).items():
            if key not in data:
                out.append(f"{where}{key}")
            elif sub.get("type") == "object" and "properties" in sub and isinstance(data[key], dict):
                out += missing(sub, data[key], f"{where}{key}.")
        return out

    assert missing(load_schema(), raw, "") == []


def test_every_schema_key_is_documented():
    """Catches an undocumented config key (every key needs a description)."""

    def undocumented(schema: dict, where: str) -> list[str]:
        out = []
        for key, sub in schema.get("properties", {}).items():
            if "description" not in sub:
                out.append(where + key)
            out += undocumented(sub, f"{where}{key}.")
        return out

    assert undocumented(load_schema(), "") == []


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ({"bogus": 1}, "'bogus' was unexpected"),
        (
            {"data": {"partition": {"protocols": ["blok"]}}},
            "data.partition.protocols.0: 'blok' is not one of",
        ),
        (
            {"data": {"partition": {"mode": "random"}}},
            "data.partition: Additional properties are not allowed ('mode'",
        ),
        ({"data": {"partition": {"train_fraction": 1.5}}}, "data.partition.train_fraction"),
        # an old key name: refused, naming it (tests/test_older_files.py: and the allowed keys)
        (
            {"train": {"splits": ["block"]}},
            "train: Additional properties are not allowed ('splits' was unexpected",
        ),
        ({"datasets": ["indian_pine"]}, "datasets.0: 'indian_pine' is not one of"),
        ({"run": "smoke/../paper"}, "run: 'smoke/../paper' does not match"),
        ({"run": "reference"}, "run: 'reference' should not be valid"),
        ({"resources": {"bench_run": {"gpus_per_rank": -1}}}, "resources.bench_run.gpus_per_rank"),
    ],
)
def test_bad_key_or_value_is_named(overlay, message):
    """Catches a validator that reports a generic failure instead of the offending key and value."""
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        validate_config(deep_merge(yaml.safe_load((ROOT / "config/config.yaml").read_text()), overlay))


def test_overlay_merges_recursively():
    """Catches an overlay that replaces a whole section instead of merging (smoke would lose paper keys)."""
    merged = deep_merge({"data": {"a": 1, "b": {"c": 2}}}, {"data": {"b": {"d": 3}}})
    assert merged == {"data": {"a": 1, "b": {"c": 2, "d": 3}}}


def test_missing_or_broken_file(tmp_path):
    """Catches a raw FileNotFoundError/YAML traceback instead of a message naming the file."""
    with pytest.raises(ConfigError, match="does not exist"):
        load_config([tmp_path / "nope.yaml"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config([bad])


@pytest.mark.parametrize(
    "overlays", [[], ["config.yaml", "smoke.yaml"], ["config.yaml", "cpu.yaml", "cpu-fair.yaml"]]
)
def test_defaults_are_those_snakemake_validate_fills(overlays):
    """Catches the defaults hsitp.config fills (for the DAG and for every subcommand, which runs without Snakemake)
    drifting from what snakemake.utils.validate(config, schema, set_default=True) fills, which docs/stages.md ("The
    workflow") says they equal: a default missed in a nested section, or filled where Snakemake leaves the key out.
    The empty config is every default of the schema."""
    merged: dict = {}
    for name in overlays:
        merged = deep_merge(merged, read_config_file(ROOT / "config" / name))
    theirs = copy.deepcopy(merged)
    validate(theirs, str(schema_path()), set_default=True)
    assert validate_config(merged).as_json() == theirs
