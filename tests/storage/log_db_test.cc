#include "storage/log_db.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <thread>

#include "storage/database.h"
#include "storage/migrations.h"
#include "test_util.h"

namespace kiln::storage {
namespace {

using testing::OpenOrDie;
using testing::TempDir;
using testing::TestJob;

RecordRow Record(const std::string& config, double mean, ErrorKind error_kind = ErrorKind::kNone) {
  RecordRow r;
  r.workload_key = "wk1";
  r.target = "llvm -mcpu=skylake";
  r.config = config;
  r.error_kind = error_kind;
  if (r.error_kind == ErrorKind::kNone) {
    r.costs_s = {mean * 0.9, mean * 1.1};
    r.mean_cost_s = mean;
  } else {
    r.error_message = "boom";
  }
  r.compiler_version = "0.1.0";
  r.agent_id = "agent-a";
  r.job_id = "job-1";
  r.unix_ms = 1000;
  return r;
}

TEST(LogDbTest, MigratesFromEmpty) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_NE(db, nullptr);
  EXPECT_GE(LogDb::CurrentSchemaVersion(), 1);
  EXPECT_EQ(*db->SchemaVersion(), LogDb::CurrentSchemaVersion());
  db.reset();
  // Reopening is a no-op and keeps the version.
  db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_EQ(*db->SchemaVersion(), LogDb::CurrentSchemaVersion());
}

TEST(LogDbTest, ConcurrentOpensOfAFreshDatabaseMigrateOnce) {
  TempDir dir;
  const std::string url = dir.DbUrl("log.db");
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { results[i] = LogDb::Open(url).status(); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  auto db = OpenOrDie(url);
  EXPECT_EQ(*db->SchemaVersion(), LogDb::CurrentSchemaVersion());
}

TEST(LogDbTest, RefusesNewerSchema) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  ASSERT_NE(OpenOrDie(path), nullptr);
  {
    auto raw = Database::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE meta SET value = '999' WHERE key = 'schema_version'").ok());
  }
  auto db = LogDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("999"), std::string::npos) << db.status();
}

TEST(LogDbTest, WorkloadUpsertAndGet) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_FALSE(db->GetWorkload("wk1")->has_value());
  ASSERT_TRUE(db->UpsertWorkload({"wk1", "dense", "dense(1,2)", 4.0}).ok());
  ASSERT_TRUE(db->UpsertWorkload({"wk1", "dense", "dense(1,2)", 8.0}).ok());
  auto w = db->GetWorkload("wk1");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->op, "dense");
  EXPECT_EQ((*w)->canonical, "dense(1,2)");
  EXPECT_EQ((*w)->flops, 8.0);
}

TEST(LogDbTest, BestRecordPicksLowestSuccessful) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_FALSE(db->BestRecord("wk1", "llvm -mcpu=skylake")->has_value());
  ASSERT_TRUE(db->AddRecord(Record("t=1", 3e-3)).ok());
  auto id2 = db->AddRecord(Record("t=2", 1e-3));
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(db->AddRecord(Record("t=3", 2e-3)).ok());
  // Failures have mean 0 and must never win.
  ASSERT_TRUE(db->AddRecord(Record("t=4", 0, ErrorKind::kRuntime)).ok());
  ASSERT_TRUE(db->AddRecord(Record("t=5", 0, ErrorKind::kTimeout)).ok());
  // Another target is not considered.
  RecordRow other = Record("t=6", 1e-6);
  other.target = "cuda";
  ASSERT_TRUE(db->AddRecord(other).ok());

  auto best = db->BestRecord("wk1", "llvm -mcpu=skylake");
  ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
  EXPECT_EQ((*best)->id, *id2);
  EXPECT_EQ((*best)->config, "t=2");
  EXPECT_EQ((*best)->mean_cost_s, 1e-3);
  EXPECT_EQ((*best)->costs_s, (std::vector<double>{1e-3 * 0.9, 1e-3 * 1.1}));
  EXPECT_EQ((*best)->compiler_version, "0.1.0");

  auto top = db->TopK("wk1", "llvm -mcpu=skylake", 2);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 2u);
  EXPECT_EQ((*top)[0].config, "t=2");
  EXPECT_EQ((*top)[1].config, "t=3");

  auto all = db->QueryRecords("", "", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u);
  auto cuda = db->QueryRecords("wk1", "cuda", 0);
  ASSERT_TRUE(cuda.ok());
  ASSERT_EQ(cuda->size(), 1u);
  EXPECT_EQ((*cuda)[0].config, "t=6");
  EXPECT_EQ(db->QueryRecords("", "", 3)->size(), 3u);
  // Pages: the rest after an offset, in the same order.
  EXPECT_EQ(db->QueryRecords("", "", 2, 5)->size(), 1u);
  EXPECT_EQ((*db->QueryRecords("", "", 1, 2))[0].id, (*all)[2].id);
  auto job = db->RecordsOfJob("job-1");
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->size(), 6u);
  auto page = db->RecordsOfJob("job-1", 4, 4);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, (*job)[4].id);
  EXPECT_EQ(*db->CountRecords("job-1"), 6);
  EXPECT_EQ(*db->CountRecords("job-2"), 0);
  // One config's best only: its fastest success, none for a failed one.
  ASSERT_TRUE(db->AddRecord(Record("t=3", 1.5e-3)).ok());
  auto of3 = db->BestRecord("wk1", "llvm -mcpu=skylake", "t=3");
  ASSERT_TRUE(of3.ok() && of3->has_value()) << of3.status();
  EXPECT_EQ((*of3)->mean_cost_s, 1.5e-3);
  auto of4 = db->BestRecord("wk1", "llvm -mcpu=skylake", "t=4");
  ASSERT_TRUE(of4.ok()) << of4.status();
  EXPECT_FALSE(of4->has_value());
}

