#!/usr/bin/env bash
# Controller scenarios 2 and 3: a 2x8-GPU gang with topology.required: rack is admitted only
# when one rack has room (pods bound inside that rack); while no rack has room it stays Queued
# with the explanation in `kubectl describe`. GPU pods gangq does not own count against node
# capacity. Team quota honoured; borrowing inside a cohort up to borrowingLimit.
. "$(dirname "$0")/lib.sh"

add() { # NAME RACK
  fakelet add-node "$1" --gpus 8 --cpu 96 --memory 1000Gi --label "topology.gangq.io/rack=$2" \
    --label topology.gangq.io/block=b1 --label topology.kubernetes.io/zone=z1 \
    --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --label nvidia.com/gpu.memory=81559 \
    --label "kubernetes.io/hostname=$1" >/dev/null
}
add n1 rack-1; add n2 rack-1; add n3 rack-2; add n4 rack-2
for ns in topo ta tb solo; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: topo}
spec: {namespaces: [topo]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: solo}
spec: {namespaces: [solo], quota: [{gpuType: "*", gpus: 4}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: ta}
spec: {namespaces: [ta], cohort: c1, quota: [{gpuType: "*", gpus: 4, borrowingLimit: 4}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tb}
spec: {namespaces: [tb], cohort: c1, quota: [{gpuType: "*", gpus: 8}]}
YAML
# Pods gangq does not own: 2 GPUs on n1 and 1 GPU on n3 -> no rack has two free 8-GPU nodes.
for p in "f1 n1 2" "f3 n3 1"; do
  set -- $p
  cat <<YAML | k apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: topo}
spec:
  nodeName: $2
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "$3"}}}]
YAML
done
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s

wait_state() { # TIMEOUT NS NAME REGEX
  wait_for "$1" "gpujob $2/$3 state matching $4" bash -c "kubectl -n $2 get gpujob $3 -o jsonpath='{.status.state}' | grep -Eqx '$4'"
}
job() { # NS NAME REPLICAS COUNT [TOPOLOGY-YAML]
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Training
  replicas: $3
  gpu: {count: $4}
  ${5:-}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
job topo gang 2 8 "topology: {required: rack}"
wait_jsonpath 20 Queued -n topo gpujob gang -o jsonpath='{.status.state}'
wait_for 10 "a waiting explanation" bash -c "[ -n \"\$(kubectl -n topo get gpujob gang -o jsonpath='{.status.message}')\" ]"
msg=$(k -n topo get gpujob gang -o jsonpath='{.status.message}')
assert_contains "$(k -n topo describe gpujob gang)" "$msg" "describe shows the explanation"
assert_match "$msg" "nodes|rack" "explanation talks about nodes/racks"
sleep 2
assert_eq Queued "$(k -n topo get gpujob gang -o jsonpath='{.status.state}')" "still Queued while no rack has room"
assert_eq 0 "$(k -n topo get pods -l gangq.io/job=gang -o name | wc -l)" "no pod of a gang that does not fit"
pass "2x8 rack gang waits while no rack has 2 free nodes: Queued, explanation in describe: $msg"

k -n topo delete pod f3 --grace-period=0 --force >/dev/null 2>&1
wait_state 20 topo gang 'Admitted|Running'
wait_for 10 "2 gang pods" bash -c "[ \$(kubectl -n topo get pods -l gangq.io/job=gang -o name | wc -l) = 2 ]"
assert_eq "n3 n4" "$(k -n topo get pods -l gangq.io/job=gang -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | xargs)" "pods bound inside rack-2"
assert_eq "rack-2" "$(k -n topo get gpujob gang -o jsonpath='{.status.admission.domain}')" "admission domain"
assert_not_contains "$(k -n topo get gpujob gang -o jsonpath='{.status.message}')" "nodes fit" "the waiting explanation is gone once admitted"
wait_jsonpath 20 Running -n topo gpujob gang -o jsonpath='{.status.state}'
pass "rack-2 freed: gang admitted with both pods on n3+n4 (domain rack-2), Running"

# --- quota: team solo has 4 GPUs, no cohort
job solo s1 1 4
wait_state 20 solo s1 'Admitted|Running'
job solo s2 1 1
wait_jsonpath 20 Queued -n solo gpujob s2 -o jsonpath='{.status.state}'
wait_for 10 "quota explanation" bash -c "kubectl -n solo get gpujob s2 -o jsonpath='{.status.message}' | grep -qi quota"
pass "team quota: 4/4 used, next job Queued: $(k -n solo get gpujob s2 -o jsonpath='{.status.message}')"

# --- borrowing: ta (4, may borrow 4) borrows tb's unused quota, up to its borrowingLimit
job ta a1 2 4
wait_state 20 ta a1 'Admitted|Running'
wait_for 10 "ta borrowed=4" bash -c "[ \"\$(kubectl get team ta -o jsonpath='{.status.used}/{.status.borrowed}')\" = 8/4 ]"
job ta a2 1 1
wait_jsonpath 20 Queued -n ta gpujob a2 -o jsonpath='{.status.state}'
pass "cohort borrowing: ta uses 8 on a quota of 4 (borrowed 4 = borrowingLimit); a 9th GPU waits"

# tb wants its own quota back: 14 GPUs are free outside rack-2 and 12 are used (s1 4, a1 8),
# so b1 (4) fits only by reclaiming from the borrower ta (min-runtime 0).
job tb b1 1 4
wait_state 30 tb b1 'Admitted|Running'
a1=$(k -n ta get gpujob a1 -o jsonpath='{.status.state} {.status.lastPreemption.by}')
assert_eq "Preempted tb/b1" "$a1" "the borrower ta/a1 is reclaimed for the lender"
pass "lender tb admitted within its nominal quota by reclaiming from the borrower (ta/a1: $a1)"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
