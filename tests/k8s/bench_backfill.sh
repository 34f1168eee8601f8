#!/usr/bin/env bash
# Benchmark (not a test; `make bench` runs it through tests/k8s/run.sh BUILD bench_backfill):
# NVIDIA knavigator's greedy-backfill efficiency benchmark (resources/benchmarks/backfill/*/
# test2-backfill-performance/run-test-10x100.yaml in github.com/NVIDIA/knavigator) as
# CPU-only GPUJobs against the real API server. 10 nodes of 100100m CPU and 100050Mi; a burst
# in one queue, created one after the other in this order:
#    20 jobs A: 60 CPUs, 60Gi, 240 s
#    80 jobs B: 30 CPUs, 30Gi,  60 s
#   240 jobs C: 10 CPUs, 10Gi,  20 s
# knavigator measures the turnaround (first pod bound -> last pod done) and the cluster's
# utilization. The CPUs alone would be busy for exactly 480 s; memory keeps a node from
# holding one job of each size at once (A + B + C is 100Gi), which puts the floor near 533 s.
# Prints: makespan (first create -> last job Succeeded; -> the last pod finished), CPU
# occupancy over both, every job Succeeded exactly once; and the same burst in `gangq
# simulate` (the policy alone, without API latency).
# BENCH_BACKFILL_TIME scales every runtime (default 1; 0.25 for a quicker run);
# BENCH_BACKFILL_LIMITS=1 gives every job spec.maxRunSeconds: its runtime and a tenth more, at
# least 5 s more (the limit counts from the admission, the runtime from the pod's start: a
# limit equal to the runtime stops every job just before it ends).
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
SCALE=${BENCH_BACKFILL_TIME:-1}
LIMITS=${BENCH_BACKFILL_LIMITS:-0}
command -v python3 >/dev/null || fail "python3 is needed for tests/k8s/benchtool.py"
BT="$GQ_K8S/benchtool.py"
. "$GQ_ENV_DIR/env"
NODES=10
secs() { awk -v s="$1" -v f="$SCALE" 'BEGIN { v = int(s * f + 0.5); if (v < 1) v = 1; print v }'; }
TA=$(secs 240) TB=$(secs 60) TC=$(secs 20)
limit_of() { awk -v t="$1" 'BEGIN { s = int(t / 10 + 0.5); if (s < 5) s = 5; print t + s }'; }
lim() { [ "$LIMITS" = 1 ] && limit_of "$1" || echo null; }

# The policy alone: the same burst in the simulator (arrival 0, the trace's order; memory
# in whole GiB: the nodes' 100050Mi is 97.7 GiB).
sim="$GQ_TEST_TMP/sim"
mkdir -p "$sim"
printf 'nodes:\n  - {name: n, count: %d, gpus: 0, cpu: 100, memoryGiB: 97}\nteams:\n  - {name: t}\n' "$NODES" >"$sim/cluster.yaml"
{
  echo "jobs:"
  for e in "a 60 $TA 20" "b 30 $TB 80" "c 10 $TC 240"; do
    set -- $e
    printf '  - {name: %s, class: Batch, team: t, cpu: %d, memoryGiB: %d, duration: %d, count: %d%s}\n' \
      "$1" "$2" "$2" "$3" "$4" "$([ "$LIMITS" = 1 ] && echo ", maxRun: $(limit_of "$3")")"
  done
} >"$sim/jobs.yaml"
"$GANGQ_BIN" simulate "$sim/cluster.yaml" "$sim/jobs.yaml" --json "$sim/report.json" >/dev/null ||
  fail "gangq simulate of the burst"
pass "simulated (policy alone): makespan $(jq -r .run.end_time_s "$sim/report.json") s, mean wait $(jq -r .queueing_delay.all.mean_s "$sim/report.json" | xargs printf '%.1f') s, $(jq -r .run.admissions "$sim/report.json") admissions"

t=$(date +%s)
python3 "$BT" nodes bf "$NODES" 0 NVIDIA-A100-SXM4-40GB 100100m 100050Mi || fail "registering nodes"
pass "$NODES nodes x 100 CPUs Ready in $(( $(date +%s) - t )) s"
gq_team backfill kbf
cfg="$GQ_TEST_TMP/backfill.json"
cat >"$cfg" <<EOC
{"queues": ["kbf"], "sequential": true, "cluster_cpus": $(( NODES * 1001 / 10 )), "workers": 8,
 "timeout_s": $(( ${GQ_TEST_TIMEOUT:-1200} - 120 )), "stall_s": $(( TA + 60 )),
 "classes": [
  {"name": "a", "count": 20, "replicas": 1, "gpus": 0, "cpu": "60", "memory": "60Gi", "runtime_ms": $(( TA * 1000 )), "priority": null, "interval_ms": 0, "max_run_s": $(lim "$TA")},
  {"name": "b", "count": 80, "replicas": 1, "gpus": 0, "cpu": "30", "memory": "30Gi", "runtime_ms": $(( TB * 1000 )), "priority": null, "interval_ms": 0, "max_run_s": $(lim "$TB")},
  {"name": "c", "count": 240, "replicas": 1, "gpus": 0, "cpu": "10", "memory": "10Gi", "runtime_ms": $(( TC * 1000 )), "priority": null, "interval_ms": 0, "max_run_s": $(lim "$TC")}]}
EOC

gq_bench_burst "$cfg"
out=$BENCH_OUT
j() { jq -r "$1" <<<"$out"; }
pass "340 jobs created in order over $(j .create_span_s) s (API errors $(j .api_client_errors)); run limits: $([ "$LIMITS" = 1 ] && echo "$(lim "$TA") / $(lim "$TB") / $(lim "$TC") s" || echo none)"
pass "makespan first create -> last job Succeeded: $(j .wall_s) s; -> last pod finished: $(j .work_wall_s) s (the CPUs alone: $(( 2 * TA )) s)"
pass "CPU occupancy: $(j .cpu_occupancy_pct) % to the last job Succeeded, $(j .cpu_work_occupancy_pct) % to the last pod finished"
pass "mean time to admission: A $(j .classes.a.mean_s) s, B $(j .classes.b.mean_s) s, C $(j .classes.c.mean_s) s"
pass "controller CPU $BENCH_CTL_CPU_MS ms; backfills $(awk '/^gangq_backfill_admissions_total /{print $2}' "$GQ_TEST_TMP/metrics.txt"); admissions $(j .admissions)"
assert_eq "true false" "$(j .finished) $(j .stalled)" "every job Succeeded (finished, stalled)"
assert_eq 340 "$(j .created)" "jobs created"
assert_eq 0 "$(j .not_exactly_once)" "jobs not Succeeded exactly once ($(j -c .not_exactly_once_examples))"
pass "every job Succeeded exactly once"
jq -c '. + {sim: $sim[0]} | del(.not_exactly_once_examples)' --slurpfile sim <(jq -c '{makespan_s: .run.end_time_s, mean_wait_s: .queueing_delay.all.mean_s}' "$sim/report.json") <<<"$out"
