#!/usr/bin/env python3
"""An OpenCL agent in the farm, on PoCL, end to end: `kiln-agent --device
opencl:0` announces the target `opencl -device=NAME`; jobs for its key (no
target given) take that target, their tasks are tuned with the GPU templates
(every candidate built by the device's driver, verified and timed on the
device), the tracker compiles each model for the device, and the fetched
artifact runs with `kiln-run --device opencl:0` and matches onnxruntime.

test_1: a MatMul, its records checked, with the job's end-to-end check (the
whole model run on the device beside its defaults). test_2: the whole model
suite of tests/models (make_models.py), every model tuned (a few trials
each: the point is the path, not the speed; `--no-end-to-end`, as whole-model
runs of every variant on PoCL take most of an hour for the suite), fetched,
run and compared.

Skips (exit 0, saying why) when no OpenCL device is installed.
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from farm import Farm

ARGS = None
KEY = "ocl"


def build_matmul(path):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((48, 40)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 48])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 40])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "matmul", [x], [y],
                              initializer=[w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


class OpenClAgent(unittest.TestCase):
    def setUp(self):
        listed = subprocess.run([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--list-devices"],
                                capture_output=True, text=True, timeout=60).stdout
        if "opencl:0:" not in listed:
            self.skipTest("no OpenCL device (install pocl-opencl-icd)")
        self.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-opencl-")
        self.tmp = self.tmpdir.name
        self.farm = Farm(self.tmp, ARGS.bin_dir)
        # Every model of the suite is submitted at once (test_2).
        self.farm.start_tracker(extra=["--max-jobs-per-user", "100"])
        self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", self.farm.addr,
                         "--key", KEY, "--id", "ocl-0", "--device", "opencl:0"], "agent0.log")
        self.assertIn("OpenCL", self.farm.wait_devices(KEY))

    def tearDown(self):
        self.farm.stop()
        self.tmpdir.cleanup()

    def fetch_and_run(self, job, name, feeds):
        """Fetches the job's artifact, runs it on opencl:0; returns the outputs."""
        art = os.path.join(self.tmp, name + ".kiln")
        r = self.farm.kiln("fetch", job, "--tracker", self.farm.addr, "-o", art)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = os.path.join(self.tmp, name + "-out")
        cmd = [f"{ARGS.bin_dir}/deploy/kiln-run", art, "--device", "opencl:0",
               "--output-dir", out]
        for i, (k, v) in enumerate(feeds.items()):
            np.save(os.path.join(self.tmp, f"{name}-in{i}.npy"), v)
            cmd += ["--input", f"{k}={self.tmp}/{name}-in{i}.npy"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        outs, i = [], 0
        while os.path.exists(os.path.join(out, f"output_{i}.pb")):
            outs.append(numpy_helper.to_array(onnx.load_tensor(
                os.path.join(out, f"output_{i}.pb"))))
            i += 1
        return outs

    def test_1_a_matmul_is_tuned_compiled_and_run_on_the_device(self):
        model = os.path.join(self.tmp, "matmul.onnx")
        build_matmul(model)
        r = self.farm.kiln("tune", model, "--tracker", self.farm.addr, "--key", KEY,
                           "--trials", "12")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        job = r.stdout.splitlines()[0].strip()
        out, state = self.farm.wait_job(job)
        log = self.farm.log("tracker.log") + self.farm.log("agent0.log")
        self.assertEqual(state, "completed", out + log)
        with sqlite3.connect(self.farm.db) as c:
            rows = c.execute("SELECT target, agent_id, error_kind, mean_cost_s FROM records "
                             "WHERE job_id = ?", (job,)).fetchall()
        self.assertEqual(len(rows), 12, log)
        measured = [r for r in rows if r[2] == "none"]
        self.assertTrue(measured, rows)
        for target, agent, _, cost in measured:
            self.assertTrue(target.startswith("opencl -device="), target)
            self.assertEqual(agent, "ocl-0")
            self.assertGreater(cost, 0)
        x = np.random.default_rng(4).standard_normal((32, 48)).astype(np.float32)
        (got,) = self.fetch_and_run(job, "matmul", {"x": x})
        w = numpy_helper.to_array(onnx.load(model).graph.initializer[0])
        np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)

    def test_2_the_model_suite_is_tuned_fetched_and_run(self):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "tests", "models"))
        import make_models  # noqa: E402
        from models_test import mismatches, reference  # noqa: E402
        names = ARGS.models.split(",") if ARGS.models else list(make_models.MODELS)
        jobs = {}
        cases = {}
        for name in names:
            case = make_models.MODELS[name]()
            cases[name] = case
            path = os.path.join(self.tmp, name + ".onnx")
            onnx.save(case.model, path)
            r = self.farm.kiln("tune", path, "--tracker", self.farm.addr, "--key", KEY,
                               "--trials", str(ARGS.trials), "--no-end-to-end")
            self.assertEqual(r.returncode, 0, f"{name}: {r.stdout}{r.stderr}")
            jobs[name] = r.stdout.splitlines()[0].strip()
        t0 = time.monotonic()
        for name in names:
            case = cases[name]
            with self.subTest(model=name):
                out, state = self.farm.wait_job(jobs[name], timeout=1200)
                self.assertEqual(state, "completed", f"{name}: {out}" +
                                 self.farm.log("tracker.log"))
                got = self.fetch_and_run(jobs[name], name, case.feeds)
                want = reference(case.reference or case.model, case.feeds)
                self.assertEqual(len(got), len(want), name)
                for g, (out_name, w) in zip(got, want.items()):
                    self.assertEqual(g.shape, w.shape, out_name)
                    if not np.issubdtype(w.dtype, np.floating):
                        np.testing.assert_array_equal(g, w, err_msg=f"{name}/{out_name}")
                        continue
                    bad = mismatches(case, out_name, g, w)[0]
                    self.assertEqual(bad, 0, f"{name}/{out_name}: {bad} of {w.size} differ")
                print(f"{name}: tuned ({ARGS.trials} trials), fetched, run on opencl:0, matches "
                      f"onnxruntime ({time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--trials", type=int, default=4, help="trials per model (test_2)")
    parser.add_argument("--models", default="", help="comma-separated (test_2; default: all)")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
