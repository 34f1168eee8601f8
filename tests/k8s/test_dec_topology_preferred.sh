#!/usr/bin/env bash
# Preferred topology minimises distance, on knavigator's network-topology layout
# (resources/benchmarks/nwtopo): 12 eight-GPU nodes under a tree of switches
#            __________ sw31 __________
#           /            |             \
#       sw21            sw22            sw23
#       /  \            /  \            /  \
#   sw11    sw12    sw13    sw14    sw15    sw16
#    /\      /\      /\      /\      /\      /\
#  n1  n2  n3  n4  n5  n6  n7  n8  n9 n10 n11 n12
#  x       x           x                  x   x      (x: cordoned, spec.unschedulable)
# A 3-replica job of whole nodes belongs on n5, n7, n8: the only switch with three free
# nodes below it is sw22. Nodes carry Topograph's labels
# (network.topology.nvidia.com/{datacenter,spine,block}: sw3x/sw2x/sw1x) and, for the
# default levels, the same tree as zone=sw3x, block=sw2x, rack=sw1x (a Topograph "block" is
# one leaf switch, gangq's rack). Checked with the levels given by --level flags
# (preferred: block, then required: spine) and with the default levels (preferred: rack,
# then required: block).
. "$(dirname "$0")/lib.sh"

T=network.topology.nvidia.com
for i in $(seq 1 12); do
  leaf="sw1$(( (i + 1) / 2 ))"; spine="sw2$(( (i + 3) / 4 ))"
  fakelet add-node "n$i" --gpus 8 --cpu 128 --memory 1000Gi \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB --label nvidia.com/gpu.memory=81920 \
    --label "$T/datacenter=sw31" --label "$T/spine=$spine" --label "$T/block=$leaf" \
    --label topology.kubernetes.io/zone=sw31 --label "topology.gangq.io/block=$spine" \
    --label "topology.gangq.io/rack=$leaf" --label "kubernetes.io/hostname=n$i" >/dev/null
done
for n in n1 n3 n6 n11 n12; do k cordon "$n" >/dev/null; done
assert_eq "n1 n11 n12 n3 n6" "$(k get nodes -o jsonpath='{range .items[?(@.spec.unschedulable==true)]}{.metadata.name}{"\n"}{end}' | sort | xargs)" "five nodes cordoned"
k create namespace topo >/dev/null
printf 'apiVersion: gangq.io/v1alpha1\nkind: Team\nmetadata: {name: topo}\nspec: {namespaces: [topo]}\n' | k apply -f - >/dev/null
gq_fakelet_loop --interval 0.5 --auto-run

job() { # NAME TOPOLOGY-YAML
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: topo}
spec:
  class: Training
  replicas: 3
  gpu: {count: 8}
  topology: $2
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
expect_optimal() { # NAME TOPOLOGY-YAML
  job "$1" "$2"
  wait_state 20 topo "$1" 'Admitted|Running'
  wait_job_pods 20 topo "$1" 3
  assert_eq "n5 n7 n8" "$(job_pod_nodes topo "$1")" "$1 ($2) on the three free nodes under sw22"
  assert_eq sw22 "$(k -n topo get gpujob "$1" -o jsonpath='{.status.admission.domain}')" "$1: the admission names the tightest domain holding every replica"
  pass "$1 with $2: pods on n5 n7 n8 (domain sw22)"
  k -n topo delete gpujob "$1" >/dev/null
  wait_for 30 "pods of $1 gone" bash -c "[ \$(kubectl -n topo get pods -o name | wc -l) = 0 ]"
}

gq_ctl_start --leader-elect=false --level "datacenter=$T/datacenter" --level "spine=$T/spine" \
  --level "block=$T/block" --level node=kubernetes.io/hostname
expect_optimal pref-block "{preferred: block}"
expect_optimal req-spine "{required: spine}"
gq_ctl_stop

gq_ctl_start --leader-elect=false      # default levels: zone, block, rack, node
expect_optimal pref-rack "{preferred: rack}"
expect_optimal req-block "{required: block}"
# Two replicas fit under one leaf switch (sw14: n7 n8, or sw15: n9 n10): preferred rack
# keeps them there.
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: pair, namespace: topo}
spec:
  class: Training
  replicas: 2
  gpu: {count: 8}
  topology: {preferred: rack}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
wait_state 20 topo pair 'Admitted|Running'
wait_job_pods 20 topo pair 2
pn=$(job_pod_nodes topo pair)
assert_match "$pn" '^(n7 n8|n10 n9)$' "a pair under one leaf switch"
pd=$(k -n topo get gpujob pair -o jsonpath='{.status.admission.domain}')
case "$pn" in "n7 n8") assert_eq sw14 "$pd" "admission domain" ;; *) assert_eq sw15 "$pd" "admission domain" ;; esac
pass "2 replicas with preferred rack: $pn, under one leaf switch (domain $pd)"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
