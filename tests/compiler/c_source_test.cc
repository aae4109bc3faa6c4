// The C source emitter (compiler/codegen/c_source.h): kernels lowered from
// real workloads, emitted as OpenCL C, built by the OpenCL driver the ICD
// loader finds (PoCL on a machine without a GPU), run, and compared with the
// reference implementation; the CUDA dialect's text and its limits.
#include "compiler/codegen/c_source.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/str.h"
#include "compiler/kernel.h"
#include "compiler/lower/lower.h"
#include "compiler/measure.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "compiler/te/schedule.h"
#include "tests/compiler/kernel_check.h"
#include "tests/compiler/opencl_check.h"

namespace kiln::compiler {
namespace {

using codegen::EmitCSource;
using codegen::SourceDialect;
using test_util::RunOpenCl;

Workload Eltwise() { return test_util::EltwiseReluWorkload(); }
Workload Dense() { return test_util::DenseReluWorkload(); }
Workload Conv2d() { return test_util::Conv2dBiasAddReluWorkload(); }

// Lowered for the C source emitter: vectorized loops stay loops.
LowerOptions ForC() {
  LowerOptions o;
  o.vectorize = false;
  return o;
}

absl::StatusOr<ir::PrimFunc> Lowered(const Workload& w, const LowerOptions& options = ForC()) {
  auto config = DefaultConfig(w, Target::Host());
  if (!config.ok()) return config.status();
  return LowerWorkload(w, *config, Target::Host(), "kiln_kernel", options);
}

TEST(CSource, OpenClTextHasOneKernelWithGlobalBuffers) {
  auto func = Lowered(Dense());
  ASSERT_TRUE(func.ok()) << func.status();
  auto src = EmitCSource(*func, SourceDialect::kOpenCL);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->find("__kernel void kiln_kernel(__global float* restrict"), std::string::npos)
      << *src;
}

TEST(CSource, CudaTextOfAScalarKernelAndItsLimits) {
  using namespace kiln::ir;  // NOLINT
  Buffer in("In", DataType::Float32(), {IntImm(64)});
  Buffer out("Out", DataType::Float32(), {IntImm(64)});
  Var i("i");
  PrimFunc scalar{
      "twice",
      {in, out},
      For(i, 0, 64, ForKind::kSerial,
          Store(out, Call(DataType::Float32(), Intrinsic::kExp, {Load(in, {i})}) * FloatImm(2.0),
                {i}))};
  auto src = EmitCSource(scalar, SourceDialect::kCuda);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->find("extern \"C\" __global__ void twice(float* __restrict__ In"),
            std::string::npos)
      << *src;
  EXPECT_NE(src->find("expf("), std::string::npos) << *src;
  // A kernel lowered with vectors (the CPU's) needs what CUDA C lacks: said,
  // not miscompiled; lowered for C it is scalar.
  auto func = Lowered(Dense(), LowerOptions{});
  ASSERT_TRUE(func.ok()) << func.status();
  auto vec = EmitCSource(*func, SourceDialect::kCuda);
  ASSERT_FALSE(vec.ok());
  EXPECT_EQ(vec.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(vec.status().message().find("vector"), std::string::npos) << vec.status();
  auto scalar_dense = Lowered(Dense());
  ASSERT_TRUE(scalar_dense.ok()) << scalar_dense.status();
  EXPECT_TRUE(EmitCSource(*scalar_dense, SourceDialect::kCuda).ok());
}

// The workload's kernel with `config` (default: the template's default) as
// OpenCL C against the reference.
void ExpectOpenClMatchesReference(const Workload& w, std::optional<Config> chosen = std::nullopt) {
  absl::StatusOr<Config> config =
      chosen.has_value() ? absl::StatusOr<Config>(*chosen) : DefaultConfig(w, Target::Host());
  ASSERT_TRUE(config.ok()) << config.status();
  SCOPED_TRACE(CanonicalConfig(*config));
  auto func = LowerWorkload(w, *config, Target::Host(), "kiln_kernel", ForC());
  ASSERT_TRUE(func.ok()) << func.status();
  auto src = EmitCSource(*func, SourceDialect::kOpenCL);
  ASSERT_TRUE(src.ok()) << src.status();
  // The buffers, packed as the kernel takes them (the JIT kernel packs).
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  auto jit = BuildJit(w, *config, Target::Host());
  ASSERT_TRUE(jit.ok()) << jit.status();
  KernelBuffers b = MakeKernelBuffers(*sig, 7, 12345.f);
  ASSERT_TRUE(PackKernelInputs(**jit, b).ok());
  ASSERT_EQ(b.args.size(), func->params.size());
  std::vector<size_t> sizes;
  for (const ir::Buffer& p : func->params) {
    int64_t n = 1;
    for (const ir::Expr& d : p->shape) {
      const auto* imm = d.as<ir::IntImmNode>();
      ASSERT_NE(imm, nullptr) << p->name;
      n *= imm->value;
    }
    sizes.push_back(static_cast<size_t>(n) * static_cast<size_t>(p->dtype.bytes()));
  }
  ASSERT_EQ(sizes.back(), b.output.size());
  test_util::ExpectOpenClRunMatchesReference(w, *func, b.args, sizes, b);
}

TEST(CSourceOpenCl, EltwiseReluMatchesReference) { ExpectOpenClMatchesReference(Eltwise()); }
TEST(CSourceOpenCl, DenseMatchesReference) { ExpectOpenClMatchesReference(Dense()); }
TEST(CSourceOpenCl, Conv2dWithBiasAndAddMatchesReference) {
  ExpectOpenClMatchesReference(Conv2d());
}

// Random valid configs (seeded): tiles that do not divide, partitioned
// tails, packed layouts.
TEST(CSourceOpenCl, RandomConfigsMatchTheReference) {
  std::mt19937 rng(9);
  for (const Workload& w : {Dense(), Conv2d()}) {
    auto knobs = KnobsOf(w, Target::Host());
    ASSERT_TRUE(knobs.ok()) << knobs.status();
    int tried = 0;
    for (int attempt = 0; attempt < 200 && tried < 3; ++attempt) {
      Config c;
      for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
      if (!ValidateConfig(w, Target::Host(), c).ok()) continue;
      ++tried;
      ExpectOpenClMatchesReference(w, c);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
    }
    EXPECT_EQ(tried, 3) << w.op;
  }
}

// The GPU templates (Target "opencl"), built and run on the OpenCL device
// over the launch their bindings ask for, against the reference: dense with
// the default and random configs (plain, with a bias, batched), eltwise with
// several thread counts.
TEST(CSourceOpenCl, GpuTemplatesMatchTheReference) {
  auto gpu = Target::Parse("opencl");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->Spec(), "opencl");
  Workload biased = Dense();
  biased.ints["bias"] = {1};
  biased.ints["bias_shape"] = {1, 24};
  Workload batched = Dense();
  batched.ints["batch"] = {3};
  batched.ints["batch_a"] = {1};
  batched.ints["batch_b"] = {1};
  std::mt19937 rng(5);
  for (const Workload& w : {Dense(), biased, batched}) {
    auto knobs = KnobsOf(w, *gpu);
    ASSERT_TRUE(knobs.ok()) << knobs.status();
    std::vector<Config> configs;
    auto def = DefaultConfig(w, *gpu);
    ASSERT_TRUE(def.ok()) << def.status();
    configs.push_back(*def);
    for (int attempt = 0; attempt < 100 && configs.size() < 4; ++attempt) {
      Config c;
      for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
      if (ValidateConfig(w, *gpu, c).ok()) configs.push_back(c);
    }
    for (const Config& c : configs) {
      auto func = LowerWorkload(w, c, *gpu, "kiln_kernel", {});
      ASSERT_TRUE(func.ok()) << func.status();
      auto dims = codegen::LaunchDimsOf(*func);
      ASSERT_TRUE(dims.ok()) << dims.status();
      EXPECT_EQ(dims->block[0], c.at("block_n"));
      EXPECT_EQ(dims->block[1], c.at("block_m"));
      test_util::ExpectGpuKernelMatchesReference(w, c, *gpu);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
    }
  }
  // eltwise on a GPU: one element per thread, every thread count.
  for (int64_t threads : {32, 64, 128}) {
    Config c = {{"threads", threads}};
    SCOPED_TRACE(threads);
    const Workload w = Eltwise();
    ASSERT_TRUE(ValidateConfig(w, *gpu, c).ok());
    auto func = LowerWorkload(w, c, *gpu, "kiln_kernel", {});
    ASSERT_TRUE(func.ok()) << func.status();
    auto dims = codegen::LaunchDimsOf(*func);
    ASSERT_TRUE(dims.ok()) << dims.status();
    EXPECT_EQ(dims->block[0], threads);
    EXPECT_EQ(dims->grid[0], (210 + threads - 1) / threads);
    auto src = EmitCSource(*func, SourceDialect::kOpenCL);
    ASSERT_TRUE(src.ok()) << src.status();
    auto sig = w.Signature();
    KernelBuffers b = MakeKernelBuffers(*sig, 13, 12345.f);
    const std::string failure = RunOpenCl(*func, b.args, b.ArgBytes());
    SKIP_WITHOUT_OPENCL(failure);
    ASSERT_EQ(failure, "") << *src;
    std::vector<uint8_t> want(b.output.size());
    ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());
    std::string detail;
    EXPECT_TRUE(OutputsMatch(b.output_dtype, b.output.data(), want.data(), b.OutputSize(), 1e-5,
                             1e-5, &detail))
        << detail;
  }
}

