#!/usr/bin/env python3
"""Security of the farm with real processes on loopback: tokens made with
`kiln-tracker tokens create`, a tracker started with --require-auth, an agent
with --token-file, the CLI with --token and KILN_TOKEN.

Checks: no token, a wrong one and a revoked one are UNAUTHENTICATED; an
agent's token cannot act as a user; a user cannot see another user's job
(NOT_FOUND, as for a job that does not exist); a user's job runs to the end on
an authenticated agent and its artifact is fetched; the tokens are stored
only as hashes; a tracker on a non-loopback address refuses to start without
an explicit choice; uploads that are not models, or declare absurd sizes, or
carry an initializer of undefined type are refused with INVALID_ARGUMENT
before any job exists, and the tracker lives on; a gRPC message over the
tracker's limit is RESOURCE_EXHAUSTED (tests/tracker/grpc_test.cc sends one:
the CLI streams uploads in chunks and never builds such a message).
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
from onnx import TensorProto, helper

from e2e_test import build_cnn
from farm import Farm

ARGS = None
KEY = "secure-cpu"


class Security(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-security-")
        cls.tmp = cls.tmpdir.name
        cls.farm = Farm(cls.tmp, ARGS.bin_dir)
        cls.tokens = cls.farm.create_tokens([("ana", "user"), ("bo", "user"),
                                             ("board-1", "agent"), ("root", "admin")])
        cls.farm.start_tracker(extra=["--require-auth"])
        cls.farm.start_agent_with_token(KEY, cls.tokens["board-1"])
        cls.model = os.path.join(cls.tmp, "cnn.onnx")
        build_cnn(cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.farm.stop()
        cls.tmpdir.cleanup()

    @classmethod
    def tracker_cli(cls, *args):
        return subprocess.run([f"{ARGS.bin_dir}/tracker/kiln-tracker", *args],
                              capture_output=True, text=True, timeout=60)

    def kiln(self, *args, token=None, env_token=None):
        env = {**os.environ}
        env.pop("KILN_TOKEN", None)
        if env_token:
            env["KILN_TOKEN"] = env_token
        cmd = [f"{ARGS.bin_dir}/cli/kiln", *args, "--tracker", self.farm.addr]
        if token:
            cmd += ["--token", token]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)

    def test_1_missing_wrong_and_agent_tokens_are_refused(self):
        r = self.kiln("jobs")
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAUTHENTICATED", r.stderr)
        r = self.kiln("jobs", token="kiln_" + "0" * 64)
        self.assertIn("UNAUTHENTICATED: unknown token", r.stderr)
        r = self.kiln("jobs", token=self.tokens["board-1"])
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.assertEqual(self.kiln("jobs", token=self.tokens["ana"]).returncode, 0)
        self.assertEqual(self.kiln("jobs", env_token=self.tokens["ana"]).returncode, 0)

    def test_2_a_users_job_runs_on_an_authenticated_agent_and_stays_theirs(self):
        devices = self.kiln("devices", token=self.tokens["root"]).stdout
        # The agent is known by its token's user, not by a name it chose.
        self.assertIn("board-1", devices)
        r = self.kiln("tune", self.model, "--key", KEY, "--trials", "8", "--wait",
                      token=self.tokens["ana"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.farm.log("tracker.log"))
        job = r.stdout.splitlines()[0].strip()
        art = os.path.join(self.tmp, "ana.kiln")
        r = self.kiln("fetch", job, "-o", art, env_token=self.tokens["ana"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(art), 0)
        for command in (["job", job], ["fetch", job, "-o", os.path.join(self.tmp, "bo.kiln")],
                        ["cancel", job], ["records", "--job", job]):
            r = self.kiln(*command, token=self.tokens["bo"])
            self.assertNotEqual(r.returncode, 0, command)
            self.assertIn("NOT_FOUND", r.stderr, command)
            self.assertNotIn("ana", r.stderr)
        self.assertNotIn(job, self.kiln("jobs", token=self.tokens["bo"]).stdout)
        self.assertIn(job, self.kiln("jobs", token=self.tokens["root"]).stdout)

    def test_3_tokens_are_stored_as_hashes_and_revocation_takes_effect(self):
        with sqlite3.connect(self.farm.db) as c:
            stored = " ".join(row[0] for row in c.execute("SELECT hash FROM tokens"))
        for secret in self.tokens.values():
            self.assertNotIn(secret[5:], stored)
        listed = self.tracker_cli("tokens", "list", "--db", self.farm.db).stdout
        bo_id = next(l.split()[0] for l in listed.splitlines() if " bo " in l)
        r = self.tracker_cli("tokens", "revoke", "--db", self.farm.db, bo_id)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.kiln("jobs", token=self.tokens["bo"])
        self.assertIn("UNAUTHENTICATED", r.stderr)
        self.assertIn("revoked", r.stderr)

    def test_4_beyond_loopback_the_tracker_needs_a_choice(self):
        r = subprocess.run([f"{ARGS.bin_dir}/tracker/kiln-tracker", "--listen", "0.0.0.0:0",
                            "--db", os.path.join(self.tmp, "other.db"), "--artifacts",
                            os.path.join(self.tmp, "other")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("without authentication", r.stderr)

    def test_5_bad_models_are_refused_and_the_tracker_lives(self):
        def save(name, model_bytes):
            path = os.path.join(self.tmp, name)
            with open(path, "wb") as f:
                f.write(model_bytes)
            return path

        garbage = save("garbage.onnx", np.random.default_rng(1).bytes(4096))
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000000, 1000000, 1000])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000000, 1000000, 1000])
        absurd = save("absurd.onnx", helper.make_model(
            helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "absurd", [x], [y]),
            opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
        w = TensorProto()
        w.name = "w"
        w.dims.extend([1, 4])
        w.data_type = TensorProto.UNDEFINED
        w.raw_data = bytes(16)
        undefined = save("undefined.onnx", helper.make_model(
            helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "undefined", [x], [y],
                              initializer=[w]),
            opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
        jobs_before = self.kiln("jobs", token=self.tokens["root"]).stdout
        tracker = self.farm.procs[0]
        for path, says in ((garbage, ""), (absurd, "elements"), (undefined, "")):
            r = self.kiln("tune", path, "--key", KEY, "--trials", "4", token=self.tokens["ana"])
            self.assertNotEqual(r.returncode, 0, path)
            self.assertIn("INVALID_ARGUMENT", r.stderr, path)
            self.assertIn(says, r.stderr, path)
            self.assertIsNone(tracker.poll(), "the tracker died on " + path)
        # No job was made of them.
        self.assertEqual(self.kiln("jobs", token=self.tokens["root"]).stdout, jobs_before)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
