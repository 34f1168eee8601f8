#!/usr/bin/env bash
# Build kube-apiserver 1.20.2 (or another component of the same tree, e.g. kube-scheduler:
# `build-apiserver.sh kube-scheduler`) from Debian's own source package, once, cached
# outside the work tree (see tests/k8s/README.md). Prints the binary's path.
set -euo pipefail
COMP="${1:-kube-apiserver}"
case "$COMP" in kube-apiserver|kube-scheduler) ;; *) echo "build-apiserver: unknown component $COMP" >&2; exit 2 ;; esac
VER="1.20.5+really1.20.2-1.1+deb12u1"
CACHE="${GANGQ_CACHE:-$HOME/.cache/gangq}"
OUT="$CACHE/$COMP-$VER"
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
mkdir -p "$CACHE"
log() { echo "build-apiserver: $*" >&2; }
# One build at a time per cache (two `make test` runs must not clobber each other's tree):
# the second waits for the first and then finds the binary.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for it"
  flock 9
fi
if [ -x "$OUT" ]; then echo "$OUT"; exit 0; fi
need_root() { [ "$(id -u)" = 0 ] || { log "not root: run as root or install: $*"; exit 1; }; }

# deb-src entry, reusing the mirror URI apt already uses (no host written here).
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  need_root "a deb-src entry for bookworm"
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list)
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" \
    > /etc/apt/sources.list.d/gangq-src.sources
  apt-get update -qq >&2
fi
pkgs="golang-1.19-go rsync jq make openssl curl dpkg-dev golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  need_root "apt-get install -y$missing"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >&2
fi
WORK="$CACHE/src-$COMP"
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
log "building cmd/$COMP (about 5 minutes on 2 cores)"
export PATH="/usr/lib/go-1.19/bin:$PATH" GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE="$CACHE/gocache"
make WHAT=cmd/$COMP >&2
cp "_output/bin/$COMP" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
cd "$CACHE" && rm -rf "$WORK"
echo "$OUT"
