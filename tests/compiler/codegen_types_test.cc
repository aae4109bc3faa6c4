// The code generator on integers of every width and signedness, bool,
// float16/64 and casts between every type class, bit operations and
// vectorized loops of every type.
#include "tests/compiler/codegen_types.h"

#include <gtest/gtest.h>

namespace kiln::compiler {
namespace {

using namespace kiln::ir;       // NOLINT
using namespace codegen_types;  // NOLINT

template <typename T>
struct IntRef {
  static T Wrap(uint64_t v) { return static_cast<T>(v); }
  static T Add(T a, T b) { return Wrap(uint64_t(a) + uint64_t(b)); }
  static T Sub(T a, T b) { return Wrap(uint64_t(a) - uint64_t(b)); }
  static T Mul(T a, T b) { return Wrap(uint64_t(a) * uint64_t(b)); }
  static bool MinByMinus1(T a, T b) {
    return std::is_signed_v<T> && b == static_cast<T>(-1) && a == std::numeric_limits<T>::min();
  }
  static T Div(T a, T b) {
    if (b == 0) return 0;
    if (MinByMinus1(a, b)) return a;
    return static_cast<T>(a / b);
  }
  static T Mod(T a, T b) {
    if (b == 0 || MinByMinus1(a, b)) return 0;
    return static_cast<T>(a % b);
  }
  static T FloorDiv(T a, T b) {
    T q = Div(a, b);
    if (b != 0 && !MinByMinus1(a, b)) {
      T r = static_cast<T>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) --q;
    }
    return q;
  }
  static T FloorMod(T a, T b) {
    T r = Mod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
};

template <typename T>
void CheckIntegerArithmetic(int lanes) {
  SCOPED_TRACE(ToString(DTypeOf<T>()) + " lanes " + std::to_string(lanes));
  DataType t = DTypeOf<T>();
  std::vector<T> vals = InterestingValues<T>();
  std::vector<T> a, b;
  for (T x : vals) {
    for (T y : vals) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());  // 144, a multiple of 8
  using R = IntRef<T>;
  struct Op {
    const char* name;
    ExprKind kind;
    T (*ref)(T, T);
  };
  const std::vector<Op> ops = {
      {"add", ExprKind::kAdd, R::Add},
      {"sub", ExprKind::kSub, R::Sub},
      {"mul", ExprKind::kMul, R::Mul},
      {"div", ExprKind::kDiv, R::Div},
      {"mod", ExprKind::kMod, R::Mod},
      {"floordiv", ExprKind::kFloorDiv, R::FloorDiv},
      {"floormod", ExprKind::kFloorMod, R::FloorMod},
      {"min", ExprKind::kMin, [](T x, T y) { return std::min(x, y); }},
      {"max", ExprKind::kMax, [](T x, T y) { return std::max(x, y); }},
  };
  struct Cmp {
    const char* name;
    ExprKind kind;
    bool (*ref)(T, T);
  };
  const std::vector<Cmp> cmps = {
      {"lt", ExprKind::kLT, [](T x, T y) { return x < y; }},
      {"le", ExprKind::kLE, [](T x, T y) { return x <= y; }},
      {"gt", ExprKind::kGT, [](T x, T y) { return x > y; }},
      {"ge", ExprKind::kGE, [](T x, T y) { return x >= y; }},
      {"eq", ExprKind::kEQ, [](T x, T y) { return x == y; }},
      {"ne", ExprKind::kNE, [](T x, T y) { return x != y; }},
  };
  std::vector<OutSpec> outs;
  for (const Op& op : ops) {
    ExprKind k = op.kind;
    outs.push_back({t, [k](const std::vector<Expr>& in) { return MakeBinary(k, in[0], in[1]); }});
  }
  for (const Cmp& c : cmps) {
    ExprKind k = c.kind;
    outs.push_back({DataType::Bool(),
                    [k](const std::vector<Expr>& in) { return MakeBinary(k, in[0], in[1]); }});
  }
  PrimFunc f = Elementwise("arith", {t, t}, outs, n, lanes);
  std::vector<std::vector<T>> got(ops.size(), std::vector<T>(n, T(42)));
  std::vector<std::vector<uint8_t>> got_cmp(cmps.size(), std::vector<uint8_t>(n, 0xAA));
  std::vector<void*> args = {a.data(), b.data()};
  for (auto& g : got) args.push_back(g.data());
  for (auto& g : got_cmp) args.push_back(g.data());
  RunJit(f, args);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < ops.size(); ++k) {
      if (std::is_same_v<T, int64_t> && k < 3) {
        // int64 add/sub/mul carry nsw (index arithmetic): overflow is undefined.
        T dummy;
        bool ovf = k == 0   ? __builtin_add_overflow(a[i], b[i], &dummy)
                   : k == 1 ? __builtin_sub_overflow(a[i], b[i], &dummy)
                            : __builtin_mul_overflow(a[i], b[i], &dummy);
        if (ovf) continue;
      }
      ASSERT_EQ(got[k][i], ops[k].ref(a[i], b[i]))
          << ops[k].name << "(" << +a[i] << ", " << +b[i] << ")";
    }
    for (size_t k = 0; k < cmps.size(); ++k) {
      ASSERT_EQ(got_cmp[k][i], cmps[k].ref(a[i], b[i]) ? 1 : 0)
          << cmps[k].name << "(" << +a[i] << ", " << +b[i] << ")";
    }
  }
}

