#!/usr/bin/env bash
# Leader election with the coordination.k8s.io/v1 Lease: two controller replicas on one
# store; only the lease holder runs cycles and writes; the standby keeps its informers synced
# and takes over when the leader stops (SIGTERM releases the lease), admitting new work.
. "$(dirname "$0")/lib.sh"

fakelet add-node e1 --gpus 8 --cpu 32 --memory 256Gi --label kubernetes.io/hostname=e1 >/dev/null
k create namespace le >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: le}
spec: {namespaces: [le]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run
job() {
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: le}
spec: {gpu: {count: 1}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
YAML
}

gq_ctl_start --listen 127.0.0.1:0
wait_for 20 "A leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"
blog="$GQ_TEST_TMP/controller-b.log"
"$GANGQ_BIN" controller --kubeconfig "$KUBECONFIG" --db "$GQ_TEST_TMP/gangq.db" --listen 127.0.0.1:0 >"$blog" 2>&1 &
bpid=$!
GQ_BG_PIDS+=("$bpid")
wait_for 20 "B synced" grep -q 'informer synced.*informer=0' "$blog"
holder=$(k -n default get lease gangq-controller -o jsonpath='{.spec.holderIdentity}')
assert_match "$holder" "_$GQ_CTL_PID\$" "lease held by A (pid $GQ_CTL_PID)"
job j1
wait_for 20 "j1 admitted" bash -c "kubectl -n le get gpujob j1 -o jsonpath='{.status.state}' | grep -Eq 'Admitted|Running'"
sleep 3
assert_not_contains "$(cat "$blog")" "job admitted" "the standby admits nothing"
assert_not_contains "$(cat "$blog")" "leading: cycles on" "the standby does not lead"
bport=$(grep -o 'http server listening.*port=[0-9]*' "$blog" | grep -o '[0-9]*$')
assert_match "$(curl -s "http://127.0.0.1:$bport/metrics")" $'gangq_leader 0\n' "standby reports gangq_leader 0"
assert_eq 1 "$(k -n le get pods -o name | wc -l)" "one pod for j1"
assert_not_contains "$(cat "$blog")" "store open" "the standby does not open the store"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$bport/readyz")" "standby ready (synced)"
pass "A leads (lease $holder), B standby: synced, no cycles, no writes"

gq_ctl_stop
wait_for 20 "B takes over" grep -q "leading: cycles on" "$blog"
holder=$(k -n default get lease gangq-controller -o jsonpath='{.spec.holderIdentity}')
assert_match "$holder" "_$bpid\$" "lease now held by B"
job j2
wait_for 20 "j2 admitted by B" bash -c "kubectl -n le get gpujob j2 -o jsonpath='{.status.state}' | grep -Eq 'Admitted|Running'"
assert_contains "$(cat "$blog")" "job=le/j2" "B admitted j2"
assert_contains "$(cat "$blog")" "store open" "B opened the store after winning the lease"
assert_eq 2 "$(k -n le get pods -o name | wc -l)" "one pod each for j1 and j2 (j1 not admitted again)"
assert_match "$(curl -s "http://127.0.0.1:$bport/metrics")" $'gangq_leader 1\n' "new leader reports gangq_leader 1"
pass "A stopped (lease released): B leads, admits j2, j1 untouched"
