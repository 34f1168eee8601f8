#!/usr/bin/env bash
# Check the dependencies (Debian packages); install the missing ones when root,
# otherwise print the exact apt-get line and stop.
#   scripts/deps.sh          everything: build, sanitizers, fuzzing, integration tests
#   scripts/deps.sh build    only what building the gangq binary needs (container images)
#   scripts/deps.sh image    only what the image test needs (buildah, mmdebstrap)
set -euo pipefail
need=()
# Install what is in need (none: nothing to do), then exit.
install_needed() {
  [ ${#need[@]} -eq 0 ] && exit 0
  if [ "$(id -u)" != 0 ]; then
    echo "gangq: missing dependencies. Run:" >&2
    echo "  sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "gangq: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "${need[@]}"; }
  exit 0
}
if [ "${1:-}" = image ]; then
  command -v buildah >/dev/null || need+=(buildah)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  install_needed
fi
chk_pc() { pkg-config --exists "$1" 2>/dev/null || need+=("$2"); }
chk_h()  { [ -f "/usr/include/$1" ] || need+=("$2"); }
command -v cc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
if command -v pkg-config >/dev/null; then
  chk_pc libcurl libcurl4-openssl-dev
  chk_pc openssl libssl-dev
  chk_pc libcjson libcjson-dev
  chk_pc sqlite3 libsqlite3-dev
  chk_pc yaml-0.1 libyaml-dev
  chk_pc zlib zlib1g-dev
  chk_pc cmocka libcmocka-dev
else
  # without pkg-config nothing can be probed: ask for every library (apt skips installed ones)
  need+=(pkg-config libcurl4-openssl-dev libssl-dev libcjson-dev libsqlite3-dev libyaml-dev zlib1g-dev libcmocka-dev)
fi
chk_h ev.h libev-dev
if [ "${1:-}" != build ]; then
command -v clang >/dev/null || need+=(clang)
[ -n "$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null)" ] || need+=(libclang-rt-14-dev)
command -v sqlite3 >/dev/null || need+=(sqlite3)
command -v kubectl >/dev/null || need+=(kubernetes-client)
command -v etcd >/dev/null || need+=(etcd-server)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
command -v ss >/dev/null || need+=(iproute2)
fi
install_needed
