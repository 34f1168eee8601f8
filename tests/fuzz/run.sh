#!/usr/bin/env bash
# tests/fuzz/run.sh — build and run every libFuzzer target tests/fuzz/fuzz_*.c.
#
# Each target is compiled with `clang -fsanitize=fuzzer,address,undefined`
# directly against the library sources it needs, which it names in comment
# lines of its own file (paths relative to the repo root, shell globs allowed):
#
#   // fuzz-sources: common/gq.c common/buf.c api/*.c
#   // fuzz-libs: -lsqlite3            (optional; cJSON, libyaml and -lm are always linked)
#   // fuzz-seeds: examples/manifests/*.yaml   (optional; files copied into the corpus)
#
# A target without a fuzz-sources line is built from its own file alone.
# Seed files also come from tests/fuzz/seeds/<target>/ when that folder exists.
# Everything is built under build-fuzz/ (binaries, corpora, crash artifacts).
#
# Usage: tests/fuzz/run.sh [TARGET...]    (default: every fuzz_*.c)
# Env:   FUZZ_TIME seconds per target (default 15), FUZZ_BUILD (default build-fuzz),
#        CLANG (default clang).
# Exit 1 if any target fails to build or finds a crash/leak/UB; the last line is
# "fuzz: N passed, M failed".
set -u
cd "$(dirname "$0")/../.."
T=${FUZZ_TIME:-15}
B=${FUZZ_BUILD:-build-fuzz}
CLANG=${CLANG:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
  echo "fuzz: $CLANG not found (apt-get install clang libclang-rt-14-dev)"
  echo "fuzz: 0 passed, 1 failed"
  exit 1
fi
PKG_CFLAGS=$(pkg-config --cflags libcjson yaml-0.1 2>/dev/null || echo "-I/usr/include/cjson")
PKG_LIBS=$(pkg-config --libs libcjson yaml-0.1 2>/dev/null || echo "-lcjson -lyaml")
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -iquote . -iquote common -iquote api -iquote controller -iquote controller/scheduler \
  -iquote controller/kube -iquote controller/sim -iquote store $PKG_CFLAGS"
mkdir -p "$B/bin" "$B/corpus" "$B/artifacts" "$B/logs"

if [ $# -gt 0 ]; then
  targets=()
  for a in "$@"; do targets+=("tests/fuzz/$(basename "${a%.c}").c"); done
else
  targets=(tests/fuzz/fuzz_*.c)
fi

# Print the words after "// fuzz-KEY:" in FILE, globs expanded (relative to repo root).
directive() {
  local file=$1 key=$2 line
  line=$(grep -m1 -E "^[[:space:]]*//[[:space:]]*fuzz-$key:" "$file" | sed -E "s|^[[:space:]]*//[[:space:]]*fuzz-$key:||")
  # shellcheck disable=SC2086
  [ -n "$line" ] && (shopt -s nullglob; echo $line)
}

pass=0; fail=0; failed=()
for src in "${targets[@]}"; do
  [ -f "$src" ] || { echo "fuzz: no such target $src"; fail=$((fail+1)); failed+=("$src"); continue; }
  name=$(basename "$src" .c)
  srcs=$(directive "$src" sources)
  libs=$(directive "$src" libs)
  seeds=$(directive "$src" seeds)
  bin="$B/bin/$name"
  # shellcheck disable=SC2086
  if ! $CLANG $CFLAGS -o "$bin" "$src" $srcs $PKG_LIBS $libs -lm >"$B/logs/$name.build" 2>&1; then
    echo "fuzz: $name: build failed (see $B/logs/$name.build)"
    tail -20 "$B/logs/$name.build"
    fail=$((fail+1)); failed+=("$name"); continue
  fi
  corpus="$B/corpus/$name"
  mkdir -p "$corpus"
  [ -d "tests/fuzz/seeds/$name" ] && cp -f tests/fuzz/seeds/"$name"/* "$corpus"/ 2>/dev/null
  for s in $seeds; do [ -f "$s" ] && cp -f "$s" "$corpus/seed-$(echo "$s" | tr '/' '_')"; done
  echo "fuzz: $name: running ${T}s ($(ls "$corpus" | wc -l) inputs in corpus)"
  if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     "$bin" -max_total_time="$T" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$B/artifacts/$name-" -print_final_stats=0 "$corpus" >"$B/logs/$name.run" 2>&1; then
    echo "fuzz: $name: ok ($(grep -Eo '#[0-9]+' "$B/logs/$name.run" | tail -1 | tr -d '#') runs)"
    pass=$((pass+1))
  else
    echo "fuzz: $name: FAILED (log $B/logs/$name.run, artifacts $B/artifacts/$name-*)"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$B/logs/$name.run" | head -10
    # enough to act on from the CI output alone: where it stopped, and the input
    grep -E "^ +#[0-9]+ 0x[0-9a-f]+ in " "$B/logs/$name.run" | grep -v -E "libFuzzer|fuzzer::|libc\.so|_start" | head -12
    for a in "$B/artifacts/$name"-*; do
      [ -f "$a" ] || continue
      echo "fuzz: $name: input $(basename "$a") ($(wc -c <"$a") bytes), first 512 as hex:"
      head -c 512 "$a" | od -An -tx1 -v | tr -s ' ' | head -40
    done
    fail=$((fail+1)); failed+=("$name")
  fi
done
echo "fuzz: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
