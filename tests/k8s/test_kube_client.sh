#!/usr/bin/env bash
# The Kubernetes client library (controller/kube) against the real API server: informers,
# writers, 409s, Events, client-certificate auth, an API server restart under open watches
# (resume without a relist loop) and Lease contention. See kube_smoke.sh.
. "$(dirname "$0")/lib.sh"
out=$("$GQ_K8S/kube_smoke.sh" "$(dirname "$GANGQ_BIN")" 2>&1) || { echo "$out" | tail -40; fail "kube smoke failed"; }
echo "$out" | tail -1
assert_match "$(echo "$out" | tail -1)" '^kube smoke: [1-9][0-9]* passed, 0 failed$' "kube smoke summary"
pass "kube client smoke"
