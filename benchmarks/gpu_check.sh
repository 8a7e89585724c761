#!/usr/bin/env bash
# One-GPU check, an estimated 2-3 minutes on one H200 (from its steps' times on 2026-12-04; docs/measured.md,
# One GPU): writes to OUTDIR
#   shard.nc     half-measured CCR: rank 0's shard of every bench op timed for P in bench.shard.world_sizes on this
#                GPU (collectives as same-shape no-ops), communication modelled from bench.shard.hardware
#   roofline.nc  GEMM roofline: achieved FLOP/s of bench.roofline.shapes vs the measured compute and memory roofs
#   train_tp_P1.nc    one training epoch (20 steps) of the tp plan at P = 1, paper-size model, bf16 autocast
#   model_check.json  one forward + backward of every model plan at P = 1 under bf16 autocast (benchmarks/model_check.py)
#   probe_P1.nc       the memory probe at P = 1 (dense plan of probe.L x probe.N, CUDA allocator stats)
#   kernels_P1.nc     tp at P = 1 under both single-query attention kernels (exact, sdpa): peak and tokens/s timed
#                     in alternation (benchmarks/kernel_check.py); CUDA's "auto" stays sdpa until this has run
# Usage: benchmarks/gpu_check.sh OUTDIR [extra hsitp config args, e.g. --config-json '{"bench": {...}}']
# Config: config/config.yaml, then benchmarks/gpu_check.yaml (device cuda, fewer repeats), then the extra args.
# Environment: HSITP (the command, default `hsitp`; `python3 -m hsitp` where the package is only on PYTHONPATH),
#   SCENE (a prepared indian_pines.nc: skips fetch + prepare on a machine with no network).
# Each step runs even when an earlier one failed (one lease, every answer it can give); exit 1 if any failed.
set -uo pipefail
if [[ $# -lt 1 ]]; then
    echo "usage: $0 OUTDIR [--config FILE | --config-json JSON ...]" >&2
    exit 2
fi
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
shift
cd "$(dirname "$0")/.."
CFG=(--config config/config.yaml --config benchmarks/gpu_check.yaml "$@")
read -r -a HSITP_CMD <<<"${HSITP:-hsitp}"
PYTHON="${PYTHON:-python3}"
start=$SECONDS
failed=()
step() {  # step NAME COMMAND...: runs it, prints its wall time, remembers a failure and goes on
    local name=$1 t0=$SECONDS
    shift
    echo "== $name"
    if "$@"; then
        echo "== $name: ok in $((SECONDS - t0)) s"
    else
        echo "== $name: FAILED (exit $?) after $((SECONDS - t0)) s"
        failed+=("$name")
    fi
}
prepare_scene() {
    "${HSITP_CMD[@]}" data fetch indian_pines "${CFG[@]}" &&
        "${HSITP_CMD[@]}" data prepare indian_pines --out "$OUT/indian_pines.nc" "${CFG[@]}"
}
step "model plans at P = 1, bf16 autocast -> $OUT/model_check.json" \
    "$PYTHON" benchmarks/model_check.py --device cuda --json "$OUT/model_check.json"
step "memory probe at P = 1 on this GPU -> $OUT/probe_P1.nc" \
    "${HSITP_CMD[@]}" probe run --world-size 1 --out "$OUT/probe_P1.nc" "${CFG[@]}" \
    --config-json '{"probe": {"device": "cuda"}}'
step "both attention kernels, tp at P = 1 on this GPU -> $OUT/kernels_P1.nc" \
    "$PYTHON" -m hsitp.torchrun --standalone --nproc-per-node 1 benchmarks/kernel_check.py \
    --configfile config/config.yaml benchmarks/gpu_check.yaml --device cuda --out "$OUT/kernels_P1.nc"
scene="${SCENE:-}"
if [[ -z "$scene" ]]; then
    step "fetch + prepare indian_pines -> $OUT/indian_pines.nc" prepare_scene
    scene="$OUT/indian_pines.nc"
fi
step "one training epoch of tp at P = 1 on this GPU (bf16 autocast) -> $OUT/train_tp_P1.nc" \
    "${HSITP_CMD[@]}" train "$scene" --plan tp --tokens 324 --world-size 1 --protocol random --seed 0 \
    --out "$OUT/train_tp_P1.nc" "${CFG[@]}" \
    --config-json '{"train": {"epochs": 1, "steps_per_epoch": 20, "device": "cuda", "protocols": ["random"]}}'
# the GEMM roofline and shard mode last: the longest steps, so a short lease still gets the correctness checks
step "roofline -> $OUT/roofline.nc" "${HSITP_CMD[@]}" bench roofline --out "$OUT/roofline.nc" "${CFG[@]}"
step "shard mode -> $OUT/shard.nc" "${HSITP_CMD[@]}" bench shard --out "$OUT/shard.nc" "${CFG[@]}"
echo "== done in $((SECONDS - start)) s; ${#failed[@]} step(s) failed${failed[*]:+: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]
