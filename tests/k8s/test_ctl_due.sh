#!/usr/bin/env bash
# Time alone acts when it is due, not at the next periodic resync. With the resyncs an hour
# apart (--cycle-interval 1h --full-resync-interval 1h), nothing but the due time can start a
# reconcile once the cluster is still: a Training job waiting for Batch work that the minimum
# runtime (--min-runtime 4s) protects preempts it when the protection ends (the scheduling core
# reports that end; the controller's due timer wakes it then). The code before quiet reconciles
# had no such timer and waited for the next resync.
. "$(dirname "$0")/lib.sh"

fakelet add-node d1 --gpus 4 >/dev/null
gq_team dt dt
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 4s --cycle-interval 1h --full-resync-interval 1h \
  --listen 127.0.0.1:0
job() { gq_job dt "$1" "$2" "$3" 1 4 | k apply -f - >/dev/null; } # NAME CLASS PRIORITY
job low Batch 10
wait_state 30 dt low Running
t_run=$(date +%s.%N) # low was admitted before this
job high Training 100
wait_for 15 "high waits on the minimum runtime" bash -c \
  "kubectl -n dt get gpujob high -o jsonpath='{.status.message}' | grep -q 'minimum runtime'"
pass "high waits: $(k -n dt get gpujob high -o jsonpath='{.status.waitReason}: {.status.message}')"
wait_state 20 dt low Preempted
t_pre=$(date +%s.%N)
after=$(awk -v a="$t_run" -v b="$t_pre" 'BEGIN { printf "%.1f", b - a }')
# the protection ends 4 s after low's admission (its second), at most 4 s after t_run, at
# least 3 s after it was admitted; seeing it Running and polling add up to a second or two
awk -v d="$after" 'BEGIN { exit !(d >= 1.5 && d <= 6.5) }' ||
  fail "low preempted ${after} s after it ran, not when its 4 s of protection ended"
wait_state 30 dt high 'Admitted|Running'
pass "low preempted ${after} s after it was seen Running (protection 4 s, resyncs 1 h apart), high admitted"
gq_ctl_stop
