// The job manager running jobs (tracker/job_runner.cc): tuning through the
// dispatcher, cancel, resume after a stop, the end-to-end check on the board,
// every strategy, and a job's estimated latency.
#include "tests/tracker/job_manager_test_util.h"
#include "tracker/job_manager.h"

namespace kiln::tracker {
namespace {

TEST_F(JobManagerTest, SubmitStoresJobAndCancelStopsIt) {
  SubmitRequest req = Request(testing::ConvReluModel());
  req.trials = 32;             // more than one batch
  req.skip_end_to_end = true;  // the search's batches only
  auto r = jobs_->Submit(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->job_id.rfind("job-", 0), 0u);
  EXPECT_EQ(r->num_tasks, 1);
  auto row = db_.farm->GetJob(r->job_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->device_key, "cpu");
  EXPECT_EQ((*row)->trials, 32);
  EXPECT_TRUE(store_->Contains((*row)->model_sha256));
  auto art = db_.farm->GetArtifact((*row)->model_sha256);
  ASSERT_TRUE(art.ok() && art->has_value());
  EXPECT_EQ((*art)->kind, storage::ArtifactKind::kModel);

  // Wait (bounded) for the job's first batch, measure it.
  std::optional<Lease> lease;
  for (int i = 0; i < 200 && !lease; ++i) {
    lease = dispatcher_->WaitLease("a1", "cpu", 1, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->work.job_id, r->job_id);
  EXPECT_EQ(lease->work.target, kTarget);
  ASSERT_FALSE(lease->work.candidates.empty());
  EXPECT_LE(lease->work.candidates.size(), 8u);
  // The template's default config is measured first: tuning never ends
  // slower than the untuned module.
  auto workload = compiler::Workload::Parse(lease->work.workload_canonical);
  ASSERT_TRUE(workload.ok());
  auto target = compiler::Target::Parse(kTarget);
  ASSERT_TRUE(target.ok());
  auto default_config = compiler::DefaultConfig(*workload, *target);
  ASSERT_TRUE(default_config.ok());
  EXPECT_EQ(compiler::CanonicalConfig(lease->work.candidates[0].config),
            compiler::CanonicalConfig(*default_config));
  std::vector<MeasureOutcome> results = Measured(lease->work, {2e-3, 4e-3});
  size_t measured = results.size();
  ASSERT_TRUE(dispatcher_->Complete(lease->work.batch_id, "a1", results));

  // Follow the events until the results are recorded.
  size_t next = 0;
  bool finished = false;
  int done = 0;
  for (int i = 0; i < 200 && done < static_cast<int>(measured); ++i) {
    auto events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(50), &finished);
    ASSERT_TRUE(events.ok());
    if (!events->empty()) done = events->back().job.row.trials_done;
  }
  EXPECT_EQ(done, static_cast<int>(measured));
  auto records = db_.tuning->QueryRecords("", kTarget, 0);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), measured);
  EXPECT_EQ((*records)[0].job_id, r->job_id);
  EXPECT_EQ((*records)[0].agent_id, "a1");
  EXPECT_DOUBLE_EQ((*records)[0].mean_cost_s, 3e-3);
  EXPECT_EQ(lease->work.timing.stop_above_s, 0);  // no best yet: time everything

  // Once the task has a best cost, hopeless candidates are timed once.
  std::optional<Lease> second;
  for (int i = 0; i < 200 && !second; ++i) {
    second = dispatcher_->WaitLease("a1", "cpu", 1, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(second.has_value());
  EXPECT_NEAR(second->work.timing.stop_above_s, 9e-3, 1e-12);  // 3x the best (3 ms)
  results = Measured(second->work, {0.5});
  results[0].cut_short = true;
  ASSERT_TRUE(dispatcher_->Complete(second->work.batch_id, "a1", results));
  for (int i = 0; i < 200 && done < static_cast<int>(measured + results.size()); ++i) {
    auto events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(50), &finished);
    ASSERT_TRUE(events.ok());
    if (!events->empty()) done = events->back().job.row.trials_done;
  }
  records = db_.tuning->QueryRecords("", kTarget, 0);
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), measured + results.size());
  int cut = 0;
  for (const auto& rec : *records) {
    if (rec.error_message.find("timed once") != std::string::npos) {
      ++cut;
      EXPECT_EQ(rec.error_kind, storage::ErrorKind::kNone);
      EXPECT_DOUBLE_EQ(rec.mean_cost_s, 0.5);
    }
  }
  EXPECT_EQ(cut, 1);

  auto cancelled = jobs_->Cancel(r->job_id);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->row.state, storage::JobState::kCancelled);
  for (int i = 0; i < 200 && !finished; ++i) {
    auto events = jobs_->WaitEvents(r->job_id, &next, std::chrono::milliseconds(50), &finished);
    ASSERT_TRUE(events.ok());
  }
  EXPECT_TRUE(finished);
  EXPECT_EQ(dispatcher_->QueuedCount("cpu"), 0u);
  auto stored = db_.farm->GetJob(r->job_id);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->state, storage::JobState::kCancelled);
}

