#!/usr/bin/env bash
# Benchmark (not a test; `make bench` runs it through tests/k8s/run.sh BUILD bench_stream):
# streaming throughput. N (default 3,000) single-replica 1-GPU GPUJobs created by 16 parallel
# clients (tests/k8s/benchtool.py stream) on 500 nodes x 8 GPUs, timed from the first create
# to the last pod seen bound on a pod watch; then, on the same API server with gangq stopped
# and its pods deleted, kube-scheduler 1.20.2 (tests/k8s/build-scheduler.sh: the same Debian
# source as the API server; --kube-api-qps=1000 --kube-api-burst=1000 --leader-elect=false)
# binding N plain pods requesting one nvidia.com/gpu, created the same way. Prints both
# times and the ratio gangq / kube-scheduler, and over each stream the CPU time (utime +
# stime from /proc) of the scheduler under test and of the API server, per job placed
# (counted to 5 s after the stream's end, so the status writes that follow a bind count).
# GQ_BENCH_STREAM_JOBS changes N; GQ_KUBE_SCHEDULER_BIN names a kube-scheduler binary
# (default: build-scheduler.sh's, which builds it once, about 5 minutes). BENCH_CTL_ARGS adds
# controller options (an experiment; the figures quoted are the defaults').
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
N=${GQ_BENCH_STREAM_JOBS:-3000}
CLIENTS=16
command -v python3 >/dev/null || fail "python3 is needed for tests/k8s/benchtool.py"
BT="$GQ_K8S/benchtool.py"
. "$GQ_ENV_DIR/env"
ksched=${GQ_KUBE_SCHEDULER_BIN:-$("$GQ_K8S/build-scheduler.sh")} || fail "no kube-scheduler binary"

t=$(date +%s)
python3 "$BT" nodes st 500 8 || fail "registering nodes"
pass "500 nodes x 8 GPUs Ready in $(( $(date +%s) - t )) s"

# Warm-up object, then wait until it is bound: the scheduler under test is up and synced.
warm() { # NS KIND
  python3 "$BT" stream "$2" "$1" 1 1 >/dev/null || fail "warm-up $2 in $1 not bound"
}

k create namespace gq >/dev/null
k create namespace gqwarm >/dev/null
k apply -f - >/dev/null <<EOT
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: stream}
spec: {namespaces: [gq, gqwarm], weight: 1}
EOT
gq_ctl_start --leader-elect=false ${BENCH_CTL_ARGS:-}
wait_for 30 "controller reconciling" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
warm gqwarm gpujob
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
apid=$(cat "$GQ_ENV_DIR/apiserver.pid")
# "X ms (Y us per job)": CPU ticks T0..T1 over N placements
per_job() { awk -v a="$1" -v b="$2" -v hz="$hz" -v n="$N" 'BEGIN { ms = (b - a) * 1000 / hz; printf "%d ms (%d us per job)", ms, ms * 1000 / n }'; }
c0=$(cpu_ticks "$GQ_CTL_PID") a0=$(cpu_ticks "$apid")
gout=$(python3 "$BT" stream gpujob gq "$N" "$CLIENTS") || fail "gangq stream"
sleep 5
c1=$(cpu_ticks "$GQ_CTL_PID") a1=$(cpu_ticks "$apid")
gq_ctl_stop
assert_eq true "$(jq -r .finished <<<"$gout")" "all $N gangq pods bound"
g=$(jq -r .first_create_to_last_bound_s <<<"$gout")
pass "gangq: $N GPUJobs created in $(jq -r .create_s <<<"$gout") s by $CLIENTS clients, last pod bound ${g} s after the first create"
pass "gangq's stream: controller CPU $(per_job "$c0" "$c1"), API server CPU $(per_job "$a0" "$a1")"

# Free the GPUs for kube-scheduler: delete gangq's jobs and pods (no garbage collector here).
k delete gpujobs --all -n gq --wait=false >/dev/null
k delete gpujobs --all -n gqwarm --wait=false >/dev/null
for ns in gq gqwarm; do # one deletecollection each (kubectl deletes pod by pod: minutes)
  curl -sS -o /dev/null --cacert "$GQ_CA" -H "Authorization: Bearer $GQ_TOKEN" -H "Content-Type: application/json" \
    -X DELETE --data '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}' \
    "$GQ_SERVER/api/v1/namespaces/$ns/pods" || fail "deleting the pods of $ns"
done
wait_for 120 "gangq's pods gone" bash -c "[ -z \"\$(kubectl get pods -A --no-headers 2>/dev/null)\" ]"

k create namespace ks >/dev/null
k create namespace kswarm >/dev/null
"$ksched" --kubeconfig "$KUBECONFIG" --leader-elect=false --kube-api-qps=1000 --kube-api-burst=1000 \
  --port=0 --secure-port=0 --v=1 >>"$GQ_TEST_TMP/kube-scheduler.log" 2>&1 &
kspid=$!
GQ_BG_PIDS+=("$kspid")
warm kswarm pod
k0=$(cpu_ticks "$kspid") a0=$(cpu_ticks "$apid")
kout=$(python3 "$BT" stream pod ks "$N" "$CLIENTS") || fail "kube-scheduler stream"
sleep 5
k1=$(cpu_ticks "$kspid") a1=$(cpu_ticks "$apid")
assert_eq true "$(jq -r .finished <<<"$kout")" "all $N plain pods bound by kube-scheduler"
s=$(jq -r .first_create_to_last_bound_s <<<"$kout")
pass "kube-scheduler: $N pods created in $(jq -r .create_s <<<"$kout") s by $CLIENTS clients, last pod bound ${s} s after the first create"
pass "kube-scheduler's stream: its CPU $(per_job "$k0" "$k1"), API server CPU $(per_job "$a0" "$a1")"
# throughput ratio: jobs per second first create -> last bound, gangq over kube-scheduler
ratio=$(awk -v g="$g" -v s="$s" 'BEGIN { printf "%.2f", s / g }')
pass "throughput gangq / kube-scheduler: ${ratio}x (goal >= 1.0)"
printf '{"n":%d,"clients":%d,"gangq_s":%s,"kube_scheduler_s":%s,"ratio":%s,"gangq_cpu_ticks":%d,"kube_scheduler_cpu_ticks":%d,"hz":%d}\n' \
  "$N" "$CLIENTS" "$g" "$s" "$ratio" "$((c1 - c0))" "$((k1 - k0))" "$hz"
