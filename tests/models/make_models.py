#!/usr/bin/env python3
"""Model zoo for kiln's model tests: whole networks with seeded random weights.

Every model is written with onnx.helper (no downloads, no torch) the way some
exporter writes it: torchvision-style CNNs, transformer layers, models at old
opsets with old-style attributes, legacy PyTorch shape subgraphs, dynamo-style
graphs, Keras/TF-style NHWC graphs. Each builder returns a Case: the model and
a feed for each input.

Usage: tests/models/make_models.py OUT_DIR [NAME ...]
  writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.inputs.npz (default: all models);
       tests/models/make_models.py --list   prints the model names.
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_builder import Case, G, fin, fout, image
from quantized_models import output_step, qdq_int8, qoperator_ops, quantize


# ---------------------------------------------------------------- CNNs


def resnet50():
    """torchvision ResNet-50 (v1.5: stride on the 3x3), BN kept, opset 13."""
    g = G(50)
    x = g.conv("data", 3, 64, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 64))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for b in range(blocks):
            stride = 2 if (b == 0 and stage > 0) else 1
            y = g.relu(g.bn(g.conv(x, cin, width, 1, bias=False), width))
            y = g.relu(g.bn(g.conv(y, width, width, 3, stride=stride, bias=False), width))
            y = g.bn(g.conv(y, width, width * 4, 1, bias=False), width * 4, gamma=0.3)
            if b == 0:
                x = g.bn(g.conv(x, cin, width * 4, 1, stride=stride, bias=False), width * 4)
            x = g.relu(g.op("Add", [y, x]))
            cin = width * 4
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    out = g.op("Gemm", [x, g.weight(1000, 2048), g.vec(1000)], alpha=1.0, beta=1.0, transB=1)
    g.nodes[-1].output[0] = "logits"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("logits")], 13)
    return Case(m, {"data": image(1, 1, 3, 224, 224)})


def resnet18():
    """torchvision ResNet-18 (BasicBlock: two 3x3 convs, 1x1 stride-2
    downsample), BN kept, opset 13: the network scripts/demo tunes."""
    g = G(18)
    x = g.conv("data", 3, 64, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 64))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for b in range(2):
            stride = 2 if (b == 0 and stage > 0) else 1
            y = g.relu(g.bn(g.conv(x, cin, width, 3, stride=stride, bias=False), width))
            y = g.bn(g.conv(y, width, width, 3, bias=False), width, gamma=0.3)
            if stride != 1 or cin != width:
                x = g.bn(g.conv(x, cin, width, 1, stride=stride, bias=False), width)
            x = g.relu(g.op("Add", [y, x]))
            cin = width
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    g.op("Gemm", [x, g.weight(1000, 512), g.vec(1000)], alpha=1.0, beta=1.0, transB=1)
    g.nodes[-1].output[0] = "logits"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("logits")], 13)
    return Case(m, {"data": image(18, 1, 3, 224, 224)})


def mobilenet_v2():
    """torchvision MobileNetV2: depthwise convs, ReLU6 as Clip with min/max
    inputs (opset 11+), residual adds, GlobalAveragePool, Flatten, Gemm."""
    g = G(2)
    lo, hi = g.f32(0.0, "min"), g.f32(6.0, "max")

    def cbr(x, cin, cout, k, stride=1, group=1, act=True):
        y = g.bn(g.conv(x, cin, cout, k, stride=stride, group=group, bias=False), cout)
        return g.op("Clip", [y, lo, hi]) if act else y

    x = cbr("input", 3, 32, 3, stride=2)
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x if t == 1 else cbr(x, cin, hidden, 1)
            y = cbr(y, hidden, hidden, 3, stride=stride, group=hidden)
            y = cbr(y, hidden, c, 1, act=False)
            x = g.op("Add", [x, y]) if (stride == 1 and cin == c) else y
            cin = c
    x = cbr(x, cin, 1280, 1)
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(1000, 1280), g.vec(1000)], transB=1)
    g.nodes[-1].output[0] = "output"
    m = g.model([fin("input", [1, 3, 224, 224])], [fout("output")], 13)
    return Case(m, {"input": image(2, 1, 3, 224, 224)})


def squeezenet():
    """SqueezeNet 1.1 as torchvision exports it at opset 10: MaxPool with
    ceil_mode, Fire modules (Concat of 1x1 and 3x3 expands), Dropout,
    classifier conv, GlobalAveragePool, Flatten."""
    g = G(3)
    x = g.relu(g.conv("data", 3, 64, 3, stride=2, pad=0))

    def pool(x):
        return g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)

    def fire(x, cin, s, e):
        sq = g.relu(g.conv(x, cin, s, 1))
        return g.op("Concat", [g.relu(g.conv(sq, s, e, 1)), g.relu(g.conv(sq, s, e, 3))],
                    axis=1)

    x = pool(x)
    x = fire(x, 64, 16, 64)
    x = fire(x, 128, 16, 64)
    x = pool(x)
    x = fire(x, 128, 32, 128)
    x = fire(x, 256, 32, 128)
    x = pool(x)
    x = fire(x, 256, 48, 192)
    x = fire(x, 384, 48, 192)
    x = fire(x, 384, 64, 256)
    x = fire(x, 512, 64, 256)
    x = g.op("Dropout", [x], ratio=0.5)
    x = g.relu(g.conv(x, 512, 1000, 1))
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x])
    g.nodes[-1].output[0] = "prob"
    m = g.model([fin("data", [1, 3, 224, 224])], [fout("prob")], 10)
    return Case(m, {"data": image(3, 1, 3, 224, 224)})


def densenet_blocks():
    """DenseNet-style: BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 layers whose outputs
    are concatenated onto their input; transitions with AveragePool."""
    g = G(4)
    k = 16
    x = g.conv("x", 3, 32, 7, stride=2, pad=3, bias=False)
    x = g.relu(g.bn(x, 32))
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 32
    for block in range(3):
        for _ in range(4):
            y = g.conv(g.relu(g.bn(x, c)), c, 4 * k, 1, bias=False)
            y = g.conv(g.relu(g.bn(y, 4 * k)), 4 * k, k, 3, bias=False)
            x = g.op("Concat", [x, y], axis=1)
            c += k
        if block < 2:
            x = g.conv(g.relu(g.bn(x, c)), c, c // 2, 1, bias=False)
            c //= 2
            x = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.relu(g.bn(x, c))
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(100, c), g.vec(100)], transB=1)
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 3, 128, 128])], [fout("y")], 11)
    return Case(m, {"x": image(4, 1, 3, 128, 128)})


def inception_blocks():
    """Inception-style: parallel 1x1, 1x1->3x3, 1x1->3x3->3x3 and pool->1x1
    branches concatenated; Inception-v3 factorized 1x7/7x1 convolutions with
    asymmetric kernels; AveragePool with count_include_pad=0; a reduction
    block with stride-2 branches and a MaxPool branch."""
    g = G(5)

    def cbr(x, cin, cout, k, stride=1, pad=None):
        return g.relu(g.bn(g.conv(x, cin, cout, k, stride=stride, pad=pad, bias=False), cout))

    x = cbr("img", 3, 32, 3, stride=2, pad=0)
    x = cbr(x, 32, 64, 3)
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    c = 64

    def block_a(x, c):
        b1 = cbr(x, c, 32, 1)
        b2 = cbr(cbr(x, c, 24, 1), 24, 32, 3)
        b3 = cbr(cbr(cbr(x, c, 16, 1), 16, 24, 3), 24, 24, 3)
        b4 = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
                  count_include_pad=0)
        b4 = cbr(b4, c, 16, 1)
        return g.op("Concat", [b1, b2, b3, b4], axis=1), 32 + 32 + 24 + 16

    x, c = block_a(x, c)
    x, c = block_a(x, c)
    # reduction
    r1 = cbr(x, c, 64, 3, stride=2, pad=0)
    r2 = cbr(cbr(cbr(x, c, 32, 1), 32, 48, 3), 48, 48, 3, stride=2, pad=0)
    r3 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2])
    x = g.op("Concat", [r1, r2, r3], axis=1)
    c = 64 + 48 + c
    # factorized 7x7 (Inception-v3 "B" block)
    b1 = cbr(x, c, 48, 1)
    b2 = cbr(cbr(cbr(x, c, 32, 1), 32, 32, (1, 7), pad=[0, 3, 0, 3]), 32, 48, (7, 1),
             pad=[3, 0, 3, 0])
    b3 = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b3 = cbr(b3, c, 32, 1)
    x = g.op("Concat", [b1, b2, b3], axis=1)
    c = 48 + 48 + 32
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x])
    x = g.op("Gemm", [x, g.weight(10, c), g.vec(10)], transB=1)
    x = g.op("Softmax", [x], axis=1)
    g.nodes[-1].output[0] = "probs"
    m = g.model([fin("img", [1, 3, 75, 75])], [fout("probs")], 12)
    return Case(m, {"img": image(5, 1, 3, 75, 75)})


# ---------------------------------------------------------------- transformers


def bert_layer():
    """One BERT-base encoder layer as PyTorch (opset 17) exports it: additive
    attention mask computed from an int64 mask input, 12 heads of 64, batched
    MatMuls, Softmax, Transpose/Reshape head split and merge,
    LayerNormalization, Erf-form Gelu."""
    S, H, NH, D, F = 128, 768, 12, 64, 3072
    g = G(6)
    scale = 0.02 / math.sqrt(2.0 / H)  # weights ~ N(0, 0.02), as BERT initializes

    def dense(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.weight(cin, cout, fan_in=cin, scale=scale *
                                                        math.sqrt(cin / H))]), g.vec(cout)])

    def ln(x):
        return g.op("LayerNormalization",
                    [x, g.init(g.rng.uniform(0.8, 1.2, H).astype(np.float32), "ln_g"),
                     g.vec(H)], axis=-1, epsilon=1e-12)

    hs = "hidden_states"
    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m = g.op("Unsqueeze", ["attention_mask", g.i64([1, 2])])
    m = g.op("Cast", [m], to=TensorProto.FLOAT)
    m = g.op("Sub", [g.f32(1.0), m])
    m = g.op("Mul", [m, g.f32(-10000.0)])

    def heads(x, perm):
        x = g.op("Reshape", [x, g.i64([1, S, NH, D])])
        return g.op("Transpose", [x], perm=perm)

    q = heads(dense(hs, H, H), [0, 2, 1, 3])
    k = heads(dense(hs, H, H), [0, 2, 3, 1])
    v = heads(dense(hs, H, H), [0, 2, 1, 3])
    s = g.op("Div", [g.op("MatMul", [q, k]), g.f32(math.sqrt(D))])
    s = g.op("Add", [s, m])
    p = g.op("Softmax", [s], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.i64([1, S, H])])
    x = ln(g.op("Add", [dense(ctx, H, H), hs]))
    f = dense(x, H, F)
    gelu = g.op("Mul", [g.op("Mul", [f, g.op("Add", [g.op(
        "Erf", [g.op("Div", [f, g.f32(math.sqrt(2.0))])]), g.f32(1.0)])]), g.f32(0.5)])
    y = ln(g.op("Add", [dense(gelu, F, H), x]))
    g.nodes[-1].output[0] = "last_hidden_state"
    model = g.model([fin("hidden_states", [1, S, H]),
                     fin("attention_mask", [1, S], TensorProto.INT64)],
                    [fout("last_hidden_state")], 17)
    mask = np.ones((1, S), np.int64)
    mask[0, 100:] = 0
    return Case(model, {"hidden_states": image(6, 1, S, H), "attention_mask": mask})


def gpt2_block():
    """GPT-2 (HF transformers, legacy exporter, opset 13): token and position
    embeddings by Gather (positions from Shape->Gather->Range), decomposed
    LayerNorm (ReduceMean/Pow/Sqrt), fused QKV projection Split into three,
    causal mask sliced from a bool buffer and applied with Where, Tanh-form
    gelu with Pow(x, 3), tied LM head (Transpose of the embedding)."""
    S, H, NH, D, V, P = 64, 768, 12, 64, 2000, 128
    g = G(7)
    std = 0.02 / math.sqrt(2.0 / H)

    def dense(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.weight(cin, cout, fan_in=H, scale=std)]),
                            g.vec(cout)])

    def ln(x):
        mu = g.op("ReduceMean", [x], axes=[-1])
        d = g.op("Sub", [x, mu])
        var = g.op("ReduceMean", [g.op("Pow", [d, g.f32(2.0)])], axes=[-1])
        y = g.op("Div", [d, g.op("Sqrt", [g.op("Add", [var, g.f32(1e-5)])])])
        y = g.op("Mul", [y, g.init(g.rng.uniform(0.8, 1.2, H).astype(np.float32), "ln_g")])
        return g.op("Add", [y, g.vec(H)])

    wte = g.init((g.rng.standard_normal((V, H)) * 0.02).astype(np.float32), "wte")
    wpe = g.init((g.rng.standard_normal((P, H)) * 0.01).astype(np.float32), "wpe")
    ids = "input_ids"
    seq = g.op("Gather", [g.op("Shape", [ids]), g.i64(1)], axis=0)
    pos = g.op("Range", [g.i64(0), seq, g.i64(1)])
    pos = g.op("Unsqueeze", [pos, g.i64([0])])
    h = g.op("Add", [g.op("Gather", [wte, ids]), g.op("Gather", [wpe, pos])])

    a = dense(ln(h), H, 3 * H)
    q, k, v = g.op("Split", [a, g.i64([H, H, H])], n_out=3, axis=2)

    def heads(x, perm):
        return g.op("Transpose", [g.op("Reshape", [x, g.i64([1, S, NH, D])])], perm=perm)

    q, k, v = heads(q, [0, 2, 1, 3]), heads(k, [0, 2, 3, 1]), heads(v, [0, 2, 1, 3])
    w = g.op("Div", [g.op("MatMul", [q, k]), g.f32(math.sqrt(D))])
    # bias[:, :, kl - ql : kl, :kl] with both lengths from the shapes.
    tri = g.init(np.tril(np.ones((P, P), bool)).reshape(1, 1, P, P), "causal")
    ql = g.op("Gather", [g.op("Shape", [q]), g.i64(2)], axis=0)
    kl = g.op("Gather", [g.op("Shape", [k]), g.i64(3)], axis=0)
    start = g.op("Sub", [kl, ql])
    un = lambda t: g.op("Unsqueeze", [t, g.i64([0])])  # noqa: E731
    mask = g.op("Slice", [tri, un(start), un(kl), g.i64([2]), g.i64([1])])
    mask = g.op("Slice", [mask, g.i64([0]), un(kl), g.i64([3]), g.i64([1])])
    w = g.op("Where", [mask, w, g.f32(-10000.0)])
    p = g.op("Softmax", [w], axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.i64([1, S, H])])
    h = g.op("Add", [h, dense(ctx, H, H)])
    f = dense(ln(h), H, 4 * H)
    inner = g.op("Mul", [g.f32(math.sqrt(2 / math.pi)), g.op(
        "Add", [f, g.op("Mul", [g.f32(0.044715), g.op("Pow", [f, g.f32(3.0)])])])])
    gelu = g.op("Mul", [g.op("Mul", [g.f32(0.5), f]),
                        g.op("Add", [g.f32(1.0), g.op("Tanh", [inner])])])
    h = g.op("Add", [h, dense(gelu, 4 * H, H)])
    logits = g.op("MatMul", [ln(h), g.op("Transpose", [wte], perm=[1, 0])])
    g.nodes[-1].output[0] = "logits"
    model = g.model([fin("input_ids", [1, S], TensorProto.INT64)], [fout("logits")], 13)
    ids = np.random.default_rng(7).integers(0, V, (1, S)).astype(np.int64)
    return Case(model, {"input_ids": ids})


# ---------------------------------------------------------------- old opsets


def opset6(modern=False):
    """Opset 6: BatchNormalization with is_test/spatial, Add/Mul with
    broadcast/axis (a per-channel bias on NCHW where W == C, and an [H, W]
    scale), Pad-2 and Clip-6 attributes, Reshape-5, Gemm-6 with broadcast,
    Softmax-1 (2-D coercion), Split-2, Squeeze-1/Unsqueeze-1 attributes, Sum,
    Concat, Flatten; IR 3 (initializers are graph inputs too).

    onnxruntime has no opset-6 kernels and onnx's version converter drops the
    BatchNormalization node, so the reference is the same network written
    independently at opset 13 (modern=True: same seed, same weights)."""
    g = G(60)
    x = g.conv("x", 3, 8, 3, bias=False)
    if modern:
        x = g.bn(x, 8)
        bias = g.vec(8, -0.5, 0.5)
        del g.inits[-1].dims[:]
        g.inits[-1].dims.extend([8, 1, 1])
        x = g.op("Add", [x, bias])
        x = g.op("Mul", [x, g.init(g.rng.uniform(0.5, 1.5, (8, 8)).astype(np.float32))])
        x = g.op("Clip", [x, g.f32(-1.0), g.f32(2.0)])
        x = g.op("Pad", [x, g.i64([0, 0, 1, 2, 0, 0, 1, 0]), g.f32(0.25)], mode="constant")
        a, b = g.op("Split", [x, g.i64([3, 5])], n_out=2, axis=1)
    else:
        x = g.bn(x, 8, is_test=1, spatial=1)
        x = g.op("Add", [x, g.vec(8, -0.5, 0.5)], broadcast=1, axis=1)
        x = g.op("Mul", [x, g.init(g.rng.uniform(0.5, 1.5, (8, 8)).astype(np.float32))],
                 broadcast=1, axis=2)
        x = g.op("Clip", [x], min=-1.0, max=2.0)
        x = g.op("Pad", [x], pads=[0, 0, 1, 2, 0, 0, 1, 0], mode="constant", value=0.25)
        a, b = g.op("Split", [x], n_out=2, axis=1, split=[3, 5])
    a = g.op("MaxPool", [a], kernel_shape=[2, 2], strides=[2, 2])
    b = g.op("AveragePool", [b], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("Concat", [b, a], axis=1)
    s = g.op("Sum", [x, g.op("Relu", [x]), g.op("Sigmoid", [x])])
    f = g.op("Flatten", [s], axis=1)  # [1, 8*5*5]
    r = g.op("Reshape", [s, g.i64([1, -1])])
    w, bias = g.weight(200, 10, fan_in=200), g.vec(10)
    logits = g.op("Gemm", [r, w, bias], **({} if modern else dict(broadcast=1)))
    logits = g.op("Reshape", [logits, g.i64([1, 2, 5])])
    if modern:  # Softmax-1 over axis 1 of [1, 2, 5] is a softmax over all 10
        p = g.op("Softmax", [g.op("Reshape", [logits, g.i64([1, 10])])], axis=1)
        g.op("Reshape", [p, g.i64([1, 2, 5])])
    else:
        g.op("Softmax", [logits], axis=1)
    g.nodes[-1].output[0] = "probs"
    if modern:
        u = g.op("Unsqueeze", [f, g.i64([0, 3])])
        g.op("Squeeze", [u, g.i64([0])])
    else:
        u = g.op("Unsqueeze", [f], axes=[0, 3])
        g.op("Squeeze", [u], axes=[0])
    g.nodes[-1].output[0] = "feat"
    m = g.model([fin("x", [1, 3, 8, 8])],
                [fout("probs", shape=[1, 2, 5]), fout("feat", shape=[1, 200, 1])],
                13 if modern else 6)
    case = Case(m, {"x": image(60, 1, 3, 8, 8)})
    if not modern:
        case.reference = opset6(modern=True).model
    return case


def opset9():
    """Opset 9: Upsample with a scales input, BatchNormalization-9, Slice-1
    attributes, Pad-2, Clip-6, Softmax-1 on a 4-D tensor (coerced to 2-D),
    Unsqueeze/Squeeze attributes, Gemm, Shape subgraph + Reshape."""
    g = G(90)
    x = g.relu(g.bn(g.conv("x", 3, 8, 3), 8))
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    u = g.op("Upsample", [x, g.f32([1.0, 1.0, 2.0, 2.0])], mode="nearest")
    x = g.op("Concat", [u, g.conv("x", 3, 4, 1)], axis=1)
    x = g.op("Slice", [x], axes=[1, 3], starts=[2, 1], ends=[100, -1])  # [1,10,16,14]
    x = g.op("Pad", [x], pads=[0, 0, 0, 1, 0, 0, 0, 1], mode="reflect")
    x = g.op("Clip", [x], min=0.0, max=4.0)
    sm = g.op("Softmax", [g.op("AveragePool", [x], kernel_shape=[4, 4], strides=[4, 4])],
              axis=1)
    g.nodes[-1].output[0] = "sm"
    un = g.op("Unsqueeze", [g.op("GlobalAveragePool", [x])], axes=[0])
    sq = g.op("Squeeze", [un], axes=[0, 3, 4])
    y = g.op("Gemm", [sq, g.weight(4, 10, fan_in=10), g.vec(4)], transB=1, alpha=0.5, beta=2.0)
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 3, 16, 16])], [fout("sm"), fout("y")], 9)
    return Case(m, {"x": image(90, 1, 3, 16, 16)})


def opset11():
    """Opset 11: Pad/Clip with inputs, Resize-11 (linear, align_corners and
    half_pixel), Split-11 attribute with a negative axis, Squeeze/Unsqueeze
    attributes with negative axes, Slice-11 with steps, Softmax-11 on 3-D
    (coerced to 2-D), ReduceMean-11 axes attribute, DepthToSpace."""
    g = G(110)
    x = g.relu(g.conv("x", 3, 8, 3))
    x = g.op("Pad", [x, g.i64([0, 0, 1, 1, 0, 0, 1, 1]), g.f32(0.5)], mode="constant")
    x = g.op("Clip", [x, g.f32(-0.5), g.f32(1.5)])
    r = g.op("Resize", [x, g.f32([]), g.f32([1.0, 1.0, 1.5, 1.5])], mode="linear",
             coordinate_transformation_mode="align_corners")  # [1,8,15,15]
    r2 = g.op("Resize", [x, g.f32([]), g.f32([]), g.i64([1, 8, 12, 7])], mode="linear",
              coordinate_transformation_mode="half_pixel")
    a, b = g.op("Split", [r], n_out=2, axis=-3, split=[4, 4])
    g.op("DepthToSpace", [a], blocksize=2, mode="CRD")  # [1,1,42,42]
    g.nodes[-1].output[0] = "d2s"
    # b[:, :, ::-1, ::2] with a negative step and an out-of-range end
    s = g.op("Slice", [b, g.i64([20, 0]), g.i64([-100, 21]), g.i64([-2, 3]), g.i64([-1, 2])])
    sm = g.op("Softmax", [g.op("Squeeze", [s], axes=[-4])], axis=1)  # [4,21,11]: over 21*11
    g.nodes[-1].output[0] = "sm"
    mean = g.op("ReduceMean", [r2], axes=[-1, 1], keepdims=0)  # [1,12]
    mean = g.op("Unsqueeze", [mean], axes=[-1])
    g.nodes[-1].output[0] = "mean"
    m = g.model([fin("x", [1, 3, 12, 12])], [fout("sm"), fout("mean"), fout("d2s")], 11)
    return Case(m, {"x": image(110, 1, 3, 12, 12)})


def opset13():
    """Opset 13: Split/Squeeze/Unsqueeze/ReduceSum with axes inputs,
    Softmax-13 on an inner axis, Resize-13 with sizes, Pad-13, Clip-13."""
    g = G(130)
    x = g.relu(g.conv("x", 3, 12, 3))
    x = g.op("Resize", [x, "", "", g.i64([1, 12, 13, 11])], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    a, b, c = g.op("Split", [x, g.i64([2, 4, 6])], n_out=3, axis=1)
    a = g.op("Pad", [a, g.i64([0, 0, 0, 1, 0, 0, 0, 0]), g.f32(-1.0)])
    a = g.op("Clip", [a, "", g.f32(0.75)])
    sm = g.op("Softmax", [b], axis=1)  # per position over 4 channels
    sm = g.op("ReduceSum", [sm, g.i64([2, 3])], keepdims=0)
    g.nodes[-1].output[0] = "ch_sum"
    u = g.op("Unsqueeze", [g.op("ReduceMax", [c], axes=[1], keepdims=0), g.i64([0, -1])])
    sq = g.op("Squeeze", [u, g.i64([0, 1])])
    g.nodes[-1].output[0] = "sq"
    am = g.op("ArgMax", [a], axis=3, keepdims=0)
    g.nodes[-1].output[0] = "am"
    g.nodes.append(helper.make_node("Identity", [a], ["clipped"]))
    m = g.model([fin("x", [1, 3, 9, 9])],
                [fout("ch_sum"), fout("sq"), fout("am", TensorProto.INT64), fout("clipped")],
                13)
    return Case(m, {"x": image(130, 1, 3, 9, 9)})


# ---------------------------------------------------------------- exporters' habits


def legacy_pytorch():
    """torch.onnx (TorchScript exporter, do_constant_folding=False, opset 11):
    x.view(x.size(0), -1) as Shape->Gather->Unsqueeze->Concat->Reshape, weights
    from Constant nodes, a ConstantOfShape bias, Cast of a float64 and an
    int32 initializer, integer Div on shapes (x.size(1) // 2)."""
    g = G(11)
    w_const = g.op("Constant", [], value=numpy_helper.from_array(
        (g.rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32), "cw"))
    bias = g.op("ConstantOfShape", [g.op("Constant", [], value=numpy_helper.from_array(
        np.array([16], np.int64), "bs"))], value=numpy_helper.from_array(
            np.array([0.1], np.float32), "v"))
    x = g.op("Conv", ["input.1", w_const, bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = g.relu(x)
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    # x.view(x.size(0), x.size(1) // 2, -1)
    shp = g.op("Shape", [x])
    n = g.op("Gather", [shp, g.op("Constant", [], value=numpy_helper.from_array(
        np.array(0, np.int64), "i0"))], axis=0)
    c = g.op("Gather", [shp, g.op("Constant", [], value=numpy_helper.from_array(
        np.array(1, np.int64), "i1"))], axis=0)
    c2 = g.op("Div", [c, g.op("Constant", [], value=numpy_helper.from_array(
        np.array(2, np.int64), "two"))])
    parts = [g.op("Unsqueeze", [t], axes=[0]) for t in (n, c2)]
    parts.append(g.op("Constant", [], value=numpy_helper.from_array(
        np.array([-1], np.int64), "m1")))
    x = g.op("Reshape", [x, g.op("Concat", parts, axis=0)])  # [1, 8, 512]
    w64 = g.init(g.rng.standard_normal((512, 32)) * 0.05, "w64")  # float64
    x = g.op("MatMul", [x, g.op("Cast", [w64], to=TensorProto.FLOAT)])
    scale = g.init(np.array([3], np.int32), "scale_i32")
    x = g.op("Mul", [x, g.op("Cast", [scale], to=TensorProto.FLOAT)])
    # x.flatten(1) via Shape->Slice->Concat (legacy flatten export)
    shp2 = g.op("Shape", [x])
    head = g.op("Slice", [shp2, g.i64([0]), g.i64([1]), g.i64([0])])
    x = g.op("Reshape", [x, g.op("Concat", [head, g.i64([-1])], axis=0)])
    x = g.op("Gemm", [x, g.weight(10, 256), g.vec(10)], transB=1)
    g.nodes[-1].output[0] = "output"
    m = g.model([fin("input.1", [1, 3, 32, 32])], [fout("output", shape=[1, 10])], 11,
                producer="pytorch")
    return Case(m, {"input.1": image(11, 1, 3, 32, 32)})


def dynamo_style():
    """torch.onnx.export(dynamo=True) style, opset 18: everything in value_info,
    Split with num_outputs, ReduceMean with an axes input, Shape with
    start/end, Expand, CastLike, Constant value_ints/value_float, Reshape
    with allowzero=0, LayerNormalization, Transpose, Softmax."""
    g = G(18)
    T, C = 16, 64
    x = "l_x_"
    h = g.op("LayerNormalization", [x, g.vec(C, 0.9, 1.1), g.vec(C)], axis=-1, epsilon=1e-5)
    qkv = g.op("MatMul", [h, g.weight(C, 3 * C, fan_in=C, scale=0.5)])
    q, k, v = g.op("Split", [qkv], n_out=3, axis=-1, num_outputs=3)
    tc = g.op("Shape", [x], start=0, end=2)  # [1, T]
    shape4 = g.op("Concat", [tc, g.op("Constant", [], value_ints=[4, C // 4])], axis=0)
    heads = [g.op("Transpose", [g.op("Reshape", [t, shape4], allowzero=0)], perm=[0, 2, 1, 3])
             for t in (q, k, v)]
    att = g.op("MatMul", [heads[0], g.op("Transpose", [heads[1]], perm=[0, 1, 3, 2])])
    att = g.op("Mul", [att, g.op("CastLike", [g.op("Constant", [], value_float=0.25), att])])
    att = g.op("Softmax", [att], axis=-1)
    o = g.op("Transpose", [g.op("MatMul", [att, heads[2]])], perm=[0, 2, 1, 3])
    o = g.op("Reshape", [o, g.op("Concat", [tc, g.op("Constant", [], value_ints=[-1])],
                                       axis=0)])
    y = g.op("Add", [x, o])
    mu = g.op("ReduceMean", [y, g.op("Constant", [], value_ints=[-1])], keepdims=1)
    bias = g.op("Expand", [g.vec(C), g.op("Shape", [y])])
    out = g.op("Add", [g.op("Sub", [y, mu]), bias])
    g.nodes[-1].output[0] = "add_3"
    m = g.model([fin(x, [1, T, C])], [fout("add_3")], 18, producer="pytorch")
    m = onnx.shape_inference.infer_shapes(m)  # dynamo writes value_info for everything
    return Case(m, {x: image(18, 1, T, C)})


def dynamo_functions():
    """Older dynamo exporter (onnxscript torch_lib): the graph calls
    model-local functions in a custom domain."""
    g = G(19)
    fn = helper.make_function(
        "pkg.torch_lib", "aten_gelu", ["self"], ["result"],
        [helper.make_node("Constant", [], ["half"], value_float=0.5),
         helper.make_node("Constant", [], ["one"], value_float=1.0),
         helper.make_node("Constant", [], ["rs2"], value_float=1 / math.sqrt(2)),
         helper.make_node("Mul", ["self", "rs2"], ["t0"]),
         helper.make_node("Erf", ["t0"], ["t1"]),
         helper.make_node("Add", ["t1", "one"], ["t2"]),
         helper.make_node("Mul", ["self", "t2"], ["t3"]),
         helper.make_node("Mul", ["t3", "half"], ["result"])],
        [helper.make_opsetid("", 18)])
    x = g.op("MatMul", ["x", g.weight(32, 32)])
    g.nodes.append(helper.make_node("aten_gelu", [x], ["y"], domain="pkg.torch_lib"))
    m = g.model([fin("x", [2, 32])], [fout("y")], 18, functions=[fn],
                extra_opsets=[("pkg.torch_lib", 1)])
    return Case(m, {"x": image(19, 2, 32)})


def unet_decoder():
    """A UNet/FCN decoder as PyTorch writes ConvTranspose2d (opset 17):
    stride-2 transposed convolutions with output_padding and groups, a skip
    Concat, GroupNormalization-free BN+ReLU, and a 1x1 head."""
    g = G(91)
    x = g.relu(g.conv("x", 4, 16, 3, stride=2))  # 16x16 -> 8x8
    w1 = g.weight(16, 8, 3, 3)
    u1 = g.op("ConvTranspose", [x, w1, g.vec(8)], kernel_shape=[3, 3], strides=[2, 2],
              pads=[1, 1, 1, 1], output_padding=[1, 1])  # 8 -> 16
    cat = g.op("Concat", [g.relu(u1), "x"], axis=1)  # 12 channels
    w2 = g.weight(12, 3, 4, 4)
    u2 = g.op("ConvTranspose", [cat, w2], kernel_shape=[4, 4], strides=[2, 2],
              pads=[1, 1, 1, 1], group=3)  # 16 -> 32, 9 channels
    head = g.conv(g.relu(g.bn(u2, 9)), 9, 2, 1)
    g.op("Identity", [head])
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 4, 16, 16])], [fout("y")], 17)
    return Case(m, {"x": image(91, 1, 4, 16, 16)})


def keras_nhwc():
    """tf2onnx / keras2onnx style: an NHWC input transposed to NCHW around
    every convolution block and back, Conv with auto_pad SAME_UPPER and
    stride 2, depthwise conv, BatchNorm folded to Mul/Add on the channels-last
    axis, ReLU6 as Clip, GlobalAveragePooling as ReduceMean over H,W, Dense as
    MatMul+Add, Softmax on the last axis."""
    g = G(40)

    def conv_nhwc(x, cin, cout, k, stride=1, group=1):
        t = g.op("Transpose", [x], perm=[0, 3, 1, 2])
        w = g.weight(cout, cin // group, k, k)
        t = g.op("Conv", [t, w, g.vec(cout)], kernel_shape=[k, k], strides=[stride, stride],
                 auto_pad="SAME_UPPER", group=group, dilations=[1, 1])
        return g.op("Transpose", [t], perm=[0, 2, 3, 1])

    def bn_relu6(x, c):
        x = g.op("Add", [g.op("Mul", [x, g.vec(c, 0.5, 1.5)]), g.vec(c)])
        return g.op("Clip", [x, g.f32(0.0), g.f32(6.0)])

    x = bn_relu6(conv_nhwc("input_1", 3, 16, 3, stride=2), 16)  # 15x15 -> 8x8
    x = bn_relu6(conv_nhwc(x, 16, 16, 3, group=16), 16)
    x = bn_relu6(conv_nhwc(x, 16, 24, 1), 24)
    y = conv_nhwc(x, 24, 24, 3, stride=2)  # 8 -> 4, SAME_UPPER pads 0/1
    y = g.op("Identity", [y])
    x = g.op("ReduceMean", [y], axes=[1, 2], keepdims=0)
    x = g.op("Add", [g.op("MatMul", [x, g.weight(24, 5)]), g.vec(5)])
    x = g.op("Softmax", [x], axis=-1)
    g.nodes[-1].output[0] = "dense"
    m = g.model([fin("input_1", [1, 15, 15, 3])], [fout("dense")], 13, producer="tf2onnx")
    return Case(m, {"input_1": image(40, 1, 15, 15, 3)})


def heads_flatten_reshape():
    """Classifier heads: Flatten(axis=1) -> Gemm, Reshape([0, -1]) -> MatMul
    (0 copies the batch dim), Flatten(axis=2), Flatten(axis=0)."""
    g = G(41)
    x = g.relu(g.conv("x", 4, 6, 3))  # [2,6,5,5]
    a = g.op("Gemm", [g.op("Flatten", [x], axis=1), g.weight(150, 3), g.vec(3)])
    g.nodes[-1].output[0] = "a"
    b = g.op("MatMul", [g.op("Reshape", [x, g.i64([0, -1])]), g.weight(150, 3)])
    g.nodes[-1].output[0] = "b"
    c = g.op("Flatten", [x], axis=2)  # [12, 25]
    g.nodes[-1].output[0] = "c"
    d = g.op("Flatten", [x], axis=0)  # [1, 300]
    g.nodes[-1].output[0] = "d"
    m = g.model([fin("x", [2, 4, 5, 5])], [fout(n) for n in "abcd"], 13)
    return Case(m, {"x": image(41, 2, 4, 5, 5)})


def identity_dropout():
    """Inference graphs that keep training ops: Dropout-6 with is_test,
    Dropout-7 with ratio, a Dropout whose mask output is declared but unused,
    Dropout-12 with ratio and training_mode inputs (opset 12 graph), chains
    of Identity, and an Identity as a graph output."""
    g = G(42)
    x = g.relu(g.conv("x", 3, 8, 3))
    x = g.op("Identity", [g.op("Identity", [x])])
    y, _mask = g.op("Dropout", [x], n_out=2)
    y = g.op("Dropout", [y, g.f32(0.1), g.init(np.array(False), "train")])
    y = g.op("Conv", [y, g.weight(4, 8, 1, 1), g.vec(4)], kernel_shape=[1, 1])
    g.nodes.append(helper.make_node("Identity", [y], ["out"]))
    m = g.model([fin("x", [1, 3, 8, 8])], [fout("out")], 12)
    return Case(m, {"x": image(42, 1, 3, 8, 8)})


def dropout_opset6(modern=False):
    """Dropout-6 with is_test=1 and with a ratio in an opset 6 graph
    (Caffe2-era exports). onnxruntime has no Dropout-6 kernel: the reference
    is the same graph at opset 13 with Identity for each Dropout."""
    g = G(43)
    x = g.relu(g.conv("x", 3, 4, 3))
    if modern:
        x = g.op("Identity", [g.op("Identity", [x])])
    else:
        x = g.op("Dropout", [x], is_test=1, ratio=0.5)
        x = g.op("Dropout", [x], ratio=0.2)
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 3, 6, 6])], [fout("y", shape=[1, 4, 6, 6])], 13 if modern else 6)
    case = Case(m, {"x": image(43, 1, 3, 6, 6)})
    if not modern:
        case.reference = dropout_opset6(modern=True).model
    return case


