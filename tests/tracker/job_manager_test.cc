// The job manager on submission: what it refuses and stores, uploads, limits,
// events, and a job no agent serves.
#include "tracker/job_manager.h"

#include "tests/tracker/job_manager_test_util.h"

namespace kiln::tracker {
namespace {

TEST_F(JobManagerTest, BadModelBytesAreInvalidArgumentAndStoreNothing) {
  auto r = jobs_->Submit(Request("this is not an onnx model at all"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("ONNX"), std::string::npos) << r.status();
  ExpectNothingStored();
}

TEST_F(JobManagerTest, EmptyModelIsInvalidArgument) {
  auto r = jobs_->Submit(Request(""));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  ExpectNothingStored();
}

TEST_F(JobManagerTest, UnsupportedOperatorIsUnimplementedAndNamed) {
  auto r = jobs_->Submit(Request(testing::UnsupportedOpModel()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("Unique"), std::string::npos) << r.status();
  ExpectNothingStored();
}

TEST_F(JobManagerTest, TrialsOutOfRange) {
  for (int trials : {0, -3, 100001}) {
    auto req = Request(testing::ConvReluModel());
    req.trials = trials;
    auto r = jobs_->Submit(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << trials;
    EXPECT_NE(std::string(r.status().message()).find("trials"), std::string::npos);
  }
  ExpectNothingStored();
}

TEST_F(JobManagerTest, MissingDeviceKey) {
  auto req = Request(testing::ConvReluModel());
  req.device_key = "";
  auto r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("device_key"), std::string::npos);
  ExpectNothingStored();
}

TEST_F(JobManagerTest, UploadOverTheLimitIsResourceExhaustedAndLeavesNothing) {
  JobManagerOptions options;
  options.max_model_bytes = 1000;
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_, options);
  // Announced too large: refused at the first chunk.
  auto upload = jobs_->NewUpload();
  ASSERT_TRUE(upload.ok());
  absl::Status st = (*upload)->Add(std::string(10, 'x'), 0, 5000, "");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "the model is 5000 bytes; this tracker accepts at most 1000 bytes (its operator sets "
            "the limit with kiln-tracker --max-model-bytes)");
  upload->reset();
  // Not announced: refused at the chunk that crosses the limit; the partial
  // file is removed with the upload.
  upload = jobs_->NewUpload();
  ASSERT_TRUE(upload.ok());
  ASSERT_TRUE((*upload)->Add(std::string(600, 'x'), 0, 0, "").ok());
  EXPECT_EQ((*upload)->Add(std::string(600, 'x'), 600, 0, "").code(),
            absl::StatusCode::kResourceExhausted);
  upload->reset();
  ExpectNothingStored();
  // The limit covers a job's model and its external data together.
  auto req = Request(std::string(600, 'm'));
  req.external_data["w.bin"] = Upload(std::string(600, 'w'));
  auto r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(std::string(r.status().message()).find("1200 bytes"), std::string::npos);
  ExpectNothingStored();
}

TEST_F(JobManagerTest, UploadsAreCheckedAndStoredOnce) {
  const std::string bytes = testing::ConvReluModel();
  auto upload = jobs_->NewUpload();
  ASSERT_TRUE(upload.ok());
  EXPECT_EQ((*upload)->Add(bytes, 5, 0, "").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*upload)->Add(bytes.substr(0, 10), 0, 0, "").ok());
  ASSERT_TRUE((*upload)->Add(bytes.substr(10), 10, 0, kiln::Sha256Hex("other")).ok());
  auto stored = (*upload)->Finish();
  EXPECT_EQ(stored.status().code(), absl::StatusCode::kDataLoss);
  upload = jobs_->NewUpload();
  ASSERT_TRUE((*upload)->Add(bytes, 0, 0, "").ok());
  EXPECT_EQ((*upload)->Finish().status().code(), absl::StatusCode::kInvalidArgument)
      << "no checksum";
  upload->reset();
  ExpectNothingStored();

