"""Bad inputs as a new user types them, tried against a checkout, each sorted into one category.

    python benchmarks/bad_input_trial.py --tree . --work /tmp/trial [--round 1|2] [--only ID ...] [--timeout 30]

Round 1 is the trial of 2026-12-06 (``cases()``), round 2 that of 2026-12-07 (``round2()``: every subcommand's
options and files, values of the wrong type, the other scenes' registry facts); both run unless ``--round`` picks
one, and each round's table prints on its own.

Each case is a dry run of the DAG with a config overlay (``snakemake -n``) or a short subcommand; nothing is
trained at scale. A case expects a refusal ("refuse") or an answer ("answer": a large but legitimate input that
must finish). The categories:

- clear: exit status 2, one ``hsitp`` line on stderr (Snakemake's own banner lines aside), nothing written;
- traceback: a Python traceback anywhere in the output;
- accepted silently: exit status 0 where a refusal was expected;
- answered: exit status 0 where an answer was expected;
- hangs: still running after ``--timeout`` seconds (killed);
- unclear refusal: any other failure (several lines, another exit status, a file left behind).

Run it on two checkouts (``git worktree add /tmp/before COMMIT``) to count before and after a change; the counts
per class and category print last, and every case's record goes to ``WORK/results.jsonl``. It builds its own
fixtures in WORK (Indian Pines from the PyPI package, prepared by the checkout's own ``hsitp``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

C = "--config config/config.yaml --config config/smoke.yaml"
BANNER = ("Using workflow specific profile", "Config file config/config.yaml", "Assuming unrestricted")


def dag(cid: str, cls: str, overlay: str, expect: str = "refuse") -> dict:
    return {"id": cid, "cls": cls, "cmd": "snakemake -n --cores 1 --configfile config/smoke.yaml {OV}",
            "overlay": overlay, "expect": expect}  # fmt: skip


def cmd(cid: str, cls: str, line: str, expect: str = "refuse", overlay: str | None = None) -> dict:
    return {"id": cid, "cls": cls, "cmd": line, "overlay": overlay, "expect": expect}


def cj(obj: dict) -> str:
    return "--config-json '" + json.dumps(obj) + "'"


def cases() -> list[dict]:
    train = (
        "hsitp train {FX}/ip.nc --plan {plan} --world-size {P} --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
        + C
    )
    out: list[dict] = []
    # 1: keys against each other and against the scene (D-CHAG groups, names, indices)
    out += [
        dag(
            "groups-train-above-bands-P2",
            "keys",
            "train: {world_sizes: [1, 2], groups: {dchag_l: [150], dchag_c: [2]}}",
        ),
        # smoke trains no dchag_c: its groups are not read (an answer, by design)
        dag(
            "groups-train-c-not-trained", "keys", "train: {groups: {dchag_l: [2], dchag_c: [300]}}", "answer"
        ),
        dag("groups-probe-300", "keys", "probe: {groups: [300]}"),
        dag("groups-probe-L4-g8", "keys", "probe: {L: [4], groups: [8]}"),
        dag("groups-bench-16-L8", "keys", "bench: {groups: 16}"),
        dag("groups-estimate-64-P8", "keys", "probe: {estimate: {grid: {groups: [64]}}}"),
        dag(
            "groups-train-equal-bands-ok", "keys", "train: {groups: {dchag_l: [100], dchag_c: [2]}}", "answer"
        ),
        dag("tune-P3-heads4", "keys", "stages: [data, tune]\ntune: {world_size: 3}\ntrain: {recipe: config}"),
        dag("tune-P8-heads4", "keys", "stages: [data, tune]\ntune: {world_size: 8}\ntrain: {recipe: config}"),
        dag("fold-equal-folds", "keys", "train: {validation: {folds: 2, fold: 2}}"),
        dag("fold-past-folds", "keys", "train: {validation: {folds: 3, fold: 10}}"),
        dag(
            "control-P4-not-trained",
            "keys",
            "train: {recipe: tuned, plans: [tp, dchag_l], control: {world_sizes: [4]}}",
        ),
        dag(
            "control-P2-and-3",
            "keys",
            "train: {recipe: tuned, plans: [tp, dchag_l], control: {world_sizes: [2, 3]}}",
        ),
        dag("shard-hardware-typo", "keys", "bench: {shard: {hardware: a100}}"),
        dag("shard-hardware-case", "keys", "bench: {shard: {hardware: H200-NVLINK-IB}}"),
        dag("cost-plan-dataset-typo", "keys", "cost: {plan: {datasets: [indian_pine]}}"),
        dag("cost-plan-dataset-case", "keys", "cost: {plan: {datasets: [Indian_Pines]}}"),
        dag("boundary-hardware-typo", "keys", "cost: {boundary: {hardware: paper-intr}}"),
        dag("point-hardware-typo", "keys", "cost: {boundary: {point_hardware: [paper-intra, h100]}}"),
        dag("train-plan-typo", "keys", "train: {plans: [tp, dchag]}"),
        dag("probe-plan-typo", "keys", "probe: {plans: [tp, dchagl]}"),
        dag("train-protocol-typo", "keys", "train: {protocols: [randm]}"),
        dag("train-heads-P2-odd", "keys", "train: {model: {heads: 3, dim: 48}}"),
        dag("probe-heads-P2-odd", "keys", "probe: {heads: 3, dim: 48}"),
        dag("bench-L-below-P", "keys", "bench: {L: [1], groups: 1, world_sizes: [1, 2]}"),
        dag("crop-past-scene", "keys", "train: {crops: [{patch: 16, tokens: 324, datasets: null}]}"),
        dag("partition-draws-0", "keys", "data: {partition: {draws: 0}}"),
        dag("pca-past-bands", "keys", "data: {pca_components: 201}"),
        dag("block-past-scene", "keys", "data: {partition: {block: 146}}"),
    ]
    # 2: sizes inside their bounds whose product is past any machine, or past this one
    out += [
        dag(
            "dag-train-dim-huge",
            "size",
            "train: {model: {dim: 65536, heads: 4096, depth: 1024, mlp_ratio: 64}}",
        ),
        dag("dag-train-batch-dim", "size", "train: {batch: 65536, model: {dim: 16384, heads: 4, depth: 64}}"),
        dag("dag-probe-huge", "size", "probe: {dim: 65536, depth: 64, heads: 4, N: [1048576]}"),
        dag("dag-probe-L-N-huge", "size", "probe: {N: [1048576], L: [65536]}"),
        dag("dag-estimate-huge", "size", "probe: {estimate: {grid: {N: [1048576], L: [65536], dim: 65536}}}"),
        dag("dag-bench-N-huge", "size", "bench: {N: [16777216], D: [65536]}"),
        dag("dag-bench-NDL-huge", "size", "bench: {N: [1048576], D: [65536], L: [65536]}"),
        dag(
            "dag-boundary-cells",
            "size",
            "cost: {boundary: {points: 512, embed_dims: [256, 512, 1024, 2048]}}",
        ),
        dag("dag-rf-trees", "size", "baseline: {rf: {n_estimators: [100000000]}}"),
        dag("dag-boundary-largest-ok", "size", "cost: {boundary: {points: 512}}", "answer"),
        cmd(
            "bench-run-N-huge",
            "size",
            "hsitp bench run --world-size 1 --out {O}/b.nc "
            + C
            + " "
            + cj({"bench": {"N": [16777216], "D": [65536]}}),
        ),
        cmd(
            "bench-run-sweep-past-host",
            "size",
            "hsitp bench run --world-size 1 --out {O}/b.nc "
            + C
            + " "
            + cj({"bench": {"N": [65536], "D": [4096], "L": [200], "batch": 8}}),
        ),
        cmd(
            "bench-run-collective-64G",
            "size",
            "hsitp bench run --world-size 1 --out {O}/b.nc "
            + C
            + " "
            + cj({"bench": {"collectives": {"sizes_bytes": [4096, 68719476736, 1048576]}}}),
        ),
        cmd(
            "roofline-gemm-50000",
            "size",
            "hsitp bench roofline --out {O}/r.nc "
            + C
            + " "
            + cj(
                {
                    "bench": {
                        "device": "cpu",
                        "roofline": {"shapes": [[64, 64, 64], [128, 128, 128], [50000, 50000, 50000]]},
                    }
                }
            ),
        ),
        cmd(
            "roofline-copy-64G",
            "size",
            "hsitp bench roofline --out {O}/r.nc "
            + C
            + " "
            + cj({"bench": {"device": "cpu", "roofline": {"copy_bytes": 68719476736}}}),
        ),
        cmd(
            "probe-run-dim-4096",
            "size",
            "hsitp probe run --world-size 1 --out {O}/p.nc "
            + C
            + " "
            + cj({"probe": {"world_sizes": [1], "dim": 4096, "depth": 8, "heads": 8}}),
        ),
        cmd(
            "probe-run-N-huge",
            "size",
            "hsitp probe run --world-size 1 --out {O}/p.nc "
            + C
            + " "
            + cj({"probe": {"world_sizes": [1], "N": [1048576]}}),
        ),
        cmd(
            "probe-estimate-huge",
            "size",
            "hsitp probe estimate --out {O}/e.nc "
            + C
            + " "
            + cj(
                {
                    "probe": {
                        "estimate": {
                            "grid": {"N": [1048576], "L": [65536], "dim": 65536, "depth": 1024, "heads": 4096}
                        }
                    }
                }
            ),
        ),
        cmd(
            "train-dim-huge",
            "size",
            train.format(FX="{FX}", O="{O}", plan="tp", P=1)
            + " "
            + cj({"train": {"model": {"dim": 65536, "heads": 4096, "depth": 1024}}}),
        ),
        cmd(
            "train-dim-past-host",
            "size",
            train.format(FX="{FX}", O="{O}", plan="tp", P=1)
            + " "
            + cj({"train": {"batch": 256, "model": {"dim": 2048, "heads": 4, "depth": 8}}}),
        ),
        cmd(
            "cost-boundary-cells",
            "size",
            "hsitp cost boundary --out {O}/b.nc "
            + C
            + " "
            + cj(
                {
                    "cost": {
                        "boundary": {
                            "points": 512,
                            "embed_dims": [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536],
                        }
                    }
                }
            ),
        ),
        cmd(
            "baseline-rf-trees",
            "size",
            "hsitp baseline indian_pines --protocol random --data {FX}/ip.nc --out {O}/b.nc "
            + C
            + " "
            + cj({"baseline": {"rf": {"n_estimators": [1000000]}}}),
        ),
        cmd(
            "advise-10e12-devices",
            "size",
            "hsitp advise plan --dataset indian_pines --nodes 1048576 --devices-per-node 1048576",
            "answer",
        ),
        cmd("advise-1e6-nodes", "size", "hsitp advise plan --dataset indian_pines --nodes 1048576", "answer"),
        cmd(
            "cost-plan-10e12-devices",
            "size",
            "hsitp cost plan --out {O}/p.nc "
            + C
            + " "
            + cj({"cost": {"plan": {"nodes": 1048576, "devices_per_node": 1048576}}}),
            "answer",
        ),
    ]
    # 3: CLI options
    out += [
        cmd(
            "train-groups-past-bands",
            "option",
            train.format(FX="{FX}", O="{O}", plan="dchag_l", P=2) + " --ranks 1 --groups 150",
        ),
        cmd("train-world-size-0", "option", train.format(FX="{FX}", O="{O}", plan="tp", P=0)),
        cmd("train-world-size-word", "option", train.format(FX="{FX}", O="{O}", plan="tp", P="two")),
        cmd("train-plan-option-typo", "option", train.format(FX="{FX}", O="{O}", plan="tpp", P=1)),
        cmd(
            "train-tokens-not-square",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 300 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-seed-negative",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed -1 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-protocol-option-typo",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol blocks --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-partition-past",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --partition 9 --out {O}/t.nc "
            + C,
        ),
        cmd("train-ranks-3-of-2", "option", train.format(FX="{FX}", O="{O}", plan="tp", P=2) + " --ranks 3"),
        cmd("probe-run-world-size-0", "option", "hsitp probe run --world-size 0 --out {O}/p.nc " + C),
        cmd("probe-run-world-size-nan", "option", "hsitp probe run --world-size nan --out {O}/p.nc " + C),
        cmd(
            "bench-run-launch-neg", "option", "hsitp bench run --world-size 1 --launch -1 --out {O}/b.nc " + C
        ),
        cmd("bench-run-world-size-huge", "option", "hsitp bench run --world-size 100000 --out {O}/b.nc " + C),
        cmd(
            "advise-split-devices-0",
            "option",
            "hsitp advise split --dataset indian_pines --patch 8 --devices 0",
        ),
        cmd(
            "advise-split-patch-0",
            "option",
            "hsitp advise split --dataset indian_pines --patch 0 --devices 4",
        ),
        cmd(
            "advise-split-dataset-typo",
            "option",
            "hsitp advise split --dataset indian_pine --patch 8 --devices 4",
        ),
        cmd("advise-plan-heads-0", "option", "hsitp advise plan --dataset indian_pines --heads 0"),
        cmd(
            "advise-plan-hardware-typo", "option", "hsitp advise plan --dataset indian_pines --hardware h100"
        ),
        cmd(
            "advise-plan-memory-neg",
            "option",
            "hsitp advise plan --dataset indian_pines --device-memory-gb -1",
        ),
        cmd(
            "advise-plan-memory-inf",
            "option",
            "hsitp advise plan --dataset indian_pines --device-memory-gb inf",
        ),
        cmd(
            "baseline-threads-0",
            "option",
            "hsitp baseline indian_pines --protocol random --threads 0 --data {FX}/ip.nc --out {O}/b.nc " + C,
        ),
        cmd(
            "baseline-dataset-typo",
            "option",
            "hsitp baseline indian_pine --protocol random --data {FX}/ip.nc --out {O}/b.nc " + C,
        ),
        cmd("data-fetch-typo", "option", "hsitp data fetch indian_pine --out {O}/f.json " + C),
        cmd(
            "data-prepare-no-manifest",
            "option",
            "hsitp data prepare indian_pines --manifest {O}/none.json --out {O}/ip.nc " + C,
        ),
        cmd("summary-level-2", "option", "hsitp train summary {FX}/ip.nc --out {O}/s.nc --level 2"),
        cmd("summary-margin-0", "option", "hsitp train summary {FX}/ip.nc --out {O}/s.nc --margin 0"),
        cmd(
            "report-headline-no-folder", "option", "hsitp report headline --reference {O}/nowhere --out {O}/h"
        ),
        cmd(
            "audit-reproduce-budget-neg",
            "option",
            "hsitp audit reproduce --reference results/reference/cpu-places --seed 0 --budget-min -5 --out {O}/r.json --dry-run",
        ),
        cmd(
            "audit-reproduce-seed-word",
            "option",
            "hsitp audit reproduce --reference results/reference/cpu-places --seed one --budget-min 5 --out {O}/r.json --dry-run",
        ),
    ]
    # 4: files handed in: missing, truncated, of another kind, of another scene
    out += [
        cmd(
            "train-data-truncated",
            "file",
            "hsitp train {FX}/ip_trunc.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-data-empty",
            "file",
            "hsitp train {FX}/empty.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-data-is-folder",
            "file",
            "hsitp train {FX} --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-data-text",
            "file",
            "hsitp train {FX}/text.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-data-manifest",
            "file",
            "hsitp train {FX}/fetch.json --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd("summary-of-data-file", "file", "hsitp train summary {FX}/ip.nc --out {O}/s.nc"),
        cmd("summary-of-truncated", "file", "hsitp train summary {FX}/ip_trunc.nc --out {O}/s.nc"),
        cmd(
            "baseline-data-truncated",
            "file",
            "hsitp baseline indian_pines --protocol random --data {FX}/ip_trunc.nc --out {O}/b.nc " + C,
        ),
        cmd(
            "baseline-salinas-name-ip-data",
            "file",
            "hsitp baseline salinas --protocol random --data {FX}/ip.nc --out {O}/b.nc " + C,
        ),
        cmd(
            "prepare-manifest-truncated",
            "file",
            "hsitp data prepare indian_pines --manifest {FX}/fetch_trunc.json --out {O}/ip.nc " + C,
        ),
        cmd(
            "prepare-manifest-empty",
            "file",
            "hsitp data prepare indian_pines --manifest {FX}/empty.json --out {O}/ip.nc " + C,
        ),
        cmd(
            "prepare-manifest-list",
            "file",
            "hsitp data prepare indian_pines --manifest {FX}/list.json --out {O}/ip.nc " + C,
        ),
        cmd(
            "prepare-manifest-other-scene",
            "file",
            "hsitp data prepare salinas --manifest {FX}/fetch.json --out {O}/s.nc " + C,
        ),
        cmd(
            "probe-merge-data-file",
            "file",
            "hsitp probe merge {FX}/ip.nc --memory-out {O}/m.nc --throughput-out {O}/t.nc",
        ),
        cmd(
            "probe-merge-truncated",
            "file",
            "hsitp probe merge {FX}/ip_trunc.nc --memory-out {O}/m.nc --throughput-out {O}/t.nc",
        ),
        cmd("bench-merge-data-file", "file", "hsitp bench merge {FX}/ip.nc --out {O}/m.nc"),
        cmd(
            "report-measured-check-folder-empty",
            "file",
            "hsitp report measured --reference {FX}/emptyref --check",
        ),
        cmd(
            "report-measured-check-truncated",
            "file",
            "hsitp report measured --reference {FX}/ref_trunc --check --doc {FX}/measured.md",
        ),
        cmd(
            "report-headline-truncated",
            "file",
            "hsitp report headline --reference {FX}/ref_trunc --out {O}/h",
        ),
        cmd(
            "report-headline-empty-ref", "file", "hsitp report headline --reference {FX}/emptyref --out {O}/h"
        ),
        cmd(
            "audit-check-empty-ref",
            "file",
            "hsitp audit check --run-dir {FX}/emptyref --reference {FX}/emptyref --out {O}/r.md",
        ),
        cmd(
            "audit-reproduce-empty-ref",
            "file",
            "hsitp audit reproduce --reference {FX}/emptyref --seed 0 --budget-min 5 --out {O}/r.json --dry-run",
        ),
        cmd(
            "audit-reproduce-truncated-ref",
            "file",
            "hsitp audit reproduce --reference {FX}/ref_trunc --seed 0 --budget-min 5 --out {O}/r.json --dry-run",
        ),
        cmd("config-file-truncated-yaml", "file", "hsitp data list --config {FX}/trunc.yaml"),
        cmd("config-file-binary", "file", "hsitp data list --config {FX}/ip.nc"),
        cmd("config-file-dup-key", "file", "hsitp data list --config {FX}/dup.yaml"),
        cmd("config-file-list", "file", "hsitp data list --config {FX}/list.json"),
        cmd("config-json-list", "file", "hsitp data list --config-json '[1, 2]'"),
        cmd("config-json-bad", "file", "hsitp data list --config-json '{\"seed\": }'"),
        dag("dag-configfile-dup-top", "file", "train:\n  seeds: [0]\ntrain:\n  epochs: 1\n"),
        dag("dag-configfile-dup-nested", "file", "bench: {N: [64], N: [128]}\n"),
        dag(
            "dag-configfile-dup-in-list",
            "file",
            "train: {crops: [{patch: 8, patch: 4, tokens: 324, datasets: null}]}\n",
        ),
        dag("dag-configfile-tab", "file", "train:\n\tepochs: 1\n"),
        dag("dag-configfile-list", "file", "- run: smoke\n"),
    ]
    # 5: values of the right type but meaningless
    out += [
        dag("epochs-float", "value", "train: {epochs: 2.5}"),
        dag("lr-negative", "value", "train: {lr: -0.001}"),
        dag("lr-string", "value", "train: {lr: fast}"),
        dag("seeds-empty", "value", "train: {seeds: []}"),
        dag("seeds-dup", "value", "train: {seeds: [0, 0]}"),
        dag("world-sizes-empty", "value", "train: {world_sizes: []}"),
        dag("world-sizes-zero", "value", "train: {world_sizes: [0]}"),
        dag("datasets-empty", "value", "datasets: []"),
        dag("datasets-typo", "value", "datasets: [indian_pine]"),
        dag("stages-typo", "value", "stages: [data, trian]"),
        dag("run-name-slash", "value", "run: ../elsewhere"),
        dag("run-name-empty", "value", "run: ''"),
        dag("threads-zero", "value", "train: {threads_per_rank: 0}"),
        dag("train-fraction-1", "value", "data: {partition: {train_fraction: 1.0}}"),
        dag("train-fraction-0", "value", "data: {partition: {train_fraction: 0.0}}"),
        dag("verdict-level-1", "value", "train: {verdict: {level: 1.0}}"),
        dag("verdict-margin-neg", "value", "train: {verdict: {margin: -0.01}}"),
        dag("rho-range-reversed", "value", "cost: {boundary: {rho_range: [100.0, 0.01]}}"),
        dag("nan-in-list", "value", "baseline: {svm: {C: [1, .nan]}}"),
        dag("inf-lr", "value", "train: {lr: .inf}"),
        dag("unknown-top-key", "value", "trian: {epochs: 1}"),
        dag("unknown-nested-key", "value", "train: {epoch: 1}"),
        dag("null-section", "value", "train: null"),
        dag("section-as-list", "value", "bench: [1, 2]"),
        dag("huge-int", "value", "train: {epochs: 100000000000000000000}"),
    ]
    return out


def round2() -> list[dict]:
    """The trial of 2026-12-07: surfaces the first round barely touched (every subcommand's options and files,
    values of the wrong type, keys against the other scenes' registry facts, P against heads in every stage)."""
    ref = "results/reference/cpu-places"
    h200 = "results/reference/h200-check"
    out: list[dict] = []
    # keys: against the other scenes (registry facts, dry runs only) and P against heads in every stage
    out += [
        dag("houston-block-past-rows", "keys", "datasets: [houston2013]\ndata: {partition: {block: 400}}"),
        dag("pavia-pca-past-bands", "keys", "datasets: [pavia_university]\ndata: {pca_components: 104}"),
        dag(
            "salinas-a-crop-past-scene",
            "keys",
            "datasets: [salinas_a]\ntrain: {datasets: [salinas_a], crops: [{patch: 8, tokens: 324, datasets: null}]}",
        ),
        dag("salinas-pca-fits", "keys", "datasets: [salinas]\ndata: {pca_components: 204}", "answer"),
        dag(
            "crop-names-other-scene", "keys", "train: {crops: [{patch: 8, tokens: 324, datasets: [salinas]}]}"
        ),
        dag("crop-names-typo", "keys", "train: {crops: [{patch: 8, tokens: 324, datasets: [indian_pine]}]}"),
        dag("probe-P3-heads8", "keys", "probe: {world_sizes: [1, 3]}"),
        dag("bench-P3-heads4", "keys", "bench: {world_sizes: [1, 3]}"),
        dag("estimate-P3", "keys", "probe: {estimate: {grid: {world_sizes: [3]}}}"),
        dag(
            "control-P6-heads4",
            "keys",
            "train: {recipe: tuned, plans: [tp, dchag_l], world_sizes: [1, 2, 6], control: {world_sizes: [6]}}",
        ),
        dag("parallel-heads-P-bench", "keys", "parallel: {heads: 3}"),
        dag(
            "tune-groups-past-bands",
            "keys",
            "stages: [data, tune]\ntrain: {recipe: config}\ntune: {space: {groups: [1, 512]}}",
        ),
        dag("baseline-datasets-other-scene", "keys", "baseline: {datasets: [salinas]}"),
        dag("sources-unknown-scene", "keys", "data: {sources: {indian_pine: [cache]}}"),
        dag("audit-run-slash", "keys", "audit: {accuracy_run: ../cpu-fair}"),
    ]
    # size: products inside each bound
    out += [
        dag("probe-batch-dim-huge", "size", "probe: {batch: 65536, dim: 4096, heads: 4}"),
        # 1.1 TiB modelled at depth 2: below the 4 TiB any machine holds (the job checks its own machine): an answer
        dag(
            "train-mlp-64-dim-16k", "size", "train: {model: {dim: 16384, heads: 4, mlp_ratio: 64}}", "answer"
        ),
        cmd(
            "advise-split-huge-patch",
            "size",
            "hsitp advise split --dataset indian_pines --patch 65536 --devices 4",
        ),
        cmd(
            "advise-plan-batch-huge",
            "size",
            "hsitp advise plan --dataset houston2013 --batch 65536 --embed-dim 65536 --heads 4096",
            "answer",
        ),
        cmd(
            "roofline-shape-zero",
            "size",
            "hsitp bench roofline --out {O}/r.nc "
            + C
            + " "
            + cj({"bench": {"device": "cpu", "roofline": {"shapes": [[64, 64, 64], [0, 64, 64]]}}}),
        ),
        cmd(
            "cost-scale-devices-huge",
            "size",
            "hsitp cost scale --out {O}/s.nc " + C + " " + cj({"cost": {"scale": {"devices": 1048576}}}),
            "answer",
        ),
    ]
    # option: every subcommand's options not tried before
    out += [
        cmd("advise-plan-groups-0", "option", "hsitp advise plan --dataset indian_pines --groups 0"),
        cmd("advise-plan-groups-dup", "option", "hsitp advise plan --dataset indian_pines --groups 4 4"),
        cmd("advise-plan-dtype-int8", "option", "hsitp advise plan --dataset indian_pines --dtype int8"),
        cmd("advise-plan-classes-0", "option", "hsitp advise plan --dataset indian_pines --classes 0"),
        cmd("advise-plan-bands-no-dataset", "option", "hsitp advise plan --bands 200"),
        cmd(
            "advise-plan-dataset-and-bands", "option", "hsitp advise plan --dataset indian_pines --bands 100"
        ),
        cmd("advise-plan-mlp-0", "option", "hsitp advise plan --dataset indian_pines --mlp-ratio 0"),
        cmd("advise-plan-nodes-0", "option", "hsitp advise plan --dataset indian_pines --nodes 0"),
        cmd("advise-plan-patch-past-scene", "option", "hsitp advise plan --dataset salinas_a --patch 128"),
        cmd(
            "advise-split-embed-0",
            "option",
            "hsitp advise split --dataset indian_pines --patch 8 --devices 4 --embed-dim 0",
        ),
        cmd(
            "advise-split-hardware-typo",
            "option",
            "hsitp advise split --dataset indian_pines --patch 8 --devices 4 --hardware h100",
        ),
        cmd(
            "advise-split-houston",
            "option",
            "hsitp advise split --dataset houston2013 --patch 8 --devices 3",
            "answer",
        ),
        cmd("tune-tokens-0", "option", "hsitp tune {FX}/ip.nc --plan tp --tokens 0 --out {O}/t.nc " + C),
        cmd(
            "tune-plan-dense", "option", "hsitp tune {FX}/ip.nc --plan dense --tokens 324 --out {O}/t.nc " + C
        ),
        cmd(
            "tune-partition-neg",
            "option",
            "hsitp tune {FX}/ip.nc --plan tp --tokens 324 --partition -1 --out {O}/t.nc " + C,
        ),
        cmd(
            "tune-patch-0",
            "option",
            "hsitp tune {FX}/ip.nc --plan tp --tokens 324 --patch 0 --out {O}/t.nc " + C,
        ),
        cmd(
            "train-stop-after-neg",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --stop-after -1 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-recipe-typo",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --recipe tunde --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-recipe-plan-typo",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --recipe-plan tpp --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-patch-0",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --patch 0 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-groups-0",
            "option",
            "hsitp train {FX}/ip.nc --plan dchag_l --world-size 1 --groups 0 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-seed-float",
            "option",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 1.5 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "summary-tolerance-neg",
            "option",
            "hsitp train summary " + h200 + "/train_tp_P1.nc --out {O}/s.nc --tolerance -1",
        ),
        cmd(
            "summary-level-nan",
            "option",
            "hsitp train summary " + h200 + "/train_tp_P1.nc --out {O}/s.nc --level nan",
        ),
        cmd("summary-no-out", "option", "hsitp train summary " + h200 + "/train_tp_P1.nc"),
        cmd("probe-run-world-size-neg", "option", "hsitp probe run --world-size -2 --out {O}/p.nc " + C),
        # --launch counts from 0 (bench.launches of them): the first launch, an answer
        cmd(
            "bench-run-launch-0",
            "option",
            "hsitp bench run --world-size 1 --launch 0 --out {O}/b.nc " + C,
            "answer",
        ),
        cmd("bench-shard-hardware-typo", "option", "hsitp bench shard --hardware h100 --out {O}/s.nc " + C),
        cmd("launch-nodes-0", "option", "hsitp launch --nodes 0 --ranks-per-node 1 -- hsitp data list"),
        cmd("launch-ranks-0", "option", "hsitp launch --nodes 1 --ranks-per-node 0 -- hsitp data list"),
        cmd("launch-no-command", "option", "hsitp launch --nodes 1 --ranks-per-node 1"),
        cmd(
            "launch-cpus-neg",
            "option",
            "hsitp launch --nodes 1 --ranks-per-node 1 --cpus-per-node -4 -- hsitp data list",
        ),
        cmd(
            "notebook-timeout-0",
            "option",
            "hsitp report notebook data --notebook notebooks/data.ipynb --out {O}/n.ipynb --html {O}/n.html --timeout 0",
        ),
        cmd(
            "notebook-params-bad-json",
            "option",
            "hsitp report notebook data --notebook notebooks/data.ipynb --params-json '{oops' --out {O}/n.ipynb --html {O}/n.html",
        ),
        cmd(
            "notebook-stage-typo",
            "option",
            "hsitp report notebook dta --notebook notebooks/data.ipynb --out {O}/n.ipynb --html {O}/n.html",
        ),
        cmd(
            "reproduce-budget-0",
            "option",
            "hsitp audit reproduce --reference "
            + ref
            + " --seed 0 --budget-min 0 --out {O}/r.json --dry-run",
        ),
        cmd(
            "reproduce-budget-nan",
            "option",
            "hsitp audit reproduce --reference "
            + ref
            + " --seed 0 --budget-min nan --out {O}/r.json --dry-run",
        ),
        cmd(
            "reproduce-run-unknown",
            "option",
            "hsitp audit reproduce --run cpu-nowhere --seed 0 --budget-min 5 --out {O}/r.json --dry-run",
        ),
        cmd(
            "reproduce-run-and-reference",
            "option",
            "hsitp audit reproduce --run cpu-fair --reference " + ref + " --seed 0 --budget-min 5 --dry-run",
        ),
        cmd(
            "report-jobs-run-unknown",
            "option",
            "hsitp report jobs nowhere-run --logs {FX}/emptyref --results {FX}/emptyref",
        ),
        cmd("data-list-unknown-option", "option", "hsitp data list --jsn"),
    ]
    # file: handed in of the wrong kind, missing, a folder, a reference missing a file, a wrong sha256, claims
    out += [
        cmd(
            "summary-of-probe-file", "file", "hsitp train summary " + ref + "/probe/memory.nc --out {O}/s.nc"
        ),
        cmd("summary-missing-file", "file", "hsitp train summary {FX}/nowhere.nc --out {O}/s.nc"),
        cmd(
            "summary-record-twice",
            "file",
            "hsitp train summary " + h200 + "/train_tp_P1.nc " + h200 + "/train_tp_P1.nc --out {O}/s.nc",
        ),
        cmd("summary-out-is-folder", "file", "hsitp train summary " + h200 + "/train_tp_P1.nc --out {O}"),
        cmd(
            "probe-merge-missing",
            "file",
            "hsitp probe merge {FX}/nowhere.nc --memory-out {O}/m.nc --throughput-out {O}/t.nc",
        ),
        cmd(
            "probe-merge-merged-file",
            "file",
            "hsitp probe merge " + ref + "/probe/memory.nc --memory-out {O}/m.nc --throughput-out {O}/t.nc",
        ),
        cmd(
            "probe-merge-same-P-twice",
            "file",
            "hsitp probe merge "
            + h200
            + "/probe_P1.nc "
            + h200
            + "/probe_P1.nc --memory-out {O}/m.nc --throughput-out {O}/t.nc",
        ),
        cmd(
            "probe-merge-out-on-input",
            "file",
            "hsitp probe merge {FX}/probe_P1.nc --memory-out {FX}/probe_P1.nc --throughput-out {O}/t.nc",
        ),
        cmd("bench-merge-out-on-input", "file", "hsitp bench merge {FX}/ip.nc --out {FX}/ip.nc"),
        cmd("bench-merge-folder", "file", "hsitp bench merge {FX} --out {O}/m.nc"),
        cmd(
            "bench-calibrate-data-file",
            "file",
            "hsitp bench calibrate --microbench {FX}/ip.nc --out {O}/c.nc " + C,
        ),
        cmd(
            "bench-calibrate-missing",
            "file",
            "hsitp bench calibrate --microbench {FX}/nowhere.nc --out {O}/c.nc " + C,
        ),
        cmd(
            "bench-compare-calibration-probe",
            "file",
            "hsitp bench compare --microbench {FX}/ip.nc --calibration "
            + ref
            + "/probe/memory.nc --out {O}/c.nc "
            + C,
        ),
        cmd(
            "tune-data-missing",
            "file",
            "hsitp tune {FX}/nowhere.nc --plan tp --protocol random --tokens 324 --out {O}/t.nc " + C,
        ),
        cmd(
            "tune-data-probe-file",
            "file",
            "hsitp tune "
            + ref
            + "/probe/memory.nc --plan tp --protocol random --tokens 324 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "train-data-probe-file",
            "file",
            "hsitp train "
            + ref
            + "/probe/memory.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {O}/t.nc "
            + C,
        ),
        cmd(
            "summary-baseline-missing",
            "file",
            "hsitp train summary " + h200 + "/train_tp_P1.nc --baseline {FX}/nowhere.nc --out {O}/s.nc",
        ),
        cmd(
            "train-out-on-data",
            "file",
            "hsitp train {FX}/ip.nc --plan tp --world-size 1 --tokens 324 --protocol random --seed 0 --out {FX}/ip.nc "
            + C,
        ),
        cmd(
            "baseline-data-missing",
            "file",
            "hsitp baseline indian_pines --protocol random --data {FX}/nowhere.nc --out {O}/b.nc " + C,
        ),
        cmd(
            "baseline-data-summary-kind",
            "file",
            "hsitp baseline indian_pines --protocol random --data results/reference/smoke/data/indian_pines_summary.nc --out {O}/b.nc "
            + C,
        ),
        cmd(
            "prepare-manifest-folder",
            "file",
            "hsitp data prepare indian_pines --manifest {FX} --out {O}/ip.nc " + C,
        ),
        cmd(
            "prepare-manifest-bad-sha",
            "file",
            "hsitp data prepare indian_pines --manifest {FX}/fetch_badsha.json --out {O}/ip.nc " + C,
        ),
        cmd(
            "prepare-out-is-folder",
            "file",
            "hsitp data prepare indian_pines --manifest {FX}/fetch.json --out {O} " + C,
        ),
        cmd("config-file-missing", "file", "hsitp data list --config {FX}/nowhere.yaml"),
        cmd("config-file-folder", "file", "hsitp data list --config {FX}"),
        cmd("config-file-empty", "file", "hsitp data list --config {FX}/empty.yaml"),
        cmd("config-path-with-space", "file", "hsitp data list --config '{FX}/with space/c.yaml'", "answer"),
        cmd("config-json-null", "file", "hsitp data list --config-json null"),
        cmd("config-json-string", "file", "hsitp data list --config-json '\"smoke\"'"),
        cmd(
            "notebook-missing",
            "file",
            "hsitp report notebook data --notebook notebooks/nowhere.ipynb --out {O}/n.ipynb --html {O}/n.html",
        ),
        cmd("check-figures-missing-dir", "file", "hsitp report check-figures {FX}/nowhere"),
        cmd("check-metadata-a-file", "file", "hsitp report check-metadata {FX}/ip.nc"),
        cmd(
            "report-reference-run-missing",
            "file",
            "hsitp report reference --run-dir {FX}/nowhere --out {O}/ref",
        ),
        cmd(
            "report-measured-no-manifest",
            "file",
            "hsitp report measured --reference {FX}/ref_nomanifest --check --doc {FX}/measured.md",
        ),
        cmd(
            "report-measured-doc-missing",
            "file",
            "hsitp report measured --reference " + ref + " --check --doc {FX}/nowhere.md",
        ),
        cmd(
            "headline-ref-no-summary",
            "file",
            "hsitp report headline --reference {FX}/ref_nosummary --out {O}/h",
        ),
        cmd(
            "audit-claims-run-missing",
            "file",
            "hsitp audit claims --run-dir {FX}/nowhere --out {O}/c.csv " + C,
        ),
        cmd(
            "audit-claims-run-empty",
            "file",
            "hsitp audit claims --run-dir {FX}/emptyref --out {O}/c.csv " + C,
        ),
        cmd(
            "audit-check-claims-bad-verdict",
            "file",
            "hsitp audit check --run-dir results/reference/smoke --claims {FX}/claims_bad.csv --out {O}/r.md",
        ),
        cmd(
            "audit-check-claims-truncated",
            "file",
            "hsitp audit check --run-dir results/reference/smoke --claims {FX}/claims_trunc.csv --out {O}/r.md",
        ),
        cmd(
            "audit-check-claims-empty",
            "file",
            "hsitp audit check --run-dir results/reference/smoke --claims {FX}/empty.csv --out {O}/r.md",
        ),
        # a manifest's sha256 records what was collected; references are compared by value, never by file hash
        # (results/reference/README.md): an edited reference is checked and noted "not as collected", an answer
        cmd(
            "audit-check-ref-bad-sha",
            "file",
            "hsitp audit check --run-dir " + ref + " --reference {FX}/ref_badsha --out {O}/r.md",
            "answer",
        ),
        cmd("audit-verdict-run-missing", "file", "hsitp audit verdict --run-dir {FX}/nowhere"),
        cmd(
            "reproduce-ref-no-manifest",
            "file",
            "hsitp audit reproduce --reference {FX}/ref_nomanifest --seed 0 --budget-min 5 --out {O}/r.json --dry-run",
        ),
        cmd(
            "reproduce-ref-bad-sha",
            "file",
            "hsitp audit reproduce --reference {FX}/ref_badsha --seed 0 --budget-min 5 --out {O}/r.json --dry-run",
            "answer",
        ),
        cmd(
            "reproduce-data-missing",
            "file",
            "hsitp audit reproduce --reference "
            + ref
            + " --seed 0 --budget-min 5 --data {FX}/nowhere.nc --out {O}/r.json --dry-run",
        ),
        cmd(
            "reproduce-out-in-missing-folder",
            "file",
            "hsitp audit reproduce --reference "
            + ref
            + " --seed 0 --budget-min 5 --out {O}/no/such/r.json --dry-run",
            "answer",
        ),
        cmd("cost-rho-out-is-folder", "file", "hsitp cost rho --out {O} " + C),
    ]
    # value: the wrong type where a number, list or section goes; unknown keys at every level; empty sections
    out += [
        dag("epochs-true", "value", "train: {epochs: true}"),
        dag("seed-true", "value", "seed: true"),
        dag("lr-yes", "value", "train: {lr: yes}"),
        dag("lr-exp-no-dot", "value", "train: {lr: 1e-3}"),  # YAML 1.1 reads 1e-3 as text
        dag("lr-as-list", "value", "train: {lr: [0.001]}"),
        dag("seeds-scalar", "value", "train: {seeds: 0}"),
        dag("batch-zero", "value", "train: {batch: 0}"),
        dag("batch-string-num", "value", "train: {batch: '32'}"),
        dag("train-empty-section", "value", "train: {}", "answer"),
        dag("unknown-deep-key", "value", "train: {model: {dimm: 64}}"),
        dag(
            "unknown-key-in-list-entry",
            "value",
            "train: {crops: [{patch: 8, tokens: 324, datasets: null, stride: 2}]}",
        ),
        dag("unknown-bench-shard-key", "value", "bench: {shard: {hardwares: h100}}"),
        dag("plans-dup", "value", "train: {plans: [tp, tp]}"),
        dag("stages-dup", "value", "stages: [data, data]"),
        dag("datasets-dup", "value", "datasets: [indian_pines, indian_pines]"),
        dag("datasets-scalar", "value", "datasets: indian_pines"),
        dag("run-with-space", "value", "run: my run"),
        dag("clip-quantiles-reversed", "value", "data: {clip_quantiles: [0.99, 0.01]}"),
        dag("fraction-nan", "value", "data: {partition: {train_fraction: .nan}}"),
        dag("timeout-zero", "value", "parallel: {timeout_s: 0}"),
        dag("backend-typo", "value", "parallel: {backend: ncll}"),
        dag("probe-dtype-typo", "value", "probe: {dtype: bf16}"),
        dag("ema-decay-1", "value", "train: {ema: {decay: 1.0}}"),
        dag("resources-mem-neg", "value", "resources: {train: {mem_mb_per_rank: -1}}"),
        cmd("config-json-true-for-int", "value", "hsitp data list " + cj({"seed": True})),
        cmd("config-json-string-for-int", "value", "hsitp data list " + cj({"seed": "1"})),
        cmd(
            "config-json-unknown-deep",
            "value",
            "hsitp data list " + cj({"data": {"partition": {"blocks": 4}}}),
        ),
        cmd("config-json-empty-object", "value", "hsitp data list --config-json '{}'", "answer"),
    ]
    return [{**c, "round": 2} for c in out]


def build_fixtures(tree: Path, fx: Path, env: dict) -> None:
    """Indian Pines prepared by the checkout, and the damaged files derived from it."""
    fx.mkdir(parents=True, exist_ok=True)
    if not (fx / "ip.nc").exists() or not (tree / "resources/raw/indian_pines").exists():
        for line in (f"hsitp data fetch indian_pines --out {fx}/fetch.json {C}",
                     f"hsitp data prepare indian_pines --manifest {fx}/fetch.json --out {fx}/ip.nc {C}"):  # fmt: skip
            subprocess.run(["bash", "-c", line], cwd=tree, env=env, check=True, capture_output=True)
    data = (fx / "ip.nc").read_bytes()
    (fx / "ip_trunc.nc").write_bytes(data[: len(data) // 3])
    (fx / "empty.nc").write_bytes(b"")
    (fx / "text.nc").write_text("hello\n")
    manifest = (fx / "fetch.json").read_text()
    (fx / "fetch_trunc.json").write_text(manifest[: len(manifest) // 2])
    (fx / "empty.json").write_text("")
    (fx / "list.json").write_text("[1, 2]\n")
    (fx / "trunc.yaml").write_text("train: {epochs: 1\n")
    (fx / "dup.yaml").write_text("seed: 1\nseed: 2\n")
    (fx / "emptyref").mkdir(exist_ok=True)
    ref = fx / "ref_trunc"
    if ref.exists():
        shutil.rmtree(ref)
    shutil.copytree(tree / "results/reference/cpu-places", ref)
    summary = ref / "train/summary.nc"
    summary.write_bytes(summary.read_bytes()[:2000])
    shutil.copy(tree / "docs/measured.md", fx / "measured.md")
    round2_fixtures(tree, fx, manifest)


def round2_fixtures(tree: Path, fx: Path, manifest: str) -> None:
    """The second round's damaged files: a wrong sha256, a reference missing a file, claims with a bad entry."""
    (fx / "fetch_badsha.json").write_text(manifest.replace('"sha256": "8', '"sha256": "0', 1))
    (fx / "empty.yaml").write_text("")
    (fx / "empty.csv").write_text("")
    (fx / "with space").mkdir(exist_ok=True)
    (fx / "with space/c.yaml").write_text("seed: 3\n")
    shutil.copy(tree / "results/reference/h200-check/probe_P1.nc", fx / "probe_P1.nc")
    for name, drop in (("ref_nomanifest", "manifest.json"), ("ref_nosummary", "train/summary.nc"),
                       ("ref_badsha", None)):  # fmt: skip
        ref = fx / name
        shutil.rmtree(ref, ignore_errors=True)
        shutil.copytree(tree / "results/reference/cpu-places", ref)
        if drop:
            (ref / drop).unlink()
    meta = json.loads((fx / "ref_badsha/manifest.json").read_text())
    first = next(iter(meta["files"].values()))
    first["sha256"] = "0" * 64
    (fx / "ref_badsha/manifest.json").write_text(json.dumps(meta, indent=1))
    claims = (tree / "results/reference/smoke/paper_claims.csv").read_text().splitlines(keepends=True)
    (fx / "claims_bad.csv").write_text(
        claims[0] + claims[1].replace(",conditional,", ",maybe,") + "".join(claims[2:])
    )
    (fx / "claims_trunc.csv").write_text("".join(claims)[:700])


def categorise(case: dict, rc: int, out: str, err: str, written: list[str]) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(BANNER)]
    if rc in (124, 137):
        return "hangs"
    if "Traceback" in out + err:
        return "traceback"
    if rc == 0:
        return "answered" if case["expect"] == "answer" else "accepted silently"
    if rc == 2 and len(lines) == 1 and lines[0].startswith("hsitp") and not written:
        return "clear"
    return "unclear refusal"


def run(case: dict, tree: Path, work: Path, env: dict, timeout: int) -> dict:
    cdir = work / "cases" / case["id"]
    shutil.rmtree(cdir, ignore_errors=True)
    (cdir / "out").mkdir(parents=True)
    overlay = ""
    if case["overlay"] is not None:
        overlay = str(cdir / "overlay.yaml")
        Path(overlay).write_text(case["overlay"] + "\n")
    line = (
        case["cmd"]
        .replace("{O}", str(cdir / "out"))
        .replace("{OV}", overlay)
        .replace("{FX}", str(work / "fx"))
    )
    t0 = time.time()
    try:
        p = subprocess.run(
            ["bash", "-c", line], cwd=tree, env=env, capture_output=True, text=True, timeout=timeout
        )
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = 124, str(exc.stdout or ""), str(exc.stderr or "")
    written = sorted(str(x.relative_to(cdir / "out")) for x in (cdir / "out").rglob("*"))
    cat = categorise(case, rc, out, err, written)
    tail = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(BANNER)][-2:]
    return {**case, "rc": rc, "secs": round(time.time() - t0, 1), "category": cat, "stderr": tail,
            "written": written[:5]}  # fmt: skip


def table(records: list[dict]) -> str:
    cats = ["clear", "answered", "traceback", "accepted silently", "hangs", "unclear refusal"]
    by = collections.defaultdict(collections.Counter)
    for r in records:
        by[r["cls"]][r["category"]] += 1
    rows = ["| class | " + " | ".join(cats) + " | total |", "|---" * (len(cats) + 2) + "|"]
    total = collections.Counter()
    for cls, counts in by.items():
        total.update(counts)
        rows.append(f"| {cls} | " + " | ".join(str(counts[c]) for c in cats) + f" | {sum(counts.values())} |")
    rows.append("| all | " + " | ".join(str(total[c]) for c in cats) + f" | {sum(total.values())} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=Path("."), help="the checkout to try (its src/ is imported)")
    ap.add_argument("--work", type=Path, required=True, help="fixtures, per-case folders and results.jsonl")
    ap.add_argument("--only", nargs="*", default=[], help="case ids to run (default: all)")
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as hanging")
    ap.add_argument("--round", type=int, choices=(1, 2), help="only this round's cases (default: both)")
    args = ap.parse_args()
    tree = args.tree.resolve()
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": "1"}
    build_fixtures(tree, args.work / "fx", env)
    every = [{**c, "round": 1} for c in cases()] + round2()
    todo = [c for c in every if (not args.only or c["id"] in args.only) and args.round in (None, c["round"])]
    records = []
    with (args.work / "results.jsonl").open("w") as f:
        for i, case in enumerate(todo, 1):
            rec = run(case, tree, args.work, env, args.timeout)
            records.append(rec)
            f.write(json.dumps(rec) + "\n")
            print(
                f"[{i}/{len(todo)}] {rec['category']:17} {case['id']}: {' / '.join(rec['stderr'])[:200]}",
                flush=True,
            )
    for rnd in sorted({r["round"] for r in records}):
        print(f"round {rnd}:\n" + table([r for r in records if r["round"] == rnd]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
