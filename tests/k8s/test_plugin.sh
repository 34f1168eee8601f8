#!/usr/bin/env bash
# `kubectl gangq` through real kubectl (the kubectl-gangq symlink that `make install` puts next
# to gangq, first on PATH) against the real API server with RBAC on, the controller and the
# fake kubelet: the queue in order with reasons (table, json, yaml, --team, --watch ended by
# SIGINT), `why` with the Team's quota arithmetic and the nodes closest to fitting, `top teams`
# and `top pools`, suspend/resume (the controller releases and requeues), drain-team, clear
# errors (unknown job, bad flag = exit 2, a user without rights gets the verb and resource
# named, CRDs missing).
# gq-env: GQ_AUTHZ=RBAC
. "$(dirname "$0")/lib.sh"

# install: gangq and the kubectl-gangq symlink into a prefix (the binary under test, not rebuilt)
prefix="$GQ_TEST_TMP/prefix"
make -s -C "$GQ_ROOT" -o "$GANGQ_BIN" install PREFIX="$prefix" BUILD="$(dirname "$GANGQ_BIN")" >/dev/null
[ -L "$prefix/bin/kubectl-gangq" ] && [ "$(readlink "$prefix/bin/kubectl-gangq")" = gangq ] ||
  fail "make install did not create the kubectl-gangq symlink"
cmp -s "$prefix/bin/gangq" "$GANGQ_BIN" || fail "make install did not install gangq"
export PATH="$prefix/bin:$PATH"
assert_contains "$(kubectl plugin list 2>/dev/null)" "$prefix/bin/kubectl-gangq" "kubectl finds the plugin"
pass "make install PREFIX=...: gangq + kubectl-gangq symlink; kubectl plugin list shows it"

# usage errors: exit 2, usage on stderr
set +e
out=$(kubectl gangq queue --bogus 2>&1 >/dev/null); rc=$?
set -e
assert_eq 2 "$rc" "unknown flag exit code"
assert_contains "$out" "unknown flag --bogus" "unknown flag named"
assert_contains "$out" "usage: kubectl gangq" "usage on stderr"
set +e
out=$(kubectl gangq queue -o xml 2>&1); rc1=$?
out2=$(kubectl gangq why 2>&1); rc2=$?
out3=$(kubectl gangq frobnicate 2>&1); rc3=$?
set -e
assert_eq "2 2 2" "$rc1 $rc2 $rc3" "bad output format / missing job / unknown command exit 2"
assert_contains "$out3" 'unknown command "frobnicate"' "unknown command named"
pass "bad flags, formats and commands: usage on stderr, exit 2"

k apply -f examples/manifests/00-namespaces.yaml -f examples/manifests/01-priorityclasses.yaml \
  -f examples/manifests/02-teams.yaml -f examples/manifests/03-pools.yaml >/dev/null
for n in a100-01 a100-02; do
  fakelet add-node "$n" --gpus 8 --cpu 64 --memory 512Gi --label gangq.io/pool=batch \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB --label nvidia.com/gpu.memory=40960 \
    --label "kubernetes.io/hostname=$n" >/dev/null
done
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --min-runtime 10m
wait_for 20 "controller leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"

job() { # NS NAME REPLICAS COUNT PRIORITY
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Batch
  priority: $5
  replicas: $3
  gpu: {count: $4, types: [NVIDIA-A100-SXM4-40GB]}
  template: {spec: {restartPolicy: Never, containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]}}
YAML
}
# 16 A100s: research runs 8 + 4 (its quota is 8: it borrows 4 in cohort ml), nlp runs 4
job research run1 2 4 100
wait_state 20 research run1 Running
job research run2 1 4 100
job nlp nrun 1 4 100
wait_state 20 research run2 Running
wait_state 20 nlp nrun Running
# then three waiting jobs: the cluster is full
job research wait1 1 4 100
wait_state 20 research wait1 Queued
job research wait2 2 4 50
job nlp nwait 1 8 100
wait_state 20 research wait2 Queued
wait_state 20 nlp nwait Queued
wait_for 20 "wait reasons published" bash -c \
  "[ -n \"\$(kubectl -n research get gj wait2 -o jsonpath='{.status.waitReason}')\" ] && [ -n \"\$(kubectl -n nlp get gj nwait -o jsonpath='{.status.waitReason}')\" ] && [ -n \"\$(kubectl -n research get gj wait1 -o jsonpath='{.status.waitReason}')\" ]"