# ---------------------------------------------------------------- more architectures


I64_MAX = np.iinfo(np.int64).max


def yolo_style():
    """YOLOv5-style (opset 12): Focus slicing x[..., ::2, ::2] with INT64_MAX
    ends, SiLU as x*Sigmoid(x), LeakyRelu, MaxPool SPP branches, nearest
    Resize with scales, Concat of skip connections, a detection head
    Reshape [B, 3, 9, H, W] -> Transpose -> Sigmoid; batch 2."""
    g = G(70)
    x = "images"
    parts = []
    for h0, w0 in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        parts.append(g.op("Slice", [x, g.i64([h0, w0]), g.i64([I64_MAX, I64_MAX]),
                                    g.i64([2, 3]), g.i64([2, 2])]))
    x = g.op("Concat", parts, axis=1)  # [2,12,16,16]

    def cs(x, cin, cout, k, stride=1):
        y = g.bn(g.conv(x, cin, cout, k, stride=stride, bias=False), cout)
        return g.op("Mul", [y, g.op("Sigmoid", [y])])

    x = cs(x, 12, 16, 3)
    c1 = cs(x, 16, 32, 3, stride=2)  # [2,32,8,8]
    c2 = g.op("LeakyRelu", [g.conv(c1, 32, 32, 3, stride=2)], alpha=0.1)  # [2,32,4,4]
    # SPP: parallel max pools, concatenated
    pools = [g.op("MaxPool", [c2], kernel_shape=[k, k], strides=[1, 1], pads=[k // 2] * 4)
             for k in (5, 9, 13)]
    spp = cs(g.op("Concat", [c2] + pools, axis=1), 128, 32, 1)
    up = g.op("Resize", [spp, g.f32([]), g.f32([1, 1, 2, 2])], mode="nearest")
    p3 = cs(g.op("Concat", [up, c1], axis=1), 64, 32, 3)

    def head(x, cin, hw):
        y = g.conv(x, cin, 27, 1)
        y = g.op("Reshape", [y, g.i64([2, 3, 9, hw, hw])])
        return g.op("Sigmoid", [g.op("Transpose", [y], perm=[0, 1, 3, 4, 2])])

    g.op("Identity", [head(p3, 32, 8)])
    g.nodes[-1].output[0] = "p3"
    g.op("Identity", [head(spp, 32, 4)])
    g.nodes[-1].output[0] = "p4"
    m = g.model([fin("images", [2, 3, 32, 32])], [fout("p3"), fout("p4")], 12)
    return Case(m, {"images": image(70, 2, 3, 32, 32)})


def unet_style():
    """UNet-style segmentation (opset 11): encoder with MaxPool, decoder with
    Resize bilinear align_corners=True (PyTorch's Upsample(align_corners=True))
    and Resize with sizes taken from the skip tensor's Shape, skip Concats,
    per-pixel Softmax over classes (axis=1 at opset 13 form via Transpose)."""
    g = G(71)

    def cbr(x, cin, cout):
        return g.relu(g.bn(g.conv(x, cin, cout, 3, bias=False), cout))

    e1 = cbr("x", 3, 8)  # 24x24
    e2 = cbr(g.op("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2]), 8, 16)  # 12
    e3 = cbr(g.op("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2]), 16, 32)  # 6
    u2 = g.op("Resize", [e3, g.f32([]), g.f32([1, 1, 2, 2])], mode="linear",
              coordinate_transformation_mode="align_corners")
    d2 = cbr(g.op("Concat", [u2, e2], axis=1), 48, 16)
    # F.interpolate(d2, size=e1.shape[2:]): sizes = d2's N, C and e1's H, W
    sizes = g.op("Concat", [g.op("Slice", [g.op("Shape", [d2]), g.i64([0]), g.i64([2])]),
                            g.op("Slice", [g.op("Shape", [e1]), g.i64([2]), g.i64([4])])],
                 axis=0)
    u1 = g.op("Resize", [d2, g.f32([]), g.f32([]), sizes], mode="linear",
              coordinate_transformation_mode="pytorch_half_pixel")
    d1 = cbr(g.op("Concat", [u1, e1], axis=1), 24, 8)
    logits = g.conv(d1, 8, 5, 1)
    # Softmax over channels, written the opset-11 way: move C last first.
    t = g.op("Transpose", [logits], perm=[0, 2, 3, 1])
    p = g.op("Softmax", [t], axis=3)
    g.op("Transpose", [p], perm=[0, 3, 1, 2])
    g.nodes[-1].output[0] = "mask"
    m = g.model([fin("x", [1, 3, 24, 24])], [fout("mask")], 11)
    return Case(m, {"x": image(71, 1, 3, 24, 24)})


def vit_style():
    """ViT (opset 17): 8x8/8 patch-embedding Conv, Flatten(2)-style Reshape,
    Transpose, a class token Expanded and Concatenated, position embedding,
    pre-norm LayerNormalization, attention with a Mul by 1/sqrt(d), Erf gelu
    MLP, the class token taken by Gather(index 0, axis 1), batch 2."""
    B, C, P, N, H, NH = 2, 3, 8, 16, 64, 4
    D = H // NH
    g = G(72)
    x = g.conv("pixel_values", C, H, P, stride=P, pad=0)  # [B,64,4,4]
    x = g.op("Transpose", [g.op("Reshape", [x, g.i64([B, H, N])])], perm=[0, 2, 1])
    cls = g.init((g.rng.standard_normal((1, 1, H)) * 0.5).astype(np.float32), "cls")
    cls = g.op("Expand", [cls, g.i64([B, 1, H])])
    x = g.op("Concat", [cls, x], axis=1)  # [B,17,64]
    x = g.op("Add", [x, g.init((g.rng.standard_normal((1, N + 1, H)) * 0.1).astype(
        np.float32), "pos")])

    def ln(x):
        return g.op("LayerNormalization", [x, g.vec(H, 0.8, 1.2), g.vec(H)], epsilon=1e-6)

    def dense(x, cin, cout):
        return g.op("Add", [g.op("MatMul", [x, g.weight(cin, cout, scale=0.7)]), g.vec(cout)])

    h = ln(x)
    q, k, v = [g.op("Transpose", [g.op("Reshape", [dense(h, H, H), g.i64([B, -1, NH, D])])],
                    perm=[0, 2, 1, 3]) for _ in range(3)]
    q = g.op("Mul", [q, g.f32(1 / math.sqrt(D))])
    a = g.op("Softmax", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])],
             axis=-1)
    o = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [a, v])], perm=[0, 2, 1, 3]),
                         g.i64([B, -1, H])])
    x = g.op("Add", [x, dense(o, H, H)])
    f = dense(ln(x), H, 4 * H)
    f = g.op("Mul", [g.op("Mul", [f, g.f32(0.5)]), g.op("Add", [g.f32(1.0), g.op(
        "Erf", [g.op("Mul", [f, g.f32(1 / math.sqrt(2))])])])])
    x = g.op("Add", [x, dense(f, 4 * H, H)])
    c = g.op("Gather", [ln(x), g.i64(0)], axis=1)  # [B, H]
    g.op("Gemm", [c, g.weight(10, H), g.vec(10)], transB=1)
    g.nodes[-1].output[0] = "logits"
    m = g.model([fin("pixel_values", [B, C, 32, 32])], [fout("logits", shape=[B, 10])], 17)
    return Case(m, {"pixel_values": image(72, B, C, 32, 32)})


