// The launch plan of GPU artifacts (deploy/device.h): what a reader accepts
// and the line it names when it refuses.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kiln::deploy
