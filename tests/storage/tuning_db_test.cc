// The tuning database (storage/tuning_db.h): workloads, records, job tasks,
// cost models and the JSON lines export and import.
#include "storage/tuning_db.h"

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
using testing::TestRecord;

TEST(TuningDbTest, WorkloadUpsertAndGet) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_FALSE(db.tuning->GetWorkload("wk1")->has_value());
  ASSERT_TRUE(db.tuning->UpsertWorkload({"wk1", "dense", "dense(1,2)", 4.0}).ok());
  ASSERT_TRUE(db.tuning->UpsertWorkload({"wk1", "dense", "dense(1,2)", 8.0}).ok());
  auto w = db.tuning->GetWorkload("wk1");
  ASSERT_TRUE(w.ok() && w->has_value());
  EXPECT_EQ((*w)->op, "dense");
  EXPECT_EQ((*w)->canonical, "dense(1,2)");
  EXPECT_EQ((*w)->flops, 8.0);
}

TEST(TuningDbTest, BestRecordPicksLowestSuccessful) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  EXPECT_FALSE(db.tuning->BestRecord("wk1", "llvm -mcpu=skylake")->has_value());
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=1", 3e-3)).ok());
  auto id2 = db.tuning->AddRecord(TestRecord("t=2", 1e-3));
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=3", 2e-3)).ok());
  // Failures have mean 0 and must never win.
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=4", 0, ErrorKind::kRuntime)).ok());
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=5", 0, ErrorKind::kTimeout)).ok());
  // Another target is not considered.
  RecordRow other = TestRecord("t=6", 1e-6);
  other.target = "cuda";
  ASSERT_TRUE(db.tuning->AddRecord(other).ok());

  auto best = db.tuning->BestRecord("wk1", "llvm -mcpu=skylake");
  ASSERT_TRUE(best.ok() && best->has_value()) << best.status();
  EXPECT_EQ((*best)->id, *id2);
  EXPECT_EQ((*best)->config, "t=2");
  EXPECT_EQ((*best)->mean_cost_s, 1e-3);
  EXPECT_EQ((*best)->costs_s, (std::vector<double>{1e-3 * 0.9, 1e-3 * 1.1}));
  EXPECT_EQ((*best)->compiler_version, "0.1.0");

  auto top = db.tuning->TopK("wk1", "llvm -mcpu=skylake", 2);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 2u);
  EXPECT_EQ((*top)[0].config, "t=2");
  EXPECT_EQ((*top)[1].config, "t=3");

  auto all = db.tuning->QueryRecords("", "", 0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 6u);
  auto cuda = db.tuning->QueryRecords("wk1", "cuda", 0);
  ASSERT_TRUE(cuda.ok());
  ASSERT_EQ(cuda->size(), 1u);
  EXPECT_EQ((*cuda)[0].config, "t=6");
  EXPECT_EQ(db.tuning->QueryRecords("", "", 3)->size(), 3u);
  // Pages: the rest after an offset, in the same order.
  EXPECT_EQ(db.tuning->QueryRecords("", "", 2, 5)->size(), 1u);
  EXPECT_EQ((*db.tuning->QueryRecords("", "", 1, 2))[0].id, (*all)[2].id);
  auto job = db.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->size(), 6u);
  auto page = db.tuning->RecordsOfJob("job-1", 4, 4);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, (*job)[4].id);
  EXPECT_EQ(*db.tuning->CountRecords("job-1"), 6);
  EXPECT_EQ(*db.tuning->CountRecords("job-2"), 0);
  // One config's best only: its fastest success, none for a failed one.
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=3", 1.5e-3)).ok());
  auto of3 = db.tuning->BestRecord("wk1", "llvm -mcpu=skylake", "t=3");
  ASSERT_TRUE(of3.ok() && of3->has_value()) << of3.status();
  EXPECT_EQ((*of3)->mean_cost_s, 1.5e-3);
  auto of4 = db.tuning->BestRecord("wk1", "llvm -mcpu=skylake", "t=4");
  ASSERT_TRUE(of4.ok()) << of4.status();
  EXPECT_FALSE(of4->has_value());
}

