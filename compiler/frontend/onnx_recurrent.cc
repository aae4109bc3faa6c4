// The recurrent operators LSTM, GRU and RNN, unrolled over their time steps
// at import: the node becomes the ONNX nodes of its equations (opset-22
// MatMul, Gather, Slice, Add, Mul, activations, Where, Concat ...), each
// imported as a model's node would be. The input projection of every step
// is one matrix product ([T, B, I] x [I, gates * H], the dense template's),
// the recurrent one a [B, H] x [H, gates * H] product per step; the
// elementwise gate equations fuse into their epilogues.
//
// Equations (ONNX's, per direction d; gates ordered as W stacks them):
//   RNN:  H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)
//   GRU:  z = f(X_t Wz^T + H_{t-1} Rz^T + Wbz + Rbz), r alike,
//         h~ = g(X_t Wh^T + (r . H_{t-1}) Rh^T + Rbh + Wbh)      (linear_before_reset 0)
//         h~ = g(X_t Wh^T + r . (H_{t-1} Rh^T + Rbh) + Wbh)      (linear_before_reset 1)
//         H_t = (1 - z) . h~ + z . H_{t-1}
//   LSTM: i = f(X_t Wi^T + H_{t-1} Ri^T + Pi . C_{t-1} + Wbi + Rbi), f alike (Pf),
//         c~ = g(X_t Wc^T + H_{t-1} Rc^T + Wbc + Rbc),
//         C_t = f . C_{t-1} + i . c~   (input_forget: f = 1 - i),
//         o = f(X_t Wo^T + H_{t-1} Ro^T + Po . C_t + Wbo + Rbo), H_t = o . h(C_t)
// `clip` bounds every activation's input. With sequence_lens, a step at or
// past a batch entry's length keeps its state and outputs 0 (for the
// reverse direction, the masked steps come first, so its pass starts at
// length - 1, as ONNX defines it).
#include <functional>
#include <utility>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {
namespace {

// Time steps a node may unroll to (directions included).
constexpr int64_t kMaxSteps = 4096;

struct Activation {
  std::string op;
  float alpha = 0, beta = 0;
};

}  // namespace

