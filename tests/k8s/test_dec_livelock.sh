#!/usr/bin/env bash
# No preemption livelock. Three racks of two 8-GPU nodes; one cohort: a lending team (idle),
# two borrowing teams and a team on its own quota, all running rack-required 2x8 Training
# gangs (cluster full) with more borrower gangs waiting; --min-runtime 5s (every gang older);
# the fake kubelet runs pods. The lender's high-priority rack-required 2x8 gang reclaims its
# quota: within 60 s it is Admitted, exactly one borrower gang is preempted for it (no victim
# twice, no second victim), and it then keeps running while the waiting borrowers stay out.
# Then the loop that used to repeat every minimum runtime: a borrowing team's rack-required
# Training gang reclaims H100s from a Batch job that may also run on A100 (where its team has
# nominal quota), so the stopped victim goes ahead of its preemptor in the queue; it must not
# be re-admitted onto the GPUs it freed and preempted again: the gang is Admitted within 60 s
# and the victim is preempted exactly once.
. "$(dirname "$0")/lib.sh"

for r in 1 2 3; do
  for h in a b; do
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

# Every running gang past the 5 s minimum runtime, so that the victim is chosen by the
# victim order (borrowers first), not by age.
adm=$(k -n tb get gpujob b1 -o jsonpath='{.status.admission.time}')
left=$(( $(date -d "$adm" +%s) + 6 - $(date +%s) ))
[ "$left" -le 0 ] || sleep "$left"
t0=$(date +%s)
job lend hi 1000
wait_state 60 lend hi 'Admitted|Running'
dt=$(( $(date +%s) - t0 ))
rack=$(k -n lend get gpujob hi -o jsonpath='{.status.admission.domain}')
nodes=$(job_pod_nodes lend hi)
case "$nodes" in "n1a n1b" | "n2a n2b" | "n3a n3b") ;; *) false ;; esac || fail "the lender's gang on the two nodes of one rack: got $nodes"
assert_eq "rack-${nodes:1:1}" "$rack" "admission domain is the gang's rack"
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
# --- a victim ahead of its preemptor in the queue
for ns in lend ta tb tc; do k -n "$ns" delete gpujobs --all >/dev/null; done
wait_for 30 "pods of the first part gone" bash -c "[ \$(kubectl get pods -A -o name | wc -l) = 0 ]"
for n in n1a n1b n2a n2b n3a n3b; do k cordon "$n" >/dev/null; done
add2() { # NAME RACK PRODUCT MEMORY
  fakelet add-node "$1" --gpus 8 --cpu 96 --memory 1000Gi --label "topology.gangq.io/rack=$2" \
    --label topology.gangq.io/block=b2 --label topology.kubernetes.io/zone=z1 \
    --label "nvidia.com/gpu.product=$3" --label "nvidia.com/gpu.memory=$4" \
    --label "kubernetes.io/hostname=$1" >/dev/null
}
add2 p0 q1 NVIDIA-H100-80GB-HBM3 81559; add2 p1 q1 NVIDIA-H100-80GB-HBM3 81559
add2 p2 q2 NVIDIA-H100-80GB-HBM3 81559; add2 p3 q2 NVIDIA-H100-80GB-HBM3 81559
add2 p4 q3 NVIDIA-A100-SXM4-80GB 81920
for ns in xa xb xl xd; do k create namespace $ns >/dev/null; done
H=NVIDIA-H100-80GB-HBM3; A=NVIDIA-A100-SXM4-80GB
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: xa}
spec: {namespaces: [xa], cohort: c2, quota: [{gpuType: $H, gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: xb}
spec: {namespaces: [xb], cohort: c2, quota: [{gpuType: $H, gpus: 0}, {gpuType: $A, gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: xl}
spec: {namespaces: [xl], cohort: c2, quota: [{gpuType: $H, gpus: 32}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: xd}
spec: {namespaces: [xd], cohort: c2, quota: [{gpuType: $A, gpus: 8}]}
YAML
one() { # NS NAME TYPES [NODE]
  local sel=""
  [ -z "${4:-}" ] || sel="nodeSelector: {kubernetes.io/hostname: $4},"
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Batch
  priority: 10
  gpu: {count: 8, types: [$3]}
  template: {spec: {$sel terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
  wait_state 20 "$1" "$2" Running
}
one xd w "$A"
one xl w1 "$H" p2
one xl w2 "$H" p3
one xb v "$H, $A"
vnode=$(job_pod_nodes xb v)
assert_match "$vnode" '^p[01]$' "the H100-or-A100 Batch job borrows an H100 of rack q1"
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: gang, namespace: xa}
spec:
  class: Training
  priority: 100
  replicas: 2
  gpu: {count: 8, types: [$H]}
  topology: {required: rack}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
pass "A100 full (xd/w), xl's work on rack q2, xb/v (H100 or A100) on $vnode; xa/gang (2x8 H100, rack, must borrow) applied"
t0=$(date +%s)
wait_state 60 xa gang 'Admitted|Running'
dt=$(( $(date +%s) - t0 ))
assert_eq "p0 p1" "$(job_pod_nodes xa gang)" "the gang on rack q1"
assert_eq q1 "$(k -n xa get gpujob gang -o jsonpath='{.status.admission.domain}')" "admission domain"
sleep 8
st=$(k -n xb get gpujob v -o jsonpath='{.status.state} {.status.preemptions} {.status.lastPreemption.by}')
assert_match "$st" '^(Preempted|Queued) 1 xa/gang$' "xb/v preempted exactly once, by xa/gang, and still waiting"
assert_eq "Running" "$(k -n xa get gpujob gang -o jsonpath='{.status.state}')" "the gang keeps running"
ev=$(k -n xb get events --field-selector involvedObject.name=v,reason=Preempted -o json)
assert_eq 1 "$(jq '[.items[] | .count // 1] | add // 0' <<<"$ev")" "one Preempted event for xb/v"
for j in xl/w1 xl/w2 xd/w; do
  assert_eq "Running 0" "$(k -n "${j%/*}" get gpujob "${j#*/}" -o jsonpath='{.status.state} {.status.preemptions}')" "$j untouched"
done
pass "xa/gang Admitted ${dt}s after apply on p0 p1; xb/v preempted once ($st), not re-admitted onto the GPUs it freed"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
