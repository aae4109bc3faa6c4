// ONNX operators imported onto the generic operator library
// (compiler/ops/generic.h) and elementwise epilogue functions
// (compiler/ops/elementwise.h): elementwise math, comparisons, casts,
// reductions, normalizations (as reductions plus elementwise steps), data
// movement and shape arithmetic. Constant inputs fold at import.
#include <cmath>
#include <numeric>

#include "compiler/frontend/importer.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::onnx_internal {
namespace {

int64_t Product(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The dtype an elementwise fn produces on `in` (float16 stays float16).
DType ResultDType(DType in, ir::DataType result) {
  DType r = ops::FromIrType(result);
  return (in == DType::kFloat16 && r == DType::kFloat32) ? DType::kFloat16 : r;
}

struct UnarySpec {
  const char* op;
  const char* fn;
};
constexpr UnarySpec kUnary[] = {
    {"Abs", "abs"},     {"Neg", "neg"},           {"Sqrt", "sqrt"},
    {"Exp", "exp"},     {"Log", "log"},           {"Reciprocal", "reciprocal"},
    {"Floor", "floor"}, {"Ceil", "ceil"},         {"Round", "round"},
    {"Sign", "sign"},   {"Relu", "relu"},         {"Sigmoid", "sigmoid"},
    {"Tanh", "tanh"},   {"Sin", "sin"},           {"Cos", "cos"},
    {"Tan", "tan"},     {"Asin", "asin"},         {"Acos", "acos"},
    {"Atan", "atan"},   {"Sinh", "sinh"},         {"Cosh", "cosh"},
    {"Asinh", "asinh"}, {"Acosh", "acosh"},       {"Atanh", "atanh"},
    {"Erf", "erf"},     {"Softplus", "softplus"}, {"Softsign", "softsign"},
    {"Not", "not"},     {"IsNaN", "isnan"},       {"HardSwish", "hardswish"},
    {"Mish", "mish"},   {"BitwiseNot", "bitnot"},
};

struct BinarySpec {
  const char* op;
  const char* fn;
};
constexpr BinarySpec kBinary[] = {
    {"Add", "add"},         {"Sub", "sub"},
    {"Mul", "mul"},         {"Div", "div"},
    {"Pow", "pow"},         {"Equal", "equal"},
    {"Less", "less"},       {"LessOrEqual", "lessequal"},
    {"Greater", "greater"}, {"GreaterOrEqual", "greaterequal"},
    {"And", "and"},         {"Or", "or"},
    {"Xor", "xor"},         {"BitwiseAnd", "bitand"},
    {"BitwiseOr", "bitor"}, {"BitwiseXor", "bitxor"},
    {"PRelu", "prelu"},
};

}  // namespace

absl::StatusOr<int64_t> Importer::NormAxis(const onnx::NodeProto& node, int64_t axis,
                                           size_t rank) const {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= std::max<int64_t>(r, 1)) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "' (", node.op_type(),
                                             "): axis ", axis, " out of range for rank ", rank));
  }
  return axis < 0 ? axis + r : axis;
}

int Importer::Scalar(const std::string& name, DType dtype, double v) {
  std::vector<uint8_t> bytes(DTypeBytes(dtype));
  DoubleToElement(dtype, v, bytes.data(), 0);
  return ConstValue(name, {}, dtype, std::move(bytes));
}

absl::StatusOr<int> Importer::Generic(const onnx::NodeProto& node, const std::string& op,
                                      std::vector<int> inputs, Shape shape, DType dtype,
                                      std::map<std::string, std::vector<int64_t>> attrs, int out,
                                      std::map<std::string, double> floats) {
  Workload w;
  w.op = op;
  w.ints = std::move(attrs);
  w.floats = std::move(floats);
  std::vector<DType> dtypes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    w.ints[StrCat("in", i)] = Wl(V(inputs[i]).shape);
    dtypes.push_back(V(inputs[i]).dtype);
  }
  if (inputs.empty()) return absl::InternalError("a generic op needs an input");
  w.ints["shape"] = Wl(shape);
  dtypes.push_back(dtype);
  w.SetDtypes(dtypes);
  int v = out >= 0 ? NewValue(node, out, shape, dtype) : TempValue(Name(node), shape, dtype);
  if (auto s = AddCompute(node, std::move(w), std::move(inputs), v); !s.ok()) return s;
  return v;
}

absl::StatusOr<int> Importer::Unary(const onnx::NodeProto& node, int x, const std::string& fn,
                                    std::vector<double> params, int out) {
  const DType in = V(x).dtype;
  auto rt = ops::UnaryResultType(fn, ops::ComputeType(in), params);
  if (!rt.ok()) return rt.status();
  DType dtype =
      fn == "cast" ? *DTypeFromOnnx(static_cast<int64_t>(params.at(0))) : ResultDType(in, *rt);
  Shape s = V(x).shape;
  Workload w;
  w.op = "eltwise";
  w.ints["shape"] = Wl(s);
  w.ints["in_shape"] = Wl(s);
  EpilogueOp e;
  e.kind = EpilogueKind::kUnary;
  e.fn = fn;
  e.params = std::move(params);
  // float32 relu keeps the classic epilogue (and so its workload keys).
  if (fn == "relu" && in == DType::kFloat32) e = {EpilogueKind::kRelu, {}};
  w.epilogue.push_back(e);
  w.SetDtypes({in, dtype});
  // Check the function accepts this input type before anything runs it.
  ir::Var probe("x", ops::ComputeType(in));
  if (auto r = ops::UnaryFn(fn, probe, e.params); !r.ok()) {
    return Unimplemented(node, std::string(r.status().message()));
  }
  int v = out >= 0 ? NewValue(node, out, s, dtype) : TempValue(Name(node), s, dtype);
  if (auto st = AddCompute(node, std::move(w), {x}, v); !st.ok()) return st;
  return v;
}

