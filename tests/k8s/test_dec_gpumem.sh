#!/usr/bin/env bash
# spec.gpu.minMemoryGiB against the memory GPU Feature Discovery really reports
# (nvidia.com/gpu.memory, MiB): A100 40GB 40960, A100 80GB 81920, H100 80GB 81559,
# L40S 46068, L4 23034. The rule: a node's GPU memory, rounded to the nearest GiB, must be
# at least minMemoryGiB (H100 80GB = 79.65 GiB counts as 80, L40S = 44.99 as 45, L4 = 22.49
# as 22). Each job spreads one 1-GPU replica per node over exactly the nodes that qualify
# (a gang of that many replicas with spread: node is admitted there; one more replica stays
# Queued, the explanation counting the nodes with too little memory). Then the sample
# cluster (examples/cluster) runs the flagship examples (examples/manifests) as the README
# applies them: every job is admitted, llm-pretrain's 4x8 H100 (minMemoryGiB 80) in one rack.
. "$(dirname "$0")/lib.sh"

add() { # NAME PRODUCT MEMORY_MIB
  fakelet add-node "$1" --gpus 8 --cpu 64 --memory 512Gi --label "nvidia.com/gpu.product=$2" \
    --label "nvidia.com/gpu.memory=$3" --label "kubernetes.io/hostname=$1" >/dev/null
}
add a100-40 NVIDIA-A100-SXM4-40GB 40960
add a100-80 NVIDIA-A100-SXM4-80GB 81920
add h100 NVIDIA-H100-80GB-HBM3 81559
add l40s NVIDIA-L40S 46068
add l4 NVIDIA-L4 23034
k create namespace mem >/dev/null
printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: mem}\nspec: {namespaces: [mem]}\n' | k apply -f - >/dev/null
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false

job() { # NAME REPLICAS MIN_GIB
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: mem}
spec:
  class: Batch
  replicas: $2
  gpu: {count: 1, minMemoryGiB: $3}
  topology: {spread: node}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
check() { # MIN_GIB "NODES THAT QUALIFY (sorted)"
  local gib="$1" want="$2" n msg
  n=$(wc -w <<<"$want")
  job "m$gib" "$n" "$gib"
  job "m$gib-over" "$((n + 1))" "$gib"
  wait_state 20 mem "m$gib" 'Admitted|Running'
  wait_job_pods 20 mem "m$gib" "$n"
  assert_eq "$want" "$(job_pod_nodes mem "m$gib")" "minMemoryGiB $gib: one replica on each qualifying node"
  wait_state 20 mem "m$gib-over" Queued
  wait_for 10 "m$gib-over explanation" bash -c "kubectl -n mem get gpujob m$gib-over -o jsonpath='{.status.message}' | grep -q 'GiB GPU memory'"
  msg=$(k -n mem get gpujob "m$gib-over" -o jsonpath='{.status.message}')
  assert_contains "$msg" "$((5 - n)) less than $gib GiB GPU memory" "minMemoryGiB $gib: the explanation counts the nodes with too little memory"
  assert_eq 0 "$(k -n mem get pods -l "gangq.io/job=m$gib-over" -o name | wc -l)" "no pod for the job that does not fit"
  pass "minMemoryGiB $gib: admitted on $want; $((n + 1)) replicas wait: $msg"
}
check 80 "a100-80 h100"
check 48 "a100-80 h100"
check 45 "a100-80 h100 l40s"
check 40 "a100-40 a100-80 h100 l40s"
check 24 "a100-40 a100-80 h100 l40s"
check 22 "a100-40 a100-80 h100 l4 l40s"

# --- the flagship examples on the sample cluster
k delete gpujobs -n mem --all >/dev/null
wait_for 30 "pods of the memory jobs gone" bash -c "[ \$(kubectl -n mem get pods -o name | wc -l) = 0 ]"
gq_ctl_stop
fakelet delete-node a100-40 a100-80 h100 l40s l4 >/dev/null 2>&1
fakelet register "$GQ_ROOT/examples/cluster/nodes.yaml" >/dev/null 2>&1
gq_ctl_start --leader-elect=false
k apply -f "$GQ_ROOT/examples/manifests/" >/dev/null
# job NAMESPACE/NAME
for j in nlp/llm-pretrain research/eval-sweep cv-experiments/detector-train vision/vit-finetune \
    nlp/tokenize-corpus serving/embedder serving/chat-api; do
  wait_state 60 "${j%/*}" "${j#*/}" 'Admitted|Running'
done
wait_state 20 research nightly-report Suspended
wait_job_pods 20 nlp llm-pretrain 4
ln=$(job_pod_nodes nlp llm-pretrain)
racks=$(for n in $ln; do k get node "$n" -o jsonpath='{.metadata.labels.topology\.gangq\.io/rack}{"\n"}'; done | sort -u | xargs)
assert_match "$racks" '^rack-[12]$' "llm-pretrain inside one H100 rack ($ln)"
assert_eq 4 "$(wc -w <<<"$(tr ' ' '\n' <<<"$ln" | sort -u)")" "llm-pretrain on four nodes"
wait_job_pods 20 research eval-sweep 2
assert_match "$(job_pod_nodes research eval-sweep)" '^a100-0[1-4] a100-0[1-4]$' "eval-sweep (minMemoryGiB 40) on A100 40GB nodes"
pass "examples/manifests on examples/cluster: every job admitted (llm-pretrain on $ln, $racks), nightly-report Suspended"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
