#include "compiler/ops/interpret.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "base/dtype.h"
#include "base/str.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
namespace {

using namespace ir;

// One scalar: floats in `f`, integers and bools in `i` (uint64 as its bits).
struct Val {
  double f = 0;
  int64_t i = 0;
};

// Rounds a float result to its type's precision; wraps an integer to its width.
Val Fix(DataType t, Val v) {
  if (t.is_float()) {
    if (t.bits == 32) v.f = static_cast<float>(v.f);
    if (t.bits == 16) v.f = HalfToFloat(FloatToHalf(static_cast<float>(v.f)));
  } else if (t.is_bool()) {
    v.i = v.i != 0;
  } else if (t.bits < 64) {
    uint64_t mask = (uint64_t{1} << t.bits) - 1;
    uint64_t u = static_cast<uint64_t>(v.i) & mask;
    if (t.is_int() && (u >> (t.bits - 1)) & 1) u |= ~mask;  // sign-extend
    v.i = static_cast<int64_t>(u);
  }
  return v;
}

double Round(double x) { return std::nearbyint(x); }  // half to even (default mode)

struct Buf {
  uint8_t* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

class Evaluator {
 public:
  absl::Status status;
  std::map<const BufferNode*, Buf> bufs;

  Val Eval(const Expr& e) {
    if (!status.ok()) return {};
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return {0, e.as<IntImmNode>()->value};
      case ExprKind::kFloatImm:
        return Fix(e.dtype(), {e.as<FloatImmNode>()->value, 0});
      case ExprKind::kVar: {
        const ExprNode* key = e.get();
        for (size_t k = vars_.size(); k-- > 0;) {
          if (vars_[k].first == key) return vars_[k].second;
        }
        Fail(StrCat("unbound variable ", e.as<VarNode>()->name));
        return {};
      }
      case ExprKind::kNot: {
        Val a = Eval(e.as<NotNode>()->a);
        return e.dtype().is_bool() ? Val{0, a.i == 0} : Fix(e.dtype(), {0, ~a.i});
      }
      case ExprKind::kSelect: {
        const auto* n = e.as<SelectNode>();
        return Eval(n->cond).i ? Eval(n->true_value) : Eval(n->false_value);
      }
      case ExprKind::kCast:
        return Cast(e.dtype(), e.as<CastNode>()->value);
      case ExprKind::kBufferLoad:
        return Load(e.as<BufferLoadNode>());
      case ExprKind::kCall:
        return Call(e.as<CallNode>());
      case ExprKind::kReduce:
        return Reduce(e.as<ReduceNode>());
      case ExprKind::kLet: {
        const auto* n = e.as<LetNode>();
        Val v = Eval(n->value);
        vars_.push_back({n->var.get(), v});
        Val out = Eval(n->body);
        vars_.pop_back();
        return out;
      }
      case ExprKind::kBroadcast:
      case ExprKind::kRamp:
        Fail("vector expressions are not interpreted");
        return {};
      default:
        if (IsBinary(e.kind())) return Binary(static_cast<const BinaryNode*>(e.get()));
        Fail("unknown expression kind");
        return {};
    }
  }

  void Bind(const Var& v, int64_t value) { vars_.push_back({v.get(), {0, value}}); }
  void Unbind() { vars_.pop_back(); }

 private:
  std::vector<std::pair<const ExprNode*, Val>> vars_;

  void Fail(std::string msg) {
    if (status.ok()) status = absl::InvalidArgumentError(StrCat("interpreter: ", msg));
  }