TEST(CodegenTypes, IntegerArithmeticEveryWidth) {
  for (int lanes : {1, 8}) {
    CheckIntegerArithmetic<int8_t>(lanes);
    CheckIntegerArithmetic<int16_t>(lanes);
    CheckIntegerArithmetic<int32_t>(lanes);
    CheckIntegerArithmetic<int64_t>(lanes);
    CheckIntegerArithmetic<uint8_t>(lanes);
    CheckIntegerArithmetic<uint16_t>(lanes);
    CheckIntegerArithmetic<uint32_t>(lanes);
    CheckIntegerArithmetic<uint64_t>(lanes);
  }
}

TEST(CodegenTypes, IntegerIrFlags) {
  // No nsw on narrow or unsigned data arithmetic; unsigned division and
  // comparisons; int64 (index) arithmetic keeps nsw.
  auto ir_of = [](DataType t) {
    PrimFunc f = Elementwise(
        "k", {t, t},
        {{t, [](const std::vector<Expr>& in) { return (in[0] + in[1]) * in[0] / in[1]; }},
         {DataType::Bool(), [](const std::vector<Expr>& in) { return in[0] < in[1]; }}},
        8, 1);
    auto text = codegen::EmitLlvmIrText({f}, Target::Host(), /*optimize=*/false);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : std::string();
  };
  std::string i32 = ir_of(DataType::Int32());
  EXPECT_NE(i32.find("add i32"), std::string::npos) << i32;
  EXPECT_EQ(i32.find("nsw i32"), std::string::npos) << i32;
  EXPECT_NE(i32.find("sdiv i32"), std::string::npos);
  EXPECT_NE(i32.find("icmp slt i32"), std::string::npos);
  std::string u32 = ir_of(DataType::UInt(32));
  EXPECT_NE(u32.find("udiv i32"), std::string::npos) << u32;
  EXPECT_NE(u32.find("icmp ult i32"), std::string::npos);
  EXPECT_EQ(u32.find("nsw i32"), std::string::npos);
  EXPECT_EQ(u32.find("sdiv"), std::string::npos);
  EXPECT_NE(i32.find("mul i32"), std::string::npos);
  std::string i64 = ir_of(DataType::Int64());
  EXPECT_NE(i64.find("mul nsw i64"), std::string::npos) << i64;
}

