#include "tracker/dispatcher.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace kiln::tracker {
namespace {

MeasureWork Work(const std::string& job, const std::string& key, int candidates,
                 int timeout_ms = 1000) {
  MeasureWork w;
  w.job_id = job;
  w.device_key = key;
  w.workload_key = "dense-0123";
  w.timing.timeout_ms = timeout_ms;
  for (int i = 0; i < candidates; ++i) {
    w.candidates.push_back({i, {{"tile", i + 1}}});
  }
  return w;
}

std::vector<MeasureOutcome> Results(const MeasureWork& w, double cost) {
  std::vector<MeasureOutcome> out;
  for (const auto& c : w.candidates) {
    MeasureOutcome o;
    o.candidate_index = c.candidate_index;
    o.costs_s = {cost};
    out.push_back(o);
  }
  return out;
}

struct Sink {
  int calls = 0;
  std::vector<MeasureOutcome> last;
  BatchCallback Callback() {
    return [this](const MeasureWork&, std::vector<MeasureOutcome> r) {
      calls++;
      last = std::move(r);
    };
  }
};

TEST(DispatcherTest, LeasesInFifoOrderPerKeyWithDeadline) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.slack_ms = 500;
  Dispatcher d(&clock, opts);
  Sink sink;
  std::string b1 = d.Submit(Work("j", "cpu", 2), sink.Callback());
  std::string b2 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  d.Submit(Work("j", "arm", 1), sink.Callback());
  EXPECT_NE(b1, b2);
  EXPECT_EQ(d.QueuedCount("cpu"), 2u);

  auto l1 = d.TryLease("a1", "cpu");
  ASSERT_TRUE(l1.has_value());
  EXPECT_EQ(l1->work.batch_id, b1);
  EXPECT_EQ(l1->deadline_ms, clock.NowMs() + 2 * 1000 + 500);
  auto l2 = d.TryLease("a2", "cpu");
  ASSERT_TRUE(l2.has_value());
  EXPECT_EQ(l2->work.batch_id, b2);
  EXPECT_FALSE(d.TryLease("a3", "cpu").has_value());
  EXPECT_FALSE(d.TryLease("a3", "gpu").has_value());
  EXPECT_EQ(d.InFlight("a1"), 1);
  EXPECT_EQ(d.QueuedCount("arm"), 1u);
}

// What a job's FarmMeasurer asks before it keeps an agent on the tracker's
// machine to one batch at a time: whether another job has work on the key,
// queued or leased.
TEST(DispatcherTest, TellsWhetherOtherJobsHaveWorkOnAKey) {
  FakeClock clock;
  Dispatcher d(&clock, {});
  Sink sink;
  d.Submit(Work("j", "cpu", 1), sink.Callback());
  d.Submit(Work("k", "arm", 1), sink.Callback());
  EXPECT_FALSE(d.OtherJobsHaveWork("cpu", "j"));
  EXPECT_TRUE(d.OtherJobsHaveWork("cpu", "k"));
  d.Submit(Work("k", "cpu", 1), sink.Callback());
  EXPECT_TRUE(d.OtherJobsHaveWork("cpu", "j"));
  // Leased, k's batch still counts; completed, it does not.
  auto first = d.TryLease("a1", "cpu");
  auto second = d.TryLease("a2", "cpu");
  ASSERT_TRUE(first.has_value() && second.has_value());
  const bool k_first = first->work.job_id == "k";
  const auto& k_lease = k_first ? *first : *second;
  EXPECT_TRUE(d.OtherJobsHaveWork("cpu", "j"));
  ASSERT_TRUE(
      d.Complete(k_lease.work.batch_id, k_first ? "a1" : "a2", Results(k_lease.work, 1e-3)));
  EXPECT_FALSE(d.OtherJobsHaveWork("cpu", "j"));
}

TEST(DispatcherTest, FixedLeaseTimeoutOverrides) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.lease_timeout_ms = 750;
  Dispatcher d(&clock, opts);
  EXPECT_EQ(d.LeaseTimeoutMs(Work("j", "cpu", 8)), 750);
}

