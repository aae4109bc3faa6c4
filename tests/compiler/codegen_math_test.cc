// The code generator's math: intrinsics in float32/64/16 against libm,
// special values, the NaN test, C library calls resolved in the JIT
// and in shared objects, every intrinsic compiled for AArch64, and bad calls
// failing cleanly.
#include <gtest/gtest.h>

#include "tests/compiler/codegen_types.h"

namespace kiln::compiler {
namespace {

using namespace kiln::ir;       // NOLINT
using namespace codegen_types;  // NOLINT

// The relative error of `got` against `want` (absolute below 1e-30).
double RelErr(double got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1.0;
  if (std::isinf(want)) return got == want ? 0.0 : 1.0;
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
}

struct MathCase {
  Intrinsic op;
  int arity;
  double (*ref)(double, double, double);
  double lo[3];  // each argument on a grid over [lo, hi]
  double hi[3];
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
const std::vector<MathCase>& MathCases() {
  using D = double;
  static const std::vector<MathCase> cases = {
      {Intrinsic::kExp, 1, [](D x, D, D) { return std::exp(x); }, {-20}, {20}},
      {Intrinsic::kLog, 1, [](D x, D, D) { return std::log(x); }, {1e-3}, {1e3}},
      {Intrinsic::kSqrt, 1, [](D x, D, D) { return std::sqrt(x); }, {0}, {1e3}},
      {Intrinsic::kFabs, 1, [](D x, D, D) { return std::fabs(x); }, {-10}, {10}},
      {Intrinsic::kFloor, 1, [](D x, D, D) { return std::floor(x); }, {-4.5}, {4.5}},
      {Intrinsic::kCeil, 1, [](D x, D, D) { return std::ceil(x); }, {-4.5}, {4.5}},
      {Intrinsic::kTrunc, 1, [](D x, D, D) { return std::trunc(x); }, {-4.5}, {4.5}},
      {Intrinsic::kRoundEven, 1, [](D x, D, D) { return std::nearbyint(x); }, {-4.5}, {4.5}},
      {Intrinsic::kSin, 1, [](D x, D, D) { return std::sin(x); }, {-10}, {10}},
      {Intrinsic::kCos, 1, [](D x, D, D) { return std::cos(x); }, {-10}, {10}},
      {Intrinsic::kTan, 1, [](D x, D, D) { return std::tan(x); }, {-1.5}, {1.5}},
      {Intrinsic::kAsin, 1, [](D x, D, D) { return std::asin(x); }, {-1}, {1}},
      {Intrinsic::kAcos, 1, [](D x, D, D) { return std::acos(x); }, {-1}, {1}},
      {Intrinsic::kAtan, 1, [](D x, D, D) { return std::atan(x); }, {-20}, {20}},
      {Intrinsic::kSinh, 1, [](D x, D, D) { return std::sinh(x); }, {-10}, {10}},
      {Intrinsic::kCosh, 1, [](D x, D, D) { return std::cosh(x); }, {-10}, {10}},
      {Intrinsic::kTanh, 1, [](D x, D, D) { return std::tanh(x); }, {-10}, {10}},
      {Intrinsic::kTanh, 1, [](D x, D, D) { return std::tanh(x); }, {-0.6}, {0.6}},  // the series
      {Intrinsic::kTanh, 1, [](D x, D, D) { return std::tanh(x); }, {-0.02}, {0.02}},
      {Intrinsic::kAsinh, 1, [](D x, D, D) { return std::asinh(x); }, {-100}, {100}},
      {Intrinsic::kAcosh, 1, [](D x, D, D) { return std::acosh(x); }, {1}, {100}},
      {Intrinsic::kAtanh, 1, [](D x, D, D) { return std::atanh(x); }, {-0.99}, {0.99}},
      {Intrinsic::kErf, 1, [](D x, D, D) { return std::erf(x); }, {-5}, {5}},
      {Intrinsic::kSigmoid, 1, [](D x, D, D) { return Sigmoid(x); }, {-20}, {20}},
      {Intrinsic::kPow, 2, [](D x, D y, D) { return std::pow(x, y); }, {0.1, -3}, {10, 3}},
      {Intrinsic::kFmod, 2, [](D x, D y, D) { return std::fmod(x, y); }, {-10, -3.3}, {10, 3}},
  };
  return cases;
}

// Every intrinsic of MathCases on a 64-point grid (scalar and 8 lanes)
// against <cmath> evaluated in double on the same (rounded) inputs.
template <typename T>
void CheckMath(double tol) {
  DataType t = DTypeOf<T>();
  const int64_t n = 64;
  for (int lanes : {1, 8}) {
    for (const MathCase& mc : MathCases()) {
      SCOPED_TRACE(std::string(NameOf(mc.op)) + " " + ToString(t) + " lanes " +
                   std::to_string(lanes));
      std::vector<std::vector<T>> in(mc.arity, std::vector<T>(n));
      for (int a = 0; a < mc.arity; ++a) {
        for (int64_t i = 0; i < n; ++i)
          in[a][i] = static_cast<T>(mc.lo[a] + (mc.hi[a] - mc.lo[a]) * double(i) / double(n - 1));
      }
      const Intrinsic op = mc.op;
      PrimFunc f = Elementwise("math", std::vector<DataType>(mc.arity, t),
                               {{t,
                                 [op, t](const std::vector<Expr>& x) {
                                   return Call(t.WithLanes(x[0].dtype().lanes), op, x);
                                 }}},
                               n, lanes);
      std::vector<T> got(n, T(-12345));
      std::vector<void*> args;
      for (auto& v : in) args.push_back(v.data());
      args.push_back(got.data());
      RunJit(f, args);
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) {
        double x = in[0][i], y = mc.arity > 1 ? double(in[1][i]) : 0.0,
               z = mc.arity > 2 ? double(in[2][i]) : 0.0;
        double want = mc.ref(x, y, z);
        if constexpr (std::is_same_v<T, float>) want = static_cast<float>(want);
        double err = RelErr(got[i], want);
        worst = std::max(worst, err);
        EXPECT_LE(err, tol) << mc.op << "(" << x << ", " << y << ", " << z << ") = " << got[i]
                            << ", want " << want;
      }
    }
  }
}

TEST(CodegenTypes, MathIntrinsicsFloat32) { CheckMath<float>(1e-5); }
TEST(CodegenTypes, MathIntrinsicsFloat64) { CheckMath<double>(1e-12); }

// Special values: tanh and sigmoid saturate, NaN propagates, rounding of
// halves.
TEST(CodegenTypes, MathSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    Intrinsic op;
    std::vector<float> x, y, want;
  };
  std::vector<Case> cases = {
      {Intrinsic::kTanh,
       {100.f, -100.f, inf, -inf, 1e-30f, -1e-4f, 0.f, 20.f},
       {},
       {1.f, -1.f, 1.f, -1.f, 1e-30f, static_cast<float>(std::tanh(-1e-4)), 0.f, 1.f}},
      {Intrinsic::kSigmoid,
       {100.f, -100.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f},
       {},
       {1.f, 0.f, .5f, .5f, .5f, .5f, .5f, .5f}},
      {Intrinsic::kRoundEven,
       {2.5f, -2.5f, 0.5f, -0.5f, 1.5f, 3.51f, -3.5f, 7.f},
       {},
       {2.f, -2.f, 0.f, -0.f, 2.f, 4.f, -4.f, 7.f}},
      {Intrinsic::kErf,
       {inf, -inf, nan, 0.f, 10.f, -10.f, 1e-20f, 0.f},
       {},
       {1.f, -1.f, nan, 0.f, 1.f, -1.f, static_cast<float>(std::erf(1e-20)), 0.f}},
  };
  DataType t = DataType::Float32();
  for (int lanes : {1, 8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(NameOf(c.op)) + " lanes " + std::to_string(lanes));
      const Intrinsic op = c.op;
      bool binary = !c.y.empty();
      PrimFunc f = Elementwise(
          "special", binary ? std::vector<DataType>{t, t} : std::vector<DataType>{t},
          {{t, [op](const std::vector<Expr>& x) { return Call(x[0].dtype(), op, x); }}}, 8, lanes);
      std::vector<float> x = c.x, y = c.y, got(8, -7.f);
      if (binary)
        RunJit(f, {x.data(), y.data(), got.data()});
      else
        RunJit(f, {x.data(), got.data()});
      for (int i = 0; i < 8; ++i) {
        if (std::isnan(c.want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << i << ": " << got[i];
        } else {
          EXPECT_LE(RelErr(got[i], c.want[i]), 1e-6) << i << ": " << got[i] << " vs " << c.want[i];
          EXPECT_EQ(std::signbit(got[i]), std::signbit(c.want[i])) << i;
        }
      }
    }
  }
}

TEST(CodegenTypes, IsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.f, 1.f, inf, -inf, nan, -nan, std::numeric_limits<float>::max(), -0.f};
  std::vector<double> xd(x.begin(), x.end());
  const std::vector<uint8_t> want = {0, 0, 0, 0, 1, 1, 0, 0};
  for (DataType t : {DataType::Float32(), DataType::Float64()}) {
    for (int lanes : {1, 8}) {
      SCOPED_TRACE(ToString(t) + " lanes " + std::to_string(lanes));
      PrimFunc f = Elementwise("cls", {t},
                               {{DataType::Bool(),
                                 [](const std::vector<Expr>& in) {
                                   return Call(DataType::Bool().WithLanes(in[0].dtype().lanes),
                                               Intrinsic::kIsNan, in);
                                 }}},
                               8, lanes);
      std::vector<uint8_t> got(8, 9);
      void* in = t.bits == 64 ? static_cast<void*>(xd.data()) : x.data();
      RunJit(f, {in, got.data()});
      EXPECT_EQ(got, want);
    }
  }
}

