#!/usr/bin/env bash
# The controller under deploy/'s RBAC, as its ServiceAccount (a TokenRequest token, sent over
# https with the cluster CA): it takes the Lease in gangq-system, admits a GPUJob, creates its
# pods and headless Service, writes GPUJob and Team status, sends Events, deletes the pods on
# suspend and the Service with the job — and the API
# server refused none of its requests (no 403 for that user in the audit log).
# gq-env: GQ_AUTHZ=RBAC
. "$(dirname "$0")/lib.sh"
sa=system:serviceaccount:gangq-system:gangq

k apply -f "$GQ_ROOT/deploy/00-namespace.yaml" -f "$GQ_ROOT/deploy/10-rbac.yaml" >/dev/null
tok=$(k create --raw /api/v1/namespaces/gangq-system/serviceaccounts/gangq/token -f - <<<'{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":3600}}' | jq -r .status.token)
[ -n "$tok" ] && [ "$tok" != null ] || fail "no ServiceAccount token from the TokenRequest API"
cat >"$GQ_TEST_TMP/sa.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "$GQ_SERVER", certificate-authority: "$GQ_CA"}}]
users: [{name: gangq, user: {token: "$tok"}}]
contexts: [{name: gangq, context: {cluster: c, user: gangq, namespace: gangq-system}}]
current-context: gangq
YAML
chmod 600 "$GQ_TEST_TMP/sa.kubeconfig"
assert_eq yes "$(KUBECONFIG="$GQ_TEST_TMP/sa.kubeconfig" kubectl auth can-i list gpujobs.gangq.io 2>/dev/null || true)" "the token authenticates as the ServiceAccount"
assert_eq no "$(KUBECONFIG="$GQ_TEST_TMP/sa.kubeconfig" kubectl auth can-i get nodes 2>/dev/null || true)" "and holds only deploy/'s rights"

k create namespace rb >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: rb}
spec: {namespaces: [rb]}
YAML
fakelet add-node r1 --gpus 8 --cpu 64 --memory 512Gi --label kubernetes.io/hostname=r1 >/dev/null
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --kubeconfig "$GQ_TEST_TMP/sa.kubeconfig"
wait_for 30 "controller leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"
assert_match "$(k -n gangq-system get lease gangq-controller -o jsonpath='{.spec.holderIdentity}')" "." "Lease gangq-system/gangq-controller held"

cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: train, namespace: rb}
spec:
  replicas: 2
  gpu: {count: 2}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 30 Running -n rb gpujob train -o jsonpath='{.status.state}'
assert_eq 2 "$(k -n rb get pods -l gangq.io/job=train -o name | wc -l)" "two pods created"
wait_for 20 "headless Service of the 2-replica job" bash -c "[ \"\$(kubectl -n rb get service train -o jsonpath='{.spec.clusterIP}')\" = None ]"
wait_for 20 "Team status written" bash -c "[ -n \"\$(kubectl get team rb -o jsonpath='{.status}')\" ]"
wait_for 20 "an Event about the job" bash -c "kubectl -n rb get events --field-selector involvedObject.name=train -o name | grep -q ."
pass "as the ServiceAccount: Lease taken, job admitted and Running, pods created, statuses and an Event written"

k -n rb patch gpujob train --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_jsonpath 30 Suspended -n rb gpujob train -o jsonpath='{.status.state}'
wait_for 30 "pods deleted" bash -c "[ \$(kubectl -n rb get pods -l gangq.io/job=train -o name | wc -l) = 0 ]"
pass "suspend: pods deleted by the controller"

k -n rb delete gpujob train --wait=false >/dev/null
wait_for 30 "the job's Service deleted by the controller" bash -c "! kubectl -n rb get service train >/dev/null 2>&1"
pass "job deleted: its headless Service deleted by the controller"

gq_ctl_stop
n=$(jq -c --arg u "$sa" 'select(.user.username == $u)' "$GQ_ENV_DIR/audit.log" | wc -l)
[ "$n" -gt 10 ] || fail "the audit log holds only $n requests by $sa"
denied=$(jq -c --arg u "$sa" 'select(.user.username == $u and .responseStatus.code == 403) | [.verb, .objectRef.resource, .objectRef.subresource, .objectRef.namespace, .objectRef.name]' "$GQ_ENV_DIR/audit.log")
assert_eq "" "$denied" "requests of $sa the API server refused"
for vr in "list gpujobs" "watch gpujobs" "list nodes" "watch pods" "create pods" "delete pods" "patch gpujobs" "create events" "update leases" "create services" "get services" "delete services"; do
  set -- $vr
  c=$(jq -c --arg u "$sa" --arg v "$1" --arg r "$2" 'select(.user.username == $u and .verb == $v and .objectRef.resource == $r and .responseStatus.code < 300)' "$GQ_ENV_DIR/audit.log" | wc -l)
  [ "$c" -gt 0 ] || fail "no successful $vr by $sa in the audit log"
done
pass "$n requests by $sa, none refused (403); list/watch, pod create/delete, status patch, Events and the Lease all used"
