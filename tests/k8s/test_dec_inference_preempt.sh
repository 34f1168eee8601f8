#!/usr/bin/env bash
# The minimum runtime guards batch and training from trading GPUs; it does not delay an
# Inference preemptor. With DEFAULT controller flags (no --min-runtime: 5m), a cluster full of
# Batch work admitted seconds ago is preempted at once for an Inference job of priority 1000
# (Admitted within 15 s, victim Preempted with a reason naming the preemptor), while a
# Training job of higher priority than a just-admitted Batch job is held: Queued, no victim
# taken, its message saying it waits for the minimum runtime and until when. With a short
# --min-runtime the same Training job preempts the Batch job (the hold was the runtime only).
. "$(dirname "$0")/lib.sh"

for n in ga gb; do
  fakelet add-node "$n" --gpus 8 --cpu 64 --memory 512Gi --label "part=$n" \
    --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --label nvidia.com/gpu.memory=81559 \
    --label "kubernetes.io/hostname=$n" >/dev/null
done
for ns in serve bt tt; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: serve}
spec: {namespaces: [serve], quota: [{gpuType: "*", gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: bt}
spec: {namespaces: [bt], quota: [{gpuType: "*", gpus: 16}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tt}
spec: {namespaces: [tt], quota: [{gpuType: "*", gpus: 8}]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false     # default flags: --min-runtime 5m
wait_for 20 "controller started" grep -q "controller started" "$GQ_TEST_TMP/controller.log"
assert_contains "$(grep 'controller started' "$GQ_TEST_TMP/controller.log")" "min_runtime_s=300" "default minimum runtime 5m"

job() { # NS NAME CLASS PRIORITY REPLICAS COUNT NODE
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: $3
  priority: $4
  replicas: $5
  gpu: {count: $6}
  template: {spec: {nodeSelector: {part: $7}, terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}

# --- Inference preempts Batch admitted seconds ago
job bt victim Batch 10 2 4 ga
wait_jsonpath 20 Running -n bt gpujob victim -o jsonpath='{.status.state}'
old_pods=$(k -n bt get pods -l gangq.io/job=victim -o jsonpath='{.items[*].metadata.name}')
pass "Batch gang 2x4 Running on all 8 GPUs of ga ($old_pods)"
t0=$(date +%s)
job serve infer Inference 1000 1 4 ga
wait_state 15 serve infer 'Admitted|Running'
dt=$(( $(date +%s) - t0 ))
st=$(k -n bt get gpujob victim -o jsonpath='{.status.state}|{.status.lastPreemption.by}|{.status.preemptions}')
assert_match "$st" '^(Preempted|Queued)\|serve/infer\|1$' "victim preempted once by serve/infer"
reason=$(k -n bt get gpujob victim -o jsonpath='{.status.lastPreemption.reason}')
assert_ne "" "$reason" "the victim's status carries a preemption reason"
for p in $old_pods; do
  wait_for 20 "victim pod $p deleted" bash -c "! kubectl -n bt get pod $p >/dev/null 2>&1"
done
ev=$(k -n bt get events --field-selector involvedObject.name=victim,reason=Preempted -o jsonpath='{.items[*].message}')
assert_contains "$ev" "serve/infer" "Preempted event names the preemptor"
assert_eq ga "$(job_pod_nodes serve infer)" "inference pod bound on ga"
pass "Inference (priority 1000) Admitted ${dt}s after apply under the default 5m minimum runtime; victim $st, reason: $reason"

# --- Training vs Batch: held by the minimum runtime, and says so
job bt young Batch 10 1 8 gb
wait_jsonpath 20 Running -n bt gpujob young -o jsonpath='{.status.state}'
job tt train Training 500 1 8 gb
wait_jsonpath 20 Queued -n tt gpujob train -o jsonpath='{.status.state}'
wait_for 20 "a waiting message about the minimum runtime" bash -c \
  "kubectl -n tt get gpujob train -o jsonpath='{.status.message}' | grep -Eqi 'min(imum)?[- ]?run ?time'"
msg=$(k -n tt get gpujob train -o jsonpath='{.status.message}')
assert_match "$msg" 'minimum runtime \(300s\) until [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z' "the message gives the minimum runtime and until when"
until=$(grep -Eo 'until [0-9TZ:-]+' <<<"$msg" | head -1 | cut -d' ' -f2)
adm=$(k -n bt get gpujob young -o jsonpath='{.status.admission.time}')
d=$(( $(date -d "$until" +%s) - $(date -d "$adm" +%s) ))
[ "$d" -ge 299 ] && [ "$d" -le 301 ] || fail "'until' ($until) is the victim's admission ($adm) + 300 s: off by $((d - 300)) s"
sleep 3
assert_eq "Running 0" "$(k -n bt get gpujob young -o jsonpath='{.status.state} {.status.preemptions}')" "the young Batch job is not preempted for Training"
assert_eq "Queued" "$(k -n tt get gpujob train -o jsonpath='{.status.state}')" "the Training job still waits"
assert_contains "$(k -n tt describe gpujob train)" "$msg" "describe shows the explanation"
pass "Training (priority 500) over a Batch job admitted seconds ago: held by the 5m minimum runtime: $msg"

# The hold is the minimum runtime only: with --min-runtime 2s the Training job preempts.
gq_ctl_stop
gq_ctl_start --leader-elect=false --min-runtime 2s
wait_state 30 tt train 'Admitted|Running'
assert_match "$(k -n bt get gpujob young -o jsonpath='{.status.state}|{.status.lastPreemption.by}')" '^(Preempted|Queued)\|tt/train$' "the Batch job is preempted for tt/train"
assert_match "$(k -n bt get gpujob victim -o jsonpath='{.status.state}')" '^(Preempted|Queued)$' "the first victim still waits (inference holds its GPUs)"
pass "restarted with --min-runtime 2s: Training admitted by preempting the Batch job"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
