#!/usr/bin/env bash
# CI's SLURM part (called by .ci/run after the tests; root, Debian's SLURM and munge installed, venv active):
# bring up the two-node SLURM of .ci/slurm.sh, run the workflow through `snakemake --cores all --profile slurm`
# exactly as a user would, check what it wrote, exercise the failure paths, and stop the daemons on any exit.
#
#  1. Subset of the smoke pipeline (run `slurmci`: config/smoke.yaml + the tiny sweep of
#     tests/test_bench_snakemake.py at P = 2 only): data_fetch (local rule) -> data_prepare; cost_table rho;
#     bench_run at P = 2 (torchrun --standalone on one exclusive node) -> bench_merge. P = 1, calibrate and
#     compare are left to the tests: more jobs add status polls (each SLURM job costs ~15-40 s of polling and
#     workflow parsing here), not coverage of the cluster path.
#  2. bench_run at P = 2 over two nodes (run `slurm2n`, resources.bench_run.ranks_per_node: 1, a one-op sweep):
#     srun, one torchrun per node, gloo between the two network namespaces.
#  3. Planted rules (.ci/slurm_planted.smk), one snakemake call: a rule that fails (exit status nonzero, the
#     rule's log and the SLURM job log named), one that finishes, and one that runs until it is scancel'ed
#     (reported as failed); then the rerun, which runs only the cancelled job.
# Each snakemake call has a hard timeout, so a stuck status loop cannot hang CI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIMIT=${HSITP_SLURM_RUN_LIMIT:-420}
T0=$SECONDS

cleanup() {
  local rc=$?
  "$ROOT/.ci/slurm.sh" down || true
  echo "== SLURM part: $((SECONDS - T0)) s in all, exit status $rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM # a killed CI run still stops the daemons (through the EXIT trap)

step() { echo "== slurm: $* (at $((SECONDS - T0)) s)"; }
fail() {
  echo "slurm smoke FAILED: $* (logs and outputs kept in $WORK)" >&2
  exit 1
}

WORK=$(mktemp -d /tmp/hsitp-slurm-ci.XXXXXX)
"$ROOT/.ci/slurm.sh" up

cp -r "$ROOT"/{Snakefile,workflow,config,envs,slurm} "$ROOT/.ci/slurm_planted.smk" "$WORK"/
cd "$WORK"
cat >config/slurm_ci.yaml <<'EOF'
run: slurmci
bench:
  world_sizes: [2]
  ops: [mlp, attn_token, layernorm_sharded, agg_dchag_l]
  N: [16, 36]
  D: [16]
  L: [4]
  warmup: 1
  repeats: 3
  passes: 1
  min_region_s: 0.0
  collectives: {sizes_bytes: [4096, 1048576, 4194304, 16777216], warmup: 1, repeats: 6}
resources:
  bench_run: {mem_mb_per_rank: 1000, runtime: 10}
EOF
cat >config/two_nodes.yaml <<'EOF'
run: slurm2n
bench:
  ops: [mlp]
  N: [16]
  repeats: 2
  collectives: {names: [all_reduce], sizes_bytes: [4096, 65536, 1048576], repeats: 2}
resources:
  bench_run: {ranks_per_node: 1}
EOF

# The user's command, plus the CI overlay of the profile: first status check after 2 s, not 40.
SNAKE=(timeout -k 10 "$LIMIT" snakemake --cores all --profile slurm
  --slurm-init-seconds-before-status-checks 2 --seconds-between-status-checks 3)
CFG=(--configfile config/smoke.yaml config/slurm_ci.yaml)

run_snake() { # logfile args...: run, tee to the log, return snakemake's status
  local out=$1
  shift
  set +e
  "${SNAKE[@]}" "$@" >"$out" 2>&1
  local rc=$?
  set -e
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || {
    tail -n 40 "$out"
    fail "snakemake timed out after ${LIMIT}s ($*)"
  }
  return "$rc"
}

step "1. smoke subset through --profile slurm"
TARGETS=(results/slurmci/data/indian_pines.nc results/slurmci/cost/rho.nc results/slurmci/bench/microbench.nc)
run_snake main.log "${CFG[@]}" -- "${TARGETS[@]}" || {
  tail -n 60 main.log
  fail "the smoke subset did not complete"
}
python - <<'EOF'
import re
from pathlib import Path

from hsitp.io import json_attr, read_netcdf

log = Path("main.log").read_text()
submitted = re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)", log)
# data_prepare, cost_table rho, bench_run P=2, bench_merge: four SLURM jobs; data_fetch stays local
assert len(submitted) == 4, submitted
assert "localrule data_fetch" in log, "data_fetch should run on the submit host"
for _, slurm_log in submitted:
    assert Path(slurm_log.rstrip(").")).is_file(), slurm_log
