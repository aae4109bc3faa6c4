// The GPU templates of conv2d and pool2d (Target "opencl"; the generic
// operators' run in the model suite, tests/models), each with its default and seeded random
// configs, built and run on the OpenCL device (PoCL without a GPU) against the reference.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "compiler/codegen/c_source.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "tests/compiler/kernel_check.h"
#include "tests/compiler/opencl_check.h"

namespace kiln::compiler {
namespace {

Target Gpu() {
  auto t = Target::Parse("opencl");
  KILN_CHECK(t.ok());
  return *t;
}

// The default config and `n` seeded random valid ones.
std::vector<Config> Configs(const Workload& w, int n, uint32_t seed) {
  std::vector<Config> out;
  auto def = DefaultConfig(w, Gpu());
  EXPECT_TRUE(def.ok()) << def.status();
  if (!def.ok()) return out;
  out.push_back(*def);
  auto knobs = KnobsOf(w, Gpu());
  std::mt19937 rng(seed);
  for (int attempt = 0; attempt < 200 && static_cast<int>(out.size()) < n + 1; ++attempt) {
    Config c;
    for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
    if (ValidateConfig(w, Gpu(), c).ok()) out.push_back(c);
  }
  return out;
}

void ExpectConfigsMatch(const Workload& w, int n, uint32_t seed) {
  for (const Config& c : Configs(w, n, seed)) {
    test_util::ExpectGpuKernelMatchesReference(w, c, Gpu(), seed);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  }
}

Workload Conv(int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride, int64_t pad,
              int64_t groups) {
  Workload w;
  w.op = Op::kConv2d;
  const int64_t O = (H + 2 * pad - R) / stride + 1;
  w.ints = {{"N", {1}},
            {"C", {C}},
            {"H", {H}},
            {"W", {H}},
            {"K", {K}},
            {"R", {R}},
            {"S", {R}},
            {"stride", {stride, stride}},
            {"pad", {pad, pad, pad, pad}},
            {"dilation", {1, 1}},
            {"groups", {groups}},
            {"bias", {1}},
            {"OH", {O}},
            {"OW", {O}}};
  w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
  return w;
}

TEST(GpuTemplates, Conv2dMatchesTheReference) {
  ExpectConfigsMatch(test_util::Conv2dBiasAddReluWorkload(), 3, 1);  // + residual add
  ExpectConfigsMatch(Conv(8, 11, 12, 3, 2, 1, 1), 3, 2);             // stride 2
  ExpectConfigsMatch(Conv(6, 7, 8, 1, 1, 0, 1), 2, 3);               // 1x1, unpadded
  ExpectConfigsMatch(Conv(8, 9, 8, 3, 1, 1, 8), 2, 4);               // depthwise
  ExpectConfigsMatch(Conv(3, 15, 4, 7, 2, 3, 1), 2, 5);              // a 7x7 stride-2 stem
}

TEST(GpuTemplates, Conv2dRefusesChannelBlockedLayouts) {
  Workload w = Conv(16, 8, 16, 3, 1, 1, 1);
  w.ints["in_block"] = {16};
  auto c = DefaultConfig(w, Gpu());
  ASSERT_TRUE(c.ok());
  absl::Status st = ValidateConfig(w, Gpu(), *c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("channel-blocked"), std::string::npos) << st;
}

TEST(GpuTemplates, PoolMatchesTheReference) {
  for (int64_t kind : {0, 1}) {
    Workload w;
    w.op = Op::kPool2d;
    w.ints = {{"N", {2}},           {"C", {3}},         {"H", {9}},
              {"W", {9}},           {"OH", {5}},        {"OW", {5}},
              {"kernel", {3, 3}},   {"stride", {2, 2}}, {"pad", {1, 1, 1, 1}},
              {"dilation", {1, 1}}, {"kind", {kind}},   {"count_include_pad", {0}}};
    SCOPED_TRACE(kind);
    ExpectConfigsMatch(w, 2, 6 + static_cast<uint32_t>(kind));
  }
}

// dense with stage=1: each k step's A and B tiles copied into shared memory
// by the block's threads between barriers (__local / __shared__), for tiles
// that divide the matrices and tiles that do not, plain and transposed.
TEST(GpuTemplates, DenseStagesTilesThroughSharedMemory) {
  Workload transposed = test_util::DenseReluWorkload();  // B is [N, K]
  Workload plain = transposed;
  plain.ints["transB"] = {0};
  Workload batched = plain;
  batched.ints["batch"] = {2};
  batched.ints["batch_a"] = {1};
  batched.ints["batch_b"] = {1};
  std::mt19937 rng(12);
  for (const Workload& w : {transposed, plain, batched}) {
    auto knobs = KnobsOf(w, Gpu());
    ASSERT_TRUE(knobs.ok());
    int tried = 0;
    for (int attempt = 0; attempt < 200 && tried < 3; ++attempt) {
      Config c;
      for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
      c["stage"] = 1;
      if (!ValidateConfig(w, Gpu(), c).ok() || c["block_m"] * c["block_n"] < 4) continue;
      ++tried;
      SCOPED_TRACE(CanonicalConfig(c));
      auto func = LowerWorkload(w, c, Gpu(), "kiln_kernel", {});
      ASSERT_TRUE(func.ok()) << func.status();
      auto dims = codegen::LaunchDimsOf(*func);
      ASSERT_TRUE(dims.ok());
      // Both tiles, whole: the block's rows (columns) by tile_k.
      EXPECT_EQ(dims->shared_bytes,
                4 * c["tile_k"] * (c["block_m"] * c["thread_m"] + c["block_n"] * c["thread_n"]));
      auto cl = codegen::EmitCSource(*func, codegen::SourceDialect::kOpenCL);
      auto cu = codegen::EmitCSource(*func, codegen::SourceDialect::kCuda);
      ASSERT_TRUE(cl.ok() && cu.ok());
      EXPECT_NE(cl->find("__local float"), std::string::npos) << *cl;
      EXPECT_NE(cl->find("barrier(CLK_LOCAL_MEM_FENCE);"), std::string::npos);
      EXPECT_NE(cu->find("__shared__ float"), std::string::npos);
      EXPECT_NE(cu->find("__syncthreads();"), std::string::npos);
      test_util::ExpectGpuKernelMatchesReference(w, c, Gpu(), 21);
      if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
    }
    EXPECT_EQ(tried, 3);
  }
}

}  // namespace
}  // namespace kiln::compiler
