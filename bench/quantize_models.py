#!/usr/bin/env python3
"""Quantized models as users make them: onnxruntime's own quantization tool
applied to the project's float models (tests/models/make_models.py, seeded).

  bench/quantize_models.py [--qoperator] OUT_DIR [resnet50 mobilenet_v2 resnet18 bert_layer ...]

Each model first goes through quant_pre_process (shape inference and
onnxruntime's graph optimizations, as its documentation asks). CNNs:
quantize_static in QDQ format, per-channel int8 weights, uint8
activations, calibrated (MinMax) on 8 seeded images; the BERT-base layer:
quantize_dynamic (int8 weights; MatMulInteger with DynamicQuantizeLinear, the
form transformers get). With --qoperator the CNNs are written in the
operator form instead (QLinearConv, com.microsoft QLinearAdd,
QLinearGlobalAveragePool, QGemm) as OUT/<name>_int8_qop.onnx. Writes
OUT/<name>_int8.onnx beside the float OUT/<name>.onnx and
OUT/<name>.inputs.npz, and prints each path.
"""
import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
import make_models  # noqa: E402
import quantized_models  # noqa: E402

DYNAMIC = {"bert_layer"}


def quantize(name, out, qoperator=False):
    case = make_models.MODELS[name]()
    np.savez(os.path.join(out, name + ".inputs.npz"), **case.feeds)
    onnx.save(case.model, os.path.join(out, name + ".onnx"))
    dynamic = name in DYNAMIC
    qop = qoperator and not dynamic
    q = os.path.join(out, f"{name}_int8{'_qop' if qop else ''}.onnx")
    onnx.save(quantized_models.quantize(case, dynamic, qoperator=qop), q)
    print(q)


def main():
    args = sys.argv[1:]
    qoperator = "--qoperator" in args
    args = [a for a in args if a != "--qoperator"]
    if not args:
        sys.exit(__doc__)
    out = args[0]
    os.makedirs(out, exist_ok=True)
    for name in args[1:] or ["resnet50", "mobilenet_v2", "bert_layer"]:
        quantize(name, out, qoperator)


if __name__ == "__main__":
    main()
