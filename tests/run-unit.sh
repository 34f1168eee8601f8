#!/usr/bin/env bash
# Run every unit-test binary in BUILD/tests; print a closing summary line.
set -u
B=${1:-build}
pass=0; fail=0; failed=()
for t in "$B"/tests/test_*; do
  [ -x "$t" ] || continue
  if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$(basename "$t")"); fi
done
echo "unit suites ($B): $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
[ $pass -gt 0 ] || { echo "no unit suites ran"; exit 1; }
