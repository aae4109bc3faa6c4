#!/usr/bin/env python3
"""End-to-end test of models of the size people export, for real.

Generates with onnx + numpy (random weights, no downloads):
  - a VGG-sized network of over 300 MB (the size is in its fully connected
    weights, as VGG's 4096x25088 FC; a 32x32 input keeps the compute small)
    whose batch dimension is symbolic, so it needs --input-shape;
  - a network saved with ONNX external data (weights in a file beside it).
Tunes each through a real kiln-tracker and kiln-agent on loopback with a small
trial budget, fetches the artifacts, runs them with kiln-run and compares with
onnxruntime. Checks the tracker's memory (it must not hold several copies of
the model), the operator's size limit and the clean-up of partial uploads.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

from farm import Farm

ARGS = None
MB = 1 << 20


def conv_relu(nodes, inits, rng, x, name, cin, cout):
    w = (rng.standard_normal((cout, cin, 3, 3), dtype=np.float32) *
         np.float32(np.sqrt(2.0 / (cin * 9))))
    inits += [numpy_helper.from_array(w, name + "_w"),
              numpy_helper.from_array(np.zeros(cout, np.float32) + 0.01, name + "_b")]
    nodes += [helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", [name], [name + "_r"])]
    return name + "_r"


def fc(nodes, inits, rng, x, name, k, n, relu=True):
    w = rng.standard_normal((n, k), dtype=np.float32)
    w *= np.float32(np.sqrt(2.0 / k))
    inits += [numpy_helper.from_array(w, name + "_w"),
              numpy_helper.from_array(np.zeros(n, np.float32), name + "_b")]
    nodes.append(helper.make_node("Gemm", [x, name + "_w", name + "_b"], [name], transB=1))
    if not relu:
        return name
    nodes.append(helper.make_node("Relu", [name], [name + "_r"]))
    return name + "_r"


def vgg_like(fc_in_channels=256, hidden=4096, classes=1000, batch="N"):
    """conv-pool x3 on 32x32, then FC (C*8*8)->hidden->hidden->classes."""
    rng = np.random.default_rng(11)
    nodes, inits = [], []
    x = conv_relu(nodes, inits, rng, "data", "c1", 3, 16)
    nodes.append(helper.make_node("MaxPool", [x], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    x = conv_relu(nodes, inits, rng, "p1", "c2", 16, 64)
    nodes.append(helper.make_node("MaxPool", [x], ["p2"], kernel_shape=[2, 2], strides=[2, 2]))
    x = conv_relu(nodes, inits, rng, "p2", "c3", 64, fc_in_channels)
    nodes.append(helper.make_node("Flatten", [x], ["flat"]))
    x = fc(nodes, inits, rng, "flat", "fc1", fc_in_channels * 64, hidden)
    x = fc(nodes, inits, rng, x, "fc2", hidden, hidden)
    fc(nodes, inits, rng, x, "logits", hidden, classes, relu=False)
    graph = helper.make_graph(
        nodes, "vgg_like",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [batch, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def tracker_memory_kb(pid):
    """(peak, current) resident set of a process, in KiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])


class BigFarm(Farm):
    """A tracker with the given upload limit and one agent of key big-cpu."""

    def __init__(self, tmp, max_model_bytes):
        super().__init__(tmp, ARGS.bin_dir)
        self.tracker = self.start_tracker(extra=["--max-model-bytes", max_model_bytes])
        self.start_agent("big-cpu", 0)

    def wait_agent(self):
        self.wait_devices("big-cpu")

    def stored_files(self):
        out = []
        for root, _, files in os.walk(self.artifacts):
            out += [os.path.join(root, f) for f in files]
        return out


