#!/usr/bin/env bash
# Build kube-scheduler 1.20.2 from the same Debian source package as the API server (same
# release the benchmarks run against), once, cached next to it. Used only by bench_stream.sh.
# Prints the binary's path.
exec "$(dirname "$0")/build-apiserver.sh" kube-scheduler