// Records keep the owner of the agent that measured them; a scoped query
// reads the farm's ("") and that user's only.
TEST(TuningDbTest, ScopedQueriesReadTheFarmsAndTheUsersRecordsOnly) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  RecordRow farm = TestRecord("farm", 2.0), alice = TestRecord("alice", 1.0),
            bob = TestRecord("bob", 0.5);
  alice.owner = "alice";
  bob.owner = "bob";
  RecordRow bob_failed = TestRecord("bob-failed", 0, ErrorKind::kRuntime);
  bob_failed.owner = "bob";
  ASSERT_TRUE(db.tuning->AddRecords({farm, alice, bob, bob_failed}).ok());
  auto configs = [](const std::vector<RecordRow>& rows) {
    std::set<std::string> out;
    for (const RecordRow& r : rows) out.insert(r.config);
    return out;
  };
  const std::string t = farm.target;
  EXPECT_EQ(db.tuning->BestRecord("wk1", t, "", RecordScope::Of("alice"))->value().config, "alice");
  EXPECT_EQ(db.tuning->BestRecord("wk1", t, "", RecordScope::Of("carol"))->value().config, "farm");
  EXPECT_EQ(db.tuning->BestRecord("wk1", t)->value().config, "bob");  // all
  EXPECT_EQ(configs(*db.tuning->TopK("wk1", t, 10, "", RecordScope::Of("alice"))),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(configs(*db.tuning->QueryRecords("", "", 0, 0, RecordScope::Of("alice"))),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(*db.tuning->MeasuredConfigs("wk1", t, "0.1.0", RecordScope::Of("alice")),
            (std::set<std::string>{"farm", "alice"}));
  EXPECT_EQ(*db.tuning->MeasuredConfigs("wk1", t, "0.1.0"),
            (std::set<std::string>{"farm", "alice", "bob", "bob-failed"}));
  auto rows = db.tuning->QueryRecords("", "", 0);
  ASSERT_TRUE(rows.ok());
  for (const RecordRow& r : *rows) {
    EXPECT_EQ(r.owner, r.config == "farm" ? "" : r.config.substr(0, r.config.find('-')));
  }
}

TEST(TuningDbTest, RejectsInvalidRecord) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  RecordRow r = TestRecord("t=1", 1e-3);
  r.error_kind = static_cast<ErrorKind>(99);
  auto id = db.tuning->AddRecord(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(id.status().message().find("99"), std::string::npos) << id.status();
}

// Costs are written and read in chunks (storage/tuning_db.cc): a vector
// longer than a chunk, and more records than a chunk, come back whole and in
// order.
TEST(TuningDbTest, LongCostVectorsAndManyRecordsRoundTrip) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  std::vector<RecordRow> rows;
  for (int i = 0; i < 150; ++i) {
    RecordRow r = TestRecord(StrCat("t=", i), 1e-3);
    r.costs_s.clear();
    for (int k = 0; k < i % 131; ++k) r.costs_s.push_back(1e-3 + 1e-6 * (i * 1000 + k));
    if (r.costs_s.empty()) {
      r.error_kind = ErrorKind::kRuntime;
      r.mean_cost_s = 0;
    }
    rows.push_back(r);
  }
  ASSERT_TRUE(db.tuning->AddRecords(rows).ok());
  auto back = db.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ((*back)[i].config, rows[i].config);
    EXPECT_EQ((*back)[i].costs_s, rows[i].costs_s) << i;
  }
  std::stringstream jsonl;
  ASSERT_TRUE(db.tuning->ExportJsonl(jsonl).ok());
  TempDir other;
  auto copy = OpenOrDie(other.DbUrl("copy.db"));
  ASSERT_EQ(*copy.tuning->ImportJsonl(jsonl), 150);
  auto copied = copy.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_EQ(copied->size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ((*copied)[i].costs_s, rows[i].costs_s) << i;
  // Importing the same lines again adds nothing: each is already there.
  std::stringstream again;
  ASSERT_TRUE(db.tuning->ExportJsonl(again).ok());
  EXPECT_EQ(*copy.tuning->ImportJsonl(again), 0);
}

