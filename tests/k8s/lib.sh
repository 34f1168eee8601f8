# lib.sh — helpers sourced by tests/k8s/test_*.sh (bash). Not executable on its own.
# shellcheck shell=bash
#
# A test is run by run.sh with a fresh environment already up and these exported:
#   KUBECONFIG, GQ_ENV_DIR, GQ_SERVER, GQ_TOKEN, GQ_CA   (see env.sh)
#   GANGQ_BIN   the gangq binary under test (BUILD_DIR/gangq)
#   GQ_TEST_TMP a scratch directory for this test (logs, db), removed by run.sh
#   GQ_ROOT     the repository root
# A test passes when it exits 0. Asserts print what they expected and what they saw, and
# exit 1 on the first failure (set -e style). Background processes started through
# gq_ctl_start / gq_fakelet_loop are stopped by PID on exit (gq_cleanup, trapped here).
#
#   fresh_ns [PREFIX]                 create a namespace with a unique name; prints it
#   k ARGS...                         kubectl, with stderr kept in the test log
#   fakelet ARGS...                   tests/k8s/fakelet.sh
#   gq_fakelet_loop [ARGS...]         start `fakelet.sh loop ARGS` in the background
#   gq_ctl_start [ARGS...]            start `gangq controller --kubeconfig --db` in the background
#                                     (db: $GQ_TEST_TMP/gangq.db, log: $GQ_TEST_TMP/controller.log)
#   gq_ctl_port                       the port of its --listen 127.0.0.1:0 (latest start)
#   gq_ctl_stop                       SIGTERM, wait up to 15 s (then SIGKILL and fail)
#   gq_ctl_kill                       SIGKILL (a crash)
#   gq_ctl_alive                      is the controller still running
#   gq_apiserver_restart              restart the API server only (same etcd and port)
#   gq_apiserver_crash                the same, SIGKILL instead of SIGTERM
#   gq_api_requests VERB RESOURCE [USER_AGENT_PREFIX]
#                                     how many finished requests the API server's audit log
#                                     holds (e.g. `list gpujobs gangq` to spot a relist loop)
#   wait_for TIMEOUT_S DESC CMD...    poll CMD (0.25 s) until it succeeds; fail with DESC
#   wait_jsonpath TIMEOUT_S EXPECTED kubectl-get-args... -o jsonpath=EXPR
#                                     poll until the jsonpath output equals EXPECTED
#   assert_eq EXPECTED ACTUAL DESC    assert_ne, assert_contains HAYSTACK NEEDLE DESC,
#                                     assert_not_contains, assert_match TEXT REGEX DESC
#   assert_fails DESC CMD...          CMD must exit non-zero; its output is kept in $GQ_OUT
#   assert_ok DESC CMD...             CMD must exit 0; its output is kept in $GQ_OUT
#   pass MSG / fail MSG               log a step / fail the test
#   wait_state TIMEOUT_S NS NAME REGEX
#                                     poll until gpujob NAME's status.state matches REGEX
#                                     (anchored, e.g. 'Admitted|Running'); on timeout print
#                                     the last state and status.message
#   job_pod_nodes NS NAME             the nodes of the job's pods, sorted, space-separated
#   wait_job_pods TIMEOUT_S NS NAME N poll until the job has N pods bound to nodes

set -euo pipefail
GQ_ROOT="${GQ_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
GQ_K8S="$GQ_ROOT/tests/k8s"
GQ_TEST_TMP="${GQ_TEST_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/gangq-test.XXXXXX")}"
GQ_TEST_NAME="${GQ_TEST_NAME:-$(basename "$0" .sh)}"
GQ_CTL_PID=""
GQ_BG_PIDS=()
GQ_OUT=""

pass() { echo "  ok: $*"; }
fail() {
  echo "  FAIL: $*" >&2
  exit 1
}

k() { kubectl "$@"; }
fakelet() { "$GQ_K8S/fakelet.sh" "$@"; }

fresh_ns() {
  local ns
  ns="${1:-t}-$(date +%s%N | tail -c 7)-$RANDOM"
  kubectl create namespace "$ns" >/dev/null || fail "could not create namespace $ns"
  echo "$ns"
}

