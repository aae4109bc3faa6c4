// JobManager's job thread: tuning through the farm, the end-to-end checks
// of the model on the board, and the final compile.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/cpus.h"
#include "base/names.h"
#include "base/str.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "tracker/farm_measurer.h"
#include "tracker/job_manager.h"
#include "tracker/job_manager_job.h"
#include "tracker/job_options.h"
#include "tracker/log.h"
#include "tuner/history.h"
#include "tuner/search.h"

namespace kiln::tracker {

void JobManager::Run(std::shared_ptr<Job> job) {
  // Last of all (declared first): the job may leave memory from now on.
  struct MarkEnded {
    Job* job;
    const Clock* clock;
    ~MarkEnded() { job->ended_ms = clock->NowMs(); }
  } mark_ended{job.get(), clock_};
  // A finished (or stopped) job lets go of its model: its weights may be
  // hundreds of megabytes.
  struct ReleaseModel {
    Job* job;
    ~ReleaseModel() { job->model.reset(); }
  } release{job.get()};
  absl::Status st = absl::OkStatus();
  if (!job->model.has_value()) {
    // A resumed job: reload the model and the target.
    auto model = LoadStoredModel(*store_, job->row.model_sha256, job->import);
    auto target = compiler::Target::Parse(job->row.target);
    if (!model.ok()) {
      st = model.status();
    } else if (!target.ok()) {
      st = target.status();
    } else {
      job->model.emplace(std::move(*model));
      job->target = *target;
    }
  }
  auto abandoned = [&] {
    std::lock_guard<std::mutex> lock(job->mu);
    return job->abandoned.load();
  };
  if (st.ok()) st = Tune(*job);
  if (abandoned()) {
    dispatcher_->CancelJob(job->row.id);  // another tracker runs it now
    return;
  }
  if (stopping_) return;  // the job stays unfinished and resumes next start
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->cancelled) return;
  }
  if (st.ok() && !job->skip_end_to_end) CheckEndToEnd(*job);
  if (stopping_ || abandoned()) return;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->cancelled) return;
  }
  if (st.ok()) st = Compile(*job);
  if (stopping_ || abandoned()) return;
  if (!st.ok()) {
    dispatcher_->CancelJob(job->row.id);
    std::string error =
        StrCat(absl::StatusCodeToString(st.code()), ": ", std::string(st.message()));
    SetState(*job, storage::JobState::kFailed, StrCat("job failed: ", error), error);
  }
}

absl::Status JobManager::Tune(Job& job) {
  std::vector<tuner::TuningTask> tasks;
  for (const auto& t : job.model->Tasks())
    tasks.push_back({t.workload, std::max(1, t.occurrences)});
  {
    std::lock_guard<std::mutex> lock(job.mu);
    if (job.cancelled) return absl::OkStatus();
    job.row.state = storage::JobState::kTuning;
    EventLocked(job, StrCat("tuning ", tasks.size(), " tasks, ", job.row.trials, " trials"));
  }
  MeasureWork work;
  work.job_id = job.row.id;
  work.device_key = job.row.device_key;
  work.target = job.row.target;
  work.user = job.row.owner;
  work.priority = job.priority;
  work.timing = job.timing;
  // While no agent serves the job's key, the job says so; past its
  // deadline (if any) it fails.
  FarmWaiting waiting;
  waiting.clock = clock_;
  waiting.deadline_unix_ms = job.deadline_unix_ms;
  waiting.on_agents = [this, &job](bool none) {
    std::lock_guard<std::mutex> lock(job.mu);
    EventLocked(job,
                none ? StrCat("waiting: no agent with key '", job.row.device_key, "' is connected")
                     : StrCat("an agent with key '", job.row.device_key, "' connected"));
  };
  FarmMeasurer measurer(dispatcher_, agents_, std::move(work), std::move(waiting));
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.measurer = &measurer;
    if (job.cancelled || job.abandoned || stopping_) measurer.Interrupt();
  }
  tuner::TunerOptions options;
  options.job_id = job.row.id;
  options.strategy = job.strategy;
  options.trials = job.row.trials;
  options.budget_s = job.budget_s;
  options.spent_s = static_cast<double>(job.row.tuning_ms) / 1000.0;
  options.batch_size = options_.batch_size;
  options.early_stopping = job.early_stopping;
  options.compiler_version = options_.compiler_version;
  if (!options_.tracker_id.empty())
    options.record_fence = storage::FarmStore::JobHeldBy(options_.tracker_id);
  options.record_scope = storage::RecordScope::Of(job.row.owner);
  // A cancelled job's thread ends at the tuner's next check, not at its next
  // measurement.
  options.stop = [this, &job] {
    std::lock_guard<std::mutex> lock(job.mu);
    return job.cancelled || job.abandoned.load() || stopping_.load();
  };
  tuner::Tuner tuner(tuning_, &measurer, job.target, std::move(tasks), std::move(options));
  absl::Status st = tuner.Run([&](const tuner::TunerProgress& p) {
    double done = 0;
    {
      std::lock_guard<std::mutex> lock(job.mu);
      job.tasks = p.tasks;
      job.row.trials_done = p.trials_done;
      job.row.tuning_ms = static_cast<int64_t>(p.tuning_s * 1000);
      EventLocked(job, p.message, /*progress_only=*/true);
      if (job.row.trials > 0) done = static_cast<double>(p.trials_done) / job.row.trials;
      if (job.budget_s > 0) done = std::max(done, p.tuning_s / job.budget_s);
      if (job.skip_end_to_end || done < job.next_checkpoint || done >= 1) return;
      while (job.next_checkpoint <= done) job.next_checkpoint += 0.25;
    }
    MeasureCheckpoint(job, p.trials_done);
  });
  std::lock_guard<std::mutex> lock(job.mu);
  job.measurer = nullptr;
  // Another tracker took the job over (its records were refused): give it up.
  if (st.code() == absl::StatusCode::kAborted && !options_.tracker_id.empty()) {
    Log()->error("job {}: {}; stopping it here", job.row.id, std::string(st.message()));
    job.abandoned = true;  // Run drops its batches
    return absl::OkStatus();
  }
  // Interrupted: cancelled, or stopping (the job resumes at the next start).
  if (st.code() == absl::StatusCode::kCancelled && (job.cancelled || job.abandoned || stopping_)) {
    return absl::OkStatus();
  }
  return st;
}

