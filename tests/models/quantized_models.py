"""Quantized models of the model tests: onnxruntime's quantization tool
applied to make_models.py's float networks (quantize), and graphs written in
the quantized operators themselves: the ONNX ones (qdq_int8) and
onnxruntime's com.microsoft ones (qoperator_ops)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from graph_builder import Case, G, fin, fout, image


class _Calibration:
    """onnxruntime's CalibrationDataReader protocol: 8 seeded inputs shaped
    like the model's float feeds."""

    def __init__(self, feeds, n=8):
        rng = np.random.default_rng(7)
        self.batches = [{k: rng.standard_normal(v.shape).astype(np.float32)
                         if v.dtype == np.float32 else v for k, v in feeds.items()}
                        for _ in range(n)]

    def get_next(self):
        return self.batches.pop() if self.batches else None

    def rewind(self):
        pass


def quantize(case, dynamic, qoperator=False):
    """`case` quantized by onnxruntime's own tool (pip onnxruntime), as its
    documentation has users do it: quant_pre_process (shape inference, graph
    optimizations: batch norms folded), then quantize_dynamic (int8 weights,
    DynamicQuantizeLinear + MatMulInteger) or quantize_static (per-channel
    int8 weights, uint8 activations, MinMax-calibrated on 8 seeded inputs;
    QDQ, or with `qoperator` the operator form: QLinearConv and onnxruntime's
    com.microsoft QLinearAdd, QLinearGlobalAveragePool, QGemm). The model
    onnxruntime runs as the reference is the quantized one itself."""
    import tempfile
    from onnxruntime.quantization import (QuantFormat, QuantType, quant_pre_process,
                                          quantize_dynamic, quantize_static)
    with tempfile.TemporaryDirectory(prefix="kiln-quantize-") as tmp:
        fp, pre, q = (os.path.join(tmp, f) for f in ("f.onnx", "pre.onnx", "q.onnx"))
        onnx.save(case.model, fp)
        quant_pre_process(fp, pre)
        fmt = QuantFormat.QOperator if qoperator else QuantFormat.QDQ
        if dynamic:
            quantize_dynamic(pre, q, weight_type=QuantType.QInt8)
        else:
            quantize_static(pre, q, _Calibration(case.feeds), quant_format=fmt,
                            per_channel=True, activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8)
        return onnx.load(q)


def output_step(model):
    """The quantization step of the model's first output when a
    DequantizeLinear with a constant scale writes it."""
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.output[0] == model.graph.output[0].name:
            return float(numpy_helper.to_array(inits[n.input[1]]))
    return None



