// The per-thread kernel workspace: aligned, nested in LIFO order, reused,
// larger than a chunk when asked, distinct per thread, misuse caught.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "deploy/parallel.h"

namespace {

bool Aligned(void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(Workspace, NestedBlocksAreAlignedDisjointAndReused) {
  char* a = static_cast<char*>(kiln_workspace_alloc(100));
  char* b = static_cast<char*>(kiln_workspace_alloc(1000));
  ASSERT_TRUE(a && b && Aligned(a) && Aligned(b));
  EXPECT_GE(b, a + 100);  // disjoint
  std::memset(a, 1, 100);
  std::memset(b, 2, 1000);
  EXPECT_EQ(a[99], 1);
  kiln_workspace_free(b);
  char* c = static_cast<char*>(kiln_workspace_alloc(1000));
  EXPECT_EQ(c, b);  // the freed block is reused, no new memory
  kiln_workspace_free(c);
  kiln_workspace_free(a);
  EXPECT_EQ(kiln_workspace_alloc(100), a);
  kiln_workspace_free(a);
}

TEST(Workspace, BlocksLargerThanAChunkAndPastAFullChunk) {
  const int64_t big = int64_t{9} << 20;  // above the 4 MiB chunk
  char* x = static_cast<char*>(kiln_workspace_alloc(3 << 20));
  char* y = static_cast<char*>(kiln_workspace_alloc(big));  // does not fit beside x
  ASSERT_TRUE(x && y && Aligned(y));
  std::memset(y, 3, static_cast<size_t>(big));
  std::memset(x, 4, 3 << 20);
  EXPECT_EQ(y[big - 1], 3);
  kiln_workspace_free(y);
  kiln_workspace_free(x);
}

TEST(Workspace, ThreadsHaveTheirOwnArena) {
  void* mine = kiln_workspace_alloc(64);
  void* theirs = nullptr;
  std::thread t([&] {
    theirs = kiln_workspace_alloc(64);
    kiln_workspace_free(theirs);
  });
  t.join();
  EXPECT_NE(mine, theirs);
  kiln_workspace_free(mine);
}

TEST(WorkspaceDeathTest, FreeOutOfOrderAborts) {
  EXPECT_DEATH(
      {
        void* a = kiln_workspace_alloc(64);
        kiln_workspace_alloc(64);
        kiln_workspace_free(a);
      },
      "out of order");
}

}  // namespace
