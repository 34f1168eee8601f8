#!/usr/bin/env bash
# fakelet — a fake kubelet for gangq's integration tests (plays KWOK's role: no real kubelet
# runs in the test environment; see tests/k8s/README.md). Talks to the API server with curl
# and the bearer token; finds them in GQ_SERVER/GQ_TOKEN/GQ_CA (from `. ENV_DIR/env`) or
# in $KUBECONFIG.
#
# Nodes
#   fakelet.sh register FILE...          create the Node manifests in FILE (multi-doc or List),
#                                        then mark each Ready with its status.capacity /
#                                        status.allocatable, and remove the not-ready taint
#   fakelet.sh add-node NAME [--gpus N] [--cpu N] [--memory Q] [--label K=V]... [--taint K=V:EFFECT]...
#   fakelet.sh ready NAME...             Ready=True, remove the not-ready taint
#   fakelet.sh notready NAME...          Ready=False + taint node.kubernetes.io/not-ready:NoSchedule
#                                        (what the node lifecycle controller would do)
#   fakelet.sh delete-node NAME...
# Pods (only bound pods, spec.nodeName set, as a kubelet would)
#   fakelet.sh run|succeed NS (NAME...|-l SELECTOR)
#   fakelet.sh fail NS (NAME...|-l SELECTOR) [--exit-code N]
#   fakelet.sh finish-deletes [NS]       delete with grace 0 every pod marked for deletion
#   fakelet.sh auto-run [NS]             once: bound Pending pods on Ready nodes -> Running
#   fakelet.sh heartbeat                 once: refresh the Ready heartbeat of Ready nodes
#   fakelet.sh loop [--interval S] [--auto-run] [--ns NS] [--heartbeat S] [--hold-deletes]
#                                        forever: finish deletes; with --auto-run also move
#                                        bound Pending pods on Ready nodes to Running; with
#                                        --heartbeat, refresh Ready heartbeats every S seconds;
#                                        with --hold-deletes, leave pods marked for deletion
#                                        terminating (slow graceful deletes) until a
#                                        `fakelet.sh finish-deletes` finishes them
set -euo pipefail
log() { echo "fakelet: $*" >&2; }
die() { log "$*"; exit 1; }

load_conn() {
  if [ -z "${GQ_SERVER:-}" ] && [ -n "${GQ_ENV_DIR:-}" ] && [ -f "$GQ_ENV_DIR/env" ]; then
    . "$GQ_ENV_DIR/env"
  fi
  if [ -z "${GQ_SERVER:-}" ]; then
    [ -n "${KUBECONFIG:-}" ] || die "no GQ_SERVER, GQ_ENV_DIR or KUBECONFIG"
    GQ_SERVER=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
    GQ_TOKEN=$(kubectl config view --raw --minify -o jsonpath='{.users[0].user.token}')
    GQ_CA=$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')
    if [ -z "$GQ_CA" ]; then
      GQ_CA=$(mktemp "${TMPDIR:-/tmp}/fakelet-ca.XXXXXX")
      kubectl config view --raw --minify \
        -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d > "$GQ_CA"
    fi
  fi
}

# api METHOD PATH [BODY [CONTENT-TYPE]] — prints the response body; fails on HTTP >= 400.
api() {
  local method="$1" path="$2" body="${3:-}" ctype="${4:-application/json}" out code
  out=$(mktemp "${TMPDIR:-/tmp}/fakelet.XXXXXX")
  if [ -n "$body" ]; then
    code=$(curl -sS -m 30 -o "$out" -w '%{http_code}' --cacert "$GQ_CA" \
      -H "Authorization: Bearer $GQ_TOKEN" -H "Content-Type: $ctype" \
      -X "$method" --data-binary @- "$GQ_SERVER$path" <<<"$body") || code=000
  else
    code=$(curl -sS -m 30 -o "$out" -w '%{http_code}' --cacert "$GQ_CA" \
      -H "Authorization: Bearer $GQ_TOKEN" -X "$method" "$GQ_SERVER$path") || code=000
  fi
  API_CODE="$code"
  if [ "$code" -ge 200 ] 2>/dev/null && [ "$code" -lt 400 ]; then
    cat "$out"; rm -f "$out"; return 0
  fi
  [ -n "${API_QUIET:-}" ] || log "$method $path -> HTTP $code: $(head -c 600 "$out" | tr -s ' \n' ' ')"
  rm -f "$out"
  return 1
}

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
MERGE=application/merge-patch+json

