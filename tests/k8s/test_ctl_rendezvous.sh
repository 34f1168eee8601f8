#!/usr/bin/env bash
# Multi-node training that can start: a 4-replica gang gets a headless Service (clusterIP None,
# selector gangq.io/job, publishNotReadyAddresses, owned by its GPUJob), pods with hostname
# "<job>-<i>" and subdomain "<job>", and the rendezvous environment in every container and
# init container (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, NODE_RANK, GANGQ_*), never
# overriding a variable the template sets; a requeue keeps hostnames, environment and Service;
# deleting the job deletes the Service (by the controller: no garbage collector runs here).
# Also: a single-replica job gets the environment (MASTER_ADDR=localhost) and no Service; a
# job name too long for replica hostnames gets neither (a Warning Event says why) but still
# RANK/WORLD_SIZE; a finished job keeps its Service until it is deleted; a Service of the job's name that is not
# gangq's is left alone (Warning Event), one an earlier GPUJob of the same name owned is
# replaced; spec.masterPort sets the port.
. "$(dirname "$0")/lib.sh"

for i in 1 2 3 4 5; do
  fakelet add-node "n$i" --gpus 4 --cpu 32 --memory 256Gi --label "kubernetes.io/hostname=n$i" >/dev/null
done
k create namespace rz >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: rz}
spec: {namespaces: [rz]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --max-retries 3

cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: train, namespace: rz}
spec:
  class: Training
  replicas: 4
  gpu: {count: 4}
  template:
    spec:
      terminationGracePeriodSeconds: 1
      restartPolicy: Never
      initContainers:
      - {name: init, image: busybox}
      containers:
      - name: main
        image: busybox
        env: [{name: MASTER_PORT, value: "12345"}, {name: MINE, value: kept}]
      - {name: side, image: busybox}
YAML
wait_jsonpath 30 Running -n rz gpujob train -o jsonpath='{.status.state}'
uid=$(k -n rz get gpujob train -o jsonpath='{.metadata.uid}')
wait_for 20 "Service rz/train" kubectl -n rz get service train
svc=$(k -n rz get service train -o json)
assert_eq "None" "$(jq -r .spec.clusterIP <<<"$svc")" "headless (clusterIP None)"
assert_eq '{"gangq.io/job":"train"}' "$(jq -c .spec.selector <<<"$svc")" "selector on the job label"
assert_eq true "$(jq -r .spec.publishNotReadyAddresses <<<"$svc")" "publishNotReadyAddresses"
assert_eq "gangq.io/v1alpha1 GPUJob train $uid true" \
  "$(jq -r '.metadata.ownerReferences[0] | "\(.apiVersion) \(.kind) \(.name) \(.uid) \(.controller)"' <<<"$svc")" "owned by the GPUJob"
svc_uid=$(jq -r .metadata.uid <<<"$svc")
pass "headless Service train: selector gangq.io/job=train, publishNotReadyAddresses, ownerReference to GPUJob $uid"

# check_pods ATTEMPT: the 4 pods of that attempt have the stable hostnames and the environment
check_pods() {
  local a=$1 pods r p want
  pods=$(k -n rz get pods -l "gangq.io/job=train,gangq.io/attempt=$a" -o json)
  assert_eq 4 "$(jq '.items | length' <<<"$pods")" "4 pods of attempt $a"
  assert_eq "0 1 2 3" "$(jq -r '[.items[].metadata.labels["gangq.io/replica"]] | sort | join(" ")' <<<"$pods")" "replicas 0..3"
  for r in 0 1 2 3; do
    p=$(jq -c --arg r "$r" '.items[] | select(.metadata.labels["gangq.io/replica"] == $r)' <<<"$pods")
    assert_eq "train-$a-$r train-$r train" "$(jq -r '"\(.metadata.name) \(.spec.hostname) \(.spec.subdomain)"' <<<"$p")" "pod name carries the attempt, hostname does not"
    # every container and init container, in the same order
    want="MASTER_ADDR=train-0.train.rz.svc MASTER_PORT=29500 WORLD_SIZE=4 RANK=$r NODE_RANK=$r GANGQ_REPLICA_INDEX=$r GANGQ_REPLICA_COUNT=4 GANGQ_MASTER_ADDR=train-0.train.rz.svc GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=train"
    assert_eq "$want" "$(jq -r '.spec.initContainers[0].env | map("\(.name)=\(.value)") | join(" ")' <<<"$p")" "init container env (replica $r)"
    assert_eq "$want" "$(jq -r '.spec.containers[1].env | map("\(.name)=\(.value)") | join(" ")' <<<"$p")" "second container env (replica $r)"
    # the template's own MASTER_PORT is kept (once), its other variables too
    assert_eq "MASTER_PORT=12345 MINE=kept MASTER_ADDR=train-0.train.rz.svc WORLD_SIZE=4 RANK=$r NODE_RANK=$r GANGQ_REPLICA_INDEX=$r GANGQ_REPLICA_COUNT=4 GANGQ_MASTER_ADDR=train-0.train.rz.svc GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=train" \
      "$(jq -r '.spec.containers[0].env | map("\(.name)=\(.value)") | join(" ")' <<<"$p")" "main container env (replica $r): the template's MASTER_PORT not overridden"
  done
}
check_pods 1
pass "attempt 1: pods train-1-{0..3} have hostnames train-{0..3}.train, RANK 0..3, WORLD_SIZE=4, MASTER_ADDR=train-0.train.rz.svc in every container; template MASTER_PORT=12345 kept"

