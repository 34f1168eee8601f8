#!/usr/bin/env bash
# deploy/ against the real API server running with RBAC: accepted by server-side dry run,
# applied for real, and the controller's ServiceAccount holds exactly the verbs gangq needs.
# gq-env: GQ_AUTHZ=RBAC
. "$(dirname "$0")/lib.sh"
as=system:serviceaccount:gangq-system:gangq

# The namespace must exist for a server-side dry run of the namespaced objects.
k create namespace gangq-system >/dev/null
assert_ok "server-side dry run of deploy/" k apply --dry-run=server -f "$GQ_ROOT/deploy/"
for o in serviceaccount/gangq clusterrole.rbac.authorization.k8s.io/gangq-controller \
         clusterrolebinding.rbac.authorization.k8s.io/gangq-controller \
         persistentvolumeclaim/gangq-db deployment.apps/gangq-controller service/gangq-metrics; do
  assert_contains "$GQ_OUT" "$o" "dry run lists $o"
done
assert_fails "dry run created nothing" k -n gangq-system get deployment gangq-controller
pass "kubectl apply --dry-run=server -f deploy/ accepted"

assert_ok "apply deploy/" k apply -f "$GQ_ROOT/deploy/"
assert_eq 2 "$(k -n gangq-system get deployment gangq-controller -o jsonpath='{.spec.replicas}')" "replicas"
assert_eq "controller --db /var/lib/gangq/gangq.db" \
  "$(k -n gangq-system get deployment gangq-controller -o jsonpath='{.spec.template.spec.containers[0].args[*]}')" "args"
assert_eq "/healthz /readyz" \
  "$(k -n gangq-system get deployment gangq-controller -o jsonpath='{.spec.template.spec.containers[0].livenessProbe.httpGet.path} {.spec.template.spec.containers[0].readinessProbe.httpGet.path}')" "probes"
assert_eq 8080 "$(k -n gangq-system get deployment gangq-controller -o jsonpath='{.spec.template.metadata.annotations.prometheus\.io/port}')" "metrics port annotation"
assert_eq gangq-db "$(k -n gangq-system get deployment gangq-controller -o jsonpath='{.spec.template.spec.volumes[0].persistentVolumeClaim.claimName}')" "db volume"
pass "deploy/ applied: Deployment with 2 replicas, args, probes, metrics annotation, PVC"

# RBAC: what the controller's identity may and may not do, asked of the API server's
# authorizer with SubjectAccessReviews (explicit group/resource: no discovery, CRDs not needed).
can() { # VERB GROUP RESOURCE [SUBRESOURCE] [NAMESPACE]
  k create -o jsonpath='{.status.allowed}' -f - <<JSON
{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
 "spec": {"user": "$as", "groups": ["system:serviceaccounts", "system:serviceaccounts:gangq-system", "system:authenticated"],
          "resourceAttributes": {"verb": "$1", "group": "$2", "resource": "$3", "subresource": "${4:-}", "namespace": "${5:-}"}}}
JSON
}
yes_() { assert_eq true "$(can "$@")" "may $*"; }
no_() { assert_eq false "$(can "$@")" "may not $*"; }
for v in get list watch; do
  for r in gpujobs teams gpupools; do yes_ "$v" gangq.io "$r"; done
  yes_ "$v" "" nodes; yes_ "$v" "" pods; yes_ "$v" scheduling.k8s.io priorityclasses
done
for r in gpujobs teams gpupools; do
  yes_ patch gangq.io "$r" status
  no_ update gangq.io "$r" status
  for v in create update patch delete; do no_ "$v" gangq.io "$r"; done   # spec belongs to users
done
for v in create delete; do yes_ "$v" "" pods "" team-a; done
for v in update patch deletecollection; do no_ "$v" "" pods "" team-a; done
no_ patch "" pods status team-a
for v in create update patch delete; do no_ "$v" "" nodes; done
for v in create patch; do yes_ "$v" "" events "" team-a; yes_ "$v" events.k8s.io events "" team-a; done
no_ delete "" events "" team-a
for v in get create update; do yes_ "$v" coordination.k8s.io leases "" gangq-system; done
no_ delete coordination.k8s.io leases "" gangq-system
no_ get "" secrets "" gangq-system
no_ create apps deployments "" gangq-system
# And a stranger gets nothing (the RBAC authorizer is really on).
as=system:serviceaccount:default:someone-else
no_ list gangq.io gpujobs
no_ create "" pods "" team-a
pass "ClusterRole grants exactly the verbs gangq needs (SubjectAccessReview against RBAC)"
