#!/usr/bin/env bash
# Controller scenarios 7 and 8: the controller SIGKILLed in the middle of admitting work and
# restarted on the same store — no job lost, none admitted twice (pod count per job exact,
# one attempt per admission, GPUs within capacity); then the API server restarted under the
# controller, which catches up (a job created after the restart is admitted) without a relist
# loop (informer list counter from the log).
. "$(dirname "$0")/lib.sh"

for i in 1 2 3 4; do
  fakelet add-node "w$i" --gpus 8 --cpu 64 --memory 512Gi --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB \
    --label "kubernetes.io/hostname=w$i" --label topology.gangq.io/rack=r1 >/dev/null
done
k create namespace rs >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: rs}
spec: {namespaces: [rs]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run

# 24 jobs: 16 single-GPU jobs and 8 gangs of 2x1 => 32 GPUs requested on 32 GPUs.
{
  for i in $(seq 1 16); do
    printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: s%02d, namespace: rs}\nspec: {gpu: {count: 1}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n' "$i"
  done
  for i in $(seq 1 8); do
    printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: g%02d, namespace: rs}\nspec: {replicas: 2, gpu: {count: 1}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n' "$i"
  done
} >"$GQ_TEST_TMP/jobs.yaml"

gq_ctl_start --leader-elect=false
wait_for 20 "controller synced" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
k apply -f "$GQ_TEST_TMP/jobs.yaml" >/dev/null
wait_for 20 "first pod create" grep -q "creating pod" "$GQ_TEST_TMP/controller.log"
gq_ctl_kill
n1=$(k -n rs get pods -o name | wc -l)
pass "controller SIGKILLed mid-run after $n1 of 32 pods were created"

# Two more crashes while it catches up, then a clean run.
for round in 1 2; do
  gq_ctl_start --leader-elect=false
  sleep 0.$((RANDOM % 9 + 1))
  gq_ctl_kill
done
gq_ctl_start --leader-elect=false
check_all() {
  local js
  js=$(kubectl -n rs get gpujobs -o json)
  [ "$(jq '[.items[] | select(.status.state == "Running")] | length' <<<"$js")" = 24 ]
}
wait_for 60 "all 24 jobs Running" check_all
pods=$(k -n rs get pods -o json)
assert_eq 32 "$(jq '.items | length' <<<"$pods")" "exactly 32 pods (one per replica)"
dups=$(jq -r '[.items[] | "\(.metadata.labels["gangq.io/job"])/\(.metadata.labels["gangq.io/replica"])"] | group_by(.) | map(select(length > 1)) | length' <<<"$pods")
assert_eq 0 "$dups" "no replica has two pods"
per_node=$(jq -r '[.items[] | .spec.nodeName] | group_by(.) | map(length) | max' <<<"$pods")
[ "$per_node" -le 8 ] || fail "a node got $per_node one-GPU pods (> 8 GPUs)"
attempts=$(jq -r '[.items[].metadata.labels["gangq.io/attempt"]] | unique | join(",")' <<<"$pods")
assert_eq 1 "$attempts" "every job admitted once (attempt 1)"
pass "after 3 SIGKILLs: 24/24 jobs Running, 32 pods, no duplicate, <= 8 GPUs per node, all attempt 1"

# --- the store lost: the controller adopts the running pods instead of admitting again
gq_ctl_stop
rm -f "$GQ_TEST_TMP/gangq.db" "$GQ_TEST_TMP/gangq.db-wal" "$GQ_TEST_TMP/gangq.db-shm"
gq_ctl_start --leader-elect=false
wait_for 30 "24 jobs adopted" bash -c "[ \$(grep -c 'adopted running pods' '$GQ_TEST_TMP/controller.log') -ge 24 ]"
wait_for 30 "all 24 jobs Running again" check_all
sleep 2
pods=$(k -n rs get pods -o json)
assert_eq 32 "$(jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length' <<<"$pods")" "still exactly 32 pods"
assert_eq 1 "$(jq -r '[.items[].metadata.labels["gangq.io/attempt"]] | unique | join(",")' <<<"$pods")" "no new attempt"
pass "store deleted: 24 jobs adopted from their pods, nothing admitted twice"

# --- API server restart under the controller
lists_of() { { grep -o 'total_lists=[0-9]*' "$GQ_TEST_TMP/controller.log" || true; } | tail -1 | cut -d= -f2; }
wait_for 10 "informer counters logged" bash -c "sed -n '/--- start/h; /--- start/!H; \${x;p}' '$GQ_TEST_TMP/controller.log' | grep -q total_lists"
before=$(lists_of)
gq_apiserver_restart
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: after, namespace: rs}
spec: {gpu: {count: 1}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}
YAML
k -n rs delete gpujob s01 >/dev/null
wait_for 40 "job created after the API server restart admitted" bash -c "kubectl -n rs get gpujob after -o jsonpath='{.status.state}' | grep -Eq 'Admitted|Running'"
# The restart's own relists can come late: a watch refused while the server
# was starting backs off up to 10 s (Retry-After), then meets 410 and relists.
# Wait until the count holds for 11 s, then it must stay.
settled() { local a; a=$(lists_of); sleep 11; [ "$a" = "$(lists_of)" ]; }
wait_for 60 "the restart's relists done" settled
l1=$(lists_of)
sleep 6
l2=$(lists_of)
assert_eq "$l1" "$l2" "no relists while idle after the restart"
[ $((l2 - before)) -le 6 ] || fail "informers listed $((l2 - before)) times after one API server restart (expected at most one relist each)"
gq_ctl_alive || fail "controller died across the API server restart"
pass "API server restarted: controller caught up (new job admitted after s01 deleted); lists $before -> $l2, stable"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