# node_status NAME CAPACITY_JSON ALLOCATABLE_JSON READY(True|False)
node_status() {
  local name="$1" cap="$2" alloc="$3" ready="$4" t reason body
  t=$(now)
  if [ "$ready" = True ]; then reason=KubeletReady; else reason=KubeletNotReady; fi
  body=$(jq -cn --arg n "$name" --argjson cap "$cap" --argjson alloc "$alloc" --arg t "$t" \
    --arg r "$ready" --arg reason "$reason" '{status: {
      capacity: $cap, allocatable: $alloc,
      conditions: (([["MemoryPressure","KubeletHasSufficientMemory"],
                    ["DiskPressure","KubeletHasNoDiskPressure"],
                    ["PIDPressure","KubeletHasSufficientPID"]]
                   | map({type: .[0], status: "False", reason: .[1], message: "fakelet",
                          lastHeartbeatTime: $t, lastTransitionTime: $t}))
                  + [{type: "Ready", status: $r, reason: $reason,
                      message: ("fakelet: node " + (if $r == "True" then "ready" else "not ready" end)),
                      lastHeartbeatTime: $t, lastTransitionTime: $t}]),
      addresses: [{type: "InternalIP", address: "127.0.0.1"}, {type: "Hostname", address: $n}],
      daemonEndpoints: {kubeletEndpoint: {Port: 10250}},
      nodeInfo: {machineID: $n, systemUUID: $n, bootID: $n, kernelVersion: "fakelet",
                 osImage: "fakelet", containerRuntimeVersion: "fakelet://1",
                 kubeletVersion: "v1.20.2", kubeProxyVersion: "v1.20.2",
                 operatingSystem: "linux", architecture: "amd64"}}}')
  api PATCH "/api/v1/nodes/$name/status" "$body" "$MERGE" >/dev/null
}

# set_taint NAME KEY (add EFFECT | del)
set_taint() {
  local name="$1" key="$2" op="$3" effect="${4:-}" node taints
  node=$(api GET "/api/v1/nodes/$name")
  if [ "$op" = del ]; then
    taints=$(jq -c --arg k "$key" '[(.spec.taints // [])[] | select(.key != $k)]' <<<"$node")
  else
    taints=$(jq -c --arg k "$key" --arg e "$effect" --arg t "$(now)" \
      '[(.spec.taints // [])[] | select(.key != $k or .effect != $e)] + [{key: $k, effect: $e, timeAdded: $t}]' <<<"$node")
  fi
  # Optimistic concurrency: the resourceVersion we read must still be current.
  api PATCH "/api/v1/nodes/$name" "$(jq -cn --argjson t "$taints" \
    --arg rv "$(jq -r .metadata.resourceVersion <<<"$node")" \
    '{metadata: {resourceVersion: $rv}, spec: {taints: (if $t == [] then null else $t end)}}')" "$MERGE" >/dev/null
}

DEFAULT_CAP='{"cpu":"64","memory":"512Gi","pods":"110","ephemeral-storage":"1Ti"}'

