#!/usr/bin/env bash
# GPUs held by live pods are never offered again, whatever happens to their Team. A quota edit
# that makes a Team invalid (lendingLimit above gpus) keeps the last valid spec in force (also
# across a controller restart) and is reported on the Team's Valid condition and as a Warning
# Event; deleting the Team while its jobs run leaves their GPUs accounted (the jobs keep running
# without a team, Valid=False) and its new jobs wait with a condition. Another team's queued
# work is never bound onto those GPUs: no node is ever booked beyond its capacity.
. "$(dirname "$0")/lib.sh"

fakelet add-node n1 --gpus 8 --cpu 64 --memory 256Gi --label kubernetes.io/hostname=n1 >/dev/null
k create namespace ta >/dev/null
k create namespace tb >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: ta}
spec: {namespaces: [ta], quota: [{gpuType: "*", gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tb}
spec: {namespaces: [tb]}
YAML
# tc is invalid from its creation: no valid spec of it is known
k create namespace tc >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tc}
spec: {namespaces: [tc], quota: [{gpuType: "*", gpus: 2, lendingLimit: 3}]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run

job() { # job NS NAME GPUS
  printf 'apiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec: {gpu: {count: %d}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n' "$2" "$1" "$3" |
    k apply -f - >/dev/null
}
# GPUs of live (not finished, not terminating) pods bound to n1
gpus_bound() {
  kubectl get pods -A -o json | jq '[.items[] | select(.spec.nodeName == "n1" and .status.phase != "Succeeded" and .status.phase != "Failed" and .metadata.deletionTimestamp == null) | (.spec.containers[].resources.limits["nvidia.com/gpu"] // "0" | tonumber)] | add // 0'
}
check_capacity() {
  local g
  g=$(gpus_bound)
  [ "$g" -le 8 ] || fail "n1 (8 GPUs) has $g GPUs bound: over-committed ($1)"
}
valid_cond() { kubectl get team ta -o jsonpath="{.status.conditions[?(@.type==\"Valid\")].$1}"; }

gq_ctl_start --leader-elect=false
job ta a1 4
job ta a2 4
wait_for 30 "a1 and a2 Running" bash -c "[ \"\$(kubectl -n ta get gj a1 a2 -o jsonpath='{.items[*].status.state}')\" = 'Running Running' ]"
job tb b1 4
job tb b2 4
wait_for 20 "b1 waits" bash -c "kubectl -n tb get gj b1 -o jsonpath='{.status.state}' | grep -q Queued"
wait_for 20 "ta Valid=True" bash -c "[ \"\$(kubectl get team ta -o jsonpath='{.status.conditions[?(@.type==\"Valid\")].status}')\" = True ]"
check_capacity "before the edit"
job tc c1 1
wait_for 20 "c1 waits on its invalid Team" bash -c "kubectl -n tc get gj c1 -o jsonpath='{.status.conditions[?(@.type==\"Valid\")].reason}' | grep -q InvalidTeam"
assert_contains "$(k -n tc get gj c1 -o jsonpath='{.status.message}')" "Team tc is invalid" "c1's message names its Team"
assert_contains "$(k get team tc -o jsonpath='{.status.conditions[?(@.type=="Valid")].message}')" "no earlier valid spec is known" \
  "tc's condition says nothing valid is in force"
assert_eq Queued "$(k -n tc get gj c1 -o jsonpath='{.status.state}')" "c1 waits"
pass "ta runs a1+a2 on all 8 GPUs of n1; tb's b1, b2 wait; Team ta Valid=True; c1 of the invalid Team tc waits (InvalidTeam)"

# --- an invalid quota edit: the last valid spec stays in force
k patch team ta --type=merge -p '{"spec":{"quota":[{"gpuType":"*","gpus":8,"lendingLimit":12}]}}' >/dev/null
wait_for 20 "ta Valid=False" bash -c "[ \"\$(kubectl get team ta -o jsonpath='{.status.conditions[?(@.type==\"Valid\")].status}')\" = False ]"
assert_eq InvalidSpec "$(valid_cond reason)" "Valid=False reason"
assert_contains "$(valid_cond message)" "lendingLimit" "the condition names the field"
assert_contains "$(valid_cond message)" "generation 1 stays in force" "the condition says what is in force"
assert_eq 1 "$(k get team ta -o jsonpath='{.status.observedGeneration}')" "observedGeneration is the valid generation"
wait_for 20 "Warning Event on Team ta" bash -c "kubectl get events -A -o json | jq -e '[.items[] | select(.involvedObject.kind == \"Team\" and .involvedObject.name == \"ta\" and .type == \"Warning\" and .reason == \"InvalidSpec\")] | length == 1' >/dev/null"
sleep 3
check_capacity "after the invalid edit"
assert_eq "Running Running" "$(k -n ta get gj a1 a2 -o jsonpath='{.items[*].status.state}')" "ta's jobs keep running"
assert_eq "ta ta" "$(k -n ta get gj a1 a2 -o jsonpath='{.items[*].status.team}')" "ta's jobs keep their team"
assert_eq "Queued Queued" "$(k -n tb get gj b1 b2 -o jsonpath='{.items[*].status.state}')" "tb's jobs still wait"
assert_eq 0 "$(k -n tb get pods -o name | wc -l)" "no pod of tb bound"
pass "invalid edit: Valid=False InvalidSpec naming lendingLimit, Warning Event, last valid spec in force, n1 not over-committed"

# --- a restart keeps the last valid spec (it lives in the store), and reports the edit once more
gq_ctl_stop
gq_ctl_start --leader-elect=false
wait_for 30 "controller reconciled" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
sleep 4
check_capacity "after the restart"
assert_eq "ta ta" "$(k -n ta get gj a1 a2 -o jsonpath='{.items[*].status.team}')" "ta's jobs keep their team after a restart"
assert_eq "Queued Queued" "$(k -n tb get gj b1 b2 -o jsonpath='{.items[*].status.state}')" "tb's jobs still wait after a restart"
assert_eq False "$(valid_cond status)" "still Valid=False after a restart"
pass "restart: the last valid spec of ta is still in force"

# --- the Team is deleted while its jobs run
k delete team ta >/dev/null
wait_for 20 "a1 reports no team" bash -c "kubectl -n ta get gj a1 -o jsonpath='{.status.conditions[?(@.type==\"Valid\")].status}' | grep -q False"
job ta a3 2
wait_for 20 "a3 waits with a condition" bash -c "kubectl -n ta get gj a3 -o jsonpath='{.status.conditions[?(@.type==\"Valid\")].reason}' | grep -q NoTeam"
sleep 3
check_capacity "after the Team was deleted"
assert_eq "Running Running" "$(k -n ta get gj a1 a2 -o jsonpath='{.items[*].status.state}')" "ta's jobs keep running without a team"
assert_eq Queued "$(k -n ta get gj a3 -o jsonpath='{.status.state}')" "a new job of the deleted team waits"
assert_eq "Queued Queued" "$(k -n tb get gj b1 b2 -o jsonpath='{.items[*].status.state}')" "tb's jobs still wait"
assert_eq 0 "$(k -n tb get pods -o name | wc -l)" "no pod of tb bound"
pass "Team deleted: a1, a2 keep their 8 GPUs (Valid=False NoTeam), a3 waits with NoTeam, tb still waits"

# --- the GPUs free up only when the pods finish
fakelet succeed ta a1-1-0 >/dev/null
wait_for 30 "b1 admitted onto the freed GPUs" bash -c "kubectl -n tb get gj b1 -o jsonpath='{.status.state}' | grep -Eq 'Admitted|Running'"
sleep 3
check_capacity "after a1 finished"
assert_eq Queued "$(k -n tb get gj b2 -o jsonpath='{.status.state}')" "b2 still waits (a2 holds 4 GPUs)"
pass "a1 finished: b1 took its 4 GPUs, b2 waits for a2's; n1 never over 8 GPUs"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