def mobilenet_v3_style():
    """MobileNetV3 blocks (opset 14): HardSwish and HardSigmoid operators,
    squeeze-excitation (GlobalAveragePool -> 1x1 convs -> HardSigmoid -> Mul
    broadcast over H, W), and the older decomposed hard-swish
    x * Clip(x + 3, 0, 6) / 6; EfficientNet's Swish as x * Sigmoid(x)."""
    g = G(73)

    def se(x, c):
        s = g.op("GlobalAveragePool", [x])
        s = g.relu(g.conv(s, c, c // 4, 1))
        s = g.op("HardSigmoid", [g.conv(s, c // 4, c, 1)], alpha=1 / 6, beta=0.5)
        return g.op("Mul", [x, s])

    x = g.bn(g.conv("x", 3, 16, 3, stride=2, bias=False), 16)
    x = g.op("HardSwish", [x])
    y = g.relu(g.bn(g.conv(x, 16, 16, 3, group=16, bias=False), 16))
    x = g.op("Add", [x, g.bn(g.conv(se(y, 16), 16, 16, 1, bias=False), 16)])
    y = g.bn(g.conv(x, 16, 64, 1, bias=False), 64)
    y = g.op("Div", [g.op("Mul", [y, g.op("Clip", [g.op("Add", [y, g.f32(3.0)]), g.f32(0.0),
                                                   g.f32(6.0)])]), g.f32(6.0)])
    y = g.bn(g.conv(y, 64, 64, 5, stride=2, group=64, bias=False), 64)
    y = g.op("Mul", [y, g.op("Sigmoid", [y])])
    y = se(y, 64)
    y = g.bn(g.conv(y, 64, 24, 1, bias=False), 24)
    y = g.op("HardSwish", [y])
    y = g.op("ReduceMean", [y], axes=[2, 3], keepdims=1)
    g.op("Flatten", [y])
    g.nodes[-1].output[0] = "features"
    m = g.model([fin("x", [1, 3, 40, 40])], [fout("features")], 14)
    return Case(m, {"x": image(73, 1, 3, 40, 40)})


def resnext_groups():
    """ResNeXt-style grouped convolutions (groups=8, not depthwise), a dilated
    3x3 conv (DeepLab), Conv auto_pad SAME_LOWER, Gemm with transA and a
    [M, 1] C broadcast; batch 3."""
    g = G(74)
    x = g.relu(g.bn(g.conv("x", 3, 32, 3, bias=False), 32))
    y = g.relu(g.bn(g.conv(x, 32, 64, 1, bias=False), 64))
    y = g.relu(g.bn(g.conv(y, 64, 64, 3, group=8, bias=False), 64))
    y = g.bn(g.conv(y, 64, 32, 1, bias=False), 32, gamma=0.5)
    x = g.relu(g.op("Add", [x, y]))
    x = g.relu(g.conv(x, 32, 32, 3, dilation=2))  # pads 2
    x = g.op("Conv", [x, g.weight(16, 32, 4, 4), g.vec(16)], kernel_shape=[4, 4],
             strides=[2, 2], auto_pad="SAME_LOWER")  # [3,16,6,6]
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Reshape", [x, g.i64([3, 16])])
    xt = g.op("Transpose", [x], perm=[1, 0])  # [16, 3]
    g.op("Gemm", [xt, g.weight(16, 7), g.f32(g.rng.uniform(-1, 1, (3, 1)))],
         transA=1, alpha=0.7, beta=0.3)
    g.nodes[-1].output[0] = "out"
    m = g.model([fin("x", [3, 3, 12, 12])], [fout("out")], 13)
    return Case(m, {"x": image(74, 3, 3, 12, 12)})


def pool_edges():
    """Pooling window edges: MaxPool and AveragePool with ceil_mode and pads
    (count_include_pad 0 and 1), strides larger than kernels, dilated MaxPool,
    1-D pooling and GlobalMaxPool."""
    g = G(75)
    x = "x"  # [2, 3, 11, 13]
    outs = {
        "mp_ceil": g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        ceil_mode=1),
        "ap_ceil_excl": g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 0, 1, 1], ceil_mode=1, count_include_pad=0),
        "ap_ceil_incl": g.op("AveragePool", [x], kernel_shape=[3, 2], strides=[2, 3],
                             pads=[1, 1, 0, 1], ceil_mode=1, count_include_pad=1),
        "mp_stride": g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[3, 3]),
        "mp_dil": g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[1, 1],
                       dilations=[2, 2]),
        "gmp": g.op("GlobalMaxPool", [x]),
        "mp1d": g.op("MaxPool", [g.op("Reshape", [x, g.i64([2, 3, -1])])], kernel_shape=[4],
                     strides=[3], pads=[1, 2]),
    }
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [2, 3, 11, 13])], [fout(n) for n in outs], 12)
    return Case(m, {"x": image(75, 2, 3, 11, 13)})