# create_and_ready NODE_JSON — create the Node, mark it Ready, remove the not-ready taint.
create_and_ready() {
  local obj="$1" name cap alloc
  name=$(jq -r .metadata.name <<<"$obj")
  cap=$(jq -c --argjson d "$DEFAULT_CAP" '$d + (.status.capacity // {})' <<<"$obj")
  alloc=$(jq -c --argjson c "$cap" '$c + (.status.allocatable // {})' <<<"$obj")
  # Re-registering an existing node (as a restarted kubelet does) only refreshes its status.
  API_QUIET=1 api POST /api/v1/nodes "$(jq -c '{apiVersion: "v1", kind: "Node", metadata: .metadata, spec: (.spec // {})}' <<<"$obj")" >/dev/null \
    || [ "$API_CODE" = 409 ] || die "creating node $name failed (HTTP $API_CODE)"
  node_status "$name" "$cap" "$alloc" True
  set_taint "$name" node.kubernetes.io/not-ready del
  log "node $name Ready (gpus $(jq -r '."nvidia.com/gpu" // 0' <<<"$cap"))"
}

cmd_register() {
  local f json
  [ $# -gt 0 ] || die "register: FILE..."
  for f in "$@"; do
    json=$(kubectl create --dry-run=client -o json -f "$f") || die "cannot read $f"
    while IFS= read -r obj; do
      [ "$(jq -r .kind <<<"$obj")" = Node ] || { log "skipping $(jq -r .kind <<<"$obj") in $f"; continue; }
      create_and_ready "$obj"
    done < <(jq -c 'if .kind == "List" then .items[] else . end' <<<"$json")
  done
}

cmd_add_node() {
  local name="${1:-}" gpus="" cpu=64 mem=512Gi labels='{}' taints='[]' k v e
  [ -n "$name" ] || die "add-node NAME [--gpus N] [--cpu N] [--memory Q] [--label K=V] [--taint K=V:EFFECT]"
  shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --gpus) gpus="$2"; shift 2 ;;
      --cpu) cpu="$2"; shift 2 ;;
      --memory) mem="$2"; shift 2 ;;
      --label) k="${2%%=*}"; v="${2#*=}"
               labels=$(jq -c --arg k "$k" --arg v "$v" '. + {($k): $v}' <<<"$labels"); shift 2 ;;
      --taint) k="${2%%=*}"; v="${2#*=}"; e="${v##*:}"; v="${v%:*}"
               taints=$(jq -c --arg k "$k" --arg v "$v" --arg e "$e" '. + [{key: $k, value: $v, effect: $e}]' <<<"$taints"); shift 2 ;;
      *) die "add-node: unknown option $1" ;;
    esac
  done
  labels=$(jq -c --arg n "$name" '{"kubernetes.io/hostname": $n, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} + .' <<<"$labels")
  create_and_ready "$(jq -cn --arg n "$name" --argjson l "$labels" --argjson t "$taints" \
    --arg cpu "$cpu" --arg mem "$mem" --arg g "$gpus" '{
      metadata: {name: $n, labels: $l},
      spec: (if $t == [] then {} else {taints: $t} end),
      status: {capacity: ({cpu: $cpu, memory: $mem} + (if $g == "" then {} else {"nvidia.com/gpu": $g} end))}}')"
}

node_cap() { api GET "/api/v1/nodes/$1" | jq -c '.status.capacity // {}'; }
node_alloc() { api GET "/api/v1/nodes/$1" | jq -c '.status.allocatable // .status.capacity // {}'; }

cmd_ready() {
  local n
  for n in "$@"; do
    node_status "$n" "$(node_cap "$n")" "$(node_alloc "$n")" True
    set_taint "$n" node.kubernetes.io/not-ready del
    log "node $n Ready"
  done
}

cmd_notready() {
  local n
  for n in "$@"; do
    node_status "$n" "$(node_cap "$n")" "$(node_alloc "$n")" False
    set_taint "$n" node.kubernetes.io/not-ready add NoSchedule
    log "node $n NotReady"
  done
}

cmd_delete_node() {
  local n
  for n in "$@"; do api DELETE "/api/v1/nodes/$n" >/dev/null; log "node $n deleted"; done
}

# pod_names NS (NAME...|-l SELECTOR) — one name a line.
pod_names() {
  local ns="$1"; shift
  if [ "${1:-}" = -l ]; then
    api GET "/api/v1/namespaces/$ns/pods?labelSelector=$(jq -rn --arg s "$2" '$s|@uri')" | jq -r '.items[].metadata.name'
  else
    printf '%s\n' "$@"
  fi
}

