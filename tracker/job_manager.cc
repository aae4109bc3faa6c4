#include "tracker/job_manager.h"

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
#include "tracker/job_options.h"
#include "tracker/log.h"
#include "tuner/history.h"
#include "tuner/search.h"

namespace kiln::tracker {

struct JobManager::Job {
  std::mutex mu;
  compiler::ImportOptions import;  // input shapes and external data files
  std::condition_variable cv;
  storage::JobRow row;
  int64_t persisted_unix_ms = 0;  // when row was last written
  std::vector<TaskStatus> tasks;
  std::vector<compiler::Workload> workloads;
  std::vector<int> occurrences;
  TimingOptions timing;
  std::string strategy = "xgb";
  double budget_s = 0;
  int early_stopping = 0;
  int64_t deadline_unix_ms = 0;  // 0: none
  int32_t priority = 0;
  bool skip_end_to_end = false;
  std::map<std::string, std::string> external_data;  // location -> sha256
  // Where the end-to-end curve is (end_to_end.h): the next fraction of the
  // budget at which the best configs so far run beside the defaults.
  double next_checkpoint = 0.25;
  std::optional<compiler::Model> model;
  compiler::Target target;
  // The newest events (at most JobManagerOptions::max_events_kept), the
  // first of them the job's event number first_event.
  std::deque<JobEventEntry> events;
  size_t first_event = 0;
  bool cancelled = false;
  // Another tracker holds the job now (this one's lease ran out while it
  // stalled): the job thread stops and writes nothing more.
  std::atomic<bool> abandoned{false};
  uint64_t launch_seq = 0;           // JobManager::launches_ when it was launched
  FarmMeasurer* measurer = nullptr;  // while tuning
  std::thread thread;
  std::atomic<int64_t> ended_ms{0};  // when Run returned (0: running)
};

JobManager::JobManager(storage::LogDb* db, storage::ArtifactStore* store, AgentRegistry* agents,
                       Dispatcher* dispatcher, const Clock* clock, JobManagerOptions options)
    : db_(db),
      store_(store),
      agents_(agents),
      dispatcher_(dispatcher),
      clock_(clock),
      options_(std::move(options)) {
  KILN_CHECK(db_ && store_ && agents_ && dispatcher_ && clock_) << "JobManager dependencies";
}

JobManager::~JobManager() { Stop(); }

void JobManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  leases_cv_.notify_all();
  if (leases_thread_.joinable()) leases_thread_.join();
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (auto& job : jobs) {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->measurer) job->measurer->Interrupt();
    job->cv.notify_all();
  }
  dispatcher_->Wake();
  for (auto& job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

JobStatus JobManager::SnapshotLocked(const Job& job) {
  JobStatus s;
  s.row = job.row;
  s.tasks = job.tasks;
  s.budget_s = job.budget_s;
  return s;
}

void JobManager::EventLocked(Job& job, const std::string& message, bool progress_only) {
  if (job.abandoned) return;  // the row is another tracker's now
  job.row.updated_unix_ms = clock_->NowMs();
  // A progress event changes counters the records restore after a crash:
  // its row is written at most every kPersistProgressEveryMs.
  if (!progress_only ||
      job.row.updated_unix_ms - job.persisted_unix_ms >= kPersistProgressEveryMs) {
    job.persisted_unix_ms = job.row.updated_unix_ms;
    absl::Status st = db_->UpdateJob(job.row);
    if (!st.ok()) Log()->warn("job {}: cannot update: {}", job.row.id, std::string(st.message()));
  }
  JobEventEntry e;
  e.unix_ms = job.row.updated_unix_ms;
  e.message = message;
  e.job = SnapshotLocked(job);
  job.events.push_back(std::move(e));
  while (job.events.size() > options_.max_events_kept) {
    job.events.pop_front();
    ++job.first_event;
  }
  job.cv.notify_all();
}

void JobManager::SetState(Job& job, storage::JobState state, const std::string& message,
                          const std::string& error) {
  std::lock_guard<std::mutex> lock(job.mu);
  // A cancelled job stays cancelled.
  if (job.row.state == storage::JobState::kCancelled) return;
  job.row.state = state;
  if (!error.empty()) job.row.error = error;
  EventLocked(job, message);
  Log()->info("job {}: {}", job.row.id, message);
}

std::shared_ptr<JobManager::Job> JobManager::Find(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  // A job given up to another tracker answers from its row, like one that
  // never ran here.
  if (it == jobs_.end() || it->second->abandoned.load()) return nullptr;
  return it->second;
}

absl::StatusOr<std::string> JobManager::NewJobId() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(clock_->NowMs()));
  for (int attempt = 0; attempt < 16; ++attempt) {
    uint64_t v = rng();
    {
      std::lock_guard<std::mutex> lock(mu_);
      v ^= ++id_counter_;
    }
    static const char* kHex = "0123456789abcdef";
    std::string id = "job-";
    for (int i = 0; i < 12; ++i) id += kHex[(v >> (4 * i)) & 0xf];
    auto existing = db_->GetJob(id);
    if (!existing.ok()) return existing.status();
    if (!existing->has_value()) return id;
  }
  return absl::InternalError("could not find a free job id");
}

