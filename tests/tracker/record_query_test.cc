// The records a caller may read (tracker/record_query.h), on a real SQLite
// file: paging, filters, visibility and workloads, with no gRPC.
#include "tracker/record_query.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/storage/test_util.h"

namespace kiln::tracker {
namespace {

using storage::testing::TestJob;

class RecordQueryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = storage::testing::OpenOrDie(dir_.File("kiln.db"));
    ASSERT_NE(db_.farm, nullptr);
    ASSERT_TRUE(db_.tuning->UpsertWorkload({"wk1", "dense", "dense(8,8)", 1024}).ok());
    for (const auto& [job, owner] :
         {std::pair<std::string, std::string>{"ana-job", "ana"}, {"bo-job", "bo"}}) {
      storage::JobRow row = TestJob(job, 1);
      row.owner = owner;
      ASSERT_TRUE(db_.farm->CreateJob(row).ok());
    }
  }
  // `n` records of `job` ("" for none) on workload `key`.
  void Add(const std::string& job, int n, const std::string& key = "wk1") {
    std::vector<storage::RecordRow> rows;
    for (int i = 0; i < n; ++i) {
      storage::RecordRow r = storage::testing::TestRecord("c" + std::to_string(i), 1e-3);
      r.workload_key = key;
      r.job_id = job;
      r.unix_ms = ++now_;
      rows.push_back(r);
    }
    ASSERT_TRUE(db_.tuning->AddRecords(rows).ok());
  }
  std::set<std::string> JobsSeenBy(const Caller& caller, RecordQuery q = {}) {
    auto page = QueryVisibleRecords(db_, caller, q);
    EXPECT_TRUE(page.ok()) << page.status();
    std::set<std::string> jobs;
    if (page.ok()) {
      for (const RecordEntry& e : page->records) jobs.insert(e.record.job_id);
    }
    return jobs;
  }

  storage::testing::TempDir dir_;
  storage::Stores db_;
  int64_t now_ = 1000;
};

TEST_F(RecordQueryTest, OtherUsersJobsRecordsAreLeftOutForAllButAnAdmin) {
  Add("ana-job", 2);
  Add("bo-job", 2);
  Add("", 1);          // imported: no job, everyone's
  Add("gone-job", 1);  // a job no longer stored: everyone's
  Caller bo{"bo", storage::Role::kUser, 1, ""};
  Caller admin{"root", storage::Role::kAdmin, 2, ""};
  EXPECT_EQ(JobsSeenBy(bo), (std::set<std::string>{"bo-job", "", "gone-job"}));
  EXPECT_EQ(JobsSeenBy(admin), (std::set<std::string>{"ana-job", "bo-job", "", "gone-job"}));
}

TEST_F(RecordQueryTest, AJobsRecordsComeInMeasurementOrderFilteredByWorkloadWithTheirWorkloads) {
  Add("bo-job", 3);
  Add("bo-job", 2, "wk2");  // a workload with no stored row
  Add("ana-job", 4);
  Caller bo{"bo", storage::Role::kUser, 1, ""};
  RecordQuery q;
  q.job_id = "bo-job";
  auto page = QueryVisibleRecords(db_, bo, q);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->records.size(), 5u);
  for (size_t i = 1; i < page->records.size(); ++i) {
    EXPECT_LT(page->records[i - 1].record.id, page->records[i].record.id);
  }
  ASSERT_TRUE(page->records[0].workload.has_value());
  EXPECT_EQ(page->records[0].workload->op, "dense");
  EXPECT_FALSE(page->records[4].workload.has_value());
  q.workload_key = "wk2";
  page = QueryVisibleRecords(db_, bo, q);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->records.size(), 2u);
  EXPECT_TRUE(page->next_page_token.empty());
}

TEST_F(RecordQueryTest, PagesFollowTheirTokenAndALimitGivesOnePage) {
  Add("", kRecordPage + 3);
  Caller anyone;
  RecordQuery q;
  auto first = QueryVisibleRecords(db_, anyone, q);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->records.size(), static_cast<size_t>(kRecordPage));
  ASSERT_FALSE(first->next_page_token.empty());
  q.page_token = first->next_page_token;
  auto second = QueryVisibleRecords(db_, anyone, q);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->records.size(), 3u);
  EXPECT_TRUE(second->next_page_token.empty());
  std::set<int64_t> ids;
  for (const auto* p : {&*first, &*second}) {
    for (const RecordEntry& e : p->records) ids.insert(e.record.id);
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(kRecordPage + 3));  // no record twice
  RecordQuery limited;
  limited.limit = 7;
  auto page = QueryVisibleRecords(db_, anyone, limited);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->records.size(), 7u);
  EXPECT_TRUE(page->next_page_token.empty());
}

TEST_F(RecordQueryTest, ANegativeLimitOrAMalformedTokenIsInvalidArgument) {
  Caller anyone;
  RecordQuery q;
  q.limit = -1;
  EXPECT_EQ(QueryVisibleRecords(db_, anyone, q).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* token : {"x", "-5", "12abc"}) {
    RecordQuery t;
    t.page_token = token;
    EXPECT_EQ(QueryVisibleRecords(db_, anyone, t).status().code(),
              absl::StatusCode::kInvalidArgument)
        << token;
  }
}

}  // namespace
}  // namespace kiln::tracker
