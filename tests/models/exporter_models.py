"""Graphs as particular exporters write them, for the model tests: old opsets
with their old-style attributes, legacy PyTorch shape subgraphs, dynamo-style
graphs and functions, Keras/TF NHWC graphs, and numerics corner cases
(make_models.py lists them all).
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graph_builder import Case, G, fin, fout, image


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