// Records keep the owner of the agent that measured them; a scoped query
// reads the farm's ("") and that user's only.
TEST(LogDbTest, ScopedQueriesReadTheFarmsAndTheUsersRecordsOnly) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  RecordRow farm = Record("farm", 2.0), alice = Record("alice", 1.0), bob = Record("bob", 0.5);
  alice.owner = "alice";
  bob.owner = "bob";
  RecordRow bob_failed = Record("bob-failed", 0, ErrorKind::kRuntime);
  bob_failed.owner = "bob";
  ASSERT_TRUE(db->AddRecords({farm, alice, bob, bob_failed}).ok());
  auto configs = [](const std::vector<RecordRow>& rows) {
    std::set<std::string> out;
    for (const RecordRow& r : rows) out.insert(r.config);
    return out;
  };
  const std::string t = farm.target;
  EXPECT_EQ(db->BestRecord("wk1", t, "", RecordScope::Of("alice"))->value().config, "alice");
  EXPECT_EQ(db->BestRecord("wk1", t, "", RecordScope::Of("carol"))->value().config, "farm");
  EXPECT_EQ(db->BestRecord("wk1", t)->value().config, "bob");  // all
  EXPECT_EQ(configs(*db->TopK("wk1", t, 10, "", RecordScope::Of("alice"))),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(configs(*db->QueryRecords("", "", 0, 0, RecordScope::Of("alice"))),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(*db->MeasuredConfigs("wk1", t, "0.1.0", RecordScope::Of("alice")),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(*db->MeasuredConfigs("wk1", t, "0.1.0"),
            (std::set<std::string>{"farm", "alice", "bob", "bob-failed"}));
  auto rows = db->QueryRecords("", "", 0);
  ASSERT_TRUE(rows.ok());
  for (const RecordRow& r : *rows) {
    EXPECT_EQ(r.owner, r.config == "farm" ? "" : r.config.substr(0, r.config.find('-')));
  }
}

TEST(LogDbTest, OnlyAnAgentsTokenHasAnOwner) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  TokenRow t;
  t.user = "rpi-7";
  t.role = "agent";
  t.owner = "alice";
  t.hash = std::string(64, 'a');
  ASSERT_TRUE(db->AddToken(t).ok());
  auto back = db->TokenByHash(t.hash);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->owner, "alice");
  t.role = "user";
  t.hash = std::string(64, 'b');
  EXPECT_EQ(db->AddToken(t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LogDbTest, RejectsInvalidRecord) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  RecordRow r = Record("t=1", 1e-3);
  r.error_kind = static_cast<ErrorKind>(99);
  auto id = db->AddRecord(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("99"), std::string::npos) << id.status();
}

TEST(LogDbTest, MeasuredConfigsPerCompilerVersion) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db->AddRecord(Record("t=1", 1e-3)).ok());
  ASSERT_TRUE(db->AddRecord(Record("t=2", 0, ErrorKind::kCompile)).ok());
  ASSERT_TRUE(db->AddRecord(Record("t=1", 2e-3)).ok());
  RecordRow newer = Record("t=9", 1e-3);
  newer.compiler_version = "0.2.0";
  ASSERT_TRUE(db->AddRecord(newer).ok());
  auto measured = db->MeasuredConfigs("wk1", "llvm -mcpu=skylake", "0.1.0");
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(*measured, (std::set<std::string>{"t=1", "t=2"}));
  EXPECT_EQ(*db->MeasuredConfigs("wk1", "llvm -mcpu=skylake", "0.2.0"),
            (std::set<std::string>{"t=9"}));
  EXPECT_TRUE(db->MeasuredConfigs("wk2", "llvm -mcpu=skylake", "0.1.0")->empty());
}