// compiler::Measure on an OpenCL target: a one-kernel device module built
// by the device's driver and run by the runtime's device code, verified
// against the reference, timed by the device's clock.
TEST(CSourceOpenCl, MeasureOnAnOpenClTarget) {
  if (deploy::ListOpenClDevices().empty()) GTEST_SKIP() << "no OpenCL device";
  auto gpu = Target::Parse("opencl");
  ASSERT_TRUE(gpu.ok());
  auto config = DefaultConfig(Dense(), *gpu);
  ASSERT_TRUE(config.ok()) << config.status();
  MeasurePolicy policy;
  policy.repeat = 2;
  policy.min_repeat_ms = 1;
  Measurement m = Measure(Dense(), *config, policy, *gpu);
  ASSERT_EQ(m.error, MeasureError::kNone) << m.message;
  ASSERT_EQ(m.costs_s.size(), 2u);
  for (double c : m.costs_s) EXPECT_GT(c, 0);
  // The device by its name, as an agent's target names it.
  const std::string id = kiln::DeviceId(deploy::ListOpenClDevices()[0].name);
  auto named = Target::Parse("opencl -device=" + id);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(Measure(Dense(), *config, policy, *named).error, MeasureError::kNone);
  auto missing = Target::Parse("opencl -device=no-such-board");
  ASSERT_TRUE(missing.ok());
  Measurement none = Measure(Dense(), *config, policy, *missing);
  EXPECT_EQ(none.error, MeasureError::kCompile);
  EXPECT_NE(none.message.find("no OpenCL device 'no-such-board'"), std::string::npos)
      << none.message;
  Config too_many = *config;
  too_many["block_m"] = 32;
  too_many["block_n"] = 64;  // 2048 threads per block
  EXPECT_EQ(Measure(Dense(), too_many, policy, *gpu).error, MeasureError::kInvalidConfig);
}

