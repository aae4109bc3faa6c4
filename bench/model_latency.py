#!/usr/bin/env python3
"""Model latency of kiln artifacts against onnxruntime, in the same run.

  bench/model_latency.py --model M.onnx --artifact LABEL=PATH [...]
                         [--repeat N] [--warmup K] [--threads T] [--bin-dir DIR]

Every artifact is run with kiln-run (its own timer, C++); the baseline is
onnxruntime's CPU execution provider on the same model and input, with the
same thread count, timed around session.run (so it carries a few microseconds
of Python call overhead per run). Prints a table of medians and ratios, and
checks every kiln output against onnxruntime (max abs error).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def kiln_median(kiln_run, artifact, feeds, outdir, repeat, warmup, threads):
    args = [kiln_run, artifact, "--output-dir", outdir, "--repeat", str(repeat),
            "--warmup", str(warmup)]
    for name, path in feeds.items():
        args += ["--input", f"{name}={path}"]
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"kiln-run failed on {artifact}:\n{r.stderr}")
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("median_ms="), last
    return float(last.split("=", 1)[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--artifact", action="append", required=True, help="LABEL=PATH")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    model = onnx.load(a.model)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(a.seed)
    tmp = tempfile.mkdtemp(prefix="kiln-bench-")
    inputs, feeds = {}, {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            x = rng.uniform(-1, 1, shape).astype(dtype)
        else:  # masks, ids: small non-negative integers
            x = rng.integers(0, 2, shape).astype(dtype)
        inputs[vi.name] = x
        feeds[vi.name] = os.path.join(tmp, f"{vi.name}.npy")
        np.save(feeds[vi.name], x)

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)
    for _ in range(a.warmup):
        sess.run(None, inputs)
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        sess.run(None, inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    ort_ms = float(np.median(times))

    kiln_run = os.path.join(a.bin_dir, "deploy", "kiln-run")
    rows, worst = [], 0.0
    for spec in a.artifact:
        label, path = spec.split("=", 1)
        outdir = os.path.join(tmp, f"out-{label}")
        ms = kiln_median(kiln_run, path, feeds, outdir, a.repeat, a.warmup, a.threads)
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(outdir, "output_0.pb")))
        err = float(np.max(np.abs(got - ref[0])))
        worst = max(worst, err)
        rows.append((f"kiln {label}", ms, err))

    print(f"model {os.path.basename(a.model)}, {a.threads} threads, median of {a.repeat} runs")
    print()
    print("| module | median latency (ms) | speed vs onnxruntime | max abs err vs onnxruntime |")
    print("|---|---:|---:|---:|")
    print(f"| onnxruntime {ort.__version__} (baseline) | {ort_ms:.4f} | 1.00x | - |")
    for label, ms, err in rows:
        print(f"| {label} | {ms:.4f} | {ort_ms / ms:.2f}x | {err:.1e} |")
    if worst > 1e-3:
        sys.exit(f"kiln output differs from onnxruntime by {worst}")


if __name__ == "__main__":
    main()
