#!/usr/bin/env bash
# The CRDs (crds/) and example manifests (examples/manifests/) against the real API server:
# CRDs Established with short names and the `gangq` category; `kubectl get` printing the
# columns of DESIGN.md; every example manifest applies; invalid manifests refused by the
# API server's schema with its message; status subresource semantics; schema defaults.
# GQ_MANIFESTS_DIR overrides examples/manifests (for development).
. "$(dirname "$0")/lib.sh"
MAN="${GQ_MANIFESTS_DIR:-$GQ_ROOT/examples/manifests}"

# --- CRDs
ls "$GQ_ROOT"/crds/*.yaml >/dev/null 2>&1 || [ -n "${GQ_CRDS_DIR:-}" ] || fail "no CRD manifests in crds/"
assert_eq "True True True" \
  "$(k get crd gpujobs.gangq.io teams.gangq.io gpupools.gangq.io -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status} {end}' | sed 's/ $//')" \
  "CRDs Established"
res=$(k api-resources --api-group=gangq.io --no-headers)
assert_match "$res" "gpujobs +gj +gangq.io/v1alpha1 +true +GPUJob" "gpujobs: short name gj, namespaced"
assert_match "$res" "teams +tm +gangq.io/v1alpha1 +false +Team" "teams: short name tm, cluster-scoped"
assert_match "$res" "gpupools +gp +gangq.io/v1alpha1 +false +GPUPool" "gpupools: short name gp, cluster-scoped"
for c in gpujobs teams gpupools; do
  assert_eq gangq "$(k get crd "$c.gangq.io" -o jsonpath='{.spec.names.categories[*]}')" "$c category"
  assert_ne "" "$(k get crd "$c.gangq.io" -o jsonpath='{.spec.versions[?(@.storage==true)].subresources.status}')" "$c status subresource"
done
pass "CRDs Established; short names gj/tm/gp; category gangq; status subresources"

# --- every example manifest applies
ls "$MAN"/*.yaml >/dev/null 2>&1 || fail "no example manifests in $MAN"
# Namespaces the examples use but do not define are created first (as a user would).
objs=$(for f in "$MAN"/*.yaml; do
  k create --dry-run=client --validate=false -o json -f "$f" | jq -c 'if .kind == "List" then .items[] else . end'
done) || fail "cannot read the example manifests"
for ns in $(jq -r 'select(.kind != "Namespace") | .metadata.namespace // empty' <<<"$objs" | sort -u); do
  jq -e --arg n "$ns" 'select(.kind == "Namespace" and .metadata.name == $n)' <<<"$objs" >/dev/null \
    || k get namespace "$ns" >/dev/null 2>&1 || k create namespace "$ns" >/dev/null
done
# PriorityClasses and namespaces may live in any file: two passes settle the order.
for f in "$MAN"/*.yaml; do k apply -f "$f" >/dev/null 2>&1 || true; done
n=0
for f in "$MAN"/*.yaml; do
  assert_ok "apply $(basename "$f")" k apply -f "$f"
  n=$((n + 1))
done
pass "all $n manifests in $(basename "$(dirname "$MAN")")/$(basename "$MAN") apply"
for r in gpujobs teams gpupools; do
  [ -n "$(k get "$r" -A -o name)" ] || fail "the examples hold no $r (needed to show the columns)"
done

# --- printer columns, short names, category
header() { k get "$@" 2>&1 | head -1; }
has_cols() { # DESC HEADER COL...
  local desc="$1" h="$2"; shift 2
  for c in "$@"; do [[ " $h " =~ [[:space:]]${c}[[:space:]] ]] || fail "$desc: column $c missing from header: $h"; done
}
for r in gpujobs gpujob gj; do
  has_cols "kubectl get $r -A" "$(header "$r" -A)" NAMESPACE NAME TEAM CLASS PRIORITY GPUS STATE POSITION AGE
done
for r in teams team tm; do has_cols "kubectl get $r" "$(header "$r")" NAME QUOTA USED BORROWED PENDING RUNNING; done
for r in gpupools gpupool gp; do has_cols "kubectl get $r" "$(header "$r")" NAME GPUS ALLOCATED FREE LARGEST-FREE PENDING; done
cat_out=$(k get gangq -A 2>&1)
for kind in gpujob team gpupool; do
  assert_match "$cat_out" "$kind\\.gangq\\.io/" "kubectl get gangq lists ${kind}s"
done
pass "kubectl get gpujobs|teams|gpupools (and gj, tm, gp, gangq) print the columns"

# --- invalid manifests refused by the API server schema, with its message
ns=$(fresh_ns crds)
base=$(k get gpujobs -A -o json | jq -c --arg ns "$ns" '.items[0]
  | {apiVersion, kind, metadata: {name: "bad", namespace: $ns}, spec}')
refused() { # DESC JQ-MUTATION EXPECTED-TEXT...
  local desc="$1" mut="$2"; shift 2
  local obj; obj=$(jq -c "$mut" <<<"$base")
  local msg
  msg=$(k apply --validate=false -f - <<<"$obj" 2>&1) && fail "$desc: accepted: $obj"
  for t in "$@"; do assert_contains "$msg" "$t" "$desc: API server message"; done
  assert_fails "$desc: nothing created" k -n "$ns" get gpujob bad
  echo "    refused ($desc): $msg"
}
# The unmodified base is accepted (so the refusals below are about the mutation alone).
assert_ok "base GPUJob accepted" k apply -f - <<<"$base"
k -n "$ns" delete gpujob bad --wait=true >/dev/null
refused "unknown class" '.spec.class = "Research"' 'spec.class' 'Unsupported value: "Research"' '"Training"'
refused "negative replicas" '.spec.replicas = -2' 'spec.replicas' 'should be greater than or equal to'
refused "gpu shares 1000" '.spec.gpu = {shares: 1000}' 'spec.gpu.shares' 'should be less than or equal to 999'
refused "gpu shares 0" '.spec.gpu = {shares: 0}' 'spec.gpu.shares' 'should be greater than or equal to 1'
refused "replicas not an integer" '.spec.replicas = "two"' 'spec.replicas' 'must be of type integer'
pass "invalid GPUJobs refused by the API server schema with its message"

# --- schema defaults: class defaults to Batch
assert_ok "GPUJob without class" k apply -f - <<<"$(jq -c '.metadata.name = "defaulted" | del(.spec.class)' <<<"$base")"
assert_eq Batch "$(k -n "$ns" get gj defaulted -o jsonpath='{.spec.class}')" "default class"
pass "spec.class defaults to Batch"

# --- status subresource
assert_ok "job for status" k apply -f - <<<"$(jq -c '.metadata.name = "st"' <<<"$base")"
assert_ok "patch status" k -n "$ns" patch gj st --subresource=status --type=merge \
  -p '{"status":{"state":"Queued","position":3,"message":"0/2 nodes fit: 2 fewer than 8 free GPUs"}}'
assert_eq "Queued 3" "$(k -n "$ns" get gj st -o jsonpath='{.status.state} {.status.position}')" "status written"
row=$(k -n "$ns" get gj st --no-headers)
assert_match "$row" "^st +.* Queued +3 +[0-9]+s$" "STATE and POSITION columns show the status"
# Status through the main resource is ignored; spec through the status subresource too.
k -n "$ns" patch gj st --type=merge -p '{"status":{"state":"Running"}}' >/dev/null 2>&1 || true
assert_eq Queued "$(k -n "$ns" get gj st -o jsonpath='{.status.state}')" "status not writable via the main resource"
replicas=$(k -n "$ns" get gj st -o jsonpath='{.spec.replicas}')
k -n "$ns" patch gj st --subresource=status --type=merge -p '{"spec":{"replicas":7}}' >/dev/null 2>&1 || true
assert_eq "$replicas" "$(k -n "$ns" get gj st -o jsonpath='{.spec.replicas}')" "spec not writable via status"
pass "status subresource patchable; status and spec separated"
