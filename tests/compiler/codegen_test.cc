#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/codegen/jit.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/codegen/module.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/printer.h"
#include "compiler/kernel.h"
#include "compiler/lower/vectorize.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

using namespace kiln::ir;  // NOLINT

codegen::KernelFn Jit(const PrimFunc& f, std::unique_ptr<codegen::JitModule>* keep) {
  auto m = codegen::JitCompile({f}, Target::Host());
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  auto fn = (*m)->Lookup(f.name);
  EXPECT_TRUE(fn.ok()) << fn.status();
  *keep = std::move(*m);
  return fn.ok() ? *fn : nullptr;
}

// C[i*8 .. i*8+7] = A[...] + B[...] with vector Ramp loads.
PrimFunc VectorAdd(int64_t n) {
  Buffer a("A", DataType::Float32(), {IntImm(n)});
  Buffer b("B", DataType::Float32(), {IntImm(n)});
  Buffer c("C", DataType::Float32(), {IntImm(n)});
  Var i("i");
  Expr idx = Ramp(i * IntImm(8), IntImm(1), 8);
  Stmt body = For(i, 0, n / 8, ForKind::kSerial, Store(c, Load(a, {idx}) + Load(b, {idx}), {idx}));
  return PrimFunc{"vadd", {a, b, c}, body};
}

TEST(Codegen, VectorAddWithRampLoads) {
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(VectorAdd(64), &keep);
  ASSERT_NE(fn, nullptr);
  std::vector<float> a(64), b(64), c(64, -1.0f);
  for (int i = 0; i < 64; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i) + 1.0f;
  }
  void* args[] = {a.data(), b.data(), c.data()};
  ASSERT_EQ(fn(args), 0);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(c[i], a[i] + b[i]) << i;
}

TEST(Codegen, LlvmIrHasVectorTypesAndNoalias) {
  auto text = codegen::EmitLlvmIrText({VectorAdd(64)}, Target::Host(), /*optimize=*/false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("<8 x float>"), std::string::npos);
  EXPECT_NE(text->find("noalias"), std::string::npos);
  EXPECT_NE(text->find("define i32 @vadd(ptr"), std::string::npos);
}

// Out[i] = sum_k X[i*K + k] * W[k]: a reduction through a scalar scratch.
TEST(Codegen, ReductionLoopWithScratch) {
  const int64_t M = 5, K = 37;
  Buffer x("X", DataType::Float32(), {IntImm(M * K)});
  Buffer w("W", DataType::Float32(), {IntImm(K)});
  Buffer out("Out", DataType::Float32(), {IntImm(M)});
  Buffer acc("acc", DataType::Float32(), {IntImm(1)});
  Var i("i"), k("k");
  Stmt body = For(
      i, 0, M, ForKind::kSerial,
      Allocate(
          acc,
          Seq({Store(acc, FloatImm(0.0), {IntImm(0)}),
               For(k, 0, K, ForKind::kSerial,
                   Store(acc, Load(acc, {IntImm(0)}) + Load(x, {i * IntImm(K) + k}) * Load(w, {k}),
                         {IntImm(0)})),
               Store(out, Load(acc, {IntImm(0)}), {i})})));
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(PrimFunc{"dot", {x, w, out}, body}, &keep);
  ASSERT_NE(fn, nullptr);
  std::vector<float> xv(M * K), wv(K), ov(M, 0.0f);
  for (int64_t j = 0; j < M * K; ++j) xv[j] = static_cast<float>((j * 7) % 11) - 5.0f;
  for (int64_t j = 0; j < K; ++j) wv[j] = 0.25f * static_cast<float>(j % 5);
  void* args[] = {xv.data(), wv.data(), ov.data()};
  ASSERT_EQ(fn(args), 0);
  for (int64_t r = 0; r < M; ++r) {
    double want = 0;
    for (int64_t j = 0; j < K; ++j) want += static_cast<double>(xv[r * K + j]) * wv[j];
    EXPECT_NEAR(ov[r], want, 1e-4) << r;
  }
}

// Referencing the runtime keeps libkiln_runtime.so (kiln_parallel_for) loaded
// in this process for the JIT to resolve.
TEST(Codegen, RuntimeThreadPoolIsLinked) { EXPECT_GE(kiln_num_threads(), 1); }