class LargeModels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-large-")
        cls.tmp = cls.tmpdir.name
        cls.farm = BigFarm(cls.tmp, "512M")
        cls.farm.wait_agent()

    @classmethod
    def tearDownClass(cls):
        cls.farm.stop()
        cls.tmpdir.cleanup()

    def tune_fetch_run(self, model_path, name, trials, x, extra=()):
        t0 = time.time()
        r = self.farm.kiln("tune", model_path, "--tracker", self.farm.addr, "--key", "big-cpu",
                           "--trials", str(trials), "--wait", *extra)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.farm.log("tracker.log"))
        job = r.stdout.splitlines()[0].strip()
        t1 = time.time()
        art = os.path.join(self.tmp, name + ".kiln")
        r = self.farm.kiln("fetch", job, "--tracker", self.farm.addr, "-o", art)
        self.assertEqual(r.returncode, 0, r.stderr)
        inp = os.path.join(self.tmp, name + "_x.npy")
        np.save(inp, x)
        out = os.path.join(self.tmp, name + "_out")
        r = subprocess.run([f"{ARGS.bin_dir}/deploy/kiln-run", art, "--input", f"data={inp}",
                            "--output-dir", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
        ref = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"]).run(
            None, {"data": x})[0]
        np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3 * float(np.abs(ref).max()))
        print(f"\n  {name}: tuned in {t1 - t0:.1f} s, artifact {os.path.getsize(art) / MB:.0f} MiB,"
              f" fetched and run in {time.time() - t1:.1f} s", file=sys.stderr)
        os.remove(art)
        return job

    def test_1_vgg_sized_model_with_symbolic_batch(self):
        path = os.path.join(self.tmp, "vgg_like.onnx")
        model = vgg_like()
        onnx.save(model, path)
        del model
        size = os.path.getsize(path)
        self.assertGreater(size, 300 * MB)
        x = np.random.default_rng(3).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)

        # The batch dimension is symbolic: without a shape the tracker names it.
        r = self.farm.kiln("tune", path, "--tracker", self.farm.addr, "--key", "big-cpu",
                           "--trials", "4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("input 'data' [N,3,32,32]: dimension 0 ('N') is unknown", r.stderr)

        self.tune_fetch_run(path, "vgg_like", 8, x, ["--input-shape", "data=1x3x32x32"])

        # Uploaded twice (the refused submission and the job), stored once;
        # no partial upload is left behind.
        stored = self.farm.stored_files()
        self.assertEqual(sum(1 for f in stored if os.path.getsize(f) == size), 1, stored)
        self.assertFalse([f for f in stored if "/.tmp/" in f], stored)
        # The tracker never held several copies of the model: its peak
        # resident set stays within a small multiple of the model (import,
        # graph and the compiled artifact), and it lets go once the job ends.
        peak_kb, now_kb = tracker_memory_kb(self.farm.tracker.pid)
        print(f"  tracker memory: peak {peak_kb / 1024:.0f} MiB, now {now_kb / 1024:.0f} MiB "
              f"(model {size / MB:.0f} MiB)", file=sys.stderr)
        self.assertLess(peak_kb * 1024, 3 * size)
        self.assertLess(now_kb * 1024, size)
        os.remove(path)

    def test_2_external_data_model(self):
        folder = os.path.join(self.tmp, "ext")
        os.makedirs(folder)
        path = os.path.join(folder, "model.onnx")
        model = vgg_like(fc_in_channels=32, hidden=512, classes=10, batch=1)
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.weights", size_threshold=1024)
        self.assertLess(os.path.getsize(path), 64 * 1024)
        self.assertGreater(os.path.getsize(os.path.join(folder, "model.weights")), 4 * MB)
        x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
        self.tune_fetch_run(path, "external", 8, x)

        # kiln compile imports it from the CLI, beside the model.
        out = os.path.join(self.tmp, "ext_local.kiln")
        r = self.farm.kiln("compile", path, "--db", os.path.join(self.tmp, "local.db"), "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.exists(out))

        # A model naming a data file outside its folder is refused before any
        # upload.
        for t in model.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = "../kiln.db"
        evil = os.path.join(folder, "evil.onnx")
        with open(evil, "wb") as f:
            f.write(model.SerializeToString())
        r = self.farm.kiln("tune", evil, "--tracker", self.farm.addr, "--key", "big-cpu",
                           "--trials", "4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("leaves the model's folder", r.stderr)

    def test_3_over_the_operators_limit(self):
        # 600 MiB (sparse on disk): a ModelProto whose doc_string is zeros.
        path = os.path.join(self.tmp, "huge.onnx")
        n = 600 * MB
        header = bytearray([0x32])  # field 6 (doc_string), length-delimited
        v = n
        while v >= 0x80:
            header.append((v & 0x7F) | 0x80)
            v >>= 7
        header.append(v)
        with open(path, "wb") as f:
            f.write(header)
            f.truncate(len(header) + n)
        before = self.farm.stored_files()
        r = self.farm.kiln("tune", path, "--tracker", self.farm.addr, "--key", "big-cpu",
                           "--trials", "4")
        os.remove(path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("RESOURCE_EXHAUSTED", r.stderr)
        self.assertIn("accepts at most 536870912 bytes", r.stderr)
        self.assertIn("--max-model-bytes", r.stderr)
        self.assertEqual(before, self.farm.stored_files())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
