#!/usr/bin/env bash
# GPUs being released are not preempted for again. Part 1: two 4-GPU nodes, d and w running;
# d is suspended and its pod is still terminating (deletes held) when an Inference job of 4
# GPUs arrives: it waits for d's GPUs ("fits once stopping pods release their GPUs") and
# preempts nothing; once the pod is gone it runs on d's node, w untouched. Part 2: on a third
# node pair, a preemptor's victim v is suspended while its pods still terminate: the
# preemptor takes no second victim (w2 keeps running) and runs once the pods are gone; no
# node ever holds more GPUs than it has, no device is booked twice.
. "$(dirname "$0")/lib.sh"
for n in na nb nc nd ne; do fakelet add-node $n --gpus 4 >/dev/null; done
k create namespace p >/dev/null
printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: p}\nspec: {namespaces: [p], maxPriority: 100000}\n' | k apply -f - >/dev/null
gq_fakelet_loop --interval 0.3 --auto-run --hold-deletes
gq_ctl_start --leader-elect=false --min-runtime 0s
job() { gq_job "$@" | sed 's/terminationGracePeriodSeconds: 1/terminationGracePeriodSeconds: 60/' | k apply -f - >/dev/null; }
node_of() { k -n p get pod "$1" -o jsonpath='{.spec.nodeName}'; }
# live pods per node: more GPUs than 4, or a device twice
overbook() {
  k get pods -A -o json | jq -r '[.items[] | select(.spec.nodeName != null and .status.phase != "Succeeded" and .status.phase != "Failed")
      | {n: .spec.nodeName, g: ([.spec.containers[].resources.limits["nvidia.com/gpu"] // "0" | tonumber] | add),
         d: ((.metadata.annotations["gangq.io/gpu-devices"] // "") | split(",") | map(select(. != "")))}]
    | group_by(.n) | map({n: .[0].n, g: (map(.g) | add), d: (map(.d) | add)})
    | map(select(.g > 4 or ((.d | length) != (.d | unique | length)))) | map("\(.n) gpus=\(.g) devs=\(.d | join(","))") | .[]'
}

# ---- part 1: nodes na, nb (nc..ne are filled first so nothing lands there)
job p fill Batch 10 3 4; wait_state 30 p fill Running
job p d Batch 10 1 4; wait_state 30 p d Running
job p w Batch 10 1 4; wait_state 30 p w Running
dn=$(node_of d-1-0)
k -n p patch gj d --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_for 20 "d's pod terminating" bash -c "kubectl -n p get pod d-1-0 -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
job p pre Inference 1000 1 4
wait_for 20 "pre explained" bash -c "kubectl -n p get gj pre -o jsonpath='{.status.message}' | grep -q 'fits once stopping pods release their GPUs'"
sleep 3
assert_eq "Running 0" "$(k -n p get gj w -o jsonpath='{.status.state}') $(k -n p get gj w -o jsonpath='{.status.preemptions}' | sed 's/^$/0/')" "w not preempted: d's GPUs are being released"
fakelet finish-deletes p >/dev/null 2>&1
wait_state 30 p pre 'Admitted|Running'
wait_job_pods 20 p pre 1
assert_eq "$dn" "$(node_of pre-1-0)" "pre on the node d released"
assert_eq "" "$(overbook)" "no node over its GPUs, no device twice"
pass "part 1: suspended d's GPUs being released: pre waited for them on $dn, w kept running"

# ---- part 2: free the fill's nodes, then a victim suspended while its pods stop
k -n p delete gj fill pre w --wait=false >/dev/null
fakelet finish-deletes p >/dev/null 2>&1
wait_for 30 "part 1 pods gone" bash -c "[ -z \"\$(kubectl -n p get pods -o name)\" ]"
job p v Batch 5 2 4; wait_state 30 p v Running
job p w2 Batch 10 3 4; wait_state 30 p w2 Running
job p pre2 Inference 1000 1 4
wait_state 30 p v Preempted
k -n p patch gj v --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
sleep 5
assert_eq "Running" "$(k -n p get gj w2 -o jsonpath='{.status.state}')" "w2 not preempted in addition to v"
assert_eq "" "$(overbook)" "no node over its GPUs while v's pods stop"
fakelet finish-deletes p >/dev/null 2>&1
wait_state 30 p pre2 'Admitted|Running'
assert_eq "Running" "$(k -n p get gj w2 -o jsonpath='{.status.state}')" "w2 still running"
assert_eq "" "$(overbook)" "no node over its GPUs, no device twice"
pass "part 2: victim v suspended while stopping: pre2 took no second victim and ran once v's pods were gone"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
