#!/usr/bin/env python3
"""The tracker's HTTP side with real processes: `kiln-tracker --http` with
--require-auth, an agent, two users' jobs tuned to the end.

Checks: /metrics parsed by prometheus_client's text parser has the queue,
agent, job, measurement, error, expiry and latency families with the values
the farm implies, and needs a token; /api/state shows a user their own jobs
only (an admin all of them) and the agent's health; the tuning curve of a
job; and the status page itself rendered by a real browser (headless
Chromium, --dump-dom after its script ran) shows the agent, both jobs for
the admin, and draws the curve. --screenshot PATH keeps a picture of it.

Skips the browser part (saying so) when no Chromium is installed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from farm import Farm

ARGS = None
KEY = "page-cpu"


def read(path):
    """The stripped text of a file, or "" when there is none yet."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read().strip()


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class StatusPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-page-")
        cls.tmp = cls.tmpdir.name
        cls.farm = Farm(cls.tmp, ARGS.bin_dir)
        cls.tokens = cls.farm.create_tokens([("ana", "user"), ("bo", "user"),
                                             ("board-1", "agent"), ("root", "admin")])
        http_port_file = os.path.join(cls.tmp, "http.port")
        cls.farm.start_tracker(extra=["--require-auth", "--http", "127.0.0.1:0",
                                      "--http-port-file", http_port_file])
        deadline = time.time() + 30
        while not read(http_port_file):
            if time.time() > deadline:
                raise RuntimeError("no HTTP port:\n" + cls.farm.log("tracker.log"))
            time.sleep(0.05)
        cls.http = "http://127.0.0.1:" + read(http_port_file)
        cls.farm.start_agent_with_token(KEY, cls.tokens["board-1"], "board-1")
        deadline = time.time() + 30  # the agent shows on the page
        while "board-1" not in cls.state(cls.tokens["root"]):
            if time.time() > deadline:
                raise RuntimeError("no agent:\n" + cls.farm.log("agent0.log"))
            time.sleep(0.1)
        model = os.path.join(ARGS.source_dir, "models", "small_cnn.onnx")
        cls.jobs = {}
        for user in ("ana", "bo"):
            r = cls.farm.kiln("tune", model, "--tracker", cls.farm.addr, "--key", KEY,
                              "--trials", str(ARGS.trials), "--token", cls.tokens[user])
            if r.returncode != 0:
                raise RuntimeError(r.stdout + r.stderr)
            cls.jobs[user] = r.stdout.splitlines()[0].strip()
        for user, job in cls.jobs.items():
            out = cls.farm.kiln("job", job, "--tracker", cls.farm.addr, "--token",
                                cls.tokens[user]).stdout
            deadline = time.time() + 600
            while not re.search(r"^state\s+completed", out, re.M) and time.time() < deadline:
                time.sleep(0.3)
                out = cls.farm.kiln("job", job, "--tracker", cls.farm.addr, "--token",
                                    cls.tokens[user]).stdout
            if not re.search(r"^state\s+completed", out, re.M):
                raise RuntimeError(f"job {job} did not complete:\n{out}")

    @classmethod
    def state(cls, token):
        req = urllib.request.Request(cls.http + "/api/state")
        req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    @classmethod
    def tearDownClass(cls):
        cls.farm.stop()
        cls.tmpdir.cleanup()

    def get(self, path, token=None):
        req = urllib.request.Request(self.http + path)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()

    def test_1_metrics_parse_and_say_what_the_farm_did(self):
        status, ctype, text = self.get("/metrics", self.tokens["root"])
        self.assertEqual(status, 200)
        self.assertIn("text/plain", ctype)
        samples = {}
        families = {}
        for fam in text_string_to_metric_families(text):
            families[fam.name] = fam.type
            for s in fam.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        for name, kind in [("kiln_measurements", "counter"), ("kiln_lease_expiries", "counter"),
                           ("kiln_measurement_errors", "counter"),
                           ("kiln_batch_latency_seconds", "histogram"),
                           ("kiln_measurements_per_second", "gauge"),
                           ("kiln_queue_length", "gauge"), ("kiln_agents", "gauge"),
                           ("kiln_jobs", "gauge")]:
            self.assertEqual(families.get(name), kind, f"{name}: {families}")
        # Both jobs' trials were measured on the key, nothing is queued,
        # the one agent is healthy, both jobs completed.
        self.assertGreaterEqual(samples[("kiln_measurements_total", (("key", KEY),))],
                                2 * ARGS.trials)
        self.assertEqual(samples[("kiln_queue_length", (("key", KEY),))], 0)
        self.assertEqual(samples[("kiln_agents", (("key", KEY), ("state", "healthy")))], 1)
        self.assertEqual(samples[("kiln_jobs", (("state", "completed"),))], 2)
        count = samples[("kiln_batch_latency_seconds_count", ())]
        self.assertGreater(count, 0)
        self.assertEqual(samples[("kiln_batch_latency_seconds_bucket", (("le", "+Inf"),))], count)
        # Without a token, or with a wrong one: 401.
        for token in (None, "kiln_" + "0" * 64):
            with self.assertRaises(urllib.error.HTTPError) as e:
                self.get("/metrics", token)
            self.assertEqual(e.exception.code, 401)
        # Every user's counts are an admin's to read; an agent's token reads
        # nothing of the farm.
        for path, token in (("/metrics", "ana"), ("/metrics", "board-1"),
                            ("/api/state", "board-1")):
            with self.assertRaises(urllib.error.HTTPError) as e:
                self.get(path, self.tokens[token])
            self.assertEqual(e.exception.code, 403, (path, token))

    def test_2_state_shows_each_user_their_own_jobs(self):
        _, _, text = self.get("/api/state", self.tokens["ana"])
        state = json.loads(text)
        self.assertEqual([j["id"] for j in state["jobs"]], [self.jobs["ana"]])
        job = state["jobs"][0]
        self.assertEqual(job["state"], "completed")
        self.assertEqual(job["trials_done"], ARGS.trials)
        self.assertGreater(job["best_latency_ms"], 0)
        # The whole model as the board measured it after the search.
        board = job["end_to_end"]
        self.assertGreater(board["untuned_ms"], 0, job)
        self.assertGreater(board["tuned_ms"], 0, job)
        self.assertIn("returned_tuned", board)
        self.assertTrue(all(t["best_ms"] > 0 for t in job["tasks"]), job["tasks"])
        self.assertEqual([d["id"] for d in state["devices"]], ["board-1"])
        self.assertEqual(state["devices"][0]["health"], "healthy")
        _, _, text = self.get("/api/state", self.tokens["root"])
        self.assertEqual(sorted(j["id"] for j in json.loads(text)["jobs"]),
                         sorted(self.jobs.values()))
        # Another user's curve is as unknown as a missing job.
        with self.assertRaises(urllib.error.HTTPError) as e:
            self.get(f"/api/jobs/{self.jobs['bo']}/curve", self.tokens["ana"])
        self.assertEqual(e.exception.code, 404)
        _, _, text = self.get(f"/api/jobs/{self.jobs['ana']}/curve", self.tokens["ana"])
        points = json.loads(text)["points"]
        estimates = [p["estimate_ms"] for p in points if p["estimate_ms"] > 0]
        self.assertTrue(estimates, points)
        # The best so far never gets worse along the curve.
        self.assertEqual(estimates, sorted(estimates, reverse=True))
        # `kiln job` sets each task's GFLOP/s against the FMA peak the key's
        # agent measured at start.
        out = self.farm.kiln("job", self.jobs["ana"], "--tracker", self.farm.addr, "--token",
                             self.tokens["ana"]).stdout
        self.assertRegex(out, r"peak +[0-9.]+ GFLOP/s \(FMA peak its agents measured\)")
        self.assertRegex(out, r"GFLOPS +OF PEAK")
        self.assertRegex(out, r"conv2d +x1 .* [0-9.]+ +[0-9]+%")

    def test_3_the_page_renders_in_a_browser(self):
        browser = chromium()
        if browser is None:
            self.skipTest("no Chromium (apt-get install chromium)")
        url = f"{self.http}/?token={self.tokens['root']}"
        args = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--virtual-time-budget=8000", f"--user-data-dir={self.tmp}/chromium"]
        r = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True,
                           timeout=180)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        dom = r.stdout
        self.assertIn("kiln farm", dom)
        self.assertIn("board-1", dom)
        self.assertIn("healthy", dom)
        for job in self.jobs.values():
            self.assertIn(job, dom)
        self.assertIn("measurements/s", dom)
        self.assertIn("<polyline", dom)  # the tuning curve was drawn
        self.assertIn("conv2d", dom)     # a task row
        if ARGS.screenshot:
            subprocess.run(args + ["--window-size=1400,1000", f"--screenshot={ARGS.screenshot}",
                                   url], capture_output=True, timeout=180, check=True)
        # Without a token the page says it cannot read the farm.
        r = subprocess.run(args + ["--dump-dom", self.http + "/"], capture_output=True, text=True,
                           timeout=180)
        self.assertIn("cannot read the farm: 401", r.stdout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--screenshot", default="", help="save the page as PNG here")
    parser.add_argument("--trials", type=int, default=12, help="trials of each job")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