// Plays an agent whose whole-model runs say the model is `tuned_factor`
// times as slow with tuned configs as with its defaults (each task's kernels
// likewise); candidates alone all cost 1 ms. Counts the model batches (and
// keeps the precision they name in *precision).
JobStatus ServeModelUntilFinished(Dispatcher* dispatcher, JobManager* jobs, const std::string& job,
                                  double tuned_factor, int* model_batches,
                                  std::string* precision = nullptr) {
  size_t next = 0;
  bool finished = false;
  JobStatus last;
  for (int i = 0; i < 4000 && !finished; ++i) {
    if (auto lease = dispatcher->WaitLease("a1", "cpu", 1, std::chrono::milliseconds(5))) {
      std::vector<MeasureOutcome> results = Measured(lease->work, {1e-3});
      if (lease->work.model.has_value()) {
        ++*model_batches;
        if (precision) *precision = compiler::PrecisionName(lease->work.model->precision);
        EXPECT_FALSE(lease->work.model->files.empty());
        EXPECT_TRUE(fs::exists(lease->work.model->files[0].path));
        for (size_t c = 0; c < results.size(); ++c) {
          const auto& configs = lease->work.candidates[c].task_configs;
          const double f = configs.empty() ? 1.0 : tuned_factor;
          results[c].costs_s = {2e-3 * f, 2.1e-3 * f, 1.9e-3 * f, 2e-3 * f, 2e-3 * f};
          auto status = jobs->Get(job);
          if (!status.ok()) break;
          for (const auto& t : status->tasks) results[c].kernel_costs_s[t.workload_key] = 1e-3 * f;
        }
      }
      dispatcher->Complete(lease->work.batch_id, "a1", results);
    }
    auto events = jobs->WaitEvents(job, &next, std::chrono::milliseconds(5), &finished);
    if (!events.ok()) break;
    for (const auto& e : *events) last = e.job;
  }
  return last;
}

// Plays the agent: answers every batch of `dispatcher` until `job` ends.
JobStatus ServeUntilFinished(Dispatcher* dispatcher, JobManager* jobs, const std::string& job) {
  int model_batches = 0;
  return ServeModelUntilFinished(dispatcher, jobs, job, 1.0, &model_batches);
}

