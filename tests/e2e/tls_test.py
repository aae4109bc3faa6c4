#!/usr/bin/env python3
"""TLS with real processes on loopback: certificates made with the openssl
command (a test CA, the tracker's certificate for 127.0.0.1, an agent's
client certificate, and an unrelated CA), a tracker serving TLS, an agent and
the CLI that trust the CA.

Checks: a job is tuned, fetched and its artifact verified over TLS; a client
that trusts another CA, and a plaintext client, cannot talk to the tracker;
with --tls-client-ca an agent without a client certificate is refused and one
with a certificate signed by that CA is served.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import unittest

from e2e_test import build_cnn
from farm import Farm

ARGS = None
KEY = "tls-cpu"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d):
    """ca.pem/ca.key, server.pem/server.key (127.0.0.1), agent.pem/agent.key,
    and other-ca.pem, an unrelated CA."""
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                f"/CN=kiln test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, ext in (("server", ["-extfile", "san.ext"]), ("agent", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=kiln test {name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", *ext, cwd=d)


class Tls(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-tls-")
        self.tmp = self.tmpdir.name
        make_pki(self.tmp)
        self.farm = Farm(self.tmp, ARGS.bin_dir)

    def tearDown(self):
        self.farm.stop()
        self.tmpdir.cleanup()

    def pem(self, name):
        return os.path.join(self.tmp, name)

    def kiln(self, *args, ca="ca.pem"):
        extra = ["--tls-ca", self.pem(ca)] if ca else []
        return self.farm.kiln(*args, "--tracker", self.farm.addr, *extra)

    def agent(self, log, *extra):
        return self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker",
                                self.farm.addr, "--key", KEY, "--tls-ca", self.pem("ca.pem"),
                                *extra], log)

    def test_a_job_over_tls_and_clients_that_do_not_trust_it(self):
        self.farm.start_tracker(extra=["--tls-cert", self.pem("server.pem"), "--tls-key",
                                       self.pem("server.key")])
        self.agent("agent0.log")
        deadline = time.time() + 30
        while KEY not in self.kiln("devices").stdout:
            self.assertLess(time.time(), deadline, self.farm.log("agent0.log"))
            time.sleep(0.2)
        model = os.path.join(self.tmp, "cnn.onnx")
        build_cnn(model)
        r = self.kiln("tune", model, "--key", KEY, "--trials", "8", "--wait")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.farm.log("tracker.log"))
        job = r.stdout.splitlines()[0].strip()
        art = os.path.join(self.tmp, "cnn.kiln")
        r = self.kiln("fetch", job, "-o", art)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(os.path.getsize(art), 0)
        # Another CA's client, and a plaintext one, get nowhere.
        r = self.kiln("jobs", ca="other-ca.pem")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("does not answer over TLS", r.stderr)
        r = self.kiln("jobs", ca=None)
        self.assertNotEqual(r.returncode, 0)

    def test_mutual_tls_for_agents(self):
        self.farm.start_tracker(extra=["--tls-cert", self.pem("server.pem"), "--tls-key",
                                       self.pem("server.key"), "--tls-client-ca",
                                       self.pem("ca.pem")])
        # Without a client certificate: refused, and says why.
        bare = self.agent("bare.log", "--id", "bare")
        deadline = time.time() + 30
        while "client certificate" not in self.farm.log("bare.log"):
            self.assertLess(time.time(), deadline, self.farm.log("bare.log"))
            time.sleep(0.2)
        bare.kill()
        self.agent("agent0.log", "--id", "certified", "--tls-cert", self.pem("agent.pem"),
                   "--tls-key", self.pem("agent.key"))
        deadline = time.time() + 30
        while "certified" not in self.kiln("devices").stdout:
            self.assertLess(time.time(), deadline, self.farm.log("agent0.log"))
            time.sleep(0.2)
        self.assertNotIn("bare", self.kiln("devices").stdout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
