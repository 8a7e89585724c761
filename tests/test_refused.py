"""What cannot exist is refused (issue 52, deliverable 1): one class of impossible input per case, tried as a new
user would, through ``hsitp``'s entry point (exit 2, one line on stderr, no traceback, nothing written; in this
process, ``hsitp.cli.main``: a real ``python -m hsitp`` process is refused the same way in
test_an_output_on_an_input_is_refused) and, where the input is a config value, through the DAG's check
(``hsitp.preflight``, what workflow/rules/common.smk runs before any job). docs/refused.md lists the same classes,
messages and these tests' ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hsitp.config import RANGES, deep_merge, load_schema
from hsitp.errors import HsitpError
from hsitp.preflight import one_line, preflight

ROOT = Path(__file__).resolve().parent.parent
SMOKE = [ROOT / "config/config.yaml", ROOT / "config/smoke.yaml"]


def _cfg(overlay: dict) -> list[str]:
    return ["--config-json", json.dumps(overlay)]


# id -> (the config overlay or None (a command-line option only), the hsitp argv, what the one line must say)
CASES: dict[str, tuple[dict | None, list[str], str]] = {
    "nan": ({"train": {"lr": float("nan")}}, ["data", "list"], "train.lr: nan is not a finite number"),
    "duplicate-json-key": (
        None,
        ["data", "list", "--config-json", '{{"seed": 1, "seed": 2}}'],
        "--config-json: key 'seed' given twice in one object",
    ),
    "two-outputs-one-path": (
        None,
        ["probe", "merge", "{out}.p.nc", "--memory-out", "{out}", "--throughput-out", "{out}"],
        "--memory-out and --throughput-out both write",
    ),
    "option-past-its-key": (
        None,
        ["train", "summary", "{out}.nc", "--out", "{out}", "--level", "1.5"],
        "--level 1.5 is out of range (above 0, below 1; as train.verdict.level",
    ),
    "option-out-of-its-limits": (
        None,
        ["train", "{out}.nc", "--out", "{out}", "--stop-after", "0"],
        "--stop-after 0 is out of range (at least 1; an epoch, counted from 1)",
    ),
    # a file where a folder is wanted said "no such folder" of a file that exists
    "file-for-a-folder": (
        None,
        ["report", "check-metadata", "README.md"],
        "README.md: a file, not a folder; give the folder that holds the netCDF files",
    ),
    # a missing document ended in the OS's bare "No such file or directory", naming no option
    "document-missing": (
        None,
        ["report", "measured", "--reference", "results/reference/cpu-fair", "--doc", "{out}.md", "--check"],
        ".md: no such file (a document holding generated blocks",
    ),
    # JSON Schema takes 2.0 as an integer; the stage then fails on it (range(2.0), a tensor shape)
    "integer-as-float": (
        {"train": {"epochs": 2.0}},
        ["data", "list"],
        "train.epochs: 2.0 is a float where a whole number is wanted; write 2",
    ),
    # YAML 1.1 reads `lr: 1e-3` (no dot) as text and `epochs: true` as a boolean: the line said only "is not of
    # type 'number'", not what to write
    "number-as-text": (
        {"train": {"lr": "1e-3"}},
        ["data", "list"],
        "train.lr: '1e-3' is text (YAML reads 1e-3 without a dot as text) where a number is wanted; write 0.001",
    ),
    "boolean-for-a-number": (
        {"train": {"epochs": True}},
        ["data", "list"],
        "train.epochs: True is a boolean (YAML reads true, yes, on as one) where a whole number is wanted",
    ),
    "infinite-in-a-list": (
        {"baseline": {"svm": {"C": [10, float("inf")]}}},
        ["cost", "rho", "--out", "{out}"],
        "baseline.svm.C.1: inf is not a finite number",
    ),
    "output-on-a-folder": (
        None,
        ["cost", "rho", "--out", "src"],  # a folder of the repository, the working directory here
        "src is a folder; give the path of the file to write in it",
    ),
    "duplicate-option-entry": (
        None,
        ["advise", "plan", "--dataset", "indian_pines", "--groups", "4", "4"],
        "--groups: 4 is given twice; give each once",
    ),
    "nan-option": (
        None,
        ["advise", "plan", "--dataset", "indian_pines", "--device-memory-gb", "nan"],
        "--device-memory-gb nan is not a finite number",
    ),
    "reversed-range": (
        {"tune": {"space": {"lr": [0.01, 0.0003]}}},
        ["tune", "{out}.scene.nc", "--plan", "tp", "--protocol", "random", "--tokens", "9", "--out", "{out}"],
        "tune.space.lr: [0.01, 0.0003] is reversed",
    ),
    "empty-range": (
        {"cost": {"boundary": {"rho_range": [1.0, 1.0]}}},
        ["cost", "boundary", "--out", "{out}"],
        "cost.boundary.rho_range: [1.0, 1.0] is empty",
    ),
    "size-past-any-machine": (
        {"cost": {"depth": 1_000_000_000}},
        ["cost", "plan", "--out", "{out}"],
        "cost.depth: 1000000000 is above 1024",
    ),
    "size-option-past-any-machine": (
        None,
        ["advise", "plan", "--dataset", "indian_pines", "--depth", "1000000000"],
        "--depth 1000000000 is outside 1..1024",
    ),
    "seed-out-of-range": (
        {"train": {"seeds": [0, 2**32]}},
        ["data", "list"],
        "train.seeds.1: 4294967296 is above 4294967295",
    ),
    "seed-option-out-of-range": (
        None,
        ["audit", "reproduce", "--run", "cpu-fair", "--seed", "-1", "--budget-min", "5", "--dry-run"],
        "--seed -1 is outside 0..4294967295",
    ),
    "heads-do-not-divide-dim": (
        {"cost": {"embed_dim": 30, "heads": 4}},
        ["cost", "rho", "--out", "{out}"],
        "cost.heads = 4 does not divide cost.embed_dim = 30",
    ),
    "heads-option-do-not-divide-dim": (
        None,
        ["advise", "plan", "--dataset", "indian_pines", "--embed-dim", "30", "--heads", "4"],
        "--heads 4 does not divide --embed-dim 30",
    ),
    "bench-heads-do-not-divide-dim": (
        {"bench": {"D": [30, 64]}, "parallel": {"heads": 4}},
        ["data", "list"],
        "parallel.heads = 4 does not divide bench.D = 30",
    ),
    # the estimate job computed nothing and failed writing an empty file ("variable 'plan' has no units")
    "probe-estimate-without-a-point": (
        {"probe": {"estimate": {"grid": {"plans": []}, "dchag": []}}},
        ["probe", "estimate", "--out", "{out}"],
        "probe.estimate: no point to estimate",
    ),
    # the P = 1 launch probed nothing and failed writing an empty file ("coordinate 'plan' has no units")
    "probe-p-without-a-plan": (
        {"probe": {"plans": ["tp", "dchag_l"]}},
        ["probe", "run", "--world-size", "1", "--out", "{out}"],
        "P = 1 probes nothing with probe.plans = ['tp', 'dchag_l']: it needs dense",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_by_the_subcommand(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches an impossible input that a subcommand takes and plans with (a NaN learning rate, a reversed tuning
    range that crashed Optuna with two tracebacks and left a journal behind, a depth of 10^9 planned for days, a
    seed of -1 ending in a NumPy traceback, heads that do not divide D priced as a model): exit 2, exactly one
    ``hsitp ...: error:`` line, no traceback (an exception escaping ``main`` fails the test), no output file, no
    journal. In this process: a ``python -m hsitp`` start per case cost a second of imports, 50 s of the suite."""
    from hsitp.cli import main

    overlay, argv, says = CASES[case]
    out = tmp_path / "out.nc"
    argv = [a.format(out=out) for a in argv] + (_cfg(overlay) if overlay is not None else [])
    monkeypatch.chdir(ROOT)  # the default config/config.yaml, as from the repository root
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("hsitp") and ": error: " in lines[0], err
    assert says in lines[0], lines[0]
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())  # nothing written, no .journal either


