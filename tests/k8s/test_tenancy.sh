#!/usr/bin/env bash
# Tenancy with RBAC on: alice may only create GPUJobs in namespace alpha (Team alpha). Each
# way of spending another team's quota, jumping the queue, taking the node or holding GPUs is
# refused — wrong spec.team, priority above the Team's ceiling, system-node-critical, an
# unknown PriorityClass, host namespaces / privileged / hostPath / a service account in the
# template, a 253-character name — while team beta's jobs are admitted as usual; gangq.io/
# labels and annotations, finalizers and a huge grace period in a template do not reach the
# pod; a second Team claiming alpha gets Valid=False and a Warning Event and takes nothing.
# gq-env: GQ_AUTHZ=RBAC
. "$(dirname "$0")/lib.sh"

ka() { kubectl --token="$GQ_ALICE_TOKEN" "$@"; }
[ -n "${GQ_ALICE_TOKEN:-}" ] || fail "env.sh gave no GQ_ALICE_TOKEN"

k create namespace alpha >/dev/null
k create namespace beta >/dev/null
cat <<'YAML' >"$GQ_TEST_TMP/setup.yaml"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: team-low}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: big}
value: 50000
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: alpha}
spec: {namespaces: [alpha], priorityClasses: [team-low, big], quota: [{gpuType: "*", gpus: 8}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: beta}
spec: {namespaces: [beta], quota: [{gpuType: "*", gpus: 8}]}
YAML
alice_role alpha gpujob-author "get, list, watch, create, update, patch, delete" >>"$GQ_TEST_TMP/setup.yaml"
k apply -f "$GQ_TEST_TMP/setup.yaml" >/dev/null
assert_eq yes "$(ka -n alpha auth can-i create gpujobs.gangq.io 2>/dev/null || true)" "alice may create GPUJobs in alpha"
assert_eq no "$(ka -n alpha auth can-i create pods 2>/dev/null || true)" "alice may not create pods"
assert_eq no "$(ka -n beta auth can-i create gpujobs.gangq.io 2>/dev/null || true)" "alice may not create GPUJobs in beta"
assert_eq no "$(ka auth can-i patch teams.gangq.io 2>/dev/null || true)" "alice may not edit Teams"
pass "RBAC on: alice creates GPUJobs in alpha only"

for n in n1 n2; do
  fakelet add-node "$n" --gpus 8 --cpu 64 --memory 256Gi --label "kubernetes.io/hostname=$n" >/dev/null
done
# The fake kubelet runs beta's pods by itself; alpha's are run (or left terminating) by hand.
gq_fakelet_loop --interval 0.5 --auto-run --ns beta
gq_ctl_start --leader-elect=false --max-grace-period 5s

job() { # NAME [SPEC_LINES] [POD_SPEC_LINES] [POD_META_LINES]: a 1-GPU job manifest for alpha
  printf 'apiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s, namespace: alpha}\nspec:\n  gpu: {count: 1}\n%s\n  template:\n    metadata:\n      labels:\n        app: x\n%s\n    spec:\n%s\n      containers: [{name: c, image: busybox}]\n---\n' \
    "$1" "${2:-}" "${4:-}" "${3:-}"
}
long=$(printf 'a%.0s' $(seq 1 253))
{
  job ok-a
  job wrong-team '  team: beta'
  job prio-high '  priority: 5000'
  job sys-crit '  priorityClassName: system-node-critical'
  job big-class '  priorityClassName: big'
  job unknown-class '  priorityClassName: no-such-class'
  job tpl-class '' '      priorityClassName: system-node-critical'
  job hostnet '' '      hostNetwork: true'
  job priv-init '' '      initContainers: [{name: i, image: busybox, securityContext: {privileged: true}}]'
  job caps '' '      initContainers: [{name: i, image: busybox, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]'
  job hostpath '' '      volumes: [{name: root, hostPath: {path: /}}]'
  job sa '' '      serviceAccountName: gangq'
  job "$long"
} >"$GQ_TEST_TMP/alice.yaml"
# gangq validate, offline with the Teams and PriorityClasses of the files, says the same
set +e
out=$("$GANGQ_BIN" validate "$GQ_TEST_TMP/setup.yaml" "$GQ_TEST_TMP/alice.yaml"); rc=$?
set -e
assert_eq 1 "$rc" "gangq validate exit code"
assert_contains "$out" "GPUJob alpha/ok-a: ok" "validate: the valid job"
assert_contains "$out" "GPUJob alpha/wrong-team: spec.team: namespace alpha belongs to Team alpha" "validate: WrongTeam"
wl=$(( $(grep -n 'name: wrong-team' "$GQ_TEST_TMP/alice.yaml" | cut -d: -f1) - 2 )) # its apiVersion line
assert_contains "$out" "alice.yaml:$wl: GPUJob alpha/wrong-team" "validate: file:line where the document starts"
assert_contains "$out" "GPUJob alpha/big-class: spec.priorityClassName: PriorityClass big has value 50000, above Team alpha's maxPriority 1000" "validate: ceiling"
assert_contains "$out" "GPUJob alpha/priv-init: spec.template.spec.initContainers[0].securityContext.privileged: privileged containers are not allowed" "validate: pod policy"
assert_contains "$out" "metadata.name: must be at most 63 characters" "validate: long name"
assert_contains "$out" "GPUJob alpha/sys-crit: ok (PriorityClass system-node-critical not in these files)" "validate: a class it cannot see is a note"
pass "gangq validate refuses the same jobs offline"
assert_ok "alice applies her GPUJobs in alpha" ka apply -f "$GQ_TEST_TMP/alice.yaml"
assert_fails "alice cannot create a GPUJob in beta" ka -n beta create -f - <<'YAML'
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: sneak-in, namespace: beta}
spec: {gpu: {count: 1}, template: {spec: {containers: [{name: c, image: busybox}]}}}
YAML
assert_contains "$GQ_OUT" "forbidden" "RBAC refusal"
pass "alice's jobs created in alpha; creating in beta is forbidden"

