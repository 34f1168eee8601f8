#!/usr/bin/env bash
# Metrics and Team status per GPU type against the real API server: a cohort of two Teams
# where ta borrows H100s from tb and half-GPU shares on the "*" entry; `kubectl get teams`
# shows BORROWED per type, status.gpuTypes/used/borrowed are exact (2.5 borrowed), the
# pendingHead carries per-Team and global positions, /metrics has the per Team/type gauges,
# pending figures, admissions by Team and class, time to admission by class, relists by
# resource and reason, and every metric name the Grafana dashboard queries. A waiting job's
# Queued and Admitted conditions carry its wait reason and follow it when it changes (a
# Waiting Event naming each reason); `kubectl describe` shows them.
. "$(dirname "$0")/lib.sh"

add() { # NAME GPUS PRODUCT
  fakelet add-node "$1" --gpus "$2" --cpu 96 --memory 1000Gi --label "nvidia.com/gpu.product=$3" \
    --label nvidia.com/gpu.memory=81559 --label "kubernetes.io/hostname=$1" >/dev/null
}
add h1 8 NVIDIA-H100; add h2 8 NVIDIA-H100; add a1 4 NVIDIA-A100
for ns in ta tb; do k create namespace $ns >/dev/null; done
cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: ta}
spec: {namespaces: [ta], cohort: lab, quota: [{gpuType: NVIDIA-H100, gpus: 4}, {gpuType: "*", gpus: 1}]}
---
apiVersion: gangq.io/v1alpha1
kind: Team
metadata: {name: tb}
spec: {namespaces: [tb], cohort: lab, quota: [{gpuType: NVIDIA-H100, gpus: 8}, {gpuType: "*", gpus: 4}]}
YAML
gq_fakelet_loop --interval 0.5 --auto-run
gq_ctl_start --leader-elect=false --min-runtime 0s --position-interval 1s --listen 127.0.0.1:0
port=$(gq_ctl_port)
scrape() { curl -sf "http://127.0.0.1:$port/metrics"; }
metric() { # SERIES (name{labels} exactly as rendered): its value, or "absent"
  local v
  v=$(scrape | awk -v s="$1" 'index($0, s " ") == 1 { print $2 }')
  echo "${v:-absent}"
}

wait_state() { # TIMEOUT NS NAME REGEX
  wait_for "$1" "gpujob $2/$3 state matching $4" bash -c "kubectl -n $2 get gpujob $3 -o jsonpath='{.status.state}' | grep -Eqx '$4'"
}
job() { # NS NAME CLASS REPLICAS GPU-YAML
  cat <<YAML | k apply -f - >/dev/null
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: $2, namespace: $1}
spec:
  class: $3
  replicas: $4
  gang: true
  gpu: $5
  template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}
YAML
}

# --- ta borrows: 6 H100 on a nominal 4, 3 x 0.5 A100 on its "*" entry of 1
job ta big Training 1 "{count: 6, types: [NVIDIA-H100]}"
job ta half Inference 3 "{shares: 500, types: [NVIDIA-A100]}"
wait_state 30 ta big 'Admitted|Running'
wait_state 30 ta half 'Admitted|Running'
wait_for 15 "ta used 7.5, borrowed 2.5" bash -c \
  "[ \"\$(kubectl get team ta -o jsonpath='{.status.used}/{.status.borrowed}')\" = 7.5/2.5 ]"
tj=$(k get team ta -o json)
assert_eq "NVIDIA-H100:2,*:0.5" "$(jq -r .status.borrowedByType <<<"$tj")" "borrowedByType"
assert_eq 'NVIDIA-H100 4 6 2|* 1 1.5 0.5' \
  "$(jq -r '[.status.gpuTypes[] | "\(.gpuType) \(.nominal) \(.used) \(.borrowed)"] | join("|")' <<<"$tj")" "gpuTypes"