absl::Status Importer::ImportRecurrent(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  const int gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  for (int i : {0, 1, 2}) {
    if (!HasIn(node, i)) return absl::InvalidArgumentError(StrCat(op, " needs X, W and R"));
  }
  auto x = InF(node, 0), wv = InF(node, 1), rv = InF(node, 2);
  if (!x.ok() || !wv.ok() || !rv.ok()) {
    return !x.ok() ? x.status() : !wv.ok() ? wv.status() : rv.status();
  }
  const int64_t H = AttrInt(node, "hidden_size", 0), layout = AttrInt(node, "layout", 0);
  const std::string direction = AttrString(node, "direction", "forward");
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return absl::InvalidArgumentError(StrCat("direction '", direction, "'"));
  }
  const Shape xs = V(*x).shape;
  if (xs.size() != 3 || layout < 0 || layout > 1) {
    return absl::InvalidArgumentError(
        StrCat("X must be [seq, batch, input] (layout 0) or [batch, "
               "seq, input] (layout 1), got rank ",
               xs.size(), " layout ", layout));
  }
  const int64_t T = layout ? xs[1] : xs[0], B = layout ? xs[0] : xs[1], I = xs[2];
  if (H <= 0) return absl::InvalidArgumentError("hidden_size must be positive");
  if (V(*wv).shape != Shape{D, gates * H, I} || V(*rv).shape != Shape{D, gates * H, H}) {
    return absl::InvalidArgumentError(StrCat(
        "W must be [", D, ", ", gates * H, ", ", I, "] and R [", D, ", ", gates * H, ", ", H,
        "]; got [", StrJoin(V(*wv).shape, ", "), "] and [", StrJoin(V(*rv).shape, ", "), "]"));
  }
  if (T * D > kMaxSteps) {
    return Unimplemented(node, StrCat(T, " time steps in ", D, " direction(s): kiln unrolls the ",
                                      "time loop, up to ", kMaxSteps, " steps"));
  }
  if (T <= 0 || B <= 0) return Unimplemented(node, "an empty sequence or batch");
  const bool lbr = op == "GRU" && AttrInt(node, "linear_before_reset", 0) != 0;
  const bool input_forget = op == "LSTM" && AttrInt(node, "input_forget", 0) != 0;
  const auto* clip_attr = AttrTyped(node, "clip", onnx::AttributeProto::FLOAT);
  const float clip = clip_attr ? clip_attr->f() : 0;
  if (clip_attr && !(clip > 0)) return absl::InvalidArgumentError("clip must be positive");

  // Activations: f (and g, h) per direction, with their alpha and beta.
  const int per_dir = op == "LSTM" ? 3 : op == "GRU" ? 2 : 1;
  std::vector<std::string> names;
  if (const auto* a = AttrTyped(node, "activations", onnx::AttributeProto::STRINGS)) {
    names.assign(a->strings().begin(), a->strings().end());
  } else {
    // ONNX's defaults: f = Sigmoid, g = h = Tanh (an RNN's f = Tanh).
    for (int64_t d = 0; d < D; ++d) {
      if (op == "RNN") names.push_back("Tanh");
      if (op != "RNN") names.insert(names.end(), {"Sigmoid", "Tanh"});
      if (op == "LSTM") names.push_back("Tanh");
    }
  }
  if (static_cast<int64_t>(names.size()) != per_dir * D) {
    return absl::InvalidArgumentError(
        StrCat(op, " needs ", per_dir * D, " activations, got ", names.size()));
  }
  std::vector<float> alphas, betas;
  if (const auto* a = AttrTyped(node, "activation_alpha", onnx::AttributeProto::FLOATS)) {
    alphas.assign(a->floats().begin(), a->floats().end());
  }
  if (const auto* a = AttrTyped(node, "activation_beta", onnx::AttributeProto::FLOATS)) {
    betas.assign(a->floats().begin(), a->floats().end());
  }
  std::vector<Activation> acts;
  size_t ai = 0, bi = 0;
  for (const std::string& n : names) {
    Activation a{n};
    auto take = [](const std::vector<float>& v, size_t& i, float fallback) {
      return i < v.size() ? v[i++] : fallback;
    };
    if (n == "LeakyRelu") {
      a.alpha = take(alphas, ai, 0.01f);
    } else if (n == "ThresholdedRelu" || n == "Elu") {
      a.alpha = take(alphas, ai, 1.0f);
    } else if (n == "HardSigmoid") {
      a.alpha = take(alphas, ai, 0.2f);
      a.beta = take(betas, bi, 0.5f);
    } else if (n == "Affine" || n == "ScaledTanh") {
      a.alpha = take(alphas, ai, 1.0f);
      a.beta = take(betas, bi, n == "Affine" ? 0.0f : 1.0f);
    } else if (n != "Sigmoid" && n != "Tanh" && n != "Relu" && n != "Softsign" && n != "Softplus") {
      return Unimplemented(node, StrCat("activation '", n, "'"));
    }
    acts.push_back(a);
  }

  const std::string base = Name(node);
  auto emit = [&](const std::string& type, const std::vector<std::string>& ins,
                  const std::function<void(onnx::NodeProto&)>& attrs = nullptr,
                  const std::string& out = "") { return Emit(base, type, ins, attrs, out); };
  // Constants: int64 (a scalar when `dims` is empty), int32 scalar, float.
  auto constant = [&](int type, const Shape& dims,
                      const std::function<void(onnx::TensorProto&)>& fill) {
    return emit("Constant", {}, [&](onnx::NodeProto& n) {
      auto* a = n.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      auto* t = a->mutable_t();
      t->set_data_type(type);
      for (int64_t d : dims) t->add_dims(d);
      fill(*t);
    });
  };
  auto i64 = [&](std::vector<int64_t> v, bool scalar = false) {
    return EmitInt64s(base, v, scalar);
  };
  auto f32 = [&](const Shape& dims, float v) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return constant(onnx::TensorProto::FLOAT, dims, [&](onnx::TensorProto& t) {
      for (int64_t e = 0; e < n; ++e) t.add_float_data(v);
    });
  };
