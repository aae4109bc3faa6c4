#!/usr/bin/env python3
"""Per-family table of a kiln-conformance run, for docs/conformance.md.

usage: families.py RESULTS.json DATA_DIR
  RESULTS.json  from `kiln-conformance DATA_DIR --json RESULTS.json`
  DATA_DIR      the node tests (../shared/onnx-conformance/onnx-1.17.0/node)

A test belongs to the family of its model's operators: one operator (or the
operator plus Constant) picks that operator's family; tests with several
operators are "expanded function bodies (multi-op tests)".
"""
import collections
import json
import os
import sys

import onnx

FAMILIES = [
    ("elementwise & comparison", """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift
        BitwiseAnd BitwiseNot BitwiseOr BitwiseXor Cast CastLike Ceil Celu Clip Cos Cosh Div
        Elu Equal Erf Exp Floor Gelu Greater GreaterOrEqual HardSigmoid HardSwish IsInf IsNaN
        LeakyRelu Less LessOrEqual Log Max Mean Min Mish Mod Mul Neg Not Or PRelu Pow
        Reciprocal Relu Round Selu Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Sub Sum Swish
        Tan Tanh ThresholdedRelu Shrink Where Xor Binarizer"""),
    ("reductions & normalizations", """ArgMax ArgMin CumSum Hardmax TopK Softmax LogSoftmax
        LayerNormalization GroupNormalization InstanceNormalization MeanVarianceNormalization
        LpNormalization LRN BatchNormalization ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
        ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare"""),
    ("losses", "NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss"),
    ("data movement", """Transpose Concat Split Slice Gather GatherElements GatherND
        ScatterElements ScatterND Scatter Expand Tile Pad Reshape Flatten Squeeze Unsqueeze
        DepthToSpace SpaceToDepth Resize Upsample Trilu OneHot EyeLike Identity Dropout
        Compress CenterCropPad ReverseSequence AffineGrid GridSample"""),
    ("shape & constants", "Shape Size ConstantOfShape Range Constant"),
    ("conv, matmul, pooling", """Conv ConvTranspose MatMul Gemm Einsum MaxPool AveragePool
        LpPool GlobalAveragePool GlobalMaxPool GlobalLpPool MaxUnpool Col2Im DeformConv Det"""),
    ("quantization", """QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger
        ConvInteger QLinearMatMul QLinearConv"""),
    ("recurrent", "LSTM GRU RNN"),
    ("control flow", "If Loop Scan"),
    ("signal", "HannWindow HammingWindow BlackmanWindow MelWeightMatrix DFT STFT"),
]
FAMILY_OF = {op: name for name, ops in FAMILIES for op in ops.split()}
MULTI = "expanded function bodies (multi-op tests)"
OTHER = ("other (sequences, strings, training, random, "
         "detection, ML domain)")


def family(ops):
    ops = set(ops) - {"Constant"} or set(ops)
    if len(ops) > 1:
        return MULTI
    return FAMILY_OF.get(next(iter(ops)).split(".")[-1], OTHER)


def main():
    results, data = sys.argv[1], sys.argv[2]
    tests = json.load(open(results))["tests"]
    table = collections.OrderedDict((n, collections.Counter()) for n, _ in FAMILIES)
    table[MULTI] = collections.Counter()
    table[OTHER] = collections.Counter()
    for t in tests:
        model = onnx.load(os.path.join(data, t["name"], "model.onnx"), load_external_data=False)
        ops = [n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
               for n in model.graph.node]
        row = table[family(ops) if ops else OTHER]
        row["tests"] += 1
        row[t["result"]] += 1
    print("| family | tests | passed | failed | disputed | unsupported |")
    print("|---|---:|---:|---:|---:|---:|")
    total = collections.Counter()
    for name, row in table.items():
        total.update(row)
        print(f"| {name} | {row['tests']} | {row['PASS']} | {row['FAIL']} | {row['DISPUTED']} "
              f"| {row['UNSUPPORTED']} |")
    print(f"| **all** | {total['tests']} | {total['PASS']} | {total['FAIL']} | "
          f"{total['DISPUTED']} | {total['UNSUPPORTED']} |")


if __name__ == "__main__":
    main()
