#!/usr/bin/env bash
# A waiting preemptor keeps what its victim freed (--min-runtime 5s). Team a's 2x8 rack gang must
# borrow; it preempts team b's borrowing H100 job on rack-1. Once stopped, the victim goes ahead
# of the gang in the queue (b is within its nominal quota on A100, which the victim also
# accepts), yet it is not re-admitted onto the GPUs it freed: the gang is admitted there, and
# the victim is preempted exactly once.
. "$(dirname "$0")/lib.sh"

add() { # NAME RACK PRODUCT
  fakelet add-node "$1" --gpus 8 --cpu 64 --memory 512Gi --label "topology.gangq.io/rack=$2" \
    --label "nvidia.com/gpu.product=$3" --label nvidia.com/gpu.memory=81559 \
    --label "kubernetes.io/hostname=$1" >/dev/null
}
H=NVIDIA-H100-80GB-HBM3
A=NVIDIA-A100-SXM4-80GB
add h1 rack-1 $H
add h2 rack-1 $H
add h3 rack-2 $H
add h4 rack-2 $H
add a1 rack-3 $A
for ns in a b l d; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: a}
spec: {namespaces: [a], cohort: c, quota: [{gpuType: $H, gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: b}
spec: {namespaces: [b], cohort: c, quota: [{gpuType: $H, gpus: 0}, {gpuType: $A, gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: l}
spec: {namespaces: [l], cohort: c, quota: [{gpuType: $H, gpus: 32}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: d}
spec: {namespaces: [d], cohort: c, quota: [{gpuType: $A, gpus: 8}]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 5s

job() { # NS NAME CLASS PRIORITY REPLICAS TYPES EXTRA-SPEC NODE-SELECTOR
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: $3
  priority: $4
  replicas: $5
  gpu: {count: 8, types: [$6]}
  $7
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, nodeSelector: {$8}, containers: [{name: c, image: busybox}]}}
YAML
}
running() { wait_jsonpath 30 Running -n "$1" gpujob "$2" -o jsonpath='{.status.state}'; }
job d w Batch 10 1 $A "" "kubernetes.io/hostname: a1"
job l w1 Batch 10 1 $H "" "kubernetes.io/hostname: h3"
job l w2 Batch 10 1 $H "" "kubernetes.io/hostname: h4"
job b v Batch 10 1 "$H, $A" "" "topology.gangq.io/rack: rack-1"
for j in d/w l/w1 l/w2 b/v; do running "${j%/*}" "${j#*/}"; done
pass "rack-2 and the A100 node busy within nominal quota, b's job borrows H100 on rack-1"

job a gang Training 100 2 $H "topology: {required: rack}" ""
wait_for 40 "gang Running" bash -c "kubectl -n a get gpujob gang -o jsonpath='{.status.state}' | grep -qx Running"
nodes=$(k -n a get pods -l gangq.io/job=gang -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | tr '\n' ' ')
assert_eq "h1 h2 " "$nodes" "gang on rack-1"
st=$(k -n b get gpujob v -o jsonpath='{.status.state}|{.status.lastPreemption.by}|{.status.preemptions}')
assert_eq "Preempted|a/gang|1" "$st" "victim preempted once, waiting"
msg=$(k -n b get gpujob v -o jsonpath='{.status.message}')
pass "gang admitted on the GPUs its victim freed; victim: $st ($msg)"
sleep 8 # past the minimum runtime: nothing is preempted again
assert_eq "1" "$(k -n b get gpujob v -o jsonpath='{.status.preemptions}')" "no second preemption"
assert_eq Running "$(k -n a get gpujob gang -o jsonpath='{.status.state}')" "gang still Running"
pass "no job preempted twice"
