#!/usr/bin/env bash
# A real kube-apiserver 1.20.2 + etcd 3.4 on loopback, for gangq's integration tests.
#
#   env.sh up                  start a fresh environment; prints its directory (ENV_DIR)
#   env.sh down [ENV_DIR]      stop what `up` started (by PID) and remove ENV_DIR
#   env.sh kubeconfig [ENV_DIR]          print the kubeconfig path
#   env.sh restart-apiserver [ENV_DIR]   stop and start the API server only (same etcd, port):
#                                        SIGTERM, SIGKILL after GQ_APISERVER_STOP_WAIT s (3)
#   env.sh crash-apiserver [ENV_DIR]     the same with SIGKILL at once
#   env.sh stop-apiserver|start-apiserver [ENV_DIR]
#   env.sh apply-crds [ENV_DIR]          (re)apply crds/*.yaml and wait until Established
#
# ENV_DIR defaults to $GQ_ENV_DIR. `. ENV_DIR/env` exports KUBECONFIG, GQ_ENV_DIR,
# GQ_SERVER (https://127.0.0.1:PORT), GQ_TOKEN, GQ_CA for tests (curl with the token), and
# GQ_ALICE_TOKEN, the bearer token of user "alice" (group gangq-test:users, no rights granted).
# Everything lives in ENV_DIR under ${TMPDIR:-/tmp}; ports are chosen free at runtime,
# so two environments can run in parallel. Logs: ENV_DIR/etcd.log, ENV_DIR/apiserver.log,
# ENV_DIR/audit.log (API server audit, JSON lines: every finished request, at Metadata level).
#
# Knobs (environment): GQ_APISERVER_BIN (binary; default: tests/k8s/build-apiserver.sh),
# GQ_CRDS_DIR (default: crds/ of this repo; missing/empty = no CRDs), GQ_AUTHZ
# (AlwaysAllow, or RBAC to check deploy/'s ClusterRole), GQ_READY_TIMEOUT (seconds, 60).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
log() { echo "env.sh: $*" >&2; }
die() { log "$*"; exit 1; }

port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
pick_port() {
  local p i
  for i in $(seq 1 200); do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    if port_free "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

# Is PID alive with $2 in its command line (guards against recycled PIDs: callers pass a
# path inside their ENV_DIR, which only the processes of that environment carry)?
pid_is() {
  local pid="$1" name="$2"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$name"
}

# Stop PID (running program $2): SIGTERM, wait up to $3 s, then SIGKILL.
stop_pid() {
  local pid="$1" name="$2" wait_s="${3:-10}" i
  pid_is "$pid" "$name" || return 0
  if [ "$wait_s" -gt 0 ]; then kill -TERM "$pid" 2>/dev/null || true; fi
  for i in $(seq 1 $(( wait_s * 10 ))); do
    pid_is "$pid" "$name" || return 0
    sleep 0.1
  done
  [ "$wait_s" -eq 0 ] || log "pid $pid ($name) still running after ${wait_s}s, SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do pid_is "$pid" "$name" || return 0; sleep 0.1; done
  log "pid $pid ($name) did not exit"
  return 1
}

env_dir() {
  local d="${1:-${GQ_ENV_DIR:-}}"
  [ -n "$d" ] && [ -f "$d/env" ] || die "no environment directory (argument or GQ_ENV_DIR)"
  echo "$d"
}

gen_pki() {
  local d="$1/pki"
  mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
      -subj "/CN=gangq-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out server.crt -days 30 -extfile server.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    chmod 600 ./*.key
  )
}

start_etcd() {
  local dir="$1" try cp pp pid i
  for try in 1 2 3 4 5; do
    cp=$(pick_port) && pp=$(pick_port) || die "no free port"
    [ "$cp" != "$pp" ] || continue
    nohup etcd --name gq --data-dir "$dir/etcd-data" \
      --listen-client-urls "http://127.0.0.1:$cp" --advertise-client-urls "http://127.0.0.1:$cp" \
      --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
      --initial-cluster "gq=http://127.0.0.1:$pp" --logger zap --log-level warn \
      </dev/null >>"$dir/etcd.log" 2>&1 &
    pid=$!
    echo "$pid" > "$dir/etcd.pid"
    for i in $(seq 1 100); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if curl -fsS -m 1 "http://127.0.0.1:$cp/health" 2>/dev/null | grep -q '"health":"true"'; then
        echo "$cp" > "$dir/etcd.port"
        return 0
      fi
      sleep 0.1
    done
    log "etcd did not come up on $cp/$pp (try $try)"
    stop_pid "$pid" "$dir/etcd-data" 5 || true
    rm -rf "$dir/etcd-data"
  done
  tail -20 "$dir/etcd.log" >&2 || true
  die "etcd failed to start"
}

