#!/usr/bin/env bash
# The minimum runtime with default flags (300 s): an Inference job preempts a Batch job admitted
# seconds ago at once; a Training job of higher priority is held back by it and its status says
# until when the victim is protected.
. "$(dirname "$0")/lib.sh"

fakelet add-node g1 --gpus 8 --cpu 64 --memory 512Gi --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 \
  --label nvidia.com/gpu.memory=81559 --label kubernetes.io/hostname=g1 >/dev/null
for ns in serve bt; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: serve}
spec: {namespaces: [serve], quota: [{gpuType: "*", gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: bt}
spec: {namespaces: [bt], quota: [{gpuType: "*", gpus: 8}]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false

job() { # NS NAME CLASS PRIORITY COUNT
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: $3
  priority: $4
  replicas: 1
  gpu: {count: $5, minMemoryGiB: 80}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}

# An H100 80GB (81559 MiB) satisfies minMemoryGiB: 80.
job bt victim Batch 10 8
wait_jsonpath 20 Running -n bt gpujob victim -o jsonpath='{.status.state}'
pass "batch job Running on the H100 80GB node (minMemoryGiB: 80 against gpu.memory 81559)"

# A Training job of higher priority waits: the victim is younger than the minimum runtime.
job bt train Training 500 4
wait_for 20 "train explains the minimum runtime" bash -c \
  "kubectl -n bt get gpujob train -o jsonpath='{.status.message}' | grep -q 'protected by the minimum runtime (300s) until 20[0-9-]*T[0-9:]*Z'"
assert_eq Running "$(k -n bt get gpujob victim -o jsonpath='{.status.state}')" "victim not preempted for Training"
msg=$(k -n bt get gpujob train -o jsonpath='{.status.message}')
pass "Training preemptor held back by the minimum runtime: $msg"

# An Inference job preempts the just-admitted batch job at once.
job serve infer Inference 1000 4
wait_for 30 "infer admitted" bash -c \
  "kubectl -n serve get gpujob infer -o jsonpath='{.status.state}' | grep -Eqx 'Admitted|Running'"
st=$(k -n bt get gpujob victim -o jsonpath='{.status.lastPreemption.by}|{.status.preemptions}')
assert_eq "serve/infer|1" "$st" "victim preempted once, by serve/infer"
pass "Inference preempted a batch job admitted seconds ago (default --min-runtime 300s)"
