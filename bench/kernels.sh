#!/bin/sh
# Kernels against oneDNN at 1 and 2 threads (issue 6's kernel table).
#   bench/kernels.sh [BUILD_DIR] [--trials N] [...]
set -e
build=${1:-build}
[ $# -gt 0 ] && shift
for t in 1 2; do
  OMP_NUM_THREADS=$t KILN_NUM_THREADS=$t "$build/bench/kernels_vs_onednn_bench" "$@"
  echo
done