// Bool buffers are one byte per element (0 or 1), loaded and stored
// scalar, as contiguous vectors and as gathers/scatters.
TEST(CodegenTypes, BoolBuffersRoundTrip) {
  const int64_t n = 16;
  DataType bt = DataType::Bool();
  Buffer in("In", bt, {IntImm(n)});
  Buffer out_s("OutScalar", bt, {IntImm(n)});
  Buffer out_v("OutVector", bt, {IntImm(n)});
  Buffer out_g("OutGather", bt, {IntImm(2 * n)});
  Buffer out_a("OutAnd", bt, {IntImm(n)});
  Buffer scratch("scratch", bt, {IntImm(8)});
  Var i("i"), j("j"), k("k");
  Expr vidx = Ramp(j * IntImm(8), IntImm(1), 8);
  Stmt body = Seq({
      // Scalar: OutScalar[i] = !In[i].
      For(i, 0, n, ForKind::kSerial, Store(out_s, !Load(in, {i}), {i})),
      // Contiguous vector copy.
      For(j, 0, n / 8, ForKind::kSerial, Store(out_v, Load(in, {vidx}), {vidx})),
      // Gather In[15 - 0 .. 15 - 7] (reversed), scatter to even slots of OutGather.
      Store(out_g, Load(in, {Ramp(IntImm(15), IntImm(-1), 8)}), {Ramp(IntImm(0), IntImm(2), 8)}),
      // Through a bool scratch: a vector store, then scalar loads.
      Allocate(scratch, Seq({Store(scratch,
                                   Load(in, {Ramp(IntImm(0), IntImm(1), 8)}) &&
                                       Load(in, {Ramp(IntImm(8), IntImm(1), 8)}),
                                   {Ramp(IntImm(0), IntImm(1), 8)}),
                             For(k, 0, 8, ForKind::kSerial,
                                 Store(out_a, Load(scratch, {k}) || Load(in, {k}), {k}))})),
  });
  PrimFunc f{"bools", {in, out_s, out_v, out_g, out_a}, body};
  std::vector<uint8_t> iv = {1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1, 0};
  std::vector<uint8_t> os(n, 0x55), ov(n, 0x55), og(2 * n, 0x55), oa(n, 0x55);
  RunJit(f, {iv.data(), os.data(), ov.data(), og.data(), oa.data()});
  for (int64_t x = 0; x < n; ++x) {
    EXPECT_EQ(os[x], iv[x] ? 0 : 1) << x;
    EXPECT_EQ(ov[x], iv[x]) << x;
  }
  for (int x = 0; x < 8; ++x) {
    EXPECT_EQ(og[2 * x], iv[15 - x]) << x;
    EXPECT_EQ(og[2 * x + 1], 0x55) << x;  // scatter leaves the odd bytes alone
    EXPECT_EQ(oa[x], (iv[x] && iv[x + 8]) || iv[x] ? 1 : 0) << x;
  }
  for (int64_t x = 8; x < n; ++x) EXPECT_EQ(oa[x], 0x55) << x;

  auto text = codegen::EmitLlvmIrText({f}, Target::Host(), /*optimize=*/false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("load <8 x i8>"), std::string::npos) << *text;
  EXPECT_NE(text->find("store <8 x i8>"), std::string::npos) << *text;
  EXPECT_EQ(text->find("load <8 x i1>"), std::string::npos) << *text;  // no i1 in memory
  EXPECT_EQ(text->find("store <8 x i1>"), std::string::npos) << *text;
}

// Cast `in` (of `from`) to `to`, scalar and 8 lanes; compare bytewise with
// `want` (NaN-safe).
template <typename From, typename To>
void CheckCast(DataType from, DataType to, std::vector<From> in, std::vector<To> want) {
  SCOPED_TRACE(ToString(from) + " -> " + ToString(to));
  ASSERT_EQ(in.size(), want.size());
  while (in.size() % 8 != 0) {
    in.push_back(in.back());
    want.push_back(want.back());
  }
  const int64_t n = static_cast<int64_t>(in.size());
  for (int lanes : {1, 8}) {
    PrimFunc f = Elementwise("cast", {from},
                             {{to,
                               [to](const std::vector<Expr>& x) {
                                 return Cast(to.WithLanes(x[0].dtype().lanes), x[0]);
                               }}},
                             n, lanes);
    std::vector<To> got(n);
    std::memset(got.data(), 0x5A, n * sizeof(To));
    RunJit(f, {in.data(), got.data()});
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<To>) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << "lanes " << lanes << " element " << i;
          continue;
        }
      }
      EXPECT_EQ(got[i], want[i]) << "lanes " << lanes << " element " << i << " input " << +in[i];
    }
  }
}

