#!/usr/bin/env bash
# Events narrate, the status is the record: Normal Events (Admitted, Waiting, Succeeded) share
# a budget of --event-burst at once and --event-qps per second, one namespace at most a quarter
# of it; past it they are not sent (gangq_events_total{result="throttled"}) while every job's
# status is still written. A namespace flooding jobs leaves another namespace its share.
# Warning Events (here a refused spec) go out even with the budget spent. An idle budget
# refills.
. "$(dirname "$0")/lib.sh"

ns=ev
for n in 1 2 3 4 5; do fakelet add-node "e$n" --gpus 8 >/dev/null; done
gq_team ev "$ns" ev2
gq_fakelet_loop --interval 0.3 --auto-run
# no full pass but the first: this test's objects change by events only (no node heartbeats)
# in all 8 at once and 4 per second; a namespace 2 at once and 1 per second
gq_ctl_start --leader-elect=false --min-runtime 0s --event-qps 4 --event-burst 8 --full-resync-interval 1h \
  --listen 127.0.0.1:0
port=$(gq_ctl_port)
[ -n "$port" ] || fail "no metrics port"
job() { # NAME [TOPOLOGY_REQUIRED [NAMESPACE]]
  local topo=""
  [ -z "${2:-}" ] || topo="topology: {required: $2}"
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec:\n  class: Batch\n  gpu: {count: 1}\n  %s\n  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}\n' \
    "$1" "${3:-$ns}" "$topo"
}
events() { # TYPE [REASON]: gangq's Events of that type on GPUJobs of the namespace
  k -n "$ns" get events -o json | jq --arg t "$1" --arg r "${2:-}" \
    '[.items[] | select(.involvedObject.kind == "GPUJob" and .type == $t and ($r == "" or .reason == $r))] | length'
}

# One apply: 8 refused specs (a Warning each), 30 jobs that fit (an Admitted Event each, 30
# Normal Events against the namespace's 2 at once and 1 per second) and, in ev2, 2 jobs whose
# Admitted Events come after them in the same reconcile
jobs="$GQ_TEST_TMP/jobs.yaml"
: >"$jobs"
for i in $(seq 1 8); do job "bad$i" planet >>"$jobs"; done
for i in $(seq -w 1 30); do job "j$i" >>"$jobs"; done
for i in 1 2; do job "o$i" "" ev2 >>"$jobs"; done
t0=$(date +%s%N)
k apply -f "$jobs" >/dev/null
wait_for 60 "30 jobs Running" bash -c "[ \$(kubectl -n $ns get gpujobs -o jsonpath='{range .items[*]}{.status.state}{\"\\n\"}{end}' | grep -c '^Running$') -eq 30 ]"
wait_for 20 "8 Warning Events" bash -c "[ \$(kubectl -n $ns get events --field-selector type=Warning -o name | wc -l) -ge 8 ]"
sleep 1 # Events queued at the last admission reach the API server
el=$(( ($(date +%s%N) - t0) / 1000000000 + 1 ))
normal=$(events Normal)
thr=$(gq_metric "$port" 'gangq_events_total{result="throttled"}')
sent=$(gq_metric "$port" 'gangq_events_total{result="sent"}')
[ "$normal" -le $(( 2 + el )) ] || fail "$normal Normal Events in ${el}s in $ns, its budget 2 + 1/s"
o=$(k -n ev2 get events --field-selector reason=Admitted -o name | wc -l)
assert_eq 2 "$o" "ev2's two jobs have their Admitted Events (the flooding namespace took its quarter only)"
[ "${thr:-0}" -ge 1 ] || fail "no Normal Event throttled (gangq_events_total{result=\"throttled\"} ${thr:-missing})"
[ "$sent" -ge $(( normal + 8 )) ] || fail "gangq_events_total{result=\"sent\"} $sent < $normal Normal + 8 Warning Events seen"
for i in $(seq 1 8); do
  assert_eq 1 "$(k -n "$ns" get events --field-selector "involvedObject.name=bad$i,type=Warning" -o name | wc -l)" \
    "bad$i: one Warning Event"
done
for i in $(seq -w 1 30); do
  assert_ne "" "$(k -n "$ns" get gpujob "j$i" -o jsonpath='{.status.conditions[?(@.type=="Admitted")].lastTransitionTime}')" \
    "j$i status shows its admission"
done
pass "30 jobs admitted, every status written; $normal Normal Events in ${el}s (its budget 2 + 1/s), $thr throttled; ev2's 2 Admitted Events sent; 8 Warning Events, none throttled"

# The Team's status changed as the jobs were admitted (gangq's own writes, coming back on the
# watch): no full pass over every job for them
tp=$(jq -c 'select(.verb == "patch" and .objectRef.resource == "teams" and .objectRef.subresource == "status")' \
  "$GQ_ENV_DIR/audit.log" | wc -l)
[ "$tp" -ge 1 ] || fail "no Team status write seen"
assert_eq 1 "$(gq_metric "$port" gangq_reconciles_full_total)" "full passes: only the first ($tp Team status writes came back)"
pass "$tp Team status writes came back on the watch: no full pass for them"

# idle, the budget refills: a new job gets its Admitted Event
sleep 5
job late | k apply -f - >/dev/null
wait_for 30 "an Admitted Event for late" bash -c \
  "kubectl -n $ns get events --field-selector involvedObject.name=late,reason=Admitted -o name | grep -q ."
pass "after 5 s idle the budget refilled: late's Admitted Event sent"
