#!/usr/bin/env bash
# Benchmark (not a test; `make bench` runs it through tests/k8s/run.sh BUILD bench_kueue):
# Kueue's baseline scheduler benchmark (test/performance/scheduler/configs/baseline in
# kubernetes-sigs/kueue) as GPUJobs against the real API server. 5 cohorts x 6 Teams
# (Kueue's ClusterQueues; one namespace each), each Team nominal 20 GPUs, borrowingLimit 100,
# on 60 nodes x 24 GPUs. Per Team three concurrent streams, all Teams in parallel:
#   small  350 jobs, 1 GPU,  runtime  200 ms, priority  50, one created every  100 ms
#   medium 100 jobs, 5 GPUs, runtime  500 ms, priority 100, one created every  500 ms
#   large   50 jobs, 20 GPUs (2 replicas x 10), runtime 1,000 ms, priority 200, every 1,200 ms
# 15,000 jobs. Runtime is counted from admission: tests/k8s/benchtool.py is the fake kubelet,
# it moves each pod to Running when it sees it bound and to Succeeded after the runtime the
# job's template carries (annotation bench/runtime-ms), and finishes preemption's
# deletes at once. The controller runs with --min-runtime 0s (Kueue has no minimum runtime).
# Kueue's published figures: 351 s wall, mean time to admission small 215.5 s, medium 76.8 s,
# large 6.7 s; the quota-bound ideal is about 66 s.
# Prints: wall time first create -> last job Succeeded (and -> the last pod finished, the work
# done before its job's status is written); mean and p95 time to admission per
# class (create's 201 -> first pod seen bound); minimum and mean Team usage (mean GPUs held
# over the wall time); the controller's API writes per admission (audit log); its CPU time
# and RSS; the CPU of the API server, etcd and this benchmark's tool over the run, and every
# client's writes (the machine's two cores are shared); and that every job Succeeded exactly
# once (its Succeeded pods are one attempt's).
# BENCH_SCALE=0.1 scales the job counts (35/10/5 per Team: 1,500 jobs) for a quick run.
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
SCALE=${BENCH_SCALE:-1}
cnt() { awk -v n="$1" -v s="$SCALE" 'BEGIN { c = int(n * s + 0.5); if (c < 1) c = 1; print c }'; }
command -v python3 >/dev/null || fail "python3 is needed for tests/k8s/benchtool.py"
BT="$GQ_K8S/benchtool.py"
. "$GQ_ENV_DIR/env"

t=$(date +%s)
python3 "$BT" nodes kq 60 24 || fail "registering nodes"
pass "60 nodes x 24 GPUs Ready in $(( $(date +%s) - t )) s"

teams="$GQ_TEST_TMP/teams.yaml"
: >"$teams"
queues=()
for c in 1 2 3 4 5; do
  for q in 1 2 3 4 5 6; do
    ns="kq-c$c-q$q"
    queues+=("\"$ns\"")
    printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n---\napiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: %s}\nspec:\n  namespaces: [%s]\n  cohort: cohort-%d\n  weight: 1\n  quota:\n  - {gpuType: "*", gpus: 20, borrowingLimit: 100}\n' \
      "$ns" "$ns" "$ns" "$c" >>"$teams"
  done
done
k apply -f "$teams" >/dev/null || fail "creating Teams"

cfg="$GQ_TEST_TMP/kueue.json"
cat >"$cfg" <<EOC
{"queues": [$(IFS=,; echo "${queues[*]}")], "nominal": 20, "workers": 32, "timeout_s": $(( ${GQ_TEST_TIMEOUT:-300} - 120 )), "stall_s": 60,
 "classes": [
  {"name": "small",  "count": $(cnt 350), "replicas": 1, "gpus": 1,  "runtime_ms": 200,  "priority": 50,  "interval_ms": 100},
  {"name": "medium", "count": $(cnt 100), "replicas": 1, "gpus": 5,  "runtime_ms": 500,  "priority": 100, "interval_ms": 500},
  {"name": "large",  "count": $(cnt 50),  "replicas": 2, "gpus": 10, "runtime_ms": 1000, "priority": 200, "interval_ms": 1200}]}
EOC

gq_ctl_start --leader-elect=false --min-runtime 0s --listen 127.0.0.1:0 ${BENCH_CTL_ARGS:-}
wait_for 30 "controller reconciling" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
port=$(gq_ctl_port)
# Every second: the API requests waiting per lane (the write queue's depth).
( while :; do
    curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null |
      awk '/^gangq_kube_requests_queued\{/ { split($1, a, "\""); q[a[2]] = $2 } END { printf "%s %s %s\n", q["critical"] + 0, q["normal"] + 0, q["low"] + 0 }'
    sleep 1
  done >"$GQ_TEST_TMP/queued.txt" ) &