apiserver_bin() {
  if [ -n "${GQ_APISERVER_BIN:-}" ]; then echo "$GQ_APISERVER_BIN"; return; fi
  "$HERE/build-apiserver.sh"
}

# Start kube-apiserver on the port in $dir/apiserver.port (pick one if absent); wait /readyz.
start_apiserver() {
  local dir="$1" bin port pid try i tmo code
  . "$dir/env"
  bin=$(cat "$dir/apiserver.bin")
  tmo="${GQ_READY_TIMEOUT:-60}"
  for try in 1 2 3; do
    if [ -f "$dir/apiserver.port" ]; then port=$(cat "$dir/apiserver.port"); else port=$(pick_port); fi
    nohup "$bin" --etcd-servers="http://127.0.0.1:$(cat "$dir/etcd.port")" \
      --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
      --tls-cert-file="$dir/pki/server.crt" --tls-private-key-file="$dir/pki/server.key" \
      --client-ca-file="$dir/pki/ca.crt" --cert-dir="$dir/pki/certdir" \
      --token-auth-file="$dir/tokens.csv" --authorization-mode="${GQ_AUTHZ:-AlwaysAllow}" \
      --service-account-issuer=https://kubernetes.default.svc.cluster.local \
      --service-account-key-file="$dir/pki/sa.pub" \
      --service-account-signing-key-file="$dir/pki/sa.key" \
      --disable-admission-plugins=ServiceAccount \
      --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
      --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/audit.log" \
      --audit-log-format=json --audit-log-mode=blocking \
      --v=1 </dev/null >>"$dir/apiserver.log" 2>&1 &
    pid=$!
    echo "$pid" > "$dir/apiserver.pid"
    for i in $(seq 1 $(( tmo * 5 ))); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      code=$(curl -sS -m 2 -o /dev/null -w '%{http_code}' --cacert "$GQ_CA" \
        -H "Authorization: Bearer $GQ_TOKEN" "https://127.0.0.1:$port/readyz" 2>/dev/null || true)
      if [ "$code" = 200 ]; then
        echo "$port" > "$dir/apiserver.port"
        return 0
      fi
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then
      stop_pid "$pid" "$dir/pki/server.crt" 5 || true
      tail -30 "$dir/apiserver.log" >&2 || true
      die "kube-apiserver not ready after ${tmo}s"
    fi
    log "kube-apiserver exited early on port $port (try $try)"
    tail -5 "$dir/apiserver.log" >&2 || true
    # A restart must keep its port (the kubeconfig names it); a fresh start may pick another.
    [ -f "$dir/apiserver.fixed" ] && sleep 1 || rm -f "$dir/apiserver.port"
  done
  die "kube-apiserver failed to start"
}

write_config() {
  local dir="$1" port="$2"
  cat > "$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gangq-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/pki/ca.crt
users:
- name: admin
  user:
    token: $(cat "$dir/token")
contexts:
- name: gangq-test
  context:
    cluster: gangq-test
    user: admin
    namespace: default
current-context: gangq-test
EOF
  chmod 600 "$dir/kubeconfig"
  cat > "$dir/env" <<EOF
export GQ_ENV_DIR='$dir'
export KUBECONFIG='$dir/kubeconfig'
export GQ_SERVER='https://127.0.0.1:$port'
export GQ_TOKEN='$(cat "$dir/token")'
export GQ_CA='$dir/pki/ca.crt'
export GQ_ALICE_TOKEN='$(cat "$dir/token-alice" 2>/dev/null || true)'
EOF
}