# alice_role NS ROLE VERBS: a Role ROLE in NS allowing VERBS ("get, list, ...") on gpujobs
# and its RoleBinding to the user alice (env.sh's GQ_ALICE_TOKEN under GQ_AUTHZ=RBAC), as
# YAML documents on stdout.
alice_role() {
  printf -- '---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: %s, namespace: %s}\n' "$2" "$1"
  printf -- 'rules:\n- {apiGroups: [gangq.io], resources: [gpujobs], verbs: [%s]}\n' "$3"
  printf -- '---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: alice-%s, namespace: %s}\n' "$2" "$1"
  printf -- 'roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %s}\n' "$2"
  printf -- 'subjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}\n'
}

# Stop PID: SIGTERM, wait up to $2 s, then SIGKILL. Returns 1 if SIGKILL was needed.
gq_stop_pid() {
  local pid="$1" wait_s="${2:-10}" i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 $(( wait_s * 10 ))); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    # A zombie child counts as exited.
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

gq_fakelet_loop() {
  "$GQ_K8S/fakelet.sh" loop "$@" >>"$GQ_TEST_TMP/fakelet.log" 2>&1 &
  GQ_BG_PIDS+=("$!")
}

# Scenarios run the controller with statuses settling for 0.3 s instead of 2 s and wait
# reasons for 1 s instead of 10 s (the scenarios wait for states and reasons many times; the
# settle rules themselves still run; test_ctl_flap.sh runs the default). Later flags win: a
# scenario's own --status-settle, or GQ_CTL_DEFAULT_ARGS= (benchmarks: the defaults).
GQ_CTL_DEFAULT_ARGS=${GQ_CTL_DEFAULT_ARGS---status-settle 0.3s --wait-reason-settle 1s}
gq_ctl_start() {
  [ -x "${GANGQ_BIN:-}" ] || fail "GANGQ_BIN (${GANGQ_BIN:-unset}) is not an executable"
  [ -z "$GQ_CTL_PID" ] || ! kill -0 "$GQ_CTL_PID" 2>/dev/null || fail "controller already running (pid $GQ_CTL_PID)"
  echo "--- start $(date -u +%H:%M:%S.%N) $*" >>"$GQ_TEST_TMP/controller.log"
  # shellcheck disable=SC2086
  "$GANGQ_BIN" controller --kubeconfig "$KUBECONFIG" --db "$GQ_TEST_TMP/gangq.db" $GQ_CTL_DEFAULT_ARGS "$@" \
    >>"$GQ_TEST_TMP/controller.log" 2>&1 &
  GQ_CTL_PID=$!
}