namespace {

// Every string of a request is bounded and printable (base/names.h) before
// anything reads it.
absl::Status CheckSubmitNames(const SubmitRequest& req) {
  if (absl::Status st = CheckName("model_name", req.model_name); !st.ok()) return st;
  if (absl::Status st = CheckName("device_key", req.device_key); !st.ok()) return st;
  if (absl::Status st = CheckName("target", req.target, kMaxSpecBytes); !st.ok()) return st;
  if (absl::Status st = CheckName("strategy", req.strategy); !st.ok()) return st;
  for (const auto& [location, sha] : req.external_data) {
    if (absl::Status st = CheckName("an external data file's location", location); !st.ok()) {
      return st;
    }
  }
  for (const auto& [input, shape] : req.input_shapes) {
    if (absl::Status st = CheckName("an input shape's input name", input); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SubmitResult> JobManager::Submit(const SubmitRequest& req) {
  if (absl::Status st = CheckSubmitNames(req); !st.ok()) return st;
  if (req.device_key.empty()) return absl::InvalidArgumentError("device_key is empty");
  if (req.trials < 1 || req.trials > options_.max_trials) {
    return absl::InvalidArgumentError(
        StrCat("trials must be in 1..", options_.max_trials, ", got ", req.trials));
  }
  if (req.model_sha256.empty()) {
    return absl::InvalidArgumentError(
        "no model: upload it first (UploadModel) and name it by its model_sha256");
  }
  // The submission holds one of its user's job slots while it is checked and
  // imported, so that concurrent submissions cannot pass the check together.
  {
    std::lock_guard<std::mutex> lock(submit_mu_);
    const int running = RunningJobsOf(req.owner) + submitting_[req.owner];
    if (running >= options_.max_jobs_per_user) {
      return absl::ResourceExhaustedError(
          StrCat(req.owner.empty() ? "anonymous callers have " : req.owner + " has ", running,
                 " running jobs (cancelled ones count until they have stopped), the most this "
                 "tracker runs for one user (kiln-tracker --max-jobs-per-user); wait for one to "
                 "end or cancel one"));
    }
    ++submitting_[req.owner];
  }
  struct SubmitSlot {
    JobManager* jm;
    const std::string& owner;
    ~SubmitSlot() {
      std::lock_guard<std::mutex> lock(jm->submit_mu_);
      if (--jm->submitting_[owner] == 0) jm->submitting_.erase(owner);
    }
  } slot{this, req.owner};
  StoredOptions stored;
  if (!req.strategy.empty()) stored.strategy = req.strategy;
  if (!std::isfinite(req.budget_s) || req.budget_s < 0) {
    return absl::InvalidArgumentError(
        StrCat("the time budget must be a non-negative number of seconds, got ", req.budget_s));
  }
  if (req.early_stopping < 0) {
    return absl::InvalidArgumentError(
        StrCat("early_stopping must be >= 0 trials, got ", req.early_stopping));
  }
  stored.budget_s = req.budget_s;
  stored.early_stopping = req.early_stopping;
  if (!std::isfinite(req.deadline_s) || req.deadline_s < 0 || req.deadline_s > 366 * 86400) {
    return absl::InvalidArgumentError(
        StrCat("the deadline must be 0 (none) to a year in seconds, got ", req.deadline_s));
  }
  if (req.priority < -100 || req.priority > 100) {
    return absl::InvalidArgumentError(
        StrCat("the priority must be in -100..100, got ", req.priority));
  }
  stored.priority = req.priority;
  if (req.timing.threads < 0 || req.timing.threads > 4096) {
    return absl::InvalidArgumentError(
        StrCat("threads must be 0 (the agent's default) to 4096, got ", req.timing.threads));
  }
  if (req.deadline_s > 0) {
    stored.deadline_unix_ms = clock_->NowMs() + static_cast<int64_t>(req.deadline_s * 1000);
  }
  if (absl::Status st = tuner::CheckSearchName(stored.strategy); !st.ok()) return st;
  stored.input_shapes = req.input_shapes;
  stored.external_data = req.external_data;
  int64_t total = 0;
  auto stored_size = [&](const std::string& sha, const std::string& what) -> absl::Status {
    if (!storage::IsSha256Hex(sha)) {
      return absl::InvalidArgumentError(StrCat(what, ": '", sha, "' is not a SHA-256"));
    }
    auto size = store_->SizeOf(sha);
    if (!size.ok()) {
      return absl::NotFoundError(StrCat(what, " ", sha, " was not uploaded (UploadModel first)"));
    }
    total += *size;
    return absl::OkStatus();
  };
  if (auto st = stored_size(req.model_sha256, "model"); !st.ok()) return st;
  for (const auto& [location, sha] : req.external_data) {
    if (location.empty())
      return absl::InvalidArgumentError("an external data file has no location");
    if (auto st = stored_size(sha, StrCat("external data '", location, "'")); !st.ok()) return st;
  }
  if (total > options_.max_model_bytes) {
    return absl::ResourceExhaustedError(StrCat("the model and its external data are ", total,
                                               " bytes; this tracker accepts at "
                                               "most ",
                                               options_.max_model_bytes,
                                               " bytes (kiln-tracker --max-model-bytes)"));
  }
  std::string spec = req.target;
  if (spec.empty()) {
    auto known = agents_->TargetForKey(req.device_key);
    if (!known.has_value()) {
      return absl::FailedPreconditionError(
          StrCat("no agent with key ", req.device_key, " has connected; pass a target"));
    }
    spec = *known;
  }
  auto target = compiler::Target::Parse(spec);
  if (!target.ok()) {
    return absl::InvalidArgumentError(
        StrCat("bad target '", spec, "': ", std::string(target.status().message())));
  }
  compiler::ImportOptions import =
      ImportOptionsOf(stored, *store_, req.model_sha256, options_.max_elements, *target);
  auto model = LoadStoredModel(*store_, req.model_sha256, import);
  if (!model.ok()) {
    absl::StatusCode code = model.status().code();
    if (code != absl::StatusCode::kUnimplemented) code = absl::StatusCode::kInvalidArgument;
    std::string message(model.status().message());
    // A tensor past this tracker's bound: say which flag sets it.
    if (message.find(StrCat(options_.max_elements, " elements")) != std::string::npos) {
      message += " (this tracker's bound: kiln-tracker --max-elements)";
    }
    return absl::Status(code, message);
  }
  // Every task must have a schedule template before anything is stored.
  for (const auto& task : model->Tasks()) {
    auto knobs = compiler::KnobsOf(task.workload, *target);
    if (!knobs.ok()) {
      return absl::Status(
          knobs.status().code() == absl::StatusCode::kUnimplemented
              ? absl::StatusCode::kUnimplemented
              : absl::StatusCode::kInvalidArgument,
          StrCat("task ", task.workload.Canonical(), ": ", std::string(knobs.status().message())));
    }
  }

  auto id = NewJobId();
  if (!id.ok()) return id.status();
  const std::string* sha = &req.model_sha256;
  int64_t now = clock_->NowMs();
  storage::ArtifactRow art;
  art.sha256 = *sha;
  art.size = total;
  art.kind = "model";
  art.job_id = *id;
  art.created_unix_ms = now;
  if (absl::Status st = db_->AddArtifact(art); !st.ok()) return st;
  for (const auto& task : model->Tasks()) {
    storage::WorkloadRow w;
    w.key = task.workload.Key();
    w.op = task.workload.op;
    w.canonical = task.workload.Canonical();
    w.flops = task.workload.Flops();
    if (absl::Status st = db_->UpsertWorkload(w); !st.ok()) return st;
  }

  auto job = std::make_shared<Job>();
  job->timing = WithDefaults(req.timing, options_.default_timing);
  job->strategy = stored.strategy;
  job->budget_s = stored.budget_s;
  job->early_stopping = stored.early_stopping;
  job->deadline_unix_ms = stored.deadline_unix_ms;
  job->priority = stored.priority;
  job->skip_end_to_end = stored.skip_end_to_end = req.skip_end_to_end;
  job->external_data = stored.external_data;
  job->import = std::move(import);
  stored.timing = job->timing;
  job->row.id = *id;
  job->row.model_name = req.model_name.empty() ? "model" : req.model_name;
  job->row.model_sha256 = *sha;
  job->row.device_key = req.device_key;
  job->row.target = target->Spec();
  job->row.state = storage::JobState::kQueued;
  job->row.trials = req.trials;
  job->row.owner = req.owner;
  job->row.options_json = OptionsToJson(stored);
  job->row.created_unix_ms = now;
  job->row.updated_unix_ms = now;
  job->row.tracker_id = options_.tracker_id;
  if (!options_.tracker_id.empty()) job->row.lease_until_ms = now + options_.job_lease_ms;
  if (absl::Status st = db_->CreateJob(job->row); !st.ok()) return st;
  job->target = *target;
  int num_tasks = static_cast<int>(model->Tasks().size());
  job->model.emplace(std::move(*model));
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->events.push_back(
        {now, StrCat("job ", *id, " queued: ", num_tasks, " tasks, ", req.trials, " trials"),
         SnapshotLocked(*job)});
  }
  Log()->info("job {} submitted: model {} ({} bytes), key {}, target '{}', {} tasks, {} trials",
              *id, job->row.model_name, total, req.device_key, job->row.target, num_tasks,
              req.trials);
  Launch(job);
  return SubmitResult{*id, num_tasks};
}

int JobManager::RunningJobsOf(const std::string& owner) {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  int n = 0;
  for (const auto& job : jobs) {
    std::lock_guard<std::mutex> lock(job->mu);
    n +=
        job->row.owner == owner && (!storage::IsFinal(job->row.state) || job->ended_ms.load() == 0);
  }
  return n;
}

void JobManager::Launch(std::shared_ptr<Job> job) {
  std::vector<std::shared_ptr<Job>> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Jobs that ended a while ago leave memory (their rows and records stay
    // in the database, where Get, List and WaitEvents find them).
    const int64_t now = clock_->NowMs();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const int64_t ended = it->second->ended_ms.load();
      if (ended > 0 && now - ended >= options_.keep_finished_ms) {
        evicted.push_back(std::move(it->second));
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
    // The same job again (given up to another tracker once, claimed back
    // now): its old entry leaves, its thread joined below.
    if (auto old = jobs_.find(job->row.id); old != jobs_.end()) {
      evicted.push_back(std::move(old->second));
    }
    job->launch_seq = ++launches_;
    jobs_[job->row.id] = job;
  }
  for (auto& old : evicted) {
    if (old->thread.joinable()) old->thread.join();  // it has returned (or is returning)
  }
  job->thread = std::thread([this, job] {
    // Below the agents' sessions: a result's turnaround (read it, lease the
    // next batch, write it) must not wait for a tuner's proposals on a busy
    // machine. Linux takes a thread's niceness per thread (and raising it
    // needs no privilege).
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kJobThreadNice) != 0) {
      Log()->debug("job {}: cannot lower the job thread's priority", job->row.id);
    }
    Run(job);
  });
}

size_t JobManager::JobsInMemory() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

absl::Status JobManager::Start() {
  if (!options_.tracker_id.empty()) {
    if (absl::Status s = ClaimAndResume(); !s.ok()) return s;
    leases_thread_ = std::thread([this] { HoldJobs(); });
    return absl::OkStatus();
  }
  auto rows = db_->UnfinishedJobs();
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) Resume(row);
  return absl::OkStatus();
}

absl::Status JobManager::ClaimAndResume() {
  const int64_t now = clock_->NowMs();
  auto rows = db_->ClaimJobs(options_.tracker_id, now, now + options_.job_lease_ms);
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) {
    // Batches its last tracker relayed are that tracker's; their results
    // would reach nobody.
    if (absl::Status s = db_->DropBatchesOfJob(row.id); !s.ok()) return s;
    Log()->info("job {}: taken over by tracker {}", row.id, options_.tracker_id);
    Resume(row);
  }
  return absl::OkStatus();
}

