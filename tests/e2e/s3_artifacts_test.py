#!/usr/bin/env python3
"""The artifact store on an S3 object store (issue 11, item 3), against a real
S3 server on loopback: moto's server (`moto.server.ThreadedMotoServer`, the
S3 REST API over HTTP; MinIO is neither in Debian nor on PyPI as a server).

- A tracker with `--artifacts s3://BUCKET/PREFIX` tunes and compiles a job:
  the uploaded model and the compiled module are objects of the bucket,
  under their SHA-256.
- A tracker on another (empty) local cache serves `kiln fetch` of that job:
  the module is downloaded from the bucket, its checksum verified, and the
  fetched bytes are the module's.
- A module whose object in the bucket was replaced by other bytes is refused
  (DATA_LOSS, "corrupt") by a tracker that has to download it.
- An upload no job uses is collected from the bucket, not only from the
  tracker's local copy.
(moto's server does not check request signatures; the signing is checked
against AWS's published example in tests/storage/s3_test.cc.)
"""
import argparse
import hashlib
import os
import socket
import sqlite3
import sys
import tempfile
import time
import unittest

from e2e_test import build_cnn
from farm import Farm

ARGS = None
KEY = "s3-cpu"
BUCKET = "kiln-artifacts"
PREFIX = "farm-a"

try:
    import boto3
    from moto.server import ThreadedMotoServer
    HAVE_MOTO = True
except ImportError:
    HAVE_MOTO = False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(HAVE_MOTO, "moto[server] and boto3 are not installed")
class S3Artifacts(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-s3-")
        self.tmp = self.tmpdir.name
        port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="kiln", aws_secret_access_key="kiln-secret")
        self.s3.create_bucket(Bucket=BUCKET)
        self.farm = Farm(self.tmp, ARGS.bin_dir)
        self.farm.artifacts = f"s3://{BUCKET}/{PREFIX}"
        self.model = os.path.join(self.tmp, "cnn.onnx")
        build_cnn(self.model)

    def tearDown(self):
        self.farm.stop()
        self.server.stop()
        self.tmpdir.cleanup()

    def env(self, cache):
        return {"AWS_ACCESS_KEY_ID": "kiln", "AWS_SECRET_ACCESS_KEY": "kiln-secret",
                "KILN_S3_ENDPOINT": self.endpoint,
                "KILN_ARTIFACT_CACHE": os.path.join(self.tmp, cache)}

    def restart_tracker(self, cache, log):
        self.tracker.terminate()
        self.tracker.wait(timeout=30)
        self.tracker = self.farm.start_tracker(self.farm.addr, log, env=self.env(cache))

    def fetch(self, job, name):
        out = os.path.join(self.tmp, name)
        r = self.farm.kiln("fetch", job, "--tracker", self.farm.addr, "-o", out)
        return r, out

    def bucket_keys(self):
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX + "/")
        return {o["Key"] for o in listed.get("Contents", [])}

    def test_an_unused_upload_is_collected_from_the_bucket_too(self):
        # The upload goes in; the submit is refused (a key past 256 bytes),
        # so no job uses the model, and the collector (grace 3 s, every 1 s)
        # deletes its object from the bucket, not just the local copy.
        self.tracker = self.farm.start_tracker(
            env=self.env("cache-gc"), extra=["--model-grace-s", "3", "--model-gc-interval-s", "1"])
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", "k" * 300,
                           "--trials", "8")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        with open(self.model, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        key = f"{PREFIX}/{sha[:2]}/{sha}"
        self.assertIn(key, self.bucket_keys())  # uploaded, inside its grace
        deadline = time.time() + 30
        while key in self.bucket_keys() and time.time() < deadline:
            time.sleep(0.2)
        self.assertNotIn(key, self.bucket_keys(), self.farm.log("tracker.log"))
        self.assertIn(f"collected model {sha}", self.farm.log("tracker.log"))

    def test_modules_live_in_the_bucket_and_are_checked_on_the_way_back(self):
        self.tracker = self.farm.start_tracker(env=self.env("cache-a"))
        self.farm.start_agent(KEY, 0)
        self.farm.wait_devices(KEY)
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", KEY,
                           "--trials", "8")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        job = r.stdout.splitlines()[0].strip()
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        with sqlite3.connect(self.farm.db) as c:
            (model_sha, module_sha), = c.execute(
                "SELECT model_sha256, artifact_sha256 FROM jobs WHERE id = ?", (job,)).fetchall()
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=PREFIX + "/")
        keys = {o["Key"] for o in listed.get("Contents", [])}
        for sha in (model_sha, module_sha):
            self.assertIn(f"{PREFIX}/{sha[:2]}/{sha}", keys)
        body = self.s3.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{module_sha[:2]}/{module_sha}")
        self.assertEqual(hashlib.sha256(body["Body"].read()).hexdigest(), module_sha)

        # Another host's tracker (an empty cache) serves the module from the bucket.
        self.restart_tracker("cache-b", "tracker-b.log")
        r, path = self.fetch(job, "b.kiln")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + self.farm.log("tracker-b.log"))
        with open(path, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), module_sha)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "cache-b", module_sha[:2],
                                                    module_sha)))

        # Bytes swapped in the bucket: refused, not served.
        self.s3.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{module_sha[:2]}/{module_sha}",
                           Body=b"not the module")
        self.restart_tracker("cache-c", "tracker-c.log")
        r, path = self.fetch(job, "c.kiln")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("corrupt", r.stderr + self.farm.log("tracker-c.log"))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "cache-c", module_sha[:2],
                                                     module_sha)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