# positions are published at most every --position-interval (5 s): nwait may
# come one publication after the research jobs
wait_for 20 "positions published" bash -c \
  "[ \"\$(kubectl -n research get gj wait2 -o jsonpath='{.status.position}')\" = 2 ] && [ \"\$(kubectl -n nlp get gj nwait -o jsonpath='{.status.position}')\" = 1 ]"

# ---- queue
names_of() { awk 'NR > 1 && $4 ~ /^[a-z0-9-]+\/[a-z0-9-]+$/ {print $4}' <<<"$1" | xargs; } # NAMESPACE/NAME column
q=$(kubectl gangq queue -A)
echo "$q" | sed 's/^/    /'
assert_match "$q" "^POS +TEAM-POS +TEAM +NAMESPACE/NAME +GPUS +CLASS +AGE +WAIT-REASON +MESSAGE" "queue header"
assert_match "$q" $'\n[-0-9]+ +1 +research +research/wait1 +4 +Batch +[0-9]+s +[A-Za-z]+ +[^\n]*nodes fit' "wait1: team position 1, 4 GPUs, reason and message"
assert_match "$q" $'\n[-0-9]+ +2 +research +research/wait2 +8 \\(2x4\\) +Batch +[0-9]+s +[A-Za-z]+ ' "wait2: team position 2, 2x4 GPUs"
assert_match "$q" $'\n[-0-9]+ +1 +nlp +nlp/nwait +8 +Batch ' "nwait: first of team nlp"
assert_not_contains "$q" "run1" "running jobs are not in the queue"
order=$(names_of "$q")
assert_eq "research/wait1 research/wait2" "$(tr ' ' '\n' <<<"$order" | grep research | xargs)" "admission order within team research"
assert_eq 3 "$(wc -w <<<"$order")" "three waiting jobs"
# the global positions the controller publishes (if it does) ascend down the table; without
# them the order is priority 100 (older first), then 50
pos=$(awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}' <<<"$q" | xargs)
if [ -n "$pos" ]; then
  assert_eq "$(tr ' ' '\n' <<<"$pos" | sort -n | xargs)" "$pos" "published global positions ascend"
else
  assert_eq "research/wait1 nlp/nwait research/wait2" "$order" "admission order: priority 100 (older first), then 50"
fi
names=$(kubectl gangq queue -A -o json | jq -r '[.[] | "\(.name):\(.teamPosition):\(.waitReason != "")"] | sort | join(" ")')
assert_eq "nwait:1:true wait1:1:true wait2:2:true" "$names" "queue -o json: team positions, reasons"
assert_contains "$(kubectl gangq queue -n research -o yaml)" $'- globalPosition: ' "queue -o yaml"
assert_contains "$(kubectl gangq queue -n research -o yaml)" 'name: "wait2"' "queue -o yaml names the job"
assert_eq "nlp/nwait" "$(names_of "$(kubectl gangq queue --team nlp)")" "queue --team nlp"
assert_eq "research/wait1 research/wait2" "$(names_of "$(kubectl gangq queue -n research)")" "queue -n research"
pass "queue: waiting jobs in admission order with team positions, GPUs and reasons (table, json, yaml, --team, -n)"

