#!/usr/bin/env bash
# A wait reason that flips back and forth is not rewritten each time. Four 4-GPU jobs wait on
# a 4-GPU node half used by their Team's running job; the Team's quota goes from 2 GPUs
# (they wait on Quota) to 8 (they wait on Nodes) and back every 1.5 s for 24 s, as a reason
# flips while jobs come and go. With --wait-reason-settle 10s (the default) no waiting job's
# status is PATCHed for the flips (counted in the API server's audit log) and no Waiting Event
# is sent; once the quota stays at 8, the new reason is written within the settle time, with
# one Waiting Event naming it; the controller's /queue shows the live reason at once. Beyond the head of the queue (--position-head 2: w3, w4) the
# new reason is narration the write budget paces, and it is written too.
. "$(dirname "$0")/lib.sh"

ns=fl
fakelet add-node f1 --gpus 4 >/dev/null
k create namespace "$ns" >/dev/null
team() { # GPUS
  printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: fl}\nspec: {namespaces: [%s], quota: [{gpuType: "*", gpus: %s}]}\n' \
    "$ns" "$1" | k apply -f - >/dev/null
}
team 2
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --listen 127.0.0.1:0 --event-qps 0 --wait-reason-settle 10s --position-head 2

gq_job "$ns" run Batch 100 1 2 | k apply -f - >/dev/null
wait_jsonpath 40 Running -n "$ns" gpujob run -o jsonpath='{.status.state}'
for i in 1 2 3 4; do gq_job "$ns" "w$i" Batch 50 1 4; done | k apply -f - >/dev/null
for i in 1 2 3 4; do
  wait_jsonpath 30 Quota -n "$ns" gpujob "w$i" -o jsonpath='{.status.waitReason}'
done
# the head's positions (1, 2) are published at the next position epoch (--position-interval)
wait_jsonpath 20 2 -n "$ns" gpujob w2 -o jsonpath='{.status.position}'
assert_eq "" "$(k -n "$ns" get gpujob w4 -o jsonpath='{.status.position}')" "w4 (beyond the head) shows no position"
sleep 1 # the first writes settle (--status-settle)
ev0=$(gq_waiting_events "$ns" w2)
assert_eq 1 "$ev0" "w2: one Waiting Event for Quota"
pass "w1..w4 wait on Quota (team fl 2 GPUs, run holds them): \"$(k -n "$ns" get gpujob w2 -o jsonpath='{.status.message}')\""

# The flips: the quota cut and raised every 1.5 s.
t0=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
for i in $(seq 1 8); do
  team 8
  sleep 1.5
  team 2
  sleep 1.5
done
sleep 1
for i in 1 2 3 4; do
  n=$(gq_status_patch_times "w$i" "$t0" | wc -l)
  [ "$n" -eq 0 ] || fail "w$i: $n status PATCHes while its reason flipped 16 times, want none"
  assert_eq Quota "$(k -n "$ns" get gpujob "w$i" -o jsonpath='{.status.waitReason}')" "w$i's reason"
done
assert_eq "$ev0" "$(gq_waiting_events "$ns" w2)" "w2: no Waiting Event for the flips"
pass "16 flips of the wait reason in 24 s: no status PATCH and no Waiting Event for w1..w4"

# The quota stays raised: the new reason holds and is written within the settle time.
team 8
t1=$(date +%s.%N)
# the controller's exact view (/queue) follows the explanation at once; the status waits
port=$(gq_ctl_port)
wait_for 8 "/queue: w2 waits on Nodes" bash -c \
  "curl -sf 'http://127.0.0.1:$port/queue?team=fl' | jq -e '.jobs[] | select(.name == \"w2\") | .waitReason == \"Nodes\"' >/dev/null"
assert_eq Quota "$(k -n "$ns" get gpujob w2 -o jsonpath='{.status.waitReason}')" "w2's status before the settle time"
wait_for 25 "w2's reason leaves Quota" bash -c \
  "r=\$(kubectl -n $ns get gpujob w2 -o jsonpath='{.status.waitReason}'); [ -n \"\$r\" ] && [ \"\$r\" != Quota ]"
dt=$(awk -v a="$t1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
reason=$(k -n "$ns" get gpujob w2 -o jsonpath='{.status.waitReason}')
awk -v d="$dt" 'BEGIN { exit !(d >= 9) }' || fail "w2's reason written after ${dt} s, before the 10 s settle"
assert_eq Nodes "$reason" "w2 waits on the node (the quota lets it in)"
wait_for 10 "a Waiting Event naming $reason" bash -c \
  "kubectl -n $ns get events --field-selector involvedObject.name=w2,reason=Waiting -o jsonpath='{.items[*].message}' | grep -q '$reason: '"
n=$(gq_status_patch_times w2 "$t0" | wc -l)
[ "$n" -le 2 ] || fail "w2: $n status PATCHes in all, want at most 2 (the new reason)"
pass "quota kept at 8: /queue showed Nodes at once; w2's status reason $reason written ${dt} s later ($n status PATCH), one Waiting Event for it"
wait_jsonpath 20 Nodes -n "$ns" gpujob w4 -o jsonpath='{.status.waitReason}'
n4=$(gq_status_patch_times w4 "$t0" | wc -l)
[ "$n4" -le 2 ] || fail "w4: $n4 status PATCHes in all, want at most 2"
pass "w4 (beyond the head): reason Nodes written too ($n4 status PATCH)"
gq_ctl_stop
