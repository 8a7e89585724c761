"""The config schema is generated from the typed sections (hsitp.sections)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hsitp.config import ConfigError, load_config, schema_path, validate_config
from hsitp.schema import build_schema, schema_text
from hsitp.sections import SECTIONS, AuditSection, BenchSection, TrainSection
from hsitp.sections.data import DataSection
from hsitp.sections.probe import ProbeSection
from hsitp.sections.root import TopKeys
from hsitp.settings import BenchSettings, DataSettings, ProbeSettings

ROOT = Path(__file__).resolve().parents[1]


def test_committed_schema_is_generated() -> None:
    """Catches a hand edit of config.schema.yaml, or a model changed without `hsitp config schema` rerun (the
    workflow would validate with stale constraints)."""
    assert schema_path().read_text() == schema_text()


def test_every_key_is_a_model_section() -> None:
    """Catches a config key the models do not generate, or a section that takes unknown keys or whose absence no
    longer stands for its defaults."""
    schema = build_schema()
    assert set(schema["properties"]) == set(SECTIONS) | set(TopKeys.model_fields)
    for name in SECTIONS:
        assert schema["properties"][name]["additionalProperties"] is False
        assert schema["properties"][name]["default"] == {}


@pytest.mark.parametrize("model", list(SECTIONS.values()))
def test_every_field_documented(model: type) -> None:
    """Catches a model field without a docstring (the generated schema would list an undocumented key)."""
    undocumented = [k for k, f in model.model_fields.items() if not f.description]
    assert not undocumented


def test_model_defaults_are_the_validated_defaults() -> None:
    """Catches the schema's defaults and the models' drifting apart (the workflow and a model would disagree)."""
    cfg = validate_config({})
    as_json = cfg.model_dump(mode="json")
    for name, model in SECTIONS.items():
        assert getattr(cfg, name) == model()
        assert as_json[name] == model().model_dump(mode="json")
    top = TopKeys()
    assert {k: as_json[k] for k in TopKeys.model_fields} == top.model_dump(mode="json")


def test_bound_of_a_sized_field_still_named() -> None:
    """Catches the generated schema losing the ``$defs`` reference of a bounded size: the one-line message naming
    the bound and its reason would turn into jsonschema's bare one."""
    with pytest.raises(ConfigError, match=r"parallel\.heads: 5000 is above 4096; Attention heads"):
        validate_config({"parallel": {"heads": 5000}})


def test_nullable_run_name_keeps_its_pattern() -> None:
    """Catches the nullable ``audit.measured_run`` losing its name pattern in the generated schema."""
    assert validate_config({"audit": {"measured_run": None}}).audit.measured_run is None
    with pytest.raises(ConfigError, match=r"audit\.measured_run"):
        validate_config({"audit": {"measured_run": "../x"}})
    with pytest.raises(ValueError, match="measured_run"):
        AuditSection(measured_run="../x")


@pytest.mark.parametrize(
    "overlay", sorted(p.name for p in (ROOT / "config").glob("*.yaml") if "places-" not in p.name)
)
def test_every_shipped_config_builds_every_section(overlay: str) -> None:
    """Catches a model stricter than the schema it generates (a shipped overlay validated by the workflow, then
    refused when its stage builds its settings)."""
    cfg = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / overlay])
    for name, model in SECTIONS.items():
        assert model.model_validate(getattr(cfg, name).model_dump()) == getattr(cfg, name)
    assert BenchSettings.from_config(cfg).config is cfg
    assert DataSettings.from_config(cfg).config is cfg
    assert ProbeSettings.from_config(cfg).config is cfg


def test_probe_settings_are_the_section_with_its_model() -> None:
    """Catches the probe's settings losing what its stages read besides the section (the seed, the kernel the
    runner resolves, the estimate's grid as a model priced with sdpa on square crops), or its model taking a
    repeated P the schema refuses."""
    s = ProbeSettings.from_config(validate_config({"seed": 5, "probe": {"estimate": {"grid": {"dim": 64}}}}))
    assert (s.seed, s.attention_kernel, s.height) == (5, "sdpa", None)
    assert s.model_copy(update={"attention_kernel": "math"}).attention_kernel == "math"
    grid = s.estimate.grid
    assert (grid.dim, grid.attention_kernel, grid.width) == (64, "sdpa", None)
    assert s.estimate.dchag[0].name == "1.7B_512ch_TP2" and isinstance(s.world_sizes, tuple)
    with pytest.raises(ConfigError, match=r"probe\.world_sizes"):
        validate_config({"probe": {"world_sizes": [2, 2]}})
    with pytest.raises(ValidationError, match="repeats an item"):
        ProbeSection(world_sizes=(2, 2))