// A record timed once (cut short) says so after it is stored, exported and
// imported, and one timed in full does not.
TEST(TuningDbTest, ACutShortRecordStaysCutShort) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  RecordRow once = TestRecord("t=1", 9e-3), full = TestRecord("t=2", 1e-3);
  once.cut_short = true;
  once.costs_s = {9e-3};
  ASSERT_TRUE(db.tuning->AddRecords({once, full}).ok());
  auto back = db.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_TRUE((*back)[0].cut_short);
  EXPECT_FALSE((*back)[1].cut_short);
  std::stringstream jsonl;
  ASSERT_TRUE(db.tuning->ExportJsonl(jsonl).ok());
  EXPECT_NE(jsonl.str().find("\"cut_short\":true"), std::string::npos) << jsonl.str();
  TempDir other;
  auto copy = OpenOrDie(other.DbUrl("copy.db"));
  ASSERT_EQ(*copy.tuning->ImportJsonl(jsonl), 2);
  auto copied = copy.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(copied.ok()) << copied.status();
  ASSERT_EQ(copied->size(), 2u);
  EXPECT_TRUE((*copied)[0].cut_short);
  EXPECT_FALSE((*copied)[1].cut_short);
  // A line of an export before schema 9 has no cut_short: not cut short.
  std::string line = jsonl.str().substr(0, jsonl.str().find('\n'));
  const std::string field = ",\"cut_short\":true";
  line.erase(line.find(field), field.size());
  line.replace(line.find("\"t=1\""), 5, "\"t=7\"");
  std::stringstream old(line + "\n");
  ASSERT_EQ(*copy.tuning->ImportJsonl(old), 1);
  copied = copy.tuning->RecordsOfJob("job-1");
  ASSERT_TRUE(copied.ok() && copied->size() == 3u);
  EXPECT_FALSE((*copied)[2].cut_short);
}

TEST(TuningDbTest, MeasuredConfigsPerCompilerVersion) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=1", 1e-3)).ok());
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=2", 0, ErrorKind::kCompile)).ok());
  ASSERT_TRUE(db.tuning->AddRecord(TestRecord("t=1", 2e-3)).ok());
  RecordRow newer = TestRecord("t=9", 1e-3);
  newer.compiler_version = "0.2.0";
  ASSERT_TRUE(db.tuning->AddRecord(newer).ok());
  auto measured = db.tuning->MeasuredConfigs("wk1", "llvm -mcpu=skylake", "0.1.0");
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(*measured, (std::set<std::string>{"t=1", "t=2"}));
  EXPECT_EQ(*db.tuning->MeasuredConfigs("wk1", "llvm -mcpu=skylake", "0.2.0"),
            (std::set<std::string>{"t=9"}));
  EXPECT_TRUE(db.tuning->MeasuredConfigs("wk2", "llvm -mcpu=skylake", "0.1.0")->empty());
}

TEST(TuningDbTest, JobTasksAreReplacedAsAWhole) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db.tuning->SetJobTasks("j1", {{"wk-b", 3}, {"wk-a", 1}}).ok());
  ASSERT_TRUE(db.tuning->SetJobTasks("j2", {{"wk-c", 2}}).ok());
  auto tasks = db.tuning->JobTasks("j1");
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].workload_key, "wk-b");
  EXPECT_EQ((*tasks)[0].occurrences, 3);
  EXPECT_EQ((*tasks)[1].workload_key, "wk-a");
  ASSERT_TRUE(db.tuning->SetJobTasks("j1", {{"wk-d", 5}}).ok());
  tasks = db.tuning->JobTasks("j1");
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].workload_key, "wk-d");
  EXPECT_EQ(db.tuning->JobTasks("j2")->size(), 1u);
  EXPECT_TRUE(db.tuning->JobTasks("nope")->empty());
}

