#!/usr/bin/env bash
# Benchmark (not a test; `make bench` runs it through tests/k8s/run.sh BUILD bench_gang):
# NVIDIA knavigator's gang-scheduling benchmark (resources/benchmarks/gang-scheduling in
# github.com/NVIDIA/knavigator, workflow run-test.yaml) as GPUJobs against the real API server.
# 32 nodes x 8 GPUs; a burst of 53 jobs submitted in order, one after the other, each replica
# a whole node (8 GPUs), every pod running 30 s:
#   1 x 32 replicas, 2 x 16, 3 x 10, 1 x 2, 4 x 8, 5 x 6, 2 x 1, 6 x 5, 1 x 2, 7 x 4, 1 x 2,
#   2 x 1, 8 x 4, 9 x 3, 1 x 5
# 288 node-slots: nine waves that each fill the cluster exactly, so the ideal makespan is
# 9 x 30 = 270 s at 100 % GPU occupancy; knavigator compares schedulers by the occupancy.
# A scheduler that binds part of a gang deadlocks here; one that admits out of order or
# leaves nodes idle loses whole waves.
# Prints: makespan (first create -> last job Succeeded; -> the last pod finished), the
# cluster's GPU occupancy over both, the spread of each gang's binds, every job Succeeded
# exactly once; and the same burst in `gangq simulate` (the scheduling core on a virtual
# clock: what the policy alone gives, without API latency).
# BENCH_GANG_RUNTIME_MS changes the pods' runtime (default 30000) for a quicker run.
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
RUNTIME_MS=${BENCH_GANG_RUNTIME_MS:-30000}
command -v python3 >/dev/null || fail "python3 is needed for tests/k8s/benchtool.py"
BT="$GQ_K8S/benchtool.py"
. "$GQ_ENV_DIR/env"
# knavigator's run-test.yaml: "jobs x replicas", in submission order.
BURST="1x32 2x16 3x10 1x2 4x8 5x6 2x1 6x5 1x2 7x4 1x2 2x1 8x4 9x3 1x5"
NODES=32
GPUS=8

# The policy alone: the same burst in the simulator (arrival 0, the trace's order).
sim="$GQ_TEST_TMP/sim"
mkdir -p "$sim"
printf 'nodes:\n  - {name: dgx, count: %d, gpus: %d, gpuType: A100, gpuMemoryGiB: 80, cpu: 128, memoryGiB: 1024}\nteams:\n  - {name: bench, quota: [{gpuType: "*", gpus: %d}]}\n' \
  "$NODES" "$GPUS" $(( NODES * GPUS )) >"$sim/cluster.yaml"
{
  echo "jobs:"
  i=0
  for e in $BURST; do
    printf '  - {name: j%02d-r%d, class: Batch, team: bench, replicas: %d, gpus: %d, cpu: 0.1, memoryGiB: 0.125, duration: %s, count: %d}\n' \
      "$i" "${e#*x}" "${e#*x}" "$GPUS" "$(awk -v m="$RUNTIME_MS" 'BEGIN { printf "%g", m / 1000 }')" "${e%x*}"
    i=$(( i + 1 ))
  done
} >"$sim/jobs.yaml"
"$GANGQ_BIN" simulate "$sim/cluster.yaml" "$sim/jobs.yaml" --json "$sim/report.json" >/dev/null ||
  fail "gangq simulate of the burst"
pass "simulated (policy alone): makespan $(jq -r .run.end_time_s "$sim/report.json" 2>/dev/null || echo '?') s, GPU occupancy $(jq -r .allocation.mean_pct "$sim/report.json") %, $(jq -r .run.admissions "$sim/report.json") admissions"

t=$(date +%s)
python3 "$BT" nodes kn "$NODES" "$GPUS" || fail "registering nodes"
pass "$NODES nodes x $GPUS GPUs Ready in $(( $(date +%s) - t )) s"
gq_team gang kn
classes=""
i=0
for e in $BURST; do
  classes="${classes:+$classes,
}  {\"name\": \"j$(printf %02d "$i")-r${e#*x}\", \"count\": ${e%x*}, \"replicas\": ${e#*x}, \"gpus\": $GPUS, \"runtime_ms\": $RUNTIME_MS, \"priority\": null, \"interval_ms\": 0}"
  i=$(( i + 1 ))
done
cfg="$GQ_TEST_TMP/gang.json"
cat >"$cfg" <<EOC
{"queues": ["kn"], "sequential": true, "cluster_gpus": $(( NODES * GPUS )), "workers": 8,
 "timeout_s": $(( ${GQ_TEST_TIMEOUT:-900} - 120 )), "stall_s": $(( RUNTIME_MS / 1000 + 60 )),
 "classes": [
$classes]}
EOC

gq_bench_burst "$cfg"
out=$BENCH_OUT
j() { jq -r "$1" <<<"$out"; }
ideal=$(( 9 * RUNTIME_MS / 1000 ))
pass "53 jobs created in order over $(j .create_span_s) s (API errors $(j .api_client_errors))"
pass "makespan first create -> last job Succeeded: $(j .wall_s) s (ideal $ideal s); -> last pod finished: $(j .work_wall_s) s"
pass "GPU occupancy: $(j .occupancy_pct) % to the last job Succeeded, $(j .work_occupancy_pct) % to the last pod finished (ideal 100 %)"
pass "gang binds (first to last pod of a job seen bound): max $(j .gang_bound_spread_s.max) s, mean $(j .gang_bound_spread_s.mean) s"
pass "controller CPU $BENCH_CTL_CPU_MS ms; preempted pods $(j .preempted_pods); admissions $(j .admissions)"
assert_eq "true false" "$(j .finished) $(j .stalled)" "every job Succeeded (finished, stalled)"
assert_eq 53 "$(j .created)" "jobs created"
assert_eq 0 "$(j .not_exactly_once)" "jobs not Succeeded exactly once ($(j -c .not_exactly_once_examples))"
pass "every job Succeeded exactly once (one attempt's pods, all its replicas)"
jq -c '. + {sim: $sim[0]} | del(.not_exactly_once_examples, .classes)' --slurpfile sim <(jq -c '{makespan_s: .run.end_time_s, occupancy_pct: .allocation.mean_pct}' "$sim/report.json") <<<"$out"
