#!/usr/bin/env python3
"""kiln on a GPU against the vendor libraries, in the same run (issue 9).

  bench/gpu_bench.py --bin-dir BUILD [--device cuda:0] [--suite matmul,conv,resnet50]
                     [--matmul-trials N] [--conv-trials N] [--resnet-trials N]
                     [--matmul-sizes 1024,4096] [--conv-layers 64x56,128x28,...]
                     [--tune-timeout S] [--seed-db FILE] [--save-db FILE]

Starts a kiln-tracker and one `kiln-agent --device DEVICE` on this machine,
tunes each case through them (the farm's timing policy; CUDA events on a
CUDA device), and prints one table against the baseline timed here:

  matmul   fp32 MatMul 1024^3 and 4096^3: kiln's best tuned kernel (its
           record's device time) against torch.matmul (cuBLAS, TF32 off),
           timed with CUDA events.
  conv     ResNet-18's 3x3 stride-1 convolutions (batch 1): kiln's best kernel
           against torch.nn.functional.conv2d (cuDNN, TF32 off).
  resnet50 ResNet-50 batch 1 (tests/models/make_models.py, random weights),
           compiled untuned (`kiln compile`) and with the farm's tuning log
           after a job of --resnet-trials, each run with `kiln-run --device
           DEVICE` (inputs and outputs copied every run) against PyTorch
           eager fp32 on the same graph (torchvision's resnet50).

A job still running after --tune-timeout seconds is cancelled and what it
measured so far counts. --seed-db starts the tracker on a copy of an
earlier run's log (the tuning goes on from there); --save-db keeps this
run's log.

Targets on an H100 (issue 9): MatMul 4096^3 >= 0.7x cuBLAS fp32; ResNet-50
batch 1 faster than PyTorch eager fp32 (4.9 ms), tuned with <= 2,000 trials.

Without PyTorch with CUDA the baseline column says so; with --device
opencl:N (PoCL on a machine without a GPU) the script checks the path, and
its timings say nothing of a GPU.
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
from farm import Farm  # noqa: E402

KEY = "gpu-bench"

# ResNet-18's 3x3 stride-1 layers: (channels, image size).
RESNET18_3X3 = [(64, 56), (128, 28), (256, 14), (512, 7)]


def matmul_model(path, n):
    rng = np.random.default_rng(n)
    b = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "b")
    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], f"mm{n}", [x], [y],
                          initializer=[b])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv_model(path, c, hw):
    rng = np.random.default_rng(c)
    w = numpy_helper.from_array(
        (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                          f"conv{c}", [x], [y], initializer=[w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None, "no PyTorch"
    if not torch.cuda.is_available():
        return None, "PyTorch without CUDA"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch, None


def cuda_event_ms(torch, fn, warmup=10, repeat=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return float(np.median(times))


class Bench:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.farm = Farm(tmp, args.bin_dir)
        if args.seed_db:
            shutil.copyfile(args.seed_db, self.farm.db)
        self.farm.start_tracker(extra=["--max-jobs-per-user", "100"])
        self.farm.start([f"{args.bin_dir}/device_agent/kiln-agent", "--tracker", self.farm.addr,
                         "--key", KEY, "--id", "gpu-0", "--device", args.device], "agent0.log")
        devices = self.farm.wait_devices(KEY)
        self.device_line = next(
            (l for l in devices.splitlines() if KEY in l and " gone " not in l), "?")
        listed = subprocess.run([f"{args.bin_dir}/device_agent/kiln-agent", "--list-devices"],
                                capture_output=True, text=True).stdout
        line = next(l for l in listed.splitlines() if l.startswith(f"{args.device}:"))
        self.target = line.rsplit("(target ", 1)[1].rstrip(")")
        self.rows = []

    def tune(self, model, trials, timeout=None):
        t0 = time.monotonic()
        r = self.farm.kiln("tune", model, "--tracker", self.farm.addr, "--key", KEY,
                           "--trials", str(trials))
        if r.returncode != 0:
            sys.exit(f"kiln tune {model} failed:\n{r.stdout}{r.stderr}")
        job = r.stdout.splitlines()[0].strip()
        timeout = timeout or self.args.tune_timeout
        out, state = self.farm.wait_job(job, timeout=timeout)
        if state not in ("completed", "failed", "cancelled"):
            print(f"job {job} still {state or 'running'} after {timeout} s: "
                  "cancelled; its records so far count", flush=True)
            self.farm.kiln("cancel", job, "--tracker", self.farm.addr)
            out, state = self.farm.wait_job(job, timeout=60)
        if state == "failed":
            sys.exit(f"job {job} failed:\n{out}\n{self.farm.log('tracker.log')}")
        return job, time.monotonic() - t0

    def measured(self, job):
        """The job's candidates measured (the trials it spent)."""
        with sqlite3.connect(self.farm.db) as c:
            return c.execute("SELECT COUNT(*) FROM records WHERE job_id = ?", (job,)).fetchone()[0]

    def best_kernel_ms(self, job):
        with sqlite3.connect(self.farm.db) as c:
            row = c.execute("SELECT MIN(mean_cost_s) FROM records WHERE job_id = ? AND "
                            "error_kind = 'none'", (job,)).fetchone()
        return row[0] * 1e3 if row and row[0] else float("nan")

    def add(self, case, kiln_ms, base_ms, base_name, trials, tune_s):
        self.rows.append((case, kiln_ms, base_ms, base_name, trials, tune_s))

    def matmul(self, torch):
        for n in (int(v) for v in self.args.matmul_sizes.split(",")):
            path = os.path.join(self.tmp, f"mm{n}.onnx")
            matmul_model(path, n)
            job, tune_s = self.tune(path, self.args.matmul_trials)
            base = float("nan")
            if torch:
                a = torch.randn(n, n, device="cuda")
                b = torch.randn(n, n, device="cuda")
                base = cuda_event_ms(torch, lambda: torch.matmul(a, b))
            self.add(f"MatMul {n}^3 fp32 (kernel)", self.best_kernel_ms(job), base,
                     "cuBLAS", self.measured(job), tune_s)

    def conv(self, torch):
        for c, hw in (tuple(int(v) for v in l.split("x"))
                      for l in self.args.conv_layers.split(",")):
            path = os.path.join(self.tmp, f"conv{c}.onnx")
            conv_model(path, c, hw)
            job, tune_s = self.tune(path, self.args.conv_trials)
            base = float("nan")
            if torch:
                x = torch.randn(1, c, hw, hw, device="cuda")
                w = torch.randn(c, c, 3, 3, device="cuda")
                base = cuda_event_ms(torch, lambda: torch.nn.functional.conv2d(x, w, padding=1))
            self.add(f"conv 3x3 {c}ch {hw}x{hw} (kernel)", self.best_kernel_ms(job), base,
                     "cuDNN", self.measured(job), tune_s)

    def run_ms(self, art, name, x):
        """kiln-run's median over 50 runs of the artifact on the device."""
        np.save(os.path.join(self.tmp, "x.npy"), x)
        r = subprocess.run([f"{self.args.bin_dir}/deploy/kiln-run", art, "--device",
                            self.args.device, "--input", f"{name}={self.tmp}/x.npy",
                            "--output-dir", os.path.join(self.tmp, "out"), "--repeat", "50",
                            "--warmup", "10"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"kiln-run failed:\n{r.stderr}")
        return float(r.stdout.strip().splitlines()[-1].split("=", 1)[1])

    def compile(self, path, art, db):
        t0 = time.monotonic()
        r = self.farm.kiln("compile", path, "--db", db, "-o", art, "--target", self.target)
        if r.returncode != 0:
            sys.exit(f"kiln compile failed:\n{r.stderr}")
        return time.monotonic() - t0

    def resnet50(self, torch):
        import make_models
        case = make_models.MODELS["resnet50"]()
        path = os.path.join(self.tmp, "resnet50.onnx")
        onnx.save(case.model, path)
        (name, x), = case.feeds.items()
        base, base_name = float("nan"), "PyTorch eager"
        if torch:
            import torchvision
            model = torchvision.models.resnet50().cuda().eval()
            xt = torch.from_numpy(x).cuda()
            with torch.no_grad():
                base = cuda_event_ms(torch, lambda: model(xt))
        untuned = os.path.join(self.tmp, "resnet50-untuned.kiln")
        compile_s = self.compile(path, untuned, os.path.join(self.tmp, "empty.db"))
        self.add("ResNet-50 batch 1 untuned (end to end)", self.run_ms(untuned, name, x), base,
                 base_name, 0, compile_s)
        if self.args.resnet_trials > 0:
            job, tune_s = self.tune(path, self.args.resnet_trials, self.args.resnet_tune_timeout)
            with sqlite3.connect(self.farm.db) as c:  # this run's and any seeded log's
                trials = c.execute("SELECT COUNT(*) FROM records WHERE target = ? AND "
                                   "workload_key IN (SELECT workload_key FROM job_tasks WHERE "
                                   "job_id = ?)", (self.target, job)).fetchone()[0]
            tuned = os.path.join(self.tmp, "resnet50-tuned.kiln")
            self.compile(path, tuned, self.farm.db)
            self.add("ResNet-50 batch 1 tuned (end to end)", self.run_ms(tuned, name, x), base,
                     base_name, trials, tune_s)

    def print_table(self, why_no_baseline):
        print(f"\nagent: {self.device_line.strip()}")
        if why_no_baseline:
            print(f"baseline: none ({why_no_baseline})")
        print("\n| case | kiln ms | baseline | baseline ms | kiln / baseline speed | trials measured "
              "| tuning s |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for case, k, b, name, trials, tune_s in self.rows:
            ratio = f"{b / k:.2f}x" if b == b and k == k and k > 0 else "n/a"
            bs = f"{b:.3f}" if b == b else "n/a"
            print(f"| {case} | {k:.3f} | {name} | {bs} | {ratio} | {trials} | {tune_s:.0f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--suite", default="matmul,conv,resnet50")
    p.add_argument("--matmul-trials", type=int, default=300)
    p.add_argument("--conv-trials", type=int, default=200)
    p.add_argument("--resnet-trials", type=int, default=2000)
    p.add_argument("--matmul-sizes", default="1024,4096")
    p.add_argument("--conv-layers", default=",".join(f"{c}x{hw}" for c, hw in RESNET18_3X3))
    p.add_argument("--tune-timeout", type=float, default=24 * 3600)
    p.add_argument("--resnet-tune-timeout", type=float)
    p.add_argument("--seed-db")
    p.add_argument("--save-db")
    args = p.parse_args()
    listed = subprocess.run([f"{args.bin_dir}/device_agent/kiln-agent", "--list-devices"],
                            capture_output=True, text=True).stdout
    if f"{args.device}:" not in listed:
        print(f"no device {args.device} here (kiln-agent --list-devices):\n{listed}")
        return 0
    torch, why = torch_cuda() if args.device.startswith("cuda") else (None, "not a CUDA device")
    with tempfile.TemporaryDirectory(prefix="kiln-gpu-bench-") as tmp:
        bench = Bench(args, tmp)
        try:
            for part in args.suite.split(","):
                try:
                    getattr(bench, part)(torch)
                except (SystemExit, Exception) as e:  # the other parts still run
                    print(f"{part}: {type(e).__name__}: {e}", flush=True)
        finally:
            bench.farm.stop()
            bench.print_table(why)
            if args.save_db:  # the log (through SQLite: its WAL too), and the farm's logs
                with sqlite3.connect(bench.farm.db) as src, sqlite3.connect(args.save_db) as dst:
                    src.backup(dst)
                for log in ("tracker.log", "agent0.log"):
                    shutil.copyfile(os.path.join(tmp, log), os.path.join(
                        os.path.dirname(os.path.abspath(args.save_db)), "bench-" + log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