TEST(LogDbTest, JobsCrud) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db->CreateJob(TestJob("j1", 10)).ok());
  ASSERT_TRUE(db->CreateJob(TestJob("j2", 20, JobState::kCompleted)).ok());
  ASSERT_TRUE(db->CreateJob(TestJob("j3", 30, JobState::kTuning)).ok());
  absl::Status dup = db->CreateJob(TestJob("j1", 40));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;

  JobRow j = TestJob("j1", 999, JobState::kTuning);
  j.trials_done = 42;
  j.error = "";
  j.updated_unix_ms = 50;
  j.tuning_ms = 1234;
  ASSERT_TRUE(db->UpdateJob(j).ok());
  auto got = db->GetJob("j1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->state, JobState::kTuning);
  EXPECT_EQ((*got)->trials_done, 42);
  EXPECT_EQ((*got)->trials, 100);
  EXPECT_EQ((*got)->options_json, R"({"number":3})");
  EXPECT_EQ((*got)->created_unix_ms, 10);  // creation time never changes
  EXPECT_EQ((*got)->updated_unix_ms, 50);
  EXPECT_EQ((*got)->tuning_ms, 1234);

  EXPECT_EQ(db->UpdateJob(TestJob("nope", 1)).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(db->GetJob("nope")->has_value());

  auto list = db->ListJobs();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, "j3");
  EXPECT_EQ((*list)[2].id, "j1");

  auto unfinished = db->UnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].id, "j1");
  EXPECT_EQ((*unfinished)[1].id, "j3");
}

TEST(LogDbTest, StatesAndErrorKindsAreStoredByName) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db->CreateJob(TestJob("j1", 10, JobState::kCompiling)).ok());
    ASSERT_TRUE(db->AddRecord(Record("t=1", 0, ErrorKind::kAgentLost)).ok());
    // Values outside the enums are refused before anything is written.
    absl::Status bad_job = db->CreateJob(TestJob("j2", 20, static_cast<JobState>(0)));
    EXPECT_EQ(bad_job.code(), absl::StatusCode::kInvalidArgument) << bad_job;
    absl::Status bad_update = db->UpdateJob(TestJob("j1", 10, static_cast<JobState>(42)));
    EXPECT_EQ(bad_update.code(), absl::StatusCode::kInvalidArgument) << bad_update;
    EXPECT_EQ((*db->GetJob("j1"))->state, JobState::kCompiling);
    EXPECT_FALSE(db->GetJob("j2")->has_value());
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

TEST(LogDbTest, UnknownNamesInTheFileAreDataLoss) {
  TempDir dir;
  std::string path = dir.DbUrl("log.db");
  {
    auto db = OpenOrDie(path);
    ASSERT_TRUE(db->CreateJob(TestJob("j1", 10)).ok());
    ASSERT_TRUE(db->AddRecord(Record("t=1", 1e-3)).ok());
  }
  {
    auto raw = Database::Open(path);
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE jobs SET state = 'paused'").ok());
    ASSERT_TRUE((*raw)->Exec("UPDATE records SET error_kind = 'exploded'").ok());
  }
  auto db = OpenOrDie(path);
  auto job = db->GetJob("j1");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(job.status().message().find("paused"), std::string::npos) << job.status();
  EXPECT_EQ(db->ListJobs().status().code(), absl::StatusCode::kDataLoss);
  auto records = db->QueryRecords("", "", 0);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(records.status().message().find("exploded"), std::string::npos) << records.status();
}

