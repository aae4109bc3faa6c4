#!/usr/bin/env bash
# The board's side built for AArch64 (scripts/build's build/aarch64): an
# AArch64 kiln-board of at most 500 KB stripped, and kiln-board and kiln-run
# that start under qemu-aarch64 and say what they are. Skips (77) where the
# cross toolchain is not installed; fails where it is and the build is not.
# Usage: aarch64_check.sh BUILD_DIR/aarch64
set -euo pipefail
dir=$1
board=$dir/board/kiln-board
run=$dir/deploy/kiln-run
if [ ! -x "$board" ]; then
  if command -v aarch64-linux-gnu-g++ >/dev/null; then
    echo "FAIL: the cross toolchain is installed but $board was not built (scripts/build)"
    exit 1
  fi
  echo "SKIP: no AArch64 cross toolchain (scripts/install-deps installs it)"
  exit 77
fi
file "$board" | grep -q "ARM aarch64" || { echo "FAIL: $board is not AArch64: $(file "$board")"; exit 1; }
stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
aarch64-linux-gnu-strip -o "$stripped" "$board"
size=$(stat -c %s "$stripped")
echo "kiln-board for AArch64: $size bytes stripped"
[ "$size" -le 512000 ] || { echo "FAIL: over 500 KB"; exit 1; }
# qemu-user runs Debian's multiarch arm64 loader and libraries (those the
# binaries link); the cross sysroot's loader with the multiarch libc hangs
# at the first pthread_create.
prefix=/usr/aarch64-linux-gnu
[ -e /lib/ld-linux-aarch64.so.1 ] && prefix=/
out=$(timeout 120 qemu-aarch64 -L "$prefix" "$board" --describe)
echo "$out" | head -3
echo "$out" | grep -q "^triple: aarch64-linux-gnu$" || { echo "FAIL: no aarch64 triple"; exit 1; }
# The NEON FMA probe ran (its figure under qemu means nothing; 0.0: no probe).
echo "$out" | grep -q "^fma peak: 0.0 GFLOP/s$" && { echo "FAIL: no FMA peak measured"; exit 1; }
timeout 120 qemu-aarch64 -L "$prefix" "$run" --help | grep -q "usage: kiln-run" ||
  { echo "FAIL: the AArch64 kiln-run does not start"; exit 1; }
echo "ok"
