#!/usr/bin/env bash
# Build kube-scheduler 1.20.2 from the same Debian source package as build-apiserver.sh
# (same release as the API server the benchmarks run against), once, cached next to it.
# Used only by bench_stream.sh (the comparison). Prints the binary's path.
set -euo pipefail
VER="1.20.5+really1.20.2-1.1+deb12u1"
CACHE="${GANGQ_CACHE:-$HOME/.cache/gangq}"
OUT="$CACHE/kube-scheduler-$VER"
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
# The source entry and build packages are the API server's: let its script install them.
"$(dirname "$0")/build-apiserver.sh" >/dev/null
log() { echo "build-scheduler: $*" >&2; }
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for it"
  flock 9
fi
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
WORK="$CACHE/src-scheduler"
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
log "fetching source kubernetes=$VER"
apt-get source -qq --download-only "kubernetes=$VER" >&2 || apt-get source -qq --download-only kubernetes >&2
dpkg-source -x --skip-patches ./*.dsc src >&2 2>&1 || dpkg-source -x ./*.dsc src >&2
cd src
for pkg in github.com/modern-go/reflect2 github.com/json-iterator/go; do
  v="vendor/$pkg"; s="/usr/share/gocode/src/$pkg"
  find "$v" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -delete
  find "$s" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -exec cp {} "$v/" \;
done
log "building cmd/kube-scheduler (about 5 minutes on 2 cores)"
export PATH="/usr/lib/go-1.19/bin:$PATH" GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE="$CACHE/gocache"
make WHAT=cmd/kube-scheduler >&2
cp _output/bin/kube-scheduler "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
cd "$CACHE" && rm -rf "$WORK"
echo "$OUT"
