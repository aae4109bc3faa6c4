#include "tuner/task_scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kiln::tuner {
namespace {

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

TEST(AllocateTrialsTest, ProportionalWithMinimum) {
  // 100 trials, 10 each first, the other 70 split 1:2:4 -> 10, 20, 40.
  auto a = AllocateTrials({1, 2, 4}, 100, 10);
  EXPECT_EQ(a, (std::vector<int>{20, 30, 50}));
}

TEST(AllocateTrialsTest, SumsExactlyWithRoundingRemainders) {
  auto a = AllocateTrials({1, 1, 1}, 100, 0);
  EXPECT_EQ(Sum(a), 100);
  EXPECT_EQ(a, (std::vector<int>{34, 33, 33}));
  for (int total : {0, 1, 7, 99, 1000, 12345}) {
    auto b = AllocateTrials({3.3e9, 1.1e6, 7.0e8, 0, 42}, total, 2);
    EXPECT_EQ(Sum(b), total) << total;
    if (total >= 10) {
      for (int x : b) EXPECT_GE(x, 2);
    }
  }
}

TEST(AllocateTrialsTest, TooSmallBudgetGoesToHeaviestFirst) {
  auto a = AllocateTrials({1, 5, 3}, 7, 3);
  EXPECT_EQ(a, (std::vector<int>{1, 3, 3}));
}

TEST(AllocateTrialsTest, ZeroWeightsSplitEvenly) {
  EXPECT_EQ(AllocateTrials({0, 0}, 10, 0), (std::vector<int>{5, 5}));
  EXPECT_TRUE(AllocateTrials({}, 10, 1).empty());
}

}  // namespace
}  // namespace kiln::tuner
