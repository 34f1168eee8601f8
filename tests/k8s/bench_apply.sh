#!/usr/bin/env bash
# Benchmark (not a test; run by `make bench` through tests/k8s/run.sh BUILD bench_apply):
# time from `kubectl apply` of N single-replica 1-GPU GPUJobs (default 1000) to every job
# Admitted with its pod created, against the real API server, and the controller's CPU time
# per admission (utime+stime from /proc), and the controller's API writes per admission (create,
# patch, update and delete requests with the controller's user agent in the API server's audit
# log between the apply and the last admission, leader-election Lease renewals included).
# Prints the figures as `ok:` lines and one JSON line. Then the controller idle for
# GQ_BENCH_IDLE_S (20) seconds: its CPU, reconciles and full examinations. GQ_BENCH_JOBS sets N;
# BENCH_CTL_ARGS adds controller options (an experiment; the figures quoted are the defaults').
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
N=${GQ_BENCH_JOBS:-1000}
GPUS_PER_NODE=16
NODES=$(( (N + GPUS_PER_NODE - 1) / GPUS_PER_NODE ))
ns=$(fresh_ns bench)

# Nodes: one multi-document file registered by the fake kubelet.
nodes="$GQ_TEST_TMP/nodes.yaml"
: >"$nodes"
for i in $(seq 1 "$NODES"); do
  cat >>"$nodes" <<EON
---
apiVersion: v1
kind: Node
metadata:
  name: bench-$i
  labels:
    kubernetes.io/hostname: bench-$i
    nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB
    nvidia.com/gpu.memory: "40960"
    topology.gangq.io/rack: rack-$(( (i - 1) / 8 ))
status:
  capacity: {cpu: "256", memory: 2Ti, nvidia.com/gpu: "$GPUS_PER_NODE", pods: "110"}
  allocatable: {cpu: "256", memory: 2Ti, nvidia.com/gpu: "$GPUS_PER_NODE", pods: "110"}
EON
done
t=$(date +%s)
fakelet register "$nodes" >/dev/null 2>&1 || fail "registering $NODES nodes"
pass "$NODES nodes x $GPUS_PER_NODE GPUs registered in $(( $(date +%s) - t )) s"

k apply -f - >/dev/null <<EOT
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: bench}
spec: {namespaces: [$ns], weight: 1}
EOT

jobs="$GQ_TEST_TMP/jobs.yaml"
: >"$jobs"
for i in $(seq 1 "$N"); do
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: j%d, namespace: %s}\nspec:\n  class: Batch\n  replicas: 1\n  gpu: {count: 1}\n  template:\n    spec:\n      containers: [{name: main, image: busybox, resources: {requests: {cpu: 100m, memory: 128Mi}}}]\n' "$i" "$ns" >>"$jobs"
done

gq_ctl_start --listen 127.0.0.1:0 ${BENCH_CTL_ARGS:-}
wait_for 30 "controller leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"
sleep 1
cpu_ticks() { awk '{print $14 + $15}' "/proc/$GQ_CTL_PID/stat"; }
hz=$(getconf CLK_TCK)
# the controller's writes in the audit log so far, as "resource[/subresource] verb" counts
gq_writes() {
  jq -r 'select((.userAgent // "" | startswith("gangq")) and
                (.verb | test("^(create|patch|update|delete|deletecollection)$")))
         | "\(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end) \(.verb)"' \
    "$GQ_ENV_DIR/audit.log" 2>/dev/null | sort | uniq -c
}
w0="$GQ_TEST_TMP/writes0"
gq_writes >"$w0"
port=$(gq_ctl_port)
reconciles() {
  curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk '/^gangq_reconcile_phase_duration_seconds_count\{phase="gather"\}/ { print $2 + 0; f = 1 } END { if (!f) print 0 }'
}
# the reconciles' CPU time so far, ms: "total phase=ms ..."
rc_cpu() {
  curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk '/^gangq_reconcile_phase_cpu_seconds_total\{/ { split($1, a, "\""); v[a[2]] = 1000 * $2; t += 1000 * $2 }
         END { printf "%.0f", t; for (p in v) printf " %s=%.0f", p, v[p] }'
}
r0=$(reconciles)
u0=$(rc_cpu)
c0=$(cpu_ticks)
t0=$(date +%s%N)
k apply -f "$jobs" >/dev/null || fail "kubectl apply of $N jobs"
t_apply=$(( ($(date +%s%N) - t0) / 1000000 ))
admitted() {
  local a p
  a=$(k get gpujobs -n "$ns" -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}' | grep -c -E '^(Admitted|Running)$' || true)
  p=$(k get pods -n "$ns" --no-headers 2>/dev/null | wc -l)
  [ "$a" -ge "$N" ] && [ "$p" -ge "$N" ]
}
wait_for 600 "all $N jobs Admitted with pods" admitted
t_all=$(( ($(date +%s%N) - t0) / 1000000 ))
c1=$(cpu_ticks)
r1=$(reconciles)
u1=$(rc_cpu)
cpu_ms=$(( (c1 - c0) * 1000 / hz ))
per_us=$(( (c1 - c0) * 1000000 / hz / N ))
pass "kubectl apply of $N GPUJobs returned after ${t_apply} ms"
pass "all $N Admitted with pods created ${t_all} ms after the apply started"
pass "controller CPU ${cpu_ms} ms over the run: ${per_us} us per admission (pod create, status patch, event)"
nrc=$(( r1 - r0 ))
pass "reconciles during the run: $nrc ($(awk -v c="$cpu_ms" -v n="$nrc" 'BEGIN { printf "%.2f", (n ? c / n : 0) }') ms of controller CPU per reconcile, all work included)"
# the controller's CPU split: reconciles (by phase) and the rest (informers, HTTP, the loop)
rc_ms=$(awk -v a="$u0" -v b="$u1" 'BEGIN { split(a, x, " "); split(b, y, " "); print y[1] - x[1] }')
pass "reconciles' CPU during the run: ${rc_ms} ms ($(awk -v a="$u0" -v b="$u1" -v n="$N" 'BEGIN {
  na = split(a, x, " "); nb = split(b, y, " ")
  for (i = 2; i <= na; i++) { split(x[i], kv, "="); s0[kv[1]] = kv[2] }
  for (i = 2; i <= nb; i++) { split(y[i], kv, "="); printf "%s%s %.0f us", (i > 2 ? ", " : ""), kv[1], 1000 * (kv[2] - s0[kv[1]]) / n }
  printf " per admission" }')); the rest of the controller: $(( cpu_ms - rc_ms )) ms"
