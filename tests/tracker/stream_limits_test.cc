#include "tracker/stream_limits.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace kiln::tracker {
namespace {

TEST(StreamLimiterTest, PlacesPerUserAndInAllAreFreedWithTheirSlot) {
  FakeClock clock;
  StreamLimiter limiter("WatchJob streams", "--max-watches-per-user", "--max-watches",
                        StreamLimits{2, 3, 0}, &clock);
  std::vector<std::unique_ptr<StreamLimiter::Slot>> held;
  for (int i = 0; i < 2; ++i) {
    auto slot = limiter.Acquire("ana", nullptr);
    ASSERT_TRUE(slot.ok()) << slot.status();
    held.push_back(*std::move(slot));
  }
  auto third = limiter.Acquire("ana", nullptr);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "ana holds 2 open WatchJob streams, the most this tracker allows one user "
            "(kiln-tracker --max-watches-per-user); close one first");
  auto bo = limiter.Acquire("bo", nullptr);
  ASSERT_TRUE(bo.ok());
  auto anon = limiter.Acquire("", nullptr);
  EXPECT_EQ(anon.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(anon.status().message(),
            "the tracker holds 3 open WatchJob streams, the most it allows (kiln-tracker "
            "--max-watches); try again later");
  EXPECT_EQ(limiter.Open(), 3);
  EXPECT_EQ(limiter.OpenOf("ana"), 2);
  held.pop_back();
  EXPECT_EQ(limiter.OpenOf("ana"), 1);
  EXPECT_TRUE(limiter.Acquire("", nullptr).ok());  // freed at once again
  EXPECT_EQ(limiter.Open(), 2);
}

TEST(StreamLimiterTest, IdleStreamsAreCancelledOnceAndTouchKeepsOneAlive) {
  FakeClock clock;
  StreamLimiter limiter("uploads", "--max-uploads-per-user", "--max-uploads",
                        StreamLimits{0, 0, 1000}, &clock);
  int a_cancels = 0, b_cancels = 0;
  auto a = limiter.Acquire("ana", [&] { ++a_cancels; });
  auto b = limiter.Acquire("ana", [&] { ++b_cancels; });
  ASSERT_TRUE(a.ok() && b.ok());
  clock.Advance(1000);
  EXPECT_EQ(limiter.CancelIdle(), 0);  // not past the timeout yet
  (*b)->Touch();
  clock.Advance(1);
  EXPECT_EQ(limiter.CancelIdle(), 1);
  EXPECT_EQ(a_cancels, 1);
  EXPECT_EQ(b_cancels, 0);
  EXPECT_TRUE((*a)->idle_cancelled());
  EXPECT_FALSE((*b)->idle_cancelled());
  clock.Advance(5000);
  EXPECT_EQ(limiter.CancelIdle(), 1);  // b's turn; a is not cancelled twice
  EXPECT_EQ(a_cancels, 1);
  EXPECT_EQ(b_cancels, 1);
}

}  // namespace
}  // namespace kiln::tracker