TEST(TuningDbTest, CostModelsAreKeptPerWorkloadTargetAndCompiler) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  CostModelRow m{"wk1", "llvm", "0.1.0", 40, std::string("\x00{model}\xff", 9), 10};
  ASSERT_TRUE(db.tuning->SaveCostModel(m).ok());
  auto got = db.tuning->GetCostModel("wk1", "llvm", "0.1.0");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->model, m.model);  // binary-safe
  EXPECT_EQ((*got)->trained_on, 40);
  m.trained_on = 48;
  m.model = "newer";
  ASSERT_TRUE(db.tuning->SaveCostModel(m).ok());
  EXPECT_EQ((*db.tuning->GetCostModel("wk1", "llvm", "0.1.0"))->model, "newer");
  EXPECT_FALSE(db.tuning->GetCostModel("wk1", "llvm", "0.2.0")->has_value());
  EXPECT_EQ(db.tuning->SaveCostModel({"wk1", "llvm", "0.1.0", 1, "", 0}).code(),
            absl::StatusCode::kInvalidArgument);
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

TEST(TuningDbTest, ExportImportRoundTrip) {
  TempDir dir;
  auto src = OpenOrDie(dir.DbUrl("src.db"));
  ASSERT_TRUE(src.tuning->UpsertWorkload({"wk1", "conv2d", "conv2d(\"x\"\n,1)", 1.5e9}).ok());
  RecordRow r1 = TestRecord("t=1", 1.0 / 3.0);
  r1.unix_ms = 1700000000123;
  r1.owner = "alice";
  RecordRow r2 = TestRecord("t=2", 0, ErrorKind::kWrongResult);
  r2.error_message = "max abs diff 0.5 \"quoted\"\tand\\ \x01 ünïcode";
  ASSERT_TRUE(src.tuning->AddRecord(r1).ok());
  ASSERT_TRUE(src.tuning->AddRecord(r2).ok());

  std::stringstream jsonl;
  ASSERT_TRUE(src.tuning->ExportJsonl(jsonl).ok());
  std::string text = jsonl.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);

  auto dst = OpenOrDie(dir.DbUrl("dst.db"));
  std::stringstream in1(text);
  auto added = dst.tuning->ImportJsonl(in1);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, 2);
  auto w = dst.tuning->GetWorkload("wk1");
  ASSERT_TRUE(w.ok() && w->has_value()) << w.status();
  EXPECT_EQ((*w)->canonical, "conv2d(\"x\"\n,1)");
  EXPECT_EQ((*w)->flops, 1.5e9);
  auto src_rows = src.tuning->QueryRecords("", "", 0);
  auto dst_rows = dst.tuning->QueryRecords("", "", 0);
  ASSERT_TRUE(src_rows.ok() && dst_rows.ok());
  ASSERT_EQ(dst_rows->size(), 2u);
  for (size_t i = 0; i < 2; ++i) ExpectSameRecord((*src_rows)[i], (*dst_rows)[i]);

  // A second import adds nothing: every record is already present.
  std::stringstream in2(text);
  auto again = dst.tuning->ImportJsonl(in2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  EXPECT_EQ(dst.tuning->QueryRecords("", "", 0)->size(), 2u);

  // Exporting the copy gives the same text.
  std::stringstream out2;
  ASSERT_TRUE(dst.tuning->ExportJsonl(out2).ok());
  EXPECT_EQ(out2.str(), text);
}