GQ_BG_PIDS+=("$!")
sleep 1
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/${1:-$GQ_CTL_PID}/stat" 2>/dev/null || echo 0; }
apid=$(cat "$GQ_ENV_DIR/apiserver.pid") epid=$(cat "$GQ_ENV_DIR/etcd.pid")
c0=$(cpu_ticks) a0=$(cpu_ticks "$apid") e0=$(cpu_ticks "$epid")
audit0=$(wc -l <"$GQ_ENV_DIR/audit.log")
out=$(python3 "$BT" kueue "$cfg") || fail "benchtool kueue"
c1=$(cpu_ticks) a1=$(cpu_ticks "$apid") e1=$(cpu_ticks "$epid")
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$GQ_CTL_PID/status")
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$GQ_CTL_PID/status")
# what the resident memory is made of: anonymous (heap, mmaps) and file pages (code, libraries)
rss_split=$(awk '/^Rss(Anon|File|Shmem):/ { printf "%s%s %d MiB", (n++ ? ", " : ""), $1, $2 / 1024 }' "/proc/$GQ_CTL_PID/status")
gq_ctl_alive || fail "controller died"
curl -sf "http://127.0.0.1:$port/metrics" >"$GQ_TEST_TMP/metrics.txt" || true
gq_ctl_stop
echo "$out" >"$GQ_TEST_TMP/result.json"

j() { jq -r "$1" <<<"$out"; }
jobs=$(j .jobs)
wall=$(j .wall_s)
pass "scale $SCALE: $jobs jobs over 30 Teams; created over $(j .create_span_s) s (API errors $(j .api_client_errors))"
pass "wall time first create -> last job Succeeded: ${wall} s (Kueue at scale 1: 351 s; quota-bound ideal ~66 s); -> last pod finished: $(j .work_wall_s) s"
for c in small medium large; do
  pass "time to admission $c: mean $(j ".classes.$c.mean_s") s, p95 $(j ".classes.$c.p95_s") s ($(j ".classes.$c.admitted") admitted)"
done
pass "GPUJob watch delay (create's 201 -> ADDED on the benchmark's own watch): mean $(j .watch_delay_s.mean) s, p95 $(j .watch_delay_s.p95) s; the controller's (creationTimestamp -> ADDED): $(awk '/^gangq_watch_delay_seconds_(sum|count)\{informer="gpujobs"\}/ { if ($1 ~ /_sum/) s = $2; else n = $2 } END { printf "mean %.1f s over %d", (n ? s / n : 0), n }' "$GQ_TEST_TMP/metrics.txt")"
pass "Team usage (mean GPUs held over the wall time, nominal 20): min $(j .team_usage_gpus.min), mean $(j .team_usage_gpus.mean)"
adm=$(j .admissions)
# Every client's writes during the run, from the API server's audit log (read once): a line
# each, "<gangq|other> <stage> <verb> <resource>[/<subresource>]".
tail -n +"$(( audit0 + 1 ))" "$GQ_ENV_DIR/audit.log" | jq -r \
  'select(.verb | test("^(create|update|patch|delete|deletecollection)$"))
   | "\(if (.userAgent // "" | startswith("gangq")) then "gangq" else "other" end) \(.stage) \(.verb) \(.objectRef.resource)\(if .objectRef.subresource then "/" + .objectRef.subresource else "" end)"' \
  >"$GQ_TEST_TMP/writes.txt"
# The controller's.
writes=$(awk '$1 == "gangq" { print $3, $4 }' "$GQ_TEST_TMP/writes.txt" | sort | uniq -c | sort -rn)
nw=$(awk '{s += $1} END {print s + 0}' <<<"$writes")
pass "controller API writes: $nw for $adm admissions ($(awk -v w="$nw" -v a="$adm" 'BEGIN { printf "%.2f", (a ? w / a : 0) }') per admission): $(tr -s ' \n' ' ' <<<"$writes")"
# Every client's (the benchmark's creates and the fake kubelet's pod status writes too).
allw=$(awk '$2 == "ResponseComplete"' "$GQ_TEST_TMP/writes.txt" | wc -l)
cpu_ms=$(( (c1 - c0) * 1000 / hz ))
api_ms=$(( (a1 - a0) * 1000 / hz )) etcd_ms=$(( (e1 - e0) * 1000 / hz ))
# The two cores are shared: where their time went during the run (the API server is the
# bound when it takes most of what the others leave).
pass "CPU over the run (s): API server $(( api_ms / 1000 )) ($(awk -v c="$api_ms" -v a="$adm" 'BEGIN { printf "%.1f", (a ? c / a : 0) }') ms per admission), etcd $(( etcd_ms / 1000 )), benchmark tool (creates, fake kubelet) $(j .tool_cpu_s), controller $(( cpu_ms / 1000 )); API writes from every client: $allw ($(awk -v w="$allw" -v a="$adm" 'BEGIN { printf "%.2f", (a ? w / a : 0) }') per admission)"
heap=$(awk '/^gangq_heap_bytes\{state="inuse"\}/ { u = $2 } /^gangq_heap_bytes\{state="free"\}/ { f = $2 }
  END { printf "heap in use %d MiB, free in the heap %d MiB", u / 1048576, f / 1048576 }' "$GQ_TEST_TMP/metrics.txt")
pass "controller CPU ${cpu_ms} ms over the run; VmRSS $(( rss / 1024 )) MiB, peak $(( hwm / 1024 )) MiB ($rss_split; $heap)"
pass "preempted pods: $(j .preempted_pods)"
pass "API requests waiting in the controller (max per lane, sampled each second): $(awk '{ for (i = 1; i <= 3; i++) if ($i > m[i]) m[i] = $i } END { printf "critical %d, normal %d, low %d", m[1], m[2], m[3] }' "$GQ_TEST_TMP/queued.txt")"
pass "API requests by lane: $(awk '/^gangq_kube_requests_(started|dropped)_total\{/ { split($1, a, "\""); n = $1; sub(/\{.*/, "", n); sub(/gangq_kube_requests_/, "", n); sub(/_total/, "", n); printf "%s %s %d, ", a[2], n, $2 } /^gangq_kube_requests_coalesced_total / { printf "coalesced %d", $2 }' "$GQ_TEST_TMP/metrics.txt")"
pass "API requests' time by lane (mean s waiting for a slot / from the slot to the answer): $(awk '/^gangq_kube_request(s_finished|_wait_seconds|_wire_seconds)_total\{/ { split($1, a, "\""); if ($1 ~ /finished/) n[a[2]] = $2; else if ($1 ~ /wait/) w[a[2]] = $2; else x[a[2]] = $2 }
  END { split("critical normal low", L, " "); for (i = 1; i <= 3; i++) { p = L[i]; if (n[p] > 0) printf "%s %.2f / %.2f (%d), ", p, w[p] / n[p], x[p] / n[p], n[p] } }' "$GQ_TEST_TMP/metrics.txt")"
