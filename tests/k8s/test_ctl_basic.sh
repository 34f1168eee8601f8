#!/usr/bin/env bash
# Controller scenario 1 against the real API server: Teams/Pools/PriorityClasses from the
# examples, fake-kubelet nodes, a GPUJob admitted with its pods bound to nodes (labels, owner
# reference, GPU requests), Running when the fake kubelet runs them, Succeeded when they
# succeed; `kubectl get gpujobs/teams/gpupools` columns filled; a job of an unknown team
# stays Queued with a condition saying so; a template nodeSelector is honoured.
. "$(dirname "$0")/lib.sh"

k apply -f examples/manifests/00-namespaces.yaml -f examples/manifests/01-priorityclasses.yaml \
  -f examples/manifests/02-teams.yaml -f examples/manifests/03-pools.yaml >/dev/null
for n in a100-01 a100-02; do
  fakelet add-node "$n" --gpus 8 --cpu 64 --memory 512Gi --label gangq.io/pool=batch \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB --label nvidia.com/gpu.memory=40960 \
    --label topology.gangq.io/rack=rack-3 --label topology.kubernetes.io/zone=zone-b \
    --label topology.gangq.io/block=block-b1 --label "kubernetes.io/hostname=$n" >/dev/null
done
# CLI: usage errors exit 2 with a message; a config file is read, flags override it
set +e
out=$("$GANGQ_BIN" controller --db "$GQ_TEST_TMP/x.db" --bogus 1 2>&1); rc=$?
set -e
assert_eq 2 "$rc" "unknown flag exit code"
assert_contains "$out" "unknown option --bogus" "unknown flag message"
printf 'min-runtime: soon\n' >"$GQ_TEST_TMP/bad.yaml"
set +e
out=$("$GANGQ_BIN" controller --config "$GQ_TEST_TMP/bad.yaml" --db "$GQ_TEST_TMP/x.db" 2>&1); rc=$?
set -e
assert_eq 2 "$rc" "bad config file exit code"
assert_contains "$out" "bad.yaml: --min-runtime" "bad config file message names file and key"
printf 'log-level: debug\nmin-runtime: 90s\nlevels: [zone=topology.kubernetes.io/zone, rack=topology.gangq.io/rack, node=kubernetes.io/hostname]\n' >"$GQ_TEST_TMP/ctl.yaml"
pass "CLI: unknown flag and bad config file refused with exit 2"

gq_fakelet_loop --interval 0.5
gq_ctl_start --config "$GQ_TEST_TMP/ctl.yaml" --min-runtime 2m --listen 127.0.0.1:0
wait_for 20 "controller leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"
assert_contains "$(grep 'controller started' "$GQ_TEST_TMP/controller.log")" "min_runtime_s=120 levels=3" "config file read (3 levels), flag overrides its min-runtime"
assert_contains "$(cat "$GQ_TEST_TMP/controller.log")" "level=debug" "log level from the config file"
port=$(gq_ctl_port)
wait_for 10 "/readyz 200" curl -sf "http://127.0.0.1:$port/readyz"
assert_eq ok "$(curl -s "http://127.0.0.1:$port/healthz")" "/healthz"
pass "controller started with --config (flags win), took the lease, /readyz and /healthz answer on port $port"

cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: train-a, namespace: research}
spec:
  class: Batch
  priorityClassName: gangq-batch-low
  replicas: 2
  gpu: {count: 4, types: [NVIDIA-A100-SXM4-40GB]}
  template:
    metadata: {labels: {app: train-a}}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: "4", memory: 16Gi}}