TEST(CodegenTypes, BadIntrinsicCallsFailCleanly) {
  Buffer a("A", DataType::Float32(), {IntImm(4)});
  Buffer ib("I", DataType::Int32(), {IntImm(4)});
  auto fails_with = [](const PrimFunc& f, const std::string& msg) {
    auto m = codegen::JitCompile({f}, Target::Host());
    ASSERT_FALSE(m.ok()) << f.name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(m.status().message()).find(msg), std::string::npos) << m.status();
  };
  Expr x = Load(a, {IntImm(0)});
  Expr k = Load(ib, {IntImm(0)});
  fails_with(
      PrimFunc{"b1", {a}, Store(a, Call(DataType::Float32(), Intrinsic::kPow, {x}), {IntImm(1)})},
      "pow takes 2 arguments, got 1");
  fails_with(
      PrimFunc{
          "b2", {a}, Store(a, Call(DataType::Float32(), Intrinsic::kExp, {x, x}), {IntImm(1)})},
      "exp takes 1 argument, got 2");
  fails_with(
      PrimFunc{"b3", {ib}, Store(ib, Call(DataType::Int32(), Intrinsic::kExp, {k}), {IntImm(1)})},
      "intrinsic exp of type int32");
  fails_with(
      PrimFunc{
          "b4", {a, ib}, Store(a, Call(DataType::Float32(), Intrinsic::kSqrt, {k}), {IntImm(1)})},
      "argument 0 of sqrt has type int32");
  fails_with(
      PrimFunc{"b5", {a}, Store(a, Call(DataType::Float32(), Intrinsic::kFmod, {}), {IntImm(1)})},
      "fmod takes 2 arguments, got 0");
  fails_with(
      PrimFunc{"b6", {ib}, Store(ib, Call(DataType::Int32(), Intrinsic::kShl, {k}), {IntImm(1)})},
      "shl takes 2 arguments, got 1");
}

