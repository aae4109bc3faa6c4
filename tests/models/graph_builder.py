"""The graph builder of the model tests (make_models.py,
quantized_models.py): a test case (model, feeds, tolerances) and G, which
writes ONNX graphs with onnx.helper, seeded weights and unique names."""
import math
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The end of a Slice that runs to the end of its axis.
I64_MAX = np.iinfo(np.int64).max


@dataclass
class Case:
    model: onnx.ModelProto
    feeds: dict
    # Tolerances relative to the output's scale (max |reference|), or
    # absolute (abs_tol: a quantized output's steps), whichever is larger.
    rtol: float = 1e-3
    atol: float = 1e-4
    abs_tol: float = 0.0
    # abs_tol per output name, where outputs' steps differ.
    abs_tols: dict = None
    # The model onnxruntime runs for the expected outputs (default: model).
    reference: onnx.ModelProto = None


class G:
    """A small graph builder: seeded weights, unique names, one node list."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def init(self, array, base="w"):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape, fan_in=None, scale=1.0):
        fan_in = fan_in or (int(np.prod(shape[1:])) if len(shape) > 1 else shape[0])
        w = self.rng.standard_normal(shape) * (scale * math.sqrt(2.0 / fan_in))
        return self.init(w.astype(np.float32), "w")

    def vec(self, n, lo=-0.1, hi=0.1, base="b"):
        return self.init(self.rng.uniform(lo, hi, n).astype(np.float32), base)

    def i64(self, values, base="shape"):
        return self.init(np.array(values, dtype=np.int64), base)

    def f32(self, values, base="c"):
        return self.init(np.array(values, dtype=np.float32), base)

    def op(self, op_type, inputs, n_out=1, name=None, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs,
                                           name=name or self.name("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    # Layers, as torchvision's exporter writes them.
    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, bias=True, dilation=1,
             scale=1.0):
        kh, kw = (k, k) if isinstance(k, int) else k
        if pad is None:
            pad = [(kh - 1) // 2 * dilation, (kw - 1) // 2 * dilation] * 2
        elif isinstance(pad, int):
            pad = [pad] * 4
        w = self.weight(cout, cin // group, kh, kw, scale=scale)
        ins = [x, w] + ([self.vec(cout)] if bias else [])
        return self.op("Conv", ins, kernel_shape=[kh, kw], strides=[stride, stride], pads=pad,
                       group=group, dilations=[dilation, dilation])

    def bn(self, x, c, gamma=1.0, **attrs):
        r = self.rng
        scale = self.init((r.uniform(0.5, 1.5, c) * gamma).astype(np.float32), "gamma")
        b = self.init(r.uniform(-0.1, 0.1, c).astype(np.float32), "beta")
        mean = self.init(r.uniform(-0.1, 0.1, c).astype(np.float32), "mean")
        var = self.init(r.uniform(0.5, 1.5, c).astype(np.float32), "var")
        return self.op("BatchNormalization", [x, scale, b, mean, var], epsilon=1e-5, **attrs)

    def relu(self, x):
        return self.op("Relu", [x])

    def model(self, inputs, outputs, opset, producer="kiln-make-models", ir_version=None,
              functions=None, extra_opsets=()):
        graph = helper.make_graph(self.nodes, "g", inputs, outputs, initializer=self.inits)
        opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v)
                                                     for d, v in extra_opsets]
        kwargs = dict(opset_imports=opsets, producer_name=producer)
        if functions:
            kwargs["functions"] = functions
        m = helper.make_model(graph, **kwargs)
        m.ir_version = ir_version or (3 if opset <= 8 else 6 if opset <= 11 else 8)
        if m.ir_version < 4:  # IR 3: every initializer is also a graph input
            m.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                                 for t in m.graph.initializer)
        # Outputs are declared by dtype only; shape inference writes their shapes.
        inferred = onnx.shape_inference.infer_shapes(m)
        types = {v.name: v.type for v in list(inferred.graph.value_info) +
                 list(inferred.graph.output)}
        for out in m.graph.output:
            if not out.type.tensor_type.HasField("shape") and out.name in types:
                out.type.CopyFrom(types[out.name])
        onnx.checker.check_model(m, full_check=True)
        return m


def fin(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def fout(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def image(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
