#!/usr/bin/env bash
# Whole nodes stay whole. On a fresh controller with empty 4-GPU nodes of one type, small
# single-replica jobs without a topology preference (admitted one after the other) share a
# partially used node instead of opening a fully free one, so a later gang that needs a whole
# node (2 replicas x 2 GPUs, topology.required: node) is admitted while they still run.
# Two nodes (1 GPU, then 2 GPUs, then the gang) and three nodes (1, 2, 1 GPU, then two gangs).
. "$(dirname "$0")/lib.sh"

add() { # NAME
  fakelet add-node "$1" --gpus 4 --cpu 64 --memory 512Gi \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB --label nvidia.com/gpu.memory=81920 \
    --label topology.gangq.io/rack=rack-1 --label topology.gangq.io/block=b1 \
    --label topology.kubernetes.io/zone=z1 --label "kubernetes.io/hostname=$1" >/dev/null
}
job() { # NS NAME REPLICAS COUNT [TOPOLOGY-YAML]
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Batch
  replicas: $3
  gpu: {count: $4}
  ${5:-}
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
admitted() { # NS NAME REPLICAS: wait for Admitted|Running and its pods; print their nodes
  wait_state 20 "$1" "$2" 'Admitted|Running'
  wait_job_pods 20 "$1" "$2" "$3"
  job_pod_nodes "$1" "$2"
}
teams() { # NS...
  local ns
  for ns in "$@"; do
    k create namespace "$ns" >/dev/null
    printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: %s}\nspec: {namespaces: [%s]}\n' "$ns" "$ns" | k apply -f - >/dev/null
  done
}

# --- two nodes
add n1; add n2
teams two three
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false

job two one 1 1
a=$(admitted two one 1)
job two two 1 2
b=$(admitted two two 1)
assert_eq "$a" "$b" "the 2-GPU job joins the partially used node of the 1-GPU job (1 GPU on $a)"
pass "fresh controller, two empty 4-GPU nodes: the 1-GPU job on $a, the 2-GPU job on $b too"

job two gang 2 2 "topology: {required: node}"
g=$(admitted two gang 2)
other=$([ "$a" = n1 ] && echo n2 || echo n1)
assert_eq "$other $other" "$g" "the node-required 2x2 gang takes the node kept whole"
assert_eq "$other" "$(k -n two get gpujob gang -o jsonpath='{.status.admission.domain}')" "the gang's admission domain is its node"
assert_eq Running "$(k -n two get gpujob one -o jsonpath='{.status.state}')" "the 1-GPU job still runs"
assert_eq Running "$(k -n two get gpujob two -o jsonpath='{.status.state}')" "the 2-GPU job still runs"
assert_eq "0" "$(k -n two get gpujob one -o jsonpath='{.status.preemptions}')" "no preemption was needed"
pass "2x2 gang with topology.required: node admitted on $other while both small jobs run"

# --- three nodes: 1, 2 and 1 GPU fill one node exactly; two node-required gangs take the others
k -n two delete gpujob one two gang >/dev/null
wait_for 30 "pods of the first part gone" bash -c "[ \$(kubectl -n two get pods -o name | wc -l) = 0 ]"
add n3
job three s1 1 1
a=$(admitted three s1 1)
job three s2 1 2
b=$(admitted three s2 1)
job three s3 1 1
c=$(admitted three s3 1)
assert_eq "$a $a" "$b $c" "the 2-GPU and the second 1-GPU job join the first job's node"
pass "three empty 4-GPU nodes: 1, 2 and 1 GPU jobs all on $a (node full)"
job three g1 2 2 "topology: {required: node}"
job three g2 2 2 "topology: {required: node}"
g1=$(admitted three g1 2)
g2=$(admitted three g2 2)
same_node() { [ $# = 2 ] && [ "$1" = "$2" ]; }
same_node $g1 || fail "gang g1 on one node: got $g1"
same_node $g2 || fail "gang g2 on one node: got $g2"
assert_eq 3 "$(printf '%s\n' "$a" "${g1%% *}" "${g2%% *}" | sort -u | wc -l)" "the small jobs and the two gangs on three different nodes"
pass "two 2x2 node-required gangs admitted on ${g1%% *} and ${g2%% *}, the nodes kept whole"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