TEST(CodegenTypes, CastsBetweenAllTypeClasses) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  DataType f32 = DataType::Float32(), f64 = DataType::Float64(), bt = DataType::Bool();
  DataType i8 = DataType::Int(8), i16 = DataType::Int(16), i32 = DataType::Int32(),
           i64 = DataType::Int64();
  DataType u8 = DataType::UInt(8), u16 = DataType::UInt(16), u32 = DataType::UInt(32),
           u64 = DataType::UInt(64);
  // float <-> float.
  CheckCast<float, double>(f32, f64, {1.5f, -0.1f, inf, nan},
                           {1.5, double(-0.1f), double(inf), double(nan)});
  CheckCast<double, float>(f64, f32, {1.0 / 3.0, 1e300, -2.5}, {float(1.0 / 3.0), inf, -2.5f});
  // float -> int truncates toward zero; out of range saturates, NaN -> 0.
  CheckCast<float, int32_t>(f32, i32, {2.9f, -2.9f, 0.5f, -0.5f, 1e10f, -1e10f, nan, 123456.f},
                            {2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, 123456});
  // The vector path of float32 -> int32 (clamped in float, then converted):
  // both ends of the range, infinities and NaN.
  CheckCast<float, int32_t>(f32, i32,
                            {2147483520.f, 2147483648.f, -2147483648.f, inf, -inf, nan, -3e9f},
                            {2147483520, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, INT32_MIN});
  CheckCast<float, int8_t>(f32, i8, {100.7f, -128.9f, 1000.f, -1000.f}, {100, -128, 127, -128});
  CheckCast<double, int64_t>(f64, i64, {-9.0e15, 3.99, -3.99}, {-9000000000000000LL, 3, -3});
  CheckCast<float, uint8_t>(f32, u8, {255.9f, 0.9f, -5.f, 300.f}, {255, 0, 0, 255});
  // To 8 and 16 bits (a quantize's store): NaN, infinities and -0.5 too,
  // on the vector path that clamps in float before converting.
  CheckCast<float, int8_t>(f32, i8, {nan, inf, -inf, -0.5f, 126.99f, -127.5f},
                           {0, 127, -128, 0, 126, -127});
  CheckCast<float, uint8_t>(f32, u8, {nan, inf, -inf, 254.5f}, {0, 255, 0, 254});
  CheckCast<float, int16_t>(f32, i16, {nan, 1e6f, -1e6f, -300.7f}, {0, 32767, -32768, -300});
  CheckCast<float, uint16_t>(f32, u16, {nan, 1e6f, -1.f, 65535.f}, {0, 65535, 0, 65535});
  CheckCast<double, uint8_t>(f64, u8, {std::nan(""), 1e300, 17.9}, {0, 255, 17});
  CheckCast<float, uint32_t>(f32, u32, {3.0e9f, 7.5f}, {3000000000u, 7u});
  CheckCast<double, uint64_t>(f64, u64, {1.8e19, 42.0}, {18000000000000000000ull, 42ull});
  // int -> float: signed and unsigned sources.
  CheckCast<int8_t, float>(i8, f32, {-128, -1, 0, 127}, {-128.f, -1.f, 0.f, 127.f});
  CheckCast<uint8_t, float>(u8, f32, {255, 128, 0}, {255.f, 128.f, 0.f});
  CheckCast<uint32_t, float>(u32, f32, {4000000000u, 1u}, {4e9f, 1.f});
  CheckCast<int64_t, double>(i64, f64, {-(1LL << 53), 12345}, {-9007199254740992.0, 12345.0});
  CheckCast<uint64_t, double>(u64, f64, {1ull << 63, 3ull}, {9223372036854775808.0, 3.0});
  // int <-> int: sign-extend signed sources, zero-extend unsigned ones, truncate.
  CheckCast<int8_t, int32_t>(i8, i32, {-1, -128, 5}, {-1, -128, 5});
  CheckCast<uint8_t, int32_t>(u8, i32, {255, 128, 5}, {255, 128, 5});
  CheckCast<int32_t, int8_t>(i32, i8, {300, -129, 127}, {44, 127, 127});
  CheckCast<int32_t, uint16_t>(i32, u16, {-1, 65536 + 7}, {65535, 7});
  CheckCast<int8_t, uint64_t>(i8, u64, {-1}, {~0ull});
  CheckCast<uint16_t, int64_t>(u16, i64, {65535}, {65535});
  CheckCast<uint64_t, int16_t>(u64, i16, {0x123456789ull}, {0x6789});
  CheckCast<int16_t, uint32_t>(i16, u32, {-2}, {0xFFFFFFFEu});
  // Anything -> bool is `!= 0`.
  CheckCast<float, uint8_t>(f32, bt, {0.f, -0.f, 0.5f, -3.f, nan, inf}, {0, 0, 1, 1, 1, 1});
  CheckCast<int32_t, uint8_t>(i32, bt, {0, 256, -1, 1}, {0, 1, 1, 1});
  CheckCast<uint8_t, uint8_t>(u8, bt, {0, 2, 255}, {0, 1, 1});
  CheckCast<double, uint8_t>(f64, bt, {0.0, 1e-300}, {0, 1});
  // bool -> anything is 0 or 1.
  CheckCast<uint8_t, float>(bt, f32, {0, 1}, {0.f, 1.f});
  CheckCast<uint8_t, int32_t>(bt, i32, {1, 0}, {1, 0});
  CheckCast<uint8_t, int8_t>(bt, i8, {1, 0}, {1, 0});
  CheckCast<uint8_t, uint64_t>(bt, u64, {1, 0}, {1, 0});
  CheckCast<uint8_t, double>(bt, f64, {1, 0}, {1.0, 0.0});
}

