#!/usr/bin/env bash
# Persist before acting: when the store cannot commit a cycle (database full, simulated with
# --db-max-pages), nothing is acted on — no pod is created, no status written — and the
# reconcile is retried; once the store can write again every job is admitted exactly once.
# /readyz answers 503 with the store's error while reconciles keep failing, 200 again once one
# commits (a second writer holding the database lock, then letting go).
. "$(dirname "$0")/lib.sh"

for i in 1 2 3 4 5 6 7; do
  fakelet add-node "d$i" --gpus 32 --cpu 256 --memory 2048Gi --label "kubernetes.io/hostname=d$i" >/dev/null
done
k create namespace st >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: st}
spec: {namespaces: [st]}
YAML
for i in $(seq 1 200); do
  printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: j%03d, namespace: st}\nspec: {gpu: {count: 1}, template: {spec: {containers: [{name: c, image: busybox}]}}}\n' "$i"
done >"$GQ_TEST_TMP/jobs.yaml"
k apply -f "$GQ_TEST_TMP/jobs.yaml" >/dev/null
# Before any controller: a new job reads as Queued (the CRD's status default), nothing written.
assert_eq "Queued" "$(k -n st get gpujob j001 -o jsonpath='{.status.state}')" "a new job's state (CRD default)"
assert_eq "" "$(k -n st get gpujob j001 -o jsonpath='{.status.conditions}')" "a new job has no conditions"
assert_contains "$(k -n st get gpujob j001 --no-headers)" "Queued" "kubectl get shows a new job Queued"
pass "a new GPUJob reads as Queued before any controller wrote its status"

# The database may not grow: the first cycle (200 new jobs) cannot commit.
gq_ctl_start --leader-elect=false --db-max-pages 1 --listen 127.0.0.1:0
wait_for 20 "a failed reconcile" grep -q "reconcile failed: nothing acted on" "$GQ_TEST_TMP/controller.log"
sleep 3
assert_contains "$(grep 'reconcile failed' "$GQ_TEST_TMP/controller.log" | tail -1)" "full" "the store reports a full database"
assert_eq 0 "$(k -n st get pods -o name | wc -l)" "no pod created"
# (an unwritten status reads as state Queued, the CRD's default: no conditions)
assert_eq "" "$(k -n st get gpujobs -o jsonpath='{.items[*].status.conditions}')" "no status written"
n=$(grep -c "reconcile failed" "$GQ_TEST_TMP/controller.log")
[ "$n" -ge 2 ] || fail "the failed reconcile was not retried ($n)"
gq_ctl_alive || fail "controller died on a full store"
port=$(gq_ctl_port)
# Not ready once 3 reconciles in a row failed (the periodic resync retries every 2 s).
wait_for 30 "/readyz 503 while every reconcile fails" bash -c \
  "[ \"\$(curl -s -o '$GQ_TEST_TMP/readyz' -w '%{http_code}' 'http://127.0.0.1:$port/readyz')\" = 503 ]"
assert_contains "$(cat "$GQ_TEST_TMP/readyz")" "full" "/readyz names the store's error"
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" "/healthz stays 200 (alive, not ready)"
pass "store full: $n reconciles failed and rolled back, nothing acted on, controller alive, /readyz 503"

gq_ctl_stop
gq_ctl_start --leader-elect=false --listen 127.0.0.1:0 --cycle-interval 500ms
wait_for 60 "200 pods" bash -c "[ \$(kubectl -n st get pods -o name | wc -l) = 200 ]"
wait_for 30 "200 jobs Admitted/Running" bash -c "[ \$(kubectl -n st get gpujobs -o jsonpath='{range .items[*]}{.status.state}{\"\\n\"}{end}' | grep -Ec 'Admitted|Running') = 200 ]"
sleep 2
assert_eq 200 "$(k -n st get pods -o name | wc -l)" "exactly one pod per job"
pass "store writable again: 200 jobs admitted, 200 pods"

port=$(gq_ctl_port)
ready() { [ "$(curl -s -o "$GQ_TEST_TMP/readyz" -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = "$1" ]; }
wait_for 10 "/readyz 200" ready 200
# A second writer takes the database's write lock: every reconcile now fails (busy).
mkfifo "$GQ_TEST_TMP/sql"
sqlite3 "$GQ_TEST_TMP/gangq.db" <"$GQ_TEST_TMP/sql" >>"$GQ_TEST_TMP/sqlite.log" 2>&1 &
GQ_BG_PIDS+=("$!")
exec 3>"$GQ_TEST_TMP/sql"
echo 'BEGIN IMMEDIATE;' >&3
# Every job is steady now, so reconciles are quiet (skipped, nothing to write) until an input
# comes: a new job makes the next one run, and that one cannot commit.
printf -- 'apiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: late, namespace: st}\nspec: {gpu: {count: 1}, template: {spec: {containers: [{name: c, image: busybox}]}}}\n' |
  k apply -f - >/dev/null
wait_for 20 "/readyz 503 while the database is locked" ready 503
assert_contains "$(cat "$GQ_TEST_TMP/readyz")" "locked" "/readyz says why"
gq_ctl_alive || fail "controller died on a locked store"
echo 'COMMIT;' >&3
exec 3>&-
wait_for 20 "/readyz 200 once a reconcile commits again" ready 200
wait_for 20 "the late job's pod" bash -c "[ \$(kubectl -n st get pods -o name | wc -l) = 201 ]"
sleep 1
assert_eq 201 "$(k -n st get pods -o name | wc -l)" "still exactly one pod per job (the late one admitted once)"
pass "/readyz 503 with the reason while reconciles failed, 200 again after one committed; the job that came meanwhile admitted once"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