# Classes the DAG refuses before its jobs would: the tuned recipe only there (a subcommand gets only its rule's
# keys, the schema's defaults standing in for train.plans), the crop's split of the scene checked by every stage
# that builds the crop (hsitp.train.plan.check_jobs, `hsitp train`, `hsitp tune`).
DAG_ONLY = {
    # the data job refused these minutes into the run; the DAG's check knows each scene's extent and bands
    "partition-block-past-the-scene": (
        {"data": {"partition": {"block": 200}}},
        "data.partition.block = 200 exceeds the indian_pines scene (145 x 145)",
    ),
    "pca-past-the-bands": (
        {"data": {"pca_components": 5000}},
        "data.pca_components = 5000: the indian_pines scene has 200 bands",
    ),
    "tuned-recipe-names-no-study": (
        {"train": {"recipe": "tuned"}},
        "train.recipe: tuned trains each plan on its own tuning study, and `hsitp tune` studies tp, dchag_l, dchag_c "
        "only; train.plans has dense, token: drop them",
    ),
    # the checks ran on the config's recipe and were compared with equivalents on each plan's study: a mismatch each
    "tuned-recipe-with-equivalence-checks": (
        {
            "train": {
                "recipe": "tuned",
                "plans": ["tp", "dchag_l"],
                "equivalent": True,
                "equivalence": {"epochs": 1},
            }
        },
        "train.recipe: tuned with train.equivalent: the P-rank checks (train.equivalence.epochs = 1) train on the "
        "config's recipe",
    ),
    # every rank job of the stage failed at its process group's start, after the jobs before it had run
    "nccl-on-a-cpu-device": (
        {"parallel": {"backend": "nccl"}, "probe": {"device": "cpu"}},
        "parallel.backend: nccl needs CUDA, but probe.device = cpu",
    ),
    # the block jobs were planned and each failed reading a partition the prepared file does not carry
    "protocol-not-prepared": (
        {"data": {"partition": {"protocols": ["random"]}}, "train": {"protocols": ["random", "block"]}},
        "train.protocols has block, which data.partition.protocols = ['random'] does not prepare",
    ),
    # every launch ran, then bench calibrate failed: no collective is timed at P = 1
    "bench-without-a-collective": (
        {"bench": {"world_sizes": [1]}},
        "bench.world_sizes = [1]: the calibration fits alpha and beta to collectives timed at P >= 2 only",
    ),
    # checked only when train was a stage too: a probe-only run measured other models than it claimed
    "probe-match-train-without-train": (
        {"stages": ["probe"], "probe": {"match_train": True}},
        "probe.mlp_ratio = 4 differs from train.model.mlp_ratio = 2 (probe.match_train",
    ),
    # the untuned control's jobs ran with no tp to be compared with
    "untuned-control-without-tp": (
        {"train": {"recipe": "tuned", "plans": ["dchag_l"], "control": {"world_sizes": [2]}}},
        "train.plans ['dchag_l'] has no tp (the control is compared with tp's runs)",
    ),
    # every check trained the whole run, then train equivalence failed: the equivalent has no such epoch
    "equivalence-check-past-the-last-epoch": (
        {"train": {"plans": ["tp", "dchag_l"], "equivalent": True, "equivalence": {"epochs": 3}}},
        "train.equivalence.epochs = 3 is past train.epochs = 2",
    ),
    "tune-protocol-not-prepared": (
        {"stages": ["data", "tune"], "data": {"partition": {"protocols": ["random"]}}},
        "tune.protocols has block, which data.partition.protocols = ['random'] does not prepare",
    ),
    # the study (at tune.world_size = 1: 6 bands a rank) may choose g = 4; the P = 2 jobs (3 bands a rank) then fail
    "tuned-groups-past-a-trained-p": (
        {
            "data": {"pca_components": 6},
            "train": {"recipe": "tuned", "plans": ["tp", "dchag_l"]},
            "tune": {"world_size": 1},
        },
        "tune.space.groups: the dchag_l study may choose g = 4 (it fits at tune.world_size = 1), and train.recipe: "
        "tuned then trains it at P = 2, where g = 4 D-CHAG groups per rank",
    ),
    # [] read as null: every scene of the top-level datasets was trained
    "train-datasets-empty": (
        {"train": {"datasets": []}},
        "train.datasets: [] should be non-empty",
    ),
    # dense, tp and token each trained the dense model in one process from the same seed: token's verdict was fixed
    "one-model-trained-twice-as-equivalents": (
        {"train": {"equivalent": True}},
        "train.equivalent trains each plan's single-process equivalent, and dense, tp, token have the same one",
    ),
    # tune not listed, but the tuned recipe's jobs read its studies: each study failed on the heads at its start
    "tuned-recipe-untuned-stage-checks": (
        {
            "train": {"recipe": "tuned", "plans": ["tp", "dchag_l"], "model": {"heads": 8}},
            "tune": {"world_size": 3},
        },
        "tune.world_size = 3 does not divide train.model.heads = 8",
    ),
    # data not listed, but train and baseline read its files: the data job failed after the DAG took the block
    "data-checks-without-the-data-stage": (
        {"stages": ["train", "baseline"], "data": {"partition": {"block": 200}}},
        "data.partition.block = 200 exceeds the indian_pines scene (145 x 145)",
    ),
    "crop-tokens-not-square": (
        {"train": {"crops": [{"patch": 8, "tokens": 300, "datasets": None}]}},
        "train.crops: tokens = 300 is not a perfect square",
    ),
}