# team beta works normally meanwhile
cat <<'YAML' | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: b1, namespace: beta}
spec: {replicas: 2, gpu: {count: 2}, template: {spec: {containers: [{name: c, image: busybox}]}}}
YAML

refused() { # NAME REASON TEXT: Queued with Valid=False REASON, message containing TEXT, no pod
  wait_jsonpath 30 "Queued False $2" -n alpha gpujob "$1" -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
  assert_contains "$(k -n alpha get gpujob "$1" -o jsonpath='{.status.message}')" "$3" "$1: message"
  assert_eq 0 "$(k -n alpha get pods -l "gangq.io/job=$1" -o name | wc -l)" "$1: no pod"
}
refused wrong-team WrongTeam "spec.team: namespace alpha belongs to Team alpha"
assert_eq alpha "$(k -n alpha get gpujob wrong-team -o jsonpath='{.status.team}')" "a refused job is shown under its namespace's Team"
refused prio-high PriorityAboveCeiling "spec.priority: must be at most 1000 (Team alpha's maxPriority), got 5000"
refused sys-crit PriorityClassNotAllowed "spec.priorityClassName: PriorityClass system-node-critical is not one Team alpha allows"
refused big-class PriorityAboveCeiling "PriorityClass big has value 50000, above Team alpha's maxPriority 1000"
refused unknown-class UnknownPriorityClass "spec.priorityClassName: PriorityClass no-such-class does not exist"
refused tpl-class PriorityClassNotAllowed "spec.template.spec.priorityClassName"
refused hostnet PodPolicy "spec.template.spec.hostNetwork: host namespaces are not allowed for Team alpha (spec.podPolicy.allowHostNamespaces)"
refused priv-init PodPolicy "spec.template.spec.initContainers[0].securityContext.privileged"
refused caps PodPolicy "spec.template.spec.initContainers[0].securityContext.capabilities.add"
refused hostpath PodPolicy "spec.template.spec.volumes[0].hostPath"
refused sa PodPolicy "spec.template.spec.serviceAccountName: service account \"gangq\" is not allowed"
wait_jsonpath 30 "Failed False InvalidSpec" -n alpha gpujob "$long" -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
assert_contains "$(k -n alpha get gpujob "$long" -o jsonpath='{.status.message}')" "metadata.name: must be at most 63 characters" "long name message"
pass "every attack refused with its condition and field: WrongTeam, PriorityAboveCeiling, PriorityClassNotAllowed, UnknownPriorityClass, PodPolicy, long name"

