#include "compiler/ops/elementwise.h"

#include <cmath>
#include <limits>

#include "deploy/str.h"

namespace kiln::compiler::ops {
namespace {

using namespace ir;

// A constant of x's (scalar) type.
Expr C(const Expr& x, double v) {
  DataType t = x.dtype().Element();
  if (t.is_float()) return FloatImm(v, t);
  if (t.is_bool()) return IntImm(v != 0, t);
  return IntImm(static_cast<int64_t>(v), t);
}

Expr F(const std::string& name, const Expr& x) { return Call(x.dtype(), name, {x}); }

absl::Status Arity(const std::string& fn, const std::vector<double>& p, size_t want) {
  if (p.size() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("elementwise '", fn, "' takes ", want, " parameters, got ", p.size()));
}

absl::Status NeedFloat(const std::string& fn, const Expr& x) {
  if (x.dtype().is_float()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("elementwise '", fn, "' needs a float input, got ", ToString(x.dtype())));
}

}  // namespace

DataType IrType(DType t) {
  switch (t) {
    case DType::kFloat32:
      return DataType::Float32();
    case DType::kFloat64:
      return DataType::Float64();
    case DType::kFloat16:
      return {TypeCode::kFloat, 16, 1};
    case DType::kBool:
      return DataType::Bool();
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return DataType::UInt(DTypeBytes(t) * 8);
    default:
      return DataType::Int(DTypeBytes(t) * 8);
  }
}

DType FromIrType(DataType t) {
  switch (t.code) {
    case TypeCode::kFloat:
      return t.bits == 64 ? DType::kFloat64 : t.bits == 16 ? DType::kFloat16 : DType::kFloat32;
    case TypeCode::kBool:
      return DType::kBool;
    case TypeCode::kUInt:
      return t.bits == 8    ? DType::kUInt8
             : t.bits == 16 ? DType::kUInt16
             : t.bits == 32 ? DType::kUInt32
                            : DType::kUInt64;
    default:
      return t.bits == 8    ? DType::kInt8
             : t.bits == 16 ? DType::kInt16
             : t.bits == 32 ? DType::kInt32
                            : DType::kInt64;
  }
}

DataType ComputeType(DType t) { return t == DType::kFloat16 ? DataType::Float32() : IrType(t); }

Expr Promote(Expr x) {
  if (x.dtype().is_float() && x.dtype().bits == 16) return Cast(DataType::Float32(), x);
  return x;
}

absl::StatusOr<DataType> UnaryResultType(const std::string& fn, DataType in,
                                         const std::vector<double>& params) {
  if (fn == "isnan" || fn == "isinf" || fn == "not") return DataType::Bool();
  if (fn == "cast") {
    if (params.size() != 1) return absl::InvalidArgumentError("cast takes one parameter");
    auto d = DTypeFromOnnx(static_cast<int64_t>(params[0]));
    if (!d) return absl::InvalidArgumentError(StrCat("cast to unknown dtype ", params[0]));
    return ComputeType(*d);
  }
  return in;
}

absl::StatusOr<DataType> BinaryResultType(const std::string& fn, DataType a) {
  if (fn == "equal" || fn == "less" || fn == "lessequal" || fn == "greater" ||
      fn == "greaterequal" || fn == "and" || fn == "or" || fn == "xor") {
    return DataType::Bool();
  }
  return a;
}

absl::StatusOr<Expr> UnaryFn(const std::string& fn, Expr x, const std::vector<double>& p) {
  x = Promote(std::move(x));
  const DataType t = x.dtype();
  const bool fp = t.is_float();
  auto need = [&](size_t n) { return Arity(fn, p, n); };
#define KILN_TRY(expr) \
  if (absl::Status s = (expr); !s.ok()) return s;
  if (fn == "cast") {
    KILN_TRY(need(1));
    auto to = UnaryResultType(fn, t, p);
    if (!to.ok()) return to.status();
    if (*to == t) return x;
    if (fp && !to->is_float() && !to->is_bool()) {
      // NaN and out-of-range values saturate instead of being undefined.
      double lo = to->is_uint() ? 0.0 : -std::ldexp(1.0, to->bits - 1);
      double hi = to->is_uint() ? std::ldexp(1.0, to->bits) - 1 : std::ldexp(1.0, to->bits - 1) - 1;
      Expr c =
          Select(Call(DataType::Bool(), "isnan", {x}), C(x, 0), Max(Min(x, C(x, hi)), C(x, lo)));
      if (t.bits == 32 && to->bits == 64) return Cast(*to, Cast(DataType::Float64(), c));
      return Cast(*to, c);
    }
    return Cast(*to, x);
  }
  if (fn == "not") {
    if (!t.is_bool()) return absl::InvalidArgumentError("not needs a bool input");
    return !x;
  }
  if (fn == "bitnot") {
    if (!t.is_integer()) return absl::InvalidArgumentError("bitnot needs an integer input");
    return Call(t, "bitnot", {x});
  }
  if (fn == "neg") {
    KILN_TRY(need(0));
    return C(x, 0) - x;
  }
  if (fn == "abs") {
    KILN_TRY(need(0));
    if (fp) return F("fabs", x);
    if (t.is_uint()) return x;
    return Select(x < C(x, 0), C(x, 0) - x, x);
  }
  if (fn == "relu") {
    KILN_TRY(need(0));
    return Max(x, C(x, 0));
  }
  if (fn == "sign") {
    KILN_TRY(need(0));
    return Select(x > C(x, 0), C(x, 1), Select(x < C(x, 0), C(x, -1), C(x, 0)));
  }
  if (fn == "isnan") {
    KILN_TRY(NeedFloat(fn, x));
    return Call(DataType::Bool(), "isnan", {x});
  }
  if (fn == "isinf") {
    KILN_TRY(need(2));
    KILN_TRY(NeedFloat(fn, x));
    Expr pos = Eq(x, C(x, INFINITY)), neg = Eq(x, C(x, -INFINITY));
    if (p[0] != 0 && p[1] != 0) return pos || neg;
    if (p[0] != 0) return pos;
    if (p[1] != 0) return neg;
    return Ne(x, x) && Eq(x, x);  // always false
  }
  // Everything below computes on floats.
  KILN_TRY(NeedFloat(fn, x));
  static const char* kDirect[] = {"sqrt",  "exp",   "log",   "floor", "ceil",   "sin",  "cos",
                                  "tan",   "asin",  "acos",  "atan",  "sinh",   "cosh", "tanh",
                                  "asinh", "acosh", "atanh", "erf",   "sigmoid"};
  for (const char* name : kDirect) {
    if (fn == name) {
      KILN_TRY(need(0));
      return F(fn, x);
    }
  }
  if (fn == "round") return F("roundeven", x);
  if (fn == "reciprocal") return C(x, 1) / x;
  if (fn == "softplus") {
    // log(1 + exp(x)), stable for large x.
    return Select(x > C(x, 20), x, F("log", C(x, 1) + F("exp", x)));
  }
  if (fn == "softsign") return x / (C(x, 1) + F("fabs", x));
  if (fn == "leakyrelu") {
    KILN_TRY(need(1));
    return Select(x < C(x, 0), x * C(x, p[0]), x);
  }
  if (fn == "elu") {
    KILN_TRY(need(1));
    return Select(x < C(x, 0), C(x, p[0]) * (F("exp", x) - C(x, 1)), x);
  }
  if (fn == "selu") {
    KILN_TRY(need(2));
    return Select(x <= C(x, 0), C(x, p[1]) * (C(x, p[0]) * F("exp", x) - C(x, p[0])),
                  C(x, p[1]) * x);
  }
  if (fn == "celu") {
    KILN_TRY(need(1));
    Expr e = C(x, p[0]) * (F("exp", x / C(x, p[0])) - C(x, 1));
    return Max(x, C(x, 0)) + Min(C(x, 0), e);
  }
  if (fn == "hardsigmoid") {
    KILN_TRY(need(2));
    return Max(C(x, 0), Min(C(x, 1), C(x, p[0]) * x + C(x, p[1])));
  }
  if (fn == "hardswish") {
    return x * Max(C(x, 0), Min(C(x, 1), x * C(x, 1.0 / 6) + C(x, 0.5)));
  }
  if (fn == "thresholdedrelu") {
    KILN_TRY(need(1));
    return Select(x > C(x, p[0]), x, C(x, 0));
  }
  if (fn == "shrink") {
    KILN_TRY(need(2));
    const double bias = p[0], lambd = p[1];
    return Select(x < C(x, -lambd), x + C(x, bias),
                  Select(x > C(x, lambd), x - C(x, bias), C(x, 0)));
  }
  if (fn == "clip") {
    KILN_TRY(need(2));
    Expr y = x;
    if (!std::isinf(p[0])) y = Max(y, C(x, p[0]));
    if (!std::isinf(p[1])) y = Min(y, C(x, p[1]));
    return y;
  }
  if (fn == "gelu") {  // x/2 (1 + erf(x / sqrt 2))
    return C(x, 0.5) * x * (C(x, 1) + F("erf", x * C(x, M_SQRT1_2)));
  }
  if (fn == "gelu_tanh") {
    Expr inner = C(x, std::sqrt(2.0 / M_PI)) * (x + C(x, 0.044715) * x * x * x);
    return C(x, 0.5) * x * (C(x, 1) + F("tanh", inner));
  }
  if (fn == "mish") {
    Expr sp = Select(x > C(x, 20), x, F("log", C(x, 1) + F("exp", x)));
    return x * F("tanh", sp);
  }
  if (fn == "swish") {
    KILN_TRY(need(1));
    return x * F("sigmoid", x * C(x, p[0]));
  }
  if (fn == "scale") {
    KILN_TRY(need(2));
    return x * C(x, p[0]) + C(x, p[1]);
  }
  if (fn == "powc") {
    KILN_TRY(need(1));
    if (p[0] == 2) return x * x;
    if (p[0] == 1) return x;
    if (p[0] == 0.5) return F("sqrt", x);
    return Call(t, "pow", {x, C(x, p[0])});
  }
#undef KILN_TRY
  return absl::InvalidArgumentError(StrCat("unknown elementwise function '", fn, "'"));
}

absl::StatusOr<Expr> BinaryFn(const std::string& fn, Expr a, Expr b) {
  a = Promote(std::move(a));
  b = Promote(std::move(b));
  if (fn == "pow") {
    if (!a.dtype().is_float()) {
      // Integer base: compute in double and truncate back, as onnxruntime does.
      Expr r = Call(DataType::Float64(), "pow",
                    {Cast(DataType::Float64(), a), Cast(DataType::Float64(), b)});
      return Cast(a.dtype(), r);
    }
    if (b.dtype() != a.dtype()) b = Cast(a.dtype(), b);
    return Call(a.dtype(), "pow", {a, b});
  }
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        StrCat("elementwise '", fn, "' on ", ToString(a.dtype()), " and ", ToString(b.dtype())));
  }
  const DataType t = a.dtype();
  const bool fp = t.is_float();
  if (fn == "add") return a + b;
  if (fn == "sub") return a - b;
  if (fn == "mul") return a * b;
  if (fn == "div") {
    if (fp) return a / b;
    // Integer division by zero is undefined in ONNX; give 0 instead of a trap.
    return Select(Eq(b, C(b, 0)), C(a, 0), a / Select(Eq(b, C(b, 0)), C(b, 1), b));
  }
  if (fn == "mod" || fn == "fmod") {
    if (fp) {
      if (fn == "fmod") return Call(t, "fmod", {a, b});
      Expr r = Call(t, "fmod", {a, b});
      // Python-style: the result takes the divisor's sign.
      return Select(Ne(r, C(r, 0)) && Ne(r < C(r, 0), b < C(b, 0)), r + b, r);
    }
    Expr safe = Select(Eq(b, C(b, 0)), C(b, 1), b);
    Expr r = fn == "fmod" ? a % safe : FloorMod(a, safe);
    return Select(Eq(b, C(b, 0)), C(a, 0), r);
  }
  if (fn == "min") return fp ? Select(Ne(a, a) || a < b, a, b) : Min(a, b);
  if (fn == "max") return fp ? Select(Ne(a, a) || a > b, a, b) : Max(a, b);
  if (fn == "prelu") return Select(a < C(a, 0), a * b, a);
  if (fn == "equal") return Eq(a, b);
  if (fn == "less") return a < b;
  if (fn == "lessequal") return a <= b;
  if (fn == "greater") return a > b;
  if (fn == "greaterequal") return a >= b;
  if (fn == "and" || fn == "or" || fn == "xor") {
    if (!t.is_bool()) return absl::InvalidArgumentError(StrCat(fn, " needs bool inputs"));
    if (fn == "and") return a && b;
    if (fn == "or") return a || b;
    return Ne(a, b);
  }
  if (fn == "bitand" || fn == "bitor" || fn == "bitxor" || fn == "shl" || fn == "shr") {
    if (!t.is_integer()) return absl::InvalidArgumentError(StrCat(fn, " needs integer inputs"));
    return Call(t, fn, {a, b});
  }
  return absl::InvalidArgumentError(StrCat("unknown elementwise function '", fn, "'"));
}

}  // namespace kiln::compiler::ops