TEST(LogDbTest, JobTasksAreReplacedAsAWhole) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db->SetJobTasks("j1", {{"wk-b", 3}, {"wk-a", 1}}).ok());
  ASSERT_TRUE(db->SetJobTasks("j2", {{"wk-c", 2}}).ok());
  auto tasks = db->JobTasks("j1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].workload_key, "wk-b");
  EXPECT_EQ((*tasks)[0].occurrences, 3);
  EXPECT_EQ((*tasks)[1].workload_key, "wk-a");
  ASSERT_TRUE(db->SetJobTasks("j1", {{"wk-d", 5}}).ok());
  tasks = db->JobTasks("j1");
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].workload_key, "wk-d");
  EXPECT_EQ(db->JobTasks("j2")->size(), 1u);
  EXPECT_TRUE(db->JobTasks("nope")->empty());
}

TEST(LogDbTest, CostModelsAreKeptPerWorkloadTargetAndCompiler) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  CostModelRow m{"wk1", "llvm", "0.1.0", 40, std::string("\x00{model}\xff", 9), 10};
  ASSERT_TRUE(db->SaveCostModel(m).ok());
  auto got = db->GetCostModel("wk1", "llvm", "0.1.0");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->model, m.model);  // binary-safe
  EXPECT_EQ((*got)->trained_on, 40);
  m.trained_on = 48;
  m.model = "newer";
  ASSERT_TRUE(db->SaveCostModel(m).ok());
  EXPECT_EQ((*db->GetCostModel("wk1", "llvm", "0.1.0"))->model, "newer");
  EXPECT_FALSE(db->GetCostModel("wk1", "llvm", "0.2.0")->has_value());
  EXPECT_EQ(db->SaveCostModel({"wk1", "llvm", "0.1.0", 1, "", 0}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LogDbTest, MigratesAVersionOneFileKeepingItsJobs) {
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
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(*db->SchemaVersion(), LogDb::CurrentSchemaVersion());
  auto job = db->GetJob("old");
  ASSERT_TRUE(job.ok() && job->has_value()) << job.status();
  EXPECT_EQ((*job)->trials_done, 4);
  EXPECT_EQ((*job)->tuning_ms, 0);
}

TEST(LogDbTest, AgentsUpsert) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  AgentRow a{"a1", "x86", "llvm", "8 cores", "0.1.0", 100, 100, 0};
  ASSERT_TRUE(db->UpsertAgent(a).ok());
  ASSERT_TRUE(db->UpsertAgent({"a0", "arm", "llvm -mtriple=aarch64", "", "0.1.0", 5, 5, 0}).ok());
  a.first_seen_unix_ms = 500;  // a reconnect: first seen stays 100
  a.last_seen_unix_ms = 600;
  a.results = 7;
  a.hardware = "16 cores";
  ASSERT_TRUE(db->UpsertAgent(a).ok());
  auto agents = db->ListAgents();
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->size(), 2u);
  EXPECT_EQ((*agents)[0].id, "a0");
  const AgentRow& got = (*agents)[1];
  EXPECT_EQ(got.id, "a1");
  EXPECT_EQ(got.first_seen_unix_ms, 100);
  EXPECT_EQ(got.last_seen_unix_ms, 600);
  EXPECT_EQ(got.results, 7);
  EXPECT_EQ(got.hardware, "16 cores");
}

TEST(LogDbTest, ArtifactMetadata) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  std::string sha(64, 'b');
  EXPECT_FALSE(db->GetArtifact(sha)->has_value());
  ASSERT_TRUE(db->AddArtifact({sha, 1234, "module", "j1", 77}).ok());
  ASSERT_TRUE(db->AddArtifact({sha, 1234, "module", "j1", 77}).ok());  // idempotent
  auto got = db->GetArtifact(sha);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->size, 1234);
  EXPECT_EQ((*got)->kind, "module");
  EXPECT_EQ((*got)->job_id, "j1");
  EXPECT_EQ((*got)->created_unix_ms, 77);
}