  Val Binary(const BinaryNode* n) {
    Val a = Eval(n->a), b = Eval(n->b);
    DataType t = n->a.dtype();
    if (t.is_float()) {
      double x = a.f, y = b.f, r = 0;
      switch (n->kind) {
        case ExprKind::kAdd:
          r = x + y;
          break;
        case ExprKind::kSub:
          r = x - y;
          break;
        case ExprKind::kMul:
          r = x * y;
          break;
        case ExprKind::kDiv:
          r = x / y;
          break;
        case ExprKind::kMod:
          r = std::fmod(x, y);
          break;
        case ExprKind::kFloorDiv:
          r = std::floor(x / y);
          break;
        case ExprKind::kFloorMod:
          r = x - std::floor(x / y) * y;
          break;
        case ExprKind::kMin:
          r = x < y ? x : y;
          break;
        case ExprKind::kMax:
          r = x > y ? x : y;
          break;
        case ExprKind::kEQ:
          return {0, x == y};
        case ExprKind::kNE:
          return {0, x != y};
        case ExprKind::kLT:
          return {0, x < y};
        case ExprKind::kLE:
          return {0, x <= y};
        case ExprKind::kGT:
          return {0, x > y};
        case ExprKind::kGE:
          return {0, x >= y};
        default:
          Fail("logical operator on floats");
          return {};
      }
      return Fix(t, {r, 0});
    }
    const bool u = t.is_uint();
    const uint64_t ux = static_cast<uint64_t>(a.i), uy = static_cast<uint64_t>(b.i);
    int64_t x = a.i, y = b.i, r = 0;
    switch (n->kind) {
      case ExprKind::kAdd:
        r = static_cast<int64_t>(ux + uy);
        break;
      case ExprKind::kSub:
        r = static_cast<int64_t>(ux - uy);
        break;
      case ExprKind::kMul:
        r = static_cast<int64_t>(ux * uy);
        break;
      case ExprKind::kDiv:
      case ExprKind::kMod:
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod: {
        if (y == 0) {
          Fail("integer division by zero");
          return {};
        }
        if (u) {
          r = static_cast<int64_t>(
              (n->kind == ExprKind::kDiv || n->kind == ExprKind::kFloorDiv) ? ux / uy : ux % uy);
          break;
        }
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          r = n->kind == ExprKind::kDiv || n->kind == ExprKind::kFloorDiv ? x : 0;
          break;
        }
        int64_t q = x / y, m = x % y;
        if (n->kind == ExprKind::kDiv) r = q;
        if (n->kind == ExprKind::kMod) r = m;
        bool adjust = m != 0 && ((m < 0) != (y < 0));
        if (n->kind == ExprKind::kFloorDiv) r = adjust ? q - 1 : q;
        if (n->kind == ExprKind::kFloorMod) r = adjust ? m + y : m;
        break;
      }
      case ExprKind::kMin:
        r = u ? static_cast<int64_t>(std::min(ux, uy)) : std::min(x, y);
        break;
      case ExprKind::kMax:
        r = u ? static_cast<int64_t>(std::max(ux, uy)) : std::max(x, y);
        break;
      case ExprKind::kEQ:
        return {0, x == y};
      case ExprKind::kNE:
        return {0, x != y};
      case ExprKind::kLT:
        return {0, u ? ux < uy : x < y};
      case ExprKind::kLE:
        return {0, u ? ux <= uy : x <= y};
      case ExprKind::kGT:
        return {0, u ? ux > uy : x > y};
      case ExprKind::kGE:
        return {0, u ? ux >= uy : x >= y};
      case ExprKind::kAnd:
        r = t.is_bool() ? (x != 0 && y != 0) : (x & y);
        break;
      case ExprKind::kOr:
        r = t.is_bool() ? (x != 0 || y != 0) : (x | y);
        break;
      default:
        Fail("unknown binary operator");
        return {};
    }
    return Fix(t, {0, r});
  }

  Val Cast(DataType to, const Expr& from_e) {
    Val v = Eval(from_e);
    DataType from = from_e.dtype();
    if (to.is_bool()) return {0, from.is_float() ? v.f != 0 : v.i != 0};
    if (to.is_float()) {
      double d = from.is_float()  ? v.f
                 : from.is_uint() ? static_cast<double>(static_cast<uint64_t>(v.i))
                                  : static_cast<double>(v.i);
      return Fix(to, {d, 0});
    }
    if (from.is_float()) {
      double d = std::trunc(v.f);
      if (std::isnan(d)) return {0, 0};
      if (to.is_uint()) {
        if (d <= 0) return Fix(to, {0, static_cast<int64_t>(d)});
        if (d >= 18446744073709551615.0) return {0, -1};
        return Fix(to, {0, static_cast<int64_t>(static_cast<uint64_t>(d))});
      }
      if (d >= 9223372036854775807.0) return Fix(to, {0, std::numeric_limits<int64_t>::max()});
      if (d <= -9223372036854775808.0) return Fix(to, {0, std::numeric_limits<int64_t>::min()});
      return Fix(to, {0, static_cast<int64_t>(d)});
    }
    return Fix(to, v);  // integer/bool -> integer: wrap (values are already extended)
  }

