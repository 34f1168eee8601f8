#!/usr/bin/env bash
# Status refreshes have a budget. A GPUJob status rewrite that changes nothing but its queue
# position (or the text of its wait message) goes out at most --status-refresh-qps per second
# after a burst of --status-refresh-burst; one past the budget is written later, never lost.
# A change of state is never held. One 1-GPU node runs j00 while j01..j06 wait with positions
# 1..6. Deleting j01 moves the five behind it up one place: their rewrites (refreshes, the new
# head's perhaps more) at 1 per second after 1 take 3 s or more to reach the API server (its
# audit log: at least 2.5 s from the first to the last, against a few ms unbudgeted), and all
# of them arrive.
# Then j00 goes: j02 is admitted and runs while the refreshes of j03..j06 wait for tokens.
. "$(dirname "$0")/lib.sh"

ns=rf
fakelet add-node r1 --gpus 1 >/dev/null
gq_team rf "$ns"
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --position-head 10 --position-interval 0.2s \
  --status-refresh-qps 1 --status-refresh-burst 1 --event-qps 0 --listen 127.0.0.1:0
port=$(gq_ctl_port)
[ -n "$port" ] || fail "no metrics port"

gq_j00_then_queue "$ns" 6
for i in 1 2 3 4 5 6; do wait_jsonpath 30 "$i" -n "$ns" gpujob "j0$i" -o jsonpath='{.status.position}'; done
pass "j01..j06 wait with positions 1..6"

sleep 3 # the bucket refills (one token)
t0=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
k -n "$ns" delete gpujob j01 >/dev/null
for i in 2 3 4 5 6; do wait_jsonpath 30 $(( i - 1 )) -n "$ns" gpujob "j0$i" -o jsonpath='{.status.position}'; done
sleep 1 # the audit log has the last patch
times="$GQ_TEST_TMP/times"
for i in 2 3 4 5 6; do gq_status_patch_times "j0$i" "$t0"; done | sort -n >"$times"
n=$(wc -l <"$times")
[ "$n" -ge 5 ] || fail "$n status patches of j02..j06 after j01's deletion, want 5 (one refresh each)"
span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%.1f", b - a }' "$times")
awk -v s="$span" 'BEGIN { exit !(s >= 2.5) }' || fail "5 refreshes went out within ${span}s: the budget is 1/s after 1"
held=$(gq_metric "$port" 'gangq_status_refresh_total{result="held"}')
sent=$(gq_metric "$port" 'gangq_status_refresh_total{result="sent"}')
[ "${held:-0}" -ge 1 ] || fail "no refresh held (gangq_status_refresh_total{result=\"held\"} ${held:-missing})"
# the new head's rewrite may change more than its position (then it is no refresh)
[ "${sent:-0}" -ge 4 ] || fail "gangq_status_refresh_total{result=\"sent\"} ${sent:-missing} < 4"
pass "5 position refreshes over ${span}s (1/s after 1), every one written; $held holds, $sent sent"

# j02's admission is a change of state, outside the budget; j03..j06 moving up spend it again
k -n "$ns" delete gpujob j00 >/dev/null
wait_jsonpath 20 Running -n "$ns" gpujob j02 -o jsonpath='{.status.state}'
for i in 3 4 5 6; do wait_jsonpath 30 $(( i - 2 )) -n "$ns" gpujob "j0$i" -o jsonpath='{.status.position}'; done
pass "j02 Running once j00 went; j03..j06 then show positions 1..4"