// Every intrinsic, scalar and 8 lanes, float16/32/64, compiles to an
// AArch64 object as well (no instruction selection failures).
TEST(ModuleBuilder, AllIntrinsicsCompileForAarch64) {
  auto target = Target::Parse("llvm -mtriple=aarch64-linux-gnu -mcpu=generic");
  ASSERT_TRUE(target.ok());
  std::vector<PrimFunc> funcs;
  EntryPlan plan;
  using K = BufferRef::Kind;
  int id = 0;
  for (DataType t : {DataType{TypeCode::kFloat, 16, 1}, DataType::Float32(), DataType::Float64()}) {
    for (int lanes : {1, 8}) {
      std::vector<OutSpec> outs;
      for (const MathCase& mc : MathCases()) {
        const Intrinsic op = mc.op;
        int arity = mc.arity;
        outs.push_back({t, [op, arity](const std::vector<Expr>& in) {
                          return Call(in[0].dtype(), op,
                                      std::vector<Expr>(in.begin(), in.begin() + arity));
                        }});
      }
      outs.push_back({DataType::Bool(), [](const std::vector<Expr>& in) {
                        return Call(DataType::Bool().WithLanes(in[0].dtype().lanes),
                                    Intrinsic::kIsNan, {in[0]});
                      }});
      outs.push_back({DataType::Int(8), [](const std::vector<Expr>& in) {
                        return Cast(DataType::Int(8).WithLanes(in[0].dtype().lanes), in[0]);
                      }});
      outs.push_back({DataType::UInt(32), [](const std::vector<Expr>& in) {
                        return Cast(DataType::UInt(32).WithLanes(in[0].dtype().lanes), in[0]);
                      }});
      std::string name = "k" + std::to_string(id++);
      funcs.push_back(Elementwise(name, {t, t, t}, outs, 16, lanes));
      std::vector<BufferRef> refs = {{K::kInput, 0, 0}, {K::kInput, 1, 0}, {K::kInput, 2, 0}};
      for (size_t k = 0; k < outs.size(); ++k) refs.push_back({K::kOutput, static_cast<int>(k), 0});
      plan.calls.push_back({name, refs});
    }
  }
  auto obj = codegen::EmitObjectFile(funcs, plan, *target);
  ASSERT_TRUE(obj.ok()) << obj.status();
  uint16_t machine = 0;
  std::memcpy(&machine, obj->data() + 18, 2);
  EXPECT_EQ(machine, 183);  // EM_AARCH64
}