# --- requeue: a failed pod requeues the gang; the new attempt keeps hostnames and environment
fakelet fail rz train-1-2 >/dev/null
wait_for 40 "train re-admitted as attempt 2" bash -c "[ \$(kubectl -n rz get pods -l gangq.io/job=train,gangq.io/attempt=2 -o name | wc -l) = 4 ]"
wait_jsonpath 30 Running -n rz gpujob train -o jsonpath='{.status.state}'
check_pods 2
assert_eq "$svc_uid" "$(k -n rz get service train -o jsonpath='{.metadata.uid}')" "the same Service after the requeue"
assert_contains "$(grep 'job=rz/train' "$GQ_TEST_TMP/controller.log")" "headless service created" "Service creation logged"
pass "requeued (pod failed): attempt 2 pods train-2-{0..3} keep hostnames train-{0..3} and the same environment; Service $svc_uid kept"

# --- single replica: environment, no hostname, no Service
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: solo, namespace: rz}
spec:
  gpu: {count: 1}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 30 Running -n rz gpujob solo -o jsonpath='{.status.state}'
p=$(k -n rz get pod solo-1-0 -o json)
assert_eq "MASTER_ADDR=localhost MASTER_PORT=29500 WORLD_SIZE=1 RANK=0 NODE_RANK=0 GANGQ_REPLICA_INDEX=0 GANGQ_REPLICA_COUNT=1 GANGQ_MASTER_ADDR=localhost GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=solo" \
  "$(jq -r '.spec.containers[0].env | map("\(.name)=\(.value)") | join(" ")' <<<"$p")" "single-replica env"
assert_eq "null null" "$(jq -r '"\(.spec.hostname) \(.spec.subdomain)"' <<<"$p")" "no hostname for a single replica"
assert_fails "no Service for a single-replica job" k -n rz get service solo
pass "single replica: WORLD_SIZE=1 RANK=0 MASTER_ADDR=localhost, no hostname, no Service"

# --- the Service goes when the job is deleted (the controller deletes it: no GC here)
k -n rz delete gpujob train --wait=false >/dev/null
wait_for 30 "Service train deleted" bash -c "! kubectl -n rz get service train >/dev/null 2>&1"
pass "GPUJob deleted: its Service deleted by the controller"

# --- a name too long for "<job>-<i>" (62 + 2 > 63): no Service, no hostname, a Warning Event
long=$(printf 'l%.0s' $(seq 1 62))
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $long, namespace: rz}
spec:
  replicas: 2
  gpu: {count: 1}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 30 Running -n rz gpujob "$long" -o jsonpath='{.status.state}'
p=$(k -n rz get pods -l "gangq.io/job=$long,gangq.io/replica=1" -o json | jq -c '.items[0]')
assert_eq "null null" "$(jq -r '"\(.spec.hostname) \(.spec.subdomain)"' <<<"$p")" "no hostname for a name too long"
assert_eq "MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 NODE_RANK=1 GANGQ_REPLICA_INDEX=1 GANGQ_REPLICA_COUNT=2 GANGQ_MASTER_PORT=29500 GANGQ_JOB_NAME=$long" \
  "$(jq -r '.spec.containers[0].env | map("\(.name)=\(.value)") | join(" ")' <<<"$p")" "env without MASTER_ADDR"