def qdq_int8():
    """A statically quantized network as onnxruntime's quantizer writes it
    (opset 13): QuantizeLinear of the input, QLinearConv (uint8 activations,
    int8 per-channel weights, int32 bias), DequantizeLinear, a QDQ MatMul
    pair, MatMulInteger and DynamicQuantizeLinear on the way out."""
    g = G(93)
    rng = g.rng
    xs, xz = g.f32(0.02, "xs"), g.init(np.uint8(128), "xz")
    qx = g.op("QuantizeLinear", ["x", xs, xz])
    wq = g.init(rng.integers(-60, 60, (8, 3, 3, 3)).astype(np.int8), "wq")
    ws = g.init(rng.uniform(0.002, 0.01, 8).astype(np.float32), "ws")
    wz = g.init(np.zeros(8, np.int8), "wz")
    ys, yz = g.f32(0.05, "ys"), g.init(np.uint8(100), "yz")
    bias = g.init(rng.integers(-500, 500, 8).astype(np.int32), "bq")
    qy = g.op("QLinearConv", [qx, xs, xz, wq, ws, wz, ys, yz, bias], pads=[1, 1, 1, 1])
    y = g.op("DequantizeLinear", [qy, ys, yz])
    f = g.op("Reshape", [g.relu(y), g.i64([1, -1])])  # [1, 8*8*8]
    a_s, a_z = g.f32(0.03, "as"), g.init(np.uint8(0), "az")
    qa = g.op("QuantizeLinear", [f, a_s, a_z])
    bq = g.init(rng.integers(0, 255, (512, 10)).astype(np.uint8), "bmat")
    b_z = g.init(np.uint8(128), "bz")
    acc = g.op("MatMulInteger", [qa, bq, a_z, b_z])  # int32 [1, 10]
    qm = g.op("QLinearMatMul", [qa, a_s, a_z, bq, g.f32(0.004, "bs"), b_z, g.f32(0.5, "ms"),
                                g.init(np.uint8(128), "mz")])
    outs = g.op("DynamicQuantizeLinear", [g.op("Cast", [acc], to=TensorProto.FLOAT)], n_out=3)
    for node_out, name in zip(outs, ["dq_y", "dq_scale", "dq_zp"]):
        g.op("Identity", [node_out])
        g.nodes[-1].output[0] = name
    g.op("Identity", [qm])
    g.nodes[-1].output[0] = "qm"
    m = g.model([fin("x", [1, 3, 8, 8])],
                [fout("qm", TensorProto.UINT8), fout("dq_y", TensorProto.UINT8),
                 fout("dq_scale"), fout("dq_zp", TensorProto.UINT8)], 13)
    return Case(m, {"x": image(93, 1, 3, 8, 8)})