def test_bench_settings_frozen_typed_and_bounded() -> None:
    """Catches a settings object a function could change under the next one, a nested section left a dict, or a
    model that takes what the schema refuses (a repeated P, a GEMM shape of two sizes)."""
    s = BenchSettings.from_config(validate_config({"bench": {"collectives": {"repeats": 7}}}))
    assert (
        s.collectives.repeats == 7 and isinstance(s.N, tuple) and s.roofline.shapes[0] == (8192, 8192, 8192)
    )
    with pytest.raises(ValidationError):
        s.repeats = 1  # type: ignore[misc]
    with pytest.raises(ValidationError, match="repeats an item"):
        BenchSection(world_sizes=(2, 2))
    with pytest.raises(ValidationError, match="roofline.shapes"):
        BenchSection.model_validate({"roofline": {"shapes": [[1, 2], [3, 4, 5]]}})


def test_sized_bound_must_be_the_defs_bound() -> None:
    """Catches a model bounding a size differently from its ``$defs`` entry: the model would accept what the
    workflow's schema refuses, or the other way round."""
    from hsitp.sections.base import sized

    with pytest.raises(ValueError, match=r"not \$defs/heads's \[1, 4096\]"):
        sized("heads", 5000)


def test_top_keys_are_generated() -> None:
    """Catches the root losing its keys or bounds when it left the YAML: ``run: reference`` (the committed
    references' folder) and a seed past 2^32 - 1 must still be refused, by the schema and by the model."""
    from hsitp.sections.root import TopKeys

    with pytest.raises(ConfigError, match="run"):
        validate_config({"run": "reference"})
    with pytest.raises(ConfigError, match=r"seed: 4294967296 is above 4294967295"):
        validate_config({"seed": 2**32})
    with pytest.raises(ValueError, match="reference"):
        TopKeys(run="reference")
    assert set(build_schema()["$defs"]) >= {"plan", "op", "seed", "heads", "world_size"}


def test_docs_key_list_is_generated() -> None:
    """Catches docs/config.md going stale: a key added, renamed or re-documented in a model without `hsitp config
    keys` rerun (the docs would list keys the config refuses, or miss one), and a key the list leaves out."""
    from pathlib import Path

    from hsitp.schema import keys_text

    docs = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    text = keys_text()
    assert docs.read_text() == text, "docs/config.md is stale: run `hsitp config keys`"
    for key in ("run", "seed", "data.partition.draws", "parallel.heads", "audit.measured_run"):
        assert f"| `{key}` " in text


def test_train_lists_refuse_repeats_and_groups_stay_absent() -> None:
    """Catches a train list losing ``uniqueItems`` in the generated schema or the model accepting what the schema
    refuses (a repeated crop would run its jobs twice), or a D-CHAG plan left out of ``train.groups`` filled with a
    null the schema then refuses."""
    crop = {"patch": 8, "tokens": 324}
    with pytest.raises(ConfigError, match=r"train\.crops"):
        validate_config({"train": {"crops": [crop, crop]}})
    with pytest.raises(ValidationError, match="repeats an item"):
        TrainSection.model_validate({"crops": [crop, crop]})
    groups = validate_config({"train": {"groups": {"dchag_l": [2]}}}).as_json()["train"]["groups"]
    assert groups == {"dchag_l": [2]}  # a plan given no g stays absent, as in the file (not null)


def test_model_refuses_what_the_schema_refuses() -> None:
    """Catches a model looser than its generated schema: a repeated list entry (uniqueItems), a block side under
    the floor that $defs/pixels does not carry, or an unknown scene as a data.sources key."""
    for bad in (
        {"source_order": ["cache", "cache"]},
        {"partition": {"block": 1}},
        {"sources": {"x": ["cache"]}},
    ):
        with pytest.raises(ConfigError):
            validate_config({"data": bad})
        with pytest.raises(ValidationError):
            DataSection.model_validate(bad)