TEST(DispatcherTest, CompleteAcceptsFirstResultAndIgnoresDuplicates) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  std::string b = d.Submit(Work("j", "cpu", 2), sink.Callback());
  auto lease = d.TryLease("a1", "cpu");
  ASSERT_TRUE(lease.has_value());
  // Another agent cannot complete it.
  EXPECT_FALSE(d.Complete(b, "a2", Results(lease->work, 2.0)));
  EXPECT_TRUE(d.Complete(b, "a1", Results(lease->work, 1.0)));
  EXPECT_EQ(sink.calls, 1);
  ASSERT_EQ(sink.last.size(), 2u);
  EXPECT_EQ(sink.last[0].costs_s, std::vector<double>{1.0});
  EXPECT_EQ(sink.last[0].agent_id, "a1");
  EXPECT_FALSE(d.Complete(b, "a1", Results(lease->work, 3.0)));
  EXPECT_FALSE(d.Complete("batch-unknown", "a1", {}));
  EXPECT_EQ(sink.calls, 1);
  EXPECT_EQ(d.InFlight("a1"), 0);
}

TEST(DispatcherTest, ExpiredLeaseGoesBackToFrontAndLateResultIsIgnored) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.lease_timeout_ms = 1000;
  Dispatcher d(&clock, opts);
  Sink sink;
  std::string b1 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  std::string b2 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  auto l1 = d.TryLease("a1", "cpu");
  ASSERT_TRUE(l1.has_value());
  clock.Advance(999);
  EXPECT_EQ(d.ExpireLeases(), 0);
  clock.Advance(1);
  EXPECT_EQ(d.ExpireLeases(), 1);
  EXPECT_EQ(d.InFlight("a1"), 0);
  // b1 is back in front of b2.
  auto again = d.TryLease("a2", "cpu");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->work.batch_id, b1);
  // The late result of the first lease is ignored; the new holder's counts.
  EXPECT_FALSE(d.Complete(b1, "a1", Results(l1->work, 9.0)));
  EXPECT_TRUE(d.Complete(b1, "a2", Results(again->work, 1.5)));
  EXPECT_EQ(sink.calls, 1);
  EXPECT_EQ(sink.last[0].costs_s, std::vector<double>{1.5});
  auto next = d.TryLease("a2", "cpu");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->work.batch_id, b2);
}

TEST(DispatcherTest, AKeptLeaseNeverExpiresAndEndsLikeAnyOther) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.lease_timeout_ms = 1000;
  Dispatcher d(&clock, opts);
  Sink sink;
  std::string b1 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  auto l1 = d.TryLease("relay#1", "cpu");
  ASSERT_TRUE(l1.has_value());
  EXPECT_FALSE(d.KeepLease(b1, "someone-else#1"));
  EXPECT_FALSE(d.KeepLease("no-such-batch", "relay#1"));
  ASSERT_TRUE(d.KeepLease(b1, "relay#1"));
  clock.Advance(1000 * 1000);
  EXPECT_EQ(d.ExpireLeases(), 0);
  EXPECT_EQ(d.InFlight("relay#1"), 1);
  EXPECT_TRUE(d.Complete(b1, "relay#1", Results(l1->work, 2.0)));
  EXPECT_EQ(sink.calls, 1);
  // Or it goes back to the queue when its holder lets it go.
  std::string b2 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  ASSERT_TRUE(d.TryLease("relay#2", "cpu").has_value());
  ASSERT_TRUE(d.KeepLease(b2, "relay#2"));
  EXPECT_EQ(d.ReleaseAgent("relay#2"), 1);
  auto again = d.TryLease("a1", "cpu");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->work.batch_id, b2);
}

TEST(DispatcherTest, DroppedAgentLeasesAreRequeuedImmediately) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  std::string b1 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  std::string b2 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  ASSERT_TRUE(d.TryLease("a1", "cpu").has_value());
  ASSERT_TRUE(d.TryLease("a1", "cpu").has_value());
  EXPECT_EQ(d.InFlight("a1"), 2);
  EXPECT_EQ(d.ReleaseAgent("a1"), 2);
  EXPECT_EQ(d.InFlight("a1"), 0);
  EXPECT_EQ(d.QueuedCount("cpu"), 2u);
  auto l = d.TryLease("a2", "cpu");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->work.batch_id, b1);
  l = d.TryLease("a2", "cpu");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->work.batch_id, b2);
}

