#!/usr/bin/env bash
# spec.maxRunSeconds and backfill against the real API server (knavigator's HPC backfill test,
# on GPUs): one node of 8 GPUs; "hold" (4 GPUs, maxRunSeconds 25) runs and never finishes by
# itself; "head" (6 GPUs) cannot fit beside it and reserves the node, where it can start when
# hold's limit stops it. Of the jobs after it that fit the 4 free GPUs, only the one sure to end
# before then (maxRunSeconds 5) runs there: one with a longer limit and one with none wait, so
# head is not delayed. A job past its limit is stopped: Failed, reason DeadlineExceeded, its
# pods deleted. Then a 2-GPU job without a limit runs in the 2 GPUs head never needs there
# (whatever ends first, head fits beside it), and head runs when hold's limit stops it.
. "$(dirname "$0")/lib.sh"

fakelet add-node bf1 --gpus 8 >/dev/null
gq_team bf bf
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --listen 127.0.0.1:0
port=$(gq_ctl_port)

job() { # NAME GPUS MAXRUN ("" = none)
  { gq_job bf "$1" Batch 0 1 "$2"; [ -z "$3" ] || echo "  maxRunSeconds: $3"; } | k apply -f - >/dev/null
}
state() { k -n bf get gpujob "$1" -o jsonpath='{.status.state}'; }
cond() { # JOB TYPE FIELD
  k -n bf get gpujob "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].$3}"
}

err=$({ gq_job bf bad Batch 0 1 1; echo "  maxRunSeconds: 0"; } | k apply -f - 2>&1 >/dev/null) &&
  fail "maxRunSeconds 0 was accepted"
assert_contains "$err" "maxRunSeconds" "the API server names the field it refuses"

job hold 4 25
wait_jsonpath 40 Running -n bf gpujob hold -o jsonpath='{.status.state}'
t_hold=$(date +%s)
job head 6 ""
wait_for 20 "head reserves the node" bash -c \
  "kubectl -n bf get gpujob head -o jsonpath='{.status.message}' | grep -q 'reserves node bf1'"
assert_contains "$(k -n bf get gpujob head -o jsonpath='{.status.message}')" \
  "free by $(k -n bf get gpujob hold -o jsonpath='{.status.admission.deadline}') at the latest" \
  "head's wait says by when the node is free for it (hold's deadline)"
job long 4 60
job short 4 5
job nolimit 4 ""
wait_jsonpath 40 Running -n bf gpujob short -o jsonpath='{.status.state}'
adm=$(k -n bf get gpujob short -o jsonpath='{.status.admission.time}')
dl=$(k -n bf get gpujob short -o jsonpath='{.status.admission.deadline}')
[ -n "$adm" ] && [ -n "$dl" ] || fail "short's status.admission has no time ($adm) or deadline ($dl)"
assert_eq 5 "$(( $(date -u -d "$dl" +%s) - $(date -u -d "$adm" +%s) ))" "status.admission.deadline - time (s)"
assert_contains "$(cond short Admitted message)" "backfill on nodes reserved for bf/head" \
  "short's admission says whose reservation it backfills"
sleep 2
assert_eq "Queued Queued Queued" "$(state head) $(state long) $(state nolimit)" \
  "head, long (ends after head could start) and nolimit wait"
assert_contains "$(k -n bf get gpujob long -o jsonpath='{.status.message}')" "reserved for a higher job" \
  "long's wait names the reservation"
pass "short (maxRunSeconds 5) backfills the node head reserves; long (60) and nolimit wait"

wait_jsonpath 30 Failed -n bf gpujob short -o jsonpath='{.status.state}'
assert_eq DeadlineExceeded "$(cond short Failed reason)" "short's Failed condition"
assert_contains "$(cond short Failed message)" "ran past spec.maxRunSeconds (5s" "its message"
wait_for 20 "short's pod deleted" bash -c "[ -z \"\$(kubectl -n bf get pods -l gangq.io/job=short -o name)\" ]"
assert_contains "$(k -n bf get events --field-selector involvedObject.name=short -o jsonpath='{.items[*].reason}')" \
  "DeadlineExceeded" "a DeadlineExceeded Event"
pass "short stopped at its limit: Failed (DeadlineExceeded), pod deleted, Event"

job side 2 ""
wait_jsonpath 30 Running -n bf gpujob side -o jsonpath='{.status.state}'
assert_contains "$(cond side Admitted message)" \
  "backfill on nodes reserved for bf/head: in capacity that job does not need there" \
  "side's admission says it uses capacity head never needs"
assert_eq "Queued Queued Queued" "$(state head) $(state long) $(state nolimit)" \
  "head, long and nolimit (4 GPUs: more than head leaves) still wait"
pass "side (2 GPUs, no limit) runs in the 2 GPUs head never needs on the node"

# hold is not stopped early: still Running 20 s after it was first seen Running (its limit
# counts from its admission, before that); then stopped, and head runs
sleep $(( t_hold + 20 - $(date +%s) > 0 ? t_hold + 20 - $(date +%s) : 0 ))
assert_eq Running "$(state hold)" "hold 20 s into its 25 s"
wait_jsonpath 20 Failed -n bf gpujob hold -o jsonpath='{.status.state}'
wait_jsonpath 40 Running -n bf gpujob head -o jsonpath='{.status.state}'
assert_eq "Running Queued Queued" "$(state side) $(state long) $(state nolimit)" \
  "side runs beside head; long and nolimit wait"
pass "hold stopped at its limit; head runs in the place it reserved, beside side"
assert_eq "2 2" "$(gq_metric "$port" gangq_jobs_deadline_exceeded_total) $(gq_metric "$port" gangq_backfill_admissions_total)" \
  "gangq_jobs_deadline_exceeded_total, gangq_backfill_admissions_total"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
