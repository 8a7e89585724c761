#!/usr/bin/env bash
# Run the CPU microbenchmarks (config/bench-cpu.yaml) RUNS times (default 3) on fresh outputs, then print each run's held-out error of the
# calibrated models and the run-to-run spread of the measured CCR per point (python -m hsitp.bench.repeat).
#
#   benchmarks/repeat_bench.sh [RUNS] [PREFIX]      # runs results/PREFIX1 ... results/PREFIXN (default: repeat)
#
# Each run is `snakemake --config run=PREFIXk` on config/bench-cpu.yaml: its own results/ and logs/ folders, deleted
# first so every run times everything afresh; Snakemake's own output goes to logs/PREFIXk/repeat_bench_snakemake.log.
# About 8 minutes per launch on 2 cores (config/bench-cpu.yaml: 3 launches per run); nothing else should run beside it (the numbers are what the machine gives
# while it runs, and the output says which machine and how loaded it was).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
prefix=${2:-repeat}
cores=$(nproc)

echo "== repeat_bench: ${runs} runs of the bench-cpu sweep on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${cores} cores"
dirs=()
for k in $(seq 1 "$runs"); do
    run="${prefix}${k}"
    rm -rf "results/${run}/bench" "logs/${run}/bench"
    echo "== ${run}: started $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)"
    start=$(date +%s)
    mkdir -p "logs/${run}"
    if ! snakemake --cores "$cores" --configfile=config/bench-cpu.yaml --config "run=${run}" \
        -- "results/${run}/bench/model_vs_measured.nc" > "logs/${run}/repeat_bench_snakemake.log" 2>&1; then
        tail -n 40 "logs/${run}/repeat_bench_snakemake.log"
        exit 1
    fi
    echo "== ${run}: $(($(date +%s) - start)) s, load average $(cut -d' ' -f1-3 /proc/loadavg); log:"
    sed -n 's/^INFO hsitp.bench.compare: /   /p' "logs/${run}/bench/compare.log" | grep -v '^   \(read\|wrote\) '
    dirs+=("results/${run}")
done
echo "== run-to-run"
python -m hsitp.bench.repeat "${dirs[@]}"
