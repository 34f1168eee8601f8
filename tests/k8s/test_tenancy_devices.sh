#!/usr/bin/env bash
# GPUs gangq did not book stay out of reach, and borrowed GPUs stay reclaimable. Four parts,
# each on its own GPUPool, nodes, namespaces and Teams, under one controller (--min-runtime 0s):
# 1. alice (RBAC: GPUJobs in alpha only) asks for nvidia.com/gpu in her templates beside
#    spec.gpu — a second container's limits, an init container's requests, a CPU-only job's
#    container —: each is Failed with Valid=False InvalidSpec naming the field, gets no pod
#    and is charged nothing; team beta's valid job is admitted meanwhile.
# 2. A bare pod (no gangq.io/job) bound to node d1, requesting its 8 GPUs but carrying
#    gangq's own annotations gpu-milli "1" and gpu-devices "0", fills d1: of ten 1-GPU jobs
#    none is placed on d1, eight run on d2 and two wait (gangq trusted the annotations: 1/1000
#    of one device, and put seven jobs on d1).
# 3. Teams p3a and p3b (nominal 8 each, one cohort, two 8-GPU nodes): p3a runs two 8-GPU
#    jobs with spec.preemptible false, one on p3b's lent quota; p3b's 8-GPU job of a higher
#    priority reclaims it (victim preempted, "reclaiming quota lent") and runs; p3a's other
#    job keeps running (preemptible false used to keep the borrowed GPUs for good).
# 4. Protected GPUPool inference (one 8-GPU node, home to Inference, reserveGPUs 2): a Batch
#    job naming spec.pool inference and asking for 8 GPUs is not admitted (a Batch borrower
#    may hold 6: it used to take all 8 as if the pool were its home), and an Inference job
#    asking for 2 GPUs there is then admitted without preempting anything.
# GQ_DEVICES_PARTS (default "1 2 3 4") runs a subset.
# gq-env: GQ_AUTHZ=RBAC
. "$(dirname "$0")/lib.sh"
parts=" ${GQ_DEVICES_PARTS:-1 2 3 4} "
on() { [[ "$parts" == *" $1 "* ]]; }
ka() { kubectl --token="$GQ_ALICE_TOKEN" "$@"; }
[ -n "${GQ_ALICE_TOKEN:-}" ] || fail "env.sh gave no GQ_ALICE_TOKEN"

for ns in alpha beta p2 p2x p3a p3b p4b p4i; do k create namespace $ns >/dev/null; done
team() { # NAME NS GPUS [COHORT]
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: %s}\nspec: {namespaces: [%s], %squota: [{gpuType: "*", gpus: %s}]}\n' \
    "$1" "$2" "${4:+cohort: $4, }" "$3"
}
pool() { # NAME [EXTRA]: a GPUPool of the nodes labelled gangq.io/pool=NAME
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUPool\nmetadata: {name: %s}\nspec: {nodeSelector: {gangq.io/pool: %s}, %s}\n' \
    "$1" "$1" "${2:-classes: [Batch]}"
}
{
  team alpha alpha 8; team beta beta 8; team p2 p2 16; team p3a p3a 8 c3; team p3b p3b 8 c3
  team p4b p4b 16; team p4i p4i 16
  pool p1; pool p2; pool p3; pool inference 'classes: [Inference], protected: true, reserveGPUs: 2'
  alice_role alpha gpujob-author "get, list, watch, create, update, patch, delete"
} | k apply -f - >/dev/null
assert_eq no "$(ka -n alpha auth can-i create pods 2>/dev/null || true)" "alice may not create pods"
for n in v1:p1 d1:p2 d2:p2 c1:p3 c2:p3 i1:inference; do
  fakelet add-node "${n%:*}" --gpus 8 --cpu 64 --memory 256Gi --label "gangq.io/pool=${n#*:}" \
    --label "kubernetes.io/hostname=${n%:*}" >/dev/null
done
# The bare pod (admin-made, no gangq.io/job label) is bound to d1 before the controller starts.
on 2 && k -n p2x create -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: squatter, annotations: {gangq.io/gpu-milli: "1", gangq.io/gpu-devices: "0"}}
spec:
  nodeName: d1
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: "8"}}}]
YAML
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s

# A GPUJob: NS NAME CLASS PRIORITY GPUS POOL [PREEMPTIBLE] [CONTAINER_LINES]
plain='      containers: [{name: c, image: busybox}]'
gj() {
  local g=""
  [ "$5" = 0 ] || g="  gpu: {count: $5}"$'\n'
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: %s}\nspec:\n  class: %s\n  priority: %s\n%s  pool: %s\n  preemptible: %s\n  template:\n    spec:\n      terminationGracePeriodSeconds: 1\n%s\n' \
    "$2" "$1" "$3" "$4" "$g" "$6" "${7:-true}" \
    "${8:-$plain}"
}
npods() { k -n "$1" get pods -l "gangq.io/job=$2" -o name | wc -l; }
# NS NAME... : each job's name=state/preemptions, space-separated
jst() { local ns=$1; shift; for j in "$@"; do k -n "$ns" get gpujob "$j" -o json | jq -r '"\(.metadata.name)=\(.status.state)/\(.status.preemptions // 0)"'; done | xargs; }

# ---- submissions of every part at once
if on 1; then
  {
    gj alpha side Batch 0 1 p1 true '      containers:
      - {name: c, image: busybox}
      - {name: side, image: busybox, resources: {limits: {nvidia.com/gpu: "7"}}}'
    gj alpha init Batch 0 1 p1 true '      initContainers: [{name: i, image: busybox, resources: {requests: {nvidia.com/gpu: "8"}, limits: {nvidia.com/gpu: "8"}}}]
      containers: [{name: c, image: busybox}]'
    gj alpha cpuonly Batch 0 0 p1 true '      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: "8"}}}]'
  } | ka apply -f - >/dev/null
  gj beta b1 Batch 0 1 p1 | k apply -f - >/dev/null