def norms_1d():
    """BatchNorm1d on [N, C] and [N, C, L] (BatchNormalization-15 with
    training_mode=0), Conv1d with padding and stride, GroupNorm as legacy
    PyTorch exports it (Reshape [N, G, -1] -> InstanceNormalization ->
    Reshape back -> Mul/Add with unsqueezed affine parameters)."""
    g = G(76)
    x = g.op("Conv", ["seq", g.weight(16, 4, 5), g.vec(16)], kernel_shape=[5], pads=[2, 2],
             strides=[2])  # [2,16,10]
    x = g.bn(x, 16, training_mode=0)
    x = g.relu(x)
    gn = g.op("Reshape", [x, g.i64([2, 4, -1])])
    gn = g.op("InstanceNormalization", [gn, g.f32(np.ones(4)), g.f32(np.zeros(4))],
              epsilon=1e-5)
    gn = g.op("Reshape", [gn, g.op("Shape", [x])])
    gamma = g.op("Unsqueeze", [g.vec(16, 0.5, 1.5), g.i64([1])])
    beta = g.op("Unsqueeze", [g.vec(16), g.i64([1])])
    gn = g.op("Add", [g.op("Mul", [gn, gamma]), beta])
    g.op("Identity", [gn])
    g.nodes[-1].output[0] = "gn"
    flat = g.op("ReduceMax", [gn], axes=[2], keepdims=0)  # [2,16]
    g.bn(flat, 16)
    g.nodes[-1].output[0] = "bn2d"
    m = g.model([fin("seq", [2, 4, 20])], [fout("gn"), fout("bn2d")], 15)
    return Case(m, {"seq": image(76, 2, 4, 20)})