void JobManager::HoldJobs() {
  const auto period = std::chrono::milliseconds(std::max<int64_t>(options_.job_lease_ms / 3, 1));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    leases_cv_.wait_for(lock, period, [&] { return stopping_.load(); });
    if (stopping_) break;
    // Jobs launched after this point may be missing from the answer (their
    // rows were written after it was read): Abandon leaves them alone.
    const uint64_t launched = launches_;
    lock.unlock();
    auto held = db_->RenewJobLeases(options_.tracker_id, clock_->NowMs() + options_.job_lease_ms);
    if (!held.ok()) {
      Log()->warn("renewing job leases: {}", held.status().ToString());
    } else {
      Abandon(*held, launched);
      for (const auto& [id, cancel] : *held) {
        if (!cancel) continue;
        auto job = Find(id);
        bool running = false;
        if (job) {
          std::lock_guard<std::mutex> job_lock(job->mu);
          running = !job->cancelled;
        }
        if (running) (void)Cancel(id);
      }
      if (absl::Status s = ClaimAndResume(); !s.ok()) {
        Log()->warn("claiming jobs: {}", s.ToString());
      }
    }
    lock.lock();
  }
}

void JobManager::Abandon(const std::vector<std::pair<std::string, bool>>& held, uint64_t launched) {
  std::set<std::string> ids;
  for (const auto& [id, cancel] : held) ids.insert(id);
  std::vector<std::shared_ptr<Job>> lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      if (job->ended_ms.load() == 0 && job->launch_seq <= launched && !ids.count(id)) {
        lost.push_back(job);
      }
    }
  }
  std::vector<std::string> given_up;
  for (const auto& job : lost) {
    std::lock_guard<std::mutex> lock(job->mu);
    // Ended here, or its row was written final here: nothing to give up.
    if (storage::IsFinal(job->row.state) || job->abandoned) continue;
    Log()->error(
        "job {}: this tracker's lease ran out and another tracker holds it now; "
        "stopping it here",
        job->row.id);
    job->abandoned = true;
    if (job->measurer) job->measurer->Interrupt();
    job->cv.notify_all();
    given_up.push_back(job->row.id);
  }
  for (const std::string& id : given_up) dispatcher_->CancelJob(id);  // its batches too
}

