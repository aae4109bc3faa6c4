#!/usr/bin/env python3
"""Several trackers, one farm (issue 11): three kiln-tracker processes share
one PostgreSQL database and one artifact folder; agents and the client are
spread across them (each takes the three addresses, its own first).

- A job submitted to one tracker is visible from the others, and agents
  connected to the other trackers measure its batches (relayed through the
  database).
- The tracker that runs the job is killed with SIGKILL mid-job: another
  takes the job over within the job lease, the agents and the client fail
  over along their address lists, the job completes, the artifact fetched
  from a surviving tracker runs, and every trial is recorded exactly once.

- The job's tracker stalls (SIGSTOP) past its job lease: another takes the
  job over; when the first continues, its records are refused (the job's row
  names the new tracker) and it gives the job up; the job completes with
  every trial recorded once.
- The PostgreSQL server restarts mid-job (fast shutdown: every connection
  cut): the tracker reconnects, the job completes with every trial recorded
  once, and the tracker lived through it. (Needs the server's folder,
  KILN_TEST_POSTGRES_DIR, to restart it with scripts/pg-scratch.)

Needs a PostgreSQL server: KILN_TEST_POSTGRES=postgresql://USER@HOST:PORT
(scripts/test starts one); skipped without.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from e2e_test import build_cnn
from farm import Farm

ARGS = None
KEY = "multi-cpu"
SERVER = os.environ.get("KILN_TEST_POSTGRES", "")
SERVER_DIR = os.environ.get("KILN_TEST_POSTGRES_DIR", "")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def psql(url, sql):
    r = subprocess.run(["psql", url, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"psql: {r.stderr}")
    return [line.split("|") for line in r.stdout.splitlines() if line]


@unittest.skipUnless(SERVER, "KILN_TEST_POSTGRES is not set: no PostgreSQL server")
class MultiTracker(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-multi-")
        self.tmp = self.tmpdir.name
        self.farm = Farm(self.tmp, ARGS.bin_dir)
        self.dbname = f"kiln_multi_{os.getpid()}"
        psql(f"{SERVER}/postgres", f"DROP DATABASE IF EXISTS {self.dbname}")
        psql(f"{SERVER}/postgres", f"CREATE DATABASE {self.dbname}")
        self.url = f"{SERVER}/{self.dbname}"
        self.model = os.path.join(self.tmp, "cnn.onnx")
        build_cnn(self.model)

    def tearDown(self):
        self.farm.stop()
        psql(f"{SERVER}/postgres", f"DROP DATABASE IF EXISTS {self.dbname} WITH (FORCE)")
        self.tmpdir.cleanup()

    def start_tracker(self, i, lease_ms=3000):
        port_file = os.path.join(self.tmp, f"port{i}")
        proc = self.farm.start(
            [f"{ARGS.bin_dir}/tracker/kiln-tracker", "--listen", "127.0.0.1:0", "--port-file",
             port_file, "--db", self.url, "--artifacts", os.path.join(self.tmp, "artifacts"),
             "--tracker-id", f"tracker-{i}", "--job-lease-ms", str(lease_ms)], f"tracker{i}.log")
        deadline = time.time() + 30
        port = ""
        while not port:
            self.assertIsNone(proc.poll(), self.farm.log(f"tracker{i}.log"))
            self.assertLess(time.time(), deadline, "tracker did not start")
            time.sleep(0.05)
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
        return proc, "127.0.0.1:" + port

    def kiln(self, *args):
        r = self.farm.kiln(*args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def job_state(self, job, trackers):
        out = self.kiln("job", job, "--tracker", trackers)
        return next((l.split()[1] for l in out.splitlines() if l.startswith("state")), ""), out

    def logs(self):
        return "".join(f"--- {n}\n" + self.farm.log(n) for n in sorted(os.listdir(self.tmp))
                       if n.endswith(".log"))

    def records(self, job):
        (n,), = psql(self.url, f"SELECT COUNT(*) FROM records WHERE job_id = '{job}'")
        return int(n)

    def assert_every_trial_once(self, job, trials):
        """One record per trial, and no config with two final records but the
        ones the tuner's confirmation times again on purpose: per workload at
        most the default and two others (kConfirmTop), each at most 1 + 3
        times (kConfirmRounds)."""
        self.assertEqual(self.records(job), trials, self.logs())
        twice = psql(self.url, "SELECT workload_key, config, COUNT(*) FROM records WHERE job_id = "
                     f"'{job}' AND error_kind NOT IN ('timeout', 'agent_lost', 'invalid_cost', "
                     "'wrong_result') GROUP BY workload_key, config HAVING COUNT(*) > 1")
        per_workload = {}
        for workload, _, count in twice:
            self.assertLessEqual(int(count), 4, twice)
            per_workload[workload] = per_workload.get(workload, 0) + 1
        self.assertTrue(all(n <= 3 for n in per_workload.values()), twice)

    def wait_ended(self, job, trackers):
        deadline = time.time() + 600
        while True:
            state, out = self.job_state(job, trackers)
            if state in ("completed", "failed", "cancelled"):
                return state, out
            self.assertLess(time.time(), deadline, out + self.logs())
            time.sleep(0.5)

    def test_a_stalled_tracker_gives_its_job_up(self):
        trackers = [self.start_tracker(i, lease_ms=1500) for i in range(2)]
        addrs = [a for _, a in trackers]
        both = ",".join(addrs)
        for i in range(2):  # both agents on tracker 1: they go on while tracker 0 is stopped
            self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", addrs[1],
                             "--key", KEY, "--id", f"agent-{i}"], f"agent{i}.log")
        deadline = time.time() + 60
        while "agent-1" not in self.kiln("devices", "--tracker", addrs[1]):
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.2)
        trials = 160
        (target,), = psql(self.url, "SELECT target FROM agents WHERE id = 'agent-1'")
        job = self.kiln("tune", self.model, "--tracker", addrs[0], "--key", KEY, "--trials",
                        str(trials), "--target", target).splitlines()[0].strip()
        deadline = time.time() + 120
        while self.records(job) < 20:
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.1)
        trackers[0][0].send_signal(signal.SIGSTOP)
        deadline = time.time() + 60
        while psql(self.url, f"SELECT tracker_id FROM jobs WHERE id = '{job}'") != [["tracker-1"]]:
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.1)
        time.sleep(1)  # tracker 1 runs the job for a while
        trackers[0][0].send_signal(signal.SIGCONT)
        state, out = self.wait_ended(job, both)
        self.assertEqual(state, "completed", out + self.logs())
        self.assert_every_trial_once(job, trials)
        deadline = time.time() + 30
        while "stopping it here" not in self.farm.log("tracker0.log"):
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.2)
        self.assertIsNone(trackers[0][0].poll(), "tracker 0 died")

    @unittest.skipUnless(SERVER_DIR, "KILN_TEST_POSTGRES_DIR is not set: cannot restart the server")
    def test_the_database_restarts_mid_job(self):
        tracker, addr = self.start_tracker(0)
        self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", addr, "--key",
                         KEY, "--id", "agent-0"], "agent0.log")
        deadline = time.time() + 60
        while "agent-0" not in self.kiln("devices", "--tracker", addr):
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.2)
        trials = 96
        job = self.kiln("tune", self.model, "--tracker", addr, "--key", KEY, "--trials",
                        str(trials)).splitlines()[0].strip()
        deadline = time.time() + 120
        while self.records(job) < 10:
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.1)
        r = subprocess.run([os.path.join(ROOT, "scripts", "pg-scratch"), "restart", SERVER_DIR],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        state, out = self.wait_ended(job, addr)
        self.assertEqual(state, "completed", out + self.logs())
        self.assertIsNone(tracker.poll(), "the tracker died")
        self.assert_every_trial_once(job, trials)

    def test_kill_the_jobs_tracker_and_the_job_completes_through_the_others(self):
        trackers = [self.start_tracker(i) for i in range(3)]
        addrs = [a for _, a in trackers]
        rotated = lambda i: ",".join(addrs[i:] + addrs[:i])  # noqa: E731
        for i in range(3):  # agent i prefers tracker i
            self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", rotated(i),
                             "--key", KEY, "--id", f"agent-{i}"], f"agent{i}.log")
        everyone = rotated(0)
        deadline = time.time() + 60
        while "agent-1" not in self.kiln("devices", "--tracker", addrs[1]):
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.2)

        trials = 96
        out = self.kiln("tune", self.model, "--tracker", everyone, "--key", KEY, "--trials",
                        str(trials))
        job = out.splitlines()[0].strip()
        # Visible from every tracker.
        for a in addrs:
            self.assertIn(job, self.kiln("jobs", "--tracker", a))
        (owner,), = psql(self.url, f"SELECT tracker_id FROM jobs WHERE id = '{job}'")
        self.assertEqual(owner, "tracker-0")

        # Agents of the other trackers measure the job's batches too.
        deadline = time.time() + 120
        while True:
            agents = {a for (a,) in psql(self.url, "SELECT DISTINCT agent_id FROM records WHERE "
                                         f"job_id = '{job}'")}
            if len(agents) >= 2 and len(psql(self.url, "SELECT id FROM records WHERE job_id = "
                                             f"'{job}'")) >= 10:
                break
            self.assertLess(time.time(), deadline, f"records by {agents}\n" + self.logs())
            time.sleep(0.1)

        # Kill the job's tracker mid-job.
        state, out = self.job_state(job, everyone)
        self.assertEqual(state, "tuning", out)
        trackers[0][0].send_signal(signal.SIGKILL)
        trackers[0][0].wait(timeout=10)
        killed_at = time.time()

        # Another tracker takes the job over within the lease.
        survivors = rotated(1)
        deadline = time.time() + 60
        while True:
            (owner,), = psql(self.url, f"SELECT tracker_id FROM jobs WHERE id = '{job}'")
            if owner != "tracker-0":
                break
            self.assertLess(time.time(), deadline, self.logs())
            time.sleep(0.1)
        self.assertIn(owner, ("tracker-1", "tracker-2"))
        taken_over_s = time.time() - killed_at
        self.assertLess(taken_over_s, 15)
        print(f"job {job}: tracker-0 killed, taken over by {owner} after {taken_over_s:.1f} s",
              flush=True)

        state, out = self.wait_ended(job, everyone)  # fails over past the dead tracker
        self.assertEqual(state, "completed", out + self.logs())
        by_agent = psql(self.url, "SELECT agent_id, COUNT(*) FROM records WHERE job_id = "
                        f"'{job}' GROUP BY agent_id ORDER BY agent_id")
        print(f"records by agent: {by_agent}", flush=True)
        self.assert_every_trial_once(job, trials)

        # The artifact, fetched through the survivors, runs.
        art = os.path.join(self.tmp, "cnn.kiln")
        self.kiln("fetch", job, "--tracker", survivors, "-o", art)
        x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)
        np.save(os.path.join(self.tmp, "x.npy"), x)
        out = os.path.join(self.tmp, "out")
        r = subprocess.run([f"{ARGS.bin_dir}/deploy/kiln-run", art, "--input",
                            f"data={self.tmp}/x.npy", "--output-dir", out],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
        ref = ort.InferenceSession(self.model, providers=["CPUExecutionProvider"]).run(
            None, {"data": x})[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