TEST_F(JobManagerTest, StoppedJobResumesAndCompletes) {
  auto req = Request(testing::ConvReluModel());
  req.trials = 12;
  auto r = jobs_->Submit(req);
  ASSERT_TRUE(r.ok()) << r.status();
  // Measure one batch, then stop the manager mid-job.
  std::optional<Lease> lease;
  for (int i = 0; i < 200 && !lease; ++i) {
    lease = dispatcher_->WaitLease("a1", "cpu", 1, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(lease.has_value());
  std::vector<MeasureOutcome> results = Measured(lease->work, {1e-3});
  size_t first = results.size();
  ASSERT_TRUE(dispatcher_->Complete(lease->work.batch_id, "a1", results));
  for (int i = 0; i < 200; ++i) {
    auto n = db_.tuning->CountRecords(r->job_id);
    ASSERT_TRUE(n.ok());
    if (*n == static_cast<int64_t>(first)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  jobs_->Stop();
  jobs_.reset();
  auto row = db_.farm->GetJob(r->job_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->state, storage::JobState::kTuning);

  // A new manager (a restarted tracker) resumes it.
  dispatcher_ = std::make_unique<Dispatcher>(&clock_);
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_);
  ASSERT_TRUE(jobs_->Start().ok());
  JobStatus last = ServeUntilFinished(dispatcher_.get(), jobs_.get(), r->job_id);
  EXPECT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  EXPECT_FALSE(last.row.artifact_sha256.empty());
  EXPECT_TRUE(store_->Contains(last.row.artifact_sha256));
  auto count = db_.tuning->CountRecords(r->job_id);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, last.row.trials_done);
  EXPECT_GE(*count, static_cast<int64_t>(first));
  EXPECT_LE(*count, 12);
  // No config was measured twice.
  auto records = db_.tuning->QueryRecords("", kTarget, 0);
  ASSERT_TRUE(records.ok());
  std::set<std::string> configs;
  for (const auto& rec : *records) EXPECT_TRUE(configs.insert(rec.config).second) << rec.config;

  // A third manager (the tracker restarted after the job ended) still reports
  // the job's tasks, rebuilt from its records.
  jobs_->Stop();
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_);
  auto again = jobs_->Get(r->job_id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->row.state, storage::JobState::kCompleted);
  ASSERT_EQ(again->tasks.size(), 1u);
  EXPECT_EQ(again->tasks[0].op, "conv2d");
  EXPECT_EQ(again->tasks[0].trials_done, *count);
  EXPECT_DOUBLE_EQ(again->tasks[0].best_cost_s, 1e-3);
  EXPECT_FALSE(again->tasks[0].canonical.empty());
}

// Submits `req` and plays a board on which tuned variants run
// `tuned_factor` times as long as the defaults, until the job ends.
JobStatus SubmitAndServe(JobManager* jobs, Dispatcher* dispatcher, const SubmitRequest& req,
                         double tuned_factor, int* model_batches) {
  auto r = jobs->Submit(req);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  *model_batches = 0;
  return ServeModelUntilFinished(dispatcher, jobs, r->job_id, tuned_factor, model_batches);
}

// Tuned configs that lose inside the model: the job returns the defaults'
// module, and its row says why (kept across a restart for kiln job).
TEST_F(JobManagerTest, WhenTuningLosesOnTheBoardTheJobReturnsTheDefaults) {
  auto req = Request(testing::ConvReluModel());
  req.trials = 16;
  int model_batches = 0;
  JobStatus last = SubmitAndServe(jobs_.get(), dispatcher_.get(), req, 1.3, &model_batches);
  ASSERT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  EXPECT_GE(model_batches, 2) << "checkpoints of the curve, then the final check";
  auto e2e = EndToEndFromJson(last.row.end_to_end_json);
  ASSERT_TRUE(e2e.ok()) << e2e.status();
  EXPECT_TRUE(e2e->decided);
  EXPECT_FALSE(e2e->returned_tuned);
  EXPECT_EQ(e2e->tasks_reverted, 1);
  EXPECT_NE(e2e->note.find("tuning did not pay"), std::string::npos) << e2e->note;
  EXPECT_NEAR(e2e->untuned.median_s, 2e-3, 1e-9);
  EXPECT_NEAR(e2e->tuned.median_s, 2.6e-3, 1e-9);
  ASSERT_FALSE(e2e->curve.empty());
  EXPECT_EQ(e2e->curve.back().trials, last.row.trials_done);
  ASSERT_EQ(e2e->choices.size(), 1u);
  EXPECT_EQ(e2e->choices.begin()->second, "") << "the default config";
  // The module was compiled with the defaults.
  auto events = db_.farm->GetJob(last.row.id);
  ASSERT_TRUE(events.ok() && events->has_value());
  auto choices = ChoicesOfJob(**events);
  ASSERT_TRUE(choices.ok());
  EXPECT_FALSE(choices->begin()->second.has_value());
}

// Tuned configs that win inside the model are kept; the skip flag skips it.
TEST_F(JobManagerTest, WhenTuningPaysOnTheBoardTheTunedModuleIsReturned) {
  auto req = Request(testing::ConvReluModel());
  req.trials = 16;
  int model_batches = 0;
  JobStatus last = SubmitAndServe(jobs_.get(), dispatcher_.get(), req, 0.8, &model_batches);
  ASSERT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  auto e2e = EndToEndFromJson(last.row.end_to_end_json);
  ASSERT_TRUE(e2e.ok()) << e2e.status();
  EXPECT_TRUE(e2e->returned_tuned);
  EXPECT_TRUE(e2e->beyond_noise);
  EXPECT_EQ(e2e->tasks_tuned, 1);
  ASSERT_EQ(e2e->choices.size(), 1u);
  EXPECT_NE(e2e->choices.begin()->second, "");

  req.skip_end_to_end = true;
  last = SubmitAndServe(jobs_.get(), dispatcher_.get(), req, 0.8, &model_batches);
  ASSERT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  EXPECT_EQ(model_batches, 0);
  EXPECT_EQ(last.row.end_to_end_json, "");
}

// --precision bf16 travels with the job: its tasks are the bfloat16
// workloads (bf16=1), the options keep it for a restarted tracker, and the
// whole-model batches name it for the agent's import. An unknown precision
// and bf16 for a GPU target are refused.
TEST_F(JobManagerTest, Bf16PrecisionIsTunedStoredAndSentWithTheModel) {
  auto req = Request(testing::LinearModel());
  req.trials = 8;
  req.precision = "fp16";
  auto r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("not supported yet"));
  req.precision = "bf16";
  const std::string cpu = req.target;
  req.target = "opencl";
  r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("precision bf16 is built for CPU targets only"));
  req.target = cpu;
  req.timing.flush_cache = true;
  req.timing.model_bytes = 12345;  // kept too, for the agents' caches
  r = jobs_->Submit(req);
  ASSERT_TRUE(r.ok()) << r.status();
  auto row = db_.farm->GetJob(r->job_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_THAT((*row)->options_json, ::testing::HasSubstr("\"precision\":\"bf16\""));
  auto stored = OptionsFromJson((*row)->options_json, TimingOptions{});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->precision, compiler::Precision::kBfloat16);
  EXPECT_EQ(stored->timing.model_bytes, 12345);
  // Whole-model batches carry it.
  std::string precision_sent;
  int model_batches = 0;
  JobStatus last = ServeModelUntilFinished(dispatcher_.get(), jobs_.get(), r->job_id, 0.8,
                                           &model_batches, &precision_sent);
  EXPECT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  EXPECT_GT(model_batches, 0);
  ASSERT_EQ(last.tasks.size(), 1u);
  EXPECT_THAT(last.tasks[0].canonical, ::testing::HasSubstr("bf16=1"));
  EXPECT_EQ(precision_sent, "bf16");
}

