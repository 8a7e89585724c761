"""Config loading: overlays merge like Snakemake's, the schema rejects bad keys and values by name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import hsitp.config as config_module
from hsitp.config import (
    RENAMED,
    ConfigError,
    deep_merge,
    load_config,
    load_schema,
    rename_layered,
    validate_config,
)

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_configs_validate():
    """Catches a config/config.yaml or smoke overlay that drifted from the schema."""
    cfg = load_config([ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"])
    assert cfg["datasets"] == ["indian_pines"]
    assert cfg["data"]["sources"]["indian_pines"] == ["package"]
    assert cfg["run"] == "smoke" and load_config([ROOT / "config/config.yaml"])["run"] == "paper"


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
        # an old key name beside its new one in one config: which one is meant? (issue 38)
        ({"train": {"splits": ["block"]}}, "both train.splits and train.protocols are given"),
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


# --- issue 38: old key names accepted for one release -------------------------------------------------------------
DEPRECATED = {"train": {"splits": ["block"]}, "tune": {"splits": ["random"]}, "data": {"split": {"block": 8}}}


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget which deprecated keys this process already warned about (one warning per key and process)."""
    monkeypatch.setattr(config_module, "_warned", set())


def _deprecations(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "is deprecated" in r.getMessage()]


def test_deprecated_keys_are_renamed_with_one_warning_each(fresh_warnings, caplog) -> None:
    """Catches an old config (train.splits, tune.splits, data.split) refused by the schema, renamed silently (the
    user never learns the new name), or warned about once per validation instead of once per key."""
    caplog.set_level("WARNING", logger="hsitp.config")
    cfg = validate_config(DEPRECATED)
    assert cfg["train"]["protocols"] == ["block"] and "splits" not in cfg["train"]
    assert cfg["tune"]["protocols"] == ["random"] and "splits" not in cfg["tune"]
    assert cfg["data"]["partition"]["block"] == 8 and "split" not in cfg["data"]
    assert cfg["data"]["partition"]["protocols"] == ["random", "block"]  # the schema's defaults fill the rest
    assert sorted(_deprecations(caplog)) == sorted(
        f"config: {old} is deprecated, use {new} (accepted until the next release)"
        for old, new in RENAMED.items()
    )
    validate_config(DEPRECATED)  # the same keys again: no second warning
    assert len(_deprecations(caplog)) == len(RENAMED)
    assert DEPRECATED["train"] == {"splits": ["block"]}  # the caller's mapping is not changed
    plain = {"train": {"protocols": ["block"]}}
    validate_config(plain)
    assert plain == {"train": {"protocols": ["block"]}}  # nor filled with defaults when nothing is renamed


@pytest.mark.parametrize(("old", "new"), list(RENAMED.items()))
def test_old_and_new_key_together_is_an_error(old: str, new: str, fresh_warnings) -> None:
    """Catches a config giving a key under both names where one silently wins."""
    section, old_leaf = old.split(".")
    new_leaf = new.split(".")[1]
    value = {"block": 8} if section == "data" else ["random"]
    with pytest.raises(ConfigError, match=f"both {old} and {new} are given.*keep only {new}"):
        validate_config({section: {old_leaf: value, new_leaf: value}})


def test_old_overlay_still_overrides_the_new_base(tmp_path: Path, fresh_warnings, caplog) -> None:
    """Catches an overlay written before issue 38 (train.splits, data.split) on today's config/config.yaml
    (train.protocols, data.partition) being refused as "both given" or losing to the base: each file is renamed on
    its own, then merged, so the overlay wins as it did."""
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"train": {"splits": ["block"]}, "data": {"split": {"block": 8}}}))
    cfg = load_config([ROOT / "config/config.yaml", old])
    assert cfg["train"]["protocols"] == ["block"]
    assert (
        cfg["data"]["partition"]["block"] == 8 and cfg["data"]["partition"]["patch"] == 8
    )  # merged, not replaced
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"train": {"splits": ["block"], "protocols": ["random"]}}))
    with pytest.raises(ConfigError, match=f"config file {both}: both train.splits and train.protocols"):
        load_config([ROOT / "config/config.yaml", both])


def test_layers_decide_for_a_merged_config(fresh_warnings) -> None:
    """Catches Snakemake's merged config (base config.yaml + an old --configfile) refused as "both given": the
    layers it was merged from decide, file by file (what workflow/rules/common.smk passes to preflight)."""
    base = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    overlay = {"train": {"splits": ["block"]}, "data": {"split": {"block": 8}}}
    merged = deep_merge(base, overlay)
    with pytest.raises(ConfigError, match="both train.splits and train.protocols"):
        validate_config(merged)  # without its layers the merged mapping is ambiguous
    cfg = validate_config(rename_layered(merged, [("config/config.yaml", base), ("old.yaml", overlay)]))
    assert cfg["train"]["protocols"] == ["block"]
    assert cfg["data"]["partition"] == {**base["data"]["partition"], "block": 8}
    with pytest.raises(ConfigError, match="old.yaml: both train.splits"):
        rename_layered(merged, [("old.yaml", {"train": {"splits": ["a"], "protocols": ["b"]}})])