  std::string sha = Upload(bytes);
  EXPECT_EQ(sha, kiln::Sha256Hex(bytes));
  upload = jobs_->NewUpload();
  ASSERT_TRUE((*upload)->Add(bytes, 0, 0, sha).ok());
  auto again = (*upload)->Finish();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_stored);
  ExpectNothingStored();  // one file
  auto art = db_.farm->GetArtifact(sha);
  ASSERT_TRUE(art.ok() && art->has_value());
  EXPECT_EQ((*art)->kind, storage::ArtifactKind::kModel);

  // A model or data file that was never uploaded.
  SubmitRequest req = Request(bytes);
  req.model_sha256 = kiln::Sha256Hex("never uploaded");
  EXPECT_EQ(jobs_->Submit(req).status().code(), absl::StatusCode::kNotFound);
  req = Request(bytes);
  req.external_data["w.bin"] = kiln::Sha256Hex("never uploaded");
  EXPECT_EQ(jobs_->Submit(req).status().code(), absl::StatusCode::kNotFound);
  req.external_data["w.bin"] = "../../etc/passwd";
  EXPECT_EQ(jobs_->Submit(req).status().code(), absl::StatusCode::kInvalidArgument);
  ExpectNothingStored();
}

TEST_F(JobManagerTest, NoTargetAndNoAgentIsFailedPrecondition) {
  auto req = Request(testing::ConvReluModel());
  req.target = "";
  req.device_key = "rpi4";
  auto r = jobs_->Submit(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(std::string(r.status().message()),
            "no agent with key rpi4 has connected; pass a target");
  ExpectNothingStored();
}

TEST_F(JobManagerTest, UnknownJobIsNotFound) {
  auto g = jobs_->Get("job-nope");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(g.status().message()), "unknown job 'job-nope'");
  EXPECT_EQ(jobs_->Cancel("job-nope").status().code(), absl::StatusCode::kNotFound);
  bool finished = false;
  size_t nope = 0;
  EXPECT_EQ(
      jobs_->WaitEvents("job-nope", &nope, std::chrono::milliseconds(0), &finished).status().code(),
      absl::StatusCode::kNotFound);
}

// A job measured by hand through the dispatcher (the test plays the agent),
// then cancelled: it stops dispatching and stays cancelled.
TEST_F(JobManagerTest, AUserHasAtMostTheLimitOfUnfinishedJobs) {
  JobManagerOptions options;
  options.max_jobs_per_user = 2;
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_, options);
  SubmitRequest req = Request(testing::ConvReluModel());
  req.owner = "ana";
  auto first = jobs_->Submit(req);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(jobs_->Submit(req).ok());
  auto third = jobs_->Submit(req);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("ana has 2 running jobs"), std::string::npos)
      << third.status();
  req.owner = "bo";
  EXPECT_TRUE(jobs_->Submit(req).ok());
  // A cancelled job no longer counts once its thread has stopped.
  ASSERT_TRUE(jobs_->Cancel(first->job_id).ok());
  req.owner = "ana";
  absl::StatusOr<SubmitResult> again = SubmitWithin(req, std::chrono::seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  auto row = db_.farm->GetJob(again->job_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->owner, "ana");
}

// A few hundred bytes of ONNX cannot make the tracker compute gigabytes of
// constants: the import's budget follows the model's size.
TEST_F(JobManagerTest, ATinyModelCannotTakeTheTrackersMemory) {
  const std::string bomb = testing::FoldBombModel();
  EXPECT_LT(bomb.size(), 400u);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  auto r = jobs_->Submit(Request(bomb));
  getrusage(RUSAGE_SELF, &after);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("constants computed at compile time would come to"),
            std::string::npos)
      << r.status();
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 100 << 10) << "KiB of peak memory grown";
  ExpectNothingStored();
}

size_t ThreadsOfThisProcess() {
  return static_cast<size_t>(
      std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator()));
}