# ---- why
w=$(kubectl gangq why wait1 -n research)
echo "$w" | sed 's/^/    /'
assert_contains "$w" "GPUJob research/wait1  team research" "why: the job"
assert_match "$w" "Wait reason: +[A-Za-z]+" "why: the wait reason"
assert_match "$w" "Message: +[^\n]*nodes fit" "why: the controller's message"
assert_match "$w" "Position: +1 in team research" "why: position"
assert_contains "$w" "Quota of team research, cohort ml" "why: quota section"
# research: nominal 8, used 8+4=12 (borrowed 4); cohort ml lends vision 8 + nlp 8 + research 8,
# of which research uses 12 over its guarantee: 12 more may be borrowed (limit 16 - 4)
assert_match "$w" "NVIDIA-A100-SXM4-40GB +8 +12 +4 +12 +12 +4 +yes +borrow 16, lend all" "why: quota arithmetic"
assert_match "$w" "a100-0[12] +NVIDIA-A100-SXM4-40GB +8 +8 +0 +no" "why: closest nodes with their free GPUs"
wj=$(kubectl gangq why research/wait2 -o json)
assert_eq "12 4 0 0" "$(jq -r '"\(.quota[0].used) \(.quota[0].borrowed) \(.closestNodes[0].free) \(.closestNodes[1].free)"' <<<"$wj")" "why -o json"
pass "why: reason, message, conditions, quota used/nominal/borrowable in cohort ml, nodes closest to fitting"

# ---- top
t=$(kubectl gangq top teams)
echo "$t" | sed 's/^/    /'
assert_match "$t" "research +ml +NVIDIA-A100-SXM4-40GB +8 +12 +4 +12 +2 jobs/12 GPUs +2" "top teams: research"
assert_match "$t" "nlp +ml +NVIDIA-H100-80GB-HBM3 +24 +0 +0 +[0-9]+ +1 jobs/8 GPUs +1" "top teams: nlp first row"
assert_match "$t" $'\n +NVIDIA-A100-SXM4-40GB +16 +4 +0 ' "top teams: nlp A100 row"
wait_for 20 "pool status" bash -c "[ \"\$(kubectl get gpupool batch -o jsonpath='{.status.allocated}')\" = 16 ]"
assert_match "$(kubectl gangq top pools)" "batch +16 +16 +0 +0 +[0-9]+ +no +Batch" "top pools"
assert_eq "12" "$(kubectl gangq top teams -o json | jq -r '.[] | select(.team=="research") | .gpuTypes[0].used')" "top teams -o json"
pass "top teams (quota/used/borrowed per GPU type, pending, running) and top pools"

# ---- suspend / resume: the controller reacts
s=$(kubectl gangq suspend run1 -n research)
assert_eq "gpujob.gangq.io research/run1 suspended" "$s" "suspend prints one line per job"
assert_eq "true" "$(k -n research get gj run1 -o jsonpath='{.spec.suspend}')" "spec.suspend set"
wait_state 30 research run1 Suspended
wait_for 30 "run1's pods released" bash -c "[ -z \"\$(kubectl -n research get pods -l gangq.io/job=run1 -o name)\" ]"
wait_for 30 "a waiting job admitted in run1's place" bash -c \
  "kubectl get gj -A -o jsonpath='{range .items[*]}{.metadata.name}={.status.state}{\"\\n\"}{end}' | grep -Eq '^(wait1|nwait)=(Admitted|Running)$'"
adm=$(k get gj -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}={.status.state}{"\n"}{end}' | grep -E '^[a-z]+/(wait1|nwait)=(Admitted|Running)$' | head -1 | cut -d= -f1)
assert_not_contains "$(kubectl gangq queue -A)" "$adm" "admitted job left the queue"
pass "suspend: spec.suspend=true, job Suspended, pods released, $adm admitted in its place"
r=$(kubectl gangq resume research/run1)
assert_eq "gpujob.gangq.io research/run1 resumed" "$r" "resume line"
assert_eq "false" "$(k -n research get gj run1 -o jsonpath='{.spec.suspend}')" "spec.suspend cleared"
wait_state 30 research run1 'Queued|Admitted|Running'
wait_for 20 "run1 back in the queue" bash -c "kubectl gangq queue -n research | grep -q research/run1"
pass "resume: spec.suspend=false, run1 back in the queue"