absl::StatusOr<int> Importer::BinaryOp(const onnx::NodeProto& node, int a, int b,
                                       const std::string& fn, int out) {
  const Shape as = V(a).shape, bs = V(b).shape;
  auto shape = Broadcast(as, bs, StrCat("node '", Name(node), "'"));
  if (!shape.ok()) return shape.status();
  const DType at = V(a).dtype, bt = V(b).dtype;
  if (at != bt && fn != "pow") {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': inputs of ", DTypeName(at), " and ", DTypeName(bt)));
  }
  auto rt = ops::BinaryResultType(fn, ops::ComputeType(at));
  if (!rt.ok()) return rt.status();
  ir::Var pa("a", ops::ComputeType(at)), pb("b", ops::ComputeType(bt));
  if (auto r = ops::BinaryFn(fn, pa, pb); !r.ok()) {
    return Unimplemented(node, std::string(r.status().message()));
  }
  DType dtype = ResultDType(at, *rt);
  Shape wo = Wl(*shape);
  // The operand that already has the output's shape runs as the main input
  // (so a producer's kernel can take the op as its epilogue); the function
  // then takes its arguments reversed.
  bool reversed = false;
  if (PadTo(Wl(as), wo.size()) != wo && PadTo(Wl(bs), wo.size()) == wo && at == bt) {
    std::swap(a, b);
    reversed = true;
  }
  const Shape& as2 = V(a).shape;
  const Shape& bs2 = V(b).shape;
  Workload w;
  w.op = "eltwise";
  w.ints["shape"] = wo;
  w.ints["in_shape"] = PadTo(Wl(as2), wo.size());
  EpilogueOp e;
  e.kind = EpilogueKind::kBinary;
  e.fn = fn;
  e.reversed = reversed;
  e.operand_shape = PadTo(Wl(bs2), wo.size());
  // float32 add/mul keep the classic epilogues (and so their workload keys).
  if ((fn == "add" || fn == "mul") && at == DType::kFloat32 && bt == DType::kFloat32) {
    e = {fn == "add" ? EpilogueKind::kAdd : EpilogueKind::kMul, e.operand_shape};
  }
  w.epilogue.push_back(e);
  w.SetDtypes({at, bt, dtype});
  int v = out >= 0 ? NewValue(node, out, *shape, dtype) : TempValue(Name(node), *shape, dtype);
  if (auto st = AddCompute(node, std::move(w), {a, b}, v); !st.ok()) return st;
  return v;
}

absl::StatusOr<int> Importer::Expand(const onnx::NodeProto& node, int x, Shape shape, int out) {
  Shape wo = Wl(shape);
  Workload w;
  w.op = "eltwise";
  w.ints["shape"] = wo;
  w.ints["in_shape"] = PadTo(Wl(V(x).shape), wo.size());
  if (auto s = Broadcast(V(x).shape, shape, StrCat("node '", Name(node), "'")); !s.ok()) {
    return s.status();
  } else if (*s != shape) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "': cannot expand [",
                                             StrJoin(V(x).shape, ","), "] to [",
                                             StrJoin(shape, ","), "]"));
  }
  w.SetDtypes({V(x).dtype, V(x).dtype});
  int v =
      out >= 0 ? NewValue(node, out, shape, V(x).dtype) : TempValue(Name(node), shape, V(x).dtype);
  if (auto st = AddCompute(node, std::move(w), {x}, v); !st.ok()) return st;
  return v;
}

absl::StatusOr<int> Importer::ReduceOver(const onnx::NodeProto& node, int x,
                                         std::vector<int64_t> axes, bool keep, int kind, int pre,
                                         int out) {
  const Shape xs = V(x).shape;
  for (int64_t& a : axes) {
    auto n = NormAxis(node, a, xs.size());
    if (!n.ok()) return n.status();
    a = *n;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Shape shape;
  for (size_t d = 0; d < xs.size(); ++d) {
    bool r = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!r) {
      shape.push_back(xs[d]);
    } else if (keep) {
      shape.push_back(1);
    }
  }
  if (xs.empty()) axes.clear();
  return Generic(node, "reduce", {x}, shape, V(x).dtype,
                 {{"axes", axes}, {"keep", {keep ? 1 : 0}}, {"kind", {kind}}, {"pre", {pre}}}, out);
}

absl::StatusOr<int> Importer::Reshaped(const onnx::NodeProto& node, int x, Shape shape, int out) {
  if (Product(shape) != V(x).NumElements()) {
    return absl::InvalidArgumentError(StrCat("node '", Name(node), "': cannot reshape [",
                                             StrJoin(V(x).shape, ","), "] to [",
                                             StrJoin(shape, ","), "]"));
  }
  int v =
      out >= 0 ? NewValue(node, out, shape, V(x).dtype) : TempValue(Name(node), shape, V(x).dtype);
  AddView(node, x, v);
  return v;
}

absl::StatusOr<int> Importer::Transposed(const onnx::NodeProto& node, int x,
                                         std::vector<int64_t> perm, int out) {
  const Shape xs = V(x).shape;
  if (perm.empty()) {
    for (size_t d = xs.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != xs.size()) {
    return absl::InvalidArgumentError(
        StrCat("node '", Name(node), "': perm has ", perm.size(), " entries for rank ", xs.size()));
  }
  Shape shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(xs.size())) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bad perm"));
    }
    shape.push_back(xs[p]);
  }
  if (xs.empty()) return Reshaped(node, x, shape, out);
  return Generic(node, "transpose", {x}, shape, V(x).dtype, {{"perm", perm}}, out);
}