assert_fails "no Service for a name too long" k -n rz get service "$long"
wait_for 20 "NoRendezvousService event" bash -c "kubectl -n rz get events --field-selector involvedObject.name=$long,reason=NoRendezvousService -o name | grep -q ."
ev=$(k -n rz get events --field-selector "involvedObject.name=$long,reason=NoRendezvousService" -o jsonpath='{.items[0].type} {.items[0].message}')
assert_contains "$ev" "Warning" "a Warning"
assert_contains "$ev" "would be 64 characters" "the Event says why"
k -n rz delete gpujob "$long" --wait=false >/dev/null
pass "62-character name: admitted and Running without Service or hostnames; Event: $ev"

# --- a finished job's Service is deleted; a foreign Service of the job's name is left alone
cat <<YAML | k apply -f - >/dev/null
apiVersion: v1
kind: Service
metadata: {name: web, namespace: rz}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: web, namespace: rz}
spec:
  replicas: 2
  gpu: {count: 1}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
---
apiVersion: v1
kind: Service
metadata:
  name: stale
  namespace: rz
  ownerReferences: [{apiVersion: gangq.io/v1alpha1, kind: GPUJob, name: stale, uid: 00000000-0000-0000-0000-0000000000aa, controller: true}]
spec: {clusterIP: None, selector: {gangq.io/job: stale}}
---
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: stale, namespace: rz}
spec:
  replicas: 2
  gpu: {count: 1}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
---
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: done, namespace: rz}
spec:
  replicas: 2
  masterPort: 23456
  gpu: {count: 1}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 30 Running -n rz gpujob done -o jsonpath='{.status.state}'
wait_for 20 "Service done" kubectl -n rz get service done
assert_eq "MASTER_PORT=23456 GANGQ_MASTER_PORT=23456" \
  "$(k -n rz get pod done-1-1 -o json | jq -r '.spec.containers[0].env | map(select(.name | test("MASTER_PORT"))) | map("\(.name)=\(.value)") | join(" ")')" "spec.masterPort"
fakelet succeed rz -l gangq.io/job=done >/dev/null
wait_jsonpath 30 Succeeded -n rz gpujob done -o jsonpath='{.status.state}'
assert_eq "$(k -n rz get gpujob done -o jsonpath='{.metadata.uid}')" "$(k -n rz get service done -o jsonpath='{.metadata.ownerReferences[0].uid}')" "a finished job keeps its Service"
k -n rz delete gpujob done --wait=false >/dev/null
wait_for 30 "Service done deleted" bash -c "! kubectl -n rz get service done >/dev/null 2>&1"
pass "spec.masterPort 23456 in MASTER_PORT; Succeeded: Service kept (like the finished pods), deleted with the job"
wait_jsonpath 30 Running -n rz gpujob web -o jsonpath='{.status.state}'
wait_for 20 "ServiceConflict event" bash -c "kubectl -n rz get events --field-selector involvedObject.name=web,reason=ServiceConflict -o name | grep -q ."
svc=$(k -n rz get service web -o json)
assert_eq "web null" "$(jq -r '"\(.spec.selector.app) \(.metadata.ownerReferences)"' <<<"$svc")" "foreign Service untouched"
wait_jsonpath 30 Running -n rz gpujob stale -o jsonpath='{.status.state}'
stale_uid=$(k -n rz get gpujob stale -o jsonpath='{.metadata.uid}')
wait_jsonpath 30 "$stale_uid true" -n rz service stale -o jsonpath='{.metadata.ownerReferences[0].uid} {.spec.publishNotReadyAddresses}'
pass "a Service left by an earlier GPUJob of the same name (owner uid ...00aa): replaced by one owned by the new job"
k -n rz delete gpujob web --wait=false >/dev/null
wait_for 30 "the release looked at web's Service" bash -c "grep 'not the job.s; not deleted' '$GQ_TEST_TMP/controller.log' | grep -q 'job=rz/web'"
assert_ok "foreign Service kept after the job is deleted" k -n rz get service web
pass "a Service named like the job that is not gangq's: left alone (Warning ServiceConflict), kept when the job goes"

gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
