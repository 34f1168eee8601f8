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
         role.rbac.authorization.k8s.io/gangq-leader-election \
         rolebinding.rbac.authorization.k8s.io/gangq-leader-election \
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
# The allowed list is every request the controller makes (controller/: informers list+watch,
# pod create/delete/get, Service create/get/delete, status patch, re-read get after a 409,
# Event create, the Lease, the delete of a finished GPUJob whose ttlSecondsAfterFinished passed).
can() { # VERB GROUP RESOURCE [SUBRESOURCE] [NAMESPACE] [NAME]
  k create -o jsonpath='{.status.allowed}' -f - <<JSON
{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
 "spec": {"user": "$as", "groups": ["system:serviceaccounts", "system:serviceaccounts:gangq-system", "system:authenticated"],
          "resourceAttributes": {"verb": "$1", "group": "$2", "resource": "$3", "subresource": "${4:-}", "namespace": "${5:-}", "name": "${6:-}"}}}
JSON
}
yes_() { assert_eq true "$(can "$@")" "may $*"; }
no_() { assert_eq false "$(can "$@")" "may not $*"; }
for v in get list watch; do
  for r in gpujobs teams gpupools; do yes_ "$v" gangq.io "$r"; done
  yes_ "$v" "" pods
done
for v in list watch; do yes_ "$v" "" nodes; yes_ "$v" scheduling.k8s.io priorityclasses; done
no_ get "" nodes; no_ get scheduling.k8s.io priorityclasses      # informers only list + watch
for r in gpujobs teams gpupools; do
  yes_ patch gangq.io "$r" status
  no_ update gangq.io "$r" status
  for v in create update patch; do no_ "$v" gangq.io "$r"; done   # spec belongs to users
done
# a finished GPUJob's spec.ttlSecondsAfterFinished: gangq deletes it (uid precondition);
# never a Team or a GPUPool, never many at once
yes_ delete gangq.io gpujobs "" team-a train
for r in teams gpupools; do no_ delete gangq.io "$r"; done
no_ deletecollection gangq.io gpujobs "" team-a
# blockOwnerDeletion on a pod's ownerReference needs update on the owner's finalizers
yes_ update gangq.io gpujobs finalizers team-a train
no_ update gangq.io teams finalizers
no_ update gangq.io gpupools finalizers
for v in create delete get; do yes_ "$v" "" pods "" team-a; done
for v in update patch deletecollection; do no_ "$v" "" pods "" team-a; done
no_ patch "" pods status team-a
# a multi-replica job's headless Service: created, looked at after a 409, deleted with the job
for v in create delete get; do yes_ "$v" "" services "" team-a; done
for v in update patch list watch deletecollection; do no_ "$v" "" services "" team-a; done
no_ create "" endpoints "" team-a
for v in create update patch delete; do no_ "$v" "" nodes; done
yes_ create "" events "" team-a
for v in patch update delete; do no_ "$v" "" events "" team-a; done
for v in create patch; do no_ "$v" events.k8s.io events "" team-a; done
# The Lease: only gangq's own, only in gangq-system (a namespaced Role)
yes_ create coordination.k8s.io leases "" gangq-system
for v in get update; do yes_ "$v" coordination.k8s.io leases "" gangq-system gangq-controller; done
for v in get update; do no_ "$v" coordination.k8s.io leases "" gangq-system other-lease; done
for v in delete patch list watch; do no_ "$v" coordination.k8s.io leases "" gangq-system gangq-controller; done
for v in create get update; do
  no_ "$v" coordination.k8s.io leases "" kube-system kube-controller-manager
  no_ "$v" coordination.k8s.io leases "" team-a gangq-controller
done
no_ get "" secrets "" gangq-system
no_ create apps deployments "" gangq-system
# And a stranger gets nothing (the RBAC authorizer is really on).
as=system:serviceaccount:default:someone-else
no_ list gangq.io gpujobs
no_ create "" pods "" team-a
no_ create coordination.k8s.io leases "" gangq-system
pass "ClusterRole + Lease Role grant exactly the requests gangq makes (SubjectAccessReview against RBAC)"
