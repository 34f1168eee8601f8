#!/usr/bin/env bash
# Smoke test of controller/kube (the API client) against a real kube-apiserver 1.20 + etcd:
#   tests/k8s/kube_smoke.sh [BUILD_DIR]    (GQ_KUBE_BENCH=N adds a throughput run of N creates)
# Uses the environment in $GQ_ENV_DIR when set (tests/k8s/env.sh up), otherwise starts a
# fresh one with tests/k8s/env.sh and stops it afterwards. Runs BUILD_DIR/tools/kube_smoke,
# which restarts the API server mid-run (env.sh restart-apiserver) to check that watches
# resume from their resourceVersion. Prints `kube smoke: N passed, M failed`.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# BUILD_DIR defaults to the directory of $GANGQ_BIN (set by tests/k8s/run.sh), else build.
if [ -n "${1:-}" ]; then BUILD="$1"; elif [ -n "${GANGQ_BIN:-}" ]; then BUILD="$(dirname "$GANGQ_BIN")"; else BUILD=build; fi
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
TOOL="$BUILD/tools/kube_smoke"
[ -x "$TOOL" ] || { echo "kube smoke: $TOOL not built (make BUILD=... all)"; echo "kube smoke: 0 passed, 1 failed"; exit 1; }

own_env=""
cleanup() { [ -n "$own_env" ] && "$HERE/env.sh" down "$own_env" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${GQ_ENV_DIR:-}" ]; then
  if [ -z "${GQ_APISERVER_BIN:-}" ]; then
    GQ_APISERVER_BIN=$("$HERE/build-apiserver.sh") || { echo "kube smoke: could not build kube-apiserver"; echo "kube smoke: 0 passed, 1 failed"; exit 1; }
    export GQ_APISERVER_BIN
  fi
  own_env=$("$HERE/env.sh" up) || { echo "kube smoke: environment did not start"; echo "kube smoke: 0 passed, 1 failed"; exit 1; }
  GQ_ENV_DIR="$own_env"
fi
. "$GQ_ENV_DIR/env"
export GQ_ENV_DIR

# A second kubeconfig that authenticates with a client certificate (signed by the
# environment's CA, which the API server trusts as --client-ca-file), all inline (*-data).
work=$(mktemp -d "${TMPDIR:-/tmp}/gangq-kube-smoke.XXXXXX")
trap 'cleanup; rm -rf "$work"' EXIT
pki="$GQ_ENV_DIR/pki"
openssl req -newkey rsa:2048 -nodes -keyout "$work/client.key" -out "$work/client.csr" \
  -subj "/CN=kube-smoke/O=system:masters" 2>/dev/null &&
printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > "$work/client.ext" &&
openssl x509 -req -in "$work/client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -CAserial "$work/ca.srl" -out "$work/client.crt" -days 1 -extfile "$work/client.ext" 2>/dev/null || {
  echo "kube smoke: could not make a client certificate"; echo "kube smoke: 0 passed, 1 failed"; exit 1; }
cat > "$work/kubeconfig-cert" <<KC
apiVersion: v1
kind: Config
current-context: cert
clusters:
- name: local
  cluster:
    server: $GQ_SERVER
    certificate-authority-data: $(base64 -w0 < "$pki/ca.crt")
contexts:
- name: cert
  context: {cluster: local, user: cert-user, namespace: kube-smoke}
users:
- name: cert-user
  user:
    client-certificate-data: $(base64 -w0 < "$work/client.crt")
    client-key-data: $(base64 -w0 < "$work/client.key")
KC

timeout -k 5 300 "$TOOL" --kubeconfig "$KUBECONFIG" --cert-kubeconfig "$work/kubeconfig-cert" \
  ${GQ_KUBE_BENCH:+--bench "$GQ_KUBE_BENCH"} \
  --restart-cmd "'$HERE/env.sh' restart-apiserver '$GQ_ENV_DIR' >'$work/restart.log' 2>&1 || { cat '$work/restart.log' >&2; exit 1; }"
