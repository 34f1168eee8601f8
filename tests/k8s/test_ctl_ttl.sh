#!/usr/bin/env bash
# spec.ttlSecondsAfterFinished against the real API server: a finished GPUJob is deleted by
# gangq that long after its completionTime (across a controller restart), once its final
# status is written (so whoever watches it sees how it ended), with a uid precondition
# (checked in tests/unit/test_ctl_act.c); its pods go with it; a job without the field stays;
# an out-of-range value is refused by the CRD's schema.
. "$(dirname "$0")/lib.sh"

fakelet add-node t1 --gpus 4 >/dev/null
gq_team tt tt
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --listen 127.0.0.1:0
port=$(gq_ctl_port)

job() { # NAME TTL ("" = none)
  { gq_job tt "$1" Batch 0 1 1; [ -z "$2" ] || echo "  ttlSecondsAfterFinished: $2"; } | k apply -f - >/dev/null
}
job quick 0
job later 5
job keep ""
for j in quick later keep; do wait_jsonpath 40 Running -n tt gpujob "$j" -o jsonpath='{.status.state}'; done
pass "three jobs Running (ttlSecondsAfterFinished 0, 5, none)"

err=$({ gq_job tt bad Batch 0 1 1; echo "  ttlSecondsAfterFinished: -1"; } | k apply -f - 2>&1 >/dev/null) &&
  fail "a negative ttlSecondsAfterFinished was accepted"
assert_contains "$err" "ttlSecondsAfterFinished" "the API server names the field it refuses"

fakelet succeed tt -l 'gangq.io/job in (quick,later,keep)' >/dev/null 2>&1
wait_jsonpath 40 Succeeded -n tt gpujob later -o jsonpath='{.status.state}'
done_at=$(k -n tt get gpujob later -o jsonpath='{.status.completionTime}')
[ -n "$done_at" ] || fail "later Succeeded without a completionTime"
wait_for 20 "quick deleted (ttl 0)" bash -c "! kubectl -n tt get gpujob quick >/dev/null 2>&1"
pass "quick (ttl 0) deleted once Succeeded"
assert_eq Succeeded "$(k -n tt get gpujob later -o jsonpath='{.status.state}')" "later (ttl 5) still there"

# a controller restart in between: the deletion time comes from the object (completionTime),
# not from memory
gq_ctl_stop
gq_ctl_start --leader-elect=false --listen 127.0.0.1:0
port=$(gq_ctl_port)
wait_for 25 "later deleted (ttl 5)" bash -c "! kubectl -n tt get gpujob later >/dev/null 2>&1"
# when gangq's DELETE of later reached the API server (audit log), against completionTime + 5 s
del_at=$(jq -r 'select(.verb == "delete" and .objectRef.resource == "gpujobs" and .objectRef.name == "later" and
    (.userAgent // "" | startswith("gangq")) and .stage == "ResponseComplete") | .stageTimestamp' \
  "$GQ_ENV_DIR/audit.log" | head -1)
[ -n "$del_at" ] || fail "no DELETE of later by gangq in the audit log"
d=$(( $(date -u -d "$del_at" +%s) - $(date -u -d "$done_at" +%s) ))
[ "$d" -ge 5 ] && [ "$d" -le 12 ] || fail "later deleted ${d} s after its completionTime (ttl 5)"
pass "later deleted ${d} s after its completionTime $done_at (ttl 5)"
assert_eq 2 "$(gq_api_requests delete gpujobs gangq)" "one DELETE per job, none for keep"
# (the uid precondition it carries is checked by tests/unit/test_ctl_act.c: the audit log
# here is at level Metadata, without request bodies)

wait_for 20 "the deleted jobs' pods gone" bash -c \
  "[ -z \"\$(kubectl -n tt get pods -l 'gangq.io/job in (quick,later)' -o name)\" ]"
pass "the deleted jobs' pods went with them"

sleep 2
assert_eq Succeeded "$(k -n tt get gpujob keep -o jsonpath='{.status.state}')" "keep (no ttl) stays"
assert_eq 1 "$(gq_metric "$port" gangq_jobs_ttl_deleted_total)" "gangq_jobs_ttl_deleted_total (since the restart)"
assert_eq 0 "$(jq -r 'select(.objectRef.resource == "gpujobs" and .verb == "delete" and
    (.userAgent // "" | startswith("gangq")) and (.responseStatus.code // 0) >= 400) | .verb' \
  "$GQ_ENV_DIR/audit.log" | wc -l)" "no refused delete"
pass "keep (no ttlSecondsAfterFinished) stays Succeeded; later's delete counted after the restart"

# a job re-created under a deleted one's name is a new job: it runs, and is kept (no ttl)
job quick ""
wait_jsonpath 40 Running -n tt gpujob quick -o jsonpath='{.status.state}'
pass "quick re-created (new uid, no ttl): Running"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
