#!/usr/bin/env python3
"""Malformed-model mutants of a few valid ONNX models, and a runner that
compiles each with `kiln compile` and classifies the outcome.

Every mutant is either `bad` (malformed: it must be refused with a clean
INVALID_ARGUMENT/UNIMPLEMENTED error) or `any` (random byte damage: any clean
outcome is fine). Outcomes: ok, clean (an error message, exit 1/2), crash (a
signal other than abort), abort (SIGABRT: a failed check), accepted-bad (a
`bad` mutant compiled without a word), timeout.

  tests/fuzz/mutants.py run --kiln build/cli/kiln [--kiln-run build/deploy/kiln-run]
  tests/fuzz/mutants.py write DIR [--random N]   # the files only (fuzz corpus)
"""
import argparse
import copy
import os
import random
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def _model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    m = helper.make_model(g, producer_name="kiln-mutants",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def base_models():
    rng = np.random.default_rng(7)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    vi = helper.make_tensor_value_info
    models = {}
    # conv -> relu -> maxpool -> gemm
    models["cnn"] = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                          pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                          strides=[2, 2]),
         helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)],
        [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])], [vi("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(f32(4, 3, 3, 3), "w"), numpy_helper.from_array(f32(4), "b"),
         numpy_helper.from_array(f32(4, 64), "fw"), numpy_helper.from_array(f32(4), "fb")])
    # matmul -> add -> softmax, with a reshape and transpose
    models["mlp"] = _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
         helper.make_node("Add", ["m", "b"], ["a"], name="add"),
         helper.make_node("Reshape", ["a", "shape"], ["rs"], name="reshape"),
         helper.make_node("Transpose", ["rs"], ["t"], name="transpose", perm=[0, 2, 1]),
         helper.make_node("Softmax", ["t"], ["y"], name="softmax", axis=-1)],
        [vi("x", TensorProto.FLOAT, [2, 8])], [vi("y", TensorProto.FLOAT, [2, 4, 4])],
        [numpy_helper.from_array(f32(8, 16), "w"), numpy_helper.from_array(f32(16), "b"),
         numpy_helper.from_array(np.array([2, 4, 4], np.int64), "shape")])
    # pad -> avgpool -> concat -> slice, and a folded shape subgraph
    models["pad"] = _model(
        [helper.make_node("Pad", ["x", "pads"], ["pd"], name="pad", mode="constant"),
         helper.make_node("AveragePool", ["pd"], ["ap"], name="avgpool", kernel_shape=[3, 3]),
         helper.make_node("Concat", ["ap", "ap"], ["cc"], name="concat", axis=1),
         helper.make_node("Slice", ["cc", "starts", "ends", "axes"], ["sl"], name="slice"),
         helper.make_node("Shape", ["sl"], ["shp"], name="shape"),
         helper.make_node("ConstantOfShape", ["shp"], ["ones"], name="cos",
                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
         helper.make_node("Mul", ["sl", "ones"], ["y"], name="mul")],
        [vi("x", TensorProto.FLOAT, [1, 2, 6, 6])], [vi("y", TensorProto.FLOAT, [1, 3, 6, 6])],
        [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
         numpy_helper.from_array(np.array([0], np.int64), "starts"),
         numpy_helper.from_array(np.array([3], np.int64), "ends"),
         numpy_helper.from_array(np.array([1], np.int64), "axes")])
    # gather / expand / tile / reduce on int64 indices
    models["idx"] = _model(
        [helper.make_node("Gather", ["x", "ind"], ["g"], name="gather", axis=0),
         helper.make_node("Expand", ["g", "eshape"], ["e"], name="expand"),
         helper.make_node("Tile", ["e", "reps"], ["t"], name="tile"),
         helper.make_node("ReduceSum", ["t", "raxes"], ["y"], name="reduce", keepdims=0)],
        [vi("x", TensorProto.FLOAT, [5, 3])], [vi("y", TensorProto.FLOAT, [2, 6])],
        [numpy_helper.from_array(np.array([[0, 4]], np.int64), "ind"),
         numpy_helper.from_array(np.array([2, 2, 3], np.int64), "eshape"),
         numpy_helper.from_array(np.array([1, 1, 2], np.int64), "reps"),
         numpy_helper.from_array(np.array([1], np.int64), "raxes")])
    return models


def node(m, name):
    return next(n for n in m.graph.node if n.name == name)


def set_attr(m, node_name, attr, **fields):
    """Replaces node attribute `attr` with a raw AttributeProto."""
    n = node(m, node_name)
    keep = [a for a in n.attribute if a.name != attr]
    del n.attribute[:]
    n.attribute.extend(keep)
    a = n.attribute.add()
    a.name = attr
    for k, v in fields.items():
        if isinstance(v, list):
            getattr(a, k).extend(v)
        else:
            setattr(a, k, v)


def init(m, name):
    return next(t for t in m.graph.initializer if t.name == name)


def set_init(m, name, array):
    t = init(m, name)
    t.CopyFrom(numpy_helper.from_array(array, name))


A = onnx.AttributeProto
BIG = 1 << 40


def structured_mutants(models):
    """(name, ModelProto) of malformed models: each must be refused."""
    out = []

    def mut(base, name, fn):
        m = copy.deepcopy(models[base])
        fn(m)
        out.append((f"{base}-{name}", m))

    for base in models:
        for v in (0, -1, 999, 1 << 40):
            mut(base, f"opset{v}", lambda m, v=v: m.opset_import[0].__setattr__("version", v))
        mut(base, "no-opset", lambda m: m.ClearField("opset_import"))
        x0 = lambda m: m.graph.input[0].type.tensor_type.shape.dim  # noqa: E731
        for label, v in (("neg", -3), ("2e62", 1 << 62), ("2e40", BIG)):
            mut(base, f"indim-{label}", lambda m, v=v: x0(m)[0].__setattr__("dim_value", v))
        mut(base, "indim-overflow", lambda m: [d.__setattr__("dim_value", 1 << 31) for d in x0(m)])
        mut(base, "dup-output", lambda m: m.graph.node[1].output.__setitem__(
            0, m.graph.node[0].output[0]))
        mut(base, "output-shadows-input", lambda m: m.graph.node[0].output.__setitem__(
            0, m.graph.input[0].name))
        mut(base, "output-shadows-init", lambda m: m.graph.node[0].output.__setitem__(
            0, m.graph.initializer[0].name))
        mut(base, "undefined-input", lambda m: m.graph.node[0].input.append("nowhere"))
        mut(base, "undefined-input0", lambda m: m.graph.node[-1].input.__setitem__(0, "nowhere"))

        def cycle(m):  # the first node reads the last node's output
            m.graph.node[0].input[0] = m.graph.node[-1].output[0]
        mut(base, "cycle", cycle)

        def self_loop(m):
            m.graph.node[1].input[0] = m.graph.node[1].output[0]
        mut(base, "self-loop", self_loop)

        def short_raw(m):
            t = m.graph.initializer[0]
            arr = numpy_helper.to_array(t)
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
            t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        mut(base, "init-short-raw", short_raw)

        def short_typed(m):
            t = m.graph.initializer[0]
            arr = numpy_helper.to_array(t).ravel()
            t.ClearField("raw_data")
            if arr.dtype == np.float32:
                t.float_data.extend(arr[:-1].tolist())
            else:
                t.int64_data.extend(arr[:-1].tolist())
        mut(base, "init-short-typed", short_typed)

        def init_huge_dims(m):
            t = m.graph.initializer[0]
            del t.dims[:]
            t.dims.extend([1 << 31, 1 << 31])
        mut(base, "init-dims-overflow", init_huge_dims)

        def init_neg_dim(m):
            t = m.graph.initializer[0]
            t.dims[0] = -t.dims[0]
        mut(base, "init-neg-dim", init_neg_dim)

        def init_dtype(m):
            m.graph.initializer[0].data_type = 12345
        mut(base, "init-dtype", init_dtype)

        def dup_init(m):
            m.graph.initializer.append(copy.deepcopy(m.graph.initializer[0]))
        mut(base, "dup-init", dup_init)

        mut(base, "output-undefined", lambda m: m.graph.output[0].__setattr__("name", "nowhere"))

    # Attribute types that contradict their content or the operator.
    mut("cnn", "group-float", lambda m: set_attr(m, "conv", "group", type=A.FLOAT, f=1.0))
    mut("cnn", "group-ints", lambda m: set_attr(m, "conv", "group", type=A.INTS, ints=[1]))
    mut("cnn", "pads-int", lambda m: set_attr(m, "conv", "pads", type=A.INT, i=1))
    mut("cnn", "pads-type-floats", lambda m: set_attr(m, "conv", "pads", type=A.FLOATS,
                                                      ints=[1, 1, 1, 1]))
    mut("cnn", "strides-string", lambda m: set_attr(m, "conv", "strides", type=A.STRING, s=b"2"))
    mut("cnn", "transB-float", lambda m: set_attr(m, "fc", "transB", type=A.FLOAT, f=1.0))
    mut("cnn", "transB-type-int-content-float",
        lambda m: set_attr(m, "fc", "transB", type=A.INT, f=1.0))
    mut("cnn", "axis-untyped-two-fields",
        lambda m: set_attr(m, "flatten", "axis", i=1, f=2.0))
    mut("mlp", "perm-int", lambda m: set_attr(m, "transpose", "perm", type=A.INT, i=1))
    mut("mlp", "softmax-axis-ints", lambda m: set_attr(m, "softmax", "axis", type=A.INTS,
                                                       ints=[1]))
    mut("pad", "mode-int", lambda m: set_attr(m, "pad", "mode", type=A.INT, i=0))
    mut("pad", "cos-value-float", lambda m: set_attr(m, "cos", "value", type=A.FLOAT, f=1.0))
    mut("idx", "gather-axis-string", lambda m: set_attr(m, "gather", "axis", type=A.STRING,
                                                        s=b"0"))
    # Spatial attributes out of range.
    for attr, vals in (("pads", [[-1, -1, -1, -1], [BIG] * 4, [1 << 62] * 4, [1, 1]]),
                       ("strides", [[0, 0], [-1, -1], [BIG, BIG], [1 << 62, 1 << 62]]),
                       ("dilations", [[0, 0], [BIG, BIG], [1 << 62, 1 << 62]]),
                       ("kernel_shape", [[BIG, BIG], [-3, -3], [0, 0]])):
        for op in ("conv", "pool"):
            for v in vals:
                mut("cnn", f"{op}-{attr}-{v[0]}x{len(v)}",
                    lambda m, op=op, attr=attr, v=v: set_attr(m, op, attr, type=A.INTS, ints=v))
    for v in ([-1, -1], [BIG, BIG], [1 << 62, 1 << 62]):
        mut("pad", f"avgpool-pads-{v[0]}",
            lambda m, v=v: set_attr(m, "avgpool", "pads", type=A.INTS, ints=v * 2))
    mut("cnn", "group-0", lambda m: set_attr(m, "conv", "group", type=A.INT, i=0))
    mut("cnn", "group-huge", lambda m: set_attr(m, "conv", "group", type=A.INT, i=1 << 62))
    # Shape-like inputs with absurd values.
    for v in (BIG, 1 << 62, -(1 << 62)):
        mut("pad", f"pad-pads-{v}", lambda m, v=v: set_init(
            m, "pads", np.array([0, 0, v, v, 0, 0, v, v], np.int64)))
        mut("idx", f"expand-{v}", lambda m, v=v: set_init(
            m, "eshape", np.array([2, v, 3], np.int64)))
        mut("idx", f"tile-{v}", lambda m, v=v: set_init(m, "reps", np.array([1, v, 2], np.int64)))
        mut("mlp", f"reshape-{v}", lambda m, v=v: set_init(m, "shape", np.array([v, -1, 4],
                                                                               np.int64)))
        mut("pad", f"slice-axes-{v}", lambda m, v=v: set_init(m, "axes", np.array([v], np.int64)))
        mut("idx", f"gather-index-{v}", lambda m, v=v: set_init(
            m, "ind", np.array([[0, v]], np.int64)))
        mut("idx", f"reduce-axis-{v}", lambda m, v=v: set_init(m, "raxes", np.array([v],
                                                                                   np.int64)))
    mut("idx", "expand-neg", lambda m: set_init(m, "eshape", np.array([2, -2, 3], np.int64)))
    mut("idx", "tile-neg", lambda m: set_init(m, "reps", np.array([1, -2, 2], np.int64)))
    mut("mlp", "transpose-perm-bad", lambda m: set_attr(m, "transpose", "perm", type=A.INTS,
                                                        ints=[0, 0, 1]))
    mut("mlp", "transpose-perm-huge", lambda m: set_attr(m, "transpose", "perm", type=A.INTS,
                                                         ints=[0, 1 << 62, 1]))
    mut("mlp", "softmax-axis-huge", lambda m: set_attr(m, "softmax", "axis", type=A.INT,
                                                       i=1 << 62))
    mut("pad", "concat-axis-huge", lambda m: set_attr(m, "concat", "axis", type=A.INT,
                                                      i=-(1 << 62)))
    mut("cnn", "flatten-axis-huge", lambda m: set_attr(m, "flatten", "axis", type=A.INT,
                                                       i=1 << 62))
    mut("cnn", "weight-rank1", lambda m: set_init(m, "w", np.zeros(4, np.float32)))
    mut("cnn", "bias-wrong", lambda m: set_init(m, "b", np.zeros(5, np.float32)))
    mut("mlp", "matmul-mismatch", lambda m: set_init(m, "w", np.zeros((9, 16), np.float32)))
    mut("cnn", "node-no-outputs", lambda m: m.graph.node[1].ClearField("output"))
    mut("cnn", "unknown-op", lambda m: node(m, "relu").__setattr__("op_type", "Frobnicate"))
    mut("cnn", "custom-domain", lambda m: node(m, "relu").__setattr__("domain", "com.evil"))
    mut("cnn", "input-no-shape", lambda m: m.graph.input[0].type.tensor_type.ClearField("shape"))
    mut("cnn", "input-dtype", lambda m: m.graph.input[0].type.tensor_type.__setattr__(
        "elem_type", 999))
    mut("cnn", "no-outputs", lambda m: m.graph.ClearField("output"))
    mut("cnn", "ir0", lambda m: m.__setattr__("ir_version", 0))
    return out


def valid_edge_cases(models):
    """(name, ModelProto) of unusual but valid models: each must compile."""
    out = []
    for v in (BIG, 1 << 62, -(1 << 62)):  # Slice clamps its ends
        m = copy.deepcopy(models["pad"])
        set_init(m, "ends", np.array([v], np.int64))
        out.append((f"pad-slice-end-{v}", m))
    m = copy.deepcopy(models["cnn"])
    m.graph.node.insert(0, m.graph.node.pop(2))  # out of order: sorted on import
    out.append(("cnn-unsorted", m))
    for name, base in models.items():  # reversed: sorted on import
        m = copy.deepcopy(base)
        m.graph.node.reverse()
        out.append((f"{name}-reversed", m))
    return out


def random_mutants(models, n, seed=1):
    """(name, bytes) of byte-level damage: flips, truncation, splices."""
    rng = random.Random(seed)
    out = []
    blobs = [(k, m.SerializeToString()) for k, m in models.items()]
    for i in range(n):
        name, b = blobs[i % len(blobs)]
        b = bytearray(b)
        kind = rng.choice(["flip", "trunc", "byte", "splice", "varint"])
        if kind == "flip":
            for _ in range(rng.randint(1, 8)):
                p = rng.randrange(len(b))
                b[p] ^= 1 << rng.randrange(8)
        elif kind == "trunc":
            b = b[: rng.randrange(len(b))]
        elif kind == "byte":
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        elif kind == "splice":
            _, other = blobs[rng.randrange(len(blobs))]
            p, q = rng.randrange(len(b)), rng.randrange(len(other))
            b = b[:p] + other[q:q + rng.randint(1, 64)] + b[p:]
        else:  # a huge varint in place of a small one
            p = rng.randrange(len(b))
            b = b[:p] + bytes([0xFF] * 8 + [0x7F]) + b[p + 1:]
        out.append((f"{name}-{kind}-{i}", bytes(b)))
    return out


def classify(rc, bad, err):
    if rc is None:
        return "timeout"
    if rc == -signal.SIGABRT or rc == 134:
        return "abort"
    if rc < 0 or rc > 128:
        return "crash"
    if rc == 0:
        return "accepted-bad" if bad else "ok"
    if "std::bad_alloc" in err or "terminate called" in err:
        return "crash"
    return "clean"


def run(args):
    models = base_models()
    cases = [(n, m.SerializeToString(), True) for n, m in structured_mutants(models)]
    cases += [(n, b, False) for n, b in random_mutants(models, args.random)]
    cases += [(f"{n}-valid", m.SerializeToString(), False) for n, m in models.items()]
    cases += [(n, m.SerializeToString(), False) for n, m in valid_edge_cases(models)]
    counts = {}
    bad_lines = []
    with tempfile.TemporaryDirectory() as tmp:
        db = os.path.join(tmp, "db.sqlite")
        for name, blob, bad in cases:
            path = os.path.join(tmp, "m.onnx")
            with open(path, "wb") as f:
                f.write(blob)
            art = os.path.join(tmp, "m.kiln")
            try:
                p = subprocess.run([args.kiln, "compile", path, "--db", db, "-o", art],
                                   capture_output=True, text=True, timeout=120,
                                   errors="replace")
                rc, err = p.returncode, p.stderr + p.stdout
            except subprocess.TimeoutExpired:
                rc, err = None, ""
            outcome = classify(rc, bad, err)
            if outcome == "ok" and args.kiln_run and name.endswith("-valid"):
                pass  # valid models: compile is enough here
            counts[outcome] = counts.get(outcome, 0) + 1
            line = f"{outcome:13s} {name}: {err.strip().splitlines()[-1] if err.strip() else ''}"
            if args.verbose or outcome not in ("ok", "clean"):
                print(line[:300])
            if outcome not in ("ok", "clean"):
                bad_lines.append(line)
            if os.path.exists(art):
                os.remove(art)
    print("outcomes:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"{len(cases)} models, {len(bad_lines)} problems")
    return 1 if bad_lines else 0


def write(args):
    models = base_models()
    os.makedirs(args.dir, exist_ok=True)
    items = [(f"{n}-valid", m.SerializeToString()) for n, m in models.items()]
    items += [(n, m.SerializeToString()) for n, m in valid_edge_cases(models)]
    items += [(n, m.SerializeToString()) for n, m in structured_mutants(models)]
    items += random_mutants(models, args.random)
    for name, blob in items:
        with open(os.path.join(args.dir, name + ".onnx"), "wb") as f:
            f.write(blob)
    print(f"wrote {len(items)} models to {args.dir}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--kiln", default=os.path.join(ROOT, "build", "cli", "kiln"))
    r.add_argument("--kiln-run", default="")
    r.add_argument("--random", type=int, default=200)
    r.add_argument("-v", "--verbose", action="store_true")
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--random", type=int, default=0)
    args = ap.parse_args()
    sys.exit(run(args) if args.cmd == "run" else write(args))


if __name__ == "__main__":
    main()
