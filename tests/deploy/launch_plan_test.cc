// The launch plan of GPU artifacts (deploy/device.h): what a reader accepts
// and the line it names when it refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/str.h"
#include "deploy/device.h"

namespace kiln::deploy {
namespace {

Manifest TwoBuffers() {
  Manifest m;
  m.workspace_bytes = 4096;
  m.inputs = {{"x", DType::kFloat32, {2, 8}}};   // 64 bytes
  m.outputs = {{"y", DType::kFloat32, {2, 4}}};  // 32 bytes
  return m;
}

TEST(LaunchPlan, ParsesCallsAndTheirBuffers) {
  auto plan = ParseLaunchPlan(
      "kiln-launch 1\n"
      "call k0_dense 3 1 1 64 2 1 i0+0 w+128 s+64\n"
      "future-record ignored\n"
      "call k1_eltwise 1 1 1 32 1 1 s+64 o0+0\n",
      TwoBuffers(), 256);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  const Launch& l = (*plan)[0];
  EXPECT_EQ(l.kernel, "k0_dense");
  EXPECT_EQ(l.grid[0], 3);
  EXPECT_EQ(l.block[0], 64);
  EXPECT_EQ(l.block[1], 2);
  ASSERT_EQ(l.args.size(), 3u);
  EXPECT_EQ(l.args[0].kind, 'i');
  EXPECT_EQ(l.args[1].kind, 'w');
  EXPECT_EQ(l.args[1].offset, 128);
  EXPECT_EQ(l.args[2].kind, 's');
  EXPECT_EQ((*plan)[1].args[1].kind, 'o');
}

TEST(LaunchPlan, RefusesWhatCannotRun) {
  const Manifest m = TwoBuffers();
  struct Case {
    const char* text;
    const char* why;
  };
  for (const Case& c : {
           Case{"kiln-launch 2\ncall k 1 1 1 1 1 1 i0+0\n", "header"},
           Case{"kiln-launch 1\ncall k 1 1 1\n", "3 grid and 3 block"},
           Case{"kiln-launch 1\ncall k 1 1 1 0 1 1 i0+0\n", "out of range"},
           Case{"kiln-launch 1\ncall k 1 1 1 64 64 2 i0+0\n", "more than 4096 threads"},
           Case{"kiln-launch 1\ncall k 1 1 1 1 1 1 i1+0\n", "missing input or output"},
           Case{"kiln-launch 1\ncall k 1 1 1 1 1 1 w+999\n", "past its buffer"},
           Case{"kiln-launch 1\ncall k 1 1 1 1 1 1 q+0\n", "unknown kind"},
           Case{"kiln-launch 1\ncall k 1 1 1 1 1 1 s0\n", "not KIND+OFF"},
           Case{"kiln-launch 1\n", "empty launch plan"},
       }) {
    auto plan = ParseLaunchPlan(c.text, m, 256);
    ASSERT_FALSE(plan.ok()) << c.text;
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(c.why), std::string::npos) << plan.status();
  }
  auto named =
      ParseLaunchPlan("kiln-launch 1\ncall k 1 1 1 1 1 1 w+0\ncall k 1 1 1 1 1 1 x+0\n", m, 256);
  EXPECT_NE(named.status().message().find("launch plan line 3"), std::string::npos)
      << named.status();
}

TEST(ChooseDevice, ByNumberByTheTargetsNameOrTheFirst) {
  Manifest m;
  m.target = "cuda -arch=sm_90 -device=B";
  const std::vector<std::string> ids = {"A", "B"};
  EXPECT_EQ(*ChooseDevice("cuda:0", "cuda", ids, m), 0u);
  EXPECT_EQ(*ChooseDevice("", "cuda", ids, m), 1u);  // the target's -device
  m.target = "cuda -arch=sm_90";
  EXPECT_EQ(*ChooseDevice("", "cuda", ids, m), 0u);
  EXPECT_EQ(TargetOption(m.target, "arch"), "sm_90");
  EXPECT_EQ(TargetOption(m.target, "device"), "");
  auto other = ChooseDevice("opencl:0", "cuda", ids, m);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = ChooseDevice("cuda:2", "cuda", ids, m);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("there are: cuda:0 A, cuda:1 B"), std::string::npos)
      << missing.status();
}

TEST(GpuDevices, DescribedInOneLine) {
  GpuDevice pocl;
  pocl.platform = "Portable Computing Language";
  pocl.name = "cpu-x86-64";
  pocl.type = "cpu";
  pocl.compute_units = 2;
  GpuDevice h100;
  h100.name = "NVIDIA H100";
  h100.arch = "sm_90";
  h100.compute_units = 132;
  h100.global_mem_bytes = 80LL << 30;
  EXPECT_EQ(DescribeOpenClDevices({pocl}),
            "OpenCL: Portable Computing Language/cpu-x86-64 (cpu, 2 CUs)");
  EXPECT_EQ(DescribeCudaDevices({h100}), "CUDA: NVIDIA H100 (sm_90, 132 SMs, 80 GiB)");
  EXPECT_EQ(DescribeOpenClDevices({}), "");
  EXPECT_EQ(DescribeCudaDevices({}), "");
}