// A vector cast to 8 bits of a value the IR already saturated (the
// elementwise cast's select(isnan(x), 0, max(min(x, 255), 0))) converts
// without a clamp of its own (one NaN compare, the IR's, in the LLVM IR);
// one clamped to a range wider than the type's still saturates.
TEST(CodegenTypes, CastOfSaturatedValueClampsOnce) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const DataType f32 = DataType::Float32(), u8 = DataType::UInt(8);
  for (double hi : {255.0, 1000.0}) {
    SCOPED_TRACE(hi);
    PrimFunc f = Elementwise(
        "sat", {f32},
        {{u8,
          [&](const std::vector<Expr>& x) {
            const int l = x[0].dtype().lanes;
            auto c = [&](double v) { return Broadcast(FloatImm(v), l); };
            Expr clamped = Max(Min(x[0], c(hi)), c(0.0));
            return Cast(u8.WithLanes(l),
                        Select(Call(DataType::Bool().WithLanes(l), Intrinsic::kIsNan, {x[0]}),
                               c(0.0), clamped));
          }}},
        8, 8);
    std::vector<float> in = {nan, 300.f, -5.f, 254.6f, 0.4f, 17.f, 1e9f, -1e9f};
    std::vector<uint8_t> got(8, 0x5A);
    RunJit(f, {in.data(), got.data()});
    EXPECT_EQ(got, (std::vector<uint8_t>{0, 255, 0, 254, 0, 17, 255, 0}));
    auto text = codegen::EmitLlvmIrText({f}, Target::Host(), /*optimize=*/false);
    ASSERT_TRUE(text.ok()) << text.status();
    size_t uno = 0;
    for (size_t at = text->find(" uno <"); at != std::string::npos;
         at = text->find(" uno <", at + 1)) {
      ++uno;
    }
    EXPECT_EQ(uno, hi == 255.0 ? 1u : 2u) << *text;
  }
}

TEST(CodegenTypes, Float16Casts) {
  // float32 -> float16 -> float32 rounds to 11 significant bits.
  DataType f16 = DataType{TypeCode::kFloat, 16, 1};
  std::vector<float> in = {1.0009765625f, 1.0f / 3.0f, 65504.f, 1e6f, -2.5f, 0.f, 1e-8f, 3.f};
  std::vector<float> want = {1.0009765625f, 0.333251953125f,
                             65504.f,       std::numeric_limits<float>::infinity(),
                             -2.5f,         0.f,
                             0.f,           3.f};
  for (int lanes : {1, 8}) {
    PrimFunc f =
        Elementwise("half", {DataType::Float32()},
                    {{DataType::Float32(),
                      [f16](const std::vector<Expr>& x) {
                        int l = x[0].dtype().lanes;
                        return Cast(DataType::Float32().WithLanes(l), Cast(f16.WithLanes(l), x[0]));
                      }}},
                    8, lanes);
    std::vector<float> got(8, -1.f);
    RunJit(f, {in.data(), got.data()});
    for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], want[i]) << lanes << " " << i;
  }
}

