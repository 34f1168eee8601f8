#!/usr/bin/env bash
# A GPUJob's required node affinity (spec.template.spec.affinity.nodeAffinity.
# requiredDuringSchedulingIgnoredDuringExecution) is honoured like nodeSelector: with nodes g1
# (gen=5) and g2 (gen=3, under maintenance), a job asking gen Gt 4 and no maintenance label
# lands on g1 only, one asking gen NotIn [5] on g2 only (pods keep the affinity). A job whose
# affinity matches no node waits with "2 node affinity mismatch", no pod, and the condition
# Unschedulable=True; once a node is relabelled to match it is placed there and the condition
# turns False. A job asking 16 GPUs per replica while the largest node has 8 waits with
# Unschedulable=True and those figures; a 16-GPU node added by the fake kubelet admits it.
. "$(dirname "$0")/lib.sh"

add() { # NAME GPUS [LABEL...]
  local n=$1 g=$2; shift 2
  local extra=()
  for l in "$@"; do extra+=(--label "$l"); done
  fakelet add-node "$n" --gpus "$g" --cpu 96 --memory 1000Gi --label topology.gangq.io/rack=rack-1 \
    --label topology.gangq.io/block=b1 --label topology.kubernetes.io/zone=z1 \
    --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --label nvidia.com/gpu.memory=81559 \
    --label "kubernetes.io/hostname=$n" "${extra[@]}" >/dev/null
}
add g1 8 example.com/gen=5
add g2 8 example.com/gen=3 example.com/maintenance=yes
k create namespace aff >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: aff}
spec: {namespaces: [aff]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s

job() { # NAME GPUS TERMS-YAML
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: aff}
spec:
  class: Training
  gpu: {count: $2, types: [NVIDIA-H100-80GB-HBM3]}
  template:
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: $3
          preferredDuringSchedulingIgnoredDuringExecution:
          - {weight: 10, preference: {matchExpressions: [{key: example.com/gen, operator: In, values: ["3"]}]}}
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
YAML
}
cond() { # NAME FIELD   the Unschedulable condition's field
  k -n aff get gpujob "$1" -o jsonpath="{.status.conditions[?(@.type==\"Unschedulable\")].$2}"
}

job newgen 1 '[{matchExpressions: [{key: example.com/gen, operator: Gt, values: ["4"]}, {key: example.com/maintenance, operator: DoesNotExist}]}]'
job notfive 1 '[{matchExpressions: [{key: example.com/gen, operator: NotIn, values: ["5"]}]}]'
wait_state 20 aff newgen 'Admitted|Running'
wait_state 20 aff notfive 'Admitted|Running'
wait_job_pods 10 aff newgen 1
wait_job_pods 10 aff notfive 1
assert_eq g1 "$(job_pod_nodes aff newgen)" "gen Gt 4, no maintenance label: g1 (g2 is gen 3, the preferred term is ignored)"
assert_eq g2 "$(job_pod_nodes aff notfive)" "gen NotIn [5]: g2"
assert_eq Gt "$(k -n aff get pods -l gangq.io/job=newgen -o jsonpath='{.items[0].spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator}')" "pod keeps the required affinity"
assert_eq "" "$(k -n aff get gpujob newgen -o jsonpath='{.status.conditions[?(@.type=="Valid")].reason}')" "no NodeAffinityUnsupported condition"
assert_eq "" "$(cond newgen status)" "no Unschedulable condition on a job that was never unschedulable"
pass "required node affinity: Gt+DoesNotExist placed on g1, NotIn on g2, pods keep the affinity"

job nomatch 1 '[{matchExpressions: [{key: example.com/gen, operator: Gt, values: ["10"]}]}, {matchFields: [{key: metadata.name, operator: In, values: [g9]}]}]'
wait_jsonpath 20 Queued -n aff gpujob nomatch -o jsonpath='{.status.state}'
wait_for 10 "affinity explanation" bash -c "kubectl -n aff get gpujob nomatch -o jsonpath='{.status.message}' | grep -q '2 node affinity mismatch'"
wait_for 10 "Unschedulable=True on nomatch" bash -c "[ \"\$(kubectl -n aff get gpujob nomatch -o jsonpath='{.status.conditions[?(@.type==\"Unschedulable\")].status}')\" = True ]"
assert_eq "ExceedsCluster" "$(cond nomatch reason)" "condition reason"
assert_eq "needs 1 GPU of NVIDIA-H100-80GB-HBM3; no node is eligible (2 nodes: 2 node affinity mismatch)" "$(cond nomatch message)" "condition message with the figures"
assert_eq 0 "$(k -n aff get pods -l gangq.io/job=nomatch -o name | wc -l)" "no pod"
pass "affinity no node matches: Queued, $(k -n aff get gpujob nomatch -o jsonpath='{.status.message}'); Unschedulable=True: $(cond nomatch message)"

job toobig 16 '[{matchExpressions: [{key: example.com/gen, operator: Exists}]}]'
wait_jsonpath 20 Queued -n aff gpujob toobig -o jsonpath='{.status.state}'
wait_for 10 "Unschedulable=True on toobig" bash -c "[ \"\$(kubectl -n aff get gpujob toobig -o jsonpath='{.status.conditions[?(@.type==\"Unschedulable\")].status}')\" = True ]"
assert_eq "needs 16 GPUs of NVIDIA-H100-80GB-HBM3; the largest eligible node has 8 GPUs and fits 0 of 1 replica; 2 of 2 nodes eligible" "$(cond toobig message)" "16 GPUs on one node, the largest has 8"
assert_contains "$(k -n aff describe gpujob toobig)" "the largest eligible node has 8 GPUs" "describe shows it"
sleep 2
assert_eq Queued "$(k -n aff get gpujob toobig -o jsonpath='{.status.state}')" "still Queued, waiting for nodes to be added"
assert_eq 0 "$(k -n aff get pods -l gangq.io/job=toobig -o name | wc -l)" "no pod"
pass "16 GPUs per replica, largest node 8: Queued with Unschedulable=True: $(cond toobig message)"

k label node g2 example.com/gen=11 --overwrite >/dev/null
wait_state 20 aff nomatch 'Admitted|Running'
wait_job_pods 10 aff nomatch 1
assert_eq g2 "$(job_pod_nodes aff nomatch)" "placed on the node relabelled to match"
wait_for 10 "Unschedulable=False on nomatch" bash -c "[ \"\$(kubectl -n aff get gpujob nomatch -o jsonpath='{.status.conditions[?(@.type==\"Unschedulable\")].status}')\" = False ]"
assert_eq FitsCluster "$(cond nomatch reason)" "condition turned False"
pass "after relabelling g2 gen=11 the job is placed on g2, Unschedulable=False"

add g3 16 example.com/gen=6
wait_state 30 aff toobig 'Admitted|Running'
wait_job_pods 10 aff toobig 1
assert_eq g3 "$(job_pod_nodes aff toobig)" "the 16-GPU job on the added 16-GPU node"
wait_for 10 "Unschedulable=False on toobig" bash -c "[ \"\$(kubectl -n aff get gpujob toobig -o jsonpath='{.status.conditions[?(@.type==\"Unschedulable\")].status}')\" = False ]"
pass "16-GPU node g3 added by the fake kubelet: the job is admitted there, Unschedulable=False"

gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