pass "reconcile phases (mean ms per reconcile): $(awk '/^gangq_reconcile_phase_duration_seconds_(sum|count)\{/ { split($1, a, "\""); if ($1 ~ /_sum/) s[a[2]] = $2; else n[a[2]] = $2 }
  END { for (p in s) if (n[p] > 0) printf "%s %.1f ", p, 1000 * s[p] / n[p]; printf "(reconciles %d)", n["gather"] }' "$GQ_TEST_TMP/metrics.txt")"
pass "reconciles' CPU (the controller thread's, mean ms per reconcile): $(awk '/^gangq_reconcile_phase_duration_seconds_count\{/ { split($1, a, "\""); n[a[2]] = $2 }
  /^gangq_reconcile_phase_cpu_seconds_total\{/ { split($1, a, "\""); u[a[2]] = $2; t += $2 }
  END { for (p in u) if (n[p] > 0) printf "%s %.1f ", p, 1000 * u[p] / n[p]; printf "(in all %.1f s)", t }' "$GQ_TEST_TMP/metrics.txt")"
pass "jobs examined by reconciles: $(awk '/^gangq_jobs_examined_total\{/ { split($1, a, "\""); printf "%s %d, ", a[2], $2 } /^gangq_reconciles_full_total / { printf "full passes %d", $2 }' "$GQ_TEST_TMP/metrics.txt")"
pass "Events: $(awk '/^gangq_events_total\{/ { split($1, a, "\""); printf "%s %d ", a[2], $2 }' "$GQ_TEST_TMP/metrics.txt")"
pass "status refreshes (position or wait-message text only): $(awk '/^gangq_status_refresh_total\{/ { split($1, a, "\""); printf "%s %d ", a[2], $2 }' "$GQ_TEST_TMP/metrics.txt")"
pass "write budget at the end (gangq_write_budget: admissions' pods + 2, less the writes sent): $(awk '/^gangq_write_budget / { printf "%.0f", $2 }' "$GQ_TEST_TMP/metrics.txt")"
# A job left unfinished: what the controller logged about it.
for key in $(j '.not_exactly_once_examples[]' | cut -d: -f1 | head -3); do
  echo "  unfinished $key: $(j ".not_exactly_once_examples[] | select(startswith(\"$key:\"))")"
  grep -F "job=$key " "$GQ_TEST_TMP/controller.log" | tail -5 | sed 's/^/    /'
done
assert_eq "true false" "$(j .finished) $(j .stalled)" "every job Succeeded (finished, stalled: no job Succeeded for 60 s)"
assert_eq "$jobs" "$(j .created)" "jobs created"
assert_eq 0 "$(j .not_exactly_once)" "jobs not Succeeded exactly once ($(j -c .not_exactly_once_examples))"
pass "every job Succeeded exactly once (one attempt's pods Succeeded)"
jq -c --argjson w "$nw" --argjson cpu "$cpu_ms" --argjson rss "$rss" --argjson hwm "$hwm" --arg scale "$SCALE" \
  --argjson api "$api_ms" --argjson etcd "$etcd_ms" --argjson allw "$allw" \
  '{scale: $scale} + . + {controller_writes: $w, controller_cpu_ms: $cpu, rss_kb: $rss, hwm_kb: $hwm,
    apiserver_cpu_ms: $api, etcd_cpu_ms: $etcd, all_writes: $allw} | del(.not_exactly_once_examples)' <<<"$out"
