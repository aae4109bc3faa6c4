#!/usr/bin/env python3
"""Model latency of kiln artifacts against onnxruntime, in the same run.

  bench/model_latency.py --model M.onnx --artifact LABEL=PATH [...]
                         [--repeat N] [--warmup K] [--block B] [--threads T]
                         [--openvino] [--openvino-bf16] [--tolerance E] [--bin-dir DIR]
                         [--json OUT]

Both sides are timed in-process the same way, around one call with its
inputs and outputs bound ahead (neither converts arrays per run): the
baseline is onnxruntime's CPU execution provider with all graph
optimizations (run_with_iobinding), in a worker process of its own so that
its spinning thread pool never shares a process with kiln's; every artifact
is loaded with kiln.Module (libkiln_runtime.so's C API, Module.runner) in
this one. Both use T threads. Every output is checked against onnxruntime
(max abs error).

The runs are interleaved in blocks of B: B runs of onnxruntime, then B of
each artifact, and again, N runs of each in all; the side not running waits
on a pipe, and each block starts once onnxruntime's threads have stopped
spinning. A shared machine's slow spells (this project's VMs move by
15-30 % from one second to the next) then slow every side alike, where
timing each side's N runs in one go compared a slow minute with a fast one.
Each block gives one ratio of medians (onnxruntime / kiln); the table gives
the median of those ratios and the range of their middle half, beside the
median latencies. --json writes each module's median latency and its
blocks' medians (bench/tuning_pays.py compares two artifacts with them).

--openvino adds OpenVINO (pip `openvino`, CPU plugin, latency hint, one
stream, T threads, INFERENCE_PRECISION_HINT f32 set explicitly: its default
is bf16 on CPUs that have it) as a second baseline in a worker process of its
own, timed in the same interleaved blocks; every module then also gets its
speed against OpenVINO. --openvino-bf16 adds OpenVINO with the hint bf16
(label openvino-bf16), the baseline for kiln's --precision bf16 builds.
--tolerance is the largest max abs error against
onnxruntime that passes (default 1e-3; a quantized model's outputs differ
by quantization steps).
"""
import argparse
import multiprocessing
import os
import sys
import time

import numpy as np
import onnx


def timed(run, n):
    """Milliseconds of each of n calls of run()."""
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        run()
        t.append((time.perf_counter() - t0) * 1e3)
    return t


def cpu_ns(pid):
    """CPU time (ns) of all of pid's threads so far."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def wait_quiet(pid, window_s=0.005, limit_s=2.0):
    """Waits until pid's threads used under 5 % of a CPU over `window_s`:
    onnxruntime's pool threads spin for tens of milliseconds after a run,
    which slowed the next module's block by up to 40 % at 2 threads (kiln's
    spin for a millisecond)."""
    end = time.monotonic() + limit_s
    before = cpu_ns(pid)
    while time.monotonic() < end:
        time.sleep(window_s)
        now = cpu_ns(pid)
        if now - before < 0.05 * window_s * 1e9:
            return
        before = now


def guarded(fn, conn, *args):
    """Runs a worker; an error before its first answer is sent as ("error",
    the message), so that the parent never waits on a dead worker."""
    try:
        fn(conn, *args)
    except Exception as e:  # noqa: BLE001 - any failure of the baseline's library
        conn.send(("error", f"{type(e).__name__}: {e}"))


def ort_worker(conn, model, inputs, threads, warmup):
    """onnxruntime in its own process: sends its version and reference
    outputs, then the times of each block of runs asked for (None ends)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)
    io = sess.io_binding()
    for name, x in inputs.items():
        io.bind_cpu_input(name, x)
    for o in sess.get_outputs():
        io.bind_output(o.name)
    run = lambda: sess.run_with_iobinding(io)  # noqa: E731
    timed(run, warmup)
    conn.send((ort.__version__, ref))
    while (n := conn.recv()) is not None:
        conn.send(timed(run, n))


