#!/usr/bin/env python3
"""An OpenCL agent in the farm, on PoCL: `kiln-agent --device opencl:0`
announces the target `opencl -device=NAME`; a job for its key (no target
given) takes that target, its MatMul is tuned with the GPU dense template,
and every candidate is built by the device's driver, verified and timed on
the device. The final compile of a whole model for a GPU is not there yet:
the job ends failed, saying so, with its records kept.

Skips (exit 0, saying why) when no OpenCL device is installed.
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
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
        self.model = os.path.join(self.tmp, "matmul.onnx")
        build_matmul(self.model)

    def tearDown(self):
        self.farm.stop()
        self.tmpdir.cleanup()

    def test_a_matmul_is_tuned_on_the_opencl_device(self):
        self.farm.start_tracker()
        self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", self.farm.addr,
                         "--key", KEY, "--id", "ocl-0", "--device", "opencl:0"], "agent0.log")
        devices = self.farm.wait_devices(KEY)
        self.assertIn("OpenCL", devices)
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", KEY,
                           "--trials", "12")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        job = r.stdout.splitlines()[0].strip()
        out, state = self.farm.wait_job(job)
        log = self.farm.log("tracker.log") + self.farm.log("agent0.log")
        # Tuned on the device; the whole-model compile for a GPU is not there yet.
        self.assertEqual(state, "failed", out + log)
        self.assertIn("is not implemented yet", out)
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


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
