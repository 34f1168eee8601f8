#!/usr/bin/env bash
# A protected pool is used last. Pools: batch (one 4-GPU node, home to Batch) and inference
# (two 4-GPU nodes, home to Inference, protected, reserveGPUs 2). Batch and CPU-only jobs land
# on the batch pool while it has room, even when the protected pool is idle; only what the
# batch pool cannot hold borrows the protected pool's idle GPUs, and never past its
# reserveGPUs (a borrower that would leave fewer than 2 idle waits, saying so); an Inference
# job then takes the reserve without preempting anyone.
. "$(dirname "$0")/lib.sh"

fakelet add-node b-1 --gpus 4 --cpu 16 --memory 256Gi --label gangq.io/pool=batch \
  --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB --label nvidia.com/gpu.memory=40960 \
  --label kubernetes.io/hostname=b-1 >/dev/null
for n in inf-1 inf-2; do
  fakelet add-node "$n" --gpus 4 --cpu 64 --memory 256Gi --label gangq.io/pool=inference \
    --label nvidia.com/gpu.product=NVIDIA-L4 --label nvidia.com/gpu.memory=23034 \
    --label "kubernetes.io/hostname=$n" >/dev/null
done
for ns in bt sv; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUPool
metadata: {name: inference}
spec: {nodeSelector: {gangq.io/pool: inference}, classes: [Inference], protected: true, reserveGPUs: 2}
---
apiVersion: gangq.io/v1alpha1
kind: GPUPool
metadata: {name: batch}
spec: {nodeSelector: {gangq.io/pool: batch}, classes: [Batch]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: bt}
spec: {namespaces: [bt]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: sv}
spec: {namespaces: [sv]}
YAML
gq_fakelet_loop --interval 0.4 --auto-run
gq_ctl_start --leader-elect=false

job() { # NS NAME CLASS GPUS(0 = CPU-only) CPU [PRIORITY]
  local gpu=""
  [ "$4" = 0 ] || gpu="gpu: {count: $4}"
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: $3
  priority: ${6:-0}
  replicas: 1
  $gpu
  template:
    spec:
      terminationGracePeriodSeconds: 1
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "$5", memory: 1Gi}}}]
YAML
}
on() { # NS NAME GPUS CPU: apply, wait until admitted, print its node
  job "$1" "$2" "${5:-Batch}" "$3" "$4"
  wait_state 20 "$1" "$2" 'Admitted|Running'
  wait_job_pods 20 "$1" "$2" 1
  job_pod_nodes "$1" "$2"
}
# GPUs held on the inference pool's nodes by pods of namespace NS
inf_gpus() {
  k -n "$1" get pods -o json | jq '[.items[] | select(.spec.nodeName == "inf-1" or .spec.nodeName == "inf-2")
    | .spec.containers[].resources.limits["nvidia.com/gpu"] // "0" | tonumber] | add // 0'
}

# --- the batch pool has room: batch and CPU-only work stays there
assert_eq b-1 "$(on bt j1 1 1)" "1-GPU Batch job on the batch pool"
assert_eq b-1 "$(on bt cpu1 0 4)" "CPU-only job on the batch pool"
assert_eq b-1 "$(on bt j2 2 1)" "2-GPU Batch job on the batch pool"
pass "batch pool has room: j1 (1 GPU), cpu1 (CPU-only), j2 (2 GPUs) all on b-1; protected pool idle"

# --- the batch pool is short: only what does not fit there borrows the protected pool
n3=$(on bt j3 2 1)
assert_match "$n3" '^inf-[12]$' "2-GPU job that b-1 (1 GPU free) cannot hold borrows the protected pool"
assert_eq b-1 "$(on bt j4 1 1)" "the 1-GPU job still fits b-1: it goes there, not to the protected pool"
assert_eq b-1 "$(on bt cpu2 0 8)" "CPU-only job on b-1 while it has CPU"
n5=$(on bt cpu3 0 8)
assert_match "$n5" '^inf-[12]$' "CPU-only job that b-1's CPU cannot hold uses the protected pool"
pass "batch pool full (GPUs; CPU for cpu3): j3 on $n3 and cpu3 on $n5 borrow the protected pool; j4 and cpu2 on b-1"

# --- never past reserveGPUs: 8 GPUs, 2 kept idle -> borrowers hold at most 6
on bt j5 2 1 >/dev/null
on bt j6 2 1 >/dev/null
assert_eq 6 "$(inf_gpus bt)" "borrowers hold 6 of the protected pool's 8 GPUs"
job bt j7 Batch 1 1
wait_state 20 bt j7 Queued
wait_for 10 "j7 explanation" bash -c "[ -n \"\$(kubectl -n bt get gpujob j7 -o jsonpath='{.status.message}')\" ]"
msg=$(k -n bt get gpujob j7 -o jsonpath='{.status.message}')
assert_match "$msg" "protected pool inference" "the explanation names the protected pool"
sleep 3
assert_eq "Queued 6" "$(k -n bt get gpujob j7 -o jsonpath='{.status.state}') $(inf_gpus bt)" "a 1-GPU borrower that would dip into the reserve waits"
pass "borrowers stop at 6 GPUs (reserveGPUs 2 kept idle); j7 Queued: $msg"

# --- the reserve is there for the home class: an Inference job takes it without preempting
ni=$(on sv infer 2 1 Inference)
assert_match "$ni" '^inf-[12]$' "Inference job in its home pool"
assert_eq 0 "$(k -n bt get gpujobs -o json | jq '[.items[].status.preemptions // 0] | add')" "no borrower preempted: the reserve was idle"
assert_eq "Queued" "$(k -n bt get gpujob j7 -o jsonpath='{.status.state}')" "the Batch borrower still waits"
pass "Inference job admitted into the protected pool's idle reserve on $ni without preempting; the Batch borrower still waits"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