// A matrix product scheduled for a GPU by hand: 8x16 tiles, the tile
// indices bound to work-groups and the elements of a tile to work-items (not
// dividing the matrix: the last tiles are guarded).
TEST(CSourceOpenCl, ThreadBoundMatMulRunsOnAGridOfWorkItems) {
  const int64_t M = 37, N = 45, K = 19;
  te::Tensor A = te::Placeholder("A", {M, K});
  te::Tensor B = te::Placeholder("B", {K, N});
  ir::IterRange k = te::ReduceAxis(K, "k");
  te::Tensor C = te::Compute("C", {M, N}, [&](const std::vector<ir::Var>& i) {
    return te::Sum(A({i[0], k.var}) * B({k.var, i[1]}), {k});
  });
  te::Schedule s({C});
  auto [io, ii] = s.Split(C, s.Axis(C, 0), 8);
  auto [jo, ji] = s.Split(C, s.Axis(C, 1), 16);
  s.Reorder(C, {io, jo, ii, ji, s.ReduceAxisOf(C, 0)});
  ASSERT_TRUE(s.Bind(C, io, ir::ForKind::kBlockY).ok());
  ASSERT_TRUE(s.Bind(C, jo, ir::ForKind::kBlockX).ok());
  ASSERT_TRUE(s.Bind(C, ii, ir::ForKind::kThreadY).ok());
  ASSERT_TRUE(s.Bind(C, ji, ir::ForKind::kThreadX).ok());
  EXPECT_EQ(s.Bind(C, s.ReduceAxisOf(C, 0), ir::ForKind::kThreadZ).code(),
            absl::StatusCode::kInvalidArgument);  // threads would race on the sum
  EXPECT_EQ(s.Bind(C, ji, ir::ForKind::kParallel).code(), absl::StatusCode::kInvalidArgument);
  auto func = lower::Lower(s, {A, B, C}, "kiln_kernel", ForC());
  ASSERT_TRUE(func.ok()) << func.status();
  auto dims = codegen::LaunchDimsOf(*func);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->grid[0], 3);  // ceil(45 / 16)
  EXPECT_EQ(dims->grid[1], 5);  // ceil(37 / 8)
  EXPECT_EQ(dims->block[0], 16);
  EXPECT_EQ(dims->block[1], 8);
  auto src = EmitCSource(*func, SourceDialect::kOpenCL);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_NE(src->find("get_local_id(0)"), std::string::npos) << *src;
  auto cuda = EmitCSource(*func, SourceDialect::kCuda);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_NE(cuda->find("threadIdx.x"), std::string::npos) << *cuda;

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(M * K), b(K * N), c(M * N, 12345.f), want(M * N, 0.f);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t r = 0; r < K; ++r) want[i * N + j] += a[i * K + r] * b[r * N + j];
  const std::string failure =
      RunOpenCl(*func, {a.data(), b.data(), c.data()},
                {a.size() * sizeof(float), b.size() * sizeof(float), c.size() * sizeof(float)});
  SKIP_WITHOUT_OPENCL(failure);
  ASSERT_EQ(failure, "") << *src;
  for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(c[i], want[i], 1e-4) << i;
}

}  // namespace
}  // namespace kiln::compiler
