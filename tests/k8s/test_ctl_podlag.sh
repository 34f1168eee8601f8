#!/usr/bin/env bash
# A pod gangq created is missing only when the API server says so. With the controller's pod
# watch held back 10 s (--pod-watch-delay, a test hook), a new job's pod is absent from the
# cache well past the 5 s grace: gangq asks the API server (GET 200), does not requeue, does
# not delete the pod as a stray, and the job goes Running on its first attempt. A pod deleted
# before the lagging watch ever showed it is found gone by the GET (404) and the gang is
# requeued at once, without waiting for the watch.
. "$(dirname "$0")/lib.sh"

fakelet add-node lg1 --gpus 4 >/dev/null
k create namespace lag >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: lag}
spec: {namespaces: [lag]}
YAML
gq_fakelet_loop --interval 0.3 --auto-run
gq_ctl_start --leader-elect=false --pod-watch-delay 10s

job() { # NAME
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $1, namespace: lag}
spec:
  class: Batch
  gpu: {count: 1}
  template: {spec: {terminationGracePeriodSeconds: 1, restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}
log() { cat "$GQ_TEST_TMP/controller.log"; }

job slow
wait_for 20 "pod slow-1-0 created" kubectl -n lag get pod slow-1-0
uid=$(k -n lag get pod slow-1-0 -o jsonpath='{.metadata.uid}')
wait_jsonpath 40 Running -n lag gpujob slow -o jsonpath='{.status.state}'
assert_contains "$(log)" "pod absent from the cache exists (GET 200): the pod watch lags" \
  "the absent pod was looked up, not declared gone"
assert_contains "$(log)" "pod=slow-1-0" "the lookup named the pod"
assert_not_contains "$(log)" "job requeued" "no requeue while the watch lagged"
assert_not_contains "$(log)" "deleting stray pod" "no pod deleted as a stray"
assert_eq "$uid" "$(k -n lag get pod slow-1-0 -o jsonpath='{.metadata.uid}')" "the first pod kept"
assert_eq "" "$(k -n lag get pods -l gangq.io/job=slow,gangq.io/attempt=2 -o name)" "no second attempt"
retries=$(k -n lag get gpujob slow -o jsonpath='{.status.retries}')
assert_eq 0 "${retries:-0}" "no retry counted"
pass "pod watch 10 s behind: pod looked up (GET 200), no requeue, job Running on attempt 1"

# A pod deleted while the lagging watch has not shown it yet: the GET finds it gone.
job gone
wait_for 20 "pod gone-1-0 created" kubectl -n lag get pod gone-1-0
t0=$(date +%s)
k -n lag delete pod gone-1-0 --grace-period=0 --force >/dev/null 2>&1
wait_for 30 "gone requeued" bash -c "grep -q 'job requeued.*job=lag/gone' '$GQ_TEST_TMP/controller.log'"
assert_contains "$(log)" "pod absent from the cache is gone (GET 404)" "gone found by the GET"
assert_contains "$(k -n lag get events --field-selector involvedObject.name=gone,reason=Requeued -o jsonpath='{.items[*].message}')" \
  "pod gone-1-0 was deleted" "Requeued event names the deleted pod"
wait_for 30 "gone re-admitted as attempt 2" kubectl -n lag get pod gone-2-0
wait_jsonpath 40 Running -n lag gpujob gone -o jsonpath='{.status.state}'
pass "a pod deleted before the watch showed it: GET 404, requeued after $(( $(date +%s) - t0 )) s, Running on attempt 2"
gq_ctl_stop
assert_not_contains "$(log)" "Sanitizer" "no sanitizer report (ASan builds)"
