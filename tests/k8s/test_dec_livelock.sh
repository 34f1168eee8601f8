#!/usr/bin/env bash
# No preemption livelock. Three racks of two 8-GPU nodes; one cohort: a lending team (idle),
# two borrowing teams and a team on its own quota, all running rack-required 2x8 Training
# gangs (cluster full) with more borrower gangs waiting; --min-runtime 5s; the fake kubelet
# runs pods. The lender's high-priority rack-required 2x8 gang reclaims its quota: within 60 s
# it is Admitted, exactly one borrower gang is preempted for it (no victim twice, no second
# victim), and it then keeps running while the waiting borrowers stay out.
. "$(dirname "$0")/lib.sh"

i=0
for r in 1 2 3; do
  for h in a b; do
    i=$((i + 1))
    fakelet add-node "n$r$h" --gpus 8 --cpu 96 --memory 1000Gi --label "topology.gangq.io/rack=rack-$r" \
      --label topology.gangq.io/block=b1 --label topology.kubernetes.io/zone=z1 \
      --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --label nvidia.com/gpu.memory=81559 \
      --label "kubernetes.io/hostname=n$r$h" >/dev/null
  done
done
for ns in lend ta tb tc; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: lend}
spec: {namespaces: [lend], cohort: c1, quota: [{gpuType: "*", gpus: 16}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: ta}
spec: {namespaces: [ta], cohort: c1, quota: [{gpuType: "*", gpus: 8, borrowingLimit: 16}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tb}
spec: {namespaces: [tb], cohort: c1, quota: [{gpuType: "*", gpus: 8, borrowingLimit: 16}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tc}
spec: {namespaces: [tc], cohort: c1, quota: [{gpuType: "*", gpus: 16}]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 5s

job() { # NS NAME PRIORITY
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Training
  priority: $3
  replicas: 2
  gpu: {count: 8}
  topology: {required: rack}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
job tc c1 100
wait_state 20 tc c1 Running
job ta a1 100
wait_state 20 ta a1 Running
job tb b1 100
wait_state 20 tb b1 Running
wait_for 10 "ta and tb each borrow 8" bash -c \
  "[ \"\$(kubectl get team ta -o jsonpath='{.status.borrowed}') \$(kubectl get team tb -o jsonpath='{.status.borrowed}')\" = '8 8' ]"
job ta a2 100
job tb b2 100
wait_state 20 ta a2 Queued
wait_state 20 tb b2 Queued
pass "cluster full: tc/c1 (own quota), ta/a1 and tb/b1 (each borrowing 8) Running on one rack each; ta/a2, tb/b2 Queued"

t0=$(date +%s)
job lend hi 1000
wait_state 60 lend hi 'Admitted|Running'
dt=$(( $(date +%s) - t0 ))
rack=$(k -n lend get gpujob hi -o jsonpath='{.status.admission.domain}')
nodes=$(job_pod_nodes lend hi)
[[ "$nodes" =~ ^n([123])a\ n\1b$ ]] || fail "the lender's gang on the two nodes of one rack: got $nodes"
pass "lender's gang lend/hi Admitted ${dt}s after apply on $nodes (domain $rack)"

# Let the queue settle, then count: exactly one borrower gang preempted, once, by lend/hi.
sleep 10
all=$(k get gpujobs -A -o json)
summary=$(jq -r '[.items[] | "\(.metadata.namespace)/\(.metadata.name)=\(.status.state):\(.status.preemptions // 0):\(.status.lastPreemption.by // "")"] | sort | join(" ")' <<<"$all")
assert_eq 1 "$(jq '[.items[].status.preemptions // 0] | add' <<<"$all")" "exactly one preemption in the whole cluster ($summary)"
victim=$(jq -r '.items[] | select((.status.preemptions // 0) > 0) | "\(.metadata.namespace)/\(.metadata.name)"' <<<"$all")
assert_match "$victim" '^(ta/a1|tb/b1)$' "the victim is a borrower gang ($summary)"
assert_eq "lend/hi" "$(jq -r '.items[] | select((.status.preemptions // 0) > 0) | .status.lastPreemption.by' <<<"$all")" "preempted by lend/hi"
ev=$(k get events -A --field-selector reason=Preempted -o json)
assert_eq 1 "$(jq '[.items[] | .count // 1] | add // 0' <<<"$ev")" "one Preempted event in the cluster"
assert_eq "Running" "$(k -n lend get gpujob hi -o jsonpath='{.status.state}')" "the lender's gang keeps running"
assert_eq "Running" "$(k -n tc get gpujob c1 -o jsonpath='{.status.state}')" "the team on its own quota is untouched"
pass "one victim ($victim), preempted once by lend/hi; 10 s later still one preemption: $summary"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