# The port of the controller's --listen 127.0.0.1:0, from its latest start in the log (waits
# up to 20 s for it).
gq_ctl_port() {
  local n
  n=$(grep -c -- '^--- start' "$GQ_TEST_TMP/controller.log")
  wait_for 20 "http server" bash -c "[ \$(grep -c 'http server listening' '$GQ_TEST_TMP/controller.log') -ge $n ]"
  grep -o 'http server listening.*port=[0-9]*' "$GQ_TEST_TMP/controller.log" | tail -1 | grep -o '[0-9]*$'
}
# The value of one series (name{labels} exactly as rendered) on the controller's /metrics at
# 127.0.0.1:PORT; empty when absent.
gq_metric() { # PORT SERIES
  curl -sf "http://127.0.0.1:$1/metrics" | awk -v s="$2" 'index($0, s " ") == 1 { print $2 }'
}
# A Team NAME owning the namespaces NS... (created here).
# A burst benchmark's run: the controller with the arguments a benchmark measures, then
# `benchtool.py kueue CFG` (creates the jobs, runs their pods, waits for every job to
# finish), then the controller stopped. Sets BENCH_OUT (the tool's JSON, also in
# $GQ_TEST_TMP/result.json) and BENCH_CTL_CPU_MS (the controller's CPU over the burst);
# the controller's metrics at the end are in $GQ_TEST_TMP/metrics.txt.
gq_bench_burst() { # CFG
  local port c0 c1 hz
  gq_ctl_start --leader-elect=false --listen 127.0.0.1:0
  wait_for 30 "controller reconciling" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
  port=$(gq_ctl_port)
  hz=$(getconf CLK_TCK)
  c0=$(awk '{print $14 + $15}' "/proc/$GQ_CTL_PID/stat")
  BENCH_OUT=$(python3 "$GQ_K8S/benchtool.py" kueue "$1") || fail "benchtool kueue ($1)"
  c1=$(awk '{print $14 + $15}' "/proc/$GQ_CTL_PID/stat")
  gq_ctl_alive || fail "controller died"
  curl -sf "http://127.0.0.1:$port/metrics" >"$GQ_TEST_TMP/metrics.txt" || true
  gq_ctl_stop
  echo "$BENCH_OUT" >"$GQ_TEST_TMP/result.json"
  BENCH_CTL_CPU_MS=$(( (c1 - c0) * 1000 / hz ))
}
gq_team() { # NAME NS...
  local name="$1" n list=""
  shift
  for n in "$@"; do
    k create namespace "$n" >/dev/null
    list="${list:+$list, }$n"
  done
  printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: %s}\nspec: {namespaces: [%s]}\n' "$name" "$list" |
    k apply -f - >/dev/null
}
# A GPUJob manifest: NAME in namespace NS, one replica of one GPU, class Batch, a pod that
# stops within a second.
gq_gpu1_job() { # NAME NS
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec:\n  class: Batch\n  replicas: 1\n  gpu: {count: 1}\n  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}\n' "$1" "$2"
}
# In namespace NS, job j00 (gq_gpu1_job) applied and Running, then N more, j01..jN (two
# digits), applied at once: on a cluster of one GPU they wait behind it, in that order.
gq_j00_then_queue() { # NS N
  local ns="$1" n="$2" f="$GQ_TEST_TMP/jobs.yaml" i
  gq_gpu1_job j00 "$ns" | k apply -f - >/dev/null
  wait_jsonpath 40 Running -n "$ns" gpujob j00 -o jsonpath='{.status.state}'
  : >"$f"
  for i in $(seq 1 "$n"); do gq_gpu1_job "$(printf 'j%02d' "$i")" "$ns" >>"$f"; done
  k apply -f "$f" >/dev/null
}
# A GPUJob manifest: NAME in namespace NS of CLASS and PRIORITY, REPLICAS replicas of COUNT
# GPUs each, a pod that stops within a second of its delete.
gq_job() { # NS NAME CLASS PRIORITY REPLICAS COUNT
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec:\n  class: %s\n  priority: %s\n  replicas: %s\n  gpu: {count: %s}\n  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}\n' "$2" "$1" "$3" "$4" "$5" "$6"
}
# The audit-log times (seconds since the epoch, fractional) of the controller's status PATCHes
# of GPUJob NAME after the RFC 3339 time AFTER, one a line.
gq_status_patch_times() { # NAME AFTER
  jq -r --arg n "$1" --arg t "$2" 'select(.verb == "patch" and .objectRef.resource == "gpujobs" and
      .objectRef.subresource == "status" and .objectRef.name == $n and
      (.userAgent // "" | startswith("gangq")) and .stageTimestamp > $t) | .stageTimestamp' \
    "$GQ_ENV_DIR/audit.log" 2>/dev/null |
    while read -r ts; do date -u -d "$ts" +%s.%N; done
}
# The Waiting Events of GPUJob NAME in namespace NS, their counts summed.
gq_waiting_events() { # NS NAME
  kubectl -n "$1" get events --field-selector "involvedObject.name=$2,reason=Waiting" \
    -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | awk '{ s += ($1 ? $1 : 1) } END { print s + 0 }'
}
gq_ctl_alive() { [ -n "$GQ_CTL_PID" ] && kill -0 "$GQ_CTL_PID" 2>/dev/null; }

gq_ctl_stop() {
  [ -n "$GQ_CTL_PID" ] || return 0
  local pid="$GQ_CTL_PID"
  GQ_CTL_PID=""
  gq_stop_pid "$pid" 15 || fail "controller (pid $pid) ignored SIGTERM for 15 s"
}

gq_ctl_kill() {
  [ -n "$GQ_CTL_PID" ] || return 0
  kill -KILL "$GQ_CTL_PID" 2>/dev/null || true
  wait "$GQ_CTL_PID" 2>/dev/null || true
  GQ_CTL_PID=""
}

gq_apiserver_restart() { "$GQ_K8S/env.sh" restart-apiserver "$GQ_ENV_DIR" >&2; }
gq_apiserver_crash() { "$GQ_K8S/env.sh" crash-apiserver "$GQ_ENV_DIR" >&2; }

gq_api_requests() {
  jq -c --arg v "$1" --arg r "$2" --arg ua "${3:-}" \
    'select(.verb == $v and .objectRef.resource == $r and (.userAgent // "" | startswith($ua)))' \
    "$GQ_ENV_DIR/audit.log" 2>/dev/null | wc -l
}

gq_cleanup() {
  local rc=$? p
  [ -z "$GQ_CTL_PID" ] || gq_stop_pid "$GQ_CTL_PID" 15 || true
  for p in "${GQ_BG_PIDS[@]}"; do gq_stop_pid "$p" 5 || true; done
  if [ $rc -ne 0 ] && [ -s "$GQ_TEST_TMP/controller.log" ]; then
    echo "  --- controller log (last 40 lines) ---" >&2
    tail -40 "$GQ_TEST_TMP/controller.log" >&2
  fi
  exit $rc
}
trap gq_cleanup EXIT
# Turn signals (run.sh's timeout sends SIGTERM) into an exit, so gq_cleanup runs.
trap 'echo "  FAIL: interrupted (signal)" >&2; exit 143' TERM
trap 'exit 130' INT

wait_for() {
  local timeout="$1" desc="$2"; shift 2
  local end=$(( $(date +%s) + timeout ))
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after ${timeout}s waiting for: $desc"
    sleep 0.25
  done
}

wait_jsonpath() {
  local timeout="$1" expected="$2"; shift 2
  local end=$(( $(date +%s) + timeout )) got=""
  while :; do
    got=$(kubectl get "$@" 2>&1) && [ "$got" = "$expected" ] && return 0
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after ${timeout}s: kubectl get $* — expected '$expected', last saw '$got'"
    sleep 0.25
  done
}

assert_eq() { [ "$1" = "$2" ] || fail "${3:-values differ}: expected '$1', got '$2'"; }
assert_ne() { [ "$1" != "$2" ] || fail "${3:-values equal}: did not expect '$1'"; }
assert_contains() {
  case "$1" in *"$2"*) ;; *) fail "${3:-missing text}: expected to find '$2' in: $1" ;; esac
}
assert_not_contains() {
  case "$1" in *"$2"*) fail "${3:-unexpected text}: did not expect '$2' in: $1" ;; *) ;; esac
}
assert_match() { [[ "$1" =~ $2 ]] || fail "${3:-no match}: expected /$2/ to match: $1"; }
assert_ok() {
  local desc="$1"; shift
  GQ_OUT=$("$@" 2>&1) || fail "$desc: command failed: $* — output: $GQ_OUT"
}
assert_fails() {
  local desc="$1"; shift
  if GQ_OUT=$("$@" 2>&1); then fail "$desc: command succeeded but should have failed: $* — output: $GQ_OUT"; fi
}