fi
on 2 && for i in $(seq -w 1 10); do gj p2 "j$i" Batch 0 1 p2; done | k apply -f - >/dev/null
on 3 && { gj p3a a1 Batch 0 8 p3 false; gj p3a a2 Batch 0 8 p3 false; } | k apply -f - >/dev/null
on 4 && gj p4b named Batch 1000 8 inference | k apply -f - >/dev/null

if on 1; then
  refused() { # NAME FIELD
    wait_jsonpath 30 "Failed False InvalidSpec" -n alpha gpujob "$1" -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
    assert_contains "$(k -n alpha get gpujob "$1" -o jsonpath='{.status.message}')" \
      "$2: GPUs are asked for with spec.gpu" "$1: message names the field"
    assert_contains "$(k -n alpha get gpujob "$1" -o jsonpath='{.status.conditions[?(@.type=="Valid")].message}')" "$2" "$1: condition"
  }
  refused side 'spec.template.spec.containers[1].resources.limits["nvidia.com/gpu"]'
  refused init 'spec.template.spec.initContainers[0].resources.requests["nvidia.com/gpu"]'
  refused cpuonly 'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]'
  wait_state 30 beta b1 'Admitted|Running'
  wait_job_pods 20 beta b1 1
  assert_eq v1 "$(job_pod_nodes beta b1)" "beta's valid job on the p1 node"
  ev=$(k -n alpha get events --field-selector involvedObject.name=side -o jsonpath='{range .items[*]}{.type} {.reason}: {.message}{end}')
  assert_contains "$ev" 'Warning Failed: invalid spec: spec.template.spec.containers[1]' "side's Warning Event names the field"
  assert_eq "0 0 0 0" "$(npods alpha side) $(npods alpha init) $(npods alpha cpuonly) $(k get team alpha -o json | jq '.status.used // 0')" "no pod for the refused jobs, nothing charged to alpha"
  pass "part 1: template GPUs refused with the field named (InvalidSpec; Event: $ev); beta/b1 admitted on v1"
fi

if on 2; then
  wait_for 40 "eight p2 jobs Running" bash -c "[ \$(kubectl -n p2 get gpujobs -o jsonpath='{range .items[*]}{.status.state}{\"\\n\"}{end}' | grep -c '^Running$') -ge 8 ]"
  sleep 3
  nodes=$(k -n p2 get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | uniq -c | xargs)
  assert_eq "8 d2" "$nodes" "p2's pods: all on d2, none on the squatter's node d1"
  st=$(k -n p2 get gpujobs -o jsonpath='{range .items[*]}{.status.state}{"\n"}{end}' | sort | uniq -c | xargs)
  assert_eq "2 Queued 8 Running" "$st" "p2's jobs: eight running on d2, two waiting"
  pass "part 2: the bare 8-GPU pod with gangq's annotations fills d1: pods per node '$nodes', jobs '$st'"
fi

if on 3; then
  wait_state 40 p3a a1 Running; wait_state 40 p3a a2 Running
  wait_for 20 "p3a borrowed 8" bash -c "[ \"\$(kubectl get team p3a -o jsonpath={.status.borrowed})\" = 8 ]"
  gj p3b b1 Batch 500 8 p3 | k apply -f - >/dev/null
  wait_state 40 p3b b1 'Admitted|Running'
  wait_job_pods 20 p3b b1 1
  st=$(jst p3a a1 a2)
  assert_match "$st" '^a1=(Preempted|Queued)/1 a2=Running/0$|^a1=Running/0 a2=(Preempted|Queued)/1$' "one of p3a's jobs preempted, the other running"
  victim=a1; [[ "$st" == a1=Running* ]] && victim=a2
  keep=a1; [ "$victim" = a1 ] && keep=a2
  assert_eq "1 0" "$(npods p3a $keep) $(npods p3a $victim)" "the kept job's pod stays, the victim's is gone"
  ev=$(k -n p3a get events --field-selector "involvedObject.name=$victim,reason=Preempted" -o jsonpath='{.items[*].message}')
  assert_contains "$ev" "reclaiming quota lent to team p3a" "the victim's Preempted event says reclaim"
  pass "part 3: p3b/b1 reclaimed its lent quota from non-preemptible p3a/$victim ($st); event: $ev"
fi

if on 4; then
  wait_for 20 "named explained" bash -c "[ -n \"\$(kubectl -n p4b get gpujob named -o jsonpath='{.status.message}')\" ]"
  sleep 3
  assert_eq "named=Queued/0 0" "$(jst p4b named) $(npods p4b named)" "a Batch job naming the protected pool may not take its reserve"
  msg=$(k -n p4b get gpujob named -o jsonpath='{.status.message}')
  assert_contains "$msg" "protected pool inference" "the wait names the protected pool"
  gj p4i inf Inference 1000 2 inference | k apply -f - >/dev/null
  wait_state 30 p4i inf 'Admitted|Running'
  wait_job_pods 20 p4i inf 1
  assert_eq "i1 named=Queued/0" "$(job_pod_nodes p4i inf) $(jst p4b named)" "Inference on i1, the Batch job still waiting, never preempted"
  pass "part 4: Batch job naming the protected pool for 8 GPUs waits ($msg); Inference 2-GPU job admitted on i1 without preemption"
fi
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