template <typename T>
void CheckBitOps(std::vector<T> a, std::vector<T> b) {
  SCOPED_TRACE(ToString(DTypeOf<T>()));
  DataType t = DTypeOf<T>();
  const int bits = 8 * sizeof(T);
  using U = std::make_unsigned_t<T>;
  auto call = [](Intrinsic name, int arity) {
    return [name, arity](const std::vector<Expr>& in) {
      std::vector<Expr> args(in.begin(), in.begin() + arity);
      return Call(in[0].dtype(), name, args);
    };
  };
  using I = Intrinsic;
  const std::vector<std::pair<I, int>> ops = {{I::kBitAnd, 2}, {I::kBitOr, 2}, {I::kBitXor, 2},
                                              {I::kBitNot, 1}, {I::kShl, 2},   {I::kShr, 2}};
  auto ref = [&](I op, T x, T y) -> T {
    U ux = static_cast<U>(x), uy = static_cast<U>(y);
    if (op == I::kBitAnd) return static_cast<T>(ux & uy);
    if (op == I::kBitOr) return static_cast<T>(ux | uy);
    if (op == I::kBitXor) return static_cast<T>(ux ^ uy);
    if (op == I::kBitNot) return static_cast<T>(~ux);
    bool big = uy >= static_cast<U>(bits);
    if (op == I::kShl) return big ? T(0) : static_cast<T>(static_cast<U>(ux << uy));
    // shr: arithmetic for signed types, logical for unsigned.
    if constexpr (std::is_signed_v<T>) return big ? T(x < 0 ? -1 : 0) : static_cast<T>(x >> uy);
    return big ? T(0) : static_cast<T>(ux >> uy);
  };
  while (a.size() % 8 != 0) {
    a.push_back(a.back());
    b.push_back(b.back());
  }
  const int64_t n = static_cast<int64_t>(a.size());
  for (int lanes : {1, 8}) {
    std::vector<OutSpec> outs;
    for (auto& [name, arity] : ops) outs.push_back({t, call(name, arity)});
    PrimFunc f = Elementwise("bits", {t, t}, outs, n, lanes);
    std::vector<std::vector<T>> got(ops.size(), std::vector<T>(n, T(99)));
    std::vector<void*> args = {a.data(), b.data()};
    for (auto& g : got) args.push_back(g.data());
    RunJit(f, args);
    for (size_t k = 0; k < ops.size(); ++k) {
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(got[k][i], ref(ops[k].first, a[i], b[i]))
            << ops[k].first << "(" << +a[i] << ", " << +b[i] << ") lanes " << lanes;
      }
    }
  }
}

TEST(CodegenTypes, BitOpsAndShifts) {
  CheckBitOps<uint8_t>({0xF0, 0x0F, 0xFF, 0x81, 1, 0x80, 0xAA, 3}, {4, 3, 7, 8, 9, 200, 0, 1});
  CheckBitOps<int8_t>({-16, 16, -128, 127, -1, 5, -128, 64}, {2, 2, 7, 8, 100, 0, 1, 1});
  CheckBitOps<uint32_t>({0xDEADBEEF, 1, 0x80000000u, 12345}, {4, 31, 31, 32});
  CheckBitOps<int32_t>({-16, INT32_MIN, 0x7FFFFFFF, -5, 1, -1}, {2, 31, 1, 33, 31, 40});
  CheckBitOps<uint64_t>({0xFFFFFFFFFFFFFFFFull, 1, 0x8000000000000000ull}, {63, 63, 64});
  CheckBitOps<int64_t>({INT64_MIN, -3, 1}, {63, 1, 64});
  CheckBitOps<uint16_t>({0xFFFF, 0x1234}, {15, 4});
  CheckBitOps<int16_t>({-32768, -3}, {15, 16});
}

TEST(CodegenTypes, Float64Arithmetic) {
  DataType t = DataType::Float64();
  std::vector<double> a = {1.0 + 1e-12, -7.5, 1e300, 3.0, -3.0, 1e-300, 0.1, 2.0};
  std::vector<double> b = {1.0, 2.0, 1e10, -2.0, 2.0, 1e300, 0.2, 0.5};
  for (int lanes : {1, 8}) {
    auto bin = [](ExprKind k) {
      return [k](const std::vector<Expr>& in) { return MakeBinary(k, in[0], in[1]); };
    };
    std::vector<ExprKind> kinds = {ExprKind::kAdd,      ExprKind::kSub,     ExprKind::kMul,
                                   ExprKind::kDiv,      ExprKind::kMin,     ExprKind::kMax,
                                   ExprKind::kFloorDiv, ExprKind::kFloorMod};
    std::vector<OutSpec> outs;
    for (ExprKind k : kinds) outs.push_back({t, bin(k)});
    outs.push_back({DataType::Bool(), bin(ExprKind::kLT)});
    PrimFunc f = Elementwise("f64", {t, t}, outs, 8, lanes);
    std::vector<std::vector<double>> got(kinds.size(), std::vector<double>(8, -1.0));
    std::vector<uint8_t> lt(8, 9);
    std::vector<void*> args = {a.data(), b.data()};
    for (auto& g : got) args.push_back(g.data());
    args.push_back(lt.data());
    RunJit(f, args);
    for (int i = 0; i < 8; ++i) {
      double x = a[i], y = b[i];
      EXPECT_EQ(got[0][i], x + y) << i;
      EXPECT_EQ(got[1][i], x - y) << i;
      EXPECT_EQ(got[2][i], x * y) << i;
      EXPECT_EQ(got[3][i], x / y) << i;
      EXPECT_EQ(got[4][i], std::min(x, y)) << i;
      EXPECT_EQ(got[5][i], std::max(x, y)) << i;
      EXPECT_EQ(got[6][i], std::floor(x / y)) << i;
      EXPECT_NEAR(got[7][i], x - std::floor(x / y) * y, 1e-12 * std::fabs(x) + 1e-300) << i;
      EXPECT_EQ(lt[i], x < y ? 1 : 0) << i;
    }
    EXPECT_NE(got[1][0], 0.0);  // 1 + 1e-12 - 1 survives only in double
  }
}