def odd_outputs():
    """Graph outputs exporters do write: a graph input passed through
    Identity, the same tensor as two outputs, an output that folds to a
    constant, an int64 shape output, and an intermediate also consumed
    later."""
    g = G(77)
    r = g.relu("x")
    g.nodes.append(helper.make_node("Identity", ["x"], ["passthrough"]))
    g.nodes.append(helper.make_node("Identity", [r], ["relu_a"]))
    g.nodes.append(helper.make_node("Identity", [r], ["relu_b"]))
    g.nodes.append(helper.make_node("Add", [r, "relu_a"], ["sum"]))
    c = g.op("Mul", [g.f32(np.arange(6, dtype=np.float32).reshape(2, 3)), g.f32(2.0)])
    g.nodes.append(helper.make_node("Identity", [c], ["const"]))
    g.nodes.append(helper.make_node("Shape", ["sum"], ["shape"]))
    m = g.model([fin("x", [2, 5])], [fout("passthrough"), fout("relu_a"), fout("relu_b"),
                                     fout("sum"), fout("const"),
                                     fout("shape", TensorProto.INT64)], 13)
    return Case(m, {"x": image(77, 2, 5)})


def legacy_upsample_bilinear():
    """PyTorch 1.x F.interpolate at opset 9: Upsample(mode=linear) with a
    scales input computed by a shape subgraph (Shape -> Slice -> Cast ->
    Div -> Concat), then a Pad-2 edge pad and Squeeze of a 1-size dim."""
    g = G(78)
    x = g.conv("x", 2, 4, 3)  # [1,4,5,7]
    shp = g.op("Cast", [g.op("Shape", [x])], to=TensorProto.FLOAT)
    hw = g.op("Slice", [shp], axes=[0], starts=[2], ends=[4])
    target = g.f32([10.0, 14.0])
    sc = g.op("Concat", [g.f32([1.0, 1.0]), g.op("Div", [target, hw])], axis=0)
    u = g.op("Upsample", [x, sc], mode="linear")
    u = g.op("Pad", [u], pads=[0, 0, 2, 1, 0, 0, 0, 3], mode="edge")
    s = g.op("Squeeze", [g.op("ReduceSum", [u], axes=[1], keepdims=1)], axes=[1])
    g.nodes[-1].output[0] = "y"
    m = g.model([fin("x", [1, 2, 5, 7])], [fout("y")], 9)
    return Case(m, {"x": image(78, 1, 2, 5, 7)})