// A parallel outer loop whose body reads an outer Let variable and a scalar
// scratch buffer allocated inside; every element must be written.
TEST(Codegen, ParallelLoopWritesEveryElement) {
  const int64_t R = 97, C = 33;
  Buffer in("In", DataType::Float32(), {IntImm(R * C)});
  Buffer out("Out", DataType::Float32(), {IntImm(R * C)});
  Buffer tmp("tmp", DataType::Float32(), {IntImm(C)});
  Var i("i"), j("j"), j2("j2"), scale("scale", DataType::Float32());
  Stmt inner = Allocate(
      tmp,
      Seq({For(j, 0, C, ForKind::kSerial, Store(tmp, Load(in, {i * IntImm(C) + j}) * scale, {j})),
           For(j2, 0, C, ForKind::kSerial,
               Store(out, Load(tmp, {j2}) + Cast(DataType::Float32(), i), {i * IntImm(C) + j2}))}));
  Stmt body = LetStmt(scale, FloatImm(2.0), For(i, 0, R, ForKind::kParallel, inner));
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(PrimFunc{"par", {in, out}, body}, &keep);
  ASSERT_NE(fn, nullptr);
  std::vector<float> iv(R * C), ov(R * C, -12345.0f);
  for (int64_t k = 0; k < R * C; ++k) iv[k] = static_cast<float>(k % 13);
  void* args[] = {iv.data(), ov.data()};
  ASSERT_EQ(fn(args), 0);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_FLOAT_EQ(ov[r * C + c], 2.0f * iv[r * C + c] + static_cast<float>(r)) << r << "," << c;
    }
  }
  auto text = codegen::EmitLlvmIrText({PrimFunc{"par", {in, out}, body}}, Target::Host(), false);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("call void @kiln_parallel_for"), std::string::npos);
}

// Out[i] = select(floormod(i - 8, 3) == 0, floordiv(i - 8, 3), -fabs(x)) for i
// in [0, 16): exercises negative floor division/modulo, Select and a call.
TEST(Codegen, SelectFloorModNegative) {
  Buffer x("X", DataType::Float32(), {IntImm(16)});
  Buffer out("Out", DataType::Float32(), {IntImm(16)});
  Buffer outm("OutMod", DataType::Float32(), {IntImm(16)});
  Var i("i");
  Expr v = i - IntImm(8);
  Expr sel = Select(Eq(FloorMod(v, IntImm(3)), IntImm(0)),
                    Cast(DataType::Float32(), FloorDiv(v, IntImm(3))),
                    FloatImm(0.0) - Call(DataType::Float32(), "fabs", {Load(x, {i})}));
  Stmt body = For(i, 0, 16, ForKind::kSerial,
                  Seq({Store(out, sel, {i}),
                       Store(outm,
                             Cast(DataType::Float32(),
                                  FloorMod(v, IntImm(-5)) + FloorDiv(v, IntImm(-5)) * IntImm(100)),
                             {i})}));
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(PrimFunc{"sel", {x, out, outm}, body}, &keep);
  ASSERT_NE(fn, nullptr);
  std::vector<float> xv(16), ov(16), om(16);
  for (int k = 0; k < 16; ++k) xv[k] = (k % 2 ? 1.0f : -1.0f) * static_cast<float>(k);
  void* args[] = {xv.data(), ov.data(), om.data()};
  ASSERT_EQ(fn(args), 0);
  auto floordiv = [](int64_t a, int64_t b) {
    return static_cast<int64_t>(std::floor(double(a) / double(b)));
  };
  for (int k = 0; k < 16; ++k) {
    int64_t a = k - 8;
    int64_t m3 = a - floordiv(a, 3) * 3;
    float want = m3 == 0 ? static_cast<float>(floordiv(a, 3)) : -std::fabs(xv[k]);
    EXPECT_FLOAT_EQ(ov[k], want) << k;
    int64_t q5 = floordiv(a, -5);
    EXPECT_FLOAT_EQ(om[k], static_cast<float>(a - q5 * -5 + q5 * 100)) << k;
  }
}

// Gather/scatter: Out[ramp(0, 2, 8)] = max(A[ramp(7, -1, 8)], 0) and the odd
// lanes with exp of a broadcast.
TEST(Codegen, GatherScatterMaxExp) {
  Buffer a("A", DataType::Float32(), {IntImm(8)});
  Buffer out("Out", DataType::Float32(), {IntImm(16)});
  Stmt body =
      Seq({Store(out, Max(Load(a, {Ramp(IntImm(7), IntImm(-1), 8)}), Broadcast(FloatImm(0.0), 8)),
                 {Ramp(IntImm(0), IntImm(2), 8)}),
           Store(out, Call(DataType::Float32().WithLanes(8), "exp", {Broadcast(FloatImm(1.0), 8)}),
                 {Ramp(IntImm(1), IntImm(2), 8)})});
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(PrimFunc{"gs", {a, out}, body}, &keep);
  ASSERT_NE(fn, nullptr);
  std::vector<float> av = {-1, 2, -3, 4, -5, 6, -7, 8}, ov(16, 0.0f);
  void* args[] = {av.data(), ov.data()};
  ASSERT_EQ(fn(args), 0);
  for (int k = 0; k < 8; ++k) {
    EXPECT_FLOAT_EQ(ov[2 * k], std::max(av[7 - k], 0.0f)) << k;
    EXPECT_NEAR(ov[2 * k + 1], std::exp(1.0f), 1e-6) << k;
  }
}

