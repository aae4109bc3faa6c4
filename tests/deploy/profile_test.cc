// The kernel profile a module's entry point feeds (deploy/profile.h):
// nothing is recorded unless started, calls accumulate per index with their
// label, and a stop returns them in call order.
#include "deploy/profile.h"

#include <gtest/gtest.h>

#include <chrono>

namespace kiln::deploy {
namespace {

void Call(int32_t index, const char* label) {
  kiln_kernel_begin(index, label);
  // A kernel that runs for 2 ms.
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) {
  }
  kiln_kernel_end(index);
}

TEST(KernelProfile, RecordsOnlyBetweenStartAndStop) {
  Call(0, "before");
  StartKernelProfile();
  for (int run = 0; run < 3; ++run) {
    Call(0, "k0_conv2d conv2d-aaaa");
    Call(2, "k2_dense dense-bbbb");
  }
  std::vector<KernelTime> got = StopKernelProfile();
  Call(0, "after");
  ASSERT_EQ(got.size(), 2u);  // call 1 never ran
  EXPECT_EQ(got[0].call, 0);
  EXPECT_EQ(got[0].label, "k0_conv2d conv2d-aaaa");
  EXPECT_EQ(got[0].runs, 3);
  EXPECT_GE(got[0].total_ms, 6.0);
  EXPECT_EQ(got[1].call, 2);
  EXPECT_EQ(got[1].label, "k2_dense dense-bbbb");
  EXPECT_EQ(got[1].runs, 3);
  // A new profile starts empty; the stopped one recorded nothing since.
  StartKernelProfile();
  EXPECT_TRUE(StopKernelProfile().empty());
}

}  // namespace
}  // namespace kiln::deploy