curl -sf "http://127.0.0.1:$port/metrics" >"$GQ_TEST_TMP/metrics.txt" 2>/dev/null || true
pass "reconcile phases since start (mean ms per reconcile): $(awk '/^gangq_reconcile_phase_duration_seconds_(sum|count)\{/ { split($1, a, "\""); if ($1 ~ /_sum/) s[a[2]] = $2; else n[a[2]] = $2 }
  END { for (p in s) if (n[p] > 0) printf "%s %.2f ", p, 1000 * s[p] / n[p]; printf "(reconciles %d)", n["gather"] }' "$GQ_TEST_TMP/metrics.txt")"
pass "jobs examined by reconciles: $(awk '/^gangq_jobs_examined_total\{/ { split($1, a, "\""); printf "%s %d, ", a[2], $2 } /^gangq_reconciles_full_total / { printf "full passes %d", $2 }' "$GQ_TEST_TMP/metrics.txt")"
w1="$GQ_TEST_TMP/writes1"
gq_writes >"$w1"
# per "resource verb": writes during the run (after minus before)
wdelta=$(awk 'FILENAME == ARGV[1] { b[$2 " " $3] = $1; next } { d = $1 - b[$2 " " $3]; if (d > 0) print d, $2, $3 }' "$w0" "$w1")
writes=$(printf '%s\n' "$wdelta" | awk '{ s += $1 } END { print s + 0 }')
pass "controller API writes during the run: $writes, $(awk -v w="$writes" -v n="$N" 'BEGIN { printf "%.2f", w / n }') per admission (budget: pods + 2 = 3)"
pass "controller API writes by resource: $(printf '%s\n' "$wdelta" | sort -rn | awk '{ printf "%s%s %s %s", (NR > 1 ? ", " : ""), $1, $2, $3 }')"
# Idle: every job admitted, nothing changing. What the controller costs then is
# its periodic work (resyncs, lease renewals, status settles): a reconcile that
# finds nothing changed must cost next to nothing, whatever the job count.
full_examined() { gq_metric "$port" 'gangq_jobs_examined_total{how="full"}'; }
full_passes() { gq_metric "$port" gangq_reconciles_full_total; }
quiet_rc() { gq_metric "$port" gangq_reconciles_quiet_total; }
IDLE_S=${GQ_BENCH_IDLE_S:-20}
sleep 5 # the last statuses settle (--status-settle)
ic0=$(cpu_ticks)
ir0=$(reconciles)
if0=$(full_examined)
ip0=$(full_passes)
iq0=$(quiet_rc)
sleep "$IDLE_S"
idle_ms=$(( ($(cpu_ticks) - ic0) * 1000 / hz ))
idle_rc=$(( $(reconciles) - ir0 ))
idle_full=$(( $(full_examined) - if0 ))
idle_passes=$(( $(full_passes) - ip0 ))
idle_quiet=$(( $(quiet_rc) - iq0 ))
pass "idle with $N jobs admitted: controller CPU ${idle_ms} ms over ${IDLE_S} s, $idle_rc reconciles ($idle_passes full passes, --full-resync-interval), $idle_quiet quiet (skipped), $idle_full jobs examined in full"
echo "{\"jobs\":$N,\"apply_ms\":$t_apply,\"all_admitted_ms\":$t_all,\"controller_cpu_ms\":$cpu_ms,\"cpu_us_per_admission\":$per_us,\"api_writes\":$writes,\"reconciles\":$nrc,\"idle_s\":$IDLE_S,\"idle_cpu_ms\":$idle_ms,\"idle_reconciles\":$idle_rc,\"idle_quiet\":$idle_quiet,\"idle_full_examined\":$idle_full}"
gq_ctl_stop
