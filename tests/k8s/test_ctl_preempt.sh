#!/usr/bin/env bash
# Controller scenarios 4, 5 and 6: a high-priority Inference job preempts Batch work (victim's
# pods deleted with their grace period, the fake kubelet finishes the deletes, victim
# Preempted naming the preemptor, Event), the victim is re-admitted when room returns;
# suspend and resume with `kubectl patch gpujob`; a quota edit with `kubectl patch team`
# lands in `gangq audit`.
. "$(dirname "$0")/lib.sh"

fakelet add-node g1 --gpus 8 --cpu 64 --memory 512Gi --label nvidia.com/gpu.product=NVIDIA-L4 \
  --label nvidia.com/gpu.memory=23034 --label kubernetes.io/hostname=g1 >/dev/null
for ns in serve bt; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: serve}
spec: {namespaces: [serve], maxPriority: 100000, quota: [{gpuType: "*", gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: bt}
spec: {namespaces: [bt], quota: [{gpuType: "*", gpus: 8}]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s

wait_state() { # TIMEOUT NS NAME REGEX
  wait_for "$1" "gpujob $2/$3 state matching $4" bash -c "kubectl -n $2 get gpujob $3 -o jsonpath='{.status.state}' | grep -Eqx '$4'"
}
job() { gq_job "$@" | k apply -f - >/dev/null; } # NS NAME CLASS PRIORITY REPLICAS COUNT
job bt victim Batch 10 2 4
wait_jsonpath 20 Running -n bt gpujob victim -o jsonpath='{.status.state}'
old_pods=$(k -n bt get pods -l gangq.io/job=victim -o jsonpath='{.items[*].metadata.name}')
pass "batch job Running on all 8 GPUs ($old_pods)"

job serve infer Inference 100000 1 4
wait_state 30 serve infer 'Admitted|Running'
st=$(k -n bt get gpujob victim -o jsonpath='{.status.state}|{.status.lastPreemption.by}|{.status.preemptions}')
assert_match "$st" "^(Preempted|Admitted|Running|Queued)\|serve/infer\|1$" "victim preempted by serve/infer once"
for p in $old_pods; do
  wait_for 20 "victim pod $p deleted" bash -c "! kubectl -n bt get pod $p >/dev/null 2>&1"
done
ev=$(k -n bt get events --field-selector involvedObject.name=victim,reason=Preempted -o jsonpath='{.items[*].message}')
assert_contains "$ev" "serve/infer" "Preempted event names the preemptor"
assert_eq 1 "$(k -n serve get pods -l gangq.io/job=infer -o name | wc -l)" "inference pod created"
pass "inference job admitted by preempting the batch gang: its pods deleted, Preempted event: $ev"

# The victim waits (only 4 GPUs free now) and is re-admitted when the inference job leaves.
wait_jsonpath 20 Preempted -n bt gpujob victim -o jsonpath='{.status.state}'
k -n serve delete gpujob infer >/dev/null
wait_state 30 bt victim 'Admitted|Running'
wait_for 20 "victim pods re-created" bash -c "[ \$(kubectl -n bt get pods -l gangq.io/job=victim -o name | wc -l) = 2 ]"
new_pods=$(k -n bt get pods -l gangq.io/job=victim -o jsonpath='{.items[*].metadata.name}')
assert_ne "$old_pods" "$new_pods" "new attempt, new pod names"
wait_for 20 "inference pod deleted with its GPUJob" bash -c "[ \$(kubectl -n serve get pods -l gangq.io/job=infer -o name | wc -l) = 0 ]"
pass "inference job deleted: its pod deleted by gangq, victim re-admitted ($new_pods)"

# --- suspend / resume
wait_jsonpath 20 Running -n bt gpujob victim -o jsonpath='{.status.state}'
k -n bt patch gpujob victim --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_jsonpath 20 Suspended -n bt gpujob victim -o jsonpath='{.status.state}'
wait_for 20 "suspended job's pods deleted" bash -c "[ \$(kubectl -n bt get pods -l gangq.io/job=victim -o name | wc -l) = 0 ]"
wait_for 10 "team usage released" bash -c "[ \"\$(kubectl get team bt -o jsonpath='{.status.used}')\" = 0 ]"
pass "suspend: state Suspended, pods deleted, quota released"
k -n bt patch gpujob victim --type=merge -p '{"spec":{"suspend":false}}' >/dev/null
wait_jsonpath 30 Running -n bt gpujob victim -o jsonpath='{.status.state}'
ev=$(k -n bt get events --field-selector involvedObject.name=victim -o jsonpath='{range .items[*]}{.reason}{" "}{end}')
assert_contains "$ev" "Suspended" "Suspended event"
assert_contains "$ev" "Resumed" "Resumed event"
pass "resume: re-admitted and Running; Events: $ev"

# --- quota edit lands in the audit log
k patch team bt --type=merge -p '{"spec":{"quota":[{"gpuType":"*","gpus":2}]}}' >/dev/null
wait_for 10 "quota-edit in gangq audit" bash -c "'$GANGQ_BIN' audit --db '$GQ_TEST_TMP/gangq.db' --team bt | grep -q quota-edit"
out=$("$GANGQ_BIN" audit --db "$GQ_TEST_TMP/gangq.db" --team bt)
line=$(grep quota-edit <<<"$out")
assert_contains "$line" '"gpus":8' "old value in the audit entry"
assert_contains "$line" '"gpus":2' "new value in the audit entry"
sleep 2
assert_eq Running "$(k -n bt get gpujob victim -o jsonpath='{.status.state}')" "lowering the quota does not kill running work"
job bt more Batch 10 1 1
wait_jsonpath 20 Queued -n bt gpujob more -o jsonpath='{.status.state}'
pass "quota edit audited (old and new spec), running work kept, new work waits: $line"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
