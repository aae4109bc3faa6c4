#include "compiler/ops/elementwise.h"

#include <cmath>
#include <iterator>
#include <limits>

#include "base/str.h"

namespace kiln::compiler::ops {
namespace {

using namespace ir;
using Fn = ElementFn;

// A constant of x's (scalar) type.
Expr C(const Expr& x, double v) {
  DataType t = x.dtype().Element();
  if (t.is_float()) return FloatImm(v, t);
  if (t.is_bool()) return IntImm(v != 0, t);
  return IntImm(static_cast<int64_t>(v), t);
}

Expr F(Intrinsic f, const Expr& x) { return Call(x.dtype(), f, {x}); }

// erf: for float32 a rational approximation on x clamped to [-4, 4] (the
// coefficients of Eigen's generic_fast_erf_float; within 5e-7 of erf
// everywhere), which vectorizes, where a libm call runs lane by lane.
Expr Erf(const Expr& x) {
  if (x.dtype().Element() != DataType::Float32()) return F(Intrinsic::kErf, x);
  static const double kP[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                              -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                              -1.60960333262415e-02};
  static const double kQ[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                              -7.37332916720468e-03, -1.42647390514189e-02};
  Expr xc = Min(Max(x, C(x, -4)), C(x, 4));
  Expr x2 = xc * xc;
  Expr p = C(x, kP[0]), q = C(x, kQ[0]);
  for (size_t i = 1; i < std::size(kP); ++i) p = p * x2 + C(x, kP[i]);
  for (size_t i = 1; i < std::size(kQ); ++i) q = q * x2 + C(x, kQ[i]);
  // NaN stays NaN (min/max would turn it into a bound).
  return Select(Call(DataType::Bool(), Intrinsic::kIsNan, {x}), x, p * xc / q);
}

absl::Status Arity(ElementFn fn, const std::vector<double>& p, size_t want) {
  if (p.size() == want) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat("elementwise '", fn, "' takes ", want, " parameters, got ", p.size()));
}

absl::Status NeedFloat(ElementFn fn, const Expr& x) {
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
    case DType::kBFloat16:  // storage-only types: their bit patterns
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kUInt4:
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

DataType ComputeType(DType t) {
  return t == DType::kFloat16 || IsStorageFloat(t) ? DataType::Float32() : IrType(t);
}

namespace {

Expr U32(int64_t v) { return IntImm(v, DataType::UInt(32)); }
Expr Shl(const Expr& x, int64_t n) {
  return Call(x.dtype(), Intrinsic::kShl, {x, IntImm(n, x.dtype())});
}
Expr Shr(const Expr& x, int64_t n) {
  return Call(x.dtype(), Intrinsic::kShr, {x, IntImm(n, x.dtype())});
}
Expr BitAnd(const Expr& x, int64_t m) {
  return Call(x.dtype(), Intrinsic::kBitAnd, {x, IntImm(m, x.dtype())});
}
Expr BitOr(const Expr& x, const Expr& y) { return Call(x.dtype(), Intrinsic::kBitOr, {x, y}); }
// The bits of a float32 as uint32, and back.
Expr Bits(const Expr& f) { return Call(DataType::UInt(32), Intrinsic::kReinterpret, {f}); }
Expr FromBits(const Expr& u) { return Call(DataType::Float32(), Intrinsic::kReinterpret, {u}); }
Expr F32(double v) { return FloatImm(v, DataType::Float32()); }

}  // namespace

// The float32 value of a bfloat16 or float8 bit pattern: the IR form of
// BFloat16ToFloat / Float8ToFloat (base/dtype.h), exact.
Expr DecodeStorageFloat(DType t, const Expr& bits) {
  Expr u = Cast(DataType::UInt(32), bits);
  if (t == DType::kBFloat16) return FromBits(Shl(u, 16));
  const MiniFloat f = Float8Format(t);
  Expr mag = BitAnd(u, 0x7f), e = Shr(mag, f.mant_bits), m = BitAnd(mag, (1 << f.mant_bits) - 1);
  Expr normal = FromBits(BitOr(Shl(e + U32(127 - f.bias), 23), Shl(m, 23 - f.mant_bits)));
  Expr sub = Cast(DataType::Float32(), m) * F32(std::ldexp(1.0, f.Emin() - f.mant_bits));
  Expr v = Select(Eq(e, U32(0)), sub, normal);
  if (f.has_inf) v = Select(Eq(mag, U32(f.InfCode())), F32(INFINITY), v);
  v = FromBits(BitOr(Bits(v), Shl(BitAnd(u, 0x80), 24)));  // the sign, -0 included
  Expr nan = f.fnuz      ? Eq(u, U32(0x80))
             : f.has_inf ? Eq(e, U32((1 << f.exp_bits) - 1)) && Ne(m, U32(0))
                         : Eq(mag, U32(0x7f));
  return Select(nan, F32(NAN), v);
}

// The bit pattern of float32 x in a bfloat16 or float8 format: the IR form
// of FloatToBFloat16 / FloatToFloat8 (round to nearest even; saturate as
// ONNX's Cast).
Expr EncodeStorageFloat(DType t, const Expr& x, bool saturate) {
  Expr u = Bits(x);
  Expr isnan = Call(DataType::Bool(), Intrinsic::kIsNan, {x});
  if (t == DType::kBFloat16) {
    Expr r = Shr(u + U32(0x7fff) + BitAnd(Shr(u, 16), 1), 16);
    return Cast(DataType::UInt(16), Select(isnan, U32(0x7fc0), r));
  }
  const MiniFloat f = Float8Format(t);
  const DataType i32 = DataType::Int32();
  Expr sign = Shr(u, 31) * U32(0x80);
  Expr a = Call(DataType::Float32(), Intrinsic::kFabs, {x});
  Expr isinf = Eq(a, F32(INFINITY));
  // Round to the format's grid: the quantum is 2^(max(exp(a), Emin) - mant).
  Expr ea = Cast(i32, BitAnd(Shr(u, 23), 0xff)) - IntImm(127, i32);
  Expr qe = Max(ea, IntImm(f.Emin(), i32)) - IntImm(f.mant_bits, i32);
  Expr q = FromBits(Shl(Cast(DataType::UInt(32), qe + IntImm(127, i32)), 23));
  Expr r = Call(DataType::Float32(), Intrinsic::kRoundEven, {a / q}) * q;
  const float max = Float8ToFloat(t, static_cast<uint8_t>(f.MaxCode()));
  // Normal: exponent and mantissa of r; subnormal: r in units of the quantum.
  Expr ru = Bits(r);
  Expr normal = BitOr(Shl(Shr(ru, 23) - U32(127 - f.bias), f.mant_bits),
                      BitAnd(Shr(ru, 23 - f.mant_bits), (1 << f.mant_bits) - 1));
  Expr sub = Cast(DataType::UInt(32), r * F32(std::ldexp(1.0, f.mant_bits - f.Emin())));
  Expr code = Select(r < F32(std::ldexp(1.0, f.Emin())), sub, normal);
  Expr over = isinf || r > F32(max);
  Expr with_sign = f.fnuz ? Select(Eq(code, U32(0)), code, BitOr(code, sign)) : BitOr(code, sign);
  Expr overflow = saturate ? BitOr(U32(f.MaxCode()), sign)
                  : f.fnuz ? U32(f.NanCode())
                           : BitOr(U32(f.has_inf ? f.InfCode() : f.NanCode()), sign);
  Expr v = Select(isnan, U32(f.NanCode()), Select(over, overflow, with_sign));
  return Cast(DataType::UInt(8), v);
}

// x (any compute type) as int4/uint4: saturated, floats rounded half to
// even (ToInt4 in base/dtype.h).
Expr EncodeInt4(DType t, Expr x) {
  const bool s = t == DType::kInt4;
  const DataType out = s ? DataType::Int(8) : DataType::UInt(8);
  if (x.dtype().is_float()) {
    Expr c = Max(Min(x, C(x, s ? 7 : 15)), C(x, s ? -8 : 0));
    c = Select(Call(DataType::Bool(), Intrinsic::kIsNan, {x}), C(x, 0), c);
    return Cast(out, Call(x.dtype(), Intrinsic::kRoundEven, {c}));
  }
  if (x.dtype().is_bool()) return Cast(out, x);
  const DataType w = DataType::Int64();
  Expr v = x.dtype().is_uint() && x.dtype().bits == 64 ? Cast(w, Min(x, IntImm(15, x.dtype())))
                                                       : Cast(w, x);
  return Cast(out, Max(Min(v, IntImm(s ? 7 : 15, w)), IntImm(s ? -8 : 0, w)));
}

Expr Promote(Expr x) {
  if (x.dtype().is_float() && x.dtype().bits == 16) return Cast(DataType::Float32(), x);
  return x;
}

absl::StatusOr<DataType> UnaryResultType(ElementFn fn, DataType in,
                                         const std::vector<double>& params) {
  if (fn == Fn::kIsNan || fn == Fn::kIsInf || fn == Fn::kNot) return DataType::Bool();
  if (fn == Fn::kCast) {
    if (params.size() != 1 && params.size() != 3) {
      return absl::InvalidArgumentError("cast takes 1 or 3 parameters");
    }
    auto d = DTypeFromOnnx(static_cast<int64_t>(params[0]));
    if (!d) return absl::InvalidArgumentError(StrCat("cast to unknown dtype ", params[0]));
    return IsStorageOnly(*d) ? IrType(*d) : ComputeType(*d);
  }
  return in;
}

absl::StatusOr<DataType> BinaryResultType(ElementFn fn, DataType a) {
  if (fn == Fn::kEqual || fn == Fn::kLess || fn == Fn::kLessEqual || fn == Fn::kGreater ||
      fn == Fn::kGreaterEqual || fn == Fn::kAnd || fn == Fn::kOr || fn == Fn::kXor) {
    return DataType::Bool();
  }
  return a;
}

absl::StatusOr<Expr> UnaryFn(ElementFn fn, Expr x, const std::vector<double>& p) {
  x = Promote(std::move(x));
  const DataType t = x.dtype();
  const bool fp = t.is_float();
  auto need = [&](size_t n) { return Arity(fn, p, n); };
#define KILN_TRY(expr) \
  if (absl::Status s = (expr); !s.ok()) return s;
  if (fn == Fn::kCast) {
    // cast(to) or cast(to, saturate, from) where either side is storage-only:
    // x then holds `from`'s bit pattern, decoded first; a storage-only
    // result is encoded last.
    if (p.size() != 1 && p.size() != 3) return Arity(fn, p, 1);
    auto to_d = DTypeFromOnnx(static_cast<int64_t>(p[0]));
    if (!to_d) return absl::InvalidArgumentError(StrCat("cast to unknown dtype ", p[0]));
    if (p.size() == 3) {
      auto from = DTypeFromOnnx(static_cast<int64_t>(p[2]));
      if (!from || t != (IsStorageFloat(*from) ? IrType(*from) : ComputeType(*from))) {
        return absl::InvalidArgumentError(StrCat("cast from dtype ", p[2], " of a ", ToString(t)));
      }
      if (IsStorageFloat(*from)) x = DecodeStorageFloat(*from, x);
      if (IsStorageFloat(*to_d)) {
        if (x.dtype() != DataType::Float32()) x = Cast(DataType::Float32(), x);
        return EncodeStorageFloat(*to_d, x, p[1] != 0);
      }
      if (IsInt4(*to_d)) return EncodeInt4(*to_d, x);
      return UnaryFn(Fn::kCast, x, {p[0]});
    }
    auto to = UnaryResultType(fn, t, p);
    if (!to.ok()) return to.status();
    if (*to == t) return x;
    if (fp && !to->is_float() && !to->is_bool()) {
      // NaN and out-of-range values saturate instead of being undefined.
      double lo = to->is_uint() ? 0.0 : -std::ldexp(1.0, to->bits - 1);
      double hi = to->is_uint() ? std::ldexp(1.0, to->bits) - 1 : std::ldexp(1.0, to->bits - 1) - 1;
      Expr c = Select(Call(DataType::Bool(), Intrinsic::kIsNan, {x}), C(x, 0),
                      Max(Min(x, C(x, hi)), C(x, lo)));
      if (t.bits == 32 && to->bits == 64) return Cast(*to, Cast(DataType::Float64(), c));
      return Cast(*to, c);
    }
    return Cast(*to, x);
  }
  if (fn == Fn::kNot) {
    if (!t.is_bool()) return absl::InvalidArgumentError("not needs a bool input");
    return !x;
  }
  if (fn == Fn::kBitNot) {
    if (!t.is_integer()) return absl::InvalidArgumentError("bitnot needs an integer input");
    return Call(t, Intrinsic::kBitNot, {x});
  }
  if (fn == Fn::kNeg) {
    KILN_TRY(need(0));
    return C(x, 0) - x;
  }
  if (fn == Fn::kAbs) {
    KILN_TRY(need(0));
    if (fp) return F(Intrinsic::kFabs, x);
    if (t.is_uint()) return x;
    return Select(x < C(x, 0), C(x, 0) - x, x);
  }
  if (fn == Fn::kRelu) {
    KILN_TRY(need(0));
    return Max(x, C(x, 0));
  }
  if (fn == Fn::kSign) {
    KILN_TRY(need(0));
    return Select(x > C(x, 0), C(x, 1), Select(x < C(x, 0), C(x, -1), C(x, 0)));
  }
  if (fn == Fn::kIsNan) {
    KILN_TRY(NeedFloat(fn, x));
    return Call(DataType::Bool(), Intrinsic::kIsNan, {x});
  }
  if (fn == Fn::kIsInf) {
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
  // The functions that are one intrinsic of the same name.
  static constexpr std::pair<ElementFn, Intrinsic> kDirect[] = {
      {Fn::kSqrt, Intrinsic::kSqrt},   {Fn::kExp, Intrinsic::kExp},
      {Fn::kLog, Intrinsic::kLog},     {Fn::kFloor, Intrinsic::kFloor},
      {Fn::kCeil, Intrinsic::kCeil},   {Fn::kSin, Intrinsic::kSin},
      {Fn::kCos, Intrinsic::kCos},     {Fn::kTan, Intrinsic::kTan},
      {Fn::kAsin, Intrinsic::kAsin},   {Fn::kAcos, Intrinsic::kAcos},
      {Fn::kAtan, Intrinsic::kAtan},   {Fn::kSinh, Intrinsic::kSinh},
      {Fn::kCosh, Intrinsic::kCosh},   {Fn::kTanh, Intrinsic::kTanh},
      {Fn::kAsinh, Intrinsic::kAsinh}, {Fn::kAcosh, Intrinsic::kAcosh},
      {Fn::kAtanh, Intrinsic::kAtanh}, {Fn::kSigmoid, Intrinsic::kSigmoid}};
  if (fn == Fn::kErf) {
    KILN_TRY(need(0));
    return Erf(x);
  }
  for (const auto& [name, f] : kDirect) {
    if (fn == name) {
      KILN_TRY(need(0));
      return F(f, x);
    }
  }
  if (fn == Fn::kRound) return F(Intrinsic::kRoundEven, x);
  if (fn == Fn::kReciprocal) return C(x, 1) / x;
  if (fn == Fn::kSoftplus) {
    // log(1 + exp(x)), stable for large x.
    return Select(x > C(x, 20), x, F(Intrinsic::kLog, C(x, 1) + F(Intrinsic::kExp, x)));
  }
  if (fn == Fn::kSoftsign) return x / (C(x, 1) + F(Intrinsic::kFabs, x));
  if (fn == Fn::kLeakyRelu) {
    KILN_TRY(need(1));
    return Select(x < C(x, 0), x * C(x, p[0]), x);
  }
  if (fn == Fn::kElu) {
    KILN_TRY(need(1));
    return Select(x < C(x, 0), C(x, p[0]) * (F(Intrinsic::kExp, x) - C(x, 1)), x);
  }
  if (fn == Fn::kSelu) {
    KILN_TRY(need(2));
    return Select(x <= C(x, 0), C(x, p[1]) * (C(x, p[0]) * F(Intrinsic::kExp, x) - C(x, p[0])),
                  C(x, p[1]) * x);
  }
  if (fn == Fn::kCelu) {
    KILN_TRY(need(1));
    Expr e = C(x, p[0]) * (F(Intrinsic::kExp, x / C(x, p[0])) - C(x, 1));
    return Max(x, C(x, 0)) + Min(C(x, 0), e);
  }
  if (fn == Fn::kHardSigmoid) {
    KILN_TRY(need(2));
    return Max(C(x, 0), Min(C(x, 1), C(x, p[0]) * x + C(x, p[1])));
  }
  if (fn == Fn::kHardSwish) {
    return x * Max(C(x, 0), Min(C(x, 1), x * C(x, 1.0 / 6) + C(x, 0.5)));
  }
  if (fn == Fn::kThresholdedRelu) {
    KILN_TRY(need(1));
    return Select(x > C(x, p[0]), x, C(x, 0));
  }
  if (fn == Fn::kShrink) {
    KILN_TRY(need(2));
    const double bias = p[0], lambd = p[1];
    return Select(x < C(x, -lambd), x + C(x, bias),
                  Select(x > C(x, lambd), x - C(x, bias), C(x, 0)));
  }
  if (fn == Fn::kClip) {
    KILN_TRY(need(2));
    Expr y = x;
    if (!std::isinf(p[0])) y = Max(y, C(x, p[0]));
    if (!std::isinf(p[1])) y = Min(y, C(x, p[1]));
    return y;
  }
  if (fn == Fn::kGelu) {  // x/2 (1 + erf(x / sqrt 2))
    return C(x, 0.5) * x * (C(x, 1) + Erf(x * C(x, M_SQRT1_2)));
  }
  if (fn == Fn::kGeluTanh) {
    Expr inner = C(x, std::sqrt(2.0 / M_PI)) * (x + C(x, 0.044715) * x * x * x);
    return C(x, 0.5) * x * (C(x, 1) + F(Intrinsic::kTanh, inner));
  }
  if (fn == Fn::kMish) {
    Expr sp = Select(x > C(x, 20), x, F(Intrinsic::kLog, C(x, 1) + F(Intrinsic::kExp, x)));
    return x * F(Intrinsic::kTanh, sp);
  }
  if (fn == Fn::kSwish) {
    KILN_TRY(need(1));
    return x * F(Intrinsic::kSigmoid, x * C(x, p[0]));
  }
  if (fn == Fn::kScale) {
    KILN_TRY(need(2));
    return x * C(x, p[0]) + C(x, p[1]);
  }
  if (fn == Fn::kPowC) {
    KILN_TRY(need(1));
    if (p[0] == 2) return x * x;
    if (p[0] == 1) return x;
    if (p[0] == 0.5) return F(Intrinsic::kSqrt, x);
    return Call(t, Intrinsic::kPow, {x, C(x, p[0])});
  }
#undef KILN_TRY
  return absl::InvalidArgumentError(StrCat("'", fn, "' is not a unary elementwise function"));
}

absl::StatusOr<Expr> BinaryFn(ElementFn fn, Expr a, Expr b) {
  a = Promote(std::move(a));
  b = Promote(std::move(b));
  if (fn == Fn::kPow) {
    if (!a.dtype().is_float()) {
      // Integer base: compute in double and truncate back, as onnxruntime does.
      Expr r = Call(DataType::Float64(), Intrinsic::kPow,
                    {Cast(DataType::Float64(), a), Cast(DataType::Float64(), b)});
      return Cast(a.dtype(), r);
    }
    if (b.dtype() != a.dtype()) b = Cast(a.dtype(), b);
    return Call(a.dtype(), Intrinsic::kPow, {a, b});
  }
  if (a.dtype() != b.dtype()) {
    return absl::InvalidArgumentError(
        StrCat("elementwise '", fn, "' on ", ToString(a.dtype()), " and ", ToString(b.dtype())));
  }
  const DataType t = a.dtype();
  const bool fp = t.is_float();
  if (fn == Fn::kAdd) return a + b;
  if (fn == Fn::kSub) return a - b;
  if (fn == Fn::kMul) return a * b;
  if (fn == Fn::kDiv) {
    if (fp) return a / b;
    // Integer division by zero is undefined in ONNX; give 0 instead of a trap.
    return Select(Eq(b, C(b, 0)), C(a, 0), a / Select(Eq(b, C(b, 0)), C(b, 1), b));
  }
  if (fn == Fn::kMod || fn == Fn::kFmod) {
    if (fp) {
      if (fn == Fn::kFmod) return Call(t, Intrinsic::kFmod, {a, b});
      Expr r = Call(t, Intrinsic::kFmod, {a, b});
      // Python-style: the result takes the divisor's sign.
      return Select(Ne(r, C(r, 0)) && Ne(r < C(r, 0), b < C(b, 0)), r + b, r);
    }
    Expr safe = Select(Eq(b, C(b, 0)), C(b, 1), b);
    Expr r = fn == Fn::kFmod ? a % safe : FloorMod(a, safe);
    return Select(Eq(b, C(b, 0)), C(a, 0), r);
  }
  if (fn == Fn::kMin) return fp ? Select(Ne(a, a) || a < b, a, b) : Min(a, b);
  if (fn == Fn::kMax) return fp ? Select(Ne(a, a) || a > b, a, b) : Max(a, b);
  if (fn == Fn::kPRelu) return Select(a < C(a, 0), a * b, a);
  if (fn == Fn::kEqual) return Eq(a, b);
  if (fn == Fn::kLess) return a < b;
  if (fn == Fn::kLessEqual) return a <= b;
  if (fn == Fn::kGreater) return a > b;
  if (fn == Fn::kGreaterEqual) return a >= b;
  if (fn == Fn::kAnd || fn == Fn::kOr || fn == Fn::kXor) {
    if (!t.is_bool()) return absl::InvalidArgumentError(StrCat(fn, " needs bool inputs"));
    if (fn == Fn::kAnd) return a && b;
    if (fn == Fn::kOr) return a || b;
    return Ne(a, b);
  }
  static constexpr std::pair<ElementFn, Intrinsic> kBits[] = {{Fn::kBitAnd, Intrinsic::kBitAnd},
                                                              {Fn::kBitOr, Intrinsic::kBitOr},
                                                              {Fn::kBitXor, Intrinsic::kBitXor},
                                                              {Fn::kShl, Intrinsic::kShl},
                                                              {Fn::kShr, Intrinsic::kShr}};
  for (const auto& [name, f] : kBits) {
    if (fn != name) continue;
    if (!t.is_integer()) return absl::InvalidArgumentError(StrCat(fn, " needs integer inputs"));
    return Call(t, f, {a, b});
  }
  return absl::InvalidArgumentError(StrCat("'", fn, "' is not a binary elementwise function"));
}

}  // namespace kiln::compiler::ops
