#!/usr/bin/env bash
# One-GPU check, meant to finish within minutes on one H200 (never run yet: no GPU was lent): writes to OUTDIR
#   shard.nc     half-measured CCR: rank 0's shard of every bench op timed for P in bench.shard.world_sizes on this
#                GPU (collectives as same-shape no-ops), communication modelled from bench.shard.hardware
#   roofline.nc  GEMM roofline: achieved FLOP/s of bench.roofline.shapes vs the measured compute and memory roofs
#   train_tp_P1.nc    one training epoch (20 steps) of the tp plan at P = 1, paper-size model, bf16 autocast
#   model_check.json  one forward + backward of every model plan at P = 1 under bf16 autocast (benchmarks/model_check.py)
#   probe_P1.nc       the memory probe at P = 1 (dense plan of probe.L x probe.N, CUDA allocator stats)
# Usage: benchmarks/gpu_check.sh OUTDIR [extra hsitp config args, e.g. --config-json '{"bench": {...}}']
# Config: config/config.yaml, then benchmarks/gpu_check.yaml (device cuda, fewer repeats), then the extra args.
set -euo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: $0 OUTDIR [--config FILE | --config-json JSON ...]" >&2
    exit 2
fi
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
shift
cd "$(dirname "$0")/.."
CFG=(--config config/config.yaml --config benchmarks/gpu_check.yaml "$@")
start=$SECONDS
echo "== roofline -> $OUT/roofline.nc"
hsitp bench roofline --out "$OUT/roofline.nc" "${CFG[@]}"
echo "== shard mode -> $OUT/shard.nc"
hsitp bench shard --out "$OUT/shard.nc" "${CFG[@]}"
echo "== model plans at P = 1, bf16 autocast -> $OUT/model_check.json"
python benchmarks/model_check.py --device cuda --json "$OUT/model_check.json"
echo "== memory probe at P = 1 on this GPU -> $OUT/probe_P1.nc"
hsitp probe run --world-size 1 --out "$OUT/probe_P1.nc" "${CFG[@]}" --config-json '{"probe": {"device": "cuda"}}'
echo "== one training epoch of tp at P = 1 on this GPU (bf16 autocast) -> $OUT/train_tp_P1.nc"
hsitp data fetch indian_pines "${CFG[@]}" && hsitp data prepare indian_pines --out "$OUT/indian_pines.nc" "${CFG[@]}"
hsitp train "$OUT/indian_pines.nc" --plan tp --tokens 324 --world-size 1 --protocol random --seed 0 --out "$OUT/train_tp_P1.nc" "${CFG[@]}" --config-json '{"train": {"epochs": 1, "steps_per_epoch": 20, "device": "cuda", "protocols": ["random"]}}'
echo "== done in $((SECONDS - start)) s: $OUT/roofline.nc $OUT/shard.nc $OUT/model_check.json $OUT/probe_P1.nc $OUT/train_tp_P1.nc"