# wait_state TIMEOUT_S NS NAME REGEX   poll until gpujob NS/NAME's status.state matches REGEX
#                                      (whole word, egrep), e.g. 'Admitted|Running'
wait_state() {
  local timeout="$1" ns="$2" name="$3" re="$4" got=""
  local end=$(( $(date +%s) + timeout ))
  while :; do
    got=$(kubectl -n "$ns" get gpujob "$name" -o jsonpath='{.status.state}' 2>&1) && [[ "$got" =~ ^($re)$ ]] && return 0
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after ${timeout}s: gpujob $ns/$name state '$got', expected /$re/; message: $(kubectl -n "$ns" get gpujob "$name" -o jsonpath='{.status.message}' 2>&1)"
    sleep 0.25
  done
}

# job_pod_nodes NS NAME   the nodes of gpujob NAME's pods, sorted, space-separated (one per pod)
job_pod_nodes() {
  kubectl -n "$1" get pods -l "gangq.io/job=$2" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | xargs
}

# wait_job_pods TIMEOUT_S NS NAME N   poll until gpujob NAME has N pods bound to nodes
wait_job_pods() {
  wait_for "$1" "$4 bound pods of gpujob $2/$3" bash -c \
    "[ \$(kubectl -n $2 get pods -l gangq.io/job=$3 -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c .) = $4 ]"
}