// A launch is checked against the device's limits and the kernel's own
// before a program loads (a candidate beyond them fails as a build).
TEST(GpuDevices, ALaunchBeyondTheLimitsIsRefusedByName) {
  GpuDevice d;
  d.name = "small";
  d.max_threads_per_block = 256;
  d.max_block_dims[0] = 256;
  d.max_block_dims[1] = 64;
  d.max_block_dims[2] = 1;
  d.local_mem_bytes = 32 << 10;
  Launch ok;
  ok.kernel = "k0";
  ok.grid[0] = 1000;
  ok.block[0] = 16;
  ok.block[1] = 16;
  EXPECT_TRUE(CheckLaunch(ok, d).ok());
  Launch too_many = ok;
  too_many.block[1] = 32;  // 512 threads
  EXPECT_EQ(CheckLaunch(too_many, d).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(CheckLaunch(too_many, d).message().find("k0: 512 threads per block > the device's 256"),
            std::string::npos)
      << CheckLaunch(too_many, d);
  // The kernel's registers allow fewer than the device: its limit counts.
  EXPECT_NE(CheckLaunch(ok, d, 128).message().find("256 threads per block > the kernel's 128"),
            std::string::npos)
      << CheckLaunch(ok, d, 128);
  Launch deep = ok;
  deep.block[0] = 1;
  deep.block[2] = 2;  // z allows 1
  EXPECT_EQ(CheckLaunch(deep, d).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckLaunch(ok, d, 0, 64 << 10).code(), absl::StatusCode::kInvalidArgument);
  Launch empty = ok;
  empty.grid[1] = 0;
  EXPECT_EQ(CheckLaunch(empty, d).code(), absl::StatusCode::kInvalidArgument);
}

// The runtime's OpenCL program runs a launch plan and times its launches
// by the device's clock, the outputs read back once (how the agent times a
// GPU candidate). Skips without an OpenCL device.
TEST(GpuDevices, AnOpenClProgramTimesItsLaunchesOnTheDevice) {
  if (ListOpenClDevices().empty()) GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd)";
  const std::string source =
      "__kernel void twice(__global uchar* x_base, ulong x_off, __global uchar* y_base, "
      "ulong y_off) {\n"
      "  __global const float* x = (__global const float*)(x_base + x_off);\n"
      "  __global float* y = (__global float*)(y_base + y_off);\n"
      "  int i = get_global_id(0);\n"
      "  if (i < 64) y[i] = 2.0f * x[i];\n"
      "}\n";
  Manifest m;
  m.target = "opencl";
  m.inputs = {{"x", DType::kFloat32, {64}}};
  m.outputs = {{"y", DType::kFloat32, {64}}};
  auto plan = ParseLaunchPlan("kiln-launch 1\ncall twice 2 1 1 32 1 1 i0+0 o0+0\n", m, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto program = LoadOpenClProgram(source, *plan, m, "", "");
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<float> x(64), y(64, -1.f);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  ASSERT_TRUE((*program)->Run({x.data()}, {y.data()}).ok());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 2.f * static_cast<float>(i));
  auto one = (*program)->TimeLaunches(1);
  auto many = (*program)->TimeLaunches(20);
  ASSERT_TRUE(one.ok() && many.ok()) << one.status() << many.status();
  EXPECT_GT(*one, 0);
  EXPECT_GT(*many, 0);
  // A launch the device cannot run does not load.
  GpuDevice d = ListOpenClDevices()[0];
  Launch wide = (*plan)[0];
  wide.block[0] = d.max_threads_per_block * 2;
  EXPECT_EQ(LoadOpenClProgram(source, {wide}, m, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A device is found by the name target specs carry (DeviceId), as the
// agent's candidates name it; a name not there is NOT_FOUND naming those
// that are.
TEST(GpuDevices, FoundByTheirTargetName) {
  auto none = FindGpuDevice(/*cuda=*/false, "no-such-device");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no OpenCL device 'no-such-device'"), std::string::npos)
      << none.status();
  const std::vector<GpuDevice> devices = ListOpenClDevices();
  if (devices.empty()) GTEST_SKIP() << "no OpenCL device (install pocl-opencl-icd)";
  auto last = FindGpuDevice(false, DeviceId(devices.back().name));
  ASSERT_TRUE(last.ok()) << last.status();
  // The first of several devices of one name.
  size_t first = devices.size() - 1;
  while (first > 0 && devices[first - 1].name == devices.back().name) --first;
  EXPECT_EQ(*last, "opencl:" + std::to_string(first));
}

}  // namespace
}  // namespace kiln::deploy