def llama_style():
    """A Llama-style decoder layer (opset 17, as optimum exports it): RMSNorm
    (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul), rotary embeddings (Slice of
    the two halves, Neg, Concat, Mul by cos/sin tables Gathered by position
    ids), grouped-query attention (KV heads repeated by Unsqueeze, Expand,
    Reshape), a causal mask from Trilu over ConstantOfShape, SwiGLU MLP;
    batch 2 with a per-sequence padding mask."""
    B, S, H, NH, KV, F = 2, 24, 128, 4, 2, 256
    D = H // NH
    g = G(79)

    def rms(x):
        v = g.op("ReduceMean", [g.op("Pow", [x, g.f32(2.0)])], axes=[-1], keepdims=1)
        r = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [v, g.f32(1e-6)])])])
        return g.op("Mul", [g.vec(H, 0.8, 1.2), g.op("Mul", [x, r])])

    def proj(x, cin, cout):
        return g.op("MatMul", [x, g.weight(cin, cout, scale=0.7)])

    inv = 1.0 / (10000 ** (np.arange(0, D, 2) / D))
    ang = np.outer(np.arange(64), inv)
    emb = np.concatenate([ang, ang], axis=1)
    cos = g.init(np.cos(emb).astype(np.float32), "cos_cached")
    sin = g.init(np.sin(emb).astype(np.float32), "sin_cached")
    pos = "position_ids"
    cos_p = g.op("Unsqueeze", [g.op("Gather", [cos, pos]), g.i64([1])])  # [B,1,S,D]
    sin_p = g.op("Unsqueeze", [g.op("Gather", [sin, pos]), g.i64([1])])

    def rotary(x):  # x: [B, heads, S, D]
        x1 = g.op("Slice", [x, g.i64([0]), g.i64([D // 2]), g.i64([-1])])
        x2 = g.op("Slice", [x, g.i64([D // 2]), g.i64([I64_MAX]), g.i64([-1])])
        rot = g.op("Concat", [g.op("Neg", [x2]), x1], axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos_p]), g.op("Mul", [rot, sin_p])])

    def heads(x, n):
        return g.op("Transpose", [g.op("Reshape", [x, g.i64([B, S, n, D])])], perm=[0, 2, 1, 3])

    x = "inputs_embeds"
    h = rms(x)
    q = rotary(heads(proj(h, H, H), NH))
    k = rotary(heads(proj(h, H, KV * D), KV))
    v = heads(proj(h, H, KV * D), KV)

    def repeat_kv(t):  # [B, KV, S, D] -> [B, NH, S, D]
        t = g.op("Unsqueeze", [t, g.i64([2])])
        t = g.op("Expand", [t, g.i64([B, KV, NH // KV, S, D])])
        return g.op("Reshape", [t, g.i64([B, NH, S, D])])

    k, v = repeat_kv(k), repeat_kv(v)
    # causal + padding mask: 0 where allowed, -inf-ish where not
    ones = g.op("ConstantOfShape", [g.i64([S, S])], value=numpy_helper.from_array(
        np.array([1.0], np.float32), "one"))
    causal = g.op("Trilu", [ones], upper=0)  # 1 on and below the diagonal
    pad = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.i64([1, 2])])],
               to=TensorProto.FLOAT)  # [B,1,1,S]
    allowed = g.op("Mul", [causal, pad])
    bias = g.op("Mul", [g.op("Sub", [g.f32(1.0), allowed]), g.f32(-3.0e38)])
    att = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]),
                       g.f32(math.sqrt(D))])
    att = g.op("Softmax", [g.op("Add", [att, bias])], axis=-1)
    o = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [att, v])], perm=[0, 2, 1, 3]),
                         g.i64([B, S, H])])
    x = g.op("Add", [x, proj(o, H, H)])
    h = rms(x)
    gate = proj(h, H, F)
    up = proj(h, H, F)
    act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
    g.op("Add", [x, proj(act, F, H)])
    g.nodes[-1].output[0] = "hidden"
    mask = np.ones((B, S), np.int64)
    mask[1, 18:] = 0  # the second sequence is padded at its end
    m = g.model([fin("inputs_embeds", [B, S, H]),
                 fin("attention_mask", [B, S], TensorProto.INT64),
                 fin("position_ids", [B, S], TensorProto.INT64)], [fout("hidden")], 17)
    pos_ids = np.tile(np.arange(S, dtype=np.int64), (B, 1))
    return Case(m, {"inputs_embeds": image(79, B, S, H), "attention_mask": mask,
                    "position_ids": pos_ids})


