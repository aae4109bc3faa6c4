#!/usr/bin/env bash
# bench/gpu_check.sh PACK          (on a machine with an NVIDIA GPU)
#
# kiln's CUDA path checked and timed in one go, within about 8 minutes on
# an H100 (issue 45). PACK is the folder bench/gpu_pack.sh BUILD PACK made
# (carried to the device machine). From the repository root:
#
#   1. the environment: the GPU, its driver, NVRTC (KILN_NVRTC is set to
#      the first libnvrtc.so found), `kiln-agent --list-devices`;
#   2. the `gpu`-labelled tests (kiln_gpu_tests, what `ctest -L gpu` runs);
#   3. bench/gpu_bench.py through a local tracker and a cuda:0 agent:
#      MatMul 4096^3 and ResNet-18's first 3x3 convolution tuned with a
#      small trial budget, ResNet-50 compiled untuned and with a small
#      tuned log, each beside cuBLAS, cuDNN and PyTorch eager timed in the
#      same run (TF32 off);
#   4. the models.cuda.* tests (tests/models/models_test.py --target cuda:
#      every suite model compiled for sm_80 and sm_90 and run on the
#      device against onnxruntime on the CPU), several at a time.
#
# Logs go under $OUT (or ./gpu-check-out); the tuning log of step 3 is kept
# there as tuning.db. Step 3 starts from GPU_CHECK_SEED_DB (default
# bench/logs/h100-gpu-check.db, the log the H100 runs so far have made), so
# that each run goes on tuning where the last stopped: copy $OUT/tuning.db
# back over it and commit it. GPU_CHECK_SEED_DB= (empty) starts afresh. Step budgets in seconds:
# GPU_CHECK_TESTS_S, GPU_CHECK_BENCH_S, GPU_CHECK_MODELS_S; trial budgets:
# GPU_CHECK_MATMUL_TRIALS, GPU_CHECK_CONV_TRIALS, GPU_CHECK_RESNET_TRIALS.
# GPU_CHECK_STEPS picks steps (default "env,tests,models,bench").
set -uo pipefail
pack=${1:?usage: bench/gpu_check.sh PACK}
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
steps=${GPU_CHECK_STEPS:-env,tests,models,bench}
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }

# shellcheck source=/dev/null
source "$pack/activate" || { note "gpu_check: cannot unpack $pack"; exit 1; }
# kiln_gpu_tests reads its test models from the source folder it was built in.
src=$(cat "$KILN_GPU_ROOT/kiln/source-dir")
if [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
# The build-folder layout that gpu_bench.py and models_test.py call programs by.
bindir="$KILN_GPU_ROOT/bindir"
mkdir -p "$bindir"/{cli,device_agent,tracker,deploy}
ln -sf "$KILN_GPU_ROOT/wrap/kiln" "$bindir/cli/kiln"
ln -sf "$KILN_GPU_ROOT/wrap/kiln-agent" "$bindir/device_agent/kiln-agent"
ln -sf "$KILN_GPU_ROOT/wrap/kiln-tracker" "$bindir/tracker/kiln-tracker"
ln -sf "$KILN_GPU_ROOT/wrap/kiln-run" "$bindir/deploy/kiln-run"

if [ -z "${KILN_NVRTC:-}" ]; then
  KILN_NVRTC=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/ /opt /usr/lib \
    -name 'libnvrtc.so*' ! -name '*builtins*' 2>/dev/null | sort | head -1)
  export KILN_NVRTC
fi
# NVRTC loads its builtins library from the loader's path.
[ -n "$KILN_NVRTC" ] && export LD_LIBRARY_PATH="$(dirname "$KILN_NVRTC")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1

if [[ $steps == *env* ]]; then
  note "== environment"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
    --format=csv,noheader 2>&1 | tee -a "$summary"
  note "NVRTC: ${KILN_NVRTC:-none found}"
  kiln-agent --list-devices 2>&1 | tee -a "$summary"
fi

if [[ $steps == *tests* ]]; then
  note "== gpu tests (kiln_gpu_tests), $(elapsed) s in"
  timeout "${GPU_CHECK_TESTS_S:-90}" kiln_gpu_tests --gtest_color=no >"$out/gpu_tests.log" 2>&1
  note "kiln_gpu_tests: rc $?"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^\[  PASSED|Failure|error' "$out/gpu_tests.log" |
    head -40 | tee -a "$summary"
fi

if [[ $steps == *models* ]]; then
  note "== models.cuda.* (several at a time), $(elapsed) s in"
  mlogs=$(mktemp -d)
  python3 tests/models/make_models.py --list | tr ';' '\n' | grep -v '^$' |
    timeout "${GPU_CHECK_MODELS_S:-120}" xargs -P "${GPU_CHECK_JOBS:-12}" -I{} sh -c \
      "python3 tests/models/models_test.py --bin-dir '$bindir' --target cuda ModelTest.test_{} \
         >'$mlogs/{}.log' 2>&1; echo \"models.cuda.{}: rc \$?\" >>'$mlogs/rc'"
  for f in "$mlogs"/*.log; do echo "### $(basename "$f" .log)"; cat "$f"; done >"$out/models.log"
  sort "$mlogs/rc" 2>/dev/null | tee -a "$summary"
  note "models.cuda: $(grep -c 'rc 0$' "$mlogs/rc" 2>/dev/null) passed (skips included)," \
    "$(grep -vc 'rc 0$' "$mlogs/rc" 2>/dev/null) failed, of" \
    "$(python3 tests/models/make_models.py --list | tr ';' '\n' | grep -vc '^$')"
fi
if [[ $steps == *bench* ]]; then
  note "== bench/gpu_bench.py, $(elapsed) s in"
  seed=()
  seed_db=${GPU_CHECK_SEED_DB-bench/logs/h100-gpu-check.db}
  [ -n "$seed_db" ] && [ -f "$seed_db" ] && seed=(--seed-db "$seed_db")
  timeout -s INT -k 20 "${GPU_CHECK_BENCH_S:-200}" python3 bench/gpu_bench.py --bin-dir "$bindir" \
    --device cuda:0 --suite "${GPU_CHECK_SUITE:-matmul,conv,resnet50}" --matmul-sizes 4096 \
    --conv-layers 64x56 --resnet-tune-timeout "${GPU_CHECK_RESNET_TUNE_S:-40}" \
    --matmul-trials "${GPU_CHECK_MATMUL_TRIALS:-64}" --conv-trials "${GPU_CHECK_CONV_TRIALS:-32}" \
    --resnet-trials "${GPU_CHECK_RESNET_TRIALS:-64}" --tune-timeout "${GPU_CHECK_TUNE_S:-40}" \
    --save-db "$out/tuning.db" "${seed[@]}" >"$out/bench.log" 2>&1
  note "gpu_bench: rc $?"
  sed -n '/^agent:/,$p' "$out/bench.log" | tee -a "$summary"
  grep -q '^agent:' "$out/bench.log" || tail -30 "$out/bench.log" | tee -a "$summary"
fi

note "gpu_check: done in $(elapsed) s"
