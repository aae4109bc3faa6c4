#include "device_agent/opencl_devices.h"

#include <gtest/gtest.h>

namespace kiln::agent {
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
}
#endif

}  // namespace
}  // namespace kiln::agent
