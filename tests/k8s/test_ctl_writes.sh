#!/usr/bin/env bash
# API writes follow decisions, not queue moves. One 1-GPU node runs one job while 30 more wait
# behind it; the jobs ahead finish one by one. The job at the tail sees its exact position
# change with every admission, yet its status is PATCHed only when its state or wait reason
# changes (counted in the API server's audit log): its position stays null (it is beyond
# --position-head), its message keeps the first explanation of its reason. The head of the
# queue is shown with positions, refreshed at a bounded rate, on the waiting jobs and in the
# Team's status.pendingHead. Each job gets at most one Waiting Event per reason. A restarted
# controller does not rewrite (or event again) a wait the object already shows.
. "$(dirname "$0")/lib.sh"
# --event-qps 0: the Events here are counted per job and reason; their budget is
# test_ctl_events' (31 jobs in one namespace pass its quarter of the default budget)

ns=wr
HEAD=5
fakelet add-node w1 --gpus 1 >/dev/null
gq_team wr "$ns"
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --position-head "$HEAD" --position-interval 1s --listen 127.0.0.1:0 \
  --event-qps 0
port=$(gq_ctl_port)

gq_j00_then_queue "$ns" 30
tail=j30

# status PATCHes of one GPUJob by the controller, from the audit log
patches() {
  jq -c --arg n "$1" 'select(.verb == "patch" and .objectRef.resource == "gpujobs" and
      .objectRef.subresource == "status" and .objectRef.name == $n and (.userAgent // "" | startswith("gangq")))' \
    "$GQ_ENV_DIR/audit.log" 2>/dev/null | wc -l
}
head_names() { kubectl get team wr -o json | jq -r '[.status.pendingHead[]?.name] | join(" ")'; }
head_positions() { kubectl get team wr -o json | jq -r '[.status.pendingHead[]?.position | tostring] | join(" ")'; }

wait_jsonpath 30 "j01 j02 j03 j04 j05 " team wr -o jsonpath='{range .status.pendingHead[*]}{.name}{" "}{end}'
assert_eq "1 2 3 4 5" "$(head_positions)" "Team pendingHead positions"
wait_jsonpath 20 3 -n "$ns" gpujob j03 -o jsonpath='{.status.position}'
wait_for 20 "$tail explained" bash -c "[ -n \"\$(kubectl -n $ns get gpujob $tail -o jsonpath='{.status.waitReason}')\" ]"
assert_eq "" "$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.position}')" "the tail shows no position"
assert_eq Queued "$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.state}')" "the tail is Queued"
reason0=$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.waitReason}')
msg0=$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.message}')
assert_contains "$msg0" "nodes fit" "the tail's explanation"
sleep 2 # let the first writes settle
p0=$(patches "$tail")
[ "$p0" -ge 1 ] || fail "no status PATCH of $tail at all"
pass "31 jobs on one GPU: head $(head_names) at $(head_positions) (pendingHead), $tail $reason0: \"$msg0\", $p0 status PATCH(es) so far"

# The jobs ahead finish one by one: every admission moves the whole queue up.
moves=8
for i in $(seq 0 $((moves - 1))); do
  cur=$(printf 'j%02d' "$i") next=$(printf 'j%02d' $((i + 1)))
  fakelet succeed "$ns" -l "gangq.io/job=$cur" >/dev/null 2>&1
  wait_jsonpath 40 Running -n "$ns" gpujob "$next" -o jsonpath='{.status.state}'
done
pass "$moves jobs finished one after another; $(printf 'j%02d' "$moves") Running"

