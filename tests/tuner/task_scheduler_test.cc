#include "tuner/task_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace kiln::tuner {
namespace {

// A synthetic task: its best cost after t trials.
using Curve = std::function<double(int)>;

Curve Decaying(double start, double floor, double tau) {
  return [=](int t) { return floor + (start - floor) * std::exp(-t / tau); };
}

// Runs the scheduler for `total` trials in batches of `batch`; returns the
// trials each task got.
std::vector<int> Simulate(const std::vector<double>& weights, const std::vector<Curve>& curves,
                          int total, int batch = 8) {
  TaskScheduler s(weights);
  std::vector<int> trials(curves.size(), 0);
  for (int done = 0; done < total; done += batch) {
    auto next = s.Next();
    EXPECT_TRUE(next.has_value());
    if (!next) break;
    trials[*next] += batch;
    s.Record(*next, trials[*next], curves[*next](trials[*next]));
  }
  return trials;
}

TEST(TaskSchedulerTest, WarmUpVisitsEveryTaskOnceInOrder) {
  TaskScheduler s({1, 1, 1});
  for (size_t i = 0; i < 3; ++i) {
    auto next = s.Next();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(*next, i);
    s.Record(i, 8, 1e-3);
  }
}

TEST(TaskSchedulerTest, HeavyImprovingTaskGetsMostTrials) {
  // Task 0 costs 10 ms and keeps improving; task 1 is 1 ms and flat; task 2
  // is 1 ms but appears 10 times in the model and improves like task 0.
  std::vector<Curve> curves = {Decaying(10e-3, 2e-3, 100), [](int) { return 1e-3; },
                               Decaying(1e-3, 0.2e-3, 100)};
  auto trials = Simulate({1, 1, 10}, curves, 800);
  EXPECT_GT(trials[0], trials[1] * 3) << trials[0] << " vs " << trials[1];
  EXPECT_GT(trials[2], trials[1] * 3) << trials[2] << " vs " << trials[1];
  EXPECT_GE(trials[1], 8);  // the warm-up
  EXPECT_EQ(trials[0] + trials[1] + trials[2], 800);
}

TEST(TaskSchedulerTest, ConvergedTaskYieldsToOneStillImproving) {
  // Both start at 5 ms; task 0 converges within ~16 trials, task 1 slowly.
  std::vector<Curve> curves = {Decaying(5e-3, 4e-3, 4), Decaying(5e-3, 1e-3, 300)};
  auto trials = Simulate({1, 1}, curves, 600);
  EXPECT_GT(trials[1], 2 * trials[0]) << trials[0] << " vs " << trials[1];
}

TEST(TaskSchedulerTest, RetiredTasksGetNothingAndTheEndIsNullopt) {
  TaskScheduler s({1, 1});
  s.Record(0, 8, 1e-3);
  s.Record(1, 8, 1e-3);
  s.Retire(0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.Next(), std::optional<size_t>(1));
  s.Retire(1);
  EXPECT_FALSE(s.Next().has_value());
}

TEST(TaskSchedulerTest, TrialsInFlightCountAsSpent) {
  TaskScheduler s({1, 1});
  s.Record(0, 8, 4e-3);  // 4x the gain of task 1
  s.Record(1, 8, 1e-3);
  EXPECT_EQ(s.Next(), std::optional<size_t>(0));
  // One batch of task 0 in flight: still task 0; five: task 1.
  EXPECT_EQ(s.Next({8, 0}), std::optional<size_t>(0));
  EXPECT_EQ(s.Next({40, 0}), std::optional<size_t>(1));
  // In warm-up, a task with a batch in flight lets the others go first.
  TaskScheduler w({1, 1});
  EXPECT_EQ(w.Next({8, 0}), std::optional<size_t>(1));
}

TEST(TaskSchedulerTest, TaskWithoutAResultKeepsPriority) {
  TaskScheduler s({1, 1});
  s.Record(0, 8, 1e-3);
  s.Record(1, 8, 0);  // every candidate failed so far
  EXPECT_TRUE(std::isinf(s.Gain(1)));
  EXPECT_EQ(s.Next(), std::optional<size_t>(1));
}

}  // namespace
}  // namespace kiln::tuner