// `var`: the name `expr` (a StatusOr<std::string>) made, or return its error.
#define KILN_NAME(var, expr)          \
  std::string var;                    \
  {                                   \
    auto r_ = (expr);                 \
    if (!r_.ok()) return r_.status(); \
    var = *r_;                        \
  }
  auto binary = [&](const char* type, const std::string& a, const std::string& b) {
    return emit(type, {a, b});
  };
  // Columns [k*H, (k+1)*H) of a [B, n*H] value.
  auto gate = [&](const std::string& v, int64_t k) -> absl::StatusOr<std::string> {
    auto s = i64({k * H}), e = i64({(k + 1) * H}), ax = i64({1});
    if (!s.ok() || !e.ok() || !ax.ok()) return !s.ok() ? s : !e.ok() ? e : ax;
    return emit("Slice", {v, *s, *e, *ax});
  };
  auto activate = [&](const Activation& a, std::string v) -> absl::StatusOr<std::string> {
    if (clip_attr) {
      auto lo = f32({}, -clip), hi = f32({}, clip);
      if (!lo.ok() || !hi.ok()) return !lo.ok() ? lo : hi;
      auto c = emit("Clip", {v, *lo, *hi});
      if (!c.ok()) return c;
      v = *c;
    }
    if (a.op == "Affine" || a.op == "ScaledTanh") {
      auto al = f32({}, a.alpha), be = f32({}, a.beta);
      if (!al.ok() || !be.ok()) return !al.ok() ? al : be;
      if (a.op == "Affine") {
        auto m = binary("Mul", v, *al);
        return m.ok() ? binary("Add", *m, *be) : m;
      }
      auto m = binary("Mul", v, *be);
      if (m.ok()) m = emit("Tanh", {*m});
      return m.ok() ? binary("Mul", *m, *al) : m;
    }
    std::function<void(onnx::NodeProto&)> attrs;
    if (a.op == "LeakyRelu" || a.op == "ThresholdedRelu" || a.op == "Elu") {
      attrs = FloatAttr("alpha", a.alpha);
    } else if (a.op == "HardSigmoid") {
      attrs = [&](onnx::NodeProto& n) {
        FloatAttr("alpha", a.alpha)(n);
        FloatAttr("beta", a.beta)(n);
      };
    }
    return emit(a.op, {v}, attrs);
  };

  auto input_name = [&](int i) { return HasIn(node, i) ? node.input(i) : std::string(); };
  const std::string b_in = input_name(3), lens_in = input_name(4), h0_in = input_name(5);
  const std::string c0_in = op == "LSTM" ? input_name(6) : "";
  const std::string p_in = op == "LSTM" ? input_name(7) : "";
  auto checked_shape = [&](const std::string& name, const Shape& want) -> absl::Status {
    if (name.empty()) return absl::OkStatus();
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return absl::InvalidArgumentError(StrCat("no value '", name, "'"));
    if (V(it->second).shape != want) {
      return absl::InvalidArgumentError(StrCat("input '", name, "' must be [", StrJoin(want, ", "),
                                               "], got [", StrJoin(V(it->second).shape, ", "),
                                               "]"));
    }
    return absl::OkStatus();
  };
  const Shape state = layout ? Shape{B, D, H} : Shape{D, B, H};
  for (auto [name, want] : std::vector<std::pair<std::string, Shape>>{{b_in, {D, 2 * gates * H}},
                                                                      {lens_in, {B}},
                                                                      {h0_in, state},
                                                                      {c0_in, state},
                                                                      {p_in, {D, 3 * H}}}) {
    if (auto s = checked_shape(name, want); !s.ok()) return s;
  }

  // X as [T, B, I]; states as [D, B, H].
  std::string X = node.input(0), h0 = h0_in, c0 = c0_in;
  if (layout) {
    KILN_NAME(xt, emit("Transpose", {X}, IntsAttr("perm", {1, 0, 2})));
    X = xt;
    for (std::string* s : {&h0, &c0}) {
      if (s->empty()) continue;
      KILN_NAME(st, emit("Transpose", {*s}, IntsAttr("perm", {1, 0, 2})));
      *s = st;
    }
  }
  // sequence_lens as int32, to compare with each step.
  std::string lens;
  if (!lens_in.empty()) {
    KILN_NAME(l, emit("Cast", {lens_in}, IntAttr("to", onnx::TensorProto::INT32)));
    lens = l;
  }
  KILN_NAME(zeros, f32({B, H}, 0.0f));
  KILN_NAME(ones, f32({}, 1.0f));

  std::vector<std::string> ys(D), hs(D), cs(D);
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Activation* act = &acts[static_cast<size_t>(d * per_dir)];
    KILN_NAME(dix, i64({d}, true));
    auto pick = [&](const std::string& v) { return emit("Gather", {v, dix}, IntAttr("axis", 0)); };
    KILN_NAME(wd, pick(node.input(1)));
    KILN_NAME(rd, pick(node.input(2)));
    KILN_NAME(wt, emit("Transpose", {wd}, IntsAttr("perm", {1, 0})));
    KILN_NAME(rt, emit("Transpose", {rd}, IntsAttr("perm", {1, 0})));
    // The input projection of every step at once, with the biases that
    // add outside any gate product.
    KILN_NAME(xw, binary("MatMul", X, wt));
    std::string rbh;  // GRU's Rbh where it stays inside r's product
    if (!b_in.empty()) {
      KILN_NAME(bd, pick(b_in));
      KILN_NAME(s0, i64({0}));
      KILN_NAME(s1, i64({gates * H}));
      KILN_NAME(s2, i64({2 * gates * H}));
      KILN_NAME(ax0, i64({0}));
      KILN_NAME(wb, emit("Slice", {bd, s0, s1, ax0}));
      KILN_NAME(rb, emit("Slice", {bd, s1, s2, ax0}));
      std::string bias = wb;
      if (op == "GRU") {
        // Rbz and Rbr join the input bias; Rbh too unless linear before reset.
        KILN_NAME(e2, i64({(lbr ? 2 : 3) * H}));
        KILN_NAME(rzr, emit("Slice", {rb, s0, e2, ax0}));
        if (lbr) {
          KILN_NAME(h2, i64({2 * H}));
          KILN_NAME(h3, i64({3 * H}));
          KILN_NAME(rh, emit("Slice", {rb, h2, h3, ax0}));
          rbh = rh;
          KILN_NAME(zh, f32({H}, 0.0f));
          KILN_NAME(padded, emit("Concat", {rzr, zh}, IntAttr("axis", 0)));
          rzr = padded;
        }
        KILN_NAME(sum, binary("Add", wb, rzr));
        bias = sum;
      } else {
        KILN_NAME(sum, binary("Add", wb, rb));
        bias = sum;
      }
      KILN_NAME(xwb, binary("Add", xw, bias));
      xw = xwb;
    }
    std::string pi, po, pf;
    if (!p_in.empty()) {
      KILN_NAME(pd, pick(p_in));
      KILN_NAME(ax0, i64({0}));
      for (auto [k, out] :
           std::vector<std::pair<int64_t, std::string*>>{{0, &pi}, {1, &po}, {2, &pf}}) {
        KILN_NAME(s, i64({k * H}));
        KILN_NAME(e, i64({(k + 1) * H}));
        KILN_NAME(p, emit("Slice", {pd, s, e, ax0}));
        *out = p;
      }
    }
    std::string h = zeros, c = zeros;
    if (!h0.empty()) {
      KILN_NAME(v, pick(h0));
      h = v;
    }
    if (!c0.empty()) {
      KILN_NAME(v, pick(c0));
      c = v;
    }
    // GRU's recurrent weights of h~ alone (linear_before_reset 0).
    std::string rht;
    if (op == "GRU" && !lbr) {
      KILN_NAME(s, i64({2 * H}));
      KILN_NAME(e, i64({3 * H}));
      KILN_NAME(ax1, i64({1}));
      KILN_NAME(v, emit("Slice", {rt, s, e, ax1}));
      rht = v;
    }
    std::vector<std::string> steps(static_cast<size_t>(T));
    for (int64_t n = 0; n < T; ++n) {
      const int64_t t = reverse ? T - 1 - n : n;
      KILN_NAME(tix, i64({t}, true));
      KILN_NAME(xt, emit("Gather", {xw, tix}, IntAttr("axis", 0)));
      KILN_NAME(hr, binary("MatMul", h, rt));
      std::string h_new, c_new;
      if (op == "RNN") {
        KILN_NAME(pre, binary("Add", xt, hr));
        KILN_NAME(v, activate(act[0], pre));
        h_new = v;
      } else if (op == "GRU") {
        KILN_NAME(xz, gate(xt, 0));
        KILN_NAME(xr, gate(xt, 1));
        KILN_NAME(xh, gate(xt, 2));
        KILN_NAME(hz, gate(hr, 0));
        KILN_NAME(hrr, gate(hr, 1));
        KILN_NAME(zs, binary("Add", xz, hz));
        KILN_NAME(z, activate(act[0], zs));
        KILN_NAME(rs, binary("Add", xr, hrr));
        KILN_NAME(r, activate(act[0], rs));
        std::string inner;
        if (lbr) {
          KILN_NAME(hh, gate(hr, 2));
          KILN_NAME(hb, rbh.empty() ? absl::StatusOr<std::string>(hh) : binary("Add", hh, rbh));
          KILN_NAME(v, binary("Mul", r, hb));
          inner = v;
        } else {
          KILN_NAME(rh, binary("Mul", r, h));
          KILN_NAME(v, binary("MatMul", rh, rht));
          inner = v;
        }
        KILN_NAME(hs_pre, binary("Add", xh, inner));
        KILN_NAME(ht, activate(act[1], hs_pre));
        // (1 - z) . h~ + z . H = h~ + z . (H - h~)
        KILN_NAME(diff, binary("Sub", h, ht));
        KILN_NAME(zd, binary("Mul", z, diff));
        KILN_NAME(v, binary("Add", ht, zd));
        h_new = v;
      } else {
        KILN_NAME(pre, binary("Add", xt, hr));
        KILN_NAME(gi, gate(pre, 0));
        KILN_NAME(go, gate(pre, 1));
        KILN_NAME(gf, gate(pre, 2));
        KILN_NAME(gc, gate(pre, 3));
        if (!pi.empty()) {
          KILN_NAME(pic, binary("Mul", pi, c));
          KILN_NAME(v, binary("Add", gi, pic));
          gi = v;
          KILN_NAME(pfc, binary("Mul", pf, c));
          KILN_NAME(w, binary("Add", gf, pfc));
          gf = w;
        }
        KILN_NAME(i, activate(act[0], gi));
        std::string f;
        if (input_forget) {
          KILN_NAME(v, binary("Sub", ones, i));
          f = v;
        } else {
          KILN_NAME(v, activate(act[0], gf));
          f = v;
        }
        KILN_NAME(cc, activate(act[1], gc));
        KILN_NAME(fc, binary("Mul", f, c));
        KILN_NAME(ic, binary("Mul", i, cc));
        KILN_NAME(cn, binary("Add", fc, ic));
        c_new = cn;
        if (!po.empty()) {
          KILN_NAME(poc, binary("Mul", po, c_new));
          KILN_NAME(v, binary("Add", go, poc));
          go = v;
        }
        KILN_NAME(o, activate(act[0], go));
        KILN_NAME(hc, activate(act[2], c_new));
        KILN_NAME(v, binary("Mul", o, hc));
        h_new = v;
      }
      std::string y = h_new;
      if (!lens.empty()) {
        // Steps at or past a batch entry's length keep its state; their
        // output is 0.
        KILN_NAME(t32, constant(onnx::TensorProto::INT32, {}, [&](onnx::TensorProto& tp) {
                    tp.add_int32_data(static_cast<int32_t>(t));
                  }));
        KILN_NAME(live, binary("Less", t32, lens));
        KILN_NAME(ax1, i64({1}));
        KILN_NAME(m, emit("Unsqueeze", {live, ax1}));
        KILN_NAME(hm, emit("Where", {m, h_new, h}));
        h_new = hm;
        if (!c_new.empty()) {
          KILN_NAME(cm, emit("Where", {m, c_new, c}));
          c_new = cm;
        }
        KILN_NAME(ym, emit("Where", {m, y, zeros}));
        y = ym;
      }
      h = h_new;
      if (!c_new.empty()) c = c_new;
      steps[static_cast<size_t>(t)] = y;
    }
    // Y of this direction: [T, 1, B, H].
    KILN_NAME(ycat, emit("Concat", steps, IntAttr("axis", 0)));
    KILN_NAME(yshape, i64({T, 1, B, H}));
    KILN_NAME(yd, emit("Reshape", {ycat, yshape}));
    ys[d] = yd;
    KILN_NAME(sshape, i64({1, B, H}));
    KILN_NAME(hd, emit("Reshape", {h, sshape}));
    hs[d] = hd;
    if (op == "LSTM") {
      KILN_NAME(cd, emit("Reshape", {c, sshape}));
      cs[d] = cd;
    }
  }
  // The outputs, in the node's layout.
  auto output = [&](int k, const std::vector<std::string>& parts, int64_t axis,
                    std::vector<int64_t> perm) -> absl::Status {
    if (node.output_size() <= k || node.output(k).empty()) return absl::OkStatus();
    std::string v = parts[0];
    if (D > 1) {
      auto cat = emit("Concat", parts, IntAttr("axis", axis));
      if (!cat.ok()) return cat.status();
      v = *cat;
    }
    auto r = layout ? emit("Transpose", {v}, IntsAttr("perm", perm), node.output(k))
                    : emit("Identity", {v}, nullptr, node.output(k));
    return StatusOf(r);
  };
  if (auto s = output(0, ys, 1, {2, 0, 1, 3}); !s.ok()) return s;
  if (auto s = output(1, hs, 0, {1, 0, 2}); !s.ok()) return s;
  if (op == "LSTM") {
    if (auto s = output(2, cs, 0, {1, 0, 2}); !s.ok()) return s;
  }
