#!/usr/bin/env python3
"""End-to-end test of kiln: tracker + two agents + CLI + runtime, for real.

Starts kiln-tracker on 127.0.0.1 port 0 with a fresh SQLite file, two
kiln-agent processes with the same device key, submits an ONNX CNN with
`kiln tune --wait`, fetches the artifact, runs it with kiln-run and compares
the output with onnxruntime. Then checks that bad input gets a clear error and
changes nothing already stored.
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
import onnxruntime as ort
from onnx import helper, numpy_helper, TensorProto

from farm import Farm

ARGS = None


def build_cnn(path):
    """A small CNN: conv+relu, maxpool, conv+relu, residual add, gemm."""
    rng = np.random.default_rng(7)
    def init(name, shape):
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["data", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Flatten", ["r2"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "e2e_cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        [init("w1", [8, 3, 3, 3]), init("b1", [8]), init("w2", [8, 8, 3, 3]), init("b2", [8]),
         init("w3", [10, 8 * 8 * 8]), init("b3", [10])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def build_unsupported(path):
    graph = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["y"], name="the_unique")], "sm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)


class E2eFarm(Farm):
    """A tracker and two agents of key e2e-cpu."""

    def __init__(self, tmp):
        super().__init__(tmp, ARGS.bin_dir)
        self.tracker = self.start_tracker()
        for i in range(2):
            self.start_agent("e2e-cpu", i)

    def wait_agents(self, n):
        return self.wait_devices("e2e-cpu", n)


class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-e2e-")
        cls.tmp = cls.tmpdir.name
        cls.model = os.path.join(cls.tmp, "cnn.onnx")
        build_cnn(cls.model)
        cls.farm = E2eFarm(cls.tmp)
        cls.farm.wait_agents(2)

    @classmethod
    def tearDownClass(cls):
        cls.farm.stop()
        cls.tmpdir.cleanup()

    def records(self):
        with sqlite3.connect(self.farm.db) as c:
            return c.execute("SELECT COUNT(*) FROM records").fetchone()[0]

    def jobs(self):
        with sqlite3.connect(self.farm.db) as c:
            return c.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]

    def test_1_tune_fetch_run(self):
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", "e2e-cpu",
                           "--trials", "24", "--wait")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.farm.log("tracker.log"))
        job = r.stdout.splitlines()[0].strip()
        self.assertTrue(job, r.stdout)
        EndToEnd.job = job
        # Both agents took part in the measurements (batches go to either).
        self.assertGreater(self.records(), 0)
        art = os.path.join(self.tmp, "cnn.kiln")
        r = self.farm.kiln("fetch", job, "--tracker", self.farm.addr, "-o", art)
        self.assertEqual(r.returncode, 0, r.stderr)
        # The job's tuning report: a summary per task and a plot.
        svg = os.path.join(self.tmp, "report.svg")
        r = self.farm.kiln("report", job, "--tracker", self.farm.addr, "-o", svg)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"job {job} (", r.stdout)
        self.assertIn("end-to-end estimate (sum of runs x cost)", r.stdout)
        # The job ran its whole model on an agent after the search: untuned
        # against tuned, what it returned and why, and the curve.
        self.assertIn("end to end, the whole model on the board", r.stdout)
        self.assertRegex(r.stdout, r"returned  the (tuned module|defaults' module \(untuned\))")
        self.assertRegex(r.stdout, r"TRIALS +UNTUNED +TUNED +SPEED-UP")
        self.assertRegex(r.stdout, r"\n +24 +[0-9.]+ (us|ms) +[0-9.]+ (us|ms) +[0-9.]+x")
        with open(svg) as f:
            self.assertIn("conv2d x1", f.read())
        x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
        np.save(os.path.join(self.tmp, "x.npy"), x)
        out = os.path.join(self.tmp, "out")
        r = subprocess.run([f"{ARGS.bin_dir}/deploy/kiln-run", art, "--input",
                            f"data={self.tmp}/x.npy", "--output-dir", out, "--repeat", "5"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().splitlines()[-1].startswith("median_ms="), r.stdout)
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
        ref = ort.InferenceSession(self.model, providers=["CPUExecutionProvider"]).run(
            None, {"data": x})[0]
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4)
        # Signed by the tracker's key, made beside its database on first
        # start: `kiln-tracker keys` prints its public key, which kiln-run
        # takes as the trust key; another key is refused.
        keys = subprocess.run([f"{ARGS.bin_dir}/tracker/kiln-tracker", "keys", "--db",
                               self.farm.db], capture_output=True, text=True)
        self.assertEqual(keys.returncode, 0, keys.stderr)
        self.assertTrue(keys.stdout.startswith("-----BEGIN PUBLIC KEY-----"), keys.stdout)
        key_file = os.path.join(os.path.dirname(self.farm.db), "tracker-signing-key.pem")
        self.assertEqual(os.stat(key_file).st_mode & 0o777, 0o600)
        trusted = os.path.join(self.tmp, "tracker.pub")
        with open(trusted, "w") as f:
            f.write(keys.stdout)
        run = [f"{ARGS.bin_dir}/deploy/kiln-run", art, "--input", f"data={self.tmp}/x.npy",
               "--output-dir", os.path.join(self.tmp, "out-trusted")]
        r = subprocess.run(run + ["--trust-key", trusted], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        other = subprocess.run([f"{ARGS.bin_dir}/tracker/kiln-tracker", "keys", "--signing-key",
                                os.path.join(self.tmp, "other", "key.pem")],
                               capture_output=True, text=True)
        self.assertEqual(other.returncode, 0, other.stderr)
        self.assertIn("made the signing key", other.stderr)
        other_pub = os.path.join(self.tmp, "other.pub")
        with open(other_pub, "w") as f:
            f.write(other.stdout)
        r = subprocess.run(run + ["--trust-key", other_pub], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("UNAUTHENTICATED", r.stderr)
        self.assertIn("not by the trusted key", r.stderr)

    def test_2_not_onnx_is_rejected_and_stores_nothing(self):
        bad = os.path.join(self.tmp, "bad.onnx")
        with open(bad, "wb") as f:
            f.write(b"this is not an onnx model at all")
        jobs, records = self.jobs(), self.records()
        r = self.farm.kiln("tune", bad, "--tracker", self.farm.addr, "--key", "e2e-cpu",
                           "--trials", "4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn("ONNX", r.stderr)
        self.assertEqual((jobs, records), (self.jobs(), self.records()))

    def test_3_unsupported_operator_is_named(self):
        sm = os.path.join(self.tmp, "unsupported.onnx")
        build_unsupported(sm)
        jobs = self.jobs()
        r = self.farm.kiln("tune", sm, "--tracker", self.farm.addr, "--key", "e2e-cpu",
                           "--trials", "4")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Unique", r.stderr)
        self.assertEqual(jobs, self.jobs())

    def test_4_tracker_that_does_not_answer(self):
        r = self.farm.kiln("jobs", "--tracker", "127.0.0.1:1", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does not answer", r.stderr)

    def test_5_unknown_job(self):
        r = self.farm.kiln("fetch", "job-does-not-exist", "--tracker", self.farm.addr,
                           "-o", os.path.join(self.tmp, "x.kiln"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x.kiln")))

    def test_6_wrong_input_shape_for_kiln_run(self):
        art = os.path.join(self.tmp, "cnn.kiln")
        self.assertTrue(os.path.exists(art), "test_1 must run first")
        np.save(os.path.join(self.tmp, "wrong.npy"), np.zeros((1, 3, 8, 8), np.float32))
        r = subprocess.run([f"{ARGS.bin_dir}/deploy/kiln-run", art, "--input",
                            f"data={self.tmp}/wrong.npy", "--output-dir",
                            os.path.join(self.tmp, "out2")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("data", r.stderr)
        self.assertIn("1x3x16x16", r.stderr.replace(",", "x").replace(" ", ""))

    def test_7_tracker_killed_mid_job_resumes_without_remeasuring(self):
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", "e2e-cpu",
                           "--trials", "60")
        self.assertEqual(r.returncode, 0, r.stderr)
        job = r.stdout.splitlines()[0].strip()

        def job_records():
            with sqlite3.connect(self.farm.db) as c:
                return c.execute("SELECT COUNT(*) FROM records WHERE job_id = ?",
                                 (job,)).fetchone()[0]
        deadline = time.time() + 120
        while job_records() < 8:
            self.assertLess(time.time(), deadline, "no measurements arrived")
            time.sleep(0.05)
        # SIGKILL: no chance to flush or clean up.
        self.farm.tracker.kill()
        self.farm.tracker.wait()
        done_before = job_records()
        self.assertLess(done_before, 60, "the job finished before the kill; nothing to resume")
        addr = self.farm.addr
        self.farm.tracker = self.farm.start_tracker(addr, "tracker-restarted.log")
        self.assertEqual(self.farm.addr, addr)

        deadline = time.time() + 300
        state = ""
        while time.time() < deadline:
            out = self.farm.kiln("job", job, "--tracker", addr).stdout
            state = next((l.split()[1] for l in out.splitlines() if l.startswith("state")), "")
            if state in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.2)
        self.assertEqual(state, "completed", out + self.farm.log("tracker-restarted.log"))
        with sqlite3.connect(self.farm.db) as c:
            total, distinct = c.execute(
                "SELECT COUNT(*), COUNT(DISTINCT workload_key || '|' || config) FROM records "
                "WHERE job_id = ?", (job,)).fetchone()
        # Nothing measured before the kill was lost or measured again.
        print(f"\n  tracker killed after {done_before}/60 records; resumed to {total} records "
              f"({distinct} distinct configs)", file=sys.stderr)
        self.assertGreaterEqual(total, done_before)
        self.assertEqual(total, distinct)
        r = self.farm.kiln("fetch", job, "--tracker", addr, "-o",
                           os.path.join(self.tmp, "resumed.kiln"))
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