absl::StatusOr<FarmRunnerOptions> JobManager::RunnerOptions(Job& job) {
  FarmRunnerOptions o;
  o.dispatcher = dispatcher_;
  o.clock = clock_;
  o.job.job_id = job.row.id;
  o.job.device_key = job.row.device_key;
  o.job.target = job.row.target;
  o.job.user = job.row.owner;
  o.job.priority = job.priority;
  o.job.timing = job.timing;
  o.deadline_unix_ms = job.deadline_unix_ms;
  o.agent_here = [this, key = job.row.device_key] {
    return agents_->ConnectedCount(key) > agents_->RemoteCount(key);
  };
  o.stop = [this, &job] {
    std::lock_guard<std::mutex> lock(job.mu);
    return job.cancelled || job.abandoned.load() || stopping_.load();
  };
  auto model = ModelWorkOf(*store_, job.row.model_sha256, job.external_data, job.import);
  if (!model.ok()) return model.status();
  o.model = *std::move(model);
  return o;
}

absl::StatusOr<EndToEndReport> JobManager::LoadEndToEnd(Job& job) {
  std::lock_guard<std::mutex> lock(job.mu);
  return EndToEndFromJson(job.row.end_to_end_json);
}

void JobManager::SaveEndToEnd(Job& job, const EndToEndReport& report, const std::string& event) {
  std::lock_guard<std::mutex> lock(job.mu);
  job.row.end_to_end_json = EndToEndToJson(report);
  EventLocked(job, event);
}

void JobManager::MeasureCheckpoint(Job& job, int32_t trials) {
  auto options = RunnerOptions(job);
  auto report = LoadEndToEnd(job);
  if (!options.ok() || !report.ok()) return;
  auto tasks =
      InModelTasks(*tuning_, *job.model, job.target, 1, storage::RecordScope::Of(job.row.owner));
  if (!tasks.ok()) return;
  options->rounds = kCheckpointRounds;
  const std::vector<tuner::ModelVariant> variants = {tuner::ModelVariant(tasks->size(), 0),
                                                     tuner::BestSoFar(*tasks)};
  auto timed = FarmVariantRunner(&*tasks, *std::move(options))(variants);
  if (!timed.ok() || (*timed)[0].costs_s.empty() || (*timed)[1].costs_s.empty()) {
    Log()->info("job {}: end-to-end checkpoint at {} trials not measured: {}", job.row.id, trials,
                timed.ok() ? (*timed)[0].error + (*timed)[1].error : timed.status().ToString());
    return;
  }
  EndToEndPoint point{trials, tuner::StatsOf((*timed)[0].costs_s),
                      tuner::StatsOf((*timed)[1].costs_s)};
  report->curve.push_back(point);
  report->threads = job.timing.threads;
  SaveEndToEnd(job, *report,
               StrCat("end to end on the board after ", trials, " trials: best so far ",
                      FormatSeconds(point.tuned.median_s), ", defaults ",
                      FormatSeconds(point.untuned.median_s)));
}