TEST(Codegen, RejectsUnloweredIr) {
  Buffer a("A", DataType::Float32(), {IntImm(4), IntImm(4)});
  Var i("i");
  PrimFunc f{"bad", {a}, For(i, 0, 4, ForKind::kSerial, Store(a, FloatImm(0.0), {i, i}))};
  auto m = codegen::JitCompile({f}, Target::Host());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(std::string(m.status().message()).find("flatten"), std::string::npos) << m.status();

  PrimFunc g{
      "bad2", {a}, Store(a, Call(DataType::Float32(), "nosuch", {FloatImm(1.0)}), {IntImm(0)})};
  auto m2 = codegen::JitCompile({g}, Target::Host());
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(std::string(m2.status().message()).find("unknown intrinsic 'nosuch'"),
            std::string::npos);
}

TEST(Codegen, JitRejectsCrossTarget) {
  auto t = Target::Parse("llvm -mtriple=aarch64-linux-gnu -mcpu=generic");
  ASSERT_TRUE(t.ok());
  if (Target::Host().triple.rfind("aarch64", 0) == 0) GTEST_SKIP() << "host is aarch64";
  auto m = codegen::JitCompile({VectorAdd(8)}, *t);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(m.status().message()).find("only the host target"), std::string::npos);
}

// y = x * 2 + w (weight) then z = relu(y) in a second kernel, through the
// workspace; the .so is written, dlopen'ed and kiln_main called.
TEST(ModuleBuilder, SharedObjectRunsEntryPlan) {
  const int64_t n = 40;
  Buffer x("X", DataType::Float32(), {IntImm(n)});
  Buffer w("W", DataType::Float32(), {IntImm(n)});
  Buffer y("Y", DataType::Float32(), {IntImm(n)});
  Var i("i");
  PrimFunc k1{
      "k_scale_add",
      {x, w, y},
      For(i, 0, n, ForKind::kParallel, Store(y, Load(x, {i}) * FloatImm(2.0) + Load(w, {i}), {i}))};
  Buffer a("A", DataType::Float32(), {IntImm(n)});
  Buffer z("Z", DataType::Float32(), {IntImm(n)});
  Var j("j");
  PrimFunc k2{"k_relu",
              {a, z},
              For(j, 0, n, ForKind::kSerial, Store(z, Max(Load(a, {j}), FloatImm(0.0)), {j}))};

  EntryPlan plan;
  using K = BufferRef::Kind;
  plan.calls.push_back(
      {"k_scale_add", {{K::kInput, 0, 0}, {K::kWeight, 0, 64}, {K::kWorkspace, 0, 128}}});
  plan.calls.push_back({"k_relu", {{K::kWorkspace, 0, 128}, {K::kOutput, 0, 0}}});
  auto so = codegen::BuildSharedObjectFromFuncs({k1, k2}, plan, Target::Host());
  ASSERT_TRUE(so.ok()) << so.status();
  ASSERT_GT(so->size(), 4u);
  EXPECT_EQ(so->substr(0, 4),
            "\x7f"
            "ELF");

  std::string path = ::testing::TempDir() + "/kiln_codegen_test_module.so";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(so->data(), static_cast<std::streamsize>(so->size()));
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Entry = int32_t (*)(void* const*, void* const*, const uint8_t*, uint8_t*);
  auto entry = reinterpret_cast<Entry>(dlsym(h, "kiln_main"));
  ASSERT_NE(entry, nullptr);
  EXPECT_NE(dlsym(h, "k_relu"), nullptr);  // kernels are exported too

  std::vector<float> xin(n), out(n, -1.0f);
  alignas(64) static uint8_t weights[64 + 40 * 4];
  alignas(64) static uint8_t workspace[128 + 40 * 4];
  std::vector<float> wv(n);
  for (int64_t k = 0; k < n; ++k) {
    xin[k] = static_cast<float>(k) - 20.0f;
    wv[k] = 0.5f;
  }
  std::memcpy(weights + 64, wv.data(), n * sizeof(float));
  void* ins[] = {xin.data()};
  void* outs[] = {out.data()};
  ASSERT_EQ(entry(ins, outs, weights, workspace), 0);
  for (int64_t k = 0; k < n; ++k)
    EXPECT_FLOAT_EQ(out[k], std::max(xin[k] * 2.0f + 0.5f, 0.0f)) << k;
  dlclose(h);
}

