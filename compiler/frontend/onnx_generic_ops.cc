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

// The dtype an elementwise fn produces on `in` (float16 stays float16).
DType ResultDType(DType in, ir::DataType result) {
  DType r = ops::FromIrType(result);
  return (in == DType::kFloat16 && r == DType::kFloat32) ? DType::kFloat16 : r;
}

struct UnarySpec {
  const char* op;
  ElementFn fn;
};
constexpr UnarySpec kUnary[] = {
    {"Abs", ElementFn::kAbs},           {"Neg", ElementFn::kNeg},
    {"Sqrt", ElementFn::kSqrt},         {"Exp", ElementFn::kExp},
    {"Log", ElementFn::kLog},           {"Reciprocal", ElementFn::kReciprocal},
    {"Floor", ElementFn::kFloor},       {"Ceil", ElementFn::kCeil},
    {"Round", ElementFn::kRound},       {"Sign", ElementFn::kSign},
    {"Relu", ElementFn::kRelu},         {"Sigmoid", ElementFn::kSigmoid},
    {"Tanh", ElementFn::kTanh},         {"Sin", ElementFn::kSin},
    {"Cos", ElementFn::kCos},           {"Tan", ElementFn::kTan},
    {"Asin", ElementFn::kAsin},         {"Acos", ElementFn::kAcos},
    {"Atan", ElementFn::kAtan},         {"Sinh", ElementFn::kSinh},
    {"Cosh", ElementFn::kCosh},         {"Asinh", ElementFn::kAsinh},
    {"Acosh", ElementFn::kAcosh},       {"Atanh", ElementFn::kAtanh},
    {"Erf", ElementFn::kErf},           {"Softplus", ElementFn::kSoftplus},
    {"Softsign", ElementFn::kSoftsign}, {"Not", ElementFn::kNot},
    {"IsNaN", ElementFn::kIsNan},       {"HardSwish", ElementFn::kHardSwish},
    {"Mish", ElementFn::kMish},         {"BitwiseNot", ElementFn::kBitNot},
};