# The head is refreshed (bounded rate): the Team and the jobs show the new head.
want=""
for i in $(seq $((moves + 1)) $((moves + HEAD))); do want+="$(printf 'j%02d' "$i") "; done
wait_jsonpath 20 "$want" team wr -o jsonpath='{range .status.pendingHead[*]}{.name}{" "}{end}'
assert_eq "1 2 3 4 5" "$(head_positions)" "Team pendingHead positions after the moves"
wait_jsonpath 20 1 -n "$ns" gpujob "$(printf 'j%02d' $((moves + 1)))" -o jsonpath='{.status.position}'
wait_jsonpath 20 5 -n "$ns" gpujob "$(printf 'j%02d' $((moves + HEAD)))" -o jsonpath='{.status.position}'
pass "head refreshed: $(head_names) at $(head_positions)"
# Exact positions on demand: the controller's /queue lists every waiting job in order.
q=$(curl -sf "http://127.0.0.1:$port/queue?team=wr") || fail "/queue did not answer"
assert_eq "$(seq -s ' ' 1 $((30 - moves)))" "$(jq -r '[.jobs[].position | tostring] | join(" ")' <<<"$q")" "/queue positions"
assert_eq "$(printf 'j%02d' $((moves + 1))) $tail" "$(jq -r '[.jobs[0].name, .jobs[-1].name] | join(" ")' <<<"$q")" "/queue order"
assert_eq "$((30 - moves))" "$(jq -r --arg t "$tail" '.jobs[] | select(.name == $t) | .position' <<<"$q")" "$tail's exact position"
assert_eq 0 "$(curl -sf "http://127.0.0.1:$port/queue?team=nosuch" | jq '.jobs | length')" "/queue of another team"
pass "/queue: $tail at exact position $((30 - moves)) (its status shows none)"

sleep 2
p1=$(patches "$tail")
assert_eq "$p0" "$p1" "$tail's status is not rewritten when only its position moves ($moves moves)"
[ "$p1" -le 2 ] || fail "$tail: $p1 status PATCHes, want at most 2 (queued, explained)"
assert_eq "" "$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.position}')" "the tail still shows no position"
assert_eq "$reason0" "$(k -n "$ns" get gpujob "$tail" -o jsonpath='{.status.waitReason}')" "the tail's reason"
# A job in the head was written when it entered the head and when it moved in it, at the
# bounded rate: not more than once per queue move plus its state changes.
mid=$(printf 'j%02d' $((moves + 3)))
pm=$(patches "$mid")
[ "$pm" -le $((moves + 3)) ] || fail "$mid: $pm status PATCHes over $moves moves"
pass "$tail: $p1 status PATCHes over $moves queue moves (unchanged); $mid (now in the head): $pm"

# Events: at most one Waiting Event per job per reason class (at most 3 classes here:
# Nodes, Reserving at the head, and none repeated)
ev=$(gq_waiting_events "$ns" "$tail")
[ "$ev" -ge 1 ] && [ "$ev" -le 1 ] || fail "$tail: $ev Waiting Events, want exactly 1 (one reason)"
total=0
for i in $(seq -w 1 30); do
  n=$(gq_waiting_events "$ns" "j$i")
  [ "$n" -le 2 ] || fail "j$i: $n Waiting Events, want at most one per reason (Nodes, Reserving)"
  total=$((total + n))
done
pass "Waiting Events: $tail $ev, all 30 waiting jobs $total"

# A restart: the waiting jobs' statuses already show their waits; none is written again.
gq_ctl_stop
before=$(jq -c 'select(.verb == "patch" and .objectRef.resource == "gpujobs" and (.userAgent // "" | startswith("gangq")))' \
  "$GQ_ENV_DIR/audit.log" | wc -l)
gq_ctl_start --leader-elect=false --min-runtime 0s --position-head "$HEAD" --position-interval 1s --listen 127.0.0.1:0 \
  --event-qps 0
port=$(gq_ctl_port)
wait_for 20 "/readyz after the restart" curl -sf "http://127.0.0.1:$port/readyz"
wait_for 20 "the queue scheduled again" bash -c "curl -sf 'http://127.0.0.1:$port/queue' | jq -e '.jobs | length > 0' >/dev/null"
sleep 4 # a few reconciles (2 s resync)
after=$(jq -c 'select(.verb == "patch" and .objectRef.resource == "gpujobs" and (.userAgent // "" | startswith("gangq")))' \
  "$GQ_ENV_DIR/audit.log" | wc -l)
assert_eq "$p1" "$(patches "$tail")" "$tail not rewritten after a restart"
assert_eq "$ev" "$(gq_waiting_events "$ns" "$tail")" "no new Waiting Event for $tail after a restart"
# the running job (its admission) may be written again; the 21 waiting ones are not
[ $((after - before)) -le 2 ] || fail "$((after - before)) GPUJob status PATCHes after a restart, want at most 2"
pass "restart: $((after - before)) GPUJob status PATCHes, none for the waiting jobs' unchanged waits"
