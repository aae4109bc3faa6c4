"""The processes of one end-to-end test farm in a temporary folder: a real
kiln-tracker on loopback, kiln-agent processes, and the kiln CLI."""
import os
import subprocess
import time


class Farm:
    def __init__(self, tmp, bin_dir):
        self.tmp = tmp
        self.bin = bin_dir
        self.db = os.path.join(tmp, "kiln.db")
        self.artifacts = os.path.join(tmp, "artifacts")
        self.procs = []

    def start(self, cmd, log, env=None):
        """Starts a process logging to `log`; `env`: variables added to ours.
        A kiln-tracker or kiln-agent asked for a fault (a KILN_TEST_*
        variable in `env`) is its -faults twin: the released programs have
        no fault hooks (tests/faults/)."""
        if any(k.startswith("KILN_TEST_") for k in (env or {})) and \
                os.path.basename(cmd[0]) in ("kiln-tracker", "kiln-agent"):
            cmd = [cmd[0] + "-faults", *cmd[1:]]
        with open(os.path.join(self.tmp, log), "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                    env={**os.environ, **(env or {})})
        self.procs.append(proc)
        return proc

    def start_tracker(self, listen="127.0.0.1:0", log="tracker.log", extra=(), env=None):
        """Starts kiln-tracker, waits for its port file and sets self.addr."""
        port_file = os.path.join(self.tmp, "port")
        if os.path.exists(port_file):
            os.remove(port_file)
        proc = self.start([f"{self.bin}/tracker/kiln-tracker", "--listen", listen,
                           "--port-file", port_file, "--db", self.db,
                           "--artifacts", self.artifacts, *extra], log, env)
        deadline = time.time() + 30
        while True:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    port = f.read().strip()
                if port:
                    break
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("tracker did not start:\n" + self.log(log))
            time.sleep(0.05)
        self.addr = "127.0.0.1:" + port
        return proc

    def create_token(self, user, role="user"):
        """`kiln-tracker tokens create` on the farm's database; the token."""
        r = subprocess.run([f"{self.bin}/tracker/kiln-tracker", "tokens", "create", "--db",
                            self.db, "--user", user, "--role", role],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("tokens create failed: " + r.stderr)
        return r.stdout.strip()

    def create_tokens(self, users):
        """Tokens for [(user, role)]: {user: token}."""
        return {user: self.create_token(user, role) for user, role in users}

    def start_agent_with_token(self, key, token, agent_id=None, log="agent0.log"):
        """An agent that presents `token` (from a 0600 file, --token-file);
        with no `agent_id` it is known by its token's user."""
        token_file = os.path.join(self.tmp, f"{log}.token")
        with open(token_file, "w") as f:
            f.write(token + "\n")
        os.chmod(token_file, 0o600)
        ident = ["--id", agent_id] if agent_id else []
        return self.start([f"{self.bin}/device_agent/kiln-agent", "--tracker", self.addr,
                           "--key", key, *ident, "--token-file", token_file], log)

    def start_agent(self, key, i, env=None, log=None):
        return self.start([f"{self.bin}/device_agent/kiln-agent", "--tracker", self.addr,
                           "--key", key, "--id", f"agent-{i}"], log or f"agent{i}.log", env)

    def wait_job(self, job, timeout=300):
        """Waits until the job has ended; returns `kiln job`'s output and its state."""
        deadline = time.time() + timeout
        while True:
            out = self.kiln("job", job, "--tracker", self.addr).stdout
            state = next((l.split()[1] for l in out.splitlines() if l.startswith("state")), "")
            if state in ("completed", "failed", "cancelled") or time.time() > deadline:
                return out, state
            time.sleep(0.2)

    def log(self, name):
        with open(os.path.join(self.tmp, name)) as f:
            return f.read()[-4000:]

    def kiln(self, *args, timeout=600):
        return subprocess.run([f"{self.bin}/cli/kiln", *args], capture_output=True, text=True,
                              timeout=timeout)

    def wait_devices(self, key, n=1):
        """Waits until `kiln devices` lists n agents of `key` that are not gone
        (a log the farm starts from lists its earlier agents too); returns its
        output."""
        deadline = time.time() + 30
        while time.time() < deadline:
            out = self.kiln("devices", "--tracker", self.addr).stdout
            if sum(key in l and " gone " not in l for l in out.splitlines()) >= n:
                return out
            time.sleep(0.2)
        raise RuntimeError("agents did not register:\n" + self.log("agent0.log"))

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