absl::Status Importer::ImportGeneric(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  auto done = [](const absl::StatusOr<int>& r) { return r.ok() ? absl::OkStatus() : r.status(); };
  for (const UnarySpec& u : kUnary) {
    if (op == u.op) {
      auto x = In(node, 0);
      if (!x.ok()) return x.status();
      return done(Unary(node, *x, u.fn, {}, 0));
    }
  }
  // Unary functions with attributes.
  struct Param {
    const char* name;
    float fallback;
  };
  auto with_params = [&](const char* fn, std::vector<Param> ps) -> absl::Status {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::vector<double> params;
    for (const Param& p : ps) params.push_back(AttrFloat(node, p.name, p.fallback));
    return done(Unary(node, *x, fn, params, 0));
  };
  if (op == "LeakyRelu") return with_params("leakyrelu", {{"alpha", 0.01f}});
  if (op == "Elu") return with_params("elu", {{"alpha", 1.0f}});
  if (op == "Selu")
    return with_params(
        "selu", {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}});
  if (op == "Celu") return with_params("celu", {{"alpha", 1.0f}});
  if (op == "HardSigmoid") return with_params("hardsigmoid", {{"alpha", 0.2f}, {"beta", 0.5f}});
  if (op == "ThresholdedRelu") return with_params("thresholdedrelu", {{"alpha", 1.0f}});
  if (op == "Shrink") return with_params("shrink", {{"bias", 0.0f}, {"lambd", 0.5f}});
  if (op == "Swish") return with_params("swish", {{"alpha", 1.0f}});
  if (op == "Gelu") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::string approx = AttrString(node, "approximate", "none");
    return done(Unary(node, *x, approx == "tanh" ? "gelu_tanh" : "gelu", {}, 0));
  }
  if (op == "IsInf") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    return done(Unary(node, *x, "isinf",
                      {static_cast<double>(AttrInt(node, "detect_positive", 1)),
                       static_cast<double>(AttrInt(node, "detect_negative", 1))},
                      0));
  }
  if (op == "Cast" || op == "CastLike") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    int64_t to = AttrInt(node, "to", 1);
    if (op == "CastLike") {
      auto t = In(node, 1);
      if (!t.ok()) return t.status();
      to = OnnxCode(V(*t).dtype);
    }
    if (!DTypeFromOnnx(to)) {
      return Unimplemented(node,
                           StrCat("cast to unsupported dtype ", DtypeName(static_cast<int>(to))));
    }
    return done(Unary(node, *x, "cast", {static_cast<double>(to)}, 0));
  }
  if (op == "Clip") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    double lo = -INFINITY, hi = INFINITY;
    if (opset_ < 11) {
      lo = AttrFloat(node, "min", -INFINITY);
      hi = AttrFloat(node, "max", INFINITY);
    } else {
      int cur = *x;
      for (int i : {1, 2}) {
        if (!HasIn(node, i)) continue;
        auto b = In(node, i);
        if (!b.ok()) return b.status();
        if (V(*b).IsConstant() && IsFloat(V(*x).dtype)) {
          (i == 1 ? lo : hi) = V(*b).ToDoubles().at(0);
          continue;
        }
        auto r = BinaryOp(node, cur, *b, i == 1 ? "max" : "min");
        if (!r.ok()) return r.status();
        cur = *r;
      }
      if (cur != *x) {
        if (std::isinf(lo) && std::isinf(hi)) return done(Reshaped(node, cur, V(cur).shape, 0));
        return done(Unary(node, cur, "clip", {lo, hi}, 0));
      }
    }
    return done(Unary(node, *x, "clip", {lo, hi}, 0));
  }
  // Binary, with NumPy broadcasting (legacy `broadcast`/`axis` before opset 7).
  for (const BinarySpec& b : kBinary) {
    if (op != b.op) continue;
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto y = In(node, 1);
    if (!y.ok()) return y.status();
    int yv = *y;
    if (opset_ < 7 && AttrInt(node, "broadcast", 0) && Attr(node, "axis")) {
      auto axis = NormAxis(node, AttrInt(node, "axis", 0), V(*x).shape.size());
      if (!axis.ok()) return axis.status();
      Shape s = V(yv).shape;
      while (static_cast<int64_t>(s.size()) + *axis < static_cast<int64_t>(V(*x).shape.size()))
        s.push_back(1);
      auto r = Reshaped(node, yv, s);
      if (!r.ok()) return r.status();
      yv = *r;
    }
    return done(BinaryOp(node, *x, yv, b.fn, 0));
  }
  if (op == "Mod") {
    auto x = In(node, 0);
    auto y = In(node, 1);
    if (!x.ok() || !y.ok()) return x.ok() ? y.status() : x.status();
    return done(BinaryOp(node, *x, *y, AttrInt(node, "fmod", 0) ? "fmod" : "mod", 0));
  }
  if (op == "BitShift") {
    auto x = In(node, 0);
    auto y = In(node, 1);
    if (!x.ok() || !y.ok()) return x.ok() ? y.status() : x.status();
    return done(
        BinaryOp(node, *x, *y, AttrString(node, "direction", "") == "LEFT" ? "shl" : "shr", 0));
  }
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    if (node.input_size() == 0) return absl::InvalidArgumentError(StrCat(op, " needs inputs"));
    auto first = In(node, 0);
    if (!first.ok()) return first.status();
    int cur = *first;
    const char* fn = op == "Max" ? "max" : op == "Min" ? "min" : "add";
    for (int i = 1; i < node.input_size(); ++i) {
      auto y = In(node, i);
      if (!y.ok()) return y.status();
      bool last = i + 1 == node.input_size() && op != "Mean";
      auto r = BinaryOp(node, cur, *y, fn, last ? 0 : -1);
      if (!r.ok()) return r.status();
      cur = *r;
    }
    if (op == "Mean") return done(Unary(node, cur, "scale", {1.0 / node.input_size(), 0.0}, 0));
    if (node.input_size() == 1) return done(Reshaped(node, cur, V(cur).shape, 0));
    return absl::OkStatus();
  }
  if (op == "Where") {
    auto c = In(node, 0), x = In(node, 1), y = In(node, 2);
    if (!c.ok() || !x.ok() || !y.ok())
      return !c.ok() ? c.status() : !x.ok() ? x.status() : y.status();
    auto s1 = Broadcast(V(*c).shape, V(*x).shape, Name(node));
    if (!s1.ok()) return s1.status();
    auto s = Broadcast(*s1, V(*y).shape, Name(node));
    if (!s.ok()) return s.status();
    std::vector<int> ins;
    for (int v : {*c, *x, *y}) {
      auto r = Reshaped(node, v, PadTo(V(v).shape, s->size()));
      if (!r.ok()) return r.status();
      ins.push_back(*r);
    }
    return done(Generic(node, "where", ins, *s, V(*x).dtype, {}, 0));
  }
  // ---- Reductions
  static const std::map<std::string, std::pair<int, int>> kReduce = {
      {"ReduceSum", {0, 0}},       {"ReduceMean", {0, 0}},      {"ReduceMax", {1, 0}},
      {"ReduceMin", {2, 0}},       {"ReduceProd", {3, 0}},      {"ReduceL1", {0, 1}},
      {"ReduceL2", {0, 2}},        {"ReduceSumSquare", {0, 2}}, {"ReduceLogSum", {0, 0}},
      {"ReduceLogSumExp", {0, 0}},
  };
  if (auto it = kReduce.find(op); it != kReduce.end()) {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const size_t rank = V(*x).shape.size();
    std::vector<int64_t> axes = AttrInts(node, "axes", {});
    const bool axes_input = (op == "ReduceSum" && opset_ >= 13) || opset_ >= 18;
    if (axes_input && HasIn(node, 1)) {
      auto a = ConstInts(node, 1);
      if (!a.ok()) return a.status();
      axes = *a;
    }
    if (axes.empty()) {
      if (axes_input && AttrInt(node, "noop_with_empty_axes", 0)) {
        return done(Reshaped(node, *x, V(*x).shape, 0));
      }
      for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
    }
    const bool keep = AttrInt(node, "keepdims", 1) != 0;
    auto [kind, pre] = it->second;
    int src = *x;
    if (op == "ReduceLogSumExp") {
      // log(sum(exp(x - max))) + max, stable for large x.
      auto m = ReduceOver(node, *x, axes, true, 1);
      if (!m.ok()) return m.status();
      auto d = BinaryOp(node, *x, *m, "sub");
      if (!d.ok()) return d.status();
      auto e = Unary(node, *d, "exp");
      if (!e.ok()) return e.status();
      auto s = ReduceOver(node, *e, axes, true, 0);
      if (!s.ok()) return s.status();
      auto l = Unary(node, *s, "log");
      if (!l.ok()) return l.status();
      auto r = BinaryOp(node, *l, *m, "add");
      if (!r.ok()) return r.status();
      Shape out;
      for (size_t dd = 0; dd < rank; ++dd) {
        bool red = false;
        for (int64_t a : axes)
          red = red || (a < 0 ? a + static_cast<int64_t>(rank) : a) == static_cast<int64_t>(dd);
        if (!red || keep) out.push_back(red ? 1 : V(*x).shape[dd]);
      }
      return done(Reshaped(node, *r, out, 0));
    }
    const bool post = op == "ReduceMean" || op == "ReduceL2" || op == "ReduceLogSum";
    auto r = ReduceOver(node, src, axes, keep, kind, pre, post ? -1 : 0);
    if (!r.ok() || !post) return done(r);
    if (op == "ReduceL2") return done(Unary(node, *r, "sqrt", {}, 0));
    if (op == "ReduceLogSum") return done(Unary(node, *r, "log", {}, 0));
    double n = static_cast<double>(V(*x).NumElements()) /
               static_cast<double>(std::max<int64_t>(1, V(*r).NumElements()));
    return done(Unary(node, *r, "scale", {1.0 / n, 0.0}, 0));
  }
  if (op == "ArgMax" || op == "ArgMin") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto axis = NormAxis(node, AttrInt(node, "axis", 0), V(*x).shape.size());
    if (!axis.ok()) return axis.status();
    const bool keep = AttrInt(node, "keepdims", 1) != 0;
    Shape shape;
    for (size_t d = 0; d < V(*x).shape.size(); ++d) {
      if (static_cast<int64_t>(d) != *axis) {
        shape.push_back(V(*x).shape[d]);
      } else if (keep) {
        shape.push_back(1);
      }
    }
    return done(Generic(node, "argreduce", {*x}, shape, DType::kInt64,
                        {{"axis", {*axis}},
                         {"keep", {keep ? 1 : 0}},
                         {"kind", {op == "ArgMax" ? 0 : 1}},
                         {"last", {AttrInt(node, "select_last_index", 0)}}},
                        0));
  }
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", opset_ < 13 ? 1 : -1), xs.size());
    if (!axis.ok()) return axis.status();
    int src = *x;
    std::vector<int64_t> axes;
    if (opset_ < 13) {  // coerced to 2-D at `axis`
      int64_t outer = 1;
      for (int64_t d = 0; d < *axis; ++d) outer *= xs[d];
      auto r = Reshaped(node, *x, {outer, V(*x).NumElements() / std::max<int64_t>(outer, 1)});
      if (!r.ok()) return r.status();
      src = *r;
      axes = {1};
    } else {
      axes = {*axis};
    }
    if (op == "Hardmax") {
      const Shape ss = V(src).shape;
      auto am = Generic(node, "argreduce", {src},
                        [&] {
                          Shape s = ss;
                          s[axes[0]] = 1;
                          return s;
                        }(),
                        DType::kInt64,
                        {{"axis", {axes[0]}}, {"keep", {1}}, {"kind", {0}}, {"last", {0}}});
      if (!am.ok()) return am.status();
      // iota along the axis == argmax
      std::vector<int64_t> iota(ss[axes[0]]);
      std::iota(iota.begin(), iota.end(), 0);
      Shape is(ss.size(), 1);
      is[axes[0]] = ss[axes[0]];
      int io = ConstInt64s(Name(node), is, iota);
      auto eq = BinaryOp(node, io, *am, "equal");
      if (!eq.ok()) return eq.status();
      auto f = Unary(node, *eq, "cast", {static_cast<double>(OnnxCode(V(src).dtype))});
      if (!f.ok()) return f.status();
      auto e = Expand(node, *f, ss);
      if (!e.ok()) return e.status();
      return done(Reshaped(node, *e, xs, 0));
    }
    auto m = ReduceOver(node, src, axes, true, 1);
    if (!m.ok()) return m.status();
    auto d = BinaryOp(node, src, *m, "sub");
    if (!d.ok()) return d.status();
    auto e = Unary(node, *d, "exp");
    if (!e.ok()) return e.status();
    auto s = ReduceOver(node, *e, axes, true, 0);
    if (!s.ok()) return s.status();
    absl::StatusOr<int> r;
    if (op == "Softmax") {
      r = BinaryOp(node, *e, *s, "div");
    } else {
      auto l = Unary(node, *s, "log");
      if (!l.ok()) return l.status();
      r = BinaryOp(node, *d, *l, "sub");
    }
    if (!r.ok()) return r.status();
    return done(Reshaped(node, *r, xs, 0));
  }
  // ---- Shapes and data movement
  if (op == "Shape") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape& xs = V(*x).shape;
    int64_t r = static_cast<int64_t>(xs.size());
    int64_t start = AttrInt(node, "start", 0), end = AttrInt(node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    Shape dims(xs.begin() + start, xs.begin() + end);
    int v = NewValue(node, 0, {static_cast<int64_t>(dims.size())}, DType::kInt64);
    g_->values[v].SetInt64s(dims);
    return absl::OkStatus();
  }
  if (op == "Size") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    int v = NewValue(node, 0, {}, DType::kInt64);
    g_->values[v].SetInt64s({V(*x).NumElements()});
    return absl::OkStatus();
  }
  if (op == "ConstantOfShape") {
    auto shape = ConstInts(node, 0);
    if (!shape.ok()) return shape.status();
    int64_t n = 1;
    for (int64_t d : *shape) {
      if (d < 0 || (d > 0 && n > kMaxFoldElements / d)) {
        return absl::InvalidArgumentError(
            StrCat("node '", Name(node), "': bad shape [", StrJoin(*shape, ","), "]"));
      }
      n *= d;
    }
    DType dtype = DType::kFloat32;
    std::vector<uint8_t> one(4, 0);
    if (const auto* a = Attr(node, "value")) {
      auto d = DTypeFromOnnx(a->t().data_type());
      if (!d) return Unimplemented(node, "unsupported value dtype");
      auto b = TensorBytes(a->t(), *d, 1);
      if (!b.ok()) return b.status();
      dtype = *d;
      one = *b;
    }
    int v = NewValue(node, 0, *shape, dtype);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * DTypeBytes(dtype)));
    for (int64_t i = 0; i < n; ++i)
      std::copy(one.begin(), one.end(), bytes.begin() + i * DTypeBytes(dtype));
    g_->values[v].bytes = std::move(bytes);
    return absl::OkStatus();
  }
  if (op == "Range") {
    auto s = ConstDoubles(node, 0), l = ConstDoubles(node, 1), d = ConstDoubles(node, 2);
    if (!s.ok() || !l.ok() || !d.ok())
      return !s.ok() ? s.status() : !l.ok() ? l.status() : d.status();
    DType dtype = V(*In(node, 0)).dtype;
    double start = s->at(0), limit = l->at(0), delta = d->at(0);
    if (delta == 0) return absl::InvalidArgumentError(StrCat("node '", Name(node), "': delta 0"));
    double cnt = std::max(0.0, std::ceil((limit - start) / delta));
    if (cnt > static_cast<double>(kMaxFoldElements)) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': range too long"));
    }
    int64_t n = static_cast<int64_t>(cnt);
    int v = NewValue(node, 0, {n}, dtype);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * DTypeBytes(dtype)));
    for (int64_t i = 0; i < n; ++i) {
      if (IsFloat(dtype)) {
        DoubleToElement(dtype, start + static_cast<double>(i) * delta, bytes.data(), i);
      } else {
        Int64ToElement(dtype, static_cast<int64_t>(start) + i * static_cast<int64_t>(delta),
                       bytes.data(), i);
      }
    }
    g_->values[v].bytes = std::move(bytes);
    return absl::OkStatus();
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::vector<int64_t> axes = AttrInts(node, "axes", {});
    if (opset_ >= 13 && HasIn(node, 1)) {
      auto a = ConstInts(node, 1);
      if (!a.ok()) return a.status();
      axes = *a;
    }
    Shape xs = V(*x).shape, out;
    if (op == "Squeeze") {
      std::vector<bool> drop(xs.size(), false);
      for (int64_t a : axes) {
        auto n = NormAxis(node, a, xs.size());
        if (!n.ok()) return n.status();
        if (xs[*n] != 1) {
          return absl::InvalidArgumentError(StrCat(
              "node '", Name(node), "': cannot squeeze dimension ", *n, " of size ", xs[*n]));
        }
        drop[*n] = true;
      }
      for (size_t d = 0; d < xs.size(); ++d) {
        if (axes.empty() ? xs[d] != 1 : !drop[d]) out.push_back(xs[d]);
      }
    } else {
      const size_t rank = xs.size() + axes.size();
      std::vector<bool> ins(rank, false);
      for (int64_t a : axes) {
        auto n = NormAxis(node, a, rank);
        if (!n.ok()) return n.status();
        if (ins[*n])
          return absl::InvalidArgumentError(StrCat("node '", Name(node), "': repeated axis"));
        ins[*n] = true;
      }
      size_t k = 0;
      for (size_t d = 0; d < rank; ++d) out.push_back(ins[d] ? 1 : xs[k++]);
    }
    return done(Reshaped(node, *x, out, 0));
  }
  if (op == "Expand") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto shape = ConstInts(node, 1);
    if (!shape.ok()) return shape.status();
    auto s = Broadcast(V(*x).shape, *shape, StrCat("node '", Name(node), "'"));
    if (!s.ok()) return s.status();
    return done(Expand(node, *x, *s, 0));
  }
  if (op == "Tile") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto reps = ConstInts(node, 1);
    if (!reps.ok()) return reps.status();
    Shape xs = V(*x).shape, out;
    if (reps->size() != xs.size())
      return absl::InvalidArgumentError("Tile: repeats must match the rank");
    for (size_t d = 0; d < xs.size(); ++d) {
      if ((*reps)[d] < 0) return absl::InvalidArgumentError("Tile: negative repeat");
      out.push_back(xs[d] * (*reps)[d]);
    }
    return done(Generic(node, "tile", {*x}, out, V(*x).dtype, {}, 0));
  }
  if (op == "Transpose") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    return done(Transposed(node, *x, AttrInts(node, "perm", {}), 0));
  }
  if (op == "Concat") {
    std::vector<int> ins;
    for (int i = 0; i < node.input_size(); ++i) {
      auto v = In(node, i);
      if (!v.ok()) return v.status();
      ins.push_back(*v);
    }
    if (ins.empty()) return absl::InvalidArgumentError("Concat needs inputs");
    auto axis = NormAxis(node, AttrInt(node, "axis", opset_ < 4 ? 1 : 0), V(ins[0]).shape.size());
    if (!axis.ok()) return axis.status();
    Shape out = V(ins[0]).shape;
    out[*axis] = 0;
    for (int v : ins) {
      if (V(v).shape.size() != out.size()) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': inputs differ in rank"));
      }
      out[*axis] += V(v).shape[*axis];
    }
    return done(Generic(node, "concat", ins, out, V(ins[0]).dtype, {{"axis", {*axis}}}, 0));
  }
  if (op == "Split") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", 0), xs.size());
    if (!axis.ok()) return axis.status();
    std::vector<int64_t> split = AttrInts(node, "split", {});
    if (opset_ >= 13 && HasIn(node, 1)) {
      auto s = ConstInts(node, 1);
      if (!s.ok()) return s.status();
      split = *s;
    }
    const int64_t n = xs[*axis];
    if (split.empty()) {
      int64_t parts = AttrInt(node, "num_outputs", node.output_size());
      if (parts <= 0) return absl::InvalidArgumentError("Split: no outputs");
      int64_t each = (n + parts - 1) / parts;
      for (int64_t i = 0, left = n; i < parts; ++i, left -= each)
        split.push_back(std::min(each, std::max<int64_t>(left, 0)));
    }
    if (static_cast<int>(split.size()) != node.output_size() ||
        std::accumulate(split.begin(), split.end(), int64_t{0}) != n) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': split sizes do not match"));
    }
    int64_t start = 0;
    for (int i = 0; i < node.output_size(); ++i) {
      Shape out = xs, starts(xs.size(), 0), steps(xs.size(), 1);
      out[*axis] = split[i];
      starts[*axis] = start;
      start += split[i];
      if (node.output(i).empty()) continue;
      if (split[i] == 0) {
        int v = NewValue(node, i, out, V(*x).dtype);
        g_->values[v].bytes.emplace();
        continue;
      }
      auto r =
          Generic(node, "slice", {*x}, out, V(*x).dtype, {{"starts", starts}, {"steps", steps}}, i);
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  }
  if (op == "Slice") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = AttrInts(node, "starts", {});
      ends = AttrInts(node, "ends", {});
      axes = AttrInts(node, "axes", {});
    } else {
      auto s = ConstInts(node, 1), e = ConstInts(node, 2);
      if (!s.ok() || !e.ok()) return !s.ok() ? s.status() : e.status();
      starts = *s;
      ends = *e;
      if (HasIn(node, 3)) {
        auto a = ConstInts(node, 3);
        if (!a.ok()) return a.status();
        axes = *a;
      }
      if (HasIn(node, 4)) {
        auto st = ConstInts(node, 4);
        if (!st.ok()) return st.status();
        steps = *st;
      }
    }
    if (axes.empty()) {
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (starts.size() != ends.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': starts/ends/axes/steps differ in length"));
    }
    Shape out = xs, st(xs.size(), 0), sp(xs.size(), 1);
    for (size_t k = 0; k < axes.size(); ++k) {
      auto a = NormAxis(node, axes[k], xs.size());
      if (!a.ok()) return a.status();
      const int64_t dim = xs[*a], step = steps[k];
      if (step == 0) return absl::InvalidArgumentError(StrCat("node '", Name(node), "': step 0"));
      int64_t b = starts[k], e = ends[k];
      if (b < 0) b += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        b = std::clamp<int64_t>(b, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        out[*a] = e > b ? (e - b + step - 1) / step : 0;
      } else {
        b = std::clamp<int64_t>(b, -1, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        out[*a] = b > e ? (b - e + (-step) - 1) / (-step) : 0;
      }
      st[*a] = out[*a] == 0 ? 0 : b;
      sp[*a] = step;
    }
    if (Product(out) == 0) {
      int v = NewValue(node, 0, out, V(*x).dtype);
      g_->values[v].bytes.emplace();
      return absl::OkStatus();
    }
    return done(Generic(node, "slice", {*x}, out, V(*x).dtype, {{"starts", st}, {"steps", sp}}, 0));
  }
  if (op == "Gather" || op == "GatherElements") {
    auto x = In(node, 0), ind = In(node, 1);
    if (!x.ok() || !ind.ok()) return !x.ok() ? x.status() : ind.status();
    const Shape xs = V(*x).shape, is = V(*ind).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", 0), xs.size());
    if (!axis.ok()) return axis.status();
    if (IsFloat(V(*ind).dtype) || V(*ind).dtype == DType::kBool) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': indices must be integers"));
    }
    if (V(*ind).IsConstant()) {
      for (int64_t i : V(*ind).ToInt64s()) {
        if (i < -xs[*axis] || i >= xs[*axis]) {
          return absl::InvalidArgumentError(StrCat("node '", Name(node), "': index ", i,
                                                   " out of range for dimension of size ",
                                                   xs[*axis]));
        }
      }
    }
    if (op == "GatherElements") {
      return done(
          Generic(node, "gather_elements", {*x, *ind}, is, V(*x).dtype, {{"axis", {*axis}}}, 0));
    }
    Shape out(xs.begin(), xs.begin() + *axis);
    out.insert(out.end(), is.begin(), is.end());
    out.insert(out.end(), xs.begin() + *axis + 1, xs.end());
    std::map<std::string, std::vector<int64_t>> attrs = {{"axis", {*axis}}};
    if (is.empty()) attrs["scalar_indices"] = {1};
    return done(Generic(node, "gather", {*x, *ind}, out, V(*x).dtype, attrs, 0));
  }
  if (op == "Pad") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const size_t r = xs.size();
    std::vector<int64_t> pads;
    double value = 0;
    std::string mode = AttrString(node, "mode", "constant");
    if (opset_ < 11) {
      pads = AttrInts(node, opset_ < 2 ? "paddings" : "pads", {});
      value = AttrFloat(node, "value", 0.0f);
    } else {
      auto p = ConstInts(node, 1);
      if (!p.ok()) return p.status();
      pads = *p;
      if (HasIn(node, 2)) {
        auto v = ConstDoubles(node, 2);
        if (!v.ok()) return v.status();
        if (!v->empty()) value = (*v)[0];
      }
      if (HasIn(node, 3)) {
        auto a = ConstInts(node, 3);
        if (!a.ok()) return a.status();
        if (pads.size() != 2 * a->size())
          return absl::InvalidArgumentError("Pad: pads must be twice the axes");
        std::vector<int64_t> full(2 * r, 0);
        for (size_t k = 0; k < a->size(); ++k) {
          auto ax = NormAxis(node, (*a)[k], r);
          if (!ax.ok()) return ax.status();
          full[*ax] = pads[k];
          full[*ax + r] = pads[k + a->size()];
        }
        pads = full;
      }
    }
    if (pads.size() != 2 * r) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': pads needs ", 2 * r, " values"));
    }
    Shape out;
    for (size_t d = 0; d < r; ++d) {
      if (std::abs(pads[d]) > kMaxElements || std::abs(pads[d + r]) > kMaxElements) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': pads too large"));
      }
      out.push_back(xs[d] + pads[d] + pads[d + r]);
      if (out.back() < 0)
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': negative output size"));
    }
    int64_t m = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "edge" ? 2 : -1;
    if (m < 0) return Unimplemented(node, StrCat("mode '", mode, "'"));
    return done(Generic(node, "pad", {*x}, out, V(*x).dtype, {{"pads", pads}, {"mode", {m}}}, 0,
                        {{"value", value}}));
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const int64_t b = AttrInt(node, "blocksize", 0);
    if (xs.size() != 4 || b <= 0)
      return absl::InvalidArgumentError("needs NCHW input and blocksize > 0");
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
    absl::StatusOr<int> r, t;
    if (op == "DepthToSpace") {
      if (C % (b * b)) return absl::InvalidArgumentError("channels not divisible by blocksize^2");
      bool crd = AttrString(node, "mode", "DCR") == "CRD";
      r = crd ? Reshaped(node, *x, {N, C / (b * b), b, b, H, W})
              : Reshaped(node, *x, {N, b, b, C / (b * b), H, W});
      if (!r.ok()) return r.status();
      t = crd ? Transposed(node, *r, {0, 1, 4, 2, 5, 3}) : Transposed(node, *r, {0, 3, 4, 1, 5, 2});
      if (!t.ok()) return t.status();
      return done(Reshaped(node, *t, {N, C / (b * b), H * b, W * b}, 0));
    }
    if (H % b || W % b)
      return absl::InvalidArgumentError("spatial dims not divisible by blocksize");
    r = Reshaped(node, *x, {N, C, H / b, b, W / b, b});
    if (!r.ok()) return r.status();
    t = Transposed(node, *r, {0, 3, 5, 1, 2, 4});
    if (!t.ok()) return t.status();
    return done(Reshaped(node, *t, {N, C * b * b, H / b, W / b}, 0));
  }
  if (op == "Trilu") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    int64_t k = 0;
    if (HasIn(node, 1)) {
      auto kv = ConstInts(node, 1);
      if (!kv.ok()) return kv.status();
      k = kv->at(0);
    }
    if (V(*x).NumElements() == 0) return done(Reshaped(node, *x, V(*x).shape, 0));
    return done(Generic(node, "trilu", {*x}, V(*x).shape, V(*x).dtype,
                        {{"upper", {AttrInt(node, "upper", 1)}}, {"k", {k}}}, 0));
  }
  if (op == "CumSum") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto a = ConstInts(node, 1);
    if (!a.ok()) return a.status();
    auto axis = NormAxis(node, a->at(0), V(*x).shape.size());
    if (!axis.ok()) return axis.status();
    return done(Generic(node, "cumsum", {*x}, V(*x).shape, V(*x).dtype,
                        {{"axis", {*axis}},
                         {"exclusive", {AttrInt(node, "exclusive", 0)}},
                         {"reverse", {AttrInt(node, "reverse", 0)}}},
                        0));
  }
  if (op == "OneHot") {
    auto ind = In(node, 0), vals = In(node, 2);
    if (!ind.ok() || !vals.ok()) return !ind.ok() ? ind.status() : vals.status();
    auto depth = ConstDoubles(node, 1);
    if (!depth.ok()) return depth.status();
    const int64_t d = static_cast<int64_t>(depth->at(0));
    Shape is = V(*ind).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), is.size() + 1);
    if (!axis.ok()) return axis.status();
    if (d <= 0 || d > kMaxFoldElements) return absl::InvalidArgumentError("OneHot: bad depth");
    Shape out = is;
    out.insert(out.begin() + *axis, d);
    return done(
        Generic(node, "onehot", {*ind, *vals}, out, V(*vals).dtype, {{"axis", {*axis}}}, 0));
  }
  if (op == "EyeLike") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    DType dtype = V(*x).dtype;
    if (const auto* a = Attr(node, "dtype")) {
      auto d = DTypeFromOnnx(a->i());
      if (!d) return Unimplemented(node, "unsupported dtype");
      dtype = *d;
    }
    return done(
        Generic(node, "eyelike", {*x}, V(*x).shape, dtype, {{"k", {AttrInt(node, "k", 0)}}}, 0));
  }
  // ---- Normalizations, as reductions and elementwise steps
  // (x - mean) / sqrt(var + eps) over `axes`; mean_out / inv_out >= 0 also
  // emit the mean and 1 / sqrt(var + eps) as those node outputs.
  auto normalize = [&](int x, std::vector<int64_t> axes, double eps, int out, int mean_out = -1,
                       int inv_out = -1) -> absl::StatusOr<int> {
    auto mean = ReduceOver(node, x, axes, true, 0);
    if (!mean.ok()) return mean;
    double n = static_cast<double>(V(x).NumElements()) /
               static_cast<double>(std::max<int64_t>(1, V(*mean).NumElements()));
    auto mu = Unary(node, *mean, "scale", {1.0 / n, 0.0}, mean_out);
    if (!mu.ok()) return mu;
    auto d = BinaryOp(node, x, *mu, "sub");
    if (!d.ok()) return d;
    auto sq = ReduceOver(node, *d, axes, true, 0, 2);
    if (!sq.ok()) return sq;
    auto var = Unary(node, *sq, "scale", {1.0 / n, eps});
    if (!var.ok()) return var;
    auto sd = Unary(node, *var, "sqrt");
    if (!sd.ok()) return sd;
    if (inv_out >= 0) {
      auto inv = Unary(node, *sd, "reciprocal", {}, inv_out);
      if (!inv.ok()) return inv;
    }
    return BinaryOp(node, *d, *sd, "div", out);
  };
  if (op == "LayerNormalization") {
    auto x = In(node, 0), scale = In(node, 1);
    if (!x.ok() || !scale.ok()) return !x.ok() ? x.status() : scale.status();
    const size_t r = V(*x).shape.size();
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), r);
    if (!axis.ok()) return axis.status();
    std::vector<int64_t> axes;
    for (size_t d = *axis; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    auto has_out = [&](int i) { return i < node.output_size() && !node.output(i).empty(); };
    auto y = normalize(*x, axes, AttrFloat(node, "epsilon", 1e-5f), -1, has_out(1) ? 1 : -1,
                       has_out(2) ? 2 : -1);
    if (!y.ok()) return y.status();
    bool bias = HasIn(node, 2);
    auto s = BinaryOp(node, *y, *scale, "mul", bias ? -1 : 0);
    if (!s.ok() || !bias) return done(s);
    auto b = In(node, 2);
    if (!b.ok()) return b.status();
    return done(BinaryOp(node, *s, *b, "add", 0));
  }
  if (op == "InstanceNormalization" || op == "MeanVarianceNormalization") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const size_t r = V(*x).shape.size();
    std::vector<int64_t> axes;
    if (op == "MeanVarianceNormalization") {
      axes = AttrInts(node, "axes", {0, 2, 3});
      auto m = ReduceOver(node, *x, axes, true, 0);
      if (!m.ok()) return m.status();
      double n =
          static_cast<double>(V(*x).NumElements()) / static_cast<double>(V(*m).NumElements());
      auto mu = Unary(node, *m, "scale", {1.0 / n, 0.0});
      if (!mu.ok()) return mu.status();
      auto d = BinaryOp(node, *x, *mu, "sub");
      if (!d.ok()) return d.status();
      auto sq = ReduceOver(node, *d, axes, true, 0, 2);
      if (!sq.ok()) return sq.status();
      auto var = Unary(node, *sq, "scale", {1.0 / n, 0.0});
      if (!var.ok()) return var.status();
      auto sd = Unary(node, *var, "sqrt");
      if (!sd.ok()) return sd.status();
      auto sde = Unary(node, *sd, "scale", {1.0, 1e-9});
      if (!sde.ok()) return sde.status();
      return done(BinaryOp(node, *d, *sde, "div", 0));
    }
    for (size_t d = 2; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    auto y = normalize(*x, axes, AttrFloat(node, "epsilon", 1e-5f), -1);
    if (!y.ok()) return y.status();
    Shape cs(r, 1);
    cs[1] = V(*x).shape[1];
    auto scale = In(node, 1), bias = In(node, 2);
    if (!scale.ok() || !bias.ok()) return !scale.ok() ? scale.status() : bias.status();
    auto sc = Reshaped(node, *scale, cs), bi = Reshaped(node, *bias, cs);
    if (!sc.ok() || !bi.ok()) return !sc.ok() ? sc.status() : bi.status();
    auto s = BinaryOp(node, *y, *sc, "mul");
    if (!s.ok()) return s.status();
    return done(BinaryOp(node, *s, *bi, "add", 0));
  }
  if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss") {
    auto x = In(node, 0), t = In(node, 1);
    if (!x.ok() || !t.ok()) return !x.ok() ? x.status() : t.status();
    int input = *x;
    if (V(input).shape.size() < 2) return absl::InvalidArgumentError("loss input rank < 2");
    if (op == "SoftmaxCrossEntropyLoss") {
      // log_softmax over the class axis, then the NLL loss of it.
      const bool want_log = node.output_size() > 1 && !node.output(1).empty();
      auto m = ReduceOver(node, input, {1}, true, 1);
      if (!m.ok()) return m.status();
      auto d = BinaryOp(node, input, *m, "sub");
      if (!d.ok()) return d.status();
      auto e = Unary(node, *d, "exp");
      if (!e.ok()) return e.status();
      auto s = ReduceOver(node, *e, {1}, true, 0);
      if (!s.ok()) return s.status();
      auto l = Unary(node, *s, "log");
      if (!l.ok()) return l.status();
      auto lp = BinaryOp(node, *d, *l, "sub", want_log ? 1 : -1);
      if (!lp.ok()) return lp.status();
      input = *lp;
    }
    std::vector<int> ins = {input, *t};
    if (HasIn(node, 2)) {
      auto wt = In(node, 2);
      if (!wt.ok()) return wt.status();
      ins.push_back(*wt);
    }
    std::map<std::string, std::vector<int64_t>> attrs;
    if (Attr(node, "ignore_index")) {
      attrs["has_ignore"] = {1};
      attrs["ignore"] = {AttrInt(node, "ignore_index", 0)};
    }
    const std::string reduction = AttrString(node, "reduction", "mean");
    const DType dt = V(input).dtype;
    const Shape ts = V(*t).shape;
    attrs["part"] = {0};
    auto loss = Generic(node, "nll", ins, ts, dt, attrs, reduction == "none" ? 0 : -1);
    if (!loss.ok() || reduction == "none") return done(loss);
    std::vector<int64_t> all(ts.size());
    std::iota(all.begin(), all.end(), 0);
    auto total = ReduceOver(node, *loss, all, false, 0, 0, reduction == "sum" ? 0 : -1);
    if (!total.ok() || reduction == "sum") return done(total);
    if (reduction != "mean") return Unimplemented(node, StrCat("reduction '", reduction, "'"));
    attrs["part"] = {1};
    auto wts = Generic(node, "nll", ins, ts, dt, attrs);
    if (!wts.ok()) return wts.status();
    auto wsum = ReduceOver(node, *wts, all, false, 0);
    if (!wsum.ok()) return wsum.status();
    return done(BinaryOp(node, *total, *wsum, "div", 0));
  }
  if (op == "LpNormalization") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), V(*x).shape.size());
    if (!axis.ok()) return axis.status();
    int64_t p = AttrInt(node, "p", 2);
    auto n = ReduceOver(node, *x, {*axis}, true, 0, p == 1 ? 1 : 2);
    if (!n.ok()) return n.status();
    int nv = *n;
    if (p == 2) {
      auto s = Unary(node, nv, "sqrt");
      if (!s.ok()) return s.status();
      nv = *s;
    }
    return done(BinaryOp(node, *x, nv, "div", 0));
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