YAML
wait_jsonpath 20 Admitted -n research gpujob train-a -o jsonpath='{.status.state}'
uid=$(k -n research get gpujob train-a -o jsonpath='{.metadata.uid}')
wait_for 10 "2 pods created" bash -c "[ \$(kubectl -n research get pods -l gangq.io/job=train-a -o name | wc -l) = 2 ]"
pods=$(k -n research get pods -l gangq.io/job=train-a -o json)
assert_eq "2" "$(jq '[.items[] | select(.spec.nodeName != null and .spec.nodeName != "")] | length' <<<"$pods")" "pods bound to nodes"
assert_eq "research research" "$(jq -r '[.items[].metadata.labels["gangq.io/team"]] | join(" ")' <<<"$pods")" "team label"
assert_eq "0 1" "$(jq -r '[.items[].metadata.labels["gangq.io/replica"]] | sort | join(" ")' <<<"$pods")" "replica labels"
assert_eq "train-a train-a" "$(jq -r '[.items[].metadata.labels.app] | join(" ")' <<<"$pods")" "template labels kept"
assert_eq "GPUJob train-a $uid true true" "$(jq -r '.items[0].metadata.ownerReferences[0] | "\(.kind) \(.name) \(.uid) \(.controller) \(.blockOwnerDeletion)"' <<<"$pods")" "owner reference"
assert_eq "4 4" "$(jq -r '.items[0].spec.containers[0].resources | "\(.requests["nvidia.com/gpu"]) \(.limits["nvidia.com/gpu"])"' <<<"$pods")" "GPU requests and limits"
assert_eq "4" "$(jq -r '.items[0].metadata.annotations["gangq.io/gpu-devices"] | split(",") | length' <<<"$pods")" "device annotation"
nodes=$(k -n research get gpujob train-a -o jsonpath='{.status.admission.nodes}')
assert_contains "$nodes" "a100-0" "admission nodes in status"
pass "GPUJob Admitted; 2 pods bound, labelled, owned by the GPUJob, 4 GPUs each"

fakelet run research -l gangq.io/job=train-a >/dev/null
wait_jsonpath 20 Running -n research gpujob train-a -o jsonpath='{.status.state}'
assert_ne "" "$(k -n research get gpujob train-a -o jsonpath='{.status.startTime}')" "startTime set"
out=$(k -n research get gpujobs)
assert_match "$out" "train-a +research +Batch +100 +8 +Running" "kubectl get gpujobs columns"
wait_for 10 "team status used=8" bash -c "[ \"\$(kubectl get team research -o jsonpath='{.status.used}')\" = 8 ]"
teams=$(k get teams)
assert_match "$teams" "research +12 +8 +0 +1" "kubectl get teams columns (QUOTA USED BORROWED PENDING RUNNING; BORROWED per type, blank)"
wait_for 10 "pool status" bash -c "[ \"\$(kubectl get gpupool batch -o jsonpath='{.status.allocated}')\" = 8 ]"
assert_match "$(k get gpupools)" "batch +16 +8 +8 +8 +0" "kubectl get gpupools columns"
pass "Running (startTime); gpujobs/teams/gpupools columns filled"

# fair share's usage: GPU-seconds integrated per Team while its jobs hold GPUs
t_run=$(date +%s%N)
sleep 3
fakelet succeed research -l gangq.io/job=train-a >/dev/null
wait_jsonpath 20 Succeeded -n research gpujob train-a -o jsonpath='{.status.state}'
assert_ne "" "$(k -n research get gpujob train-a -o jsonpath='{.status.completionTime}')" "completionTime set"
wait_for 10 "quota released" bash -c "[ \"\$(kubectl get team research -o jsonpath='{.status.used}')\" = 0 ]"
ev=$(k -n research get events --field-selector involvedObject.name=train-a -o jsonpath='{range .items[*]}{.reason}{" "}{end}')
assert_contains "$ev" "Admitted" "Admitted event"
assert_contains "$ev" "Succeeded" "Succeeded event"
m=$(curl -s "http://127.0.0.1:$port/metrics")
assert_match "$m" $'gangq_admissions_total\\{team="research",class="Batch"\\} 1\n' "/metrics admissions"
assert_match "$m" 'gangq_jobs\{state="Succeeded"\} 1' "/metrics jobs by state"
assert_match "$m" 'gangq_informer_lists_total\{informer="pods"\} 1' "/metrics informer lists"
assert_match "$m" 'gangq_cycle_duration_seconds_count [1-9]' "/metrics cycle duration histogram"
for ph in gather observe schedule commit act report; do
    assert_match "$m" "gangq_reconcile_phase_duration_seconds_count\\{phase=\"$ph\"\\} [1-9]" "/metrics $ph phase histogram"
done
# every reconcile runs the gather phase first: its count is the reconcile count (no
# separate gangq_reconciles_total)
assert_not_contains "$m" "gangq_reconciles_total" "no duplicate reconciles counter"
pass "Succeeded (completionTime), quota released, Events Admitted/Succeeded, /metrics figures"

