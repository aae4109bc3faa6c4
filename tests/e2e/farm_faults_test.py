#!/usr/bin/env python3
"""Fault tests of the farm with real processes on loopback: each test starts
its own kiln-tracker (fresh SQLite file) and kiln-agent processes, injects a
fault, and checks that the job ends as it must, every trial is recorded
exactly once, and the tracker lives. The faults are asked for by KILN_TEST_*
variables, which only the -faults twins of the programs read
(tests/faults/; tests/e2e/farm.py starts those when a test sets one).

- A model whose final compile crashes the compiler: the job fails with the
  reason, the tracker keeps serving, and a restart on the same database comes
  up cleanly without resuming the job. (No model at hand crashes today's
  compiler, so the tracker's compile worker is told to abort by the test hook
  KILN_TEST_CRASH_COMPILE.)
- An agent that reports impossible costs (NaN, through KILN_TEST_LIE_COSTS in
  its measuring worker) beside an honest one: its results become
  `invalid_cost` records of that agent, it is quarantined, and the job
  completes on the honest agent.
- An agent that connects again with the same identity while its old session
  is still open (the old process frozen with SIGSTOP, its stream half-open):
  the old session ends, its leases go back to the queue, and the new one's are
  untouched; the job completes with every trial recorded once.
- An agent whose results are wrong (a faulty board: KILN_TEST_WRONG_RESULTS
  makes its verification fail) beside an honest one: its `wrong_result`
  records are its own, it is quarantined, the configs it failed are measured
  again, and the job completes.
- A candidate that never ends (KILN_TEST_HANG_WORKER: the third of every
  batch loops forever in the measuring worker), with a 2 s candidate timeout:
  `timeout` records, the worker is replaced, and the job completes.
- An agent killed with SIGKILL mid-batch beside one whose measuring worker
  crashes on one candidate of every batch (KILN_TEST_CRASH_WORKER): the dead
  agent's leases go back to the queue, the crashes are `runtime` records of
  the other, and the job completes with every trial recorded once.
- An agent whose connection is cut by the network (a TCP proxy between it and
  the tracker): reset mid-job and refused for a while, or gone silent for good
  (every byte swallowed: only the tracker's heartbeat check and the agent's
  keepalive can tell). The tracker requeues the agent's leases, the agent
  comes back on a new connection, and the job completes with every trial
  recorded once.
"""
import argparse
import os
import signal
import sqlite3
import sys
import tempfile
import time
import unittest

from e2e_test import build_cnn
from farm import Farm
from proxy import Proxy

ARGS = None
KEY = "faults-cpu"