#undef KILN_NAME
  return absl::OkStatus();
}

absl::StatusOr<std::string> Importer::Emit(const std::string& base, const std::string& op,
                                           const std::vector<std::string>& inputs,
                                           const std::function<void(onnx::NodeProto&)>& attrs,
                                           const std::string& out) {
  onnx::NodeProto n;
  n.set_op_type(op);
  std::string name;
  do {
    name = StrCat(base, "::", op, emit_serial_++);
  } while (by_name_.count(name));
  n.set_name(name);
  for (const std::string& i : inputs) n.add_input(i);
  n.add_output(out.empty() ? name : out);
  if (attrs) attrs(n);
  if (auto s = CountExpandedNode(); !s.ok()) return s;
  // The expansion's nodes are opset-22 nodes, whatever the model's opset.
  const int64_t model_opset = std::exchange(opset_, kMaxOpset);
  absl::Status s = ImportChecked(n);
  opset_ = model_opset;
  if (!s.ok()) return s;
  return n.output(0);
}

absl::StatusOr<std::string> Importer::EmitDequantize(const std::string& base, const std::string& x,
                                                     const std::string& scale,
                                                     const std::string& zp, int64_t axis) {
  std::vector<std::string> ins = {x, scale};
  if (!zp.empty()) ins.push_back(zp);
  return Emit(base, "DequantizeLinear", ins, IntAttr("axis", axis));
}

absl::StatusOr<std::string> Importer::EmitQuantize(const std::string& base, const std::string& y,
                                                   const std::string& scale, const std::string& zp,
                                                   const std::string& out) {
  std::vector<std::string> ins = {y, scale};
  if (!zp.empty()) ins.push_back(zp);
  return Emit(base, "QuantizeLinear", ins, nullptr, out);
}

absl::StatusOr<std::string> Importer::EmitInt64s(const std::string& base,
                                                 const std::vector<int64_t>& v, bool scalar) {
  return Emit(base, "Constant", {}, [&](onnx::NodeProto& n) {
    auto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    auto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t e : v) t->add_int64_data(e);
  });
}

absl::Status Importer::CountExpandedNode(int64_t n) {
  if (n <= kMaxExpandedNodes - expanded_nodes_) {
    expanded_nodes_ += n;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(StrCat("the graph has more than ", kMaxExpandedNodes,
                                           " nodes once its recurrent operators and loops are "
                                           "unrolled"));
}

}  // namespace kiln::compiler::onnx_internal