def matmul_broadcast():
    """MatMul and Gemm shapes exporters emit: a 4-D activation by a 2-D
    weight, a 1-D vector on either side, batch dims broadcast both ways
    ([2,1,3,4] x [1,5,4,6]), a 2-D matrix times a batched one, Gemm with
    transA/transB and a scalar C."""
    g = G(80)
    a = "a"  # [2, 1, 3, 4]
    outs = {
        "w2d": g.op("MatMul", [a, g.weight(4, 6)]),                       # [2,1,3,6]
        "bcast": g.op("MatMul", [a, "b"]),                                 # [2,5,3,6]
        "vec_left": g.op("MatMul", [g.f32(g.rng.uniform(-1, 1, 4)), "b"]),  # [1,5,6]
        "vec_right": g.op("MatMul", [a, g.f32(g.rng.uniform(-1, 1, 4))]),  # [2,1,3]
        "mat_batched": g.op("MatMul", [g.weight(7, 4), "b"]),              # [1,5,7,6]
        "gemm": g.op("Gemm", [g.op("Reshape", [a, g.i64([4, 6])]), g.weight(5, 4),
                              g.f32(0.5)], transA=1, transB=1, alpha=2.0, beta=-1.0),
    }
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("a", [2, 1, 3, 4]), fin("b", [1, 5, 4, 6])], [fout(n) for n in outs], 13)
    return Case(m, {"a": image(80, 2, 1, 3, 4), "b": image(81, 1, 5, 4, 6)})


def int_numerics():
    """Integer and rounding semantics traced PyTorch graphs depend on: Cast
    float -> int32/int64 of negatives (truncation), integer Div of negatives
    (truncation), Mod with fmod=0 (sign of the divisor) and fmod=1, Floor,
    Ceil, Round (half to even), Sign, Clip on int64, Where on a comparison,
    Pow of a negative base by an integral exponent."""
    g = G(82)
    x = "x"  # float [2, 6]
    xi = g.op("Cast", [g.op("Mul", [x, g.f32(3.0)])], to=TensorProto.INT64)
    outs = {
        "cast_i64": xi,
        "cast_i32": g.op("Cast", [g.op("Mul", [x, g.f32(5.0)])], to=TensorProto.INT32),
        "div_i64": g.op("Div", [xi, g.i64([2, -3, 4, -5, 3, 2])]),
        "mod_i64": g.op("Mod", [xi, g.i64([2, -3, 4, -5, 3, 2])]),
        "fmod_f32": g.op("Mod", [x, g.f32([0.7, -0.4, 0.3, -1.1, 0.9, 0.25])], fmod=1),
        "floor": g.op("Floor", [g.op("Mul", [x, g.f32(2.0)])]),
        "ceil": g.op("Ceil", [g.op("Mul", [x, g.f32(2.0)])]),
        "round": g.op("Round", [g.op("Add", [g.op("Floor", [g.op("Mul", [x, g.f32(4.0)])]),
                                    g.f32(0.5)])]),
        "sign": g.op("Sign", [xi]),
        "clip_i64": g.op("Clip", [xi, g.i64(-2), g.i64(3)]),
        "where": g.op("Where", [g.op("Greater", [x, g.f32(0.0)]), x,
                                g.op("Mul", [x, g.f32(0.01)])]),
        "pow_neg": g.op("Pow", [g.op("Sub", [x, g.f32(0.5)]), g.f32(3.0)]),
        "pow_int": g.op("Pow", [x, g.i64(2)]),
    }
    types = {"cast_i64": TensorProto.INT64, "cast_i32": TensorProto.INT32,
             "div_i64": TensorProto.INT64, "mod_i64": TensorProto.INT64,
             "sign": TensorProto.INT64, "clip_i64": TensorProto.INT64}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [2, 6])],
                [fout(n, types.get(n, TensorProto.FLOAT)) for n in outs], 13)
    x = np.array([[-1.9, -1.2, -0.6, -0.1, 0.4, 0.95],
                  [1.3, -2.7, 2.1, -0.35, 0.05, -0.95]], np.float32)
    return Case(m, {"x": x})


def lstm_sequence():
    """A two-layer LSTM over a padded batch (opset 14, as torch.nn.LSTM exports
    with packed sequences): a bidirectional layer with biases, initial states,
    peepholes and per-sequence lengths (12, 7 and 1 steps of 12) given at run
    time, then a reverse layer with a cell clip and coupled input-forget
    gates on its concatenated outputs. compiler/frontend/onnx_recurrent.cc
    unrolls both over their time steps."""
    g = G(90)
    T, B, I, H = 12, 3, 8, 16
    y1, h1, c1 = g.op("LSTM", ["x", g.weight(2, 4 * H, I, fan_in=I), g.weight(2, 4 * H, H, fan_in=H),
                                g.vec([2, 8 * H]), "lens", g.init(image(91, 2, B, H) * 0.5, "h0"),
                                g.init(image(92, 2, B, H) * 0.5, "c0"), g.vec([2, 3 * H], -0.5, 0.5)],
                      n_out=3, hidden_size=H, direction="bidirectional")
    seq = g.op("Reshape", [g.op("Transpose", [y1], perm=[0, 2, 1, 3]), g.i64([T, B, 2 * H])])
    y2 = g.op("LSTM", [seq, g.weight(1, 4 * H, 2 * H, fan_in=2 * H),
                       g.weight(1, 4 * H, H, fan_in=H)],
              hidden_size=H, direction="reverse", clip=0.8, input_forget=1)
    outs = {"y1": y1, "h1": h1, "c1": c1, "y2": y2}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [T, B, I]), fin("lens", [B], TensorProto.INT32)],
                [fout(n) for n in outs], 14)
    return Case(m, {"x": image(93, T, B, I), "lens": np.array([12, 7, 1], np.int32)})


def gru_sequence():
    """GRUs and an RNN as PyTorch exports a batch-first model (opset 14,
    Transposes around layout-0 nodes: onnxruntime runs no layout=1, which the
    conformance tests cover): a bidirectional GRU with linear_before_reset
    (PyTorch's), a GRU with the reset gate before the product and
    HardSigmoid/LeakyRelu activations with their alpha and beta, then an RNN
    with ReLU."""
    g = G(94)
    T, B, I, H = 9, 2, 6, 10
    xt = g.op("Transpose", ["x"], perm=[1, 0, 2])
    y1, h1 = g.op("GRU", [xt, g.weight(2, 3 * H, I, fan_in=I), g.weight(2, 3 * H, H, fan_in=H),
                          g.vec([2, 6 * H], -0.3, 0.3)],
                  n_out=2, hidden_size=H, direction="bidirectional", linear_before_reset=1)
    seq = g.op("Reshape", [g.op("Transpose", [y1], perm=[0, 2, 1, 3]), g.i64([T, B, 2 * H])])
    y2 = g.op("GRU", [seq, g.weight(1, 3 * H, 2 * H, fan_in=2 * H), g.weight(1, 3 * H, H, fan_in=H),
                      g.vec([1, 6 * H], -0.3, 0.3)],
              hidden_size=H, activations=["HardSigmoid", "LeakyRelu"],
              activation_alpha=[0.25, 0.1], activation_beta=[0.45])
    y3, h3 = g.op("RNN", [g.op("Reshape", [y2, g.i64([T, B, H])]), g.weight(1, H, H, fan_in=H),
                          g.weight(1, H, H, fan_in=H, scale=0.5), g.vec([1, 2 * H])],
                  n_out=2, hidden_size=H, activations=["Relu"])
    outs = {"y1": y1, "h1": h1, "y2": y2, "y3": g.op("Transpose", [y3], perm=[2, 0, 1, 3]),
            "h3": h3}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [B, T, I])], [fout(n) for n in outs], 14)
    return Case(m, {"x": image(95, B, T, I)})


