#!/usr/bin/env python3
"""A model tuned for an ARM board through the farm, timed on that board
against its untuned build and onnxruntime (issue 42): not part of CI; run it
wherever a board is reachable and record its table in docs/results.md.

On a real board (kiln-board running there, reachable over ssh, with
python3, numpy and onnxruntime installed there):

    python3 bench/arm_board.py --board rpi4:9190 --board-key-file board.key \\
        --ssh pi@rpi4 --models resnet18,mobilenet_v2 --trials 1000 --threads 4

The script starts a tracker and a `kiln-agent --board` here, tunes each
model for the board's key (`kiln tune --threads T --wait`), compiles the
untuned build for the same target (`kiln compile` with an empty log), copies
both artifacts, the model and one input to the board (scp, under
--remote-dir, which must hold the AArch64 kiln-run and libkiln_runtime.so:
docs/operator-guide.md "Boards"), and there times untuned, tuned and
onnxruntime in turn, in --blocks blocks of --repeat runs each (kiln-run
--repeat, onnxruntime's own loop). Prints one row per model: the medians,
tuned vs untuned and tuned vs onnxruntime (each the median of the blocks'
ratios).

`--qemu` runs the same path on this machine, the AArch64 build under
qemu-aarch64 (a dry run of the script: its figures mean nothing, and
onnxruntime is not run).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ORT_TIMER = r'''
import sys, time, numpy as np, onnxruntime as ort
model, inp, threads, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
o = ort.SessionOptions()
o.intra_op_num_threads = threads
s = ort.InferenceSession(model, o, providers=["CPUExecutionProvider"])
x = np.load(inp)
feed = {s.get_inputs()[0].name: x}
s.run(None, feed)
t = []
for _ in range(repeat):
    a = time.perf_counter(); s.run(None, feed); t.append(time.perf_counter() - a)
print("median_ms=%.6f" % (sorted(t)[len(t) // 2] * 1e3))
'''


def qemu_prefix():
    return "/" if os.path.exists("/lib/ld-linux-aarch64.so.1") else "/usr/aarch64-linux-gnu"


class Board:
    """Where artifacts run: a real board over ssh, or qemu here."""

    def __init__(self, args, build):
        self.args = args
        self.qemu = args.qemu
        self.dir = args.remote_dir
        if self.qemu:
            self.dir = tempfile.mkdtemp(prefix="kiln-arm-board-")
            for f in ("deploy/kiln-run", "deploy/libkiln_runtime.so"):
                shutil.copy(os.path.join(build, "aarch64", f), self.dir)

    def copy(self, path):
        name = os.path.basename(path)
        if self.qemu:
            shutil.copy(path, os.path.join(self.dir, name))
        else:
            subprocess.run(["scp", "-q", path, f"{self.args.ssh}:{self.dir}/{name}"], check=True)
        return f"{self.dir}/{name}"

    def run(self, argv, env=""):
        if self.qemu:
            cmd = ["qemu-aarch64", "-L", qemu_prefix(), *argv]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=self.dir,
                                 env={**os.environ, **dict(e.split("=") for e in env.split())})
        else:
            remote = " ".join([f"cd {self.dir} &&", env, "LD_LIBRARY_PATH=.", *argv])
            out = subprocess.run(["ssh", self.args.ssh, remote], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed on the board:\n{out.stdout}{out.stderr}")
        m = re.search(r"median_ms=([0-9.]+)", out.stdout)
        return float(m.group(1))


def kiln(build, *args):
    r = subprocess.run([f"{build}/cli/kiln", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"kiln {args[0]} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--board", help="HOST:PORT of the board's kiln-board")
    p.add_argument("--board-key-file")
    p.add_argument("--ssh", help="USER@HOST of the board, for scp and ssh")
    p.add_argument("--remote-dir", default="kiln", help="the folder on the board (default ~/kiln)")
    p.add_argument("--qemu", action="store_true", help="a dry run here, under qemu-aarch64")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="resnet18", help="models of tests/models, or .onnx paths")
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--threads", type=int, default=0, help="0: every core of the board")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--blocks", type=int, default=5)
    args = p.parse_args()
    if not args.qemu and not (args.board and args.board_key_file and args.ssh):
        p.error("--board, --board-key-file and --ssh (or --qemu for a dry run)")
    tmp = tempfile.mkdtemp(prefix="kiln-arm-bench-")
    procs = []
    try:
        key_file = args.board_key_file
        board_addr = args.board
        if args.qemu:
            key_file = os.path.join(tmp, "board.key")
            with open(key_file, "w") as f:
                f.write("a dry run's board key, 32 bytes+\n")
            log = open(os.path.join(tmp, "board.log"), "w")
            procs.append(subprocess.Popen(
                ["qemu-aarch64", "-L", qemu_prefix(), f"{args.build}/aarch64/board/kiln-board",
                 "--listen", "127.0.0.1:0", "--key-file", key_file], stdout=log, stderr=log))
            for _ in range(600):
                m = re.search(r"listening on port (\d+)", open(log.name).read())
                if m:
                    break
                time.sleep(0.1)
            board_addr = f"127.0.0.1:{m.group(1)}"
        port_file = os.path.join(tmp, "port")
        tlog = open(os.path.join(tmp, "tracker.log"), "w")
        procs.append(subprocess.Popen(
            [f"{args.build}/tracker/kiln-tracker", "--listen", "127.0.0.1:0", "--port-file",
             port_file, "--db", os.path.join(tmp, "kiln.db"), "--artifacts",
             os.path.join(tmp, "artifacts")], stdout=tlog, stderr=tlog))
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            time.sleep(0.05)
        tracker = "127.0.0.1:" + open(port_file).read().strip()
        alog = open(os.path.join(tmp, "agent.log"), "w")
        procs.append(subprocess.Popen(
            [f"{args.build}/device_agent/kiln-agent", "--tracker", tracker, "--key", "arm",
             "--board", board_addr, "--board-key-file", key_file], stdout=alog, stderr=alog))
        target = None
        for _ in range(600):
            m = re.search(r"target (llvm .*), tracker \S+\n", open(alog.name).read())
            if m:
                target = m.group(1)
                break
            time.sleep(0.1)
        if target is None:
            raise RuntimeError("the agent did not describe the board:\n" + open(alog.name).read())

        zoo = os.path.join(tmp, "zoo")
        board = Board(args, args.build)
        rows = []
        for name in args.models.split(","):
            model = name if name.endswith(".onnx") else os.path.join(zoo, name + ".onnx")
            if not os.path.exists(model):
                subprocess.run([sys.executable, os.path.join(ROOT, "tests/models/make_models.py"),
                                zoo], check=True, capture_output=True)
            label = os.path.splitext(os.path.basename(model))[0]
            tune = ["tune", model, "--tracker", tracker, "--key", "arm", "--trials",
                    str(args.trials), "--wait"]
            if args.threads:
                tune += ["--threads", str(args.threads)]
            t0 = time.time()
            job = kiln(args.build, *tune).splitlines()[0].strip()
            tuning_min = (time.time() - t0) / 60
            tuned = os.path.join(tmp, label + "-tuned.kiln")
            kiln(args.build, "fetch", job, "--tracker", tracker, "-o", tuned)
            untuned = os.path.join(tmp, label + "-untuned.kiln")
            kiln(args.build, "compile", model, "--db", os.path.join(tmp, "empty.db"), "--target",
                 target, "-o", untuned)
            import numpy as np
            import onnx
            m = onnx.load(model, load_external_data=False)
            inp = m.graph.input[0]
            shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
            x = os.path.join(tmp, label + "-x.npy")
            np.save(x, np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32))
            on_board = {k: board.copy(v) for k, v in
                        (("untuned", untuned), ("tuned", tuned), ("x", x))}
            if not args.qemu:
                on_board["model"] = board.copy(model)
                on_board["timer"] = board.copy(_write(tmp, "ort_timer.py", ORT_TIMER))
            env = f"KILN_NUM_THREADS={args.threads}" if args.threads else ""
            times = {"untuned": [], "tuned": [], "onnxruntime": []}
            for _ in range(args.blocks):
                for k in ("untuned", "tuned"):
                    times[k].append(board.run(
                        ["./kiln-run", os.path.basename(on_board[k]), "--input",
                         os.path.basename(on_board["x"]), "--output-dir", "out", "--repeat",
                         str(args.repeat)], env))
                if not args.qemu:
                    times["onnxruntime"].append(board.run(
                        ["python3", "ort_timer.py", os.path.basename(on_board["model"]),
                         os.path.basename(on_board["x"]), str(args.threads or 0),
                         str(args.repeat)]))
            speedup = statistics.median(u / t for u, t in zip(times["untuned"], times["tuned"]))
            vs_ort = (statistics.median(o / t for o, t in zip(times["onnxruntime"], times["tuned"]))
                      if times["onnxruntime"] else None)
            rows.append((label, args.threads or "all", f"{tuning_min:.1f} min",
                         statistics.median(times["untuned"]), statistics.median(times["tuned"]),
                         statistics.median(times["onnxruntime"]) if times["onnxruntime"] else None,
                         speedup, vs_ort))
        print(f"board {board_addr} ({'qemu-aarch64 here: a dry run, figures mean nothing' if args.qemu else args.ssh}), "
              f"target {target}, {args.trials} trials, {args.blocks} blocks of {args.repeat} runs")
        print("| model | threads | tuning | untuned ms | tuned ms | onnxruntime ms "
              "| tuned vs untuned | tuned vs onnxruntime |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            ort_ms = f"{r[5]:.3f}" if r[5] is not None else "n/a"
            vs = f"{r[7]:.3f}x" if r[7] is not None else "n/a"
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {ort_ms} "
                  f"| {r[6]:.3f}x | {vs} |")
    finally:
        for p_ in procs:
            p_.terminate()
        for p_ in procs:
            try:
                p_.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p_.kill()


def _write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


if __name__ == "__main__":
    main()
