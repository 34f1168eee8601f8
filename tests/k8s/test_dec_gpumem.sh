#!/usr/bin/env bash
# spec.gpu.minMemoryGiB against the memory GPU Feature Discovery really reports
# (nvidia.com/gpu.memory, MiB): A100 40GB 40960, A100 80GB 81920, H100 80GB 81559,
# L40S 46068, L4 23034. The rule: minMemoryGiB names the card as sold, and a node
# qualifies when it reports at least 93 % of minMemoryGiB x 1024 MiB (the driver's ECC and
# reserve: an H100 80GB fits 80, an L40S 48GB fits 48, an L4 24GB fits 24). Each job spreads one 1-GPU replica per node over exactly the nodes that qualify
# (a gang of that many replicas with spread: node is admitted there; one more replica stays
# Queued, the explanation counting the nodes with too little memory). Then the sample
# cluster (examples/cluster) runs the example jobs (examples/manifests): llm-pretrain's 4x8
# H100 (minMemoryGiB 80) in one rack, eval-sweep (minMemoryGiB 40) on A100 40GB, every job
# admitted (nightly-report stays Suspended; vit-finetune once llm-pretrain has left).
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
  wait_for 10 "m$gib-over explanation" bash -c "kubectl -n mem get gpujob m$gib-over -o jsonpath='{.status.message}' | grep -q 'distinct node domains'"
  msg=$(k -n mem get gpujob "m$gib-over" -o jsonpath='{.status.message}')
  if [ "$n" -lt 5 ]; then
    assert_contains "$msg" "$((5 - n)) less than $gib GiB GPU memory" "minMemoryGiB $gib: the explanation counts the nodes with too little memory"
  else
    assert_not_contains "$msg" "GiB GPU memory" "minMemoryGiB $gib: every node has enough memory"
  fi
  assert_contains "$msg" "fewer than $((n + 1)) distinct node domains fit" "minMemoryGiB $gib: the gang needs one node more than qualify"
  assert_eq 0 "$(k -n mem get pods -l "gangq.io/job=m$gib-over" -o name | wc -l)" "no pod for the job that does not fit"
  pass "minMemoryGiB $gib: admitted on $want; $((n + 1)) replicas wait: $msg"
}
check 80 "a100-80 h100"
check 48 "a100-80 h100 l40s"
check 50 "a100-80 h100"
check 40 "a100-40 a100-80 h100 l40s"
check 44 "a100-80 h100 l40s"
check 25 "a100-40 a100-80 h100 l40s"
check 24 "a100-40 a100-80 h100 l4 l40s"

# --- the flagship examples on the sample cluster
k delete gpujobs -n mem --all >/dev/null
wait_for 30 "pods of the memory jobs gone" bash -c "[ \$(kubectl -n mem get pods -o name | wc -l) = 0 ]"
gq_ctl_stop
fakelet delete-node a100-40 a100-80 h100 l40s l4 >/dev/null 2>&1
fakelet register "$GQ_ROOT/examples/cluster/nodes.yaml" >/dev/null 2>&1
gq_ctl_start --leader-elect=false
M="$GQ_ROOT/examples/manifests"
k apply -f "$M/00-namespaces.yaml" -f "$M/01-priorityclasses.yaml" -f "$M/02-teams.yaml" -f "$M/03-pools.yaml" >/dev/null
# Every example job but vit-finetune at once (llm-pretrain fills one H100 rack, vit-finetune
# needs 4 H100s in each of the two racks: together they need a third rack).
for f in "$M"/job-*.yaml; do
  [ "$(basename "$f")" = job-training-zone-spread.yaml ] || k apply -f "$f" >/dev/null
done
for j in nlp/llm-pretrain research/eval-sweep cv-experiments/detector-train nlp/tokenize-corpus \
    serving/embedder serving/chat-api; do
  wait_state 60 "${j%/*}" "${j#*/}" 'Admitted|Running'
done
wait_state 20 research nightly-report Suspended
wait_job_pods 20 nlp llm-pretrain 4
ln=$(job_pod_nodes nlp llm-pretrain)
racks=$(for n in $ln; do k get node "$n" -o jsonpath='{.metadata.labels.topology\.gangq\.io/rack}{"\n"}'; done | sort -u | xargs)
assert_match "$racks" '^rack-[12]$' "llm-pretrain inside one H100 rack ($ln)"
assert_eq 4 "$(tr ' ' '\n' <<<"$ln" | sort -u | wc -l)" "llm-pretrain on four nodes"
wait_job_pods 20 research eval-sweep 2
assert_match "$(job_pod_nodes research eval-sweep)" '^a100-0[1-4] a100-0[1-4]$' "eval-sweep (minMemoryGiB 40) on A100 40GB nodes"
pass "examples/manifests on examples/cluster: llm-pretrain (4x8 H100, minMemoryGiB 80) on $ln ($racks), eval-sweep on A100 40GB, every other job admitted, nightly-report Suspended"
k -n nlp delete gpujob llm-pretrain >/dev/null
k apply -f "$M/job-training-zone-spread.yaml" >/dev/null
wait_state 60 vision vit-finetune 'Admitted|Running'
wait_job_pods 20 vision vit-finetune 2
vr=$(for n in $(job_pod_nodes vision vit-finetune); do k get node "$n" -o jsonpath='{.metadata.labels.topology\.gangq\.io/rack}{"\n"}'; done | sort | xargs)
assert_eq "rack-1 rack-2" "$vr" "vit-finetune's replicas on distinct racks"
pass "vit-finetune admitted once llm-pretrain left the rack: replicas on $vr"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