  Val Load(const BufferLoadNode* n) {
    auto it = bufs.find(n->buffer.get());
    if (it == bufs.end()) {
      Fail(StrCat("buffer ", n->buffer->name, " is not bound"));
      return {};
    }
    const Buf& b = it->second;
    if (n->indices.size() != b.shape.size()) {
      Fail(StrCat("load of ", n->buffer->name, " with ", n->indices.size(), " indices"));
      return {};
    }
    int64_t flat = 0;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      int64_t i = Eval(n->indices[d]).i;
      if (i < 0 || i >= b.shape[d]) {
        Fail(StrCat("index ", i, " out of bounds for dimension ", d, " (size ", b.shape[d], ") of ",
                    n->buffer->name));
        return {};
      }
      flat = flat * b.shape[d] + i;
    }
    if (IsFloat(b.dtype)) return {ElementToDouble(b.dtype, b.data, flat), 0};
    return {0, ElementToInt64(b.dtype, b.data, flat)};
  }

  Val Call(const CallNode* n) {
    std::vector<Val> a;
    for (const Expr& e : n->args) a.push_back(Eval(e));
    using I = Intrinsic;
    const I f = n->op;
    DataType t = n->dtype;
    DataType at = n->args.empty() ? t : n->args[0].dtype();
    if (f == I::kReinterpret && a.size() == 1 && at.bits == t.bits &&
        (t.bits == 32 || t.bits == 64)) {
      uint64_t bits = 0;
      if (at.is_float() && at.bits == 32) {
        bits = FloatToBits(static_cast<float>(a[0].f));
      } else if (at.is_float()) {
        std::memcpy(&bits, &a[0].f, 8);
      } else {
        bits = static_cast<uint64_t>(a[0].i);
      }
      if (!t.is_float()) return Fix(t, {0, static_cast<int64_t>(bits)});
      if (t.bits == 32) return {BitsToFloat(static_cast<uint32_t>(bits)), 0};
      double d;
      std::memcpy(&d, &bits, 8);
      return {d, 0};
    }
    if (at.is_integer() || at.is_bool()) {
      int64_t x = a.empty() ? 0 : a[0].i, y = a.size() > 1 ? a[1].i : 0;
      uint64_t ux = static_cast<uint64_t>(x);
      if (f == I::kBitAnd) return Fix(t, {0, x & y});
      if (f == I::kBitOr) return Fix(t, {0, x | y});
      if (f == I::kBitXor) return Fix(t, {0, x ^ y});
      if (f == I::kBitNot) return Fix(t, {0, ~x});
      if (f == I::kShl)
        return Fix(t, {0, y >= at.bits || y < 0 ? 0 : static_cast<int64_t>(ux << y)});
      if (f == I::kShr) {
        if (at.is_uint()) {
          uint64_t mask = at.bits == 64 ? ~uint64_t{0} : (uint64_t{1} << at.bits) - 1;
          return Fix(t, {0, y >= at.bits || y < 0 ? 0 : static_cast<int64_t>((ux & mask) >> y)});
        }
        return Fix(t, {0, x >> std::min<int64_t>(std::max<int64_t>(y, 0), 63)});
      }
      Fail(StrCat("unknown integer intrinsic '", f, "'"));
      return {};
    }
    double x = a.empty() ? 0 : a[0].f, y = a.size() > 1 ? a[1].f : 0;
    auto fl = [&](double r) { return Fix(t, {r, 0}); };
    if (f == I::kIsNan) return {0, std::isnan(x)};
    static const std::map<I, double (*)(double)> kUnary = {
        {I::kExp, [](double v) { return std::exp(v); }},
        {I::kLog, [](double v) { return std::log(v); }},
        {I::kSqrt, [](double v) { return std::sqrt(v); }},
        {I::kFabs, [](double v) { return std::fabs(v); }},
        {I::kFloor, [](double v) { return std::floor(v); }},
        {I::kCeil, [](double v) { return std::ceil(v); }},
        {I::kTrunc, [](double v) { return std::trunc(v); }},
        {I::kRoundEven, Round},
        {I::kSin, [](double v) { return std::sin(v); }},
        {I::kCos, [](double v) { return std::cos(v); }},
        {I::kTan, [](double v) { return std::tan(v); }},
        {I::kAsin, [](double v) { return std::asin(v); }},
        {I::kAcos, [](double v) { return std::acos(v); }},
        {I::kAtan, [](double v) { return std::atan(v); }},
        {I::kSinh, [](double v) { return std::sinh(v); }},
        {I::kCosh, [](double v) { return std::cosh(v); }},
        {I::kTanh, [](double v) { return std::tanh(v); }},
        {I::kAsinh, [](double v) { return std::asinh(v); }},
        {I::kAcosh, [](double v) { return std::acosh(v); }},
        {I::kAtanh, [](double v) { return std::atanh(v); }},
        {I::kErf, [](double v) { return std::erf(v); }},
        {I::kSigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
    };
    if (auto it = kUnary.find(f); it != kUnary.end() && a.size() == 1) return fl(it->second(x));
    if (f == I::kPow && a.size() == 2) return fl(std::pow(x, y));
    if (f == I::kFmod && a.size() == 2) return fl(std::fmod(x, y));
    Fail(StrCat("unknown intrinsic '", f, "' with ", a.size(), " arguments"));
    return {};
  }

  Val Reduce(const ReduceNode* n) {
    Val acc = Eval(n->init);
    const bool fp = n->dtype.is_float();
    std::vector<int64_t> lo, ext;
    for (const IterRange& r : n->axes) {
      lo.push_back(Eval(r.min).i);
      ext.push_back(Eval(r.extent).i);
    }
    for (int64_t e : ext) {
      if (e <= 0) return acc;
    }
    std::vector<int64_t> idx(lo);
    const size_t k = idx.size();
    for (size_t d = 0; d < k; ++d) vars_.push_back({n->axes[d].var.get(), {0, idx[d]}});
    const size_t base = vars_.size() - k;
    while (status.ok()) {
      for (size_t d = 0; d < k; ++d) vars_[base + d].second.i = idx[d];
      Val v = Eval(n->source);
      switch (n->reduce_kind) {
        case ReduceKind::kSum:
          acc = fp ? Fix(n->dtype, {acc.f + v.f, 0}) : Fix(n->dtype, {0, acc.i + v.i});
          break;
        case ReduceKind::kProd:
          acc = fp ? Fix(n->dtype, {acc.f * v.f, 0})
                   : Fix(n->dtype, {0, static_cast<int64_t>(static_cast<uint64_t>(acc.i) *
                                                            static_cast<uint64_t>(v.i))});
          break;
        case ReduceKind::kMax:
          if (fp) {
            acc.f = acc.f > v.f ? acc.f : v.f;
          } else {
            acc.i = std::max(acc.i, v.i);
          }
          break;
        case ReduceKind::kMin:
          if (fp) {
            acc.f = acc.f < v.f ? acc.f : v.f;
          } else {
            acc.i = std::min(acc.i, v.i);
          }
          break;
      }
      size_t d = k;
      while (d-- > 0) {
        if (++idx[d] < lo[d] + ext[d]) break;
        idx[d] = lo[d];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
    vars_.resize(base);
    return acc;
  }
};

// Evaluates compute `op` into `out` (its dtype's dense buffer).
void EvaluateOp(Evaluator& ev, const te::OperationNode& op, uint8_t* out) {
  const size_t rank = op.shape.size();
  int64_t n = 1;
  for (int64_t d : op.shape) n *= d;
  if (n == 0) return;
  DType dt = FromIrType(op.buffer->dtype);
  std::vector<int64_t> idx(rank, 0);
  for (const ir::IterRange& a : op.axes) ev.Bind(a.var, 0);
  for (int64_t flat = 0; flat < n && ev.status.ok(); ++flat) {
    for (size_t d = 0; d < rank; ++d) {
      ev.Unbind();
    }
    for (size_t d = 0; d < rank; ++d) ev.Bind(op.axes[d].var, idx[d]);
    Val v = ev.Eval(op.body);
    if (IsFloat(dt)) {
      DoubleToElement(dt, v.f, out, flat);
    } else {
      Int64ToElement(dt, v.i, out, flat);
    }
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < op.shape[d]) break;
      idx[d] = 0;
    }
  }
  for (size_t d = 0; d < rank; ++d) ev.Unbind();
}

}  // namespace

