#!/usr/bin/env bash
# The API server is the durable record: with the SQLite store deleted, or replaced by an older
# copy, while the controller is stopped, nothing that finished runs again (Succeeded and Failed
# jobs keep their state, no new pod is created for them), running jobs are adopted from their
# pods (same pods, same attempt), and the queue keeps the order in which the jobs arrived. A
# burst of jobs created within one second is admitted in creation order, not name order
# (job10..job19 do not overtake job2), both before the store is lost (arrival = resourceVersion
# at first sight) and after it (from status.arrival, and from the resourceVersion of jobs
# created while the store was gone).
. "$(dirname "$0")/lib.sh"

fakelet add-node n1 --gpus 8 --cpu 64 --memory 256Gi --label kubernetes.io/hostname=n1 >/dev/null
k create namespace sl >/dev/null
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: sl}
spec: {namespaces: [sl]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run

burst() { # burst PREFIX N: N one-GPU jobs in one kubectl apply (creation order = numeric order)
  local i
  for i in $(seq 1 "$2"); do
    printf -- '---\napiVersion: gangq.io/v1alpha1\nkind: GPUJob\nmetadata: {name: %s%d, namespace: sl}\nspec: {gpu: {count: 1}, template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}\n' "$1" "$i"
  done >"$GQ_TEST_TMP/$1.yaml"
  k apply -f "$GQ_TEST_TMP/$1.yaml" >/dev/null
}
state_of() { kubectl -n sl get gj "$1" -o jsonpath='{.status.state}'; }
states() { # "name=state ..." of every job
  kubectl -n sl get gj -o json | jq -r '[.items[] | "\(.metadata.name)=\(.status.state)"] | sort | join(" ")'
}
admitted_set() { # sorted names of jobs Admitted or Running
  kubectl -n sl get gj -o json | jq -r '[.items[] | select(.status.state == "Admitted" or .status.state == "Running") | .metadata.name] | sort | join(" ")'
}
sorted() { tr ' ' '\n' <<<"$*" | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//'; }
running_count_is() { [ "$(kubectl -n sl get gj -o json | jq '[.items[] | select(.status.state == "Running")] | length')" = "$1" ]; }
pods_json() { kubectl -n sl get pods -o json; }

# --- a burst created before the controller starts: the informer lists it in name order
burst job 20
creation_seconds=$(k -n sl get gj -o jsonpath='{range .items[*]}{.metadata.creationTimestamp}{"\n"}{end}' | sort -u | wc -l)
gq_ctl_start --leader-elect=false --max-retries 0
wait_for 30 "8 jobs Running" running_count_is 8
assert_eq "$(sorted job1 job2 job3 job4 job5 job6 job7 job8)" "$(admitted_set)" \
  "the first 8 arrivals run (burst over $creation_seconds creation second(s))"
pass "burst of 20: job1..job8 admitted on 8 GPUs, not job1,job10..job16"

# keep a copy of this store: restored at the end as a store older than the API server
gq_ctl_stop
mkdir -p "$GQ_TEST_TMP/old"
cp "$GQ_TEST_TMP"/gangq.db* "$GQ_TEST_TMP/old/"
gq_ctl_start --leader-elect=false --max-retries 0

# job1..job3 succeed, job4 fails (no retries): the next four arrivals, job9..job12, take their GPUs
fakelet succeed sl job1-1-0 job2-1-0 job3-1-0 >/dev/null
fakelet fail sl job4-1-0 >/dev/null
wait_for 30 "job1..job3 Succeeded, job4 Failed" bash -c "[ \"\$(kubectl -n sl get gj job1 job2 job3 job4 -o jsonpath='{.items[*].status.state}')\" = 'Succeeded Succeeded Succeeded Failed' ]"
wait_for 30 "8 jobs Running again" running_count_is 8
assert_eq "$(sorted job5 job6 job7 job8 job9 job10 job11 job12)" "$(admitted_set)" "job9..job12 admitted next"
wait_for 20 "queued jobs carry their arrival" bash -c "kubectl -n sl get gj job20 -o jsonpath='{.status.arrival}' | grep -q '[0-9]'"
pass "job1..job3 Succeeded, job4 Failed; job9..job12 admitted in arrival order"

before_states=$(states)
before_pods=$(pods_json | jq -r '[.items[] | "\(.metadata.name):\(.metadata.uid)"] | sort | join(" ")')
before_arrival=$(k -n sl get gj -o json | jq -r '[.items[] | "\(.metadata.name)=\(.status.arrival)"] | sort | join(" ")')
before_attempt=$(k -n sl get gj job5 -o jsonpath='{.status.attempt}')
assert_eq 1 "$before_attempt" "status records the attempt"
assert_eq "$(k -n sl get gj job1 -o jsonpath='{.metadata.generation}')" \
  "$(k -n sl get gj job1 -o jsonpath='{.status.observedGeneration}')" "status records the generation it finished for"

# --- the store is lost while the controller is down; a second burst arrives meanwhile
gq_ctl_stop
rm -f "$GQ_TEST_TMP/gangq.db" "$GQ_TEST_TMP/gangq.db-wal" "$GQ_TEST_TMP/gangq.db-shm"
burst a 6 # a1..a6 sort before job*, but arrived after them
gq_ctl_start --leader-elect=false --max-retries 0
wait_for 30 "controller reconciled" grep -q "first reconcile" "$GQ_TEST_TMP/controller.log"
wait_for 30 "8 running jobs adopted" bash -c "[ \$(sed -n '/--- start/h; /--- start/!H; \${x;p}' '$GQ_TEST_TMP/controller.log' | grep -c 'adopted running pods') -ge 8 ]"
sleep 3
after_states=$(states | tr ' ' '\n' | grep -v '^a[0-9]' | tr '\n' ' ' | sed 's/ $//')
assert_eq "$before_states" "$after_states" "every job keeps its state across the store loss"
after_pods=$(pods_json | jq -r '[.items[] | "\(.metadata.name):\(.metadata.uid)"] | sort | join(" ")')
assert_eq "$before_pods" "$after_pods" "no pod created or deleted (nothing finished re-runs, running pods adopted)"
after_arrival=$(k -n sl get gj -o json | jq -r '[.items[] | select(.metadata.name | startswith("job")) | "\(.metadata.name)=\(.status.arrival)"] | sort | join(" ")')
assert_eq "$before_arrival" "$after_arrival" "arrival sequence recovered from status"
assert_eq 1 "$(k -n sl get gj job5 -o jsonpath='{.status.attempt}')" "adopted job keeps attempt 1"
assert_contains "$(grep 'recovered from its status' "$GQ_TEST_TMP/controller.log")" "job=sl/job1" "the Succeeded job's state came from its status"
pass "store deleted: 3 Succeeded + 1 Failed stay finished, 8 Running adopted, no pod touched, arrivals recovered"

# --- order after the loss: job13.. first, then the a* burst in its own creation order
fakelet succeed sl job5-1-0 job6-1-0 job7-1-0 job8-1-0 >/dev/null
wait_for 30 "job5..job8 Succeeded" bash -c "[ \"\$(kubectl -n sl get gj job5 job6 job7 job8 -o jsonpath='{.items[*].status.state}')\" = 'Succeeded Succeeded Succeeded Succeeded' ]"
wait_for 30 "8 jobs Running again" running_count_is 8
assert_eq "$(sorted job9 job10 job11 job12 job13 job14 job15 job16)" "$(admitted_set)" "job13..job16 admitted next"
fakelet succeed sl job9-1-0 job10-1-0 job11-1-0 job12-1-0 job13-1-0 job14-1-0 >/dev/null
wait_for 30 "8 jobs Running again" bash -c "[ \"\$(kubectl -n sl get gj job14 -o jsonpath='{.status.state}')\" = Succeeded ] && kubectl -n sl get gj -o json | jq -e '[.items[] | select(.status.state == \"Running\")] | length == 8' >/dev/null"
assert_eq "$(sorted job15 job16 job17 job18 job19 job20 a1 a2)" "$(admitted_set)" "then job17..job20, then a1, a2"
assert_eq "Queued Queued Queued Queued" "$(k -n sl get gj a3 a4 a5 a6 -o jsonpath='{.items[*].status.state}')" "a3..a6 still wait"
pass "after the loss the queue keeps arrival order: job13..job20 before the later burst a1..a6, a1 before a2"

# nothing that finished ran twice: one pod per job, all attempt 1
pods=$(pods_json)
assert_eq 0 "$(jq -r '[.items[] | .metadata.labels["gangq.io/job"]] | group_by(.) | map(select(length > 1)) | length' <<<"$pods")" "one pod per job"
assert_eq 1 "$(jq -r '[.items[].metadata.labels["gangq.io/attempt"]] | unique | join(",")' <<<"$pods")" "every pod is attempt 1"
assert_eq Failed "$(state_of job4)" "job4 still Failed"
pass "no job ran twice: one pod per job, every pod attempt 1"

# --- a replaced store: the copy taken when job1..job8 ran and job9..job20 waited
before_states=$(states)
before_pods=$(pods_json | jq -r '[.items[] | "\(.metadata.name):\(.metadata.uid)"] | sort | join(" ")')
gq_ctl_stop
rm -f "$GQ_TEST_TMP"/gangq.db*
cp "$GQ_TEST_TMP"/old/gangq.db* "$GQ_TEST_TMP/"
gq_ctl_start --leader-elect=false --max-retries 0
wait_for 30 "controller reconciled" bash -c "[ \$(grep -c 'first reconcile' '$GQ_TEST_TMP/controller.log') -ge 4 ]"
sleep 4
assert_eq "$before_states" "$(states)" "every job keeps its state with an older store"
assert_eq "$before_pods" "$(pods_json | jq -r '[.items[] | "\(.metadata.name):\(.metadata.uid)"] | sort | join(" ")')" \
  "no pod created or deleted with an older store"
last_run=$(sed -n '/--- start/h; /--- start/!H; ${x;p}' "$GQ_TEST_TMP/controller.log")
assert_eq 14 "$(grep -c 'job finished per its status' <<<"$last_run")" \
  "job1..job8 (held Running) and job9..job14 (held Queued) finished per their status"
assert_eq 6 "$(grep -c 'store behind the API server: adopted running pods' <<<"$last_run")" "job15..job20 (held Queued) adopted"
pass "older store restored: 14 jobs it held as running or waiting stay finished, 6 it held as waiting are adopted, no pod touched"
gq_ctl_stop
assert_not_contains "$(cat "$GQ_TEST_TMP/controller.log")" "Sanitizer" "no sanitizer report (ASan builds)"