// A kVectorized loop over every element type: the vectorizer turns it into
// vector loads, a vector-condition Select, a Broadcast constant, a cast of
// the loop variable and a bool store; the result runs.
template <typename T>
void CheckVectorizedLoop() {
  SCOPED_TRACE(ToString(DTypeOf<T>()));
  DataType t = DTypeOf<T>();
  const int64_t n = 32;
  Buffer a("A", t, {IntImm(n)}), b("B", t, {IntImm(n)}), out("Out", t, {IntImm(n)});
  Buffer lt("Lt", DataType::Bool(), {IntImm(n)}), flag("Flag", DataType::Bool(), {IntImm(n)});
  Buffer nflag("NotFlag", DataType::Bool(), {IntImm(n)});
  Var o("o"), i("i");
  Expr idx = o * IntImm(8) + i;
  Expr three = t.is_float() ? FloatImm(3.0, t) : IntImm(3, t);
  Stmt body = Seq({
      Store(out,
            Select(Load(a, {idx}) > Load(b, {idx}), Load(a, {idx}), Load(b, {idx}) + three) +
                Cast(t, i),
            {idx}),
      Store(lt, Load(a, {idx}) < Load(b, {idx}), {idx}),
      Store(nflag, !Load(flag, {idx}), {idx}),
  });
  Stmt loop = For(o, 0, n / 8, ForKind::kSerial, For(i, 0, 8, ForKind::kVectorized, body));
  Stmt vec = lower::VectorizeLoops(loop);
  std::string text = ToText(vec);
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_EQ(vec.as<ForNode>()->body.as<ForNode>(), nullptr) << text;  // inner loop is gone
  PrimFunc f{"vec", {a, b, flag, out, lt, nflag}, vec};
  std::vector<T> av(n), bv(n), ov(n, T(0));
  std::vector<uint8_t> fv(n), ltv(n, 7), nfv(n, 7);
  for (int64_t k = 0; k < n; ++k) {
    av[k] = static_cast<T>((k * 7) % 11);
    bv[k] = static_cast<T>((k * 5) % 13);
    fv[k] = k % 3 == 0;
  }
  RunJit(f, {av.data(), bv.data(), fv.data(), ov.data(), ltv.data(), nfv.data()});
  for (int64_t k = 0; k < n; ++k) {
    T want = static_cast<T>((av[k] > bv[k] ? av[k] : static_cast<T>(bv[k] + T(3))) + T(k % 8));
    EXPECT_EQ(ov[k], want) << k;
    EXPECT_EQ(ltv[k], av[k] < bv[k] ? 1 : 0) << k;
    EXPECT_EQ(nfv[k], fv[k] ? 0 : 1) << k;
  }
}

TEST(CodegenTypes, VectorizedLoopsEveryType) {
  CheckVectorizedLoop<int8_t>();
  CheckVectorizedLoop<int16_t>();
  CheckVectorizedLoop<int32_t>();
  CheckVectorizedLoop<int64_t>();
  CheckVectorizedLoop<uint8_t>();
  CheckVectorizedLoop<uint16_t>();
  CheckVectorizedLoop<uint32_t>();
  CheckVectorizedLoop<uint64_t>();
  CheckVectorizedLoop<float>();
  CheckVectorizedLoop<double>();
}
}  // namespace
}  // namespace kiln::compiler
