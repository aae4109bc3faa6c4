#!/usr/bin/env python3
"""Model tests: each model of make_models.py compiled with `kiln compile`
(default configs, an empty log database), run with `kiln-run`, and compared
with onnxruntime on the same inputs.

Usage: models_test.py --bin-dir BUILD [--target opencl|cuda] [unittest args,
       e.g. ModelTest.test_resnet50]
With --target opencl the model is compiled for kiln's OpenCL target and run
with `kiln-run --device opencl:0` (PoCL on a machine without a GPU). With
--target cuda it is compiled for `cuda -arch=sm_80` and `cuda -arch=sm_90`
(NVRTC needs no GPU) and run with `kiln-run --device cuda:0` where a CUDA
device exists (compiled only, said so, elsewhere).
One test case per model; ctest runs each as its own entry (label `models`).
A model that needs an operator kiln does not have yet is skipped, with the
reason, in SKIPS below. Timings go to stdout.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402

ARGS = None

# Models kiln cannot run yet, with the reason (the missing feature).
SKIPS = {}
# The same for one target.
TARGET_SKIPS = {
    "cuda": {"bert_layer_qdq": "CUDA C of its fused GELU epilogue repeats each quantize/dequantize "
                               "round trip inside erf's polynomial (no common subexpressions in "
                               "codegen/cuda.cc): the compile ran past 100 s and 3 GB"},
}


def mismatches(case, name, got, want):
    """The elements of float output `name` outside the case's tolerance
    (relative to the output's scale, or absolute: the output's abs_tols
    entry, else abs_tol; whichever is larger), the largest error over the
    scale, and the scale."""
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    scale = scale if scale > 0 else 1.0
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    abs_tol = (case.abs_tols or {}).get(name, case.abs_tol)
    bound = np.maximum(case.atol * scale + case.rtol * np.abs(want), abs_tol)
    worst = float(np.max(err / scale)) if err.size else 0.0
    return int(np.sum(~(err <= bound))), worst, scale


def reference(model, feeds):
    """onnxruntime's outputs (no graph optimizations: the plain kernels)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, sess.run(names, feeds)))


def run(cmd, what):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise AssertionError(f"{what} failed (rc {r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r, dt


def cuda_devices():
    """kiln-agent --list-devices on CUDA: (a device is there, why NVRTC is
    missing or None)."""
    r = subprocess.run([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--list-devices"],
                       capture_output=True, text=True, timeout=120)
    missing = re.search(r"^cuda: none \((no NVRTC.*)\)$", r.stdout, re.M)
    return (re.search(r"^cuda:0:", r.stdout, re.M) is not None,
            missing.group(1) if missing else None)


class ModelTest(unittest.TestCase):
    def check_model(self, name):
        if name in SKIPS:
            self.skipTest(SKIPS[name])
        if name in TARGET_SKIPS.get(ARGS.target, {}):
            self.skipTest(TARGET_SKIPS[ARGS.target][name])
        if ARGS.target == "cuda":
            has_gpu, no_nvrtc = cuda_devices()
            if no_nvrtc:
                self.skipTest(no_nvrtc)
        case = make_models.MODELS[name]()
        with tempfile.TemporaryDirectory(prefix=f"kiln-model-{name}-") as tmp:
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(case.model, path)
            ref = reference(case.reference or case.model, case.feeds)

            art = os.path.join(tmp, name + ".kiln")
            gpu = ARGS.target != "cpu"
            targets = {"cpu": [[]], "opencl": [["--target", "opencl"]],
                       "cuda": [["--target", "cuda -arch=sm_80"],
                                ["--target", "cuda -arch=sm_90"]]}[ARGS.target]
            for target in targets:
                c, compile_s = run([f"{ARGS.bin_dir}/cli/kiln", "compile", path, "--db",
                                    os.path.join(tmp, "log.db"), "-o", art] + target,
                                   "kiln compile " + " ".join(target))
            if ARGS.target == "cuda" and not has_gpu:
                print(f"\n{name}: compiled for sm_80 and sm_90 (NVRTC) in {compile_s:.1f} s; "
                      "not run: no CUDA device", flush=True)
                return
            cmd = [f"{ARGS.bin_dir}/deploy/kiln-run", art, "--output-dir",
                   os.path.join(tmp, "out"), "--repeat", "3"]
            cmd += ["--device", f"{ARGS.target}:0"] if gpu else ["--profile"]
            for k, v in case.feeds.items():
                np.save(os.path.join(tmp, f"in{len(cmd)}.npy"), v)
                cmd += ["--input", f"{k}={tmp}/in{len(cmd)}.npy"]
            r, run_s = run(cmd, "kiln-run")
            median = [ln for ln in r.stdout.splitlines() if ln.startswith("median_ms=")]
            # The profile has a row for every kernel call of the module.
            kernels = re.search(r": (\d+) kernels", c.stdout)
            rows = re.findall(r"^\| \d+ \| k\d+_\S+ \S+ \| [\d.]+ \| [\d.]+% \|$", r.stdout,
                              re.M)
            self.assertIsNotNone(kernels, c.stdout)
            if not gpu:
                self.assertEqual(len(rows), int(kernels.group(1)), r.stdout)
            print(f"\n{name}: compile {compile_s:.1f} s, kiln-run {run_s:.1f} s "
                  f"({median[-1] if median else 'no median'})", flush=True)

            for i, (out_name, want) in enumerate(ref.items()):
                pb = os.path.join(tmp, "out", f"output_{i}.pb")
                got = numpy_helper.to_array(onnx.load_tensor(pb))
                with self.subTest(output=out_name):
                    self.assertEqual(got.dtype, want.dtype, out_name)
                    self.assertEqual(got.shape, want.shape, out_name)
                    if not np.issubdtype(want.dtype, np.floating):
                        np.testing.assert_array_equal(got, want, err_msg=out_name)
                        continue
                    bad, worst, scale = mismatches(case, out_name, got, want)
                    print(f"  {out_name} {list(want.shape)}: scale {scale:.3g}, "
                          f"max |err|/scale {worst:.2e}", flush=True)
                    self.assertEqual(bad, 0, f"{out_name}: {bad} of {want.size} elements "
                                     f"differ (max |err|/scale {worst:.3e}, scale {scale:.3g})")


for _name in make_models.MODELS:
    setattr(ModelTest, f"test_{_name}",
            lambda self, n=_name: self.check_model(n))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--target", choices=["cpu", "opencl", "cuda"], default="cpu")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v"] + rest)