// Listing by kind (oldest first) and deleting: the tracker's collection of
// uploaded models no job uses.
TEST(LogDbTest, ArtifactsListedByKindAndDeleted) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  ASSERT_TRUE(db->AddArtifact({b, 2, "model", "", 20}).ok());
  ASSERT_TRUE(db->AddArtifact({a, 1, "model", "j1", 10}).ok());
  ASSERT_TRUE(db->AddArtifact({c, 3, "module", "j1", 5}).ok());
  auto models = db->ListArtifacts("model");
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 2u);
  EXPECT_EQ((*models)[0].sha256, a);
  EXPECT_EQ((*models)[1].sha256, b);
  EXPECT_EQ((*models)[1].size, 2);
  ASSERT_TRUE(db->DeleteArtifact(a).ok());
  ASSERT_TRUE(db->DeleteArtifact(a).ok());  // gone already: no error
  models = db->ListArtifacts("model");
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].sha256, b);
  EXPECT_TRUE(db->GetArtifact(c)->has_value());
}

void ExpectSameRecord(const RecordRow& a, const RecordRow& b) {
  EXPECT_EQ(a.workload_key, b.workload_key);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.error_kind, b.error_kind);
  EXPECT_EQ(a.error_message, b.error_message);
  EXPECT_EQ(a.costs_s, b.costs_s);
  EXPECT_EQ(a.mean_cost_s, b.mean_cost_s);
  EXPECT_EQ(a.compiler_version, b.compiler_version);
  EXPECT_EQ(a.agent_id, b.agent_id);
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.unix_ms, b.unix_ms);
  EXPECT_EQ(a.farm, b.farm);
  EXPECT_EQ(a.owner, b.owner);
}

TEST(LogDbTest, ExportImportRoundTrip) {
  TempDir dir;
  auto src = OpenOrDie(dir.DbUrl("src.db"));
  ASSERT_TRUE(src->UpsertWorkload({"wk1", "conv2d", "conv2d(\"x\"\n,1)", 1.5e9}).ok());
  RecordRow r1 = Record("t=1", 1.0 / 3.0);
  r1.unix_ms = 1700000000123;
  r1.owner = "alice";
  RecordRow r2 = Record("t=2", 0, ErrorKind::kWrongResult);
  r2.error_message = "max abs diff 0.5 \"quoted\"\tand\\ \x01 ünïcode";
  ASSERT_TRUE(src->AddRecord(r1).ok());
  ASSERT_TRUE(src->AddRecord(r2).ok());

  std::stringstream jsonl;
  ASSERT_TRUE(src->ExportJsonl(jsonl).ok());
  std::string text = jsonl.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);

  auto dst = OpenOrDie(dir.DbUrl("dst.db"));
  std::stringstream in1(text);
  auto added = dst->ImportJsonl(in1);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 2);
  auto w = dst->GetWorkload("wk1");
  ASSERT_TRUE(w.ok() && w->has_value()) << w.status();
  EXPECT_EQ((*w)->canonical, "conv2d(\"x\"\n,1)");
  EXPECT_EQ((*w)->flops, 1.5e9);
  auto src_rows = src->QueryRecords("", "", 0);
  auto dst_rows = dst->QueryRecords("", "", 0);
  ASSERT_TRUE(src_rows.ok() && dst_rows.ok());
  ASSERT_EQ(dst_rows->size(), 2u);
  for (size_t i = 0; i < 2; ++i) ExpectSameRecord((*src_rows)[i], (*dst_rows)[i]);

  // A second import adds nothing: every record is already present.
  std::stringstream in2(text);
  auto again = dst->ImportJsonl(in2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(dst->QueryRecords("", "", 0)->size(), 2u);

  // Exporting the copy gives the same text.
  std::stringstream out2;
  ASSERT_TRUE(dst->ExportJsonl(out2).ok());
  EXPECT_EQ(out2.str(), text);
}