assert_eq "5" "$(jq -r .status.quota <<<"$tj")" "quota (nominal over all types)"
tbj=$(k get team tb -o json)
assert_eq "0 0 none" "$(jq -r '"\(.status.used) \(.status.borrowed) \(.status.borrowedByType // "none")"' <<<"$tbj")" "tb borrows nothing"
teams=$(k get teams)
assert_match "$teams" "ta +5 +7.5 +NVIDIA-H100:2,\*:0.5 +0 +2" "kubectl get teams: BORROWED per type"
assert_match "$teams" "tb +12 +0 +0 +0" "kubectl get teams: tb (BORROWED blank)"
pass "cohort borrowing per type: ta used 7.5 (shares exact), borrowed NVIDIA-H100:2,*:0.5; kubectl get teams: $(grep '^ta ' <<<"$teams" | tr -s ' ')"

# --- waiting jobs: ta's over quota, tb's too big for any node
job ta wait Training 2 "{count: 6, types: [NVIDIA-H100]}"
job tb huge Training 1 "{count: 16, types: [NVIDIA-H100]}"
wait_for 15 "ta/wait waits on Quota" bash -c \
  "[ \"\$(kubectl -n ta get gpujob wait -o jsonpath='{.status.waitReason}')\" = Quota ]"
wait_for 15 "Queued condition reason Quota" bash -c \
  "[ \"\$(kubectl -n ta get gpujob wait -o jsonpath='{.status.conditions[?(@.type==\"Queued\")].reason}')\" = Quota ]"
gj=$(k -n ta get gpujob wait -o json)
assert_eq "True Quota" "$(jq -r '.status.conditions[] | select(.type=="Queued") | "\(.status) \(.reason)"' <<<"$gj")" "Queued condition"
assert_eq "False Quota" "$(jq -r '.status.conditions[] | select(.type=="Admitted") | "\(.status) \(.reason)"' <<<"$gj")" "Admitted condition"
assert_eq "$(jq -r .status.message <<<"$gj")" "$(jq -r '.status.conditions[] | select(.type=="Queued") | .message' <<<"$gj")" "Queued condition message is the explanation"
d=$(k -n ta describe gpujob wait)
assert_match "$d" "Type: +Queued" "describe shows the Queued condition"
assert_match "$d" "Reason: +Quota" "describe shows the reason Quota"
wait_for 10 "a Waiting Event naming Quota" bash -c \
  "kubectl -n ta get events --field-selector involvedObject.name=wait,reason=Waiting -o jsonpath='{.items[*].message}' | grep -q '^Quota: '"
assert_match "$(k -n ta get gpujob big -o json | jq -r '.status.conditions[] | select(.type=="Queued") | "\(.status) \(.reason)"')" "^False (Admitted|Running)$" "an admitted job's Queued condition"
pass "ta/wait: Queued=True and Admitted=False with reason Quota, message the explanation, in describe; a Waiting Event 'Quota: ...'"

# pendingHead: per-Team position and the global position in admission order
wait_for 15 "pendingHead of both Teams with global positions" bash -c \
  "[ \"\$(kubectl get teams ta tb -o json | jq -r '[.items[].status.pendingHead[]?.globalPosition] | sort | join(\" \")')\" = '1 2' ]"
tt=$(k get teams ta tb -o json)
assert_eq "ta/wait 1|tb/huge 1" "$(jq -r '[.items[].status.pendingHead[] | "\(.namespace)/\(.name) \(.position)"] | join("|")' <<<"$tt")" "per-Team positions"
assert_eq "12" "$(jq -r '.items[] | select(.metadata.name=="ta") | .status.pendingHead[0].gpus' <<<"$tt")" "pendingHead gpus"
pass "pendingHead: position 1 in each Team, globalPositions 1 and 2 across Teams"

# --- /metrics after the admissions
wait_for 10 "team gauges in /metrics" bash -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^gangq_team_pending_jobs{team=\"tb\"} 1'"
assert_eq 6 "$(metric 'gangq_team_used_gpus{team="ta",gpu_type="NVIDIA-H100"}')" "used H100"
assert_eq 1.5 "$(metric 'gangq_team_used_gpus{team="ta",gpu_type="*"}')" "used * (shares)"
assert_eq 4 "$(metric 'gangq_team_quota_gpus{team="ta",gpu_type="NVIDIA-H100"}')" "quota H100"
assert_eq 2 "$(metric 'gangq_team_borrowed_gpus{team="ta",gpu_type="NVIDIA-H100"}')" "borrowed H100"
assert_eq 0.5 "$(metric 'gangq_team_borrowed_gpus{team="ta",gpu_type="*"}')" "borrowed *"
assert_eq 0 "$(metric 'gangq_team_used_gpus{team="tb",gpu_type="NVIDIA-H100"}')" "tb used H100"
assert_eq 1 "$(metric 'gangq_team_pending_jobs{team="ta"}')" "ta pending jobs"
assert_eq 12 "$(metric 'gangq_team_pending_gpus{team="ta"}')" "ta pending GPUs"
assert_eq 16 "$(metric 'gangq_team_pending_gpus{team="tb"}')" "tb pending GPUs"
assert_eq 1 "$(metric 'gangq_admissions_total{team="ta",class="Training"}')" "admissions ta Training"
assert_eq 1 "$(metric 'gangq_admissions_total{team="ta",class="Inference"}')" "admissions ta Inference"
assert_eq 1 "$(metric 'gangq_time_to_admission_seconds_count{class="Training"}')" "time to admission, Training"
assert_eq 1 "$(metric 'gangq_time_to_admission_seconds_count{class="Inference"}')" "time to admission, Inference"
assert_eq 0 "$(metric 'gangq_time_to_admission_seconds_count{class="Batch"}')" "time to admission, Batch"
assert_eq 0 "$(metric 'gangq_informer_relists_total{resource="gpujobs",reason="watch_error"}')" "relists by resource and reason"
m=$(scrape)
assert_not_contains "$m" "gangq_reconciles_total" "the duplicate reconciles counter is gone"
assert_not_contains "$m" "relists_410" "no reason in metric names"
assert_contains "$m" "# TYPE gangq_preemptions_total counter" "preemptions counter declared"
assert_not_contains "$m" "gangq_metrics_series_dropped_total" "no series refused"
# each phase's CPU time: counted, never more than the phase's wall time
for ph in gather observe schedule commit act report; do
  cpu=$(metric "gangq_reconcile_phase_cpu_seconds_total{phase=\"$ph\"}")
  wall=$(metric "gangq_reconcile_phase_duration_seconds_sum{phase=\"$ph\"}")
  awk -v c="$cpu" -v w="$wall" 'BEGIN { exit !(c ~ /^[0-9.e+-]+$/ && w ~ /^[0-9.e+-]+$/ && c + 0 > 0 && c + 0 <= w * 1.05 + 0.001) }' ||
    fail "phase $ph: CPU ${cpu:-absent} s against a wall time of ${wall:-absent} s"
done
pass "/metrics: used/quota/borrowed per Team and GPU type (1.5 shares exact), pending jobs/GPUs, admissions by Team and class, time to admission by class, relists by resource and reason, CPU time per reconcile phase"

# every metric the dashboard queries is in a scrape (a histogram's _bucket/_sum/_count by its family)
dash="$GQ_ROOT/deploy/monitoring/grafana-dashboard.json"
jq -e '.panels | length > 5' "$dash" >/dev/null || fail "dashboard JSON has no panels"
names=$(jq -r '[.panels[].targets[]?.expr, (.templating.list[] | .definition // empty)] | .[]' "$dash" |
  grep -o 'gangq_[a-zA-Z0-9_:]*' | sort -u)
[ "$(wc -l <<<"$names")" -ge 20 ] || fail "too few metric names in the dashboard: $names"
types=$(sed -n 's/^# TYPE \([^ ]*\) .*/\1/p' <<<"$m")
for n in $names; do
  base=$n
  case $n in *_bucket|*_sum|*_count) grep -qx "${n%_*}" <<<"$types" && base=${n%_*} ;; esac
  grep -qx "$base" <<<"$types" || fail "dashboard queries $n, absent from /metrics"
done
pass "all $(wc -l <<<"$names") metric names of the Grafana dashboard are in /metrics"

# --- the reason changes: tb lends enough H100s, ta/wait now waits on nodes (no node has 6 free twice)
k patch team tb --type=merge -p '{"spec":{"quota":[{"gpuType":"NVIDIA-H100","gpus":40},{"gpuType":"*","gpus":4}]}}' >/dev/null
wait_for 20 "ta/wait's wait reason leaves Quota" bash -c \
  "r=\$(kubectl -n ta get gpujob wait -o jsonpath='{.status.waitReason}'); [ -n \"\$r\" ] && [ \"\$r\" != Quota ]"
reason=$(k -n ta get gpujob wait -o jsonpath='{.status.waitReason}')
wait_for 10 "Queued condition follows the reason" bash -c \
  "[ \"\$(kubectl -n ta get gpujob wait -o jsonpath='{.status.conditions[?(@.type==\"Queued\")].reason}')\" = '$reason' ]"
assert_eq "False $reason" "$(k -n ta get gpujob wait -o json | jq -r '.status.conditions[] | select(.type=="Admitted") | "\(.status) \(.reason)"')" "Admitted condition follows"
wait_for 10 "a Waiting Event naming $reason" bash -c \
  "kubectl -n ta get events --field-selector involvedObject.name=wait,reason=Waiting -o jsonpath='{range .items[*]}{.message}{\"\\n\"}{end}' | grep -q '^$reason: '"
ev=$(k -n ta get events --field-selector involvedObject.name=wait,reason=Waiting -o jsonpath='{range .items[*]}{.message}{"\n"}{end}')
assert_eq "$(grep -c . <<<"$ev")" "$(sed 's/:.*//' <<<"$ev" | sort -u | grep -c .)" "one Waiting Event per reason: $ev"
assert_match "$(k -n ta describe gpujob wait)" "Reason: +$reason" "describe shows the new reason"
pass "reason Quota -> $reason: conditions follow, a second Waiting Event names it"