// Input shapes and external data files travel with the job: a restarted
// tracker compiles the same thing.
TEST_F(JobManagerTest, InputShapesAndExternalDataArePersistedAndResumed) {
  std::string weights;
  const std::string model = testing::SymbolicExternalModel(&weights);
  auto req = Request(model);
  req.trials = 8;
  // Without the shape or the data file the model is refused, naming what
  // lacks: the input shape first (checked before any weight is read).
  auto r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("dimension 0 ('N') is unknown"),
            std::string::npos)
      << r.status();
  req.input_shapes["data"] = {2, 3, 8, 8};
  r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("'weights/w.bin', which was not provided"),
            std::string::npos)
      << r.status();
  req.external_data["weights/w.bin"] = Upload(weights);
  r = jobs_->Submit(req);
  ASSERT_TRUE(r.ok()) << r.status();
  auto row = db_.farm->GetJob(r->job_id);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_NE((*row)->options_json.find("\"input_shapes\":{\"data\":[2,3,8,8]}"), std::string::npos)
      << (*row)->options_json;
  EXPECT_NE((*row)->options_json.find(
                StrCat("\"external_data\":{\"weights/w.bin\":\"", Upload(weights), "\"}")),
            std::string::npos)
      << (*row)->options_json;

  // Restart before anything is measured: the resumed job loads the same model.
  jobs_->Stop();
  dispatcher_ = std::make_unique<Dispatcher>(&clock_);
  jobs_ = std::make_unique<JobManager>(db_.tuning.get(), db_.farm.get(), store_.get(),
                                       agents_.get(), dispatcher_.get(), &clock_);
  ASSERT_TRUE(jobs_->Start().ok());
  JobStatus last = ServeUntilFinished(dispatcher_.get(), jobs_.get(), r->job_id);
  EXPECT_EQ(last.row.state, storage::JobState::kCompleted) << last.row.error;
  // The batch of 2 given as the input shape is what was tuned and compiled.
  ASSERT_FALSE(last.tasks.empty());
  EXPECT_NE(last.tasks.at(0).canonical.find(";N=2;"), std::string::npos)
      << last.tasks.at(0).canonical;
}