# 8 GPUs held from before t_run until the Succeeded: at least 8 x 2 s of the 3 s
# slept (the last second may not be integrated yet), at most 8 x the time since
# the admission; no other Team used any
held_s=$(( ($(date +%s%N) - t_run) / 1000000000 + 30 ))
usage=$(sqlite3 -readonly "$GQ_TEST_TMP/gangq.db" "SELECT team || ' ' || CAST(sum(gpu_s) AS INTEGER) FROM usage GROUP BY team")
assert_match "$usage" "^research [0-9]+$" "usage recorded for the one Team that held GPUs, only for it"
gs=${usage#research }
[ "$gs" -ge 16 ] && [ "$gs" -le $(( 8 * held_s )) ] || fail "usage research $gs GPU-s, want 16..$(( 8 * held_s ))"
pass "fair-share usage: research $gs GPU-seconds for 8 GPUs held, no other Team"

k create namespace orphans >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: lost, namespace: orphans}
spec:
  team: nosuchteam
  gpu: {count: 1}
  template: {spec: {containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 20 Queued -n orphans gpujob lost -o jsonpath='{.status.state}'
wait_jsonpath 10 "False UnknownTeam" -n orphans gpujob lost -o jsonpath='{.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
assert_contains "$(k -n orphans describe gpujob lost)" "team nosuchteam does not exist" "describe shows the problem"
pass "unknown team: Queued with condition Valid=False UnknownTeam and the message"

cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: picky, namespace: research}
spec:
  gpu: {count: 1}
  template: {spec: {nodeSelector: {kubernetes.io/hostname: a100-02}, containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 20 Admitted -n research gpujob picky -o jsonpath='{.status.state}'
wait_for 10 "picky pod created" bash -c "[ \$(kubectl -n research get pods -l gangq.io/job=picky -o name | wc -l) = 1 ]"
pods=$(k -n research get pods -l gangq.io/job=picky -o json)
assert_eq "a100-02 a100-02" "$(jq -r '.items[0] | "\(.spec.nodeName) \(.spec.nodeSelector["kubernetes.io/hostname"])"' <<<"$pods")" "bound to the node its selector names, selector kept"
assert_eq "" "$(k -n research get gpujob picky -o jsonpath='{.status.conditions[?(@.type=="Valid")].reason}')" "no NodeSelectorUnsupported condition"
k -n research delete gpujob picky --wait=false >/dev/null
pass "nodeSelector excluding nodes: admitted on the matching node, pod keeps its nodeSelector"

cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: affine, namespace: research}
spec:
  gpu: {count: 1}
  template:
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [a100-01]}]}]
      containers: [{name: c, image: busybox}]
YAML
wait_jsonpath 20 Admitted -n research gpujob affine -o jsonpath='{.status.state}'
wait_for 10 "affine pod created" bash -c "[ \$(kubectl -n research get pods -l gangq.io/job=affine -o name | wc -l) = 1 ]"
pods=$(k -n research get pods -l gangq.io/job=affine -o json)
assert_eq "a100-01 a100-01" "$(jq -r '.items[0] | "\(.spec.nodeName) \(.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0])"' <<<"$pods")" "bound to the node its required affinity names, affinity kept"
assert_eq "" "$(k -n research get gpujob affine -o jsonpath='{.status.conditions[?(@.type=="Valid")].reason}')" "no Valid=False condition"
k -n research delete gpujob affine --wait=false >/dev/null
pass "required node affinity: admitted on the node it names, pod keeps its affinity"

# A spec the schema accepts but the controller cannot use: Failed with the reason; fixed: queued.
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: badlevel, namespace: research}
spec:
  gpu: {count: 1}
  topology: {required: planet}
  template: {spec: {containers: [{name: c, image: busybox}]}}
YAML
wait_jsonpath 20 Failed -n research gpujob badlevel -o jsonpath='{.status.state}'
msg=$(k -n research get gpujob badlevel -o jsonpath='{.status.message}')
assert_contains "$msg" "spec.topology.required" "Failed message names the field"
assert_eq "False InvalidSpec" "$(k -n research get gpujob badlevel -o jsonpath='{.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}')" "Valid condition"
k -n research patch gpujob badlevel --type=merge -p '{"spec":{"topology":{"required":"rack"}}}' >/dev/null
wait_for 20 "fixed job queued/admitted" bash -c "kubectl -n research get gpujob badlevel -o jsonpath='{.status.state}' | grep -Eq 'Queued|Admitted|Running'"
pass "invalid level: Failed ($msg); after kubectl patch fixing it: $(k -n research get gpujob badlevel -o jsonpath='{.status.state}')"

gq_ctl_stop
assert_contains "$(cat "$GQ_TEST_TMP/controller.log")" "controller stopped" "graceful stop logged"
pass "SIGTERM: clean exit"
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
