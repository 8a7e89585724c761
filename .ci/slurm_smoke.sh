#!/usr/bin/env bash
# CI's SLURM part (called by .ci/run after the tests; root, Debian's SLURM and munge installed, venv active):
# bring up the two-node SLURM of .ci/slurm.sh, run the workflow through `snakemake --cores all --profile slurm`
# exactly as a user would, check what it wrote, exercise the failure paths, and stop the daemons on any exit.
#
#  1. A job too large for any node (config overlay: resources.baseline.mem_mb 100000 on nodes of this machine's
#     memory): the workflow must stop before submitting anything, within 60 s, with one line naming
#     resources.baseline.mem_mb and the node's memory (hsitp.cluster, the onstart hook in workflow/rules/hooks.smk).
#     (Not CPUs: Snakemake caps a single-process rule's threads at the submit host's --cores before SLURM sees
#     them; a rank rule's cpus_per_task is not capped.)
#  2. The whole smoke DAG (config/smoke.yaml + a CI overlay: resources.probe_run.ranks_per_node 2, so the probe at
#     P = 4 runs as srun + one torchrun per node over both 2-CPU nodes, gloo between two network namespaces):
#     every rule kind, data_fetch and the report_* rules on the submit host, the rest as SLURM jobs. Then the audit
#     job forced alone, which must pass. Outputs stay in $HSITP_SLURM_WORK (set by .ci/run), whose
#     results/smoke the second pytest call walks (tests/test_run_outputs.py --run-dir).
#  3. Planted rules (.ci/slurm_planted.smk), one snakemake call: a rule that fails (exit status nonzero, the
#     rule's log and the SLURM job log named), one that finishes, and one that runs until it is scancel'ed
#     (reported as failed); then the rerun, which runs only the cancelled job.
# Each snakemake call has a hard timeout, so a stuck status loop cannot hang CI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIMIT=${HSITP_SLURM_RUN_LIMIT:-1500} # seconds per snakemake call (the whole smoke DAG is the longest)
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
failed_rule_logs() { # snakemake's log: print the last lines of each failed rule's own log (CI keeps no $WORK)
  local f
  for f in $(grep -oE "log: \S+ \(check log file" "$1" | awk '{print $2}' | sort -u); do
    echo "-- $f (last 30 lines)"
    tail -n 30 "$f" 2>/dev/null || echo "(missing)"
  done
}

WORK=${HSITP_SLURM_WORK:-$(mktemp -d /tmp/hsitp-slurm-ci.XXXXXX)}
mkdir -p "$WORK"
"$ROOT/.ci/slurm.sh" up

# what a user's checkout holds that the rules read: the workflow, configs, notebooks, src/ (the report and audit
# code are rule inputs; the jobs run the installed package) and the committed reference
cp -r "$ROOT"/{Snakefile,workflow,profiles,config,envs,slurm,notebooks,src} "$ROOT/.ci/slurm_planted.smk" "$WORK"/
mkdir -p "$WORK/results" && cp -r "$ROOT/results/reference" "$WORK/results/"
cd "$WORK"
cat >config/slurm_ci.yaml <<'EOF'
resources:
  probe_run: {ranks_per_node: 2}  # P = 4: two nodes of 2 ranks (srun, one torchrun per node)
EOF
cat >config/too_large.yaml <<'EOF'
resources:
  baseline: {mem_mb: 100000}  # no node has 100 GB: must stop before submitting, naming this key
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

step "1. a job too large for any node stops the run before anything is submitted"
t1=$SECONDS
if run_snake too_large.log "${CFG[@]}" config/too_large.yaml -- results/smoke/baseline/indian_pines_random_s0.nc; then
  fail "the run with a job too large for any node did not stop"
fi
took=$((SECONDS - t1))
grep -E "^  baseline \(.*\) on partition ci: needs 100000 MB per node \(resources.baseline.mem_mb\), largest node [0-9]+ MB$" \
  too_large.log || {
  tail -n 30 too_large.log
  fail "no one-line report naming resources.baseline.mem_mb and the node's memory"
}
if grep -q "submitted with SLURM jobid" too_large.log; then fail "a job was submitted before the check"; fi
[ "$took" -le 60 ] || fail "the too-large job was reported after ${took}s (limit 60 s)"
rm -rf results/smoke logs/smoke
echo "too-large job OK: stopped in ${took}s before submitting"

step "2. the whole smoke DAG through --profile slurm (P = 4 over both nodes)"
run_snake main.log "${CFG[@]}" || {
  tail -n 80 main.log
  failed_rule_logs main.log
  fail "the smoke DAG did not complete through --profile slurm"
}
python - <<'EOF'
import re
from pathlib import Path

log = Path("main.log").read_text()
submitted = re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)", log)
local = sorted(set(re.findall(r"^localrule (\w+):", log, flags=re.M)))
# a job prints its rule block ("rule NAME:") or, for the rank rules with a `message:`, "Job N: NAME: ..."
started = re.findall(r"^(?:rule (\w+):|Job \d+: (\w+): )", log, flags=re.M)
remote = sorted({a or b for a, b in started})
assert local == ["all", "data_fetch", "report_bench", "report_cost", "report_data", "report_probe",
                 "report_train"], local
expected = {"audit", "audit_claims", "baseline", "bench_calibrate", "bench_compare", "bench_merge", "bench_run",
            "cost_table", "data_prepare", "probe_estimate", "probe_merge", "probe_run", "train", "train_summary"}
assert set(remote) == expected, set(remote) ^ expected
n_remote = len(started)
assert len(submitted) == n_remote, (len(submitted), n_remote)
for _, slurm_log in submitted:
    assert Path(slurm_log.rstrip(").")).is_file(), slurm_log
p4 = Path("logs/smoke/probe/run_P4.log").read_text()
assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in p4, p4[:3000]
for node, name in ((0, "ci1"), (1, "ci2")):
    assert f"hsitp launch: node {node} of 2 (" in p4 and f"SLURM node {name})" in p4, p4[:3000]
print(f"smoke DAG OK: {len(submitted)} SLURM jobs ({', '.join(remote)}); on the submit host: {', '.join(local)}; "
      "the probe at P = 4 ran on ci1 and ci2")
EOF
grep -h "hsitp launch" logs/smoke/probe/run_P4.log | cut -c1-160
run_snake audit.log "${CFG[@]}" --forcerun audit -- results/smoke/audit/report.md || {
  tail -n 40 audit.log
  cat logs/smoke/audit/check.log || true
  fail "the forced audit failed on the finished smoke run"
}
[ "$(grep -c "submitted with SLURM jobid" audit.log)" -eq 1 ] || fail "the forced audit ran more than the audit job"
grep -q "^# Audit of results/smoke against results/reference/smoke: PASS" results/smoke/audit/report.md ||
  fail "the audit report does not say PASS"
echo "forced audit OK: $(tail -n 1 logs/smoke/audit/check.log)"

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
[ -n "${HSITP_SLURM_WORK:-}" ] || rm -rf "$WORK" # .ci/run walks $HSITP_SLURM_WORK/results/smoke, then removes it
step "done"
