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
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

using namespace kiln::ir;  // NOLINT
using test_util::Jit;

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

// out[i] = in[i] * k: a kernel named "scale" for each k.
PrimFunc Scale(float k) {
  Buffer in("in", DataType::Float32(), {IntImm(8)});
  Buffer out("out", DataType::Float32(), {IntImm(8)});
  Var i("i");
  Stmt body = For(i, 0, 8, ForKind::kSerial, Store(out, Load(in, {i}) * FloatImm(k), {i}));
  return PrimFunc{"scale", {in, out}, body};
}

// Every JitModule is a library of its own in the process's one JIT: modules
// that define the same names coexist, each runs its own code, and freeing
// one (which removes its library) leaves the others working.
TEST(Codegen, JitModulesWithTheSameNamesCoexist) {
  auto two = codegen::JitCompile({Scale(2.0f)}, Target::Host());
  auto three = codegen::JitCompile({Scale(3.0f)}, Target::Host());
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_TRUE(three.ok()) << three.status();
  auto run = [](const codegen::JitModule& m) {
    auto fn = m.Lookup("scale");
    EXPECT_TRUE(fn.ok()) << fn.status();
    std::vector<float> in(8, 1.5f), out(8, 0.0f);
    void* args[] = {in.data(), out.data()};
    if (!fn.ok() || (*fn)(args) != 0) return -1.0f;
    return out[7];
  };
  EXPECT_FLOAT_EQ(run(**two), 3.0f);
  EXPECT_FLOAT_EQ(run(**three), 4.5f);
  two->reset();
  EXPECT_FLOAT_EQ(run(**three), 4.5f);
  // Building and freeing many modules reuses the pooled target machines.
  for (int k = 0; k < 20; ++k) {
    auto m = codegen::JitCompile({Scale(static_cast<float>(k))}, Target::Host());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_FLOAT_EQ(run(**m), 1.5f * static_cast<float>(k));
  }
  EXPECT_FLOAT_EQ(run(**three), 4.5f);
  EXPECT_EQ((*three)->Lookup("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(Codegen, LlvmIrHasVectorTypesAndNoalias) {
  auto text = codegen::EmitLlvmIrText({VectorAdd(64)}, Target::Host(), /*optimize=*/false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("<8 x float>"), std::string::npos);
  EXPECT_NE(text->find("noalias"), std::string::npos);
  EXPECT_NE(text->find("define i32 @vadd(ptr"), std::string::npos);
}

// C[k] = A[k] * B[k] for k < 8 as eight scalar statements: LLVM's SLP
// vectorizer makes them one vector multiply, but only in a kernel that asks
// for it (PrimFunc::slp_vectorize); either way the kernel computes C.
TEST(Codegen, SlpVectorizerRunsOnlyWhereTheKernelAsks) {
  Buffer a("A", DataType::Float32(), {IntImm(8)});
  Buffer b("B", DataType::Float32(), {IntImm(8)});
  Buffer c("C", DataType::Float32(), {IntImm(8)});
  std::vector<Stmt> stores;
  for (int64_t k = 0; k < 8; ++k) {
    stores.push_back(Store(c, Load(a, {IntImm(k)}) * Load(b, {IntImm(k)}), {IntImm(k)}));
  }
  PrimFunc f{"unrolled", {a, b, c}, Seq(stores)};
  for (bool slp : {false, true}) {
    SCOPED_TRACE(slp ? "slp" : "no slp");
    f.slp_vectorize = slp;
    auto text = codegen::EmitLlvmIrText({f}, Target::Host(), /*optimize=*/true);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(text->find("fmul contract <") != std::string::npos, slp) << *text;
    EXPECT_EQ(text->find(codegen::kSlpVectorizeAttribute) != std::string::npos, slp);

    auto m = codegen::JitCompile({f}, Target::Host());
    ASSERT_TRUE(m.ok()) << m.status();
    auto fn = (*m)->Lookup("unrolled");
    ASSERT_TRUE(fn.ok()) << fn.status();
    std::vector<float> av(8), bv(8), cv(8, 0.0f);
    for (int k = 0; k < 8; ++k) {
      av[k] = 0.5f * static_cast<float>(k) - 1.0f;
      bv[k] = 3.0f - static_cast<float>(k);
    }
    void* args[] = {av.data(), bv.data(), cv.data()};
    ASSERT_EQ((*fn)(args), 0);
    for (int k = 0; k < 8; ++k) EXPECT_EQ(cv[k], av[k] * bv[k]) << k;
  }
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
                    FloatImm(0.0) - Call(DataType::Float32(), Intrinsic::kFabs, {Load(x, {i})}));
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
  Stmt body = Seq(
      {Store(out, Max(Load(a, {Ramp(IntImm(7), IntImm(-1), 8)}), Broadcast(FloatImm(0.0), 8)),
             {Ramp(IntImm(0), IntImm(2), 8)}),
       Store(out,
             Call(DataType::Float32().WithLanes(8), Intrinsic::kExp, {Broadcast(FloatImm(1.0), 8)}),
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
}

// The host's target has the features the host has, not all its CPU model
// has: a VM that hides AMX from a Sapphire Rapids (whose LLVM table lists
// it) got AMX tiles chosen for int8 kernels that LLVM, given the host's
// features, could not select ("Cannot select: intrinsic tdpbusd").
TEST(Target, TheHostsFeaturesAreWhatTheHostHas) {
  const Target host = Target::Host();
  EXPECT_TRUE(host.IsHostCpu());
  const llvm::StringMap<bool> has = llvm::sys::getHostCPUFeatures();
  for (const char* f : {"amx-tile", "amx-int8", "amx-bf16", "avx512f", "avx512vnni", "avx512bf16",
                        "avxvnni", "avx2", "fma", "neon", "dotprod"}) {
    EXPECT_EQ(host.HasFeature(f), has.lookup(f)) << f;
  }
  auto parsed = Target::Parse(host.Spec());  // what an agent reports
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->IsHostCpu());
  // -mattr still decides what it names.
  auto told = Target::Parse(host.Spec() + " -mattr=-avx2,+amx-tile");
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_TRUE(told->IsHostCpu());
  EXPECT_FALSE(told->HasFeature("avx2"));
  EXPECT_TRUE(told->HasFeature("amx-tile"));
  EXPECT_EQ(told->HasFeature("fma"), has.lookup("fma"));
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

  test_util::LoadedModule module(*so, "kiln_codegen_test_module");
  ASSERT_NE(module.entry, nullptr);
  auto entry = module.entry;
  EXPECT_NE(dlsym(module.handle, "k_relu"), nullptr);  // kernels are exported too

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
