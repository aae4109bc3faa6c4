#!/usr/bin/env python3
"""kiln's tuner against Apache TVM's MetaSchedule, in the same run.

  bench/vs_tvm.py [--trials 64,200] [--only matmul,conv64,conv128]
                  [--threads T] [--bin-dir DIR] [--work DIR] [--install]

For each single-operator ONNX model (MatMul 1024^3 and ResNet's 3x3
convolutions 64->64 at 56x56 and 128->128 at 28x28, weights as initializers)
and each trial count, both systems tune the same model on this machine:

  kiln: `kiln tune MODEL --local --trials N --strategy xgb` (in-process
        measurement), then kiln-run times the artifact;
  TVM:  relax's ONNX frontend, LegalizeOps + FuseOps + FuseTIR, MetaSchedule's
        `tune_relax` (XGBoost model, evolutionary search, local builder and
        runner) with max_trials_global=N, MetaScheduleApplyDatabase right
        after fusion, then the VM's time_evaluator.

It prints, per model and trial count, the tuned latency and the tuning wall
time of each, and kiln's ratios (TVM latency / kiln latency: > 1 means kiln's
kernel is faster; kiln time / TVM time: < 1 means kiln tuned faster).
Both use the same thread count; the target CPU is LLVM's host CPU name.

--install pip-installs the pinned TVM first (apache-tvm 0.27 with
meta-schedule; apache-tvm-ffi 0.1.14.post1, since newer ones segfault in
MetaSchedule's JSON serialization).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TVM_PINS = ["apache-tvm[meta-schedule]==0.27.*", "apache-tvm-ffi==0.1.14.post1", "psutil"]

MODELS = {
    # name: (description, builder)
    "matmul": "MatMul 1024x1024x1024",
    "conv64": "Conv 64->64 56x56 3x3",
    "conv128": "Conv 128->128 28x28 3x3",
}


def make_model(name, path, rng):
    if name == "matmul":
        a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1024, 1024])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])
        b = numpy_helper.from_array(rng.uniform(-1, 1, (1024, 1024)).astype(np.float32), "b")
        nodes = [helper.make_node("MatMul", ["a", "b"], ["y"])]
        graph = helper.make_graph(nodes, name, [a], [y], [b])
    else:
        c, hw = (64, 56) if name == "conv64" else (128, 28)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])
        w = numpy_helper.from_array(rng.uniform(-.1, .1, (c, c, 3, 3)).astype(np.float32), "w")
        bias = numpy_helper.from_array(rng.uniform(-.1, .1, (c,)).astype(np.float32), "bias")
        nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["y"], kernel_shape=[3, 3],
                                  pads=[1, 1, 1, 1])]
        graph = helper.make_graph(nodes, name, [x], [y], [w, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return model


def random_inputs(model, rng):
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name not in inits:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            out[vi.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return out


def host_cpu():
    """LLVM's name for this CPU (the same LLVM query kiln's target detection makes)."""
    from tvm.target import codegen
    return codegen.llvm_get_system_cpu()


def run_kiln(bin_dir, model_path, inputs, trials, threads, work, repeat):
    db = os.path.join(work, "kiln.db")
    art = os.path.join(work, "model.kiln")
    env = dict(os.environ, KILN_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    r = subprocess.run([os.path.join(bin_dir, "cli", "kiln"), "tune", model_path, "--local",
                        "--db", db, "-o", art, "--trials", str(trials), "--strategy", "xgb"],
                       capture_output=True, text=True, env=env)
    tune_s = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"kiln tune failed:\n{r.stdout}\n{r.stderr}")
    args = [os.path.join(bin_dir, "deploy", "kiln-run"), art, "--output-dir", work,
            "--repeat", str(repeat), "--warmup", "5"]
    for name, x in inputs.items():
        p = os.path.join(work, f"{name}.npy")
        np.save(p, x)
        args += ["--input", f"{name}={p}"]
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"kiln-run failed:\n{r.stderr}")
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("median_ms="), last
    with open(os.path.join(work, "output_0.pb"), "rb") as f:
        y = numpy_helper.to_array(onnx.TensorProto.FromString(f.read()))
    return float(last.split("=", 1)[1]), tune_s, y


def run_tvm(model, inputs, trials, threads, cpu, work, repeat):
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    import tvm.s_tir.meta_schedule as ms

    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})
    mod = from_onnx(model, keep_params_in_input=False)
    fuse = tvm.ir.transform.Sequential([
        relax.transform.DecomposeOpsForInference(),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])
    mod = fuse(mod)
    t0 = time.perf_counter()
    # A build worker's first build imports TVM's tensor intrinsics (about 25 s
    # here), more than the default 30 s build timeout leaves for the build.
    builder = ms.builder.LocalBuilder(timeout_sec=120)
    ms.relax_integration.tune_relax(mod, params={}, target=target, work_dir=work,
                                    max_trials_global=trials, num_trials_per_iter=min(64, trials),
                                    builder=builder, seed=0)
    tune_s = time.perf_counter() - t0
    with target, tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.MetaScheduleApplyDatabase(work)(mod)
    ex = tvm.compile(mod, target=target)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs.values()]
    y = vm["main"](*args)
    y = y.numpy()
    timer = vm.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=0)
    res = timer(*args)
    return float(np.median(res.results)) * 1e3, tune_s, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", default="64,200")
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "build"))
    ap.add_argument("--work", default=None, help="keep the work directories here")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--install", action="store_true", help="pip-install the pinned TVM first")
    a = ap.parse_args()

    if a.install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q"] + TVM_PINS, check=True)
    try:
        import tvm  # noqa: F401
    except ImportError:
        sys.exit("TVM is not installed: run with --install, or pip install " + " ".join(TVM_PINS))
    os.environ.setdefault("TVM_NUM_THREADS", str(a.threads))

    cpu = host_cpu()
    trial_counts = [int(t) for t in a.trials.split(",")]
    names = a.only.split(",")
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model '{n}'; known: {', '.join(MODELS)}")
    root = a.work or tempfile.mkdtemp(prefix="kiln-vs-tvm-")
    os.makedirs(root, exist_ok=True)
    print(f"host cpu {cpu}, {a.threads} threads; work in {root}", flush=True)

    # kiln first for every model and trial count, then TVM: TVM's runtime
    # thread pool lives on in this process after its runs, and kiln-run timed
    # after it once measured up to 1.9x slower than alone.
    cases = []
    rng = np.random.default_rng(0)
    for name in names:
        path = os.path.join(root, f"{name}.onnx")
        model = make_model(name, path, rng)
        inputs = random_inputs(model, rng)
        for trials in trial_counts:
            cases.append((name, path, model, inputs, trials))
    kiln = {}
    for name, path, model, inputs, trials in cases:
        kw = os.path.join(root, f"{name}-{trials}-kiln")
        shutil.rmtree(kw, ignore_errors=True)
        os.makedirs(kw)
        print(f"[{name} {trials} trials] kiln ...", flush=True)
        kiln[(name, trials)] = run_kiln(a.bin_dir, path, inputs, trials, a.threads, kw, a.repeat)
        k_ms, k_s, _ = kiln[(name, trials)]
        print(f"[{name} {trials} trials] kiln {k_ms:.3f} ms after {k_s:.0f} s", flush=True)
    rows = []
    for name, path, model, inputs, trials in cases:
        tw = os.path.join(root, f"{name}-{trials}-tvm")
        shutil.rmtree(tw, ignore_errors=True)
        os.makedirs(tw)
        print(f"[{name} {trials} trials] TVM ...", flush=True)
        t_ms, t_s, t_y = run_tvm(model, inputs, trials, a.threads, cpu, tw, a.repeat)
        print(f"[{name} {trials} trials] TVM {t_ms:.3f} ms after {t_s:.0f} s", flush=True)
        k_ms, k_s, k_y = kiln[(name, trials)]
        err = float(np.max(np.abs(k_y - t_y)))
        rows.append((MODELS[name], trials, k_ms, t_ms, k_s, t_s, err))

    print()
    print(f"{'model':26} {'trials':>6} {'kiln ms':>9} {'TVM ms':>9} {'TVM/kiln':>9} "
          f"{'kiln tune':>10} {'TVM tune':>9} {'time ratio':>10} {'max|diff|':>10}")
    for m, t, k_ms, t_ms, k_s, t_s, err in rows:
        print(f"{m:26} {t:6d} {k_ms:9.3f} {t_ms:9.3f} {t_ms / k_ms:8.2f}x "
              f"{k_s:9.0f}s {t_s:8.0f}s {k_s / t_s:9.2f}x {err:10.2e}")
    print("TVM/kiln > 1: kiln's tuned kernel is faster; time ratio < 1: kiln tuned in less time")


if __name__ == "__main__":
    main()