def ov_worker(conn, model, inputs, threads, warmup, precision="f32"):
    """OpenVINO in its own process, as ort_worker, at the precision hint given
    (f32, or bf16 where the CPU has it)."""
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(model, "CPU", {
        "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": precision})
    req = compiled.create_infer_request()
    for name, x in inputs.items():
        req.set_tensor(name, ov.Tensor(x))
    req.infer()
    ref = [req.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]
    run = req.infer
    timed(run, warmup)
    conn.send((ov.__version__, ref))
    while (n := conn.recv()) is not None:
        conn.send(timed(run, n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--artifact", action="append", required=True, help="LABEL=PATH")
    ap.add_argument("--repeat", type=int, default=200, help="timed runs of each module")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--block", type=int, default=10, help="runs of one module in a row")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the medians and the blocks' medians here")
    ap.add_argument("--openvino", action="store_true", help="OpenVINO as a second baseline")
    ap.add_argument("--openvino-bf16", action="store_true",
                    help="and OpenVINO with INFERENCE_PRECISION_HINT bf16")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    a = ap.parse_args()

    model = onnx.load(a.model)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(a.seed)
    inputs = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        if np.issubdtype(dtype, np.floating):
            x = rng.uniform(-1, 1, shape).astype(dtype)
        else:  # masks, ids: small non-negative integers
            x = rng.integers(0, 2, shape).astype(dtype)
        inputs[vi.name] = x

    # The workers are forked before kiln's runtime (and its threads) is loaded.
    ctx = multiprocessing.get_context("fork")
    workers = {}
    baselines = [("onnxruntime", ort_worker, ())]
    if a.openvino:
        baselines.append(("openvino", ov_worker, ()))
    if a.openvino_bf16:
        baselines.append(("openvino-bf16", ov_worker, ("bf16",)))
    for label, fn, extra in baselines:
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=guarded, args=(fn, child, a.model, inputs, a.threads,
                                                 a.warmup) + extra, daemon=True)
        proc.start()
        child.close()  # the worker's end: EOF here when it dies
        try:
            version, out = conn.recv()
        except EOFError:
            proc.join()
            version, out = "error", f"the worker died (exit code {proc.exitcode})"
        if version == "error":
            # A baseline that cannot load the model (OpenVINO refuses
            # onnxruntime's operator form): said so, not timed.
            if label == "onnxruntime":
                sys.exit(f"onnxruntime cannot run {a.model}: {out}")
            print(f"{label} cannot run this model, not timed: {out.splitlines()[0][:300]}",
                  flush=True)
            proc.join()
            continue
        workers[label] = (conn, proc, version, out)
    ref = workers["onnxruntime"][3]

    os.environ["KILN_NUM_THREADS"] = str(a.threads)  # read when the runtime's pool starts
    os.environ.setdefault("KILN_RUNTIME", os.path.join(a.bin_dir, "deploy", "libkiln_runtime.so"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from kiln.runtime import Module

    labels = list(workers)

    def worker_block(label, n):
        conn, proc = workers[label][:2]
        conn.send(n)
        t = conn.recv()
        wait_quiet(proc.pid)
        return t

    def kiln_block(run, n):
        t = timed(run, n)
        wait_quiet(os.getpid())  # kiln's pool threads spin too (KILN_SPIN_US)
        return t

    blocks_of = {label: lambda n, label=label: worker_block(label, n) for label in workers}
    errs = {label: float(np.max(np.abs(out[0] - ref[0]))) for label, (_, _, _, out) in
            workers.items() if label != "onnxruntime"}
    for spec in a.artifact:
        label, path = spec.split("=", 1)
        m = Module(path)
        run, outputs = m.runner({name: inputs[name] for name, _, _ in m.inputs})
        run()
        got = next(iter(outputs.values()))
        errs[label] = float(np.max(np.abs(got - ref[0])))
        timed(run, a.warmup)
        labels.append(label)
        blocks_of[label] = lambda n, run=run: kiln_block(run, n)

    block = max(1, min(a.block, a.repeat))
    times = {label: [] for label in labels}
    blocks = {label: [] for label in labels}
    for _ in range(max(1, a.repeat // block)):
        for label in labels:
            t = blocks_of[label](block)
            times[label] += t
            blocks[label].append(float(np.median(t)))
    for conn, proc, _, _ in workers.values():
        conn.send(None)
        proc.join()

    n = len(times["onnxruntime"])
    print(f"model {os.path.basename(a.model)}, {a.threads} threads, {n} runs of each module "
          f"in blocks of {block}, interleaved")
    print()
    ov = "openvino" in workers
    print("| module | median latency (ms) | speed vs onnxruntime (median of blocks) | "
          "middle half of blocks |" + (" speed vs OpenVINO |" if ov else "") +
          " max abs err vs onnxruntime |")
    print("|---|---:|---:|---|" + ("---:|" if ov else "") + "---:|")

    def speed(base, label):
        return np.median(np.array(blocks[base]) / np.array(blocks[label]))

    for label in labels:
        ratios = np.array(blocks["onnxruntime"]) / np.array(blocks[label])
        q1, q3 = np.percentile(ratios, [25, 75])
        name = (f"{label} {workers[label][2]}" + (" (baseline)" if label == "onnxruntime" else "")
                if label in workers else f"kiln {label}")
        err = f" {errs[label]:.1e} |" if label in errs else " - |"
        print(f"| {name} | {np.median(times[label]):.4f} | {np.median(ratios):.2f}x | "
              f"{q1:.2f}-{q3:.2f}x |" + (f" {speed('openvino', label):.2f}x |" if ov else "") + err)
    if a.json:
        import json
        with open(a.json, "w") as f:
            json.dump({label: {"median_ms": float(np.median(times[label])),
                               "blocks_ms": blocks[label],
                               "max_abs_err": errs.get(label, 0.0)} for label in labels}, f)
    worst = max(e for label, e in errs.items() if label not in workers)
    if worst > a.tolerance:
        sys.exit(f"kiln output differs from onnxruntime by {worst}")


if __name__ == "__main__":
    main()
