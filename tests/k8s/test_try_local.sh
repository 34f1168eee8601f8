#!/usr/bin/env bash
# README's "Trying it locally", as a user would run it: scripts/try-local.sh up starts its own
# API server, fake kubelet and controller; the examples apply; jobs are admitted with pods
# Running on the example nodes; `kubectl gangq queue` answers; `down` stops every process it
# started and removes its directory. (The harness's own API server is not used.)
. "$(dirname "$0")/lib.sh"

dir="$GQ_TEST_TMP/try"
try_down() { "$GQ_ROOT/scripts/try-local.sh" down "$dir" >/dev/null 2>&1 || true; }
trap 'rc=$?; try_down; (exit $rc); gq_cleanup' EXIT

out=$("$GQ_ROOT/scripts/try-local.sh" up "$dir" 2>"$GQ_TEST_TMP/up.err") || {
  cat "$GQ_TEST_TMP/up.err" >&2; fail "try-local.sh up failed"; }
assert_eq ". '$dir/env'" "$out" "up prints the line to source"
ctl_pid=$(cat "$dir/controller.pid"); fk_pid=$(cat "$dir/fakelet.pid")
envdir=$(cat "$dir/envdir")
# shellcheck disable=SC1090
. "$dir/env"
assert_ne "$GQ_ENV_DIR" "$envdir" "its own API server, not the harness's"
assert_contains "$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')" "127.0.0.1" "KUBECONFIG of the local API server"
[ "$(kubectl get nodes -o name | wc -l)" -ge 8 ] || fail "example nodes not registered"
pass "up: API server, $(kubectl get nodes -o name | wc -l) example nodes, controller ready; . DIR/env sets KUBECONFIG"

kubectl apply -f "$GQ_ROOT/examples/manifests/" >/dev/null || fail "kubectl apply -f examples/manifests/ failed"
wait_for 90 "an example job Admitted with its pods Running" bash -c \
  "kubectl get pods -A -l gangq.io/job -o jsonpath='{range .items[*]}{.status.phase}{\"\\n\"}{end}' | grep -q Running"
states() { kubectl get gj -A -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}'; }
# status lags the pods by --status-settle (2 s)
wait_for 30 "an example job's status Admitted or Running" bash -c "$(declare -f states); states | grep -qE '^(Admitted|Running)$'"
admitted=$(states | grep -cE '^(Admitted|Running)$' || true)
curl -fsS -o "$GQ_TEST_TMP/metrics" "$GANGQ_METRICS" && grep -q '^gangq_' "$GQ_TEST_TMP/metrics" || fail "no gangq_ metrics at $GANGQ_METRICS"
q=$(kubectl gangq queue -A -o json) || fail "kubectl gangq queue -A failed"
echo "$q" | jq -e . >/dev/null || fail "kubectl gangq queue -o json is not JSON: $q"
pass "examples applied: $admitted jobs Admitted with pods Running; metrics served; kubectl gangq queue answers"

"$GQ_ROOT/scripts/try-local.sh" down "$dir" 2>/dev/null || fail "down failed"
for p in "$ctl_pid" "$fk_pid"; do
  wait_for 10 "process $p to exit" bash -c "! kill -0 $p 2>/dev/null"
done
[ ! -e "$dir" ] || fail "down left $dir"
[ ! -e "$envdir" ] || fail "down left the API server's directory $envdir"
pass "down: controller, fake kubelet and API server stopped, directories removed"
