"""Transformer layers of the model tests: a BERT-base encoder layer, a GPT-2
block, a ViT-style encoder, a LLaMA-style block (RMSNorm, rotary, SwiGLU)
and broadcast MatMuls, seeded random weights (make_models.py lists them all).
"""
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from graph_builder import I64_MAX, Case, G, fin, fout, image


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
