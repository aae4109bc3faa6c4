#!/usr/bin/env bash
# bench/gpu_pack.sh BUILD OUT
#
# Packs what bench/gpu_check.sh needs on a GPU machine that has no package
# registry: kiln's programs and the GPU test binary (stripped), and the
# shared libraries they load that a glibc system may lack, in one
# OUT/kiln-gpu.tar.xz with an `activate` file. This is ../shared/tools/
# device-bundle's idea made small enough to travel with the repository
# (a device call carries 64 MiB at most; the bundle of whole Debian
# packages and unstripped programs is over 200 MB): only the libraries the
# programs link, stripped, xz-compressed (about 55 MB).
#
# Keep OUT out of git (.git/info/exclude) and carry it; there:
#   source OUT/activate      # unpacks once; PATH gets kiln, kiln-agent, ...
set -euo pipefail
build=$(cd "${1:?usage: gpu_pack.sh BUILD OUT}" && pwd)
out=${2:?usage: gpu_pack.sh BUILD OUT}
src=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/kiln/bin" "$stage/kiln/lib" "$out"

progs=("$build/cli/kiln" "$build/device_agent/kiln-agent" "$build/tracker/kiln-tracker"
       "$build/deploy/kiln-run" "$build/tests/kiln_gpu_tests")
for p in "${progs[@]}"; do
  [ -x "$p" ] || { echo "gpu_pack: $p is missing: build it first (scripts/build)" >&2; exit 1; }
  cp "$p" "$stage/kiln/bin/"
done
cp -L "$build"/deploy/libkiln_runtime.so "$stage/kiln/lib/"

# Every library the programs load, except glibc's and the compiler runtime's,
# which any glibc system has in a version at least as new.
base='/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64|libz|liblzma)\.so'
for p in "${progs[@]}"; do ldd "$p"; done | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE "$base" | while read -r lib; do cp -L "$lib" "$stage/kiln/lib/"; done
strip --strip-unneeded "$stage"/kiln/bin/* "$stage"/kiln/lib/*

# The compiled-in source folder of kiln_gpu_tests (its test models), for
# gpu_check.sh to link there.
echo "$src" >"$stage/kiln/source-dir"
tar -C "$stage" -cf - kiln | xz -6 -T0 >"$out/kiln-gpu.tar.xz"

cat >"$out/activate" <<'ACT'
# source this file: unpacks the pack once (under $KILN_GPU_ROOT, default
# /tmp/kiln-gpu) and puts kiln's programs on PATH. The programs find their
# libraries through wrappers, so that other programs (python, torch) keep
# the system's own.
_kp=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export KILN_GPU_ROOT=${KILN_GPU_ROOT:-/tmp/kiln-gpu}
if [ ! -f "$KILN_GPU_ROOT/.done" ]; then
  mkdir -p "$KILN_GPU_ROOT" && xz -dc "$_kp/kiln-gpu.tar.xz" | tar -C "$KILN_GPU_ROOT" -xf - &&
    mkdir -p "$KILN_GPU_ROOT/wrap" &&
    for p in "$KILN_GPU_ROOT"/kiln/bin/*; do
      printf '#!/bin/sh\nLD_LIBRARY_PATH="%s/kiln/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
        "$KILN_GPU_ROOT" "$p" >"$KILN_GPU_ROOT/wrap/$(basename "$p")"
      chmod +x "$KILN_GPU_ROOT/wrap/$(basename "$p")"
    done && touch "$KILN_GPU_ROOT/.done"
fi
export PATH="$KILN_GPU_ROOT/wrap:$PATH"
ACT
du -sh "$out/kiln-gpu.tar.xz" | cut -f1 | xargs echo "gpu_pack: $out/kiln-gpu.tar.xz holds"
