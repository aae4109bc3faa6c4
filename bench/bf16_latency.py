#!/usr/bin/env python3
"""bfloat16: kiln's --precision bf16 build against its float32 build,
onnxruntime (float32) and OpenVINO at both precision hints, in the same run.

  bench/bf16_latency.py [--bin-dir BUILD] [--models resnet50,mobilenet_v2,bert_layer]
                        [--threads 1,2] [--repeat N] [--work DIR] [--install]

--install pip-installs OpenVINO first. Each model (tests/models/make_models.py,
seeded) is compiled twice by `kiln compile` with an empty log (untuned):
float32, and --precision bf16 (convolutions writing channel blocks and
matrix products by constant weights in bfloat16, summed in float32); then
bench/model_latency.py --openvino --openvino-bf16 times, at T threads,
onnxruntime (float32: its CPU provider computes no bf16 products) and
OpenVINO with INFERENCE_PRECISION_HINT f32 and bf16 in worker processes and
both kiln builds in-process, interleaved in blocks. Ratios are medians of
per-block ratios (baseline time / kiln bf16 time: above 1 is kiln faster).
The last column is kiln bf16's largest output error against onnxruntime's
float32 (OpenVINO bf16's beside it), the accuracy a user gives up; `kiln
compile --accuracy-input` prints it for the user's own inputs.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin-dir", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_layer")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--work", help="keep the models and artifacts here")
    ap.add_argument("--install", action="store_true", help="pip-install openvino first")
    a = ap.parse_args()
    if a.install:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "openvino"], check=True)
    try:
        import openvino  # noqa: F401
    except ImportError:
        sys.exit("OpenVINO is not installed: run with --install, or pip install openvino")
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
    import make_models  # noqa: E402
    import onnx  # noqa: E402

    work = a.work or tempfile.mkdtemp(prefix="kiln-bf16-")
    os.makedirs(work, exist_ok=True)
    kiln = os.path.join(a.bin_dir, "cli", "kiln")
    db = os.path.join(work, "empty.db")
    rows = []
    for model in a.models.split(","):
        path = os.path.join(work, f"{model}.onnx")
        onnx.save(make_models.MODELS[model]().model, path)
        arts = {}
        for precision in ("fp32", "bf16"):
            arts[precision] = os.path.join(work, f"{model}_{precision}.kiln")
            run([kiln, "compile", path, "--db", db, "-o", arts[precision], "--precision", precision])
        for t in a.threads.split(","):
            out = os.path.join(work, f"{model}-t{t}.json")
            table = run([sys.executable, os.path.join(HERE, "model_latency.py"), "--model", path,
                         "--artifact", f"fp32={arts['fp32']}", "--artifact", f"bf16={arts['bf16']}",
                         "--openvino", "--openvino-bf16", "--threads", t, "--repeat",
                         str(a.repeat), "--warmup", "10", "--bin-dir", a.bin_dir,
                         "--tolerance", "1e9", "--json", out])
            print(table, flush=True)
            with open(out) as f:
                r = json.load(f)

            def speed(base):
                ratios = sorted(b / k for b, k in zip(r[base]["blocks_ms"], r["bf16"]["blocks_ms"]))
                return ratios[len(ratios) // 2]

            ms = {k: r[k]["median_ms"] for k in ("fp32", "bf16", "onnxruntime", "openvino",
                                                   "openvino-bf16")}
            rows.append((model, t, ms, speed("fp32"), speed("onnxruntime"), speed("openvino"),
                         speed("openvino-bf16"), r["bf16"]["max_abs_err"],
                         r["openvino-bf16"]["max_abs_err"]))
    print("| model | threads | kiln fp32 (ms) | kiln bf16 (ms) | onnxruntime fp32 (ms) | "
          "OpenVINO f32 (ms) | OpenVINO bf16 (ms) | kiln bf16 vs kiln fp32 | vs onnxruntime | "
          "vs OpenVINO f32 | vs OpenVINO bf16 | max abs err vs fp32: kiln bf16 / OpenVINO bf16 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, t, ms, s32, sort, sov, sovb, e, eov in rows:
        print(f"| {m} | {t} | {ms['fp32']:.3f} | {ms['bf16']:.3f} | {ms['onnxruntime']:.3f} | "
              f"{ms['openvino']:.3f} | {ms['openvino-bf16']:.3f} | {s32:.2f}x | {sort:.2f}x | "
              f"{sov:.2f}x | {sovb:.2f}x | {e:.3g} / {eov:.3g} |")
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"\ngeomean of kiln bf16: vs kiln fp32 {geo([r[3] for r in rows]):.2f}x, "
          f"vs onnxruntime {geo([r[4] for r in rows]):.2f}x, vs OpenVINO f32 "
          f"{geo([r[5] for r in rows]):.2f}x, vs OpenVINO bf16 {geo([r[6] for r in rows]):.2f}x")


if __name__ == "__main__":
    main()