// float16 math goes through float where LLVM or the C library needs it.
TEST(CodegenTypes, Float16Math) {
  DataType f16{TypeCode::kFloat, 16, 1};
  DataType f32 = DataType::Float32();
  std::vector<float> in = {-2.f, -0.75f, -0.1f, 0.f, 0.3f, 0.5f, 1.25f, 3.f};
  for (int lanes : {1, 8}) {
    std::vector<OutSpec> outs;
    for (Intrinsic nm : {Intrinsic::kExp, Intrinsic::kTanh, Intrinsic::kErf, Intrinsic::kSigmoid,
                         Intrinsic::kSqrt}) {
      outs.push_back({f32, [nm, f16](const std::vector<Expr>& x) {
                        int l = x[0].dtype().lanes;
                        Expr h = Cast(f16.WithLanes(l), x[0]);
                        if (nm == Intrinsic::kSqrt) h = Call(h.dtype(), Intrinsic::kFabs, {h});
                        return Cast(DataType::Float32().WithLanes(l), Call(h.dtype(), nm, {h}));
                      }});
    }
    PrimFunc f = Elementwise("half_math", {f32}, outs, 8, lanes);
    std::vector<std::vector<float>> got(outs.size(), std::vector<float>(8, -9.f));
    std::vector<void*> args = {in.data()};
    for (auto& g : got) args.push_back(g.data());
    RunJit(f, args);
    for (int i = 0; i < 8; ++i) {
      double x = in[i];
      const double want[] = {std::exp(x), std::tanh(x), std::erf(x), Sigmoid(x),
                             std::sqrt(std::fabs(x))};
      for (size_t k = 0; k < outs.size(); ++k) {
        EXPECT_NEAR(got[k][i], want[k], 2e-3 * std::max(1.0, std::fabs(want[k])))
            << k << " at " << x << " lanes " << lanes;
      }
    }
  }
}

// erf, tan and asinh become C library calls: they resolve in the JIT and in
// a shared object dlopen'ed into this process.
TEST(ModuleBuilder, LibmCallsResolveInJitAndSharedObject) {
  const int64_t n = 16;
  DataType t = DataType::Float32();
  PrimFunc f = Elementwise(
      "k_libm", {t},
      {{t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), Intrinsic::kErf, x); }},
       {t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), Intrinsic::kTan, x); }},
       {t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), Intrinsic::kAsinh, x); }}},
      n, 8);
  std::vector<float> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = -1.2f + 0.15f * static_cast<float>(i);
  auto check = [&](const std::vector<float>& e, const std::vector<float>& ta,
                   const std::vector<float>& as) {
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(RelErr(e[i], std::erf(double(in[i]))), 1e-6) << i;
      EXPECT_LE(RelErr(ta[i], std::tan(double(in[i]))), 1e-6) << i;
      EXPECT_LE(RelErr(as[i], std::asinh(double(in[i]))), 1e-6) << i;
    }
  };
  {
    std::vector<float> e(n), ta(n), as(n);
    RunJit(f, {in.data(), e.data(), ta.data(), as.data()});
    check(e, ta, as);
  }
  EntryPlan plan;
  using K = BufferRef::Kind;
  plan.calls.push_back(
      {"k_libm", {{K::kInput, 0, 0}, {K::kOutput, 0, 0}, {K::kOutput, 1, 0}, {K::kOutput, 2, 0}}});
  auto so = codegen::BuildSharedObjectFromFuncs({f}, plan, Target::Host());
  ASSERT_TRUE(so.ok()) << so.status();
  test_util::LoadedModule module(*so, "kiln_codegen_test_libm");
  ASSERT_NE(module.entry, nullptr);
  auto entry = module.entry;
  std::vector<float> e(n), ta(n), as(n);
  void* ins[] = {in.data()};
  void* outs[] = {e.data(), ta.data(), as.data()};
  ASSERT_EQ(entry(ins, outs, nullptr, nullptr), 0);
  check(e, ta, as);
}

}  // namespace
}  // namespace kiln::compiler