@pytest.mark.parametrize(
    "case", [c for c, (overlay, _, _) in CASES.items() if overlay is not None] + list(DAG_ONLY)
)
def test_refused_when_the_dag_is_built(case: str) -> None:
    """Catches a config value that passes the DAG (every job planned, the first to read it failing minutes later,
    or Snakemake's MissingInputException for a study no rule makes under train.recipe tuned with dense among the
    plans): the check common.smk runs refuses it, in one line naming the key."""
    overlay, says = DAG_ONLY[case] if case in DAG_ONLY else (CASES[case][0], CASES[case][2])
    raw = deep_merge(*(yaml.safe_load(p.read_text()) for p in SMOKE))
    with pytest.raises(HsitpError) as info:
        preflight(deep_merge(raw, overlay))
    line = one_line(info.value)
    assert "\n" not in line and says in line, line


def test_every_range_of_the_schema_is_checked() -> None:
    """Catches a [low, high] pair added to the schema without the reversed-range check (hsitp.config.RANGES): every
    two-number array of the schema is a range, except cost.scale.image ([H, W])."""
    pairs: list[str] = []

    def walk(node: dict, path: str) -> None:
        if node.get("type") == "array" and node.get("minItems") == 2 and node.get("maxItems") == 2:
            pairs.append(path)
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}".lstrip("."))

    walk(load_schema(), "")
    assert sorted(set(pairs) - {"cost.scale.image"}) == sorted(RANGES)