TEST(ModuleBuilder, RejectsBadPlan) {
  EntryPlan plan;
  plan.calls.push_back({"missing", {}});
  auto so = codegen::BuildSharedObjectFromFuncs({VectorAdd(8)}, plan, Target::Host());
  ASSERT_FALSE(so.ok());
  EXPECT_NE(std::string(so.status().message()).find("unknown kernel 'missing'"), std::string::npos);

  EntryPlan plan2;
  plan2.calls.push_back({"vadd", {{BufferRef::Kind::kInput, 0, 0}}});
  auto so2 = codegen::BuildSharedObjectFromFuncs({VectorAdd(8)}, plan2, Target::Host());
  ASSERT_FALSE(so2.ok());
  EXPECT_NE(std::string(so2.status().message()).find("which takes 3"), std::string::npos);
}

TEST(ModuleBuilder, EmitsAarch64Object) {
  auto t = Target::Parse("llvm -mtriple=aarch64-linux-gnu -mcpu=generic");
  ASSERT_TRUE(t.ok());
  EntryPlan plan;
  using K = BufferRef::Kind;
  plan.calls.push_back({"vadd", {{K::kInput, 0, 0}, {K::kInput, 1, 0}, {K::kOutput, 0, 0}}});
  auto obj = codegen::EmitObjectFile({VectorAdd(64)}, plan, *t);
  ASSERT_TRUE(obj.ok()) << obj.status();
  ASSERT_GT(obj->size(), 20u);
  EXPECT_EQ(obj->substr(0, 4),
            "\x7f"
            "ELF");
  uint16_t machine = 0;
  std::memcpy(&machine, obj->data() + 18, 2);
  EXPECT_EQ(machine, 183);  // EM_AARCH64
  // Linking needs ld.lld for a foreign triple; either it links an AArch64 .so
  // or it says clearly why not.
  auto so = codegen::LinkSharedObject(*obj, *t);
  if (so.ok()) {
    std::memcpy(&machine, so->data() + 18, 2);
    EXPECT_EQ(machine, 183);
  } else {
    EXPECT_EQ(so.status().code(), absl::StatusCode::kUnavailable) << so.status();
  }
}

// ---------------------------------------------------------------------------
// Element types: integers of every width and signedness, bool, float64,
// casts and intrinsics. Each kernel is built by hand and run through the JIT,
// once scalar and once with 8-lane vector accesses.

template <typename T>
DataType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::Float32();
  if constexpr (std::is_same_v<T, double>) return DataType::Float64();
  if constexpr (std::is_signed_v<T>) return DataType::Int(8 * sizeof(T));
  return DataType::UInt(8 * sizeof(T));
}

// `v` as a constant of `t` (element type), broadcast to `lanes`.
Expr Const(DataType t, double v, int lanes) {
  Expr c = t.is_float() ? FloatImm(v, t) : IntImm(static_cast<int64_t>(v), t);
  return lanes > 1 ? Broadcast(c, lanes) : c;
}

using OutFn = std::function<Expr(const std::vector<Expr>& in)>;
struct OutSpec {
  DataType dtype;
  OutFn fn;
};

// out_k[i] = outs[k].fn(in_0[i], in_1[i], ...) for i in [0, n), `lanes`
// elements at a time (unit-stride Ramp accesses when lanes > 1).
PrimFunc Elementwise(const std::string& name, const std::vector<DataType>& ins,
                     const std::vector<OutSpec>& outs, int64_t n, int lanes) {
  std::vector<Buffer> params;
  std::vector<Expr> loads;
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : Ramp(i * IntImm(lanes), IntImm(1), lanes);
  for (size_t k = 0; k < ins.size(); ++k) {
    params.push_back(Buffer("in" + std::to_string(k), ins[k], {IntImm(n)}));
    loads.push_back(Load(params.back(), {idx}));
  }
  std::vector<Stmt> stores;
  for (size_t k = 0; k < outs.size(); ++k) {
    params.push_back(Buffer("out" + std::to_string(k), outs[k].dtype, {IntImm(n)}));
    stores.push_back(Store(params.back(), outs[k].fn(loads), {idx}));
  }
  return PrimFunc{name, params, For(i, 0, n / lanes, ForKind::kSerial, Seq(stores))};
}

