"""The DAG's preflight (hsitp.preflight, called by workflow/rules/common.smk): every stage's sizes at every P are
checked when the DAG is built, and a refusal is one line naming the key, with the full text in a log."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hsitp.config import load_config
from hsitp.errors import HsitpError
from hsitp.preflight import error_log_path, one_line, preflight

ROOT = Path(__file__).resolve().parents[1]
SMOKE = [ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"]


def _raw_smoke() -> dict:
    from hsitp.config import deep_merge

    return deep_merge(*(yaml.safe_load(p.read_text()) for p in SMOKE))  # two files: base, overlay


@pytest.mark.parametrize(
    ("overlay", "key"),
    [
        ({"bench": {"world_sizes": [1, 3]}}, "bench.world_sizes: P = 3: attn_channel: parallel.heads = 8"),
        ({"probe": {"world_sizes": [1, 2, 3]}}, "probe.world_sizes: plan 'tp' at P = 3"),
        ({"probe": {"estimate": {"grid": {"world_sizes": [3]}}}}, "probe.estimate: plan 'tp'"),
        ({"train": {"world_sizes": [1, 3]}}, "train.model.heads = 4 is not divisible by P = 3"),
    ],
    ids=["bench", "probe", "probe-estimate", "train"],
)
def test_every_stage_refuses_an_indivisible_p_when_the_dag_is_built(overlay: dict, key: str) -> None:
    """Catches a stage whose P is checked only when its job runs (minutes later, behind the rule's message, with
    the ranks' lines run together): bench and probe P were, train's was not."""
    from hsitp.config import deep_merge

    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(_raw_smoke(), overlay))
    assert key in str(info.value)


def test_shipped_configs_pass_the_preflight() -> None:
    """Catches a preflight stricter than the jobs: every shipped run config must pass it."""
    for extra in ("smoke.yaml", "cpu.yaml", "cpu-accuracy.yaml"):
        files = [ROOT / "config/config.yaml", ROOT / "config" / extra]
        if extra == "cpu-accuracy.yaml":
            files.insert(1, ROOT / "config/cpu.yaml")
        preflight(load_config(files).as_json())
    preflight(load_config([ROOT / "config/config.yaml"]).as_json())


def test_one_line_names_the_first_error_and_writes_the_rest(tmp_path: Path) -> None:
    """Catches a refusal that prints several lines (a schema path, a traceback) or drops the other errors: the
    terminal gets one line, the log every error and the traceback."""
    bad = _raw_smoke() | {"run": "smoke"}
    bad["train"] = {**bad["train"], "epochs": -1, "bogus": 1}
    with pytest.raises(HsitpError) as info:
        preflight(bad)
    log = tmp_path / "logs" / "config_error.log"
    line = one_line(info.value, log)
    assert "\n" not in line and line.startswith("hsitp: invalid config: train")
    assert "(and 1 more)" in line and str(log) in line
    text = log.read_text()
    assert "epochs" in text and "bogus" in text and "Traceback" in text
    assert error_log_path({"run": "smoke"}) == Path("logs/smoke/config_error.log")
    assert error_log_path({"run": "../x"}) == Path("logs/config_error.log")


@pytest.mark.slow
def test_snakemake_stops_with_one_line_before_any_job(workflow_copy) -> None:
    """Catches a DAG that starts jobs (or prints Snakemake's traceback with a common.smk line number) for a P the
    probe cannot split: exit 2, one `hsitp:` line on stderr, the detail in logs/smoke/config_error.log."""
    wf = workflow_copy
    for text, key in (
        (yaml.safe_dump({"probe": {"world_sizes": [1, 3]}}), "probe.world_sizes"),
        # Snakemake's own YAML loader keeps the second of two equal keys: the run would silently train 3 epochs
        ("train: {epochs: 2, epochs: 3}\n", "key 'epochs' given twice"),
    ):
        (wf.root / "config" / "bad.yaml").write_text(text)
        run = wf.snakemake(
            "-n", "--cores", "1", "--configfile", "config/smoke.yaml", "config/bad.yaml", timeout=120
        )
        err = run.stderr
        assert run.returncode == 2, err[-2000:]
        ours = [ln for ln in err.splitlines() if ln.startswith("hsitp:")]
        assert len(ours) == 1 and key in ours[0], err
        assert "Traceback" not in err and "common.smk" not in err, err
        assert "Job stats" not in run.stdout
        assert (wf.root / "logs/smoke/config_error.log").is_file()


@pytest.mark.parametrize(
    ("overlay", "key"),
    [
        ({"train": {"recipe": "tuned", "plans": ["tp", "dchag_l"], "control": {"world_sizes": [3]}}},
         "train.control.world_sizes: P = [3] is not in train.world_sizes"),
        ({"bench": {"shard": {"hardware": "h999"}}}, "bench.shard.hardware = 'h999': no such preset"),
        ({"cost": {"plan": {"datasets": ["nowhere"]}}}, "cost.plan.datasets: nowhere not in the registry"),
        ({"train": {"validation": {"folds": 2, "fold": 5}}}, "train.validation.fold = 5 is past"),
        ({"stages": ["data", "tune"], "tune": {"world_size": 3}, "train": {"recipe": "config"}},
         "tune.world_size = 3 does not divide train.model.heads = 4"),
    ],
    ids=["control-P", "shard-hardware", "cost-plan-dataset", "validation-fold", "tune-P"],
)  # fmt: skip
def test_the_dag_refuses_names_and_indices_that_do_not_exist(overlay: dict, key: str) -> None:
    """Catches keys the DAG accepted and a job met minutes later (the control's P: a traceback from targets.smk)
    or never (a shard preset read only on a GPU machine; a held-out fold past the folds; a cost plan for a scene
    the registry lacks)."""
    from hsitp.config import deep_merge

    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(_raw_smoke(), overlay))
    assert key in str(info.value)


@pytest.mark.parametrize(
    ("overlay", "key"),
    [
        (
            {"train": {"groups": {"dchag_l": [512], "dchag_c": [2]}}},
            "train.groups = 512 D-CHAG groups per rank",
        ),
        ({"probe": {"groups": [512]}}, "probe.groups = 512 D-CHAG groups per rank"),
        ({"bench": {"groups": 64}}, "bench.groups = 64 D-CHAG groups per rank"),
        ({"bench": {"L": [1], "groups": 1}}, "bench.L = 1 bands over P = 2 ranks"),
        # the study dropped a g no plan's partition allows without a word
        (
            {"stages": ["data", "tune"], "tune": {"space": {"groups": [1, 512]}}},
            "tune.space.groups = 512 D-CHAG",
        ),
    ],
    ids=["train", "probe", "bench", "bench-L-below-P", "tune"],
)
def test_every_stage_refuses_more_groups_than_a_rank_holds_bands(overlay: dict, key: str) -> None:
    """Catches D-CHAG groups that no band fills: g = 512 with 200 bands trained silently (the empty groups masked
    out), so the run compared a model other than the one its config names."""
    from hsitp.config import deep_merge

    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(_raw_smoke(), overlay))
    assert key in str(info.value) and (
        "every group needs a band" in str(info.value) or "chunk of bands" in str(info.value)
    )


@pytest.mark.parametrize(
    ("overlay", "key"),
    [
        ({"train": {"model": {"dim": 65536, "heads": 4096, "depth": 1024, "mlp_ratio": 64}}},
         "lower train.batch or train.model"),
        ({"probe": {"N": [1048576], "L": [65536], "dim": 65536, "depth": 1024, "heads": 4096}},
         "lower probe.batch, .dim, .depth, .mlp_ratio, .L or .N"),
        ({"bench": {"N": [1048576], "D": [65536], "L": [65536]}}, "lower bench.N, bench.D, bench.L or bench.batch"),
        ({"bench": {"roofline": {"shapes": [[64, 64, 64], [128, 128, 128], [2**21, 2**21, 2**21]]}}},
         "lower bench.roofline.shapes"),
    ],
    ids=["train-model", "probe-grid", "bench-sweep", "bench-roofline"],
)  # fmt: skip
def test_the_dag_refuses_a_job_past_any_machine(overlay: dict, key: str) -> None:
    """Catches sizes inside their bounds whose product no machine holds (D = 65,536 x 1,024 blocks): the job hung
    or was killed for memory after its ranks started; now the DAG names the keys and the modelled size."""
    from hsitp.config import deep_merge

    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(_raw_smoke(), overlay))
    assert key in str(info.value) and "any machine holds" in str(info.value)


def test_a_job_refuses_what_this_machine_cannot_hold(tmp_path: Path) -> None:
    """Catches a job that fits some machine but not this one (a 2 TiB copy on a small CPU host): it would be
    killed for memory mid-run; the job itself refuses before allocating, in one line with exit 2."""
    from hsitp.cli import main
    from hsitp.cost.budget import host_bytes

    copy = int(host_bytes())  # twice this is past the host
    argv = ["bench", "roofline", "--out", str(tmp_path / "r.nc"), "--config", str(SMOKE[0]), "--config",
            str(SMOKE[1]), "--config-json",
            f'{{"bench": {{"device": "cpu", "roofline": {{"copy_bytes": {copy}}}}}}}']  # fmt: skip
    assert main(argv) == 2
    assert not (tmp_path / "r.nc").exists()


def test_the_boundary_table_refuses_a_grid_of_hours() -> None:
    """Catches 512 points per axis x 9 embed_dims (each key inside its bounds): some 20 minutes of arithmetic
    with no end in sight for whoever asked for a table."""
    from hsitp.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match="2,359,296 grid cells"):
        validate_config({"cost": {"boundary": {"points": 512, "embed_dims": [2**k for k in range(8, 17)]}}})
    validate_config({"cost": {"boundary": {"points": 512, "embed_dims": [256]}}})  # the largest one-D grid


def test_a_training_job_checks_the_memory_it_is_given() -> None:
    """Catches `hsitp train` allocating 136 GB on a 24 GiB host (a traceback from the CPU allocator mid-step): the
    job's own check compares the modelled peak with this machine's memory, which the DAG cannot know."""
    from hsitp.config import ConfigError, deep_merge, validate_config
    from hsitp.train.plan import check_job
    from hsitp.train.settings import TrainSettings

    cfg = validate_config(
        deep_merge(_raw_smoke(), {"train": {"batch": 256, "model": {"dim": 2048, "depth": 8}}})
    )
    ts = TrainSettings.from_config(cfg)
    check_job(ts, "tp", 1, 1, 200, 16, patch=8, tokens=324)  # fits some machine
    with pytest.raises(ConfigError, match="past the 24 GiB this machine holds; lower train.batch"):
        check_job(ts, "tp", 1, 1, 200, 16, patch=8, tokens=324, memory=24 * 2.0**30)


def test_a_whole_number_past_any_count_is_refused() -> None:
    """Catches `train: {epochs: 100000000000000000000}` (a key without its own maximum) accepted, a job of no end;
    and a number JSON readers would not even hold exactly."""
    from hsitp.config import ConfigError, validate_config

    with pytest.raises(ConfigError, match="train.epochs: 100000000000000000000 is past 2\\^53"):
        validate_config({"train": {"epochs": 10**20}})


@pytest.mark.parametrize(
    "partition",
    [{"min_train_per_class": 20}, {"train_fraction": 0.99}],
    ids=["min-train-past-the-smallest-class", "fraction-leaves-no-test-pixel"],
)
def test_the_dag_refuses_a_partition_some_class_cannot_meet(partition: dict) -> None:
    """Catches min_train_per_class / train_fraction that Indian Pines' 20-pixel class cannot meet with a test
    pixel left: the partition was drawn anyway (19 train pixels, one test pixel) and only a log line warned."""
    from hsitp.config import deep_merge

    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(_raw_smoke(), {"data": {"partition": partition}}))
    assert "data.partition: train_fraction" in str(info.value) and "indian_pines" in str(info.value)
    preflight(deep_merge(_raw_smoke(), {"data": {"partition": {"min_train_per_class": 19}}}))


def test_preparing_a_scene_refuses_a_partition_some_class_cannot_meet() -> None:
    """Catches `hsitp data prepare` drawing a partition whose smallest class keeps no test pixel beyond the one
    forced: it only logged a warning; the job now stops naming the class and its size."""
    from hsitp.data.partition import PartitionError, check_satisfiable
    from hsitp.settings import DataSettings

    part = DataSettings.from_config(load_config(SMOKE)).partition
    check_satisfiable({1: 46, 9: 20}, part, "indian_pines")  # the shipped settings pass
    with pytest.raises(PartitionError, match="class 9 of the tiny scene, which has 3"):
        check_satisfiable({1: 46, 9: 3}, part, "tiny")
