#!/usr/bin/env python3
"""kiln from Python, end to end (run it as a script, or paste the cells into a
notebook): tune a model on a farm, watch it, fetch the artifact, run it with
kiln.Module and compare with onnxruntime.

    pip install ./python                     # from the repository root
    export KILN_TRACKER=localhost:7070       # a tracker with an agent of key "cpu"
    export KILN_RUNTIME=build/deploy/libkiln_runtime.so
    python3 docs/python_example.py models/small_cnn.onnx --key cpu --trials 200
"""
import argparse
import time

import numpy as np
import onnxruntime as ort

import kiln

# %% Arguments.
parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--key", default="cpu")
parser.add_argument("--trials", type=int, default=200)
args = parser.parse_args()

# %% The farm: which boards serve which key.
client = kiln.Client()  # KILN_TRACKER, KILN_TOKEN
for d in client.devices():
    print(f"{d['key']:10} {d['id']:12} {'connected' if d['connected'] else 'offline':10} "
          f"{d['target']}")

# %% Tune: the model is uploaded, split into tasks and measured by the agents.
job = client.tune(args.model, key=args.key, trials=args.trials)
print("submitted", job.id)
info = job.wait(progress=True)  # a progress bar, fed by the tracker's event stream
print(f"{info['state']}: {info['trials_done']} trials, "
      f"estimated {info['best_latency_ms']:.3f} ms")
for t in info["tasks"]:
    print(f"  {t['op']:8} x{t['runs']} {t['trials']:4} trials  best {t['best_cost_s'] * 1e3:.4f} ms")

# %% Fetch the compiled artifact (its SHA-256 is checked) and load it.
path = job.fetch("model.kiln")
module = kiln.Module(path)
print(module)

# %% Run it on random inputs, and compare with onnxruntime.
rng = np.random.default_rng(0)
feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape, _ in module.inputs}
t0 = time.perf_counter()
ours = module.run(feeds)
kiln_ms = (time.perf_counter() - t0) * 1e3
session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
t0 = time.perf_counter()
theirs = session.run(None, feeds)
ort_ms = (time.perf_counter() - t0) * 1e3
for (name, got), want in zip(ours.items(), theirs):
    print(f"{name}: max |kiln - onnxruntime| = {np.max(np.abs(got - want)):.2e}")
print(f"one run: kiln {kiln_ms:.2f} ms, onnxruntime {ort_ms:.2f} ms (first runs; "
      "bench/model_latency.py times them properly)")