TEST(DispatcherTest, GivesUpAfterMaxAttemptsWithAgentLost) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.max_attempts = 2;
  Dispatcher d(&clock, opts);
  Sink sink;
  d.Submit(Work("j", "cpu", 3), sink.Callback());
  ASSERT_TRUE(d.TryLease("a1", "cpu").has_value());
  d.ReleaseAgent("a1");
  EXPECT_EQ(sink.calls, 0);
  ASSERT_TRUE(d.TryLease("a2", "cpu").has_value());
  d.ReleaseAgent("a2");
  EXPECT_EQ(sink.calls, 1);
  ASSERT_EQ(sink.last.size(), 3u);
  EXPECT_EQ(sink.last[0].error_kind, storage::ErrorKind::kAgentLost);
  EXPECT_EQ(sink.last[0].agent_id, "a2");
  EXPECT_EQ(d.QueuedCount("cpu"), 0u);
}

TEST(DispatcherTest, CancelJobDropsQueuedAndLeasedBatches) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  std::string b1 = d.Submit(Work("j1", "cpu", 1), sink.Callback());
  d.Submit(Work("j1", "cpu", 1), sink.Callback());
  std::string other = d.Submit(Work("j2", "cpu", 1), sink.Callback());
  auto l = d.TryLease("a1", "cpu");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(d.CancelJob("j1"), std::vector<std::string>{b1});
  // The holder hears of it once.
  EXPECT_EQ(d.TakeCancelled("a1"), std::vector<std::string>{b1});
  EXPECT_TRUE(d.TakeCancelled("a1").empty());
  EXPECT_FALSE(d.Complete(b1, "a1", Results(l->work, 1.0)));
  EXPECT_EQ(sink.calls, 0);
  auto next = d.TryLease("a1", "cpu");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->work.batch_id, other);
}

TEST(DispatcherTest, UsersShareAKeyByWeightAndTheirJobsEvenly) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.user_weights = {{"ana", 1.0}, {"bo", 3.0}};
  Dispatcher d(&clock, opts);
  Sink sink;
  // Ana has one job with a huge backlog, Bo two jobs with small ones that
  // they keep refilling; a third user arrives later.
  auto submit = [&](const std::string& user, const std::string& job) {
    MeasureWork w = Work(job, "cpu", 8);
    w.user = user;
    d.Submit(w, sink.Callback());
  };
  for (int i = 0; i < 400; ++i) submit("ana", "ana-1");
  std::map<std::string, int> leased;  // job -> batches
  for (int round = 0; round < 400; ++round) {
    for (const char* job : {"bo-1", "bo-2"}) {
      if (d.QueuedCount("cpu") < 1000) submit("bo", job);
    }
    auto l = d.TryLease("agent", "cpu");
    ASSERT_TRUE(l.has_value());
    leased[l->work.job_id]++;
    ASSERT_TRUE(d.Complete(l->work.batch_id, "agent", Results(l->work, 1e-3)));
  }
  // Bo gets three quarters (weight 3 of 4), split evenly; Ana a quarter.
  EXPECT_NEAR(leased["ana-1"], 100, 10);
  EXPECT_NEAR(leased["bo-1"] + leased["bo-2"], 300, 10);
  EXPECT_NEAR(leased["bo-1"], leased["bo-2"], 10);
  // A newcomer starts level with the least served: no burst for being new,
  // its fair share (weight 1 of 5) from then on.
  for (int i = 0; i < 100; ++i) submit("cy", "cy-1");
  std::map<std::string, int> after;
  for (int round = 0; round < 100; ++round) {
    for (const char* job : {"bo-1", "bo-2"}) submit("bo", job);
    auto l = d.TryLease("agent", "cpu");
    ASSERT_TRUE(l.has_value());
    after[l->work.job_id]++;
    ASSERT_TRUE(d.Complete(l->work.batch_id, "agent", Results(l->work, 1e-3)));
  }
  EXPECT_NEAR(after["cy-1"], 20, 5);
  EXPECT_NEAR(after["ana-1"], 20, 5);
}