struct BinarySpec {
  const char* op;
  ElementFn fn;
};
constexpr BinarySpec kBinary[] = {
    {"Add", ElementFn::kAdd},         {"Sub", ElementFn::kSub},
    {"Mul", ElementFn::kMul},         {"Div", ElementFn::kDiv},
    {"Pow", ElementFn::kPow},         {"Equal", ElementFn::kEqual},
    {"Less", ElementFn::kLess},       {"LessOrEqual", ElementFn::kLessEqual},
    {"Greater", ElementFn::kGreater}, {"GreaterOrEqual", ElementFn::kGreaterEqual},
    {"And", ElementFn::kAnd},         {"Or", ElementFn::kOr},
    {"Xor", ElementFn::kXor},         {"BitwiseAnd", ElementFn::kBitAnd},
    {"BitwiseOr", ElementFn::kBitOr}, {"BitwiseXor", ElementFn::kBitXor},
    {"PRelu", ElementFn::kPRelu},
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

absl::StatusOr<int> Importer::Generic(const onnx::NodeProto& node, Op op, std::vector<int> inputs,
                                      Shape shape, DType dtype,
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

absl::StatusOr<int> Importer::Unary(const onnx::NodeProto& node, int x, ElementFn fn,
                                    std::vector<double> params, int out) {
  const DType in = V(x).dtype;
  auto rt = ops::UnaryResultType(fn, ops::ComputeType(in), params);
  if (!rt.ok()) return rt.status();
  DType dtype = fn == ElementFn::kCast ? *DTypeFromOnnx(static_cast<int64_t>(params.at(0)))
                                       : ResultDType(in, *rt);
  Shape s = V(x).shape;
  Workload w;
  w.op = Op::kEltwise;
  w.ints["shape"] = Wl(s);
  w.ints["in_shape"] = Wl(s);
  EpilogueOp e;
  e.kind = EpilogueKind::kUnary;
  e.fn = fn;
  e.params = std::move(params);
  // float32 relu keeps the classic epilogue (and so its workload keys).
  if (fn == ElementFn::kRelu && in == DType::kFloat32) e = {EpilogueKind::kRelu, {}};
  w.epilogue.push_back(e);
  w.SetDtypes({in, dtype});
  // Check the function accepts this input type before anything runs it
  // (storage-only types arrive as their bit patterns).
  ir::Var probe("x", IsStorageOnly(in) ? ops::IrType(in) : ops::ComputeType(in));
  if (auto r = ops::UnaryFn(fn, probe, e.params); !r.ok()) {
    return Unimplemented(node, std::string(r.status().message()));
  }
  int v = out >= 0 ? NewValue(node, out, s, dtype) : TempValue(Name(node), s, dtype);
  if (auto st = AddCompute(node, std::move(w), {x}, v); !st.ok()) return st;
  return v;
}

absl::StatusOr<int> Importer::BinaryOp(const onnx::NodeProto& node, int a, int b, ElementFn fn,
                                       int out) {
  const Shape as = V(a).shape, bs = V(b).shape;
  auto shape = Broadcast(as, bs, StrCat("node '", Name(node), "'"));
  if (!shape.ok()) return shape.status();
  const DType at = V(a).dtype, bt = V(b).dtype;
  if (at != bt && fn != ElementFn::kPow) {
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
  w.op = Op::kEltwise;
  w.ints["shape"] = wo;
  w.ints["in_shape"] = PadTo(Wl(as2), wo.size());
  EpilogueOp e;
  e.kind = EpilogueKind::kBinary;
  e.fn = fn;
  e.reversed = reversed;
  e.operand_shape = PadTo(Wl(bs2), wo.size());
  // float32 add/mul keep the classic epilogues (and so their workload keys).
  if ((fn == ElementFn::kAdd || fn == ElementFn::kMul) && at == DType::kFloat32 &&
      bt == DType::kFloat32) {
    e = {fn == ElementFn::kAdd ? EpilogueKind::kAdd : EpilogueKind::kMul, e.operand_shape};
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
  w.op = Op::kEltwise;
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
  return Generic(node, Op::kReduce, {x}, shape, V(x).dtype,
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
  std::vector<bool> seen(xs.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(xs.size()) || seen[p]) {
      return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bad perm"));
    }
    seen[p] = true;
    shape.push_back(xs[p]);
  }
  if (xs.empty()) return Reshaped(node, x, shape, out);
  return Generic(node, Op::kTranspose, {x}, shape, V(x).dtype, {{"perm", perm}}, out);
}

absl::StatusOr<Importer::ExpSum> Importer::StableExpSum(const onnx::NodeProto& node, int x,
                                                        std::vector<int64_t> axes) {
  auto m = ReduceOver(node, x, axes, true, 1);
  if (!m.ok()) return m.status();
  auto d = BinaryOp(node, x, *m, ElementFn::kSub);
  if (!d.ok()) return d.status();
  auto e = Unary(node, *d, ElementFn::kExp);
  if (!e.ok()) return e.status();
  auto s = ReduceOver(node, *e, std::move(axes), true, 0);
  if (!s.ok()) return s.status();
  return ExpSum{*m, *d, *e, *s};
}

absl::Status Importer::ImportGeneric(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  for (const UnarySpec& u : kUnary) {
    if (op == u.op) {
      auto x = In(node, 0);
      if (!x.ok()) return x.status();
      return StatusOf(Unary(node, *x, u.fn, {}, 0));
    }
  }
  // Unary functions with attributes.
  struct Param {
    const char* name;
    float fallback;
  };
  auto with_params = [&](ElementFn fn, std::vector<Param> ps) -> absl::Status {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::vector<double> params;
    for (const Param& p : ps) params.push_back(AttrFloat(node, p.name, p.fallback));
    return StatusOf(Unary(node, *x, fn, params, 0));
  };
  if (op == "LeakyRelu") return with_params(ElementFn::kLeakyRelu, {{"alpha", 0.01f}});
  if (op == "Elu") return with_params(ElementFn::kElu, {{"alpha", 1.0f}});
  if (op == "Selu")
    return with_params(ElementFn::kSelu, {{"alpha", 1.67326319217681884765625f},
                                          {"gamma", 1.05070102214813232421875f}});
  if (op == "Celu") return with_params(ElementFn::kCelu, {{"alpha", 1.0f}});
  if (op == "HardSigmoid")
    return with_params(ElementFn::kHardSigmoid, {{"alpha", 0.2f}, {"beta", 0.5f}});
  if (op == "ThresholdedRelu") return with_params(ElementFn::kThresholdedRelu, {{"alpha", 1.0f}});
  if (op == "Shrink") return with_params(ElementFn::kShrink, {{"bias", 0.0f}, {"lambd", 0.5f}});
  if (op == "Swish") return with_params(ElementFn::kSwish, {{"alpha", 1.0f}});
  if (op == "Gelu") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::string approx = AttrString(node, "approximate", "none");
    return StatusOf(
        Unary(node, *x, approx == "tanh" ? ElementFn::kGeluTanh : ElementFn::kGelu, {}, 0));
  }
  if (op == "IsInf") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    return StatusOf(Unary(node, *x, ElementFn::kIsInf,
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
    auto to_d = DTypeFromOnnx(to);
    if (!to_d) {
      return Unimplemented(node,
                           StrCat("cast to unsupported dtype ", DtypeName(static_cast<int>(to))));
    }
    std::vector<double> params = {static_cast<double>(to)};
    if (const DType from = V(*x).dtype; IsStorageOnly(from) || IsStorageOnly(*to_d)) {
      params.push_back(static_cast<double>(AttrInt(node, "saturate", 1) != 0));
      params.push_back(OnnxCode(from));
    }
    return StatusOf(Unary(node, *x, ElementFn::kCast, params, 0));
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
        auto r = BinaryOp(node, cur, *b, i == 1 ? ElementFn::kMax : ElementFn::kMin);
        if (!r.ok()) return r.status();
        cur = *r;
      }
      if (cur != *x) {
        if (std::isinf(lo) && std::isinf(hi)) return StatusOf(Reshaped(node, cur, V(cur).shape, 0));
        return StatusOf(Unary(node, cur, ElementFn::kClip, {lo, hi}, 0));
      }
    }
    if (std::isinf(lo) && std::isinf(hi)) return StatusOf(Reshaped(node, *x, V(*x).shape, 0));
    return StatusOf(Unary(node, *x, ElementFn::kClip, {lo, hi}, 0));
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
    // PRelu before opset 7 (older PyTorch exporters): a 1-D slope as long
    // as X's channels is per channel, along axis 1, where NumPy
    // broadcasting would align it with the last axis.
    if (op == "PRelu" && opset_ < 7) {
      const Shape& xs = V(*x).shape;
      const Shape& ss = V(yv).shape;
      if (xs.size() > 2 && ss.size() == 1 && ss[0] > 1 && ss[0] == xs[1]) {
        Shape s(xs.size() - 1, 1);
        s[0] = ss[0];
        auto r = Reshaped(node, yv, s);
        if (!r.ok()) return r.status();
        yv = *r;
      }
    }
    if (op == "Add") {
      auto q = QuantizedAdd(node, *x, yv);
      if (!q.ok() || *q) return q.status();
    }
    return StatusOf(BinaryOp(node, *x, yv, b.fn, 0));
  }
  if (op == "Mod") {
    auto x = In(node, 0);
    auto y = In(node, 1);
    if (!x.ok() || !y.ok()) return x.ok() ? y.status() : x.status();
    return StatusOf(
        BinaryOp(node, *x, *y, AttrInt(node, "fmod", 0) ? ElementFn::kFmod : ElementFn::kMod, 0));
  }
  if (op == "BitShift") {
    auto x = In(node, 0);
    auto y = In(node, 1);
    if (!x.ok() || !y.ok()) return x.ok() ? y.status() : x.status();
    return StatusOf(BinaryOp(
        node, *x, *y,
        AttrString(node, "direction", "") == "LEFT" ? ElementFn::kShl : ElementFn::kShr, 0));
  }
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    if (node.input_size() == 0) return absl::InvalidArgumentError(StrCat(op, " needs inputs"));
    auto first = In(node, 0);
    if (!first.ok()) return first.status();
    int cur = *first;
    const ElementFn fn = op == "Max"   ? ElementFn::kMax
                         : op == "Min" ? ElementFn::kMin
                                       : ElementFn::kAdd;
    for (int i = 1; i < node.input_size(); ++i) {
      auto y = In(node, i);
      if (!y.ok()) return y.status();
      bool last = i + 1 == node.input_size() && op != "Mean";
      auto r = BinaryOp(node, cur, *y, fn, last ? 0 : -1);
      if (!r.ok()) return r.status();
      cur = *r;
    }
    if (op == "Mean")
      return StatusOf(Unary(node, cur, ElementFn::kScale, {1.0 / node.input_size(), 0.0}, 0));
    if (node.input_size() == 1) return StatusOf(Reshaped(node, cur, V(cur).shape, 0));
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
    return StatusOf(Generic(node, Op::kWhere, ins, *s, V(*x).dtype, {}, 0));
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
        return StatusOf(Reshaped(node, *x, V(*x).shape, 0));
      }
      for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
    }
    const bool keep = AttrInt(node, "keepdims", 1) != 0;
    auto [kind, pre] = it->second;
    int src = *x;
    if (op == "ReduceLogSumExp") {
      // log(sum(exp(x - max))) + max, stable for large x.
      auto st = StableExpSum(node, *x, axes);
      if (!st.ok()) return st.status();
      auto l = Unary(node, st->sum, ElementFn::kLog);
      if (!l.ok()) return l.status();
      auto r = BinaryOp(node, *l, st->max, ElementFn::kAdd);
      if (!r.ok()) return r.status();
      Shape out;
      for (size_t dd = 0; dd < rank; ++dd) {
        bool red = false;
        for (int64_t a : axes)
          red = red || (a < 0 ? a + static_cast<int64_t>(rank) : a) == static_cast<int64_t>(dd);
        if (!red || keep) out.push_back(red ? 1 : V(*x).shape[dd]);
      }
      return StatusOf(Reshaped(node, *r, out, 0));
    }
    const bool post = op == "ReduceMean" || op == "ReduceL2" || op == "ReduceLogSum";
    auto r = ReduceOver(node, src, axes, keep, kind, pre, post ? -1 : 0);
    if (!r.ok() || !post) return StatusOf(r);
    if (op == "ReduceL2") return StatusOf(Unary(node, *r, ElementFn::kSqrt, {}, 0));
    if (op == "ReduceLogSum") return StatusOf(Unary(node, *r, ElementFn::kLog, {}, 0));
    double n = static_cast<double>(V(*x).NumElements()) /
               static_cast<double>(std::max<int64_t>(1, V(*r).NumElements()));
    return StatusOf(Unary(node, *r, ElementFn::kScale, {1.0 / n, 0.0}, 0));
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
    return StatusOf(Generic(node, Op::kArgReduce, {*x}, shape, DType::kInt64,
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
      auto am = Generic(node, Op::kArgReduce, {src},
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
      auto eq = BinaryOp(node, io, *am, ElementFn::kEqual);
      if (!eq.ok()) return eq.status();
      auto f = Unary(node, *eq, ElementFn::kCast, {static_cast<double>(OnnxCode(V(src).dtype))});
      if (!f.ok()) return f.status();
      auto e = Expand(node, *f, ss);
      if (!e.ok()) return e.status();
      return StatusOf(Reshaped(node, *e, xs, 0));
    }
    auto st = StableExpSum(node, src, axes);
    if (!st.ok()) return st.status();
    absl::StatusOr<int> r;
    if (op == "Softmax") {
      r = BinaryOp(node, st->exp, st->sum, ElementFn::kDiv);
    } else {
      auto l = Unary(node, st->sum, ElementFn::kLog);
      if (!l.ok()) return l.status();
      r = BinaryOp(node, st->shifted, *l, ElementFn::kSub);
    }
    if (!r.ok()) return r.status();
    return StatusOf(Reshaped(node, *r, xs, 0));
  }
  bool moved = false;
  if (auto s = ImportDataMovement(node, &moved); !s.ok() || moved) return s;
  if (auto s = ImportNormalization(node, &moved); !s.ok() || moved) return s;
  if (auto s = ImportLinalg(node, &moved); !s.ok() || moved) return s;
  return ImportIndexing(node, handled);
}

}  // namespace kiln::compiler::onnx_internal
