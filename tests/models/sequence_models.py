"""Sequence models of the model tests: an LSTM and a GRU over time steps, a
scripted model with Loop and If, a log-mel spectrogram front end and a
bag-of-n-grams text classifier (make_models.py lists them all).
"""
import numpy as np
from onnx import TensorProto, helper

from graph_builder import Case, G, fin, fout, image


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


def ngram_classifier():
    """A bag-of-n-grams text classifier as sklearn-onnx writes a
    TfidfVectorizer and a linear model over token ids (opset 13):
    unigrams and bigrams with up to 2 skipped tokens, TF-IDF
    weights, a MatMul to 5 classes and a Softmax, over a batch of 3
    sequences of 24 ids from a vocabulary of 30."""
    g = G(131)
    rng = np.random.default_rng(132)
    uni = rng.choice(30, 12, replace=False)
    bi = rng.integers(0, 30, (20, 2))
    pool = np.concatenate([uni, bi.reshape(-1)]).astype(np.int64)
    grams = len(uni) + len(bi)
    order = rng.permutation(grams)
    weights = rng.uniform(0.5, 2.0, grams).astype(np.float32)
    counts = f"counts_{g.name('tfidf')}"
    g.nodes.append(helper.make_node(
        "TfIdfVectorizer", ["ids"], [counts], mode="TFIDF", min_gram_length=1,
        max_gram_length=2, max_skip_count=2, ngram_counts=[0, len(uni)],
        ngram_indexes=order.tolist(), pool_int64s=pool.tolist(), weights=weights.tolist()))
    logits = g.op("Add", [g.op("MatMul", [counts, g.weight(grams, 5)]), g.vec(5)])
    g.nodes.append(helper.make_node("Softmax", [logits], ["probs"], axis=-1))
    m = g.model([fin("ids", [3, 24], TensorProto.INT64)], [fout("probs")], 13)
    # Texts that hold pool n-grams: each a run of pool items and noise.
    ids = rng.integers(0, 30, (3, 24)).astype(np.int64)
    ids[0, :6] = [bi[0][0], bi[0][1], uni[0], bi[1][0], 99, bi[1][1]]
    return Case(m, {"ids": ids})