# Number options no $defs quantity bounds: counts of work and indices, each checked where it is read (a float is
# still refused when NaN or infinite).


def test_every_number_option_is_bounded_or_said_not_to_be() -> None:
    """Catches a new number option that skips the bounds its config key has (``--level 1.5`` was taken while
    train.verdict.level refuses it; ``--stop-after 0`` ended in a traceback): every int or float option of every
    subcommand is bounded by its quantity (OPTION_BOUNDS), its config key (OPTION_KEYS) or limits of its own
    (OPTION_LIMITS)."""
    import argparse

    from hsitp.cli import build_parser
    from hsitp.config import OPTION_BOUNDS, OPTION_KEYS, OPTION_LIMITS

    dests: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)
            elif action.type in (int, float):
                dests.add(action.dest)

    walk(build_parser())
    assert dests - set(OPTION_BOUNDS) - set(OPTION_KEYS) - set(OPTION_LIMITS) == set()
    assert set(OPTION_BOUNDS.values()) <= {
        name for name, d in load_schema()["$defs"].items() if "maximum" in d
    }


# Every shipped run as its header says to start it (config/config.yaml first, as the Snakefile's configfile).
RUNS = (
    ["smoke.yaml"],
    ["cpu.yaml"],
    ["cpu.yaml", "cpu-accuracy.yaml"],
    ["cpu.yaml", "cpu-fair.yaml"],
    ["cpu.yaml", "cpu-fair.yaml", "cpu-places.yaml"],
    ["bench-cpu.yaml"],
    ["bench-planner.yaml"],
)


