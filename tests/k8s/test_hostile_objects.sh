#!/usr/bin/env bash
# One object cannot stop the controller: a GPUJob nested 1,200 levels deep inside
# spec.template (accepted by the API server, refused by cJSON) and five 1.4 MB GPUJobs
# (over the 1 MiB per-object cap) sit in the cluster before the controller starts, and
# another deep one arrives over the watch. The GPUJob informer still syncs, /readyz answers
# 200, the other teams' jobs are Admitted, each hostile job gets a Warning Event and is
# marked Failed (Unreadable) — by the controller once it leads, also for what it skipped
# while standing by —, the log names it, the skip metric counts it, and the watch is never
# given up for a relist.
. "$(dirname "$0")/lib.sh"

k apply -f examples/manifests/00-namespaces.yaml -f examples/manifests/01-priorityclasses.yaml \
  -f examples/manifests/02-teams.yaml -f examples/manifests/03-pools.yaml >/dev/null
for n in a100-01 a100-02; do
  fakelet add-node "$n" --gpus 8 --cpu 64 --memory 512Gi --label gangq.io/pool=batch \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB --label nvidia.com/gpu.memory=40960 \
    --label "kubernetes.io/hostname=$n" >/dev/null
done

# POST a GPUJob JSON file straight to the API server (no kubectl: no last-applied copy,
# and no client-side decoding of the deep document).
api_create() {
  local ns=$1 file=$2 code
  code=$(curl -sS -m 60 -o "$GQ_TEST_TMP/create.out" -w '%{http_code}' --cacert "$GQ_CA" \
    -H "Authorization: Bearer $GQ_TOKEN" -H 'Content-Type: application/json' \
    --data-binary "@$file" "$GQ_SERVER/apis/gangq.io/v1alpha1/namespaces/$ns/gpujobs")
  [ "$code" = 201 ] || fail "create $file in $ns: HTTP $code $(head -c 300 "$GQ_TEST_TMP/create.out")"
}

# deep_job NAME: a Batch job whose template holds `{"x":` 1,200 times.
deep_job() {
  local f="$GQ_TEST_TMP/$1.json" open close
  open=$(printf '{"x":%.0s' $(seq 1200))
  close=$(printf '}%.0s' $(seq 1200))
  printf '{"apiVersion":"gangq.io/v1alpha1","kind":"GPUJob","metadata":{"name":"%s"},"spec":{"class":"Batch","replicas":1,"gpu":{"count":1},"template":{"metadata":{"annotations":{"deep":"yes"}},"nested":%s1%s,"spec":{"containers":[{"name":"main","image":"busybox"}]}}}}' \
    "$1" "$open" "$close" >"$f"
  echo "$f"
}

# huge_job NAME: a valid job carrying 1.4 MB in one container environment variable.
huge_job() {
  local f="$GQ_TEST_TMP/$1.json"
  {
    printf '{"apiVersion":"gangq.io/v1alpha1","kind":"GPUJob","metadata":{"name":"%s"},"spec":{"class":"Batch","replicas":1,"gpu":{"count":1},"template":{"spec":{"containers":[{"name":"main","image":"busybox","env":[{"name":"BLOB","value":"' "$1"
    head -c 1400000 /dev/zero | tr '\0' x
    printf '"}]}]}}}}'
  } >"$f"
  echo "$f"
}

ok_job() {
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: Batch
  replicas: 1
  gpu: {count: 1, types: [NVIDIA-A100-SXM4-40GB]}
  template:
    spec:
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: "1", memory: 1Gi}}
YAML
}

api_create research "$(deep_job deep-job)"
for i in 1 2 3 4 5; do api_create nlp "$(huge_job "huge-$i")"; done
ok_job vision ok-1
ok_job vision ok-2
assert_eq 8 "$(k get gpujobs -A -o name | wc -l)" "8 GPUJobs stored by the API server"
pass "API server holds a 1,200-deep GPUJob, five 1.4 MB GPUJobs and two normal ones"

