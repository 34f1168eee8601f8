#!/usr/bin/env bash
# A GPUJob's pod-template nodeSelector is honoured: a rack gang whose selector matches two
# nodes of rack-1 is admitted on exactly those (pods keep the selector, so a kubelet would
# accept them); a second such gang waits with "node selector mismatch" in its explanation and
# no pod; a selector no node matches waits ("4 node selector mismatch") until a node is
# labelled to match, then it is placed there; when the first gang finishes the second one
# takes the matching nodes.
. "$(dirname "$0")/lib.sh"

add() { # NAME RACK [LABEL...]
  local n=$1 r=$2; shift 2
  local extra=()
  for l in "$@"; do extra+=(--label "$l"); done
  fakelet add-node "$n" --gpus 8 --cpu 96 --memory 1000Gi --label "topology.gangq.io/rack=$r" \
    --label topology.gangq.io/block=b1 --label topology.kubernetes.io/zone=z1 \
    --label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 --label nvidia.com/gpu.memory=81559 \
    --label "kubernetes.io/hostname=$n" "${extra[@]}" >/dev/null
}
add n1 rack-1 net.example.com/ib=yes
add n2 rack-1 net.example.com/ib=yes
add n3 rack-1
add n4 rack-2 net.example.com/ib=yes
k create namespace sel >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: sel}
spec: {namespaces: [sel]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s

wait_state() { # TIMEOUT NAME REGEX
  wait_for "$1" "gpujob sel/$2 state matching $3" bash -c "kubectl -n sel get gpujob $2 -o jsonpath='{.status.state}' | grep -Eqx '$3'"
}
job() { # NAME REPLICAS SELECTOR-YAML [TOPOLOGY-YAML]
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: sel}
spec:
  class: Training
  replicas: $2
  gpu: {count: 8}
  ${4:-}
  template: {spec: {nodeSelector: $3, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
nodes_of() { k -n sel get pods -l "gangq.io/job=$1" -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort | xargs; }

job ibgang 2 "{net.example.com/ib: \"yes\"}" "topology: {required: rack}"
wait_state 20 ibgang 'Admitted|Running'
wait_for 10 "2 ibgang pods" bash -c "[ \$(kubectl -n sel get pods -l gangq.io/job=ibgang -o name | wc -l) = 2 ]"
assert_eq "n1 n2" "$(nodes_of ibgang)" "gang placed on the two matching nodes of rack-1 (n3 does not match)"
assert_eq "yes yes" "$(k -n sel get pods -l gangq.io/job=ibgang -o jsonpath='{.items[*].spec.nodeSelector.net\.example\.com/ib}')" "pods keep the template nodeSelector"
assert_eq "rack-1" "$(k -n sel get gpujob ibgang -o jsonpath='{.status.admission.domain}')" "admission domain"
pass "rack gang with nodeSelector admitted on n1+n2 (rack-1), pods keep the selector"

job ibwait 2 "{net.example.com/ib: \"yes\"}" "topology: {required: rack}"
wait_jsonpath 20 Queued -n sel gpujob ibwait -o jsonpath='{.status.state}'
wait_for 10 "selector explanation" bash -c "kubectl -n sel get gpujob ibwait -o jsonpath='{.status.message}' | grep -q 'node selector mismatch'"
msg=$(k -n sel get gpujob ibwait -o jsonpath='{.status.message}')
assert_contains "$msg" "1 node selector mismatch" "n3 counted as a selector mismatch"
assert_contains "$(k -n sel describe gpujob ibwait)" "node selector mismatch" "describe shows it"
sleep 2
assert_eq Queued "$(k -n sel get gpujob ibwait -o jsonpath='{.status.state}')" "still Queued (n3 and n4 are free, but n3 does not match and rack-2 has one ib node)"
assert_eq 0 "$(k -n sel get pods -l gangq.io/job=ibwait -o name | wc -l)" "no pod of the waiting gang"
pass "second ib gang waits whole: $msg"

job nowhere 1 "{gpu-class: special}"
wait_jsonpath 20 Queued -n sel gpujob nowhere -o jsonpath='{.status.state}'
wait_for 10 "mismatch explanation" bash -c "kubectl -n sel get gpujob nowhere -o jsonpath='{.status.message}' | grep -q '4 node selector mismatch'"
assert_eq "" "$(k -n sel get gpujob nowhere -o jsonpath='{.status.conditions[?(@.type=="Valid")].reason}')" "no NodeSelectorUnsupported condition"
assert_eq 0 "$(k -n sel get pods -l gangq.io/job=nowhere -o name | wc -l)" "no pod"
pass "selector no node matches: Queued, $(k -n sel get gpujob nowhere -o jsonpath='{.status.message}')"

k label node n3 gpu-class=special >/dev/null
wait_state 20 nowhere 'Admitted|Running'
wait_for 10 "nowhere pod" bash -c "[ \$(kubectl -n sel get pods -l gangq.io/job=nowhere -o name | wc -l) = 1 ]"
assert_eq "n3" "$(nodes_of nowhere)" "placed on the node labelled to match"
pass "after 'kubectl label node n3 gpu-class=special' the job is placed on n3"

fakelet succeed sel -l gangq.io/job=ibgang >/dev/null
wait_jsonpath 20 Succeeded -n sel gpujob ibgang -o jsonpath='{.status.state}'
wait_state 30 ibwait 'Admitted|Running'
wait_for 10 "2 ibwait pods" bash -c "[ \$(kubectl -n sel get pods -l gangq.io/job=ibwait -o name | wc -l) = 2 ]"
assert_eq "n1 n2" "$(nodes_of ibwait)" "second gang on the matching nodes once they are free"
pass "first gang done: the waiting ib gang takes n1+n2"

gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
