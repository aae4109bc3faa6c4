// One database holding the tuning database and the farm store
// (storage/stores.h): its schema ladder and what both store in it.
#include "storage/stores.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "base/str.h"
#include "storage/database.h"
#include "storage/migrations.h"
#include "test_util.h"

namespace kiln::storage {
namespace {

using testing::OpenOrDie;
using testing::TempDir;
using testing::TestJob;
using testing::TestRecord;

TEST(StoresTest, MigratesFromEmpty) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_NE(db.tuning, nullptr);
  EXPECT_GE(CurrentSchemaVersion(), 1);
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
  db = {};
  // Reopening is a no-op and keeps the version.
  db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
}

TEST(StoresTest, ConcurrentOpensOfAFreshDatabaseMigrateOnce) {
  TempDir dir;
  const std::string url = dir.DbUrl("log.db");
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = OpenStores(url).status(); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  auto db = OpenOrDie(url);
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
}

TEST(StoresTest, RefusesNewerSchema) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  ASSERT_NE(OpenOrDie(path).tuning, nullptr);
  {
    auto raw = Database::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE meta SET value = '999' WHERE key = 'schema_version'").ok());
  }
  auto db = OpenStores(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("999"), std::string::npos) << db.status();
}

TEST(StoresTest, MigratesAVersionOneFileKeepingItsJobs) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  {
    auto raw = Database::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->Exec((*raw)->SchemaSql(SchemaMigrations()[0])).ok());
    ASSERT_TRUE((*raw)
                    ->Exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                           "INSERT INTO meta VALUES('schema_version', '1');"
                           "INSERT INTO jobs VALUES('old', 'm', 'sha', 'key', 'llvm', "
                           "'tuning', 10, 4, '{}', '', '', 1, 2);")
                    .ok());
  }
  auto db = OpenOrDie(path);
  ASSERT_NE(db.tuning, nullptr);
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
  auto job = db.farm->GetJob("old");
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  EXPECT_EQ((*job)->trials_done, 4);
  EXPECT_EQ((*job)->tuning_ms, 0);
}

// Writes a database file of schema `version` (its migrations applied by
// hand, as an older kiln left it) holding `rows` (SQL run after them).
void WriteFileOfSchema(const std::string& path, int version, const std::string& rows) {
  auto raw = Database::Open(path);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE((*raw)->Exec("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)").ok());
  for (int v = 0; v < version; ++v) {
    ASSERT_TRUE((*raw)->Exec((*raw)->SchemaSql(SchemaMigrations()[v])).ok()) << v;
  }
  ASSERT_TRUE(
      (*raw)
          ->Exec(kiln::StrCat("INSERT INTO meta VALUES('schema_version', '", version, "');", rows))
          .ok());
}

// Schema 8 keeps each cost as a row of record_costs; a file of schema 7
// held them as comma-joined text, split by the migration into the same
// doubles, in order.
TEST(StoresTest, MigratesCommaJoinedCostsIntoTypedRows) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  const std::string costs = "0.0012345678901234567,9.9999999999999995e-07,2.5";
  const std::string cols =
      "INSERT INTO records(workload_key, target, config, error_kind, error_message, costs_s, "
      "mean_cost_s, compiler_version, agent_id, job_id, unix_ms) VALUES";
  WriteFileOfSchema(
      path, 7,
      cols + "('wk1', 'llvm', 't=1', 'none', '', '" + costs + "', 0.8, '0.1.0', 'a', 'j1', 1);" +
          cols + "('wk1', 'llvm', 't=2', 'compile', 'bad', '', 0, '0.1.0', 'a', 'j1', 2);" + cols +
          "('wk1', 'llvm', 't=3', 'none', '', '0.5', 0.5, '0.1.0', 'a', 'j1', 3);");
  auto db = OpenOrDie(path);
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
  auto records = db.tuning->RecordsOfJob("j1");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].costs_s,
            (std::vector<double>{0.0012345678901234567, 9.9999999999999995e-07, 2.5}));
  EXPECT_TRUE((*records)[1].costs_s.empty());
  EXPECT_EQ((*records)[2].costs_s, (std::vector<double>{0.5}));
  // New records keep theirs the same way.
  RecordRow r = TestRecord("t=4", 1e-3);
  r.job_id = "j1";
  r.costs_s = {3e-3, 1e-3, 2e-3};
  ASSERT_TRUE(db.tuning->AddRecord(r).ok());
  records = db.tuning->RecordsOfJob("j1");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 4u);
  EXPECT_EQ((*records)[3].costs_s, r.costs_s);
}