# Another replica holds the lease for a few more seconds: the controller first stands by
# with synced informers (and must not write), then leads and reports what it skipped.
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
cat <<YAML | k apply -f - >/dev/null
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: gangq-controller, namespace: default}
spec: {holderIdentity: other-replica, leaseDurationSeconds: 8, acquireTime: "$now", renewTime: "$now"}
YAML
gq_ctl_start --listen 127.0.0.1:0 --lease-namespace default
port=$(gq_ctl_port)
wait_for 30 "/readyz 200" curl -sf "http://127.0.0.1:$port/readyz"
pass "every informer synced past the hostile objects: /readyz 200"
if ! grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"; then
  assert_eq "" "$(k -n research get gj deep-job -o jsonpath='{.status.conditions}')" "a standby writes no status (no conditions)"
  pass "standing by (lease held by another replica): skipped jobs logged, nothing written"
fi
wait_for 30 "controller leading" grep -q "leading: cycles on" "$GQ_TEST_TMP/controller.log"

wait_jsonpath 30 Admitted -n vision gj ok-1 -o jsonpath='{.status.state}'
wait_jsonpath 30 Admitted -n vision gj ok-2 -o jsonpath='{.status.state}'
pass "the other team's jobs are Admitted"

wait_jsonpath 30 Failed -n research gj deep-job -o jsonpath='{.status.state}'
cond=$(k -n research get gj deep-job -o jsonpath='{.status.conditions[?(@.type=="Valid")].status} {.status.conditions[?(@.type=="Valid")].reason}')
assert_eq "False Unreadable" "$cond" "deep job's Valid condition"
assert_contains "$(k -n research get gj deep-job -o jsonpath='{.status.message}')" "too_deep" "deep job's message says why"
for i in 1 2 3 4 5; do
  wait_jsonpath 30 Failed -n nlp gj "huge-$i" -o jsonpath='{.status.state}'
done
assert_contains "$(k -n nlp get gj huge-1 -o jsonpath='{.status.message}')" "too_large" "huge job's message says why"
wait_for 20 "Warning Event on deep-job" bash -c \
  "kubectl -n research get events --field-selector involvedObject.name=deep-job -o jsonpath='{.items[*].reason}' | grep -qw Unreadable"
log=$(cat "$GQ_TEST_TMP/controller.log")
assert_contains "$log" "object=research/deep-job" "log line names the deep job"
assert_contains "$log" "object=nlp/huge-3" "log line names a huge job"
pass "hostile jobs marked Failed (Valid=False Unreadable) with an Event, and named in the log"

# a hostile job over the watch: skipped, marked Failed; the watch goes on
api_create research "$(deep_job deep-late)"
ok_job vision ok-3
wait_jsonpath 30 Failed -n research gj deep-late -o jsonpath='{.status.state}'
wait_jsonpath 30 Admitted -n vision gj ok-3 -o jsonpath='{.status.state}'
lists=$(gq_api_requests list gpujobs gangq)
assert_eq 1 "$lists" "GPUJob LISTs by gangq (no relist for a hostile watch event)"
pass "a hostile job arriving over the watch is skipped and failed; later jobs still admitted, no relist"

metrics=$(curl -sf "http://127.0.0.1:$port/metrics")
deep=$(grep '^gangq_informer_objects_skipped_total{informer="gpujobs",reason="too_deep"}' <<<"$metrics" | awk '{print $2}')
large=$(grep '^gangq_informer_objects_skipped_total{informer="gpujobs",reason="too_large"}' <<<"$metrics" | awk '{print $2}')
[ -n "$deep" ] && [ "${deep%.*}" -ge 2 ] || fail "too_deep skips counted: got '$deep', want >= 2"
[ -n "$large" ] && [ "${large%.*}" -ge 5 ] || fail "too_large skips counted: got '$large', want >= 5"
curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || fail "/readyz after the watch skip"
pass "gangq_informer_objects_skipped_total counts too_deep=$deep too_large=$large; still ready"