TEST(DispatcherTest, AHigherPriorityJobOvertakes) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  for (int i = 0; i < 5; ++i) d.Submit(Work("old", "cpu", 1), sink.Callback());
  MeasureWork urgent = Work("urgent", "cpu", 1);
  urgent.priority = 10;
  std::string u = d.Submit(urgent, sink.Callback());
  auto l = d.TryLease("a", "cpu");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->work.batch_id, u);
  EXPECT_EQ(d.TryLease("a", "cpu")->work.job_id, "old");
}

TEST(DispatcherTest, BatchesGoOnlyToAgentsOfTheirTarget) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  MeasureWork skylake = Work("j1", "cpu", 1);
  skylake.target = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake";
  MeasureWork znver5 = Work("j2", "cpu", 1);
  znver5.target = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver5";
  d.Submit(skylake, sink.Callback());
  std::string z = d.Submit(znver5, sink.Callback());
  // A znver5 agent skips the skylake batch in front of the queue.
  auto l = d.TryLease("a1", "cpu", znver5.target);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->work.batch_id, z);
  EXPECT_FALSE(d.TryLease("a1", "cpu", znver5.target).has_value());
  EXPECT_FALSE(d.WaitLease("a2", "cpu", 1, std::chrono::milliseconds(1), znver5.target));
  EXPECT_EQ(d.QueuedCount("cpu"), 1u);
  EXPECT_TRUE(d.TryLease("a3", "cpu", skylake.target).has_value());
}

TEST(DispatcherTest, WaitLeaseRespectsMaxInFlightAndWake) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  d.Submit(Work("j", "cpu", 1), sink.Callback());
  d.Submit(Work("j", "cpu", 1), sink.Callback());
  auto l = d.WaitLease("a1", "cpu", 1, std::chrono::milliseconds(0));
  ASSERT_TRUE(l.has_value());
  // a1 already holds one lease: no second one.
  EXPECT_FALSE(d.WaitLease("a1", "cpu", 1, std::chrono::milliseconds(0)).has_value());
  EXPECT_TRUE(d.WaitLease("a2", "cpu", 1, std::chrono::milliseconds(0)).has_value());
}

TEST(DispatcherTest, ABatchLargerThanAnAgentsMaxBatchIsSplitAndAnsweredOnce) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  d.Submit(Work("j", "cpu", 8), sink.Callback());
  auto small = d.TryLease("a1", "cpu", "", /*max_candidates=*/3);
  ASSERT_TRUE(small.has_value());
  ASSERT_EQ(small->work.candidates.size(), 3u);
  EXPECT_EQ(small->work.candidates[0].candidate_index, 0);
  EXPECT_EQ(d.QueuedCount("cpu"), 1u);  // the other five wait for the next agent
  auto rest = d.TryLease("a2", "cpu");
  ASSERT_TRUE(rest.has_value());
  ASSERT_EQ(rest->work.candidates.size(), 5u);
  EXPECT_EQ(rest->work.candidates[0].candidate_index, 3);
  EXPECT_NE(rest->work.batch_id, small->work.batch_id);
  ASSERT_TRUE(d.Complete(rest->work.batch_id, "a2", Results(rest->work, 1e-3)));
  EXPECT_EQ(sink.calls, 0);  // one part is still out
  ASSERT_TRUE(d.Complete(small->work.batch_id, "a1", Results(small->work, 2e-3)));
  ASSERT_EQ(sink.calls, 1);
  ASSERT_EQ(sink.last.size(), 8u);
  std::set<int64_t> ids;
  for (const auto& o : sink.last) ids.insert(o.candidate_index);
  EXPECT_EQ(ids.size(), 8u);
}