void JobManager::Resume(const storage::JobRow& row) {
  auto job = std::make_shared<Job>();
  job->row = row;
  auto stored = OptionsFromJson(row.options_json, options_.default_timing);
  if (stored.ok()) {
    job->timing = stored->timing;
    job->strategy = stored->strategy;
    job->budget_s = stored->budget_s;
    job->early_stopping = stored->early_stopping;
    job->deadline_unix_ms = stored->deadline_unix_ms;
    job->priority = stored->priority;
    job->skip_end_to_end = stored->skip_end_to_end;
    job->external_data = stored->external_data;
    auto target = compiler::Target::Parse(row.target);
    job->import = ImportOptionsOf(*stored, *store_, row.model_sha256, options_.max_elements,
                                  target.ok() ? *target : compiler::Target::Host());
  } else {
    // The job fails when it cannot load its model with these options.
    Log()->warn("job {}: unreadable options: {}", row.id, stored.status().ToString());
    job->timing = options_.default_timing;
  }
  Log()->info("resuming job {} (state {})", row.id, storage::JobStateName(row.state));
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->events.push_back(
        {clock_->NowMs(), StrCat("job ", row.id, " resumed"), SnapshotLocked(*job)});
  }
  Launch(job);
}

absl::StatusOr<std::unique_ptr<ModelUpload>> JobManager::NewUpload() {
  return ModelUpload::Begin(store_, db_, clock_, options_.max_model_bytes);
}

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
  options.record_holder = options_.tracker_id;
  options.record_scope = storage::RecordScope::Of(job.row.owner);
  // A cancelled job's thread ends at the tuner's next check, not at its next
  // measurement.
  options.stop = [this, &job] {
    std::lock_guard<std::mutex> lock(job.mu);
    return job.cancelled || job.abandoned.load() || stopping_.load();
  };
  // No run of a candidate lasts longer than the agent lets one candidate run.
  if (job.timing.timeout_ms > 0) options.max_cost_s = job.timing.timeout_ms / 1000.0;
  tuner::Tuner tuner(db_, &measurer, job.target, std::move(tasks), std::move(options));
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
  auto model =
      ModelWorkOf(*store_, job.row.model_sha256, job.external_data, job.import.input_shapes);
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
      InModelTasks(*db_, *job.model, job.target, 1, storage::RecordScope::Of(job.row.owner));
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
  auto tasks = InModelTasks(*db_, *job.model, job.target, tuner::InModelOptions{}.max_options,
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
        CompileWithBestRecords(*db_, *job.model, job.target,
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
  art.kind = "module";
  art.job_id = job.row.id;
  art.created_unix_ms = clock_->NowMs();
  if (absl::Status st = db_->AddArtifact(art); !st.ok()) return st;
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

absl::StatusOr<JobStatus> JobManager::Get(const std::string& job_id) {
  if (auto job = Find(job_id)) {
    std::lock_guard<std::mutex> lock(job->mu);
    return SnapshotLocked(*job);
  }
  auto row = db_->GetJob(job_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::NotFoundError(StrCat("unknown job '", job_id, "'"));
  // Not running in this process (finished before a restart): the per-task
  // table comes from the job's tasks and the records it stored.
  JobStatus s;
  s.row = **row;
  if (auto stored = OptionsFromJson(s.row.options_json, options_.default_timing); stored.ok()) {
    s.budget_s = stored->budget_s;
  }
  auto tasks = tuner::StoredTaskProgress(*db_, job_id, s.Finished() ? "done" : "waiting");
  if (!tasks.ok()) return tasks.status();
  s.tasks = *std::move(tasks);
  return s;
}

absl::StatusOr<JobStatus> JobManager::Cancel(const std::string& job_id) {
  auto job = Find(job_id);
  if (!job) {
    // Not running here: another tracker's (several on one database) is
    // asked through the database; otherwise there is nothing to cancel.
    auto status = Get(job_id);
    if (status.ok() && !status->Finished() && !options_.tracker_id.empty()) {
      if (absl::Status s = db_->RequestCancel(job_id); !s.ok()) return s;
    }
    return status;
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (storage::IsFinal(job->row.state)) {
      return SnapshotLocked(*job);
    }
    job->cancelled = true;
    job->row.state = storage::JobState::kCancelled;
    if (job->measurer) job->measurer->Interrupt();
    EventLocked(*job, "cancelled");
  }
  dispatcher_->CancelJob(job_id);
  Log()->info("job {} cancelled", job_id);
  std::lock_guard<std::mutex> lock(job->mu);
  return SnapshotLocked(*job);
}

absl::StatusOr<std::vector<JobStatus>> JobManager::List() {
  auto rows = db_->ListJobs();
  if (!rows.ok()) return rows.status();
  std::vector<JobStatus> out;
  for (const auto& row : *rows) {
    if (auto job = Find(row.id)) {
      std::lock_guard<std::mutex> lock(job->mu);
      out.push_back(SnapshotLocked(*job));
    } else {
      JobStatus s;
      s.row = row;
      out.push_back(std::move(s));
    }
  }
  return out;
}

absl::StatusOr<std::vector<JobEventEntry>> JobManager::WaitEvents(
    const std::string& job_id, size_t* next, std::chrono::milliseconds max_wait, bool* finished) {
  *finished = false;
  auto job = Find(job_id);
  if (!job) {
    // Not running in this process: one event with the stored state (and,
    // while another tracker runs it, one per wait until it ends).
    auto status = Get(job_id);
    if (!status.ok()) return status.status();
    if (!options_.tracker_id.empty() && !status->Finished() && *next > 0) {
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(max_wait, std::chrono::milliseconds(1000)));
      status = Get(job_id);
      if (!status.ok()) return status.status();
      ++*next;
      *finished = status->Finished();
      return std::vector<JobEventEntry>{
          {status->row.updated_unix_ms,
           StrCat("job ", job_id, " is ", storage::JobStateName(status->row.state)), *status}};
    }
    *finished = options_.tracker_id.empty() || status->Finished();
    if (*next > 0) return std::vector<JobEventEntry>{};
    *next = 1;
    return std::vector<JobEventEntry>{
        {status->row.updated_unix_ms,
         StrCat("job ", job_id, " is ", storage::JobStateName(status->row.state)), *status}};
  }
  std::unique_lock<std::mutex> lock(job->mu);
  auto total = [&] { return job->first_event + job->events.size(); };
  job->cv.wait_for(lock, max_wait, [&] { return total() > *next || stopping_.load(); });
  std::vector<JobEventEntry> out;
  for (size_t i = std::max(*next, job->first_event); i < total(); ++i) {
    out.push_back(job->events[i - job->first_event]);
  }
  *next = std::max(*next, total());
  *finished = storage::IsFinal(job->row.state);
  return out;
}

}  // namespace kiln::tracker
