// On an NVIDIA GPU (ctest label gpu; every test skips, visibly, without
// one): GPU-template kernels compiled by NVRTC for the device, run by the
// runtime's device code and checked against the reference (through
// compiler::Measure, as the agent measures); and a whole model compiled for the device's target and
// run by the runtime (`kiln-run --device cuda:0`'s path) against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/kernel.h"
#include "compiler/measure.h"
#include "compiler/model.h"
#include "compiler/ops/lower_workload.h"
#include "deploy/device.h"
#include "deploy/runtime.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

#define SKIP_WITHOUT_CUDA()              \
  if (deploy::ListCudaDevices().empty()) \
  GTEST_SKIP() << "no CUDA device (this test needs an NVIDIA GPU and its driver)"

Target DeviceTarget() {
  return *Target::Parse("cuda -arch=" + deploy::ListCudaDevices().at(0).arch);
}

// Each template's default kernel, compiled by NVRTC for the device as a
// one-kernel device module and run by the runtime's device code
// (compiler::Measure's GPU path), matches the reference (Measure verifies
// before it times).
TEST(CudaGpu, TemplateKernelsMatchTheReference) {
  SKIP_WITHOUT_CUDA();
  const Target t = DeviceTarget();
  for (const Workload& w : {test_util::DenseReluWorkload(), test_util::EltwiseReluWorkload(),
                            test_util::Conv2dBiasAddReluWorkload()}) {
    SCOPED_TRACE(w.op);
    auto c = DefaultConfig(w, t);
    ASSERT_TRUE(c.ok());
    MeasurePolicy policy;
    policy.repeat = 1;
    Measurement m = Measure(w, *c, policy, t, 5);
    EXPECT_EQ(m.error, MeasureError::kNone) << m.message;
  }
}

TEST(CudaGpu, MeasureTimesWithCudaEvents) {
  SKIP_WITHOUT_CUDA();
  const Target t = DeviceTarget();
  const Workload w = test_util::DenseReluWorkload();
  MeasurePolicy policy;
  policy.repeat = 3;
  Measurement m = Measure(w, *DefaultConfig(w, t), policy, t);
  ASSERT_EQ(m.error, MeasureError::kNone) << m.message;
  ASSERT_EQ(m.costs_s.size(), 3u);
  for (double c : m.costs_s) EXPECT_GT(c, 0);
}

TEST(CudaGpu, AWholeModelRunsOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  ImportOptions gpu_import;
  gpu_import.plan_layouts = false;
  const std::string path = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";
  auto gpu_model = Model::FromOnnxFile(path, gpu_import);
  auto cpu_model = Model::FromOnnxFile(path);
  ASSERT_TRUE(gpu_model.ok() && cpu_model.ok());
  auto gpu_art = CompileModel(*gpu_model, DeviceTarget(), nullptr, {}, nullptr);
  ASSERT_TRUE(gpu_art.ok()) << gpu_art.status();
  auto cpu_art = CompileModel(*cpu_model, Target::Host(), nullptr, {}, nullptr);
  ASSERT_TRUE(cpu_art.ok()) << cpu_art.status();
  deploy::LoadOptions on_gpu;
  on_gpu.device = "cuda:0";
  auto g = deploy::Module::LoadBytes(*gpu_art, on_gpu);
  ASSERT_TRUE(g.ok()) << g.status();
  auto c = deploy::Module::LoadBytes(*cpu_art);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> x(3 * 32 * 32), yg(10), yc(10);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : x) v = u(rng);
  ASSERT_TRUE((*g)->Run({x.data()}, {yg.data()}).ok());
  ASSERT_TRUE((*c)->Run({x.data()}, {yc.data()}).ok());
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(yg[i], yc[i], 1e-3 * (1 + std::fabs(yc[i]))) << i;
}

}  // namespace
}  // namespace kiln::compiler
