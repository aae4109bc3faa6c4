// CUDA without a GPU: the target spec, and the kernels of the GPU templates
// emitted as CUDA C and compiled by NVRTC for sm_80 and sm_90 (NVRTC needs
// no GPU; the test skips, saying so, where no CUDA toolkit is installed).
// Running them is tests/gpu (label gpu).
#include "compiler/codegen/cuda.h"

#include <gtest/gtest.h>

#include <random>

#include "compiler/codegen/c_source.h"
#include "compiler/kernel.h"
#include "compiler/measure.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "deploy/device.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

TEST(CudaTarget, SpecRoundTripsAndChecksTheArchitecture) {
  auto t = Target::Parse("cuda -arch=sm_90 -device=NVIDIA_H100_80GB_HBM3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->is_gpu());
  EXPECT_EQ(t->arch, "sm_90");
  EXPECT_EQ(t->Spec(), "cuda -arch=sm_90 -device=NVIDIA_H100_80GB_HBM3");
  EXPECT_EQ(Target::Parse("cuda")->Spec(), "cuda");
  EXPECT_EQ(Target::Parse("cuda -arch=90").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Target::Parse("cuda -mcpu=x").status().code(), absl::StatusCode::kInvalidArgument);
}

// The workload's kernel for `target` as CUDA C, compiled for `arch`.
absl::StatusOr<codegen::CudaBinary> Compile(const Workload& w, const Config& c,
                                            const Target& target, const std::string& arch) {
  auto func = LowerWorkload(w, c, target, "kiln_kernel", {});
  if (!func.ok()) return func.status();
  auto src = codegen::EmitCSource(*func, codegen::SourceDialect::kCuda);
  if (!src.ok()) return src.status();
  return codegen::CompileCuda(*src, arch, /*cubin=*/true);
}

TEST(CudaNvrtc, EveryGpuTemplateCompilesForSm80AndSm90) {
  if (auto v = codegen::NvrtcVersion(); !v.ok()) GTEST_SKIP() << v.status();
  const Target cuda = *Target::Parse("cuda -arch=sm_90");
  Workload pool;
  pool.op = Op::kPool2d;
  pool.ints = {{"N", {1}},           {"C", {4}},         {"H", {8}},
               {"W", {8}},           {"OH", {4}},        {"OW", {4}},
               {"kernel", {2, 2}},   {"stride", {2, 2}}, {"pad", {0, 0, 0, 0}},
               {"dilation", {1, 1}}, {"kind", {0}}};
  std::mt19937 rng(3);
  for (const Workload& w : {test_util::DenseReluWorkload(), test_util::EltwiseReluWorkload(),
                            test_util::Conv2dBiasAddReluWorkload(), pool}) {
    SCOPED_TRACE(w.op);
    auto knobs = KnobsOf(w, cuda);
    ASSERT_TRUE(knobs.ok()) << knobs.status();
    std::vector<Config> configs = {*DefaultConfig(w, cuda)};
    for (int attempt = 0; attempt < 50 && configs.size() < 3; ++attempt) {
      Config c;
      for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
      if (ValidateConfig(w, cuda, c).ok()) configs.push_back(c);
    }
    for (const Config& c : configs) {
      for (const char* arch : {"sm_80", "sm_90"}) {
        auto bin = Compile(w, c, cuda, arch);
        ASSERT_TRUE(bin.ok()) << arch << " " << CanonicalConfig(c) << ": " << bin.status();
        EXPECT_NE(bin->ptx.find(std::string(".target ") + arch), std::string::npos)
            << bin->ptx.substr(0, 400);
        EXPECT_NE(bin->ptx.find(".entry kiln_kernel"), std::string::npos);
        ASSERT_GE(bin->cubin.size(), 4u);
        EXPECT_EQ(bin->cubin.substr(0, 4),
                  "\x7f"
                  "ELF");
      }
    }
  }
}

TEST(CudaNvrtc, ACompileErrorCarriesNvrtcsLog) {
  if (auto v = codegen::NvrtcVersion(); !v.ok()) GTEST_SKIP() << v.status();
  auto bin = codegen::CompileCuda("extern \"C\" __global__ void broken(float* x) { x[0] = y; }",
                                  "sm_90", false);
  ASSERT_FALSE(bin.ok());
  EXPECT_EQ(bin.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bin.status().message().find("\"y\" is undefined"), std::string::npos) << bin.status();
}

// Without a GPU the device list is empty and a candidate cannot be
// measured: a build error that says why (no NVRTC, no driver or no
// device), never a crash or a made-up time.
TEST(CudaDevices, NoDeviceIsSaidNotFaked) {
  if (!deploy::ListCudaDevices().empty()) GTEST_SKIP() << "this machine has a CUDA device";
  const Target t = *Target::Parse("cuda -arch=sm_90");
  const Workload w = test_util::EltwiseReluWorkload();
  Measurement m = Measure(w, *DefaultConfig(w, t), MeasurePolicy{}, t);
  EXPECT_EQ(m.error, MeasureError::kCompile);
  EXPECT_TRUE(m.costs_s.empty());
  EXPECT_TRUE(m.message.find("CUDA") != std::string::npos ||
              m.message.find("NVRTC") != std::string::npos ||
              m.message.find("nvrtc") != std::string::npos)
      << m.message;
}

}  // namespace
}  // namespace kiln::compiler