def qoperator_ops():
    """Each of onnxruntime's quantized com.microsoft operators that
    quantize_static's operator form writes, and the fused ones its graph
    optimizer saves (MatMulIntegerToFloat, DynamicQuantizeMatMul), and
    QLinearConvs the integer conv templates do not take (grouped, dilated), on
    uint8 bytes quantized from seeded inputs, each dequantized to a float
    output: within one output step of onnxruntime's own kernels."""
    g = G(94)
    rng = g.rng
    ms = {"domain": "com.microsoft"}
    sx, zx = g.f32(0.02, "sx"), g.init(np.uint8(128), "zx")
    sy, zy = g.f32(0.03, "sy"), g.init(np.uint8(120), "zy")
    so, zo = g.f32(0.04, "so"), g.init(np.uint8(128), "zo")
    s_unit, z0 = g.f32(1 / 256, "su"), g.init(np.uint8(0), "z0")
    qx = g.op("QuantizeLinear", ["x", sx, zx])
    qy = g.op("QuantizeLinear", ["y", sy, zy], **ms)
    outs = []

    steps = {}  # output -> its quantization step

    def out(q, s, z):
        steps[len(outs)] = float(numpy_helper.to_array(
            next(t for t in g.inits if t.name == s)))
        outs.append(g.op("DequantizeLinear", [q, s, z], **ms))

    out(g.op("QLinearAdd", [qx, sx, zx, qy, sy, zy, so, zo], **ms), so, zo)
    out(g.op("QLinearMul", [qx, sx, zx, qy, sy, zy, so, zo], **ms), so, zo)
    out(g.op("QLinearSigmoid", [qx, sx, zx, s_unit, z0], **ms), s_unit, z0)
    out(g.op("QLinearLeakyRelu", [qx, sx, zx, so, zo], alpha=0.1, **ms), so, zo)
    for last in (0, 1):
        out(g.op("QLinearGlobalAveragePool", [qx, sx, zx, so, zo], channels_last=last, **ms),
            so, zo)
        out(g.op("QLinearAveragePool", [qx, sx, zx, so, zo], kernel_shape=[3, 3],
                 strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=last, channels_last=last,
                 **ms), so, zo)
    out(g.op("QLinearConcat", [so, zo, qx, sx, zx, qy, sy, zy], axis=1, **ms), so, zo)
    out(g.op("QLinearSoftmax", [qx, sx, zx, s_unit, z0], axis=-1, opset=13, **ms), s_unit, z0)
    out(g.op("QLinearSoftmax", [qx, sx, zx, s_unit, z0], axis=1, opset=11, **ms), s_unit, z0)
    # QLinearConvs the integer conv templates do not take (grouped,
    # dilated): their QDQ definition, a float conv.
    bias8 = g.init(rng.integers(-500, 500, 8).astype(np.int32), "bias8")
    ws8, wz8 = (g.init(rng.uniform(0.002, 0.01, 8).astype(np.float32), "ws8"),
                g.init(np.zeros(8, np.int8), "wz8"))
    for cin, attrs in ((4, dict(group=2, pads=[1, 1, 1, 1])),
                       (8, dict(dilations=[2, 2], pads=[2, 2, 2, 2]))):
        w = g.init(rng.integers(-60, 60, (8, cin, 3, 3)).astype(np.int8), "wq")
        out(g.op("QLinearConv", [qx, sx, zx, w, ws8, wz8, so, zo, bias8], **attrs), so, zo)
    cond = g.init(rng.integers(0, 2, (1, 8, 6, 6)).astype(bool), "cond")
    out(g.op("QLinearWhere", [cond, qx, sx, zx, qy, sy, zy, so, zo], **ms), so, zo)
    # A classifier's QGemm: int8 weights per column, int32 bias in the
    # scale sa * sb; one requantized, one (transB, alpha) with a float output.
    sa, za = g.f32(0.05, "sa"), g.init(np.uint8(100), "za")
    qa = g.op("QuantizeLinear", ["a", sa, za])
    b = g.init(rng.integers(-100, 100, (16, 10)).astype(np.int8), "b")
    bt = g.init(np.ascontiguousarray(numpy_helper.to_array(g.inits[-1]).T), "bt")
    sb = g.init(rng.uniform(0.002, 0.01, 10).astype(np.float32), "sb")
    zb = g.init(np.zeros(10, np.int8), "zb")
    bias = g.init(rng.integers(-2000, 2000, 10).astype(np.int32), "bias")
    sg, zg = g.f32(0.1, "sg"), g.init(np.uint8(128), "zg")
    out(g.op("QGemm", [qa, sa, za, b, sb, zb, bias, sg, zg], **ms), sg, zg)
    outs.append(g.op("QGemm", [qa, sa, za, bt, sb, zb, bias], transB=1, alpha=0.5, **ms))
    fbias = g.init(rng.uniform(-0.5, 0.5, 10).astype(np.float32), "fbias")
    outs.append(g.op("MatMulIntegerToFloat", [qa, b, sa, sb, za, zb, fbias], **ms))
    outs.append(g.op("DynamicQuantizeMatMul", ["a", b, sb, zb, fbias], **ms))
    for k, o in enumerate(outs):
        g.op("Identity", [o])
        g.nodes[-1].output[0] = f"y{k}"
    # (Shape inference knows no com.microsoft operator: the outputs' shapes.)
    x, pool, nhwc_pool = [1, 8, 6, 6], [1, 8, 3, 3], [1, 4, 3, 6]
    shapes = [x, x, x, x, [1, 8, 1, 1], pool, [1, 1, 1, 6], nhwc_pool, [1, 16, 6, 6], x, x, x, x,
              x, [4, 10], [4, 10], [4, 10], [4, 10]]
    assert len(shapes) == len(outs)
    m = g.model([fin("x", x), fin("y", x), fin("a", [4, 16])],
                [fout(f"y{k}", shape=sh) for k, sh in enumerate(shapes)], 13,
                extra_opsets=[("com.microsoft", 1)])
    feeds = {"x": image(95, 1, 8, 6, 6), "y": image(96, 1, 8, 6, 6), "a": image(97, 4, 16)}
    # One step of each quantized output; the float ones (QGemm without
    # y_scale, the matmuls) exact but for float rounding.
    return Case(m, feeds, rtol=1e-5, atol=1e-5,
                abs_tols={f"y{k}": 1.01 * step for k, step in steps.items()})