TEST_F(JobManagerTest, UnknownStrategyIsInvalidArgumentAndStoresNothing) {
  auto req = Request(testing::ConvReluModel());
  req.strategy = "annealing";
  auto r = jobs_->Submit(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("annealing"), std::string::npos);
  EXPECT_NE(std::string(r.status().message()).find("xgb"), std::string::npos);
  ExpectNothingStored();
}

// A timing policy no job needs (a million repeats, an hour-long cooldown)
// is refused before anything is stored, naming the field and its range.
TEST_F(JobManagerTest, TimingOutsideItsBoundsIsInvalidArgumentAndStoresNothing) {
  for (auto set : std::vector<std::function<void(TimingOptions&)>>{
           [](TimingOptions& t) { t.repeat = 1000001; }, [](TimingOptions& t) { t.number = -1; },
           [](TimingOptions& t) { t.cooldown_ms = 3600000; },
           [](TimingOptions& t) { t.min_repeat_ms = 61000; },
           [](TimingOptions& t) { t.timeout_ms = 2000000000; }}) {
    auto req = Request(testing::ConvReluModel());
    set(req.timing);
    auto r = jobs_->Submit(req);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(std::string(r.status().message()).find("farm's default"), std::string::npos)
        << r.status();
  }
  ExpectNothingStored();
}

// Every strategy tunes a job to the end with distinct configs, and the job
// row keeps the strategy it was submitted with (a resumed job uses it).
TEST_F(JobManagerTest, EveryStrategyCompletesAJob) {
  for (const char* strategy : {"", "random", "grid", "ga", "xgb"}) {
    // A fresh database each time: no config is measured twice per database.
    StartWithEmptyDatabase();
    auto req = Request(testing::ConvReluModel());
    req.trials = 24;
    req.strategy = strategy;
    auto r = jobs_->Submit(req);
    ASSERT_TRUE(r.ok()) << strategy << ": " << r.status();
    JobStatus last = ServeUntilFinished(dispatcher_.get(), jobs_.get(), r->job_id);
    EXPECT_EQ(last.row.state, storage::JobState::kCompleted) << strategy << ": " << last.row.error;
    auto records = db_.tuning->RecordsOfJob(r->job_id);
    ASSERT_TRUE(records.ok());
    EXPECT_EQ(records->size(), 24u) << strategy;
    std::set<std::string> configs;
    for (const auto& rec : *records) {
      EXPECT_TRUE(configs.insert(rec.config).second) << strategy << ": " << rec.config;
    }
    auto row = db_.farm->GetJob(r->job_id);
    ASSERT_TRUE(row.ok() && row->has_value());
    std::string want = *strategy ? strategy : "xgb";
    EXPECT_NE((*row)->options_json.find(StrCat("\"strategy\":\"", want, "\"")), std::string::npos)
        << (*row)->options_json;
  }
}

// What the status page, `kiln tune --wait` and the Python client show as a
// job's best latency: each task's best x its runs, once every task has one.
TEST(JobStatusTest, EstimatedLatencyWaitsForEveryTask) {
  JobStatus s;
  for (double best : {1e-3, 1e-3, 0.0}) {
    TaskStatus t;
    t.best_cost_s = best;
    t.occurrences = 2;
    s.tasks.push_back(t);
  }
  EXPECT_EQ(s.EstimatedLatencyS(), 0);
  s.tasks[2].best_cost_s = 2e-3;  // 2 x (1 + 1 + 2) ms
  EXPECT_DOUBLE_EQ(s.EstimatedLatencyS(), 8e-3);
}

}  // namespace
}  // namespace kiln::tracker