// Schema 9 stores whether a record was timed once (cut short); a file of
// schema 8 said so only in the record's message, which the migration reads.
TEST(StoresTest, MigratesTimedOnceMessagesIntoTheCutShortColumn) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  const std::string cols =
      "INSERT INTO records(workload_key, target, config, error_kind, error_message, "
      "mean_cost_s, compiler_version, agent_id, job_id, unix_ms) VALUES";
  WriteFileOfSchema(
      path, 8,
      cols +
          "('wk1', 'llvm', 't=1', 'none', 'timed once: slower than 4x the best', 0.9, "
          "'0.1.0', 'a', 'j1', 1);" +
          cols + "('wk1', 'llvm', 't=2', 'none', '', 0.1, '0.1.0', 'a', 'j1', 2);" + cols +
          "('wk1', 'llvm', 't=3', 'runtime', 'timed once: crashed', 0, '0.1.0', 'a', 'j1', 3);");
  auto db = OpenOrDie(path);
  EXPECT_EQ(*db.tuning->SchemaVersion(), CurrentSchemaVersion());
  auto records = db.tuning->RecordsOfJob("j1");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_TRUE((*records)[0].cut_short);
  EXPECT_FALSE((*records)[1].cut_short);
  EXPECT_FALSE((*records)[2].cut_short);  // a failure, whatever its message
}

TEST(StoresTest, StatesAndErrorKindsAreStoredByName) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db.farm->CreateJob(TestJob("j1", 10, JobState::kCompiling)).ok());
    ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=1", 0, ErrorKind::kAgentLost)).ok());
    // Values outside the enums are refused before anything is written.
    absl::Status bad_job = db.farm->CreateJob(TestJob("j2", 20, static_cast<JobState>(0)));
    EXPECT_EQ(bad_job.code(), absl::StatusCode::kInvalidArgument) << bad_job;
    absl::Status bad_update = db.farm->UpdateJob(TestJob("j1", 10, static_cast<JobState>(42)));
    EXPECT_EQ(bad_update.code(), absl::StatusCode::kInvalidArgument) << bad_update;
    EXPECT_EQ((*db.farm->GetJob("j1"))->state, JobState::kCompiling);
    EXPECT_FALSE(db.farm->GetJob("j2")->has_value());
  }
  auto raw = Database::Open(path);
  ASSERT_TRUE(raw.ok());
  auto text = [&](const std::string& sql) {
    auto st = (*raw)->Prepare(sql);
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return std::string();
    auto has_row = st->Step();
    EXPECT_TRUE(has_row.ok() && *has_row);
    return st->ColumnText(0);
  };
  EXPECT_EQ(text("SELECT state FROM jobs WHERE id = 'j1'"), "compiling");
  EXPECT_EQ(text("SELECT error_kind FROM records"), "agent_lost");
}

TEST(StoresTest, UnknownNamesInTheFileAreDataLoss) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db.farm->CreateJob(TestJob("j1", 10)).ok());
    ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=1", 1e-3)).ok());
    TokenRow t;
    t.user = "ana";
    t.hash = std::string(64, 'a');
    ASSERT_TRUE(db.farm->AddToken(t).ok());
    ASSERT_TRUE(
        db.farm->AddArtifact({std::string(64, 'b'), 1, ArtifactKind::kModule, "j1", 5}).ok());
  }
  {
    auto raw = Database::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE jobs SET state = 'paused'").ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE records SET error_kind = 'exploded'").ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE tokens SET role = 'root'").ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE artifacts SET kind = 'binary'").ok());
  }
  auto db = OpenOrDie(path);
  auto job = db.farm->GetJob("j1");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(job.status().message().find("paused"), std::string::npos) << job.status();
  EXPECT_EQ(db.farm->ListJobs().status().code(), absl::StatusCode::kDataLoss);
  auto records = db.tuning->QueryRecords("", "", 0);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(records.status().message().find("exploded"), std::string::npos) << records.status();
  auto token = db.farm->TokenByHash(std::string(64, 'a'));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(token.status().message().find("root"), std::string::npos) << token.status();
  EXPECT_EQ(db.farm->ListTokens().status().code(), absl::StatusCode::kDataLoss);
  auto artifact = db.farm->GetArtifact(std::string(64, 'b'));
  EXPECT_EQ(artifact.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(artifact.status().message().find("binary"), std::string::npos) << artifact.status();
}

}  // namespace
}  // namespace kiln::storage