apply_crds() {
  local dir="$1" crds="${GQ_CRDS_DIR:-$ROOT/crds}" files
  . "$dir/env"
  files=$(ls "$crds"/*.yaml "$crds"/*.yml 2>/dev/null || true)
  if [ -z "$files" ]; then log "no CRDs in $crds"; return 0; fi
  kubectl apply -f "$crds" >&2 || die "applying CRDs from $crds failed"
  kubectl wait --for=condition=Established crd --all --timeout=60s >&2 \
    || die "CRDs not Established"
  # Discovery of new resources can lag Established by a moment.
  for _ in $(seq 1 50); do
    kubectl api-resources --api-group=gangq.io -o name 2>/dev/null | grep -q . && return 0
    sleep 0.2
  done
}

cmd_up() {
  local base="${TMPDIR:-/tmp}" dir bin t0
  t0=$(date +%s%N)
  bin=$(apiserver_bin) || die "no kube-apiserver binary"
  [ -x "$bin" ] || die "kube-apiserver binary $bin not executable"
  dir=$(mktemp -d "$base/gangq-k8s.XXXXXX")
  echo "$bin" > "$dir/apiserver.bin"
  # On failure, stop what was started and leave the logs for inspection.
  UP_DIR="$dir"; UP_OK=""
  trap 'if [ -z "$UP_OK" ]; then log "up failed; logs kept in $UP_DIR"; cmd_stop_all "$UP_DIR" || true; fi' EXIT
  gen_pki "$dir"
  openssl rand -hex 24 > "$dir/token"
  printf '%s,admin,admin-uid,"system:masters"\n' "$(cat "$dir/token")" > "$dir/tokens.csv"
  # alice: an ordinary user with no rights of her own (tests grant her what they need, e.g.
  # creating GPUJobs in one namespace, and act as her with kubectl --token="$GQ_ALICE_TOKEN")
  openssl rand -hex 24 > "$dir/token-alice"
  printf '%s,alice,alice-uid,"gangq-test:users"\n' "$(cat "$dir/token-alice")" >> "$dir/tokens.csv"
  chmod 600 "$dir/token" "$dir/token-alice" "$dir/tokens.csv"
  # Audit log: one JSON line per finished request (verb, resource, user agent, code), so tests
  # can count what a client did, e.g. how many LISTs a controller made across a restart.
  printf 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n' \
    > "$dir/audit-policy.yaml"
  start_etcd "$dir"
  write_config "$dir" 0   # placeholder until the port is known
  start_apiserver "$dir"
  touch "$dir/apiserver.fixed"
  write_config "$dir" "$(cat "$dir/apiserver.port")"
  apply_crds "$dir"
  UP_OK=1
  log "up in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $dir (server port $(cat "$dir/apiserver.port"))"
  echo "$dir"
}

cmd_stop_all() {
  local dir="$1" rc=0
  stop_pid "$(cat "$dir/apiserver.pid" 2>/dev/null || true)" "$dir/pki/server.crt" "$APISERVER_WAIT" || rc=1
  stop_pid "$(cat "$dir/etcd.pid" 2>/dev/null || true)" "$dir/etcd-data" 10 || rc=1
  return $rc
}

cmd_down() {
  local dir
  dir=$(env_dir "${1:-}")
  cmd_stop_all "$dir" || die "could not stop everything; leaving $dir"
  if [ -n "${GQ_KEEP_ENV:-}" ]; then log "kept $dir"; else rm -rf "$dir"; fi
}

# kube-apiserver keeps serving open watches after SIGTERM: how long to wait before SIGKILL.
APISERVER_WAIT="${GQ_APISERVER_STOP_WAIT:-3}"
case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down "${2:-}" ;;
  kubeconfig) d=$(env_dir "${2:-}"); echo "$d/kubeconfig" ;;
  stop-apiserver) d=$(env_dir "${2:-}"); stop_pid "$(cat "$d/apiserver.pid")" "$d/pki/server.crt" "$APISERVER_WAIT" ;;
  start-apiserver) d=$(env_dir "${2:-}"); start_apiserver "$d" ;;
  restart-apiserver)
    d=$(env_dir "${2:-}")
    stop_pid "$(cat "$d/apiserver.pid")" "$d/pki/server.crt" "$APISERVER_WAIT"
    start_apiserver "$d" ;;
  crash-apiserver)   # SIGKILL, no graceful shutdown, then start again
    d=$(env_dir "${2:-}")
    stop_pid "$(cat "$d/apiserver.pid")" "$d/pki/server.crt" 0
    start_apiserver "$d" ;;
  apply-crds) d=$(env_dir "${2:-}"); apply_crds "$d" ;;
  *) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