// The security review's storm: 200 submit-then-cancel calls left hundreds of
// threads tuning for cancelled jobs. A cancelled job counts against its
// user's limit until its thread has stopped, and it stops at once.
TEST_F(JobManagerTest, SubmitAndCancelStormsStayWithinTheUsersLimit) {
  JobManagerOptions options;
  options.max_jobs_per_user = 3;
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_, options);
  SubmitRequest req = Request(testing::ConvReluModel());
  req.owner = "mallory";
  const size_t baseline = ThreadsOfThisProcess();
  size_t most = baseline;
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = jobs_->Submit(req);
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
      ++refused;
      continue;
    }
    ASSERT_TRUE(jobs_->Cancel(r->job_id).ok());
    most = std::max(most, ThreadsOfThisProcess());
  }
  // 3 running jobs, and at most one thread per slot in its last instructions
  // (its job marked ended, the thread not yet gone: on a loaded machine the
  // slot is taken again first). Without the stop check and the count of
  // stopping jobs this reached 9 in two runs of three here (on the review's
  // tracker, 297 threads).
  EXPECT_LE(most, baseline + 2 * 3) << "threads beyond the user's 3 jobs";
  // Another user is served all along.
  SubmitRequest other = req;
  other.owner = "bo";
  auto bo = jobs_->Submit(other);
  ASSERT_TRUE(bo.ok()) << bo.status();
  ASSERT_TRUE(jobs_->Cancel(bo->job_id).ok());
  // Every thread stops: mallory gets 3 slots back.
  std::vector<std::string> held;
  for (int i = 0; i < 3; ++i) {
    auto r = SubmitWithin(req, std::chrono::seconds(10));
    ASSERT_TRUE(r.ok()) << r.status() << " (" << refused << " refused in the storm)";
    held.push_back(r->job_id);
  }
  EXPECT_EQ(jobs_->Submit(req).status().code(), absl::StatusCode::kResourceExhausted);
  for (const std::string& id : held) ASSERT_TRUE(jobs_->Cancel(id).ok());
}

TEST_F(JobManagerTest, OnlyTheNewestEventsAreKeptAndWatchersSkipAhead) {
  JobManagerOptions options;
  options.max_events_kept = 1;
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_, options);
  auto r = jobs_->Submit(Request(testing::ConvReluModel()));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(jobs_->Cancel(r->job_id).ok());
  size_t next = 0;
  bool finished = false;
  auto events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(0), &finished);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 1u);  // of at least two: submitted, ..., cancelled
  EXPECT_GE(next, 2u);
  EXPECT_EQ(events->back().job.row.state, storage::JobState::kCancelled);
  EXPECT_TRUE(finished);
  // Nothing new: nothing returned, the position stays.
  const size_t at = next;
  events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(0), &finished);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_EQ(next, at);
}

TEST_F(JobManagerTest, AJobNoAgentServesSaysSoAndFailsAtItsDeadline) {
  SubmitRequest req = Request(testing::ConvReluModel());
  req.device_key = "nobody-serves-this";
  req.deadline_s = 60;
  auto r = jobs_->Submit(req);
  ASSERT_TRUE(r.ok()) << r.status();
  // Real time passes (the measurer looks every 0.2 s); the fake clock, which
  // the deadline reads, does not until the test moves it.
  size_t next = 0;
  bool finished = false, waiting = false;
  for (int i = 0; i < 100 && !waiting; ++i) {
    auto events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(100), &finished);
    ASSERT_TRUE(events.ok());
    for (const auto& e : *events) {
      waiting =
          waiting || e.message == "waiting: no agent with key 'nobody-serves-this' is connected";
    }
  }
  ASSERT_TRUE(waiting);
  EXPECT_EQ(jobs_->Get(r->job_id)->row.state, storage::JobState::kTuning);
  clock_.Advance(60000);
  for (int i = 0; i < 100 && !finished; ++i) {
    ASSERT_TRUE(
        jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(100), &finished).ok());
  }
  auto job = jobs_->Get(r->job_id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->row.state, storage::JobState::kFailed);
  EXPECT_NE(job->row.error.find("DEADLINE_EXCEEDED: the job's deadline passed while no agent with "
                                "key 'nobody-serves-this' was connected"),
            std::string::npos)
      << job->row.error;
  req.deadline_s = -1;
  EXPECT_EQ(jobs_->Submit(req).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::tracker