absl::Status Interpret(const std::vector<te::Tensor>& args, std::span<const void* const> inputs,
                       void* output) {
  if (args.empty() || inputs.size() + 1 != args.size()) {
    return absl::InvalidArgumentError("Interpret: one buffer per argument");
  }
  Evaluator ev;
  auto bind = [&](const te::OperationNode& op, uint8_t* data) {
    ev.bufs[op.buffer.get()] = {data, FromIrType(op.buffer->dtype), op.shape};
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    bind(*args[i].op(), static_cast<uint8_t*>(const_cast<void*>(inputs[i])));
  }
  // Every compute reachable from the output, producers first.
  std::vector<const te::OperationNode*> order;
  std::function<void(const te::OperationNode*)> visit = [&](const te::OperationNode* op) {
    if (op->kind != te::OpKind::kCompute || ev.bufs.count(op->buffer.get())) return;
    for (const auto& in : op->inputs) visit(in.get());
    for (const auto* o : order) {
      if (o == op) return;
    }
    order.push_back(op);
  };
  const te::OperationNode* out_op = args.back().op().get();
  for (const auto& in : out_op->inputs) visit(in.get());
  std::vector<std::unique_ptr<uint8_t[]>> scratch;
  for (const te::OperationNode* op : order) {
    int64_t n = 1;
    for (int64_t d : op->shape) n *= d;
    scratch.emplace_back(new uint8_t[static_cast<size_t>(
        std::max<int64_t>(1, n * DTypeBytes(FromIrType(op->buffer->dtype))))]());
    bind(*op, scratch.back().get());
    EvaluateOp(ev, *op, scratch.back().get());
    if (!ev.status.ok()) return ev.status;
  }
  bind(*out_op, static_cast<uint8_t*>(output));
  EvaluateOp(ev, *out_op, static_cast<uint8_t*>(output));
  return ev.status;
}

}  // namespace kiln::compiler::ops