# pod_status_body POD_JSON PHASE EXITCODE — the status a kubelet would report.
pod_status_body() { pod_status_jq "$2" "${3:-0}" <<<"$1"; }
# pod_status_body_stream PHASE — pods on stdin, "NS/NAME<TAB>BODY" lines out.
pod_status_body_stream() {
  pod_status_jq "$1" 0 '(.metadata.namespace + "/" + .metadata.name) as $key | ' ' | $key + "\t" + tojson' -r
}
# pod_status_jq PHASE EXITCODE [PREFIX SUFFIX FLAG] — jq filter over pod objects on stdin.
pod_status_jq() {
  jq -c ${5:-} --arg phase "$1" --arg t "$(now)" --argjson code "$2" "${3:-}"'
    (.spec.nodeName) as $node
    | (.metadata.namespace + "/" + .metadata.name) as $id
    | ($phase == "Running") as $run
    | {status: {
        phase: $phase,
        hostIP: "127.0.0.1",
        podIP: (.status.podIP // ("10.88." + ((now | floor) % 250 | tostring) + "." + ((.metadata.uid | explode | add) % 250 + 1 | tostring))),
        startTime: (.status.startTime // $t),
        conditions: [
          {type: "Initialized", status: "True", lastTransitionTime: $t},
          {type: "Ready", status: (if $run then "True" else "False" end), lastTransitionTime: $t,
           reason: (if $run then null else "PodCompleted" end)},
          {type: "ContainersReady", status: (if $run then "True" else "False" end), lastTransitionTime: $t,
           reason: (if $run then null else "PodCompleted" end)},
          {type: "PodScheduled", status: "True", lastTransitionTime: $t}] | map(del(.[] | nulls)),
        containerStatuses: [.spec.containers[] | {
          name: .name, image: .image, imageID: ("fakelet://" + .image),
          containerID: ("fakelet://" + $id + "/" + .name),
          ready: $run, started: $run, restartCount: 0,
          state: (if $run then {running: {startedAt: $t}}
                  else {terminated: {exitCode: (if $phase == "Succeeded" then 0 else $code end),
                                     reason: (if $phase == "Succeeded" then "Completed" else "Error" end),
                                     startedAt: $t, finishedAt: $t,
                                     containerID: ("fakelet://" + $id + "/" + .name)}} end)}]}}'"${4:-}"
}

set_pod_phase() { # NS NAME PHASE [EXITCODE [POD_JSON (saves a GET)]]
  local ns="$1" name="$2" phase="$3" code="${4:-1}" pod="${5:-}"
  [ -n "$pod" ] || pod=$(api GET "/api/v1/namespaces/$ns/pods/$name") || return 1
  if [ "$(jq -r '.spec.nodeName // ""' <<<"$pod")" = "" ]; then
    log "pod $ns/$name is not bound to a node; a kubelet would not run it"; return 1
  fi
  api PATCH "/api/v1/namespaces/$ns/pods/$name/status" "$(pod_status_body "$pod" "$phase" "$code")" "$MERGE" >/dev/null \
    || return 1
  log "pod $ns/$name $phase on $(jq -r .spec.nodeName <<<"$pod")"
}

cmd_pods() {
  local phase="$1" ns="${2:-}" code=1 args=() n rc=0 any=""
  [ -n "$ns" ] || die "$phase: NS (NAME...|-l SELECTOR)"
  shift 2
  while [ $# -gt 0 ]; do
    case "$1" in
      --exit-code) code="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  [ ${#args[@]} -gt 0 ] || die "$phase: NAME... or -l SELECTOR"
  while IFS= read -r n; do
    [ -n "$n" ] || continue
    any=1
    set_pod_phase "$ns" "$n" "$phase" "$code" || rc=1
  done < <(pod_names "$ns" "${args[@]}")
  [ -n "$any" ] || { log "$phase: no pods matched in $ns"; return 1; }
  return $rc
}

pods_path() { if [ -n "${1:-}" ]; then echo "/api/v1/namespaces/$1/pods"; else echo /api/v1/pods; fi; }

cmd_finish_deletes() {
  local ns="${1:-}" p
  while IFS= read -r p; do
    [ -n "$p" ] || continue
    # A pod already gone is fine (someone else finished it).
    if api DELETE "/api/v1/namespaces/${p%%/*}/pods/${p#*/}" '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}' \
        >/dev/null 2>&1; then
      log "pod $p deleted (graceful delete finished)"
    fi
  done < <(api GET "$(pods_path "$ns")" | jq -r '.items[] | select(.metadata.deletionTimestamp != null) | .metadata.namespace + "/" + .metadata.name')
}

cmd_auto_run() {
  local ns="${1:-}" ready p
  ready=$(api GET /api/v1/nodes | jq -c '[.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name]')
  # One jq pass computes every status body; then one PATCH per pod.
  while IFS=$'\t' read -r p body; do
    [ -n "$p" ] || continue
    if api PATCH "/api/v1/namespaces/${p%%/*}/pods/${p#*/}/status" "$body" "$MERGE" >/dev/null; then
      log "pod $p Running"
    fi
  done < <(api GET "$(pods_path "$ns")" | jq -c --argjson ready "$ready" '.items[]
      | select(.metadata.deletionTimestamp == null and (.status.phase // "Pending") == "Pending"
               and (.spec.nodeName // "") != "" and (.spec.nodeName as $n | $ready | index($n)))' \
    | pod_status_body_stream Running)
}

# Refresh lastHeartbeatTime of the Ready condition on every Ready node (strategic merge
# patch: conditions merge by type), as a kubelet's periodic status update would.
cmd_heartbeat() {
  local n t
  t=$(now)
  for n in $(api GET /api/v1/nodes | jq -r '.items[]
      | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name'); do
    api PATCH "/api/v1/nodes/$n/status" \
      "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"lastHeartbeatTime\":\"$t\"}]}}" \
      application/strategic-merge-patch+json >/dev/null || true
  done
}

cmd_loop() {
  local interval=1 auto="" ns="" hb=0 last_hb=0 hold=
  while [ $# -gt 0 ]; do
    case "$1" in
      --interval) interval="$2"; shift 2 ;;
      --auto-run) auto=1; shift ;;
      --ns) ns="$2"; shift 2 ;;
      --heartbeat) hb="$2"; shift 2 ;;
      --hold-deletes) hold=1; shift ;;
      *) die "loop: unknown option $1" ;;
    esac
  done
  trap 'exit 0' TERM INT
  while :; do
    [ -n "$hold" ] || cmd_finish_deletes "$ns" || true
    [ -z "$auto" ] || cmd_auto_run "$ns" || true
    if [ "$hb" -gt 0 ] && [ $(( $(date +%s) - last_hb )) -ge "$hb" ]; then
      cmd_heartbeat || true
      last_hb=$(date +%s)
    fi
    sleep "$interval"
  done
}

case "${1:-}" in ""|-h|--help|help) ;; *) load_conn ;; esac
case "${1:-}" in
  register) shift; cmd_register "$@" ;;
  add-node) shift; cmd_add_node "$@" ;;
  ready) shift; cmd_ready "$@" ;;
  notready) shift; cmd_notready "$@" ;;
  delete-node) shift; cmd_delete_node "$@" ;;
  run) shift; cmd_pods Running "$@" ;;
  succeed) shift; cmd_pods Succeeded "$@" ;;
  fail) shift; cmd_pods Failed "$@" ;;
  finish-deletes) shift; cmd_finish_deletes "$@" ;;
  auto-run) shift; cmd_auto_run "$@" ;;
  heartbeat) shift; cmd_heartbeat ;;
  loop) shift; cmd_loop "$@" ;;
  *) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
