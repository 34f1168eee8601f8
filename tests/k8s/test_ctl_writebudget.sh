#!/usr/bin/env bash
# The write budget: the writes that only narrate (status refreshes: a rewrite of a waiting
# job's position or message text; Normal Events of what a decision did) are paid by admissions
# (each credits its pods + 2, every write sent spends one), else go out at one per second each.
# A full 1-GPU node runs j00 while j01..j20 wait with positions 1..20, with no time budget on
# refreshes (--status-refresh-qps 0). Deleting j01 moves the 19 behind it up one place: no
# admission pays for those 19 refreshes, so they reach the API server at about one per second
# (its audit log: 8 s or more from the first to the last; without the budget, all at once),
# and every one arrives (held, never lost).
. "$(dirname "$0")/lib.sh"

ns=wb
fakelet add-node w1 --gpus 1 >/dev/null
gq_team wb "$ns"
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --position-head 20 --position-interval 0.2s \
  --status-refresh-qps 0 --event-qps 0 --listen 127.0.0.1:0
port=$(gq_ctl_port)
[ -n "$port" ] || fail "no metrics port"

gq_j00_then_queue "$ns" 20
for i in $(seq 1 20); do wait_jsonpath 30 "$i" -n "$ns" gpujob "j$(printf %02d "$i")" -o jsonpath='{.status.position}'; done
pass "j01..j20 wait with positions 1..20"

sleep 2 # the floor's bucket refills (one token)
t0=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
k -n "$ns" delete gpujob j01 >/dev/null
for i in $(seq 2 20); do wait_jsonpath 60 $(( i - 1 )) -n "$ns" gpujob "j$(printf %02d "$i")" -o jsonpath='{.status.position}'; done
sleep 1 # the audit log has the last patch
times="$GQ_TEST_TMP/times"
for i in $(seq 2 20); do gq_status_patch_times "j$(printf %02d "$i")" "$t0"; done | sort -n >"$times"
n=$(wc -l <"$times")
[ "$n" -ge 19 ] || fail "$n status patches of j02..j20 after j01's deletion, want 19 (one refresh each)"
span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { printf "%.1f", b - a }' "$times")
awk -v s="$span" 'BEGIN { exit !(s >= 8) }' || fail "19 refreshes went out within ${span}s: with nothing admitted to pay for them, the floor is 1/s"
credit=$(gq_metric "$port" gangq_write_budget)
awk -v c="${credit:-1}" 'BEGIN { exit !(c < 1) }' || fail "gangq_write_budget ${credit:-missing}, want below 1 (nothing admitted pays)"
pass "19 position refreshes over ${span}s with nothing admitted (the floor, 1/s), every one written; the write budget at $credit"
