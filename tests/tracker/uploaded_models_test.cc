// The upload quota and the collection of uploaded models no job uses, on a
// FakeClock with a real SQLite file and store.
#include "tracker/uploaded_models.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/storage/test_util.h"
#include "tracker/job_options.h"

namespace kiln::tracker {
namespace {

class UploadedModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = storage::FarmStore::Open(dir_.File("kiln.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto store = storage::ArtifactStore::Open(dir_.File("artifacts"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    models_ = std::make_unique<UploadedModels>(db_.get(), store_.get(), &clock_,
                                               UploadedModelsOptions{100, 1000});
  }
  // Stores `bytes` as `user`'s upload would; returns the digest.
  std::string Upload(const std::string& user, const std::string& bytes) {
    EXPECT_TRUE(models_->Charge(user, static_cast<int64_t>(bytes.size())).ok());
    auto sha = store_->Put(bytes);
    EXPECT_TRUE(sha.ok());
    EXPECT_TRUE(db_->AddArtifact({*sha, static_cast<int64_t>(bytes.size()),
                                  storage::ArtifactKind::kModel, "", clock_.NowMs()})
                    .ok());
    models_->Stored(user, *sha, static_cast<int64_t>(bytes.size()),
                    static_cast<int64_t>(bytes.size()));
    return *sha;
  }

  storage::testing::TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<storage::FarmStore> db_;
  std::unique_ptr<storage::ArtifactStore> store_;
  std::unique_ptr<UploadedModels> models_;
};

TEST_F(UploadedModelsTest, QuotaCountsArrivingAndUnusedBytesOfEachUser) {
  ASSERT_TRUE(models_->Charge("ana", 60).ok());
  absl::Status st = models_->Charge("ana", 50);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("ana's uploads that no job uses yet (60 bytes)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("--upload-quota-bytes"), std::string::npos);
  EXPECT_TRUE(models_->Charge("bo", 90).ok());  // a quota of his own
  models_->Refund("ana", 60);                   // that upload failed
  EXPECT_EQ(models_->BytesOf("ana"), 0);
  const std::string sha = Upload("ana", std::string(40, 'm'));
  // The same model again counts once.
  ASSERT_TRUE(models_->Charge("ana", 40).ok());
  models_->Stored("ana", sha, 40, 40);
  EXPECT_EQ(models_->BytesOf("ana"), 40);
  EXPECT_TRUE(models_->Charge("ana", 60).ok());
  EXPECT_FALSE(models_->Charge("ana", 1).ok());
}

TEST_F(UploadedModelsTest, UnusedUploadsGoAfterTheGracePeriodJobsFilesStay) {
  const std::string model = Upload("ana", "model bytes");
  const std::string data = Upload("ana", "external data");
  const std::string junk = Upload("ana", "junk");
  const std::string again = Upload("bo", "uploaded again later");
  storage::JobRow job;
  job.id = "job-1";
  job.model_sha256 = model;
  StoredOptions options;
  options.external_data["w.bin"] = data;
  job.options_json = OptionsToJson(options);
  job.created_unix_ms = job.updated_unix_ms = clock_.NowMs();
  ASSERT_TRUE(db_->CreateJob(job).ok());

  // Within the grace period nothing goes.
  clock_.Advance(999);
  auto n = models_->Collect();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(models_->BytesOf("ana"), 4);  // the job's files left her quota
  // Bo uploads his again: its grace starts over.
  clock_.Advance(500);
  ASSERT_TRUE(models_->Charge("bo", 20).ok());
  models_->Stored("bo", again, 20, 20);
  n = models_->Collect();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_FALSE(store_->Contains(junk));
  EXPECT_FALSE(db_->GetArtifact(junk)->has_value());
  EXPECT_EQ(models_->BytesOf("ana"), 0);
  EXPECT_TRUE(store_->Contains(model));
  EXPECT_TRUE(store_->Contains(data));
  EXPECT_TRUE(store_->Contains(again));
  clock_.Advance(1000);
  n = models_->Collect();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_FALSE(store_->Contains(again));
  EXPECT_EQ(models_->BytesOf("bo"), 0);
  EXPECT_TRUE(store_->Contains(model));  // a job's, whatever its age
}

}  // namespace
}  // namespace kiln::tracker
