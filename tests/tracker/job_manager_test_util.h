#pragma once
// What the job manager's tests share: a fixture with a real SQLite file, an
// artifact store, a dispatcher and a FakeClock (JobManagerTest), and results
// made up for a batch (Measured).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <set>
#include <thread>

#include "base/str.h"
#include "compiler/kernel.h"
#include "storage/stores.h"
#include "tests/tracker/test_models.h"
#include "tracker/job_manager.h"
#include "tracker/job_options.h"

namespace kiln::tracker {

namespace fs = std::filesystem;
inline constexpr const char* kTarget = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic";

// One successful result with these costs for every candidate of the batch.
inline std::vector<MeasureOutcome> Measured(const MeasureWork& work,
                                            const std::vector<double>& costs) {
  std::vector<MeasureOutcome> results;
  for (const auto& c : work.candidates) {
    MeasureOutcome o;
    o.candidate_index = c.candidate_index;
    o.costs_s = costs;
    results.push_back(o);
  }
  return results;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-jm-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto store = storage::ArtifactStore::Open((dir_ / "artifacts").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    StartWithEmptyDatabase();
  }
  // A new, empty log database, and the tracker's parts on it.
  void StartWithEmptyDatabase() {
    jobs_.reset();
    agents_.reset();
    db_ = {};
    fs::remove(dir_ / "kiln.db");
    auto db = storage::OpenStores((dir_ / "kiln.db").string());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    agents_ = std::make_unique<AgentRegistry>(db_.farm.get(), &clock_);
    dispatcher_ = std::make_unique<Dispatcher>(&clock_);
    jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                         agents_.get(), dispatcher_.get(), &clock_);
  }
  void TearDown() override {
    jobs_.reset();
    fs::remove_all(dir_);
  }

  // Uploads bytes as the tracker's UploadModel does; returns their digest.
  std::string Upload(const std::string& bytes) {
    auto upload = jobs_->NewUpload();
    EXPECT_TRUE(upload.ok()) << upload.status();
    EXPECT_TRUE(
        (*upload)->Add(bytes, 0, static_cast<int64_t>(bytes.size()), kiln::Sha256Hex(bytes)).ok());
    auto stored = (*upload)->Finish();
    EXPECT_TRUE(stored.ok()) << stored.status();
    uploaded_.insert(stored->sha256);
    return stored->sha256;
  }

  SubmitRequest Request(std::string model) {
    SubmitRequest r;
    if (!model.empty()) r.model_sha256 = Upload(model);
    r.model_name = "m";
    r.target = kTarget;
    r.device_key = "cpu";
    r.trials = 8;
    return r;
  }

  // Submit, again while the owner's slots are taken (RESOURCE_EXHAUSTED),
  // until `within` has passed.
  absl::StatusOr<SubmitResult> SubmitWithin(const SubmitRequest& req,
                                            std::chrono::milliseconds within) {
    const auto until = std::chrono::steady_clock::now() + within;
    while (true) {
      absl::StatusOr<SubmitResult> r = jobs_->Submit(req);
      if (r.status().code() != absl::StatusCode::kResourceExhausted ||
          std::chrono::steady_clock::now() >= until) {
        return r;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Nothing was stored: no job row, no file but the uploaded models.
  void ExpectNothingStored() {
    auto jobs = db_.farm->ListJobs();
    ASSERT_TRUE(jobs.ok());
    EXPECT_TRUE(jobs->empty());
    size_t files = 0;
    if (fs::exists(dir_ / "artifacts")) {
      for (const auto& e : fs::recursive_directory_iterator(dir_ / "artifacts")) {
        files += e.is_regular_file();
      }
    }
    EXPECT_EQ(files, uploaded_.size());
  }
  std::set<std::string> uploaded_;

  fs::path dir_;
  FakeClock clock_;
  storage::Stores db_;
  std::unique_ptr<storage::ArtifactStore> store_;
  std::unique_ptr<AgentRegistry> agents_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<JobManager> jobs_;
};

}  // namespace kiln::tracker
