#!/usr/bin/env bash
# Released pods that terminate slowly hold only their own GPUs, never the cluster: while a
# preempted job's pods and a suspended job's pods stay terminating (the fake kubelet holds
# the graceful deletes), an unrelated job on another node is admitted and runs; the
# preemptor waits for its victim's pods ("waiting for 1 preempted job to stop"); jobs that
# would need the terminating pods' GPUs are not admitted onto them (no node is ever booked
# past its GPUs). Once the deletes finish, the preemptor and the job waiting for the
# suspended job's GPUs are admitted.
. "$(dirname "$0")/lib.sh"

fakelet add-node na --gpus 4 --label drain.gangq.io/pool=a >/dev/null
fakelet add-node nc --gpus 4 --label drain.gangq.io/pool=c >/dev/null
fakelet add-node nd --gpus 2 --label drain.gangq.io/pool=d >/dev/null
k create namespace dr >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: dr}
spec: {namespaces: [dr]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run --hold-deletes
gq_ctl_start --leader-elect=false --min-runtime 0s

job() { # NAME CLASS PRIORITY GPUS POOL
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: dr}
spec:
  class: $2
  priority: $3
  gpu: {count: $4}
  template:
    spec:
      terminationGracePeriodSeconds: 60
      restartPolicy: Never
      nodeSelector: {drain.gangq.io/pool: $5}
      containers: [{name: c, image: busybox}]
YAML
}
state() { kubectl -n dr get gpujob "$1" -o jsonpath='{.status.state}'; }
live_pods() { # JOB: pods of the job that still exist (terminating ones included)
  kubectl -n dr get pods -l "gangq.io/job=$1" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{end}'
}
# No node holds more GPUs than it has, counting every pod not finished (terminating ones too).
check_no_overbooking() {
  local over
  over=$(kubectl get pods -A -o json | jq -r '[.items[] | select(.status.phase != "Succeeded" and .status.phase != "Failed")
      | {n: .spec.nodeName, g: ([.spec.containers[].resources.limits["nvidia.com/gpu"] // "0" | tonumber] | add)}]
      | group_by(.n) | map({n: .[0].n, g: (map(.g) | add)})
      | map(select((.n == "na" and .g > 4) or (.n == "nc" and .g > 4) or (.n == "nd" and .g > 2)))
      | map("\(.n)=\(.g)") | join(" ")')
  [ -z "$over" ] || fail "GPUs booked twice: $over"
}

job victim Batch 10 4 a
job sus Batch 10 2 d
wait_jsonpath 30 Running -n dr gpujob victim -o jsonpath='{.status.state}'
wait_jsonpath 30 Running -n dr gpujob sus -o jsonpath='{.status.state}'
pass "victim holds all 4 GPUs of na, sus both GPUs of nd"

# A preemption and a suspend whose pods then stay terminating.
job pre Inference 1000 4 a
wait_jsonpath 30 Preempted -n dr gpujob victim -o jsonpath='{.status.state}'
k -n dr patch gpujob sus --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_jsonpath 30 Suspended -n dr gpujob sus -o jsonpath='{.status.state}'
wait_for 20 "victim's pod marked for deletion" bash -c \
  "kubectl -n dr get pod victim-1-0 -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
wait_for 20 "sus's pod marked for deletion" bash -c \
  "kubectl -n dr get pod sus-1-0 -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
pass "victim preempted by dr/pre and sus suspended; their pods stay terminating"

# During the drain: unrelated work is admitted; nothing lands on the terminating pods' GPUs.
job other Batch 10 2 c
job squeeze Batch 10 1 a
job squeeze2 Batch 10 2 d
wait_jsonpath 30 Running -n dr gpujob other -o jsonpath='{.status.state}'
assert_eq "victim-1-0 " "$(live_pods victim)" "victim's pod still terminating while other was admitted"
assert_eq "sus-1-0 " "$(live_pods sus)" "sus's pod still terminating while other was admitted"
pass "an unrelated job on another node was admitted and runs during the drain"
sleep 4 # cycles keep running; anything wrongly admitted would be by now
assert_eq "victim-1-0 " "$(live_pods victim)" "victim's pod still terminating"
assert_eq "sus-1-0 " "$(live_pods sus)" "sus's pod still terminating"
assert_eq Queued "$(state pre)" "the preemptor waits for its victim's pods"
assert_contains "$(kubectl -n dr get gpujob pre -o jsonpath='{.status.message}')" \
  "waiting for 1 preempted job to stop" "the preemptor says why it waits"
assert_eq "" "$(live_pods pre)" "no pod of the preemptor yet"
assert_eq Queued "$(state squeeze)" "no GPU of na is free while the victim's pod terminates"
assert_eq Queued "$(state squeeze2)" "no GPU of nd is free while sus's pod terminates"
assert_eq "" "$(live_pods squeeze)$(live_pods squeeze2)" "no pod on the terminating pods' GPUs"
check_no_overbooking
pass "preemptor waits for its victim, squeeze/squeeze2 wait for the terminating pods' GPUs"

# The deletes finish: the freed GPUs go to the preemptor and to squeeze2.
fakelet finish-deletes dr >/dev/null 2>&1
wait_for 30 "pre admitted" bash -c "kubectl -n dr get gpujob pre -o jsonpath='{.status.state}' | grep -Eqx 'Admitted|Running'"
wait_for 30 "squeeze2 admitted" bash -c "kubectl -n dr get gpujob squeeze2 -o jsonpath='{.status.state}' | grep -Eqx 'Admitted|Running'"
assert_eq na "$(kubectl -n dr get pod pre-1-0 -o jsonpath='{.spec.nodeName}')" "the preemptor on the victim's node"
assert_eq Preempted "$(state victim)" "the victim waits: na is full"
assert_eq Queued "$(state squeeze)" "squeeze waits: na is full"
check_no_overbooking
pass "deletes finished: pre admitted on na, squeeze2 on nd; victim and squeeze wait"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
