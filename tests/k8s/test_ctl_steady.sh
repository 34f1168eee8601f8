#!/usr/bin/env bash
# Steady jobs cost an idle controller nothing: an admitted job whose last look found every
# placed pod seen, none failed, stopping or on a node not Ready changes only by events (its
# own, its pods', a node's), so the periodic resync (--cycle-interval) does not examine it
# again, and once nothing is due (held statuses, positions, stray-pod looks) the resync ticks
# are quiet: no reconcile runs. Time still acts on jobs that are not steady: a node that turns NotReady makes its
# jobs examined at every resync until its grace (--node-lost-grace) ends, then they are
# placed again, with no further event.
. "$(dirname "$0")/lib.sh"

fakelet add-node s1 --gpus 4 >/dev/null
fakelet add-node s2 --gpus 4 >/dev/null
gq_team st st
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --cycle-interval 0.3s --full-resync-interval 1h --node-lost-grace 3s \
  --listen 127.0.0.1:0
port=$(gq_ctl_port)
for n in a b c d; do
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $n, namespace: st}
spec:
  class: Batch
  gpu: {count: 2}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
done
for n in a b c d; do wait_state 30 st "$n" Running; done
full() { gq_metric "$port" 'gangq_jobs_examined_total{how="full"}'; }
recs() { gq_metric "$port" 'gangq_reconcile_phase_duration_seconds_count{phase="gather"}'; }
quiet() { gq_metric "$port" gangq_reconciles_quiet_total; }
# what the last changes made due passes: statuses settle (0.3 s), stray-pod looks (2 s), and
# the positions published 5 s after the last schedule (each reconcile that runs may make one
# due): wait for 6 s in a row without a reconcile, at most 40 s
calm=0
for _ in $(seq 40); do
  n0=$(recs)
  sleep 1
  if [ "$(recs)" = "$n0" ]; then calm=$(( calm + 1 )); else calm=0; fi
  [ "$calm" -lt 6 ] || break
done
[ "$calm" -ge 6 ] || fail "reconciles kept running for 40 s with nothing changing"
f0=$(full)
r0=$(recs)
q0=$(quiet)
sleep 2.4 # eight resync ticks
f1=$(full)
r1=$(recs)
q1=$(quiet)
[ "$(( q1 - q0 ))" -ge 5 ] || fail "only $(( q1 - q0 )) quiet reconciles in 2.4 s (--cycle-interval 0.3s)"
assert_eq 0 "$(( r1 - r0 ))" "reconciles run in 2.4 s with nothing changed and nothing due"
assert_eq 0 "$(( f1 - f0 ))" "jobs examined in full (4 steady Running jobs)"
pass "4 Running jobs, $(( q1 - q0 )) resync ticks in 2.4 s: all quiet, no reconcile ran, no job examined again"

# A change of a job's status alone (what gangq's own status writes look like when they come
# back) is not a reason to examine the job again; a change of anything else is.
echoes() { gq_metric "$port" gangq_gpujob_status_events_total; }
above() { [ "$($1)" -gt "$2" ]; } # FUNCTION VALUE
e0=$(echoes)
f0=$(full)
k -n st patch gj a --subresource=status --type=merge -p '{"status":{"message":"written by someone else"}}' >/dev/null ||
  fail "status patch of job a"
wait_for 10 "the status-only event counted" above echoes "$e0"
sleep 1 # three resyncs
assert_eq 0 "$(( $(full) - f0 ))" "jobs examined in full after a status-only change of job a"
k -n st annotate gj a example.com/note=x >/dev/null || fail "annotating job a"
wait_for 10 "job a examined in full after a change of its metadata" above full "$f0"
pass "a status-only change examines no job; an annotation examines the job again"

# s1 NotReady: one event (a full pass); then only time: its jobs are lost after 3 s.
on_s1=$(k -n st get pods -o jsonpath='{range .items[?(@.spec.nodeName=="s1")]}{.metadata.labels.gangq\.io/job}{"\n"}{end}' | sort -u)
[ -n "$on_s1" ] || fail "no job placed on s1"
fakelet notready s1 >/dev/null
t0=$(date +%s)
for n in $on_s1; do
  wait_for 15 "job $n off the lost node" bash -c \
    "kubectl -n st get gpujob $n -o jsonpath='{.status.state}' | grep -qvE '^(Admitted|Running)$'"
done
wait_for 10 "the lost node named in the log" grep -q "node s1 not ready for more than 3s" "$GQ_TEST_TMP/controller.log"
pass "s1 NotReady: $(echo $on_s1 | wc -w) job(s) on it released $(( $(date +%s) - t0 )) s later (grace 3 s), by time alone"
gq_ctl_stop