TEST(DispatcherTest, ASplitPartThatIsLostTooOftenStillEndsTheBatch) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.max_attempts = 1;
  opts.lease_timeout_ms = 100;
  Dispatcher d(&clock, opts);
  Sink sink;
  d.Submit(Work("j", "cpu", 4), sink.Callback());
  auto part = d.TryLease("a1", "cpu", "", 1);
  auto rest = d.TryLease("a2", "cpu");
  ASSERT_TRUE(part.has_value() && rest.has_value());
  ASSERT_TRUE(d.Complete(rest->work.batch_id, "a2", Results(rest->work, 1e-3)));
  clock.Advance(200);
  EXPECT_EQ(d.ExpireLeases(), 1);
  ASSERT_EQ(sink.calls, 1);
  ASSERT_EQ(sink.last.size(), 4u);
  int lost = 0;
  for (const auto& o : sink.last) lost += o.error_kind == storage::ErrorKind::kAgentLost;
  EXPECT_EQ(lost, 1);
}

TEST(DispatcherTest, LeasesFollowTheAgentsPace) {
  FakeClock clock;
  DispatcherOptions opts;
  opts.target_lease_s = 30;
  Dispatcher d(&clock, opts);
  Sink sink;
  EXPECT_EQ(d.PacedCandidates("slow"), 0);  // unknown: no limit
  d.Submit(Work("j", "cpu", 8), sink.Callback());
  auto first = d.TryLease("slow#1", "cpu");
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->work.candidates.size(), 8u);
  clock.Advance(80'000);  // 10 s per candidate
  ASSERT_TRUE(d.Complete(first->work.batch_id, "slow#1", Results(first->work, 1e-3)));
  EXPECT_EQ(d.PacedCandidates("slow"), 3);
  d.Submit(Work("j", "cpu", 8), sink.Callback());
  // A new session of the same agent keeps its pace.
  auto next = d.TryLease("slow#2", "cpu");
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->work.candidates.size(), 3u);
  // A fast agent takes the rest whole.
  auto fast = d.TryLease("fast#1", "cpu");
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ(fast->work.candidates.size(), 5u);
}

TEST(DispatcherTest, ARequestIsServedWhenABatchComesAndCanBeWithdrawn) {
  FakeClock clock;
  Dispatcher d(&clock);
  Sink sink;
  std::vector<std::string> got;
  auto record = [&](std::optional<Lease> lease) {
    got.push_back(lease.has_value() ? lease->work.batch_id : "dropped");
  };
  const uint64_t first = d.RequestLease("a1#1", "cpu", "", 0, record);
  const uint64_t second = d.RequestLease("a2#1", "cpu", "", 0, record);
  const uint64_t third = d.RequestLease("a3#1", "cpu", "", 0, record);
  EXPECT_NE(first, 0u);
  EXPECT_TRUE(got.empty());  // nothing queued yet
  // Oldest request first, by the thread that queues the batch.
  std::string b1 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  ASSERT_EQ(got, std::vector<std::string>{b1});
  EXPECT_EQ(d.InFlight("a1#1"), 1);
  EXPECT_TRUE(d.CancelRequest(second));
  EXPECT_FALSE(d.CancelRequest(second));  // withdrawn already
  EXPECT_FALSE(d.CancelRequest(first));   // served
  std::string b2 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  ASSERT_EQ(got, (std::vector<std::string>{b1, b2}));  // to a3, not the withdrawn a2
  EXPECT_EQ(d.InFlight("a3#1"), 1);
  EXPECT_FALSE(d.CancelRequest(third));
  // A request made while a batch is queued is served at once (id 0).
  std::string b3 = d.Submit(Work("j", "cpu", 1), sink.Callback());
  EXPECT_EQ(d.RequestLease("a4#1", "cpu", "", 0, record), 0u);
  ASSERT_EQ(got.back(), b3);
  // Wake drops what is pending.
  d.RequestLease("a5#1", "cpu", "", 0, record);
  d.Wake();
  EXPECT_EQ(got.back(), "dropped");
}

}  // namespace
}  // namespace kiln::tracker
