// Several trackers on one database: job leases and relayed batches
// (storage/farm_store_leases.cc). Every test opens one connection per tracker, as
// separate tracker processes would; on PostgreSQL (the pg.* tests) the
// concurrent claims exercise its row locks.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "storage/stores.h"
#include "test_util.h"

namespace kiln::storage {
namespace {

using testing::OpenOrDie;
using testing::TempDir;
using testing::TestJob;

// A batch tracker "A" publishes for key "x86".
BatchRow Batch(const std::string& id, const std::string& job, int64_t created) {
  BatchRow row;
  row.id = id;
  row.job_id = job;
  row.device_key = "x86";
  row.owner = "A";
  row.work = R"({"candidates":[]})";
  row.created_unix_ms = created;
  return row;
}

std::set<std::string> Ids(const std::vector<JobRow>& jobs) {
  std::set<std::string> out;
  for (const JobRow& j : jobs) out.insert(j.id);
  return out;
}

TEST(FarmStoreLeasesTest, EachJobIsHeldByOneTrackerUntilItsLeaseRunsOut) {
  TempDir dir;
  const std::string url = dir.DbUrl("farm.db");
  auto a = OpenOrDie(url);
  auto b = OpenOrDie(url);
  ASSERT_TRUE(a.farm && b.farm);
  ASSERT_TRUE(a.farm->CreateJob(TestJob("j1", 1, JobState::kTuning)).ok());
  JobRow j2 = TestJob("j2", 1);  // submitted to tracker b
  j2.tracker_id = "tracker-b";
  j2.lease_until_ms = 5000;
  ASSERT_TRUE(a.farm->CreateJob(j2).ok());
  ASSERT_TRUE(a.farm->CreateJob(TestJob("done", 1, JobState::kCompleted)).ok());

  // Unheld unfinished jobs go to the first tracker that asks; j2 is b's.
  auto claimed = a.farm->ClaimJobs("tracker-a", 1000, 2000);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(Ids(*claimed), std::set<std::string>{"j1"});
  EXPECT_TRUE(b.farm->ClaimJobs("tracker-b", 1000, 2000)->empty());
  // Renewals: each tracker keeps its own.
  auto renewed = a.farm->RenewJobLeases("tracker-a", 3000);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  ASSERT_EQ(renewed->size(), 1u);
  EXPECT_EQ((*renewed)[0].first, "j1");
  EXPECT_FALSE((*renewed)[0].second);
  // Tracker a stops renewing: after its lease, b takes j1 over.
  EXPECT_TRUE(b.farm->ClaimJobs("tracker-b", 2999, 9000)->empty());
  EXPECT_EQ(Ids(*b.farm->ClaimJobs("tracker-b", 3001, 9000)), std::set<std::string>{"j1"});
  EXPECT_TRUE(a.farm->RenewJobLeases("tracker-a", 9000)->empty());
  // A cancel asked anywhere reaches the tracker that runs the job.
  ASSERT_TRUE(a.farm->RequestCancel("j1").ok());
  EXPECT_EQ(a.farm->RequestCancel("nope").code(), absl::StatusCode::kNotFound);
  auto b_jobs = b.farm->RenewJobLeases("tracker-b", 9500);
  ASSERT_TRUE(b_jobs.ok());
  std::map<std::string, bool> cancel(b_jobs->begin(), b_jobs->end());
  EXPECT_EQ(cancel, (std::map<std::string, bool>{{"j1", true}, {"j2", false}}));
}

TEST(FarmStoreLeasesTest, RecordsAreStoredOnlyWhileTheirTrackerHoldsTheJob) {
  TempDir dir;
  const std::string url = dir.DbUrl("farm.db");
  auto a = OpenOrDie(url);
  auto b = OpenOrDie(url);
  ASSERT_TRUE(a.farm && b.farm);
  JobRow job = TestJob("j1", 1, JobState::kTuning);
  job.tracker_id = "tracker-a";
  job.lease_until_ms = 1000;
  ASSERT_TRUE(a.farm->CreateJob(job).ok());
  RecordRow r;
  r.workload_key = "wk";
  r.target = "llvm";
  r.config = "t=1";
  r.costs_s = {1e-3};
  r.mean_cost_s = 1e-3;
  r.compiler_version = "0.1.0";
  r.agent_id = "agent";
  r.job_id = "j1";
  ASSERT_TRUE(a.tuning->AddRecords({r}, FarmStore::JobHeldBy("tracker-a")).ok());
  // Tracker b takes the job over: a's records are refused from then on.
  ASSERT_EQ(b.farm->ClaimJobs("tracker-b", 1001, 9000)->size(), 1u);
  r.config = "t=2";
  absl::Status refused = a.tuning->AddRecords({r}, FarmStore::JobHeldBy("tracker-a"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted) << refused;
  EXPECT_NE(refused.message().find("tracker-b"), std::string::npos) << refused;
  EXPECT_EQ(*a.tuning->CountRecords("j1"), 1);
  EXPECT_TRUE(b.tuning->AddRecords({r}, FarmStore::JobHeldBy("tracker-b")).ok());
  r.config = "t=3";
  EXPECT_TRUE(a.tuning->AddRecords({r}).ok());  // no fence (one tracker)
  EXPECT_EQ(*a.tuning->CountRecords("j1"), 3);
  r.job_id = "unknown";
  EXPECT_EQ(a.tuning->AddRecords({r}, FarmStore::JobHeldBy("tracker-a")).code(),
            absl::StatusCode::kAborted);
}

TEST(FarmStoreLeasesTest, RelayedBatchGoesToOneOtherTrackerAndBackToItsOwner) {
  TempDir dir;
  const std::string url = dir.DbUrl("farm.db");
  auto owner = OpenOrDie(url);
  auto b = OpenOrDie(url);
  auto c = OpenOrDie(url);
  ASSERT_TRUE(owner.farm && b.farm && c.farm);
  BatchRow row = Batch("A/b-1", "j1", 10);
  ASSERT_TRUE(owner.farm->PublishBatch(row).ok());
  EXPECT_EQ(owner.farm->PublishBatch(BatchRow{}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*b.farm->QueuedBatchesByKey("B")), (std::map<std::string, int64_t>{{"x86", 1}}));
  EXPECT_TRUE(owner.farm->QueuedBatchesByKey("A")->empty());

  // Not to its own owner, not for another key, and to one tracker only.
  EXPECT_FALSE(owner.farm->ClaimBatch("x86", "A", 100)->has_value());
  EXPECT_FALSE(b.farm->ClaimBatch("arm", "B", 100)->has_value());
  auto got = b.farm->ClaimBatch("x86", "B", 100);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->work, row.work);
  EXPECT_EQ((*got)->state, BatchState::kLeased);
  EXPECT_FALSE(c.farm->ClaimBatch("x86", "C", 100)->has_value());
  EXPECT_FALSE(*owner.farm->WithdrawBatch("A/b-1"));  // leased: no longer the owner's to take back

  // B's lease runs out: C gets it, and B's late results are refused.
  EXPECT_FALSE(*c.farm->SetBatchLease("A/b-1", "C", 100));  // not C's
  EXPECT_TRUE(*b.farm->SetBatchLease("A/b-1", "B", 100));
  EXPECT_EQ(*c.farm->RequeueExpiredBatches(50), 0);
  EXPECT_EQ(*c.farm->RequeueExpiredBatches(101), 1);
  ASSERT_TRUE(c.farm->ClaimBatch("x86", "C", 500)->has_value());
  EXPECT_FALSE(*b.farm->FinishBatch("A/b-1", "B", "late"));
  EXPECT_TRUE(owner.farm->TakeFinishedBatches("A")->empty());
  EXPECT_TRUE(*c.farm->FinishBatch("A/b-1", "C", R"([{"ok":1}])"));
  auto done = owner.farm->TakeFinishedBatches("A");
  ASSERT_TRUE(done.ok() && done->size() == 1u) << done.status();
  EXPECT_EQ((*done)[0].results, R"([{"ok":1}])");
  EXPECT_EQ((*done)[0].holder, "C");
  EXPECT_TRUE(owner.farm->TakeFinishedBatches("A")->empty());  // taken once

  // A queued batch can be withdrawn; a job's batches can be dropped.
  row.id = "A/b-2";
  ASSERT_TRUE(owner.farm->PublishBatch(row).ok());
  EXPECT_TRUE(*owner.farm->WithdrawBatch("A/b-2"));
  row.id = "A/b-3";
  ASSERT_TRUE(owner.farm->PublishBatch(row).ok());
  ASSERT_TRUE(owner.farm->DropBatchesOfJob("j1").ok());
  EXPECT_FALSE(b.farm->ClaimBatch("x86", "B", 100)->has_value());
}

TEST(FarmStoreLeasesTest, ConcurrentClaimsGiveEachBatchToExactlyOneTracker) {
  TempDir dir;
  const std::string url = dir.DbUrl("farm.db");
  auto owner = OpenOrDie(url);
  ASSERT_TRUE(owner.farm);
  constexpr int kBatches = 40;
  for (int i = 0; i < kBatches; ++i) {
    ASSERT_TRUE(owner.farm->PublishBatch(Batch("A/b-" + std::to_string(i), "j", i)).ok());
  }
  constexpr int kTrackers = 4;
  std::vector<std::vector<std::string>> got(kTrackers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kTrackers; ++t) {
    threads.emplace_back([&, t] {
      auto db = OpenOrDie(url);
      if (!db.farm) return;
      const std::string me = "T" + std::to_string(t);
      while (true) {
        auto b = db.farm->ClaimBatch("x86", me, 1000);
        if (!b.ok()) {
          ADD_FAILURE() << b.status();
          return;
        }
        if (!b->has_value()) return;
        got[t].push_back((*b)->id);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::multiset<std::string> all;
  for (const auto& ids : got) all.insert(ids.begin(), ids.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kBatches));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), static_cast<size_t>(kBatches));
}

}  // namespace
}  // namespace kiln::storage