// Runs `f` through the JIT on `args` (one pointer per parameter).
void RunJit(const PrimFunc& f, std::vector<void*> args) {
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(f, &keep);
  ASSERT_NE(fn, nullptr);
  ASSERT_EQ(fn(args.data()), 0);
}

template <typename T>
std::vector<T> InterestingValues() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_signed_v<T>) {
    return {0, 1, 2, 3, 7, 100, -1, -7, -100, L::max(), L::min(), static_cast<T>(L::min() + 1)};
  } else {
    return {0,
            1,
            2,
            3,
            5,
            7,
            100,
            200,
            L::max(),
            static_cast<T>(L::max() - 1),
            static_cast<T>(L::max() / 2),
            static_cast<T>(L::max() / 2 + 1)};
  }
}

// Wrapping arithmetic and the generated code's division rules: x / 0 = 0,
// x % 0 = 0, INT_MIN / -1 = INT_MIN.
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
  CheckCast<float, int8_t>(f32, i8, {100.7f, -128.9f, 1000.f, -1000.f}, {100, -128, 127, -128});
  CheckCast<double, int64_t>(f64, i64, {-9.0e15, 3.99, -3.99}, {-9000000000000000LL, 3, -3});
  CheckCast<float, uint8_t>(f32, u8, {255.9f, 0.9f, -5.f, 300.f}, {255, 0, 0, 255});
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

// The relative error of `got` against `want` (absolute below 1e-30).
double RelErr(double got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0.0 : 1.0;
  if (std::isinf(want)) return got == want ? 0.0 : 1.0;
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-30);
}

