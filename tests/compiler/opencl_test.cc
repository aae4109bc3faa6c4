#include "compiler/codegen/opencl.h"

#include <gtest/gtest.h>

namespace kiln::compiler::codegen {
namespace {

TEST(OpenClDevices, DescribesDevicesInOneLine) {
  std::vector<OpenClDevice> devices = {
      {"Portable Computing Language", "cpu-x86-64", "cpu", 2, 1 << 30},
      {"NVIDIA CUDA", "H100", "gpu", 132, 80LL << 30}};
  EXPECT_EQ(DescribeOpenClDevices(devices),
            "OpenCL: Portable Computing Language/cpu-x86-64 (cpu, 2 CUs), NVIDIA CUDA/H100 (gpu, "
            "132 CUs)");
  EXPECT_EQ(DescribeOpenClDevices({}), "");
}

#ifdef KILN_TEST_EXPECT_OPENCL
// scripts/install-deps installs PoCL, so a kiln built with OpenCL finds at
// least its CPU device.
TEST(OpenClDevices, FindsThePoclCpuDevice) {
  std::vector<OpenClDevice> devices = ListOpenClDevices();
  ASSERT_FALSE(devices.empty()) << "no OpenCL device: is pocl-opencl-icd installed?";
  EXPECT_FALSE(devices[0].name.empty());
  EXPECT_GT(devices[0].compute_units, 0);
  EXPECT_GT(devices[0].max_work_group_size, 0);
}
#endif

TEST(OpenClLaunch, ThreadsPerBlockWithinTheDevicesLimits) {
  OpenClDevice d;
  d.name = "small";
  d.max_work_group_size = 256;
  d.max_work_item_sizes[0] = 256;
  d.max_work_item_sizes[1] = 64;
  d.max_work_item_sizes[2] = 1;
  LaunchDims ok;
  ok.grid[0] = 1000;
  ok.block[0] = 16;
  ok.block[1] = 16;
  EXPECT_TRUE(CheckLaunch(ok, d).ok());
  LaunchDims too_many = ok;
  too_many.block[1] = 32;  // 512 threads
  EXPECT_EQ(CheckLaunch(too_many, d).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(CheckLaunch(too_many, d).message().find("512 threads per block > the device's 256"),
            std::string::npos);
  LaunchDims deep = ok;
  deep.block[0] = 1;
  deep.block[2] = 2;  // z allows 1
  EXPECT_EQ(CheckLaunch(deep, d).code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpenClKernel, ABuildErrorCarriesTheDriversLog) {
  auto kernel =
      OpenClKernel::Build("", "__kernel void broken(__global float* x) { x[0] = y; }", "broken");
  if (!kernel.ok() && (kernel.status().code() == absl::StatusCode::kNotFound ||
                       kernel.status().code() == absl::StatusCode::kUnimplemented)) {
    GTEST_SKIP() << kernel.status();
  }
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(kernel.status().message().find("failed"), std::string::npos) << kernel.status();
}

}  // namespace
}  // namespace kiln::compiler::codegen
