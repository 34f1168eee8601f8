#!/usr/bin/env bash
# The write budget: the writes that only narrate (Normal Events, status refreshes) are paid by
# admissions (each credits its pods + 2, every write sent spends one), else go out at one per
# second each. A full 1-GPU node runs j00; 20 more jobs wait, with no time budget on Events
# (--event-qps 0): nothing admitted pays for their Waiting Events, so the floor lets about one
# out and the rest are not sent (the status is the record: each shows why it waits). Without
# the budget all 20 would go. Then a 24-GPU node joins: the 20 are admitted, and their
# Admitted Events, paid by those admissions, all go out.
. "$(dirname "$0")/lib.sh"

ns=wb
fakelet add-node w1 --gpus 1 >/dev/null
gq_team wb "$ns"
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --event-qps 0 --status-refresh-qps 0 --listen 127.0.0.1:0
port=$(gq_ctl_port)
[ -n "$port" ] || fail "no metrics port"
job() { # NAME
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec:\n  class: Batch\n  gpu: {count: 1}\n  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}\n' \
    "$1" "$ns"
}
events() { # REASON: gangq's Normal Events of that reason on the namespace's GPUJobs
  k -n "$ns" get events -o json | jq --arg r "$1" \
    '[.items[] | select(.involvedObject.kind == "GPUJob" and .type == "Normal" and .reason == $r)] | length'
}

job j00 | k apply -f - >/dev/null
wait_jsonpath 40 Running -n "$ns" gpujob j00 -o jsonpath='{.status.state}'
jobs="$GQ_TEST_TMP/jobs.yaml"
: >"$jobs"
for i in $(seq -w 1 20); do job "j$i" >>"$jobs"; done
t0=$(date +%s%N)
k apply -f "$jobs" >/dev/null
# every one of them shows why it waits (a state change, never held by the budget)
wait_for 30 "20 jobs Queued with a wait reason" bash -c \
  "[ \$(kubectl -n $ns get gpujobs -o jsonpath='{range .items[*]}{.status.waitReason}{\"\\n\"}{end}' | grep -c .) -ge 20 ]"
sleep 3
el=$(( ($(date +%s%N) - t0) / 1000000000 + 1 ))
w=$(events Waiting)
thr=$(gq_metric "$port" 'gangq_events_total{result="throttled"}')
# j00's admission paid for at most one narrating write beyond its own pod and statuses; the
# jobs' waits were published in a reconcile or two, when the floor had a token or two
[ "$w" -le 4 ] || fail "$w Waiting Events for 20 waiting jobs with nothing admitted to pay for them"
[ "$w" -ge 1 ] || fail "no Waiting Event in ${el}s: the floor lets one a second out"
[ "${thr:-0}" -ge 16 ] || fail "gangq_events_total{result=\"throttled\"} ${thr:-missing}, want the Waiting Events past the budget"
credit=$(gq_metric "$port" gangq_write_budget)
awk -v c="${credit:-1}" 'BEGIN { exit !(c < 1) }' || fail "gangq_write_budget ${credit:-missing}, want below 1 (nothing admitted pays)"
pass "20 jobs wait, each with its reason; $w Waiting Events sent, $thr not (no admission pays), the write budget at $credit"

# capacity: the 20 are admitted, and each admission pays for its Admitted Event
fakelet add-node w2 --gpus 24 >/dev/null
wait_for 60 "20 more jobs Running" bash -c \
  "[ \$(kubectl -n $ns get gpujobs -o jsonpath='{range .items[*]}{.status.state}{\"\\n\"}{end}' | grep -c '^Running$') -ge 21 ]"
sleep 1 # Events queued at the admissions reach the API server
a=$(events Admitted)
[ "$a" -ge 20 ] || fail "$a Admitted Events for 21 admissions: the admissions pay for them"
pass "20 jobs admitted together: $a Admitted Events, paid by the admissions"
