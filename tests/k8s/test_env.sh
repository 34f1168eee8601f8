#!/usr/bin/env bash
# The test environment itself: the API server answers with the token only, restarts on the
# same etcd and port with its data intact (the "API server restarted under the controller"
# scenario), and lib.sh's controller helpers start, stop and kill a process by PID
# (exercised here with a stand-in for the gangq binary, which handles SIGTERM like it must).
. "$(dirname "$0")/lib.sh"

# --- authentication: the token is required, the CA verifies the server
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$GQ_CA" -H "Authorization: Bearer $GQ_TOKEN" "$GQ_SERVER/readyz")" "readyz with token"
assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$GQ_CA" "$GQ_SERVER/readyz")" "readyz without token"
assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$GQ_CA" -H "Authorization: Bearer wrong" "$GQ_SERVER/api")" "wrong token"
assert_fails "TLS verified against the CA only" curl -sS -o /dev/null --cacert /etc/ssl/certs/ca-certificates.crt "$GQ_SERVER/readyz"
assert_eq "$GQ_SERVER" "$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')" "kubeconfig server"
assert_match "$GQ_SERVER" '^https://127\.0\.0\.1:[0-9]+$' "loopback server URL"
pass "token auth, TLS with the generated CA, kubeconfig"

# --- API server restart: same etcd, same port, data intact, watch broken and resumable
ns=$(fresh_ns env)
k -n "$ns" create configmap before --from-literal=k=v >/dev/null
rv=$(k -n "$ns" get configmap before -o jsonpath='{.metadata.resourceVersion}')
k -n "$ns" get configmaps --watch -o name >"$GQ_TEST_TMP/watch.out" 2>&1 &
wpid=$!
sleep 1
old_pid=$(cat "$GQ_ENV_DIR/apiserver.pid")
t0=$(date +%s%N)
gq_apiserver_restart 2>/dev/null
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
assert_ne "$old_pid" "$(cat "$GQ_ENV_DIR/apiserver.pid")" "a new API server process"
assert_fails "old API server process gone" kill -0 "$old_pid"
wait_for 10 "the watch to end when the API server stops" bash -c "! kill -0 $wpid"
wait "$wpid" 2>/dev/null || true
assert_eq v "$(k -n "$ns" get configmap before -o jsonpath='{.data.k}')" "data survives the restart"
k -n "$ns" create configmap after --from-literal=k=w >/dev/null
# A watch from the old resourceVersion resumes on the new server (etcd kept the history).
ev=$(curl -sS -m 5 --cacert "$GQ_CA" -H "Authorization: Bearer $GQ_TOKEN" \
  "$GQ_SERVER/api/v1/namespaces/$ns/configmaps?watch=1&resourceVersion=$rv&timeoutSeconds=1" || true)
assert_contains "$ev" '"name":"after"' "watch from the pre-restart resourceVersion sees the new object"
# A sanity bound, not a timing target (a loaded 2-core machine took 11 s).
[ "$ms" -lt 60000 ] || fail "restart took ${ms} ms (over a minute)"
echo "  restart took ${ms} ms"
old_pid=$(cat "$GQ_ENV_DIR/apiserver.pid")
gq_apiserver_crash 2>/dev/null
assert_ne "$old_pid" "$(cat "$GQ_ENV_DIR/apiserver.pid")" "a new API server process after the crash"
assert_eq v "$(k -n "$ns" get configmap before -o jsonpath='{.data.k}')" "data survives the crash"
# The audit log (kept across restarts) counts requests by verb, resource and user agent.
lists=$(gq_api_requests list configmaps kubectl)
k -n "$ns" get configmaps >/dev/null
k -n "$ns" get configmaps >/dev/null
assert_eq $((lists + 2)) "$(gq_api_requests list configmaps kubectl)" "two kubectl LISTs audited"
assert_eq 0 "$(gq_api_requests list configmaps gangq)" "no LISTs by a gangq user agent"
pass "API server restarted in ${ms} ms on the same port and etcd; data kept; watch resumable"

# --- lib.sh controller helpers, with a stand-in binary
stub="$GQ_TEST_TMP/gangq-stub"
cat >"$stub" <<'STUB'
#!/usr/bin/env bash
echo "stub args: $*"
trap 'echo "stub: SIGTERM, shutting down"; exit 0' TERM
while :; do sleep 0.1; done
STUB
chmod +x "$stub"
GANGQ_BIN="$stub"
gq_ctl_start --extra
wait_for 5 "stub started" grep -q "stub args" "$GQ_TEST_TMP/controller.log"
assert_contains "$(cat "$GQ_TEST_TMP/controller.log")" "stub args: controller --kubeconfig $KUBECONFIG --db $GQ_TEST_TMP/gangq.db $GQ_CTL_DEFAULT_ARGS --extra" "controller command line (scenario defaults, then the test's flags)"
gq_ctl_alive || fail "stub controller not alive"
pid=$GQ_CTL_PID
gq_ctl_stop
assert_fails "stopped by SIGTERM" kill -0 "$pid"
assert_contains "$(cat "$GQ_TEST_TMP/controller.log")" "SIGTERM, shutting down" "graceful stop"
gq_ctl_start
pid=$GQ_CTL_PID
gq_ctl_kill
assert_fails "killed" kill -0 "$pid"
gq_ctl_alive && fail "gq_ctl_alive after kill"
wait_jsonpath 5 "w" -n "$ns" configmap after -o jsonpath='{.data.k}'
pass "lib.sh: controller start/stop (SIGTERM)/kill by PID, log captured; wait_jsonpath"