assert read_netcdf("results/slurmci/data/indian_pines.nc").attrs["kind"] == "dataset"
assert read_netcdf("results/slurmci/cost/rho.nc", kind="cost_rho").sizes
mb = read_netcdf("results/slurmci/bench/microbench.nc", kind="microbench")
assert mb["P"].values.tolist() == [2] and mb.attrs["backend"] == "gloo", (mb["P"].values, mb.attrs["backend"])
assert json_attr(mb, "world_sizes") == [2]
assert (mb["time_median"].sel(mode="comm", P=2, dtype="float32") > 0).all()
p2 = Path("logs/slurmci/bench/run_P2.log").read_text()
assert "bench P=2" in p2, p2[-2000:]
print(f"smoke subset OK: SLURM jobs {[j for j, _ in submitted]}, microbench P = {mb['P'].values.tolist()}")
EOF

step "2. bench_run P=2 over two nodes (srun + torchrun per node)"
run_snake two_nodes.log "${CFG[@]}" config/two_nodes.yaml -- results/slurm2n/bench/partial/microbench_P2.nc || {
  tail -n 60 two_nodes.log
  cat logs/slurm2n/bench/run_P2.log || true
  fail "the two-node launch did not complete"
}
python - <<'EOF'
from pathlib import Path

from hsitp.io import read_netcdf

log = Path("logs/slurm2n/bench/run_P2.log").read_text()
for node, name in ((0, "ci1"), (1, "ci2")):
    line = f"hsitp launch: node {node} of 2 (" 
    assert line in log and f"SLURM node {name})" in log, log[:3000]
assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in log
mb = read_netcdf("results/slurm2n/bench/partial/microbench_P2.nc", kind="microbench")
assert mb["P"].values.tolist() == [2] and mb.attrs["backend"] == "gloo"
print("two-node launch OK: one torchrun on ci1 (node 0) and one on ci2 (node 1), one P = 2 world")
EOF
grep -h "hsitp launch" logs/slurm2n/bench/run_P2.log | cut -c1-160

step "3. planted rules: one fails, one finishes, one is scancel'ed; then the rerun"
set +e
"${SNAKE[@]}" -s slurm_planted.smk "${CFG[@]}" -- results/planted/failure.txt results/planted/quick.txt \
  results/planted/sleep.txt >planted.log 2>&1 &
SNAKE_PID=$!
set -e
job=""
for _ in $(seq 1 150); do
  sleep 2
  # cancel once snakemake has registered the quick job as finished and the long one runs
  if grep -q "(Rule: planted_quick)" planted.log; then
    job=$(squeue -h -t RUNNING -o '%i %k' | awk '/rule_planted_sleep/ {print $1}')
    [ -n "$job" ] && break
  fi
  kill -0 "$SNAKE_PID" 2>/dev/null || break
done
[ -n "$job" ] || {
  tail -n 40 planted.log
  fail "the planted long job never ran"
}
scancel "$job"
echo "scancel $job"
set +e
wait "$SNAKE_PID"
rc=$?
set -e
# what the user sees: the error blocks of the submitting snakemake (status, rule log, SLURM log) and the
# failed rule's log, which the profile's show-failed-logs prints
grep -E "^Error in rule|^    message: SLURM|^    log: .*logs/slurm/|^Logfile logs/|^planted failure" planted.log |
  cut -c1-220 | uniq
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "snakemake exited with status $rc"
grep -q "Error in rule planted_failure" planted.log || fail "no 'Error in rule planted_failure'"
grep -q "SLURM status is: 'FAILED'" planted.log || fail "the failed job's SLURM status FAILED is not shown"
grep -Eq "log: logs/planted/failure.log, \S*logs/slurm/rule_planted_failure/[0-9]+\.log" planted.log ||
  fail "the failed rule's log and its SLURM job log are not both named"
grep -q "^planted failure: this rule exits with status 3" planted.log || fail "the failed rule's log is not shown"
grep -q "SLURM status is: 'CANCELLED'" planted.log || fail "the cancelled job is not reported as CANCELLED"
[ -s results/planted/quick.txt ] || fail "the finished job's output is gone"
echo "failure and scancel OK: snakemake exit status $rc"
HSITP_PLANTED_SLEEP=1 run_snake rerun.log -s slurm_planted.smk "${CFG[@]}" -- results/planted/quick.txt \
  results/planted/sleep.txt || {
  tail -n 40 rerun.log
  fail "the rerun after scancel did not complete"
}
grep -q "^rule planted_sleep" rerun.log || fail "the rerun did not run the cancelled job"
if grep -q "^rule planted_quick" rerun.log; then fail "the rerun rebuilt the finished job"; fi
[ -s results/planted/sleep.txt ] || fail "the rerun wrote no output"
echo "rerun OK: only planted_sleep ran again"

cd /
rm -rf "$WORK"
step "done"