# ---- --watch re-renders on change and ends cleanly on SIGINT
kubectl gangq queue --team nlp --watch >"$GQ_TEST_TMP/watch.out" 2>&1 &
wpid=$!
# first render: nwait if it still waits, or the empty-queue line if it took run1's place
wait_for 15 "watch rendered nlp's queue" grep -Eq "nlp/nwait|No waiting GPUJobs of team nlp" "$GQ_TEST_TMP/watch.out"
job nlp nlate 2 8 10
wait_for 15 "watch re-rendered with nlate" grep -q "nlp/nlate" "$GQ_TEST_TMP/watch.out"
kill -INT "$wpid"
set +e
wait "$wpid"; rc=$?
set -e
assert_eq 0 "$rc" "--watch exit code after SIGINT"
pass "queue --watch: re-rendered when a job arrived; SIGINT ends it with exit 0"

# ---- drain-team
d=$(kubectl gangq drain-team research)
echo "$d" | sed 's/^/    /'
assert_eq 4 "$(grep -c '^gpujob.gangq.io research/' <<<"$d")" "drain-team: one line per unfinished research job"
for j in run1 run2 wait1 wait2; do
  assert_eq "true" "$(k -n research get gj $j -o jsonpath='{.spec.suspend}')" "drain-team suspended $j"
done
assert_eq "false" "$(k -n nlp get gj nrun -o jsonpath='{.spec.suspend}')" "another team's job untouched"
wait_for 30 "research's pods released" bash -c "[ -z \"\$(kubectl -n research get pods -l gangq.io/team=research -o name)\" ]"
assert_contains "$(kubectl gangq drain-team research)" "research/run2 already suspended" "drain-team again: already suspended"
pass "drain-team research: every unfinished job of the Team suspended, its pods released"

# ---- errors
set +e
out=$(kubectl gangq why nope -n research 2>&1); rc=$?
set -e
assert_eq 1 "$rc" "unknown job exit code"
assert_eq "error: gpujob research/nope not found" "$out" "unknown job message"
# a user with no rights (context namespace research = the default -n)
akc="$GQ_TEST_TMP/alice.kubeconfig"
kubectl config --kubeconfig="$akc" set-cluster t --server="$GQ_SERVER" --certificate-authority="$GQ_CA" >/dev/null
kubectl config --kubeconfig="$akc" set-credentials alice --token="$GQ_ALICE_TOKEN" >/dev/null
kubectl config --kubeconfig="$akc" set-context a --cluster=t --user=alice --namespace=research >/dev/null
kubectl config --kubeconfig="$akc" use-context a >/dev/null
set +e
out=$(KUBECONFIG="$akc" kubectl gangq queue 2>&1); rc=$?
set -e
assert_eq 1 "$rc" "forbidden exit code"
assert_contains "$out" "forbidden: you may not list gpujobs.gangq.io in namespace research" "403 names verb, resource, namespace"
# alice may read GPUJobs in research but not patch them
alice_role research gpujob-reader "get, list, watch" | k apply -f - >/dev/null
wait_for 10 "alice may list gpujobs" bash -c "KUBECONFIG='$akc' kubectl gangq queue >/dev/null 2>&1"
aq=$(KUBECONFIG="$akc" kubectl gangq queue 2>/dev/null)
assert_contains "$aq" "No waiting GPUJobs in namespace research." "alice's queue (default namespace from her context)"
set +e
out=$(KUBECONFIG="$akc" kubectl gangq resume wait1 2>&1); rc=$?
set -e
assert_eq 1 "$rc" "forbidden patch exit code"
assert_contains "$out" "forbidden: you may not patch gpujobs.gangq.io wait1 in namespace research" "403 on patch"
pass "errors: unknown job named; a restricted user is told the verb/resource/namespace refused"

gq_ctl_stop
k delete crd gpujobs.gangq.io >/dev/null
wait_for 20 "CRD gone" bash -c "! kubectl get --raw /apis/gangq.io/v1alpha1 2>/dev/null | grep -q '\"gpujobs\"'"
set +e
out=$(kubectl gangq queue 2>&1); rc=$?
set -e
assert_eq 1 "$rc" "CRDs missing exit code"
assert_eq "error: gangq CRDs not installed (gpujobs.gangq.io not found)" "$out" "CRDs missing message"
pass "CRDs missing: clear message"
