#!/usr/bin/env bash
# Integration tests against a real kube-apiserver + etcd (called by `make integration`).
#
#   tests/k8s/run.sh BUILD_DIR [TEST_NAME...]
#
# Builds the API server once if it is not cached (tests/k8s/build-apiserver.sh, ~5-8 min on a
# fresh machine), then for every tests/k8s/test_*.sh (or the named ones): starts a fresh
# environment (env.sh up), runs the test with KUBECONFIG, GQ_ENV_DIR, GANGQ_BIN and
# GQ_TEST_TMP exported, stops the environment (always, trap on EXIT). Prints one line per
# test and `integration: N passed, M failed`; exits non-zero on any failure.
# GQ_TEST_TIMEOUT (seconds, default 300) bounds each test; GQ_KEEP_ENV=1 keeps the
# environment directories (logs) instead of removing them; GQ_KEEP_TMP=1 keeps each test's
# GQ_TEST_TMP (a benchmark's controller log and samples) and prints where.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="${1:-build}"
shift || true
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac

for tool in etcd kubectl openssl curl jq ss; do
  command -v "$tool" >/dev/null || { echo "integration: missing tool $tool"; echo "integration: 0 passed, 1 failed"; exit 1; }
done

export GQ_APISERVER_BIN
GQ_APISERVER_BIN=$("$HERE/build-apiserver.sh") || {
  echo "integration: could not build kube-apiserver"; echo "integration: 0 passed, 1 failed"; exit 1; }

if [ $# -gt 0 ]; then
  tests=()
  for t in "$@"; do tests+=("$HERE/${t%.sh}.sh"); done
else
  tests=("$HERE"/test_*.sh)
fi

RUN_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gangq-integration.XXXXXX")
ENV_DIR=""
cleanup() {
  if [ -n "$ENV_DIR" ]; then "$HERE/env.sh" down "$ENV_DIR" >/dev/null 2>&1 || true; fi
  if [ "${GQ_KEEP_TMP:-0}" = 1 ]; then echo "integration: test files kept in $RUN_TMP"; else rm -rf "$RUN_TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0; failed=0; failed_names=""
t_start=$(date +%s)
for t in "${tests[@]}"; do
  name=$(basename "$t" .sh)
  t0=$(date +%s%N)
  tmp="$RUN_TMP/$name"; mkdir -p "$tmp"
  if [ ! -f "$t" ]; then
    echo "FAIL $name (no such test)"; failed=$((failed + 1)); failed_names="$failed_names $name"; continue
  fi
  # A test may ask for environment settings with lines `# gq-env: VAR=VALUE` (e.g. GQ_AUTHZ=RBAC).
  envs=$(sed -n 's/^# gq-env: *\([A-Z_][A-Z0-9_]*=[^ ]*\) *$/\1/p' "$t")
  if ! ENV_DIR=$(env $envs "$HERE/env.sh" up 2>"$tmp/env.log"); then
    ENV_DIR=""
    echo "FAIL $name (environment did not start)"; sed 's/^/    /' "$tmp/env.log"
    failed=$((failed + 1)); failed_names="$failed_names $name"; continue
  fi
  (
    . "$ENV_DIR/env"
    export GANGQ_BIN="$BUILD/gangq" GQ_TEST_TMP="$tmp" GQ_TEST_NAME="$name" GQ_ROOT="$ROOT"
    cd "$ROOT" && timeout -k 10 "${GQ_TEST_TIMEOUT:-300}" bash "$t"
  ) >"$tmp/test.log" 2>&1
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1))
    printf 'PASS %s (%d.%01ds)\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
    grep '^  ok:' "$tmp/test.log" || true
  else
    failed=$((failed + 1)); failed_names="$failed_names $name"
    [ $rc -eq 124 ] && why=" (timed out after ${GQ_TEST_TIMEOUT:-300}s)" || why=" (exit $rc)"
    printf 'FAIL %s%s (%d.%01ds)\n' "$name" "$why" $((ms / 1000)) $((ms % 1000 / 100))
    tail -60 "$tmp/test.log" | sed 's/^/    /'
    echo "    --- apiserver log (last 10 lines) ---"
    tail -10 "$ENV_DIR/apiserver.log" 2>/dev/null | sed 's/^/    /'
  fi
  "$HERE/env.sh" down "$ENV_DIR" 2>>"$tmp/env.log" || echo "    (env.sh down reported a problem: $(tail -1 "$tmp/env.log"))"
  ENV_DIR=""
done
echo "integration: took $(( $(date +%s) - t_start ))s${failed_names:+; failed:$failed_names}"
echo "integration: $passed passed, $failed failed"
[ $failed -eq 0 ]