wait_jsonpath 30 Running -n beta gpujob b1 -o jsonpath='{.status.state}'
wait_jsonpath 30 Admitted -n alpha gpujob ok-a -o jsonpath='{.status.state}'
wait_for 10 "ok-a pod" bash -c "[ \$(kubectl -n alpha get pods -l gangq.io/job=ok-a -o name | wc -l) = 1 ]"
fakelet run alpha -l gangq.io/job=ok-a >/dev/null
wait_jsonpath 30 Running -n alpha gpujob ok-a -o jsonpath='{.status.state}'
assert_eq "alpha beta" "$(k -n alpha get gpujob ok-a -o jsonpath='{.status.team}') $(k -n beta get gpujob b1 -o jsonpath='{.status.team}')" "each job charged to its namespace's Team"
wait_for 10 "team alpha used 1" bash -c "[ \"\$(kubectl get team alpha -o jsonpath='{.status.used}')\" = 1 ]"
assert_eq 4 "$(k get team beta -o jsonpath='{.status.used}')" "team beta used"
pass "meanwhile beta's gang and alice's valid job were admitted and run, each on its own Team's quota"

# An edit the Team rules refuse, on a running job: it keeps running as admitted (charged to
# alpha, priority capped), and its status says the edit is refused, naming the field.
ka -n alpha patch gpujob ok-a --type=merge -p '{"spec":{"priority":5000}}' >/dev/null
wait_jsonpath 30 "Running False PriorityAboveCeiling" -n alpha gpujob ok-a -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
assert_contains "$(k -n alpha get gpujob ok-a -o jsonpath='{.status.conditions[?(@.type=="Valid")].message}')" \
  "edit refused, the job runs as admitted: spec.priority: must be at most 1000" "the refusal names the field"
assert_eq "alpha 1 1" "$(k -n alpha get gpujob ok-a -o jsonpath='{.status.team}') $(kubectl get team alpha -o jsonpath='{.status.used}') $(k -n alpha get pods -l gangq.io/job=ok-a -o name | wc -l)" "still charged to alpha, its pod kept"
ka -n alpha patch gpujob ok-a --type=json -p '[{"op":"remove","path":"/spec/priority"}]' >/dev/null
wait_jsonpath 30 "Running " -n alpha gpujob ok-a -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].status}'
pass "a refused edit of a running job: Valid=False PriorityAboveCeiling while it runs as admitted; reverted, the condition goes"

# The template's gangq.io/ labels and annotations, finalizers and grace period do not reach the pod.
job sneaky '' '      terminationGracePeriodSeconds: 999999999' \
  '        gangq.io/team: beta
        gangq.io/replica: "7"
        team.gangq.io/x: "y"
      annotations: {gangq.io/gpu-milli: "999", gangq.io/gpu-devices: "0,1,2,3,4,5,6,7", keep.example.com/a: b}
      finalizers: [example.com/hold]' | ka apply -f - >/dev/null
wait_jsonpath 30 Admitted -n alpha gpujob sneaky -o jsonpath='{.status.state}'
wait_for 10 "sneaky pod" bash -c "[ \$(kubectl -n alpha get pods -l gangq.io/job=sneaky -o name | wc -l) = 1 ]"
pod=$(k -n alpha get pods -l gangq.io/job=sneaky -o json | jq '.items[0]')
assert_eq "alpha 0 null" "$(jq -r '.metadata.labels | "\(.["gangq.io/team"]) \(.["gangq.io/replica"]) \(.["team.gangq.io/x"])"' <<<"$pod")" "gangq's labels, not the template's"
assert_eq "null b x" "$(jq -r '.metadata.annotations | "\(.["gangq.io/gpu-milli"]) \(.["keep.example.com/a"]) \(.["gangq.io/gpu-devices"] | split(",") | length | if . == 1 then "x" else . end)"' <<<"$pod")" "template gpu-milli dropped, gangq's one device annotation, other annotations kept"
assert_eq "null 5 x" "$(jq -r '"\(.metadata.finalizers) \(.spec.terminationGracePeriodSeconds) \(.metadata.labels.app)"' <<<"$pod")" "no finalizers, grace capped at --max-grace-period"
pass "template stripped: gangq.io labels/annotations, finalizers; terminationGracePeriodSeconds 999999999 -> 5"

