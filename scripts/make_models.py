#!/usr/bin/env python3
"""Builds models/small_cnn.onnx deterministically (seeded weights).

data 1x3x32x32 -> Conv16 3x3 p1 + Relu -> MaxPool 2x2 -> Conv32 3x3 p1 + Relu
-> MaxPool 2x2 -> Conv32 3x3 p1 -> Add(residual: the second pooled tensor)
-> Relu -> Flatten -> Gemm 10 -> logits 1x10.
Usage: scripts/make_models.py [OUT_DIR]   (default: models/)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def small_cnn():
    rng = np.random.default_rng(20240607)

    def weight(name, *shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        w = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return numpy_helper.from_array(w, name)

    def bias(name, n):
        return numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), name)

    inits = [
        weight("conv1_w", 16, 3, 3, 3), bias("conv1_b", 16),
        weight("conv2_w", 32, 16, 3, 3), bias("conv2_b", 32),
        weight("conv3_w", 32, 32, 3, 3), bias("conv3_b", 32),
        weight("fc_w", 10, 32 * 8 * 8), bias("fc_b", 10),
    ]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["data", "conv1_w", "conv1_b"], ["c1"], name="conv1", **conv),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", **pool),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], name="conv2", **conv),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", **pool),
        helper.make_node("Conv", ["p2", "conv3_w", "conv3_b"], ["c3"], name="conv3", **conv),
        helper.make_node("Add", ["c3", "p2"], ["s3"], name="residual"),
        helper.make_node("Relu", ["s3"], ["r3"], name="relu3"),
        helper.make_node("Flatten", ["r3"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="kiln-make-models",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "models")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "small_cnn.onnx")
    onnx.save(small_cnn(), path)
    print(path)


if __name__ == "__main__":
    main()
