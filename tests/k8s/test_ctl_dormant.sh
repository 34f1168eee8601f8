#!/usr/bin/env bash
# Finished jobs sleep: once a job is Succeeded or Failed, its status accepted and every pod of
# it terminated, reconciles (full passes included) skip it and its decoded spec is freed
# (gangq_jobs_dormant counts them). An event of the job wakes it: an edit fixing a Failed
# job's spec queues it again, a label change is looked at and writes nothing, a deletion
# drops its store row. After a restart finished jobs fall asleep again without a write.
. "$(dirname "$0")/lib.sh"

fakelet add-node d1 --gpus 4 >/dev/null
gq_team dm dm
gq_fakelet_loop --interval 0.3 --auto-run
# full passes every 0.5 s: a dormant job must stay asleep through them
start_ctl() {
  gq_ctl_start --leader-elect=false --min-runtime 0s --cycle-interval 0.5s --full-resync-interval 0.5s \
    --listen 127.0.0.1:0
  port=$(gq_ctl_port)
}
wait_dormant() { # N
  wait_for 20 "gangq_jobs_dormant $1" bash -c \
    "curl -sf http://127.0.0.1:$port/metrics | grep -qx 'gangq_jobs_dormant $1'"
}
job() { # NAME [TOPOLOGY_REQUIRED]
  local topo=""
  [ -z "${2:-}" ] || topo="topology: {required: $2}"
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: dm}
spec:
  class: Batch
  gpu: {count: 1}
  $topo
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
status_patches() { # NAME: PATCHes of its status by the controller so far
  jq -c --arg n "$1" 'select(.verb == "patch" and .objectRef.resource == "gpujobs" and .objectRef.subresource == "status"
    and .objectRef.name == $n and (.userAgent // "" | startswith("gangq")))' "$GQ_ENV_DIR/audit.log" 2>/dev/null | wc -l
}

start_ctl
for n in a1 a2 a3; do job "$n"; done
job bad planet
for n in a1 a2 a3; do wait_state 30 dm "$n" 'Admitted|Running'; done
wait_jsonpath 30 Failed -n dm gpujob bad -o jsonpath='{.status.state}'
wait_dormant 1
assert_eq 0 "$(gq_metric "$port" gangq_jobs_woken_total)" "nothing woken yet"
fakelet succeed dm -l gangq.io/job=a1 >/dev/null
fakelet succeed dm -l gangq.io/job=a2 >/dev/null
fakelet succeed dm -l gangq.io/job=a3 >/dev/null
for n in a1 a2 a3; do wait_jsonpath 30 Succeeded -n dm gpujob "$n" -o jsonpath='{.status.state}'; done
wait_dormant 4
f0=$(gq_metric "$port" gangq_reconciles_full_total)
sleep 2 # four full passes
f1=$(gq_metric "$port" gangq_reconciles_full_total)
[ "$(( f1 - f0 ))" -ge 3 ] || fail "only $(( f1 - f0 )) full passes in 2 s (--full-resync-interval 0.5s)"
assert_eq 4 "$(gq_metric "$port" gangq_jobs_dormant)" "finished jobs stay asleep through full passes"
assert_eq 3 "$(gq_metric "$port" 'gangq_jobs{state="Succeeded"}')" "a sleeping job still counts by state"
pass "3 Succeeded + 1 Failed (invalid) jobs asleep, through full passes"

# An edit that changes nothing gangq reads: woken, looked at, no status written, asleep again.
assert_eq 0 "$(gq_metric "$port" gangq_jobs_woken_total)" "no job woken by full passes alone"
before=$(status_patches a1)
k -n dm label gpujob a1 touched=yes >/dev/null
wait_for 10 "a1 woken" bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -qx 'gangq_jobs_woken_total 1'"
wait_dormant 4
sleep 1
assert_eq "$before" "$(status_patches a1)" "a woken finished job whose status is unchanged is not written again"
assert_eq Succeeded "$(k -n dm get gpujob a1 -o jsonpath='{.status.state}')" "a1 stays Succeeded"
pass "label on a sleeping job: woken once, nothing written ($before status patches before and after), asleep again"

# Fixing the invalid job's spec wakes it: queued and admitted.
k -n dm patch gpujob bad --type=merge -p '{"spec":{"topology":{"required":"node"}}}' >/dev/null
wait_state 30 dm bad 'Admitted|Running'
wait_dormant 3
pass "the sleeping Failed job, its spec fixed: $(k -n dm get gpujob bad -o jsonpath='{.status.state}'), no longer asleep"

# A new job still gets the freed GPUs; deleting a sleeping job drops its row.
k -n dm delete gpujob a2 >/dev/null
wait_for 20 "a2's row deleted" grep -q 'job deleted: released.*job=dm/a2' "$GQ_TEST_TMP/controller.log"
wait_dormant 2
job a4
wait_state 30 dm a4 'Admitted|Running'
pass "a sleeping job deleted: its row released; a new job admitted"

# Restart: finished jobs fall asleep again from what their objects show, with no write.
before1=$(status_patches a1); before3=$(status_patches a3)
gq_ctl_stop
start_ctl
wait_dormant 2
sleep 1
assert_eq "$before1 $before3" "$(status_patches a1) $(status_patches a3)" "no status rewritten after the restart"
assert_eq "Succeeded Succeeded" "$(k -n dm get gpujob a1 a3 -o jsonpath='{.items[*].status.state}')" "still Succeeded"
pass "after a restart: a1 and a3 asleep again, no status rewritten"

gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