// Logs travel between farms: an export names its own records' farm, an
// import keeps each record's farm (and names lines without one), the target
// and compiler version stay, and a record two farms both hold is merged.
TEST(LogDbTest, ProvenanceTravelsWithTheRecords) {
  TempDir dir;
  auto a = OpenOrDie(dir.DbUrl("site-a.db"));
  ASSERT_TRUE(a->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  RecordRow mine = Record("t=1", 1e-3);
  mine.target = "opencl -device=H100";
  mine.compiler_version = "0.6.0";
  ASSERT_TRUE(a->AddRecord(mine).ok());
  std::stringstream from_a;
  ASSERT_TRUE(a->ExportJsonl(from_a, "site-a").ok());
  EXPECT_NE(from_a.str().find("\"farm\":\"site-a\""), std::string::npos) << from_a.str();

  auto b = OpenOrDie(dir.DbUrl("site-b.db"));
  ASSERT_TRUE(b->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  ASSERT_TRUE(b->AddRecord(Record("t=2", 2e-3)).ok());  // site b's own
  std::stringstream in(from_a.str());
  ASSERT_EQ(*b->ImportJsonl(in), 1);
  auto rows = b->QueryRecords("wk1", "opencl -device=H100", 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].farm, "site-a");
  EXPECT_EQ((*rows)[0].compiler_version, "0.6.0");

  // Back to site a, with site b's own record: a's record merges (it is
  // a's, whatever farm the file names), b's arrives named "site-b".
  std::stringstream from_b;
  ASSERT_TRUE(b->ExportJsonl(from_b, "site-b").ok());
  std::stringstream back(from_b.str());
  ASSERT_EQ(*a->ImportJsonl(back), 1);
  auto all = a->QueryRecords("wk1", "", 0);
  ASSERT_EQ(all->size(), 2u);
  std::set<std::string> farms;
  for (const RecordRow& r : *all) farms.insert(r.farm);
  EXPECT_EQ(farms, (std::set<std::string>{"", "site-b"}));

  // A line without a farm (an export from before provenance) takes the
  // importer's name for its source.
  std::string old_line = from_a.str();
  const size_t at = old_line.find(",\"farm\":\"site-a\"");
  ASSERT_NE(at, std::string::npos);
  old_line.erase(at, std::string(",\"farm\":\"site-a\"").size());
  auto c = OpenOrDie(dir.DbUrl("site-c.db"));
  std::stringstream legacy(old_line);
  ASSERT_EQ(*c->ImportJsonl(legacy, "archive-2025"), 1);
  EXPECT_EQ((*c->QueryRecords("", "", 0))[0].farm, "archive-2025");
}

TEST(LogDbTest, MalformedLineFailsWithLineNumberAndChangesNothing) {
  TempDir dir;
  auto src = OpenOrDie(dir.DbUrl("src.db"));
  ASSERT_TRUE(src->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  ASSERT_TRUE(src->AddRecord(Record("t=1", 1e-3)).ok());
  ASSERT_TRUE(src->AddRecord(Record("t=2", 2e-3)).ok());
  std::stringstream out;
  ASSERT_TRUE(src->ExportJsonl(out).ok());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(out, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);

  auto dst = OpenOrDie(dir.DbUrl("dst.db"));
  std::stringstream bad(lines[0] + "\n\n" + lines[1] +
                        "\n{\"workload\": {\"key\": \"x\"}, oops}\n");
  auto result = dst->ImportJsonl(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("line 4"), std::string::npos) << result.status();
  EXPECT_TRUE(dst->QueryRecords("", "", 0)->empty());
  EXPECT_FALSE(dst->GetWorkload("wk1")->has_value());

  // A well-formed JSON line that lacks a field also names its line.
  std::stringstream missing(lines[0] + "\n{\"workload\":{\"key\":\"k\"},\"target\":\"t\"}\n");
  auto r2 = dst->ImportJsonl(missing);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("line 2"), std::string::npos) << r2.status();
  EXPECT_NE(r2.status().message().find("config"), std::string::npos) << r2.status();
  EXPECT_TRUE(dst->QueryRecords("", "", 0)->empty());

  // An error kind without a name in the vocabulary also names its line.
  std::string unknown = lines[1];
  const std::string none = "\"error_kind\":\"none\"";
  ASSERT_NE(unknown.find(none), std::string::npos) << unknown;
  unknown.replace(unknown.find(none), none.size(), "\"error_kind\":\"exploded\"");
  std::stringstream kind(lines[0] + "\n" + unknown + "\n");
  auto r3 = dst->ImportJsonl(kind);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r3.status().message().find("line 2"), std::string::npos) << r3.status();
  EXPECT_NE(r3.status().message().find("unknown error kind 'exploded'"), std::string::npos)
      << r3.status();
  EXPECT_TRUE(dst->QueryRecords("", "", 0)->empty());
}

TEST(LogDbTest, ConcurrentWritersFromThreads) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        EXPECT_TRUE(db->AddRecord(Record("t=" + std::to_string(t * 100 + i), 1e-3)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(*db->CountRecords("job-1"), 100);
}

}  // namespace
}  // namespace kiln::storage
