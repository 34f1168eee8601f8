#!/usr/bin/env bash
# The fake kubelet against the real API server: nodes registered Ready with GPU capacity and
# without the not-ready taint; bound pods moved to Running / Succeeded / Failed; a graceful
# delete finished (on command and by the background loop); a node marked NotReady and deleted.
. "$(dirname "$0")/lib.sh"

# --- nodes from arguments
fakelet add-node gpu-a1 --gpus 8 --cpu 96 --memory 1Ti --label nvidia.com/gpu.product=H100 \
  --label topology.gangq.io/rack=r1 >/dev/null 2>&1 || fail "add-node gpu-a1"
fakelet add-node gpu-a2 --gpus 8 --label topology.gangq.io/rack=r1 --taint pool=inference:NoSchedule \
  >/dev/null 2>&1 || fail "add-node gpu-a2"

for n in gpu-a1 gpu-a2; do
  assert_eq True "$(k get node $n -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" "$n Ready condition"
  assert_eq 8 "$(k get node $n -o jsonpath='{.status.capacity.nvidia\.com/gpu}')" "$n GPU capacity"
  assert_eq 8 "$(k get node $n -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" "$n GPU allocatable"
  assert_not_contains "$(k get node $n -o jsonpath='{.spec.taints[*].key}')" node.kubernetes.io/not-ready "$n taints"
done
assert_eq 96 "$(k get node gpu-a1 -o jsonpath='{.status.capacity.cpu}')" "gpu-a1 cpu"
assert_eq H100 "$(k get node gpu-a1 -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.product}')" "gpu-a1 product label"
assert_eq "pool=inference:NoSchedule" \
  "$(k get node gpu-a2 -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect}{end}')" "gpu-a2 keeps its own taint only"
assert_contains "$(k get nodes)" "gpu-a1   Ready" "kubectl get nodes"
pass "nodes from arguments Ready, GPU capacity, not-ready taint removed"

# --- nodes from a manifest file (multi-document), with capacity in status
cat > "$GQ_TEST_TMP/nodes.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: m-1
  labels: {nvidia.com/gpu.product: A100, topology.gangq.io/rack: r9}
status:
  capacity: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: m-2
status:
  capacity: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}
  allocatable: {nvidia.com/gpu: "3"}
EOF
fakelet register "$GQ_TEST_TMP/nodes.yaml" >/dev/null 2>&1 || fail "register nodes.yaml"
assert_eq "4 3" "$(k get node m-1 m-2 -o jsonpath='{.items[*].status.allocatable.nvidia\.com/gpu}')" "allocatable from manifest"
assert_eq "True True" "$(k get node m-1 m-2 -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}')" "manifest nodes Ready"
assert_eq "" "$(k get node m-1 m-2 -o jsonpath='{.items[*].spec.taints}')" "manifest nodes untainted"
if [ -f "$GQ_ROOT/examples/cluster/nodes.yaml" ]; then
  fakelet register "$GQ_ROOT/examples/cluster/nodes.yaml" >/dev/null 2>&1 || fail "register examples/cluster/nodes.yaml"
  assert_eq "" "$(k get nodes -o jsonpath='{.items[*].spec.taints[?(@.key=="node.kubernetes.io/not-ready")].key}')" \
    "no node keeps the not-ready taint"
  pass "examples/cluster/nodes.yaml registered ($(k get nodes --no-headers | wc -l) nodes)"
fi
pass "nodes from a manifest Ready with their capacity"

# --- pods
ns=$(fresh_ns fakelet)
mkpod() { # NAME NODE(or empty) [GRACE]
  k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, labels: {app: t, which: $1}}
spec:
  ${2:+nodeName: $2}
  terminationGracePeriodSeconds: ${3:-30}
  containers:
  - {name: main, image: example.invalid/train:1}
  - {name: side, image: example.invalid/side:1}
EOF
}
mkpod p-run gpu-a1
mkpod p-ok gpu-a1
mkpod p-bad m-1
mkpod p-unbound ""

fakelet run "$ns" p-run >/dev/null 2>&1 || fail "fakelet run"
assert_eq Running "$(k -n "$ns" get pod p-run -o jsonpath='{.status.phase}')" "p-run phase"
assert_eq "true true" "$(k -n "$ns" get pod p-run -o jsonpath='{.status.containerStatuses[*].ready}')" "p-run containers ready"
assert_eq True "$(k -n "$ns" get pod p-run -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" "p-run Ready"
assert_contains "$(k -n "$ns" get pod p-run)" "2/2     Running" "kubectl get pod"