// Logs travel between farms: an export names its own records' farm, an
// import keeps each record's farm (and names lines without one), the target
// and compiler version stay, and a record two farms both hold is merged.
TEST(TuningDbTest, ProvenanceTravelsWithTheRecords) {
  TempDir dir;
  auto a = OpenOrDie(dir.DbUrl("site-a.db"));
  ASSERT_TRUE(a.tuning->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  RecordRow mine = TestRecord("t=1", 1e-3);
  mine.target = "opencl -device=H100";
  mine.compiler_version = "0.6.0";
  ASSERT_TRUE(a.tuning->AddRecord(mine).ok());
  std::stringstream from_a;
  ASSERT_TRUE(a.tuning->ExportJsonl(from_a, "site-a").ok());
  EXPECT_NE(from_a.str().find("\"farm\":\"site-a\""), std::string::npos) << from_a.str();

  auto b = OpenOrDie(dir.DbUrl("site-b.db"));
  ASSERT_TRUE(b.tuning->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  ASSERT_TRUE(b.tuning->AddRecord(TestRecord("t=2", 2e-3)).ok());  // site b's own
  std::stringstream in(from_a.str());
  ASSERT_EQ(*b.tuning->ImportJsonl(in), 1);
  auto rows = b.tuning->QueryRecords("wk1", "opencl -device=H100", 0);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].farm, "site-a");
  EXPECT_EQ((*rows)[0].compiler_version, "0.6.0");

  // Back to site a, with site b's own record: a's record merges (it is
  // a's, whatever farm the file names), b's arrives named "site-b".
  std::stringstream from_b;
  ASSERT_TRUE(b.tuning->ExportJsonl(from_b, "site-b").ok());
  std::stringstream back(from_b.str());
  ASSERT_EQ(*a.tuning->ImportJsonl(back), 1);
  auto all = a.tuning->QueryRecords("wk1", "", 0);
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
  ASSERT_EQ(*c.tuning->ImportJsonl(legacy, "archive-2025"), 1);
  EXPECT_EQ((*c.tuning->QueryRecords("", "", 0))[0].farm, "archive-2025");
}

TEST(TuningDbTest, MalformedLineFailsWithLineNumberAndChangesNothing) {
  TempDir dir;
  auto src = OpenOrDie(dir.DbUrl("src.db"));
  ASSERT_TRUE(src.tuning->UpsertWorkload({"wk1", "dense", "dense", 1}).ok());
  ASSERT_TRUE(src.tuning->AddRecord(TestRecord("t=1", 1e-3)).ok());
  ASSERT_TRUE(src.tuning->AddRecord(TestRecord("t=2", 2e-3)).ok());
  std::stringstream out;
  ASSERT_TRUE(src.tuning->ExportJsonl(out).ok());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(out, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);

  auto dst = OpenOrDie(dir.DbUrl("dst.db"));
  std::stringstream bad(lines[0] + "\n\n" + lines[1] +
                        "\n{\"workload\": {\"key\": \"x\"}, oops}\n");
  auto result = dst.tuning->ImportJsonl(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("line 4"), std::string::npos) << result.status();
  EXPECT_TRUE(dst.tuning->QueryRecords("", "", 0)->empty());
  EXPECT_FALSE(dst.tuning->GetWorkload("wk1")->has_value());

  // A well-formed JSON line that lacks a field also names its line.
  std::stringstream missing(lines[0] + "\n{\"workload\":{\"key\":\"k\"},\"target\":\"t\"}\n");
  auto r2 = dst.tuning->ImportJsonl(missing);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("line 2"), std::string::npos) << r2.status();
  EXPECT_NE(r2.status().message().find("config"), std::string::npos) << r2.status();
  EXPECT_TRUE(dst.tuning->QueryRecords("", "", 0)->empty());

  // An error kind without a name in the vocabulary also names its line.
  std::string unknown = lines[1];
  const std::string none = "\"error_kind\":\"none\"";
  ASSERT_NE(unknown.find(none), std::string::npos) << unknown;
  unknown.replace(unknown.find(none), none.size(), "\"error_kind\":\"exploded\"");
  std::stringstream kind(lines[0] + "\n" + unknown + "\n");
  auto r3 = dst.tuning->ImportJsonl(kind);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r3.status().message().find("line 2"), std::string::npos) << r3.status();
  EXPECT_NE(r3.status().message().find("unknown error kind 'exploded'"), std::string::npos)
      << r3.status();
  EXPECT_TRUE(dst.tuning->QueryRecords("", "", 0)->empty());
}

TEST(TuningDbTest, ConcurrentWritersFromThreads) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        EXPECT_TRUE(
            db.tuning->AddRecord(TestRecord("t=" + std::to_string(t * 100 + i), 1e-3)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(*db.tuning->CountRecords("job-1"), 100);
}

}  // namespace
}  // namespace kiln::storage
