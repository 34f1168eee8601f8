#!/usr/bin/env bash
# A job preempted just after its pods succeeded stays Succeeded. The controller's pod watch
# is held back 5 s (--pod-watch-delay, a test hook), so it still sees the gang Running when
# its pods have already Succeeded and a preemptor arrives: it preempts the gang on that stale
# view, but deletes pods only as it saw them (resourceVersion precondition), so the finished
# pods are kept; once it sees them Succeeded the job is Succeeded, is never admitted again,
# and the preemptor gets the GPUs.
. "$(dirname "$0")/lib.sh"

fakelet add-node s1 --gpus 4 >/dev/null
k create namespace sc >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: sc}
spec: {namespaces: [sc]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --pod-watch-delay 5s

job() { gq_job sc "$@" | k apply -f - >/dev/null; } # NAME CLASS PRIORITY REPLICAS COUNT
phases() { kubectl -n sc get pods -l "gangq.io/job=$1" -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase}{" "}{end}'; }

job done Batch 10 2 2
wait_jsonpath 40 Running -n sc gpujob done -o jsonpath='{.status.state}'
uids=$(k -n sc get pods -l gangq.io/job=done -o jsonpath='{.items[*].metadata.uid}')
pass "gang done Running on all 4 GPUs: $(phases done)"

# Its pods finish; before the controller sees that, a preemptor arrives.
fakelet succeed sc -l gangq.io/job=done >/dev/null 2>&1
job pre Inference 1000 1 4
wait_for 20 "done preempted (on the stale view)" bash -c "grep -q 'job preempted.*job=sc/done' '$GQ_TEST_TMP/controller.log'"
wait_jsonpath 40 Succeeded -n sc gpujob done -o jsonpath='{.status.state}'
assert_eq "done-1-0=Succeeded done-1-1=Succeeded " "$(phases done)" "the finished pods are kept, not deleted"
assert_eq "$uids" "$(k -n sc get pods -l gangq.io/job=done -o jsonpath='{.items[*].metadata.uid}')" "the same pods"
assert_contains "$(cat "$GQ_TEST_TMP/controller.log")" "job succeeded (its pods finished before what was decided meanwhile)" \
  "Succeeded although preempted meanwhile"
# While the watch lagged, gangq's deletes were refused (the pods had changed) and not retried
# in a loop: at most one round of stray deletes per job every 2 s.
dels=$(gq_api_requests delete pods gangq)
[ "$dels" -le 10 ] || fail "pod deletes repeated while the watch lagged: $dels DELETE requests"
pass "preempted just after its pods succeeded: job Succeeded, its Succeeded pods kept ($dels pod deletes refused)"

wait_for 40 "pre admitted into the freed GPUs" bash -c \
  "kubectl -n sc get gpujob pre -o jsonpath='{.status.state}' | grep -Eqx 'Admitted|Running'"
sleep 3 # a wrong re-admission of done would show by now
assert_eq Succeeded "$(k -n sc get gpujob done -o jsonpath='{.status.state}')" "done stays Succeeded"
assert_eq "" "$(k -n sc get pods -l gangq.io/job=done,gangq.io/attempt=2 -o name)" "done never ran a second time"
assert_eq "done-1-0=Succeeded done-1-1=Succeeded " "$(phases done)" "done's pods still there"
pass "the preemptor runs; done stays Succeeded and never ran twice"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