void JobManager::CheckEndToEnd(Job& job) {
  auto report = LoadEndToEnd(job);
  if (!report.ok()) report = EndToEndReport{};
  if (report->decided) return;  // a resumed job that had decided before
  {
    std::lock_guard<std::mutex> lock(job.mu);
    EventLocked(job, "measuring the model end to end on the board: tuned configs against defaults");
  }
  report->threads = job.timing.threads;
  auto options = RunnerOptions(job);
  auto tasks = InModelTasks(*tuning_, *job.model, job.target, tuner::InModelOptions{}.max_options,
                            storage::RecordScope::Of(job.row.owner));
  absl::StatusOr<tuner::InModelResult> result =
      !options.ok() ? absl::StatusOr<tuner::InModelResult>(options.status())
      : !tasks.ok() ? absl::StatusOr<tuner::InModelResult>(tasks.status())
                    : tuner::ChooseInModel(*tasks, FarmVariantRunner(&*tasks, *options));
  if (!result.ok()) {
    // The job still completes, with the best records, as without the check.
    report->note = StrCat("the end-to-end check did not run (", result.status().ToString(),
                          "): the module uses each task's best record");
    SaveEndToEnd(job, *report, report->note);
    return;
  }
  int32_t trials = 0;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    trials = job.row.trials_done;
  }
  RecordDecision(*result, *tasks, trials, &*report);
  // Which of its options each task returns (0 its default, k its k-th
  // fastest alone): how far down the isolated ranking the model's winners are.
  Log()->info("job {}: options chosen inside the model, per task: {}", job.row.id,
              StrJoin(result->chosen, " "));
  SaveEndToEnd(job, *report,
               StrCat(result->note, " (", result->tasks_tuned, " tasks tuned, ",
                      result->tasks_reverted, " reverted inside the model)"));
}

bool JobManager::AcquireCompileSlot(Job& job) {
  int slots = options_.max_concurrent_compiles;
  if (slots <= 0) slots = std::max(1, UsableCpus() / 2);
  std::unique_lock<std::mutex> lock(compile_mu_);
  auto cancelled = [&] {
    std::lock_guard<std::mutex> job_lock(job.mu);
    return job.cancelled;
  };
  while (compiles_running_ >= slots) {
    if (stopping_ || cancelled()) return false;
    compile_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  ++compiles_running_;
  return true;
}

void JobManager::ReleaseCompileSlot() {
  std::lock_guard<std::mutex> lock(compile_mu_);
  --compiles_running_;
  compile_cv_.notify_one();
}

absl::Status JobManager::Compile(Job& job) {
  SetState(job, storage::JobState::kCompiling, "compiling the model with the best configs");
  if (!AcquireCompileSlot(job)) return absl::OkStatus();  // stopping, or cancelled
  struct Slot {
    JobManager* self;
    ~Slot() { self->ReleaseCompileSlot(); }
  } slot{this};
  CompiledModule module;
  if (!options_.compile_worker.empty()) {
    CompileLimits limits = options_.compile_limits;
    limits.max_elements = options_.max_elements;
    auto compiled = CompileInSandbox(options_.compile_worker, options_.db_path,
                                     options_.artifacts_dir, job.row.id, limits);
    if (!compiled.ok()) return compiled.status();
    module = *std::move(compiled);
    if (options_.signing_key) {
      // The worker never holds the key: its artifact is signed here, mapped
      // from the store and written into a new file (the unsigned one stays
      // there, unreferenced), never copied whole into the tracker's memory.
      auto path = store_->LocalPath(module.sha256);
      if (!path.ok()) return path.status();
      auto writer = store_->NewWriter();
      if (!writer.ok()) return writer.status();
      if (absl::Status st =
              compiler::SignArtifactFile(*path, *options_.signing_key,
                                         [&](std::string_view b) { return (*writer)->Append(b); });
          !st.ok()) {
        return absl::Status(st.code(), StrCat("signing the artifact: ", st.message()));
      }
      auto stored = (*writer)->Commit();
      if (!stored.ok()) return stored.status();
      module.sha256 = stored->sha256;
      module.size = stored->size;
    }
  } else {
    absl::StatusOr<ModelChoices> choices = [&] {
      std::lock_guard<std::mutex> lock(job.mu);
      return ChoicesOfJob(job.row);
    }();
    if (!choices.ok()) return choices.status();
    auto bytes =
        CompileWithBestRecords(*tuning_, *job.model, job.target,
                               storage::RecordScope::Of(job.row.owner), &module.report, *choices);
    if (!bytes.ok()) return bytes.status();
    if (options_.signing_key) {
      if (absl::Status st = compiler::SignArtifact(&*bytes, *options_.signing_key); !st.ok()) {
        return absl::Status(st.code(), StrCat("signing the artifact: ", st.message()));
      }
    }
    auto sha = store_->Put(*bytes);
    if (!sha.ok()) return sha.status();
    module.sha256 = *sha;
    module.size = static_cast<int64_t>(bytes->size());
  }
  storage::ArtifactRow art;
  art.sha256 = module.sha256;
  art.size = module.size;
  art.kind = storage::ArtifactKind::kModule;
  art.job_id = job.row.id;
  art.created_unix_ms = clock_->NowMs();
  if (absl::Status st = farm_->AddArtifact(art); !st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    if (job.row.state == storage::JobState::kCancelled) return absl::OkStatus();
    job.row.artifact_sha256 = module.sha256;
    job.row.state = storage::JobState::kCompleted;
    EventLocked(
        job, StrCat("completed: ", module.report.kernels, " kernels (", module.report.tuned_kernels,
                    " tuned), artifact ", module.sha256, " (", module.size, " bytes)"));
  }
  Log()->info("job {} completed: artifact {} ({} bytes)", job.row.id, module.sha256, module.size);
  return absl::OkStatus();
}

}  // namespace kiln::tracker