fakelet run "$ns" p-ok >/dev/null 2>&1 && fakelet succeed "$ns" -l which=p-ok >/dev/null 2>&1 || fail "fakelet succeed"
assert_eq Succeeded "$(k -n "$ns" get pod p-ok -o jsonpath='{.status.phase}')" "p-ok phase"
assert_eq "0 0" "$(k -n "$ns" get pod p-ok -o jsonpath='{.status.containerStatuses[*].state.terminated.exitCode}')" "p-ok exit codes"

fakelet fail "$ns" p-bad --exit-code 137 >/dev/null 2>&1 || fail "fakelet fail"
assert_eq Failed "$(k -n "$ns" get pod p-bad -o jsonpath='{.status.phase}')" "p-bad phase"
assert_eq "137" "$(k -n "$ns" get pod p-bad -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')" "p-bad exit code"

assert_fails "an unbound pod is not run" fakelet run "$ns" p-unbound
assert_contains "$GQ_OUT" "not bound" "refusal message"
assert_eq Pending "$(k -n "$ns" get pod p-unbound -o jsonpath='{.status.phase}')" "p-unbound stays Pending"
pass "bound pods moved to Running / Succeeded / Failed; unbound pod refused"

# --- graceful delete, finished on command
k -n "$ns" delete pod p-run --wait=false >/dev/null
assert_ne "" "$(k -n "$ns" get pod p-run -o jsonpath='{.metadata.deletionTimestamp}')" "p-run marked for deletion"
sleep 1
assert_eq p-run "$(k -n "$ns" get pod p-run -o jsonpath='{.metadata.name}')" "without a kubelet the delete does not finish"
fakelet finish-deletes "$ns" >/dev/null 2>&1 || fail "finish-deletes"
assert_fails "p-run gone" k -n "$ns" get pod p-run
assert_contains "$GQ_OUT" NotFound "p-run gone"
pass "graceful delete finished on command"

# --- background loop: auto-run bound pods, finish deletes
gq_fakelet_loop --interval 0.3 --auto-run --ns "$ns"
mkpod p-auto gpu-a2
wait_jsonpath 10 Running -n "$ns" pod p-auto -o jsonpath='{.status.phase}'
k -n "$ns" delete pod p-auto --wait=false >/dev/null
wait_for 10 "p-auto deleted by the loop" bash -c "! kubectl -n $ns get pod p-auto"
pass "background loop runs bound pods and finishes graceful deletes"

# --- heartbeat: lastHeartbeatTime advances, the transition time and the other conditions stay
hb0=$(k get node gpu-a2 -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')
tr0=$(k get node gpu-a2 -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
sleep 1.1
fakelet heartbeat >/dev/null 2>&1 || fail "heartbeat"
hb1=$(k get node gpu-a2 -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')
assert_ne "$hb0" "$hb1" "Ready heartbeat refreshed"
assert_eq "$tr0" "$(k get node gpu-a2 -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')" "transition time kept"
assert_eq "MemoryPressure DiskPressure PIDPressure Ready" "$(k get node gpu-a2 -o jsonpath='{.status.conditions[*].type}')" "conditions kept"
pass "heartbeat refreshes the Ready condition only"

# --- node NotReady, Ready again, deleted
fakelet notready gpu-a1 >/dev/null 2>&1 || fail "notready"
assert_eq False "$(k get node gpu-a1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" "gpu-a1 NotReady"
assert_eq "node.kubernetes.io/not-ready:NoSchedule" \
  "$(k get node gpu-a1 -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{end}')" "not-ready taint added"
assert_eq 8 "$(k get node gpu-a1 -o jsonpath='{.status.capacity.nvidia\.com/gpu}')" "capacity kept"
fakelet ready gpu-a1 >/dev/null 2>&1 || fail "ready"
assert_eq True "$(k get node gpu-a1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" "gpu-a1 Ready again"
assert_eq "" "$(k get node gpu-a1 -o jsonpath='{.spec.taints}')" "taint removed again"
fakelet delete-node gpu-a1 >/dev/null 2>&1 || fail "delete-node"
assert_fails "gpu-a1 gone" k get node gpu-a1
pass "node NotReady / Ready / deleted"