struct MathCase {
  const char* name;
  int arity;
  double (*ref)(double, double, double);
  double lo[3];  // each argument on a grid over [lo, hi]
  double hi[3];
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double FMaximum(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::fmax(a, b);
}
double FMinimum(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::fmin(a, b);
}

const std::vector<MathCase>& MathCases() {
  using D = double;
  static const std::vector<MathCase> cases = {
      {"exp", 1, [](D x, D, D) { return std::exp(x); }, {-20}, {20}},
      {"log", 1, [](D x, D, D) { return std::log(x); }, {1e-3}, {1e3}},
      {"sqrt", 1, [](D x, D, D) { return std::sqrt(x); }, {0}, {1e3}},
      {"fabs", 1, [](D x, D, D) { return std::fabs(x); }, {-10}, {10}},
      {"floor", 1, [](D x, D, D) { return std::floor(x); }, {-4.5}, {4.5}},
      {"ceil", 1, [](D x, D, D) { return std::ceil(x); }, {-4.5}, {4.5}},
      {"trunc", 1, [](D x, D, D) { return std::trunc(x); }, {-4.5}, {4.5}},
      {"round", 1, [](D x, D, D) { return std::round(x); }, {-4.5}, {4.5}},
      {"roundeven", 1, [](D x, D, D) { return std::nearbyint(x); }, {-4.5}, {4.5}},
      {"sin", 1, [](D x, D, D) { return std::sin(x); }, {-10}, {10}},
      {"cos", 1, [](D x, D, D) { return std::cos(x); }, {-10}, {10}},
      {"tan", 1, [](D x, D, D) { return std::tan(x); }, {-1.5}, {1.5}},
      {"asin", 1, [](D x, D, D) { return std::asin(x); }, {-1}, {1}},
      {"acos", 1, [](D x, D, D) { return std::acos(x); }, {-1}, {1}},
      {"atan", 1, [](D x, D, D) { return std::atan(x); }, {-20}, {20}},
      {"sinh", 1, [](D x, D, D) { return std::sinh(x); }, {-10}, {10}},
      {"cosh", 1, [](D x, D, D) { return std::cosh(x); }, {-10}, {10}},
      {"tanh", 1, [](D x, D, D) { return std::tanh(x); }, {-10}, {10}},
      {"tanh", 1, [](D x, D, D) { return std::tanh(x); }, {-0.6}, {0.6}},  // the series
      {"tanh", 1, [](D x, D, D) { return std::tanh(x); }, {-0.02}, {0.02}},
      {"asinh", 1, [](D x, D, D) { return std::asinh(x); }, {-100}, {100}},
      {"acosh", 1, [](D x, D, D) { return std::acosh(x); }, {1}, {100}},
      {"atanh", 1, [](D x, D, D) { return std::atanh(x); }, {-0.99}, {0.99}},
      {"erf", 1, [](D x, D, D) { return std::erf(x); }, {-5}, {5}},
      {"sigmoid", 1, [](D x, D, D) { return Sigmoid(x); }, {-20}, {20}},
      {"pow", 2, [](D x, D y, D) { return std::pow(x, y); }, {0.1, -3}, {10, 3}},
      {"fmod", 2, [](D x, D y, D) { return std::fmod(x, y); }, {-10, -3.3}, {10, 3}},
      {"fmax", 2, [](D x, D y, D) { return std::fmax(x, y); }, {-5, 5}, {5, -5}},
      {"fmin", 2, [](D x, D y, D) { return std::fmin(x, y); }, {-5, 5}, {5, -5}},
      {"fmaximum", 2, [](D x, D y, D) { return FMaximum(x, y); }, {-5, 5}, {5, -5}},
      {"fminimum", 2, [](D x, D y, D) { return FMinimum(x, y); }, {-5, 5}, {5, -5}},
      {"fma", 3, [](D x, D y, D z) { return std::fma(x, y, z); }, {-3, 2, -1}, {3, -2, 1}},
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
      SCOPED_TRACE(std::string(mc.name) + " " + ToString(t) + " lanes " + std::to_string(lanes));
      std::vector<std::vector<T>> in(mc.arity, std::vector<T>(n));
      for (int a = 0; a < mc.arity; ++a) {
        for (int64_t i = 0; i < n; ++i)
          in[a][i] = static_cast<T>(mc.lo[a] + (mc.hi[a] - mc.lo[a]) * double(i) / double(n - 1));
      }
      std::string name = mc.name;
      PrimFunc f = Elementwise("math", std::vector<DataType>(mc.arity, t),
                               {{t,
                                 [name, t](const std::vector<Expr>& x) {
                                   return Call(t.WithLanes(x[0].dtype().lanes), name, x);
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
        EXPECT_LE(err, tol) << mc.name << "(" << x << ", " << y << ", " << z << ") = " << got[i]
                            << ", want " << want;
      }
    }
  }
}

TEST(CodegenTypes, MathIntrinsicsFloat32) { CheckMath<float>(1e-5); }
TEST(CodegenTypes, MathIntrinsicsFloat64) { CheckMath<double>(1e-12); }

// Special values: tanh and sigmoid saturate, NaN propagates (or not, for
// fmax/fmin), rounding of halves.
TEST(CodegenTypes, MathSpecialValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    std::vector<float> x, y, want;
  };
  std::vector<Case> cases = {
      {"tanh",
       {100.f, -100.f, inf, -inf, 1e-30f, -1e-4f, 0.f, 20.f},
       {},
       {1.f, -1.f, 1.f, -1.f, 1e-30f, static_cast<float>(std::tanh(-1e-4)), 0.f, 1.f}},
      {"sigmoid",
       {100.f, -100.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f},
       {},
       {1.f, 0.f, .5f, .5f, .5f, .5f, .5f, .5f}},
      {"round",
       {2.5f, -2.5f, 0.5f, -0.5f, 1.5f, 3.49f, -3.5f, 7.f},
       {},
       {3.f, -3.f, 1.f, -1.f, 2.f, 3.f, -4.f, 7.f}},
      {"roundeven",
       {2.5f, -2.5f, 0.5f, -0.5f, 1.5f, 3.51f, -3.5f, 7.f},
       {},
       {2.f, -2.f, 0.f, -0.f, 2.f, 4.f, -4.f, 7.f}},
      {"fmax",
       {nan, 1.f, nan, 2.f, -1.f, 0.f, 5.f, -5.f},
       {1.f, nan, nan, 3.f, -2.f, 0.f, 5.f, -6.f},
       {1.f, 1.f, nan, 3.f, -1.f, 0.f, 5.f, -5.f}},
      {"fmaximum",
       {nan, 1.f, nan, 2.f, -1.f, 0.f, 5.f, -5.f},
       {1.f, nan, nan, 3.f, -2.f, 0.f, 5.f, -6.f},
       {nan, nan, nan, 3.f, -1.f, 0.f, 5.f, -5.f}},
      {"fminimum",
       {nan, 1.f, nan, 2.f, -1.f, 0.f, 5.f, -5.f},
       {1.f, nan, nan, 3.f, -2.f, 0.f, 5.f, -6.f},
       {nan, nan, nan, 2.f, -2.f, 0.f, 5.f, -6.f}},
      {"erf",
       {inf, -inf, nan, 0.f, 10.f, -10.f, 1e-20f, 0.f},
       {},
       {1.f, -1.f, nan, 0.f, 1.f, -1.f, static_cast<float>(std::erf(1e-20)), 0.f}},
  };
  DataType t = DataType::Float32();
  for (int lanes : {1, 8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " lanes " + std::to_string(lanes));
      std::string name = c.name;
      bool binary = !c.y.empty();
      PrimFunc f = Elementwise(
          "special", binary ? std::vector<DataType>{t, t} : std::vector<DataType>{t},
          {{t, [name](const std::vector<Expr>& x) { return Call(x[0].dtype(), name, x); }}}, 8,
          lanes);
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

TEST(CodegenTypes, IsNanIsInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.f, 1.f, inf, -inf, nan, -nan, std::numeric_limits<float>::max(), -0.f};
  std::vector<double> xd(x.begin(), x.end());
  std::vector<uint8_t> want_nan = {0, 0, 0, 0, 1, 1, 0, 0}, want_inf = {0, 0, 1, 1, 0, 0, 0, 0};
  for (DataType t : {DataType::Float32(), DataType::Float64()}) {
    for (int lanes : {1, 8}) {
      SCOPED_TRACE(ToString(t) + " lanes " + std::to_string(lanes));
      auto pred = [](const char* name) {
        return [name](const std::vector<Expr>& in) {
          return Call(DataType::Bool().WithLanes(in[0].dtype().lanes), name, in);
        };
      };
      PrimFunc f = Elementwise(
          "cls", {t}, {{DataType::Bool(), pred("isnan")}, {DataType::Bool(), pred("isinf")}}, 8,
          lanes);
      std::vector<uint8_t> got_nan(8, 9), got_inf(8, 9);
      void* in = t.bits == 64 ? static_cast<void*>(xd.data()) : x.data();
      RunJit(f, {in, got_nan.data(), got_inf.data()});
      EXPECT_EQ(got_nan, want_nan);
      EXPECT_EQ(got_inf, want_inf);
    }
  }
}

template <typename T>
void CheckBitOps(std::vector<T> a, std::vector<T> b) {
  SCOPED_TRACE(ToString(DTypeOf<T>()));
  DataType t = DTypeOf<T>();
  const int bits = 8 * sizeof(T);
  using U = std::make_unsigned_t<T>;
  auto call = [](const char* name, int arity) {
    return [name, arity](const std::vector<Expr>& in) {
      std::vector<Expr> args(in.begin(), in.begin() + arity);
      return Call(in[0].dtype(), name, args);
    };
  };
  const std::vector<std::pair<const char*, int>> ops = {{"bitand", 2}, {"bitor", 2}, {"bitxor", 2},
                                                        {"bitnot", 1}, {"shl", 2},   {"shr", 2},
                                                        {"abs", 1}};
  auto ref = [&](const std::string& op, T x, T y) -> T {
    U ux = static_cast<U>(x), uy = static_cast<U>(y);
    if (op == "bitand") return static_cast<T>(ux & uy);
    if (op == "bitor") return static_cast<T>(ux | uy);
    if (op == "bitxor") return static_cast<T>(ux ^ uy);
    if (op == "bitnot") return static_cast<T>(~ux);
    if (op == "abs") return std::is_signed_v<T> ? static_cast<T>(x < 0 ? U(0) - ux : ux) : x;
    bool big = uy >= static_cast<U>(bits);
    if (op == "shl") return big ? T(0) : static_cast<T>(static_cast<U>(ux << uy));
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
  fails_with(PrimFunc{"b1", {a}, Store(a, Call(DataType::Float32(), "pow", {x}), {IntImm(1)})},
             "pow takes 2 arguments, got 1");
  fails_with(PrimFunc{"b2", {a}, Store(a, Call(DataType::Float32(), "exp", {x, x}), {IntImm(1)})},
             "exp takes 1 argument, got 2");
  fails_with(PrimFunc{"b3", {ib}, Store(ib, Call(DataType::Int32(), "exp", {k}), {IntImm(1)})},
             "unknown intrinsic 'exp' for type int32");
  fails_with(PrimFunc{"b4", {a, ib}, Store(a, Call(DataType::Float32(), "sqrt", {k}), {IntImm(1)})},
             "argument 0 of sqrt has type int32");
  fails_with(PrimFunc{"b5", {a}, Store(a, Call(DataType::Float32(), "fma", {}), {IntImm(1)})},
             "fma takes 3 arguments, got 0");
  fails_with(PrimFunc{"b6", {ib}, Store(ib, Call(DataType::Int32(), "shl", {k}), {IntImm(1)})},
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
        std::string name = mc.name;
        int arity = mc.arity;
        outs.push_back({t, [name, arity](const std::vector<Expr>& in) {
                          return Call(in[0].dtype(), name,
                                      std::vector<Expr>(in.begin(), in.begin() + arity));
                        }});
      }
      for (const char* pred : {"isnan", "isinf"}) {
        outs.push_back({DataType::Bool(), [pred](const std::vector<Expr>& in) {
                          return Call(DataType::Bool().WithLanes(in[0].dtype().lanes), pred,
                                      {in[0]});
                        }});
      }
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
    for (const char* name : {"exp", "tanh", "erf", "sigmoid", "sqrt"}) {
      std::string nm = name;
      outs.push_back({f32, [nm, f16](const std::vector<Expr>& x) {
                        int l = x[0].dtype().lanes;
                        Expr h = Cast(f16.WithLanes(l), x[0]);
                        if (nm == "sqrt") h = Call(h.dtype(), "fabs", {h});
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
  PrimFunc f =
      Elementwise("k_libm", {t},
                  {{t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), "erf", x); }},
                   {t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), "tan", x); }},
                   {t, [](const std::vector<Expr>& x) { return Call(x[0].dtype(), "asinh", x); }}},
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
  std::string path = ::testing::TempDir() + "/kiln_codegen_test_libm.so";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(so->data(), static_cast<std::streamsize>(so->size()));
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Entry = int32_t (*)(void* const*, void* const*, const uint8_t*, uint8_t*);
  auto entry = reinterpret_cast<Entry>(dlsym(h, "kiln_main"));
  ASSERT_NE(entry, nullptr);
  std::vector<float> e(n), ta(n), as(n);
  void* ins[] = {in.data()};
  void* outs[] = {e.data(), ta.data(), as.data()};
  ASSERT_EQ(entry(ins, outs, nullptr, nullptr), 0);
  check(e, ta, as);
  dlclose(h);
}

// RunReference on float buffers.
absl::Status Reference(const Workload& w, const std::vector<std::vector<float>>& ins, float* out) {
  std::vector<const void*> ptrs;
  for (const auto& v : ins) ptrs.push_back(v.data());
  return RunReference(w, ptrs, out);
}

// BuildJit of real workloads against RunReference.
void CheckJitAgainstReference(const Workload& w) {
  Target host = Target::Host();
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  auto config = DefaultConfig(w, host);
  ASSERT_TRUE(config.ok()) << config.status();
  auto kernel = BuildJit(w, *config, host);
  if (!kernel.ok() && kernel.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "lowering not available yet: " << kernel.status();
  }
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<std::vector<float>> ins;
  for (size_t t = 0; t < sig->inputs.size(); ++t) {
    std::vector<float> v(sig->inputs[t].NumElements());
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<float>(static_cast<int64_t>((k * 37 + t * 11) % 19) - 9) / 8.0f;
    ins.push_back(std::move(v));
  }
  std::vector<float> got(sig->output.NumElements(), -777.0f), want(sig->output.NumElements(), 0.0f);
  std::vector<void*> args;
  for (auto& v : ins) {
    args.push_back(v.data());
  }
  args.push_back(got.data());
  std::vector<std::vector<uint8_t>> packed;
  for (size_t k = 0; k < (*kernel)->packed_inputs().size(); ++k) {
    const PackedInput& p = (*kernel)->packed_inputs()[k];
    packed.emplace_back(p.Bytes());
    ASSERT_EQ((*kernel)->Pack(k, ins[p.input].data(), packed.back().data()), 0);
    args[p.input] = packed.back().data();
  }
  ASSERT_EQ((*kernel)->Run(args.data()), 0);
  ASSERT_TRUE(Reference(w, ins, want.data()).ok());
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], want[k], 1e-3 * (1 + std::fabs(want[k]))) << k;
}

TEST(BuildJit, EltwiseReluMatchesReference) {
  CheckJitAgainstReference(test_util::EltwiseReluWorkload());
}

TEST(BuildJit, DenseMatchesReference) { CheckJitAgainstReference(test_util::DenseReluWorkload()); }

TEST(BuildJit, Conv2dWithBiasAndAddMatchesReference) {
  CheckJitAgainstReference(test_util::Conv2dBiasAddReluWorkload());
}

}  // namespace
}  // namespace kiln::compiler
