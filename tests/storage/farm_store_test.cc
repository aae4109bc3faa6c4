// The farm store (storage/farm_store.h): jobs, tokens, agents, artifacts.
#include "storage/farm_store.h"

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

TEST(FarmStoreTest, OnlyAnAgentsTokenHasAnOwner) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  TokenRow t;
  t.user = "rpi-7";
  t.role = Role::kAgent;
  t.owner = "alice";
  t.hash = std::string(64, 'a');
  ASSERT_TRUE(db.farm->AddToken(t).ok());
  auto back = db.farm->TokenByHash(t.hash);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->owner, "alice");
  t.role = Role::kUser;
  t.hash = std::string(64, 'b');
  EXPECT_EQ(db.farm->AddToken(t).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FarmStoreTest, JobsCrud) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  ASSERT_TRUE(db.farm->CreateJob(TestJob("j1", 10)).ok());
  ASSERT_TRUE(db.farm->CreateJob(TestJob("j2", 20, JobState::kCompleted)).ok());
  ASSERT_TRUE(db.farm->CreateJob(TestJob("j3", 30, JobState::kTuning)).ok());
  absl::Status dup = db.farm->CreateJob(TestJob("j1", 40));
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;

  JobRow j = TestJob("j1", 999, JobState::kTuning);
  j.trials_done = 42;
  j.error = "";
  j.updated_unix_ms = 50;
  j.tuning_ms = 1234;
  ASSERT_TRUE(db.farm->UpdateJob(j).ok());
  auto got = db.farm->GetJob("j1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->state, JobState::kTuning);
  EXPECT_EQ((*got)->trials_done, 42);
  EXPECT_EQ((*got)->trials, 100);
  EXPECT_EQ((*got)->options_json, R"({"number":3})");
  EXPECT_EQ((*got)->created_unix_ms, 10);  // creation time never changes
  EXPECT_EQ((*got)->updated_unix_ms, 50);
  EXPECT_EQ((*got)->tuning_ms, 1234);

  EXPECT_EQ(db.farm->UpdateJob(TestJob("nope", 1)).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(db.farm->GetJob("nope")->has_value());

  auto list = db.farm->ListJobs();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, "j3");
  EXPECT_EQ((*list)[2].id, "j1");

  auto unfinished = db.farm->UnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 2u);
  EXPECT_EQ((*unfinished)[0].id, "j1");
  EXPECT_EQ((*unfinished)[1].id, "j3");
}

TEST(FarmStoreTest, AgentsUpsert) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  AgentRow a{"a1", "x86", "llvm", "8 cores", "0.1.0", 100, 100, 0};
  ASSERT_TRUE(db.farm->UpsertAgent(a).ok());
  ASSERT_TRUE(
      db.farm->UpsertAgent({"a0", "arm", "llvm -mtriple=aarch64", "", "0.1.0", 5, 5, 0}).ok());
  a.first_seen_unix_ms = 500;  // a reconnect: first seen stays 100
  a.last_seen_unix_ms = 600;
  a.results = 7;
  a.hardware = "16 cores";
  ASSERT_TRUE(db.farm->UpsertAgent(a).ok());
  auto agents = db.farm->ListAgents();
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

TEST(FarmStoreTest, ArtifactMetadata) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  std::string sha(64, 'b');
  EXPECT_FALSE(db.farm->GetArtifact(sha)->has_value());
  ASSERT_TRUE(db.farm->AddArtifact({sha, 1234, ArtifactKind::kModule, "j1", 77}).ok());
  ASSERT_TRUE(
      db.farm->AddArtifact({sha, 1234, ArtifactKind::kModule, "j1", 77}).ok());  // idempotent
  auto got = db.farm->GetArtifact(sha);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->size, 1234);
  EXPECT_EQ((*got)->kind, ArtifactKind::kModule);
  EXPECT_EQ((*got)->job_id, "j1");
  EXPECT_EQ((*got)->created_unix_ms, 77);
}

// Listing by kind (oldest first) and deleting: the tracker's collection of
// uploaded models no job uses.
TEST(FarmStoreTest, ArtifactsListedByKindAndDeleted) {
  TempDir dir;
  auto db = OpenOrDie(dir.DbUrl("log.db"));
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  ASSERT_TRUE(db.farm->AddArtifact({b, 2, ArtifactKind::kModel, "", 20}).ok());
  ASSERT_TRUE(db.farm->AddArtifact({a, 1, ArtifactKind::kModel, "j1", 10}).ok());
  ASSERT_TRUE(db.farm->AddArtifact({c, 3, ArtifactKind::kModule, "j1", 5}).ok());
  auto models = db.farm->ListArtifacts(ArtifactKind::kModel);
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->size(), 2u);
  EXPECT_EQ((*models)[0].sha256, a);
  EXPECT_EQ((*models)[1].sha256, b);
  EXPECT_EQ((*models)[1].size, 2);
  ASSERT_TRUE(db.farm->DeleteArtifact(a).ok());
  ASSERT_TRUE(db.farm->DeleteArtifact(a).ok());  // gone already: no error
  models = db.farm->ListArtifacts(ArtifactKind::kModel);
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].sha256, b);
  EXPECT_TRUE(db.farm->GetArtifact(c)->has_value());
}

}  // namespace
}  // namespace kiln::storage