def scripted_control_flow():
    """Control flow as torch.jit.script exports it (opset 13): a Loop of a
    constant trip count carrying a state and emitting a scan output, an If
    on a condition computed from the input at run time (both branches
    computed, one selected), an If on a shape test that folds at compile
    time, and a Scan summing rows. compiler/frontend/onnx_control_flow.cc
    inlines the subgraphs."""
    g = G(96)
    w = g.weight(6, 6)
    body_nodes = [
        helper.make_node("MatMul", ["h_in", w], ["mm"]),
        helper.make_node("Tanh", ["mm"], ["t"]),
        helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["i_f", g.f32(0.1)], ["step"]),
        helper.make_node("Add", ["t", "step"], ["h_out"]),
        helper.make_node("Identity", ["c_in"], ["c_out"]),
        helper.make_node("ReduceSum", ["h_out"], ["s_out"], keepdims=0),
    ]
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [])])
    h, sums = g.op("Loop", [g.i64(5), g.init(np.array(True), "cond"), "x"], n_out=2, body=body)

    def branch(name, op, k):
        out = g.name(name)
        return helper.make_graph([helper.make_node(op, [h, g.f32(k)], [out])], name, [],
                                 [helper.make_tensor_value_info(out, TensorProto.FLOAT, [2, 6])])
    positive = g.op("Greater", [g.op("ReduceSum", [h], keepdims=0), g.f32(0.0)])
    picked = g.op("If", [positive], then_branch=branch("then", "Mul", 2.0),
                  else_branch=branch("else", "Add", -1.0))
    wide = g.op("Equal", [g.op("Size", [g.op("Shape", ["x"])]), g.i64(2)])
    shaped = g.op("If", [wide], then_branch=branch("then2", "Sub", 0.5),
                  else_branch=branch("else2", "Mul", 0.0))
    scan_body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
         helper.make_node("Relu", ["acc_out"], ["relu_out"])], "scan_body",
        [helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("row", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("relu_out", TensorProto.FLOAT, [6])])
    total, relus = g.op("Scan", [g.f32(np.zeros(6)), picked], n_out=2, body=scan_body,
                        num_scan_inputs=1, scan_input_directions=[1])
    outs = {"h": h, "sums": sums, "picked": picked, "shaped": shaped, "total": total,
            "relus": relus}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    shapes = {"sums": [5], "total": [6]}
    m = g.model([fin("x", [2, 6])], [fout(n, shape=shapes.get(n, [2, 6])) for n in outs], 13)
    return Case(m, {"x": image(97, 2, 6)})


def stn_style():
    """A spatial transformer (opset 20): a localization net (conv, pool,
    Gemm) predicts theta, AffineGrid makes the sampling grid of a constant
    size, GridSample resamples the input bilinearly with zero padding and
    bicubically with reflection."""
    g = G(98)
    x = "x"  # [2, 3, 12, 16]
    loc = g.relu(g.conv(x, 3, 8, 3, stride=2))
    loc = g.op("GlobalAveragePool", [loc])
    loc = g.op("Flatten", [loc])
    # theta near the identity: a small learned offset.
    theta = g.op("Add", [g.op("Gemm", [loc, g.weight(6, 8, scale=0.2)], transB=1),
                         g.f32([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])])
    theta = g.op("Reshape", [theta, g.i64([2, 2, 3])])
    grid = g.op("AffineGrid", [theta, g.i64([2, 3, 10, 14])], align_corners=0)
    outs = {"bilinear": g.op("GridSample", [x, grid], mode="linear", padding_mode="zeros"),
            "cubic": g.op("GridSample", [x, grid], mode="cubic", padding_mode="reflection",
                          align_corners=1)}
    for name, v in outs.items():
        g.nodes.append(helper.make_node("Identity", [v], [name]))
    m = g.model([fin("x", [2, 3, 12, 16])], [fout(n) for n in outs], 20)
    return Case(m, {"x": image(99, 2, 3, 12, 16)})


def log_mel_style():
    """A log-mel spectrogram front end inside the model (opset 20, as audio
    exporters write it): frames times a Hann window, a one-sided DFT along
    the frame, the power spectrum, a MelWeightMatrix projection and a log.
    The window and the mel matrix are computed at compile time."""
    g = G(100)
    n, bins = 32, 12
    x = g.op("Mul", ["x", g.op("HannWindow", [g.i64(n)])])          # [2, 8, 32]
    spec = g.op("DFT", [g.op("Unsqueeze", [x, g.i64([3])]), "", g.i64(-2)], onesided=1)
    power = g.op("ReduceSumSquare", [spec, g.i64([3])], keepdims=0)  # [2, 8, 17]
    mel = g.op("MelWeightMatrix", [g.i64(bins), g.i64(n), g.i64(16000), g.f32(20.0),
                                   g.f32(8000.0)])
    out = g.op("Log", [g.op("Add", [g.op("MatMul", [power, mel]), g.f32(1e-3)])])
    g.nodes.append(helper.make_node("Identity", [out], ["logmel"]))
    m = g.model([fin("x", [2, 8, n])], [fout("logmel")], 20)
    return Case(m, {"x": image(101, 2, 8, n)})


# ------------------------------------------------ quantized as users do it


def resnet18_int8():
    """ResNet-18 statically quantized (QDQ): integer convolutions
    (compiler/ops/conv_int8.cc) from the dequantized activations and
    weights. Within 2 output steps of onnxruntime (its own runs with and
    without graph optimizations differ by up to 2 on ResNet-50)."""
    f = resnet18()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def mobilenet_v2_int8():
    """MobileNetV2 statically quantized (QDQ): depthwise layers, so every
    quantize/dequantize pair is computed in float in the epilogue before it.
    Within 8 output steps (onnxruntime's own two runs differ by 6)."""
    f = mobilenet_v2()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=8.01 * output_step(m))


def resnet18_int8_qop():
    """ResNet-18 statically quantized in onnxruntime's operator form
    (QLinearConv, com.microsoft QLinearAdd, QLinearGlobalAveragePool and
    QGemm): the same integer kernels as the QDQ form. Within 2 output steps,
    as resnet18_int8."""
    f = resnet18()
    m = quantize(f, dynamic=False, qoperator=True)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def mobilenet_v2_int8_qop():
    """MobileNetV2 statically quantized in the operator form (QLinearConv
    depthwise and pointwise, QLinearAdd, QLinearGlobalAveragePool, QGemm).
    Within 8 output steps, as mobilenet_v2_int8."""
    f = mobilenet_v2()
    m = quantize(f, dynamic=False, qoperator=True)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=8.01 * output_step(m))


def bert_layer_int8():
    """The BERT-base layer dynamically quantized: its weight MatMuls are
    integer matmuls (compiler/ops/matmul_int8.cc), exact; the float parts
    around them move the dynamically quantized inputs by a step at times."""
    f = bert_layer()
    return Case(quantize(f, dynamic=True), f.feeds, rtol=0, atol=3e-3)


def bert_layer_qdq():
    """The BERT-base layer statically quantized (QDQ, what quantize_static
    writes for a transformer: its projections as QDQ Gemms, GELU's erf
    between quantize/dequantize pairs): integer matmuls of the bytes, the
    rest in float round trips. Within 2 output steps of onnxruntime (a
    requantization folded into one multiply while GELU read the value before
    it once put it 10 steps off)."""
    f = bert_layer()
    m = quantize(f, dynamic=False)
    return Case(m, f.feeds, rtol=0, atol=0, abs_tol=2.01 * output_step(m))


def bert_layer_qop():
    """The BERT-base layer statically quantized in the operator form (QGemm
    projections, QLinearMatMul attention, QLinearAdd, QLinearMul,
    QLinearSoftmax, 8-bit Reshape/Transpose between them)."""
    f = bert_layer()
    return Case(quantize(f, dynamic=False, qoperator=True), f.feeds, rtol=0, atol=1e-2)


MODELS = {f.__name__: f for f in [
    resnet50, resnet18, mobilenet_v2, squeezenet, densenet_blocks, inception_blocks, bert_layer,
    gpt2_block, opset6, opset9, opset11, opset13, legacy_pytorch, dynamo_style,
    dynamo_functions, keras_nhwc, heads_flatten_reshape, identity_dropout, dropout_opset6,
    yolo_style, unet_style, vit_style, mobilenet_v3_style, resnext_groups, pool_edges, norms_1d,
    odd_outputs, legacy_upsample_bilinear, llama_style, matmul_broadcast, int_numerics,
    unet_decoder, qdq_int8, qoperator_ops, resnet18_int8, resnet18_int8_qop, mobilenet_v2_int8, mobilenet_v2_int8_qop, bert_layer_int8, bert_layer_qdq, bert_layer_qop,
    lstm_sequence, gru_sequence, scripted_control_flow, stn_style, log_mel_style]}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--list":
        print(";".join(MODELS))
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        case = MODELS[name]()
        onnx.save(case.model, os.path.join(out, name + ".onnx"))
        np.savez(os.path.join(out, name + ".inputs.npz"), **case.feeds)
        print(os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