@pytest.mark.parametrize("files", RUNS, ids=["+".join(f) for f in RUNS])
def test_every_shipped_run_passes(files: list[str]) -> None:
    """Catches a bound of the schema's $defs, or a value check, stricter than a committed run (the paper's model,
    D-CHAG's 26B configs at D = 8192, the scale table's 1,024 devices, the tuned fair run)."""
    from hsitp.config import load_config

    preflight(load_config([ROOT / "config/config.yaml", *(ROOT / "config" / f for f in files)]).as_json())


@pytest.mark.parametrize("overlay", [{"train": {"recipe": "config"}}, {"train": {"plans": ["tp"]}}])
def test_a_control_that_plans_nothing_is_not_refused(overlay: dict) -> None:
    """Catches a refusal of a key made moot by another (as train.groups under a tuned recipe): an overlay on
    config/cpu-fair.yaml that sets the recipe or the plans, and not train.control, which cpu-fair sets, was refused
    until it cleared the control too."""
    from hsitp.config import load_config

    files = [ROOT / "config" / f for f in ("config.yaml", "cpu.yaml", "cpu-fair.yaml")]
    preflight(deep_merge(load_config(files).as_json(), overlay))


def test_every_list_of_the_schema_refuses_duplicates() -> None:
    """Catches a list key that takes the same entry twice (a P, a grid value, a crop run twice, or two rows of a
    table under one name); the only lists exempt are fixed-length tuples (a [low, high] range, an [m, n, k]
    shape), where a repeat is a value, not a duplicate."""
    missing = []

    def walk(node: object, path: str) -> None:
        if not isinstance(node, dict):
            return
        if node.get("type") == "array":
            fixed = node.get("minItems") is not None and node.get("minItems") == node.get("maxItems")
            if not fixed and not node.get("uniqueItems"):
                missing.append(path)
        for key, sub in (node.get("properties") or {}).items():
            walk(sub, f"{path}.{key}".lstrip("."))
        walk(node.get("items"), f"{path}[]")
        for name, sub in (node.get("$defs") or {}).items():
            walk(sub, f"$defs.{name}")

    walk(load_schema(), "")
    assert missing == []


def test_an_output_on_an_input_is_refused(tmp_path: Path) -> None:
    """Catches a command overwriting its own input (`hsitp train summary R.nc --out R.nc` replaced the record
    with its summary): exit 2, one line, the input untouched."""
    record = tmp_path / "r.nc"
    record.write_bytes(b"a record")
    proc = subprocess.run([sys.executable, "-m", "hsitp", "train", "summary", str(record), "--out", str(record)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "would overwrite an input of the command" in proc.stderr, proc.stderr
    assert record.read_bytes() == b"a record"
