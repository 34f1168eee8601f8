#!/usr/bin/env bash
# Controller lifecycle from pod phases: a Failed pod requeues the whole gang (old pods
# deleted, new attempt, retries counted) and after --max-retries the job is Failed; a node
# NotReady past --node-lost-grace requeues its gang onto another node; a non-gang Inference
# job re-places only its lost replica (the other replica's pod is untouched); a pod deleted
# by someone else requeues its gang.
. "$(dirname "$0")/lib.sh"

for i in 1 2 3; do
  fakelet add-node "x$i" --gpus 4 --cpu 32 --memory 256Gi --label "kubernetes.io/hostname=x$i" >/dev/null
done
k create namespace lf >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: lf}
spec: {namespaces: [lf]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --max-retries 1 --node-lost-grace 2s

job() { # NAME CLASS REPLICAS COUNT
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: lf}
spec:
  class: $2
  replicas: $3
  gpu: {count: $4}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
pods_of() { kubectl -n lf get pods -l "gangq.io/job=$1" -o jsonpath='{range .items[?(@.status.phase!="Failed")]}{.metadata.name}{" "}{end}'; }

# --- a failed pod requeues the gang; the second failure exhausts --max-retries 1
job fl Batch 2 2
wait_jsonpath 20 Running -n lf gpujob fl -o jsonpath='{.status.state}'
fakelet fail lf fl-1-0 >/dev/null
wait_for 30 "fl re-admitted as attempt 2" bash -c "kubectl -n lf get pods -l gangq.io/job=fl,gangq.io/attempt=2 -o name | grep -c . | grep -qx 2"
wait_jsonpath 20 Running -n lf gpujob fl -o jsonpath='{.status.state}'
wait_for 20 "attempt 1 pods gone or finished" bash -c "[ -z \"\$(kubectl -n lf get pod fl-1-1 -o name 2>/dev/null)\" ]"
ev=$(k -n lf get events --field-selector involvedObject.name=fl,reason=Requeued -o jsonpath='{.items[*].message}')
assert_contains "$ev" "pod fl-1-0 failed" "Requeued event says why"
pass "failed pod: gang requeued (retry 1 of 1), surviving pod deleted, re-admitted as attempt 2"
fakelet fail lf fl-2-1 >/dev/null
wait_jsonpath 20 Failed -n lf gpujob fl -o jsonpath='{.status.state}'
assert_contains "$(k -n lf get gpujob fl -o jsonpath='{.status.message}')" "gave up after 1 retries" "Failed message"
wait_for 20 "fl's remaining pod deleted" bash -c "[ -z \"\$(kubectl -n lf get pod fl-2-0 -o name 2>/dev/null)\" ]"
pass "second failure: Failed after --max-retries 1: $(k -n lf get gpujob fl -o jsonpath='{.status.message}')"

# --- node lost: NotReady past the grace period requeues the gang elsewhere
job nl Training 1 4
wait_jsonpath 20 Running -n lf gpujob nl -o jsonpath='{.status.state}'
node=$(k -n lf get pod nl-1-0 -o jsonpath='{.spec.nodeName}')
fakelet notready "$node" >/dev/null
wait_for 30 "nl re-admitted on another node" bash -c "kubectl -n lf get pod nl-2-0 -o jsonpath='{.spec.nodeName}' 2>/dev/null | grep -q ."
new=$(k -n lf get pod nl-2-0 -o jsonpath='{.spec.nodeName}')
assert_ne "$node" "$new" "re-placed off the lost node"
assert_contains "$(k -n lf get events --field-selector involvedObject.name=nl,reason=Requeued -o jsonpath='{.items[*].message}')" "not ready" "Requeued: node not ready"
pass "node $node NotReady > 2s: gang requeued to $new"
fakelet ready "$node" >/dev/null

# --- inference (non-gang): only the lost replica is re-placed
job inf Inference 2 1
wait_jsonpath 20 Running -n lf gpujob inf -o jsonpath='{.status.state}'
keep_uid=$(k -n lf get pod inf-1-0 -o jsonpath='{.metadata.uid}')
fakelet fail lf inf-1-1 >/dev/null
wait_for 30 "replica 1 re-placed" bash -c "kubectl -n lf get pods -l gangq.io/job=inf,gangq.io/replica=1 -o jsonpath='{.items[*].metadata.name}' | grep -q 'inf-1-1-g'"
assert_eq "$keep_uid" "$(k -n lf get pod inf-1-0 -o jsonpath='{.metadata.uid}')" "replica 0's pod untouched"
wait_jsonpath 20 Running -n lf gpujob inf -o jsonpath='{.status.state}'
pass "inference replica 1 failed: re-placed alone ($(pods_of inf)), replica 0 kept"

# --- a gang pod deleted by someone else requeues the gang
job dl Batch 1 1
wait_jsonpath 20 Running -n lf gpujob dl -o jsonpath='{.status.state}'
k -n lf delete pod dl-1-0 --grace-period=0 --force >/dev/null 2>&1
wait_for 30 "dl re-admitted" bash -c "kubectl -n lf get pod dl-2-0 -o name >/dev/null 2>&1"
pass "pod deleted by someone else: gang requeued and re-admitted"
# --- the shape of an admitted job changed: requeued and placed again with the new shape
job rsz Batch 1 1
wait_jsonpath 20 Running -n lf gpujob rsz -o jsonpath='{.status.state}'
k -n lf patch gpujob rsz --type=merge -p '{"spec":{"gpu":{"count":2}}}' >/dev/null
wait_for 30 "rsz re-admitted with 2 GPUs" bash -c "kubectl -n lf get pod rsz-2-0 -o jsonpath='{.spec.containers[0].resources.limits.nvidia\.com/gpu}' 2>/dev/null | grep -qx 2"
wait_for 20 "old pod gone" bash -c "! kubectl -n lf get pod rsz-1-0 >/dev/null 2>&1"
wait_jsonpath 20 2 -n lf gpujob rsz -o jsonpath='{.status.gpus}'
pass "gpu.count 1 -> 2 on an admitted job: requeued, re-admitted as attempt 2 with 2 GPUs"

# --- a pod template the API server refuses: the job fails with the server's answer
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: badtpl, namespace: lf}
spec:
  gpu: {count: 1}
  template: {spec: {containers: [{name: Not_A_Valid_Name, image: busybox}]}}
YAML
wait_jsonpath 30 Failed -n lf gpujob badtpl -o jsonpath='{.status.state}'
msg=$(k -n lf get gpujob badtpl -o jsonpath='{.status.message}')
assert_contains "$msg" "pod create refused by the API server: POST" "Failed with the API server's answer"
assert_contains "$msg" "HTTP 422" "the status code"
wait_for 10 "quota released" bash -c "[ \"\$(kubectl -n lf get gpujob badtpl -o jsonpath='{.status.admission}')\" = '' ]"
pass "pod template refused (422): job Failed: $msg"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