class FarmFaults(unittest.TestCase):
    def setUp(self):
        self.tmpdir = tempfile.TemporaryDirectory(prefix="kiln-faults-")
        self.tmp = self.tmpdir.name
        self.farm = Farm(self.tmp, ARGS.bin_dir)
        self.model = os.path.join(self.tmp, "cnn.onnx")
        build_cnn(self.model)

    def tearDown(self):
        self.farm.stop()
        self.tmpdir.cleanup()

    def submit(self, trials, *extra):
        r = self.farm.kiln("tune", self.model, "--tracker", self.farm.addr, "--key", KEY,
                           "--trials", str(trials), *extra)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout.splitlines()[0].strip()

    def wait_for(self, what, ready, timeout=120):
        deadline = time.time() + timeout
        while not ready():
            self.assertLess(time.time(), deadline,
                            f"{what}:\n" + self.farm.log("tracker.log") + self.farm.log("agent0.log"))
            time.sleep(0.05)

    def start_behind_proxy(self):
        """A tracker and one agent that reaches it through a proxy; a job of
        40 trials under way. Returns the proxy and the job."""
        self.farm.start_tracker()
        host, port = self.farm.addr.rsplit(":", 1)
        proxy = Proxy(host, int(port))
        self.addCleanup(proxy.close)
        self.farm.start([f"{ARGS.bin_dir}/device_agent/kiln-agent", "--tracker", proxy.addr,
                         "--key", KEY, "--id", "agent-0"], "agent0.log")
        self.farm.wait_devices(KEY)
        job = self.submit(40)
        self.wait_for("no record", lambda: self.query("SELECT 1 FROM records WHERE job_id = ?", job))
        return proxy, job

    def query(self, sql, *args):
        with sqlite3.connect(self.farm.db) as c:
            return c.execute(sql, args).fetchall()

    def records_by_agent(self, job):
        """{"AGENT:ERROR_KIND": records} of the job."""
        return dict(self.query(
            "SELECT agent_id || ':' || error_kind, COUNT(*) FROM records WHERE job_id = ? "
            "GROUP BY agent_id, error_kind", job))

    def assert_every_trial_once(self, job, trials):
        """The job stored one record per trial, each config measured to an end once."""
        (total,), = self.query("SELECT COUNT(*) FROM records WHERE job_id = ?", job)
        self.assertEqual(total, trials)
        # A config has at most one final record (a transient failure may come
        # before it).
        rows = self.query(
            "SELECT workload_key, config, COUNT(*) FROM records WHERE job_id = ? AND error_kind "
            "NOT IN ('timeout', 'agent_lost', 'invalid_cost', 'wrong_result') "
            "GROUP BY workload_key, config "
            "HAVING COUNT(*) > 1", job)
        self.assertEqual(rows, [])

    def test_compiler_crash_fails_the_job_not_the_tracker(self):
        tracker = self.farm.start_tracker(env={"KILN_TEST_CRASH_COMPILE": "1"})
        self.farm.start_agent(KEY, 0)
        self.farm.wait_devices(KEY)
        job = self.submit(8)
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "failed", out + self.farm.log("tracker.log"))
        self.assertIn("the compiler crashed (signal 6", out)
        self.assertIsNone(tracker.poll(), "the tracker died")
        self.assertEqual(self.farm.kiln("jobs", "--tracker", self.farm.addr).returncode, 0)
        self.assert_every_trial_once(job, 8)
        # A restart on the same database comes up and does not resume the job.
        tracker.terminate()
        tracker.wait(timeout=30)
        addr = self.farm.addr
        self.farm.start_tracker(addr, "tracker-restarted.log")
        out, state = self.farm.wait_job(job, timeout=5)
        self.assertEqual(state, "failed", out)
        self.assertNotIn("resumed", self.farm.log("tracker-restarted.log"))

    def test_agent_with_impossible_costs_is_quarantined_and_the_job_completes(self):
        self.farm.start_tracker()
        self.farm.start_agent(KEY, 0, env={"KILN_TEST_LIE_COSTS": "nan"})
        self.farm.wait_devices(KEY)
        job = self.submit(24)
        # The liar gets the first batches alone; then an honest agent joins.
        deadline = time.time() + 120
        while not self.query("SELECT 1 FROM records WHERE error_kind = 'invalid_cost'"):
            self.assertLess(time.time(), deadline, self.farm.log("tracker.log"))
            time.sleep(0.05)
        self.farm.start_agent(KEY, 1)
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 24)
        by_agent = self.records_by_agent(job)
        self.assertGreater(by_agent.get("agent-0:invalid_cost", 0), 0, by_agent)
        self.assertNotIn("agent-0:none", by_agent)
        self.assertGreater(by_agent.get("agent-1:none", 0), 0, by_agent)
        devices = self.farm.kiln("devices", "--tracker", self.farm.addr).stdout
        line = next(l for l in devices.splitlines() if l.startswith("agent-0"))
        self.assertIn("quarantined until", line)
        self.assertIn("impossible costs in a row", line)

    def test_reconnect_with_the_same_identity_replaces_the_old_session(self):
        self.farm.start_tracker()
        old = self.farm.start_agent(KEY, 0)
        self.farm.wait_devices(KEY)
        job = self.submit(40)
        deadline = time.time() + 120
        while not self.query("SELECT 1 FROM records WHERE job_id = ?", job):
            self.assertLess(time.time(), deadline, self.farm.log("tracker.log"))
            time.sleep(0.05)
        # Frozen, its stream stays open; the same identity connects again.
        old.send_signal(signal.SIGSTOP)
        self.farm.start_agent(KEY, 0, log="agent0-again.log")
        out, state = self.farm.wait_job(job)
        old.kill()
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 40)
        self.assertIn("connected again: ending its previous session", self.farm.log("tracker.log"))

    def test_an_agent_with_wrong_results_is_quarantined_and_the_job_completes(self):
        self.farm.start_tracker()
        self.farm.start_agent(KEY, 0, env={"KILN_TEST_WRONG_RESULTS": "1"})
        self.farm.wait_devices(KEY)
        job = self.submit(40)
        self.wait_for("no wrong result", lambda: self.query(
            "SELECT 1 FROM records WHERE error_kind = 'wrong_result'"))
        self.farm.start_agent(KEY, 1)
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 40)
        by_agent = self.records_by_agent(job)
        self.assertGreater(by_agent.get("agent-0:wrong_result", 0), 0, by_agent)
        self.assertNotIn("agent-0:none", by_agent)
        self.assertGreater(by_agent.get("agent-1:none", 0), 0, by_agent)
        # A config the faulty board failed was measured again.
        again = self.query(
            "SELECT COUNT(*) FROM records a JOIN records b ON a.config = b.config AND "
            "a.workload_key = b.workload_key WHERE a.job_id = ? AND b.job_id = ? AND "
            "a.error_kind = 'wrong_result' AND b.error_kind = 'none'", job, job)
        self.assertGreater(again[0][0], 0)
        devices = self.farm.kiln("devices", "--tracker", self.farm.addr).stdout
        line = next(l for l in devices.splitlines() if l.startswith("agent-0"))
        self.assertIn("quarantined until", line)

    def test_a_candidate_that_never_ends_times_out_and_the_job_completes(self):
        self.farm.start_tracker()
        self.farm.start_agent(KEY, 0, env={"KILN_TEST_HANG_WORKER": "2"})
        self.farm.wait_devices(KEY)
        job = self.submit(24, "--candidate-timeout", "2s")
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 24)
        (timeouts,), = self.query(
            "SELECT COUNT(*) FROM records WHERE job_id = ? AND error_kind = 'timeout'", job)
        self.assertGreater(timeouts, 0, self.farm.log("agent0.log"))

    def test_an_agent_killed_mid_batch_and_one_whose_candidates_crash(self):
        self.farm.start_tracker()
        self.farm.start_agent(KEY, 0, env={"KILN_TEST_CRASH_WORKER": "1"})
        doomed = self.farm.start_agent(KEY, 1)
        self.farm.wait_devices(KEY, 2)
        job = self.submit(40)
        self.wait_for("agent-1 measured nothing", lambda: self.query(
            "SELECT 1 FROM records WHERE job_id = ? AND agent_id = 'agent-1'", job))
        doomed.kill()  # SIGKILL: it holds a batch most of the time
        self.wait_for("the tracker did not see agent-1 go",
                      lambda: "agent 'agent-1' disconnected" in self.farm.log("tracker.log"))
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 40)
        crashes = self.query("SELECT error_message FROM records WHERE job_id = ? AND agent_id = "
                             "'agent-0' AND error_kind = 'runtime'", job)
        self.assertTrue(crashes, self.farm.log("agent0.log"))
        self.assertIn("crashed the measurement worker", crashes[0][0])

    def test_a_connection_reset_mid_job_and_refused_for_a_while(self):
        proxy, job = self.start_behind_proxy()
        proxy.refuse(True)
        proxy.reset()
        self.wait_for("the tracker did not see the agent go",
                      lambda: "agent 'agent-0' disconnected" in self.farm.log("tracker.log"))
        self.wait_for("the agent did not try again",
                      lambda: "retrying in" in self.farm.log("agent0.log")
                      or "reconnecting in" in self.farm.log("agent0.log"))
        proxy.refuse(False)
        out, state = self.farm.wait_job(job)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log"))
        self.assert_every_trial_once(job, 40)
        self.assertGreaterEqual(proxy.accepted, 2)  # it came back on a new connection

    def test_a_connection_that_goes_silent_for_good(self):
        proxy, job = self.start_behind_proxy()
        proxy.blackhole()
        # The tracker hears no heartbeat and ends the session (its leases go
        # back to the queue); the agent's keepalive finds the link dead and
        # it dials again, through a new connection that works.
        self.wait_for("the tracker did not end the silent session",
                      lambda: "missed its heartbeats" in self.farm.log("tracker.log"), timeout=60)
        out, state = self.farm.wait_job(job, timeout=180)
        self.assertEqual(state, "completed", out + self.farm.log("tracker.log")
                         + self.farm.log("agent0.log"))
        self.assert_every_trial_once(job, 40)
        self.assertGreaterEqual(proxy.accepted, 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])
