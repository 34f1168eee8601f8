#!/usr/bin/env bash
# Try gangq locally without a cluster: a real kube-apiserver + etcd on loopback (the test
# harness's tests/k8s/env.sh), the example GPU nodes registered by the fake kubelet
# (tests/k8s/fakelet.sh, which also moves bound pods to Running and finishes deletes), and
# the gangq controller with its metrics port. Everything lives in one directory.
#
#   scripts/try-local.sh up [DIR]    build if needed, start it all; prints the lines to source
#   scripts/try-local.sh down [DIR]  stop what `up` started and remove DIR
#
# DIR defaults to ${TMPDIR:-/tmp}/gangq-try. After `up`, `. DIR/env` sets KUBECONFIG and puts
# `kubectl gangq` (the plugin) on PATH; the controller logs to DIR/controller.log, the
# fake kubelet to DIR/fakelet.log; metrics at http://127.0.0.1:PORT/metrics (PORT in DIR/env).
# GANGQ_NODES=FILE registers other Node manifests instead of examples/cluster/nodes.yaml.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S="$ROOT/tests/k8s"
say() { echo "try-local: $*" >&2; }
die() { say "$*"; exit 1; }

cmd="${1:-}"
DIR="${2:-${TMPDIR:-/tmp}/gangq-try}"
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac

stop_pidfile() {
  local f="$1" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop_all() {
  stop_pidfile "$DIR/controller.pid"
  stop_pidfile "$DIR/fakelet.pid"
  if [ -f "$DIR/envdir" ]; then "$K8S/env.sh" down "$(cat "$DIR/envdir")" || true; rm -f "$DIR/envdir"; fi
}

down() {
  [ -d "$DIR" ] || { say "nothing to stop in $DIR"; return 0; }
  stop_all
  rm -rf "$DIR"
  say "stopped and removed $DIR"
}

up() {
  [ ! -e "$DIR" ] || die "$DIR exists: run '$0 down $DIR' first"
  for tool in etcd kubectl openssl curl jq ss; do
    command -v "$tool" >/dev/null || die "missing tool '$tool' (make test installs the test tools as root: scripts/deps.sh)"
  done
  if [ ! -x "$ROOT/build/gangq" ]; then say "building gangq (make all)"; make -C "$ROOT" all >&2; fi
  local nodes="${GANGQ_NODES:-$ROOT/examples/cluster/nodes.yaml}"
  [ -r "$nodes" ] || die "GANGQ_NODES: cannot read $nodes"
  mkdir -p "$DIR/bin"
  TRY_OK=0
  # A failed start stops what it started and keeps DIR's logs for reading.
  trap '[ "$TRY_OK" = 1 ] || { stop_all; say "start failed; logs kept in $DIR (remove with: $0 down $DIR)"; }' EXIT
  export GQ_APISERVER_BIN
  GQ_APISERVER_BIN=$("$K8S/build-apiserver.sh") || die "could not build or find kube-apiserver"
  local envdir
  envdir=$("$K8S/env.sh" up) || die "the API server did not start (see the messages above)"
  echo "$envdir" >"$DIR/envdir"
  # shellcheck disable=SC1091
  . "$envdir/env"
  "$K8S/fakelet.sh" register "$nodes" >"$DIR/fakelet.log" 2>&1 || die "registering $nodes failed: $DIR/fakelet.log"
  "$K8S/fakelet.sh" loop --auto-run --heartbeat 20 >>"$DIR/fakelet.log" 2>&1 &
  echo $! >"$DIR/fakelet.pid"
  # port 0: the kernel picks a free one; the controller logs it
  "$ROOT/build/gangq" controller --kubeconfig "$KUBECONFIG" --db "$DIR/gangq.db" \
    --listen 127.0.0.1:0 >"$DIR/controller.log" 2>&1 &
  echo $! >"$DIR/controller.pid"
  ln -sf "$ROOT/build/gangq" "$DIR/bin/kubectl-gangq"
  local i port=""
  for i in $(seq 1 100); do
    [ -n "$port" ] || port=$(grep -o 'http server listening.*port=[0-9]*' "$DIR/controller.log" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    kill -0 "$(cat "$DIR/controller.pid")" 2>/dev/null || die "the controller exited: $DIR/controller.log"
    sleep 0.2
  done
  [ -n "$port" ] && curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 ||
    die "the controller is not ready after 20 s: $DIR/controller.log"
  cat >"$DIR/env" <<EOF
export KUBECONFIG='$KUBECONFIG'
export PATH='$DIR/bin':"\$PATH"
export GANGQ_METRICS='http://127.0.0.1:$port/metrics'
EOF
  say "API server $GQ_SERVER, $(grep -c '^kind: Node' "$nodes" || true) nodes, controller ready (metrics $port)"
  echo ". '$DIR/env'"
  TRY_OK=1
}

case "$cmd" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down [DIR]" >&2; exit 2 ;;
esac