# A second Team claiming alpha: Valid=False with a Warning Event; alpha keeps its namespace.
cat <<'YAML' | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: grabber}
spec: {namespaces: [gamma, alpha], maxPriority: 1000000, quota: [{gpuType: "*", gpus: 100}]}
YAML
wait_jsonpath 30 "False NamespaceConflict" team grabber -o jsonpath='{.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}'
assert_contains "$(k get team grabber -o jsonpath='{.status.conditions[0].message}')" "namespace alpha belongs to Team alpha" "conflict message"
assert_eq "True" "$(k get team alpha -o jsonpath='{.status.conditions[?(@.type=="Valid")].status}')" "alpha stays valid"
wait_for 10 "NamespaceConflict event" bash -c "kubectl get events -n default --field-selector involvedObject.name=grabber -o jsonpath='{.items[*].reason}' | grep -q NamespaceConflict"
assert_eq "Warning" "$(k get events -n default --field-selector involvedObject.name=grabber,reason=NamespaceConflict -o jsonpath='{.items[0].type}')" "Warning event"
job after-grab '  priority: 5000' | ka apply -f - >/dev/null
wait_jsonpath 30 "Queued PriorityAboveCeiling alpha" -n alpha gpujob after-grab -o jsonpath='{.status.state} {.status.conditions[?(@.type=="Valid")].reason} {.status.team}'
sleep 2
assert_eq "Running alpha" "$(k -n alpha get gpujob ok-a -o jsonpath='{.status.state} {.status.team}')" "running work stays with alpha"
assert_eq "0 0" "$(k get team grabber -o jsonpath='{.status.running} {.status.pending}')" "grabber took nothing"
pass "second Team claiming alpha: Valid=False NamespaceConflict + Warning Event; alpha's jobs and ceiling unchanged"

# The audit actor of a Team edit is the field manager the client named (not a proven user).
k patch team grabber --type=merge --field-manager=not-really-bob -p '{"spec":{"namespaces":["gamma"],"weight":3}}' >/dev/null
wait_for 10 "quota-edit audited" bash -c "'$GANGQ_BIN' audit --db '$GQ_TEST_TMP/gangq.db' --team grabber | grep -q quota-edit"
assert_contains "$("$GANGQ_BIN" audit --db "$GQ_TEST_TMP/gangq.db" --team grabber | grep quota-edit)" "manager:not-really-bob" "audit actor is the field manager"
wait_jsonpath 30 "True" team grabber -o jsonpath='{.status.conditions[?(@.type=="Valid")].status}'
pass "Team edit audited with actor manager:<field manager>; grabber dropping alpha is Valid again"

# A gangq pod whose grace period is huge (made before the cap) is deleted with the capped grace.
cat <<'YAML' | k apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: ghost-1-0, namespace: alpha, labels: {gangq.io/job: ghost, gangq.io/attempt: "1", gangq.io/replica: "0"}}
spec: {nodeName: n2, terminationGracePeriodSeconds: 999999999, containers: [{name: c, image: busybox}]}
YAML
wait_for 20 "stray pod deleted" bash -c "kubectl -n alpha get pod ghost-1-0 -o jsonpath='{.metadata.deletionTimestamp}' | grep -q ."
assert_eq 5 "$(k -n alpha get pod ghost-1-0 -o jsonpath='{.metadata.deletionGracePeriodSeconds}')" "delete grace capped"
# suspend: sneaky's pod is deleted with at most the cap too
k -n alpha patch gpujob sneaky --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_for 20 "sneaky pod deleting" bash -c "kubectl -n alpha get pods -l gangq.io/job=sneaky -o jsonpath='{.items[0].metadata.deletionTimestamp}' | grep -q ."
assert_eq 5 "$(k -n alpha get pods -l gangq.io/job=sneaky -o jsonpath='{.items[0].metadata.deletionGracePeriodSeconds}')" "suspend delete grace"
fakelet finish-deletes alpha >/dev/null
wait_jsonpath 20 Suspended -n alpha gpujob sneaky -o jsonpath='{.status.state}'
pass "deletes (stray, suspend) use a grace period of at most --max-grace-period (5 s)"

gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
