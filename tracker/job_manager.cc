#include "tracker/job_manager.h"

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "compiler/config.h"
#include "compiler/kernel.h"
#include "deploy/check.h"
#include "deploy/str.h"
#include "spdlog/spdlog.h"
#include "tracker/job_options.h"
#include "tuner/config_space.h"
#include "tuner/history.h"
#include "tuner/search.h"
#include "tuner/task_scheduler.h"

namespace kiln::tracker {
namespace {

// A candidate whose one warm run is slower than this multiple of the task's
// best cost so far is not timed to the end (its one run is its cost): such a
// candidate cannot become the best, and a cost model only needs its rank.
constexpr double kStopAboveBest = 3.0;

std::shared_ptr<spdlog::logger> Log() {
  auto log = spdlog::get("tracker");
  return log ? log : spdlog::default_logger();
}

uint64_t SeedOf(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

struct JobManager::Job {
  std::mutex mu;
  compiler::ImportOptions import;  // input shapes and external data files
  std::condition_variable cv;
  storage::JobRow row;
  std::vector<TaskStatus> tasks;
  std::vector<compiler::Workload> workloads;
  std::vector<int> occurrences;
  TimingOptions timing;
  std::string strategy = "xgb";
  std::optional<compiler::Model> model;
  compiler::Target target;
  std::vector<JobEventEntry> events;
  bool cancelled = false;
  // The batch in flight: its results once they arrive.
  // Batches in flight (by id) and their results once they arrive.
  std::map<std::string, std::optional<std::vector<MeasureOutcome>>> pending;
  std::thread thread;
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
  stopping_ = true;
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (auto& job : jobs) {
    { std::lock_guard<std::mutex> lock(job->mu); }
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
  return s;
}

void JobManager::EventLocked(Job& job, const std::string& message) {
  job.row.updated_unix_ms = clock_->NowMs();
  absl::Status st = db_->UpdateJob(job.row);
  if (!st.ok()) Log()->warn("job {}: cannot update: {}", job.row.id, std::string(st.message()));
  JobEventEntry e;
  e.unix_ms = job.row.updated_unix_ms;
  e.message = message;
  e.job = SnapshotLocked(job);
  job.events.push_back(std::move(e));
  job.cv.notify_all();
}

void JobManager::SetState(Job& job, const std::string& state, const std::string& message,
                          const std::string& error) {
  std::lock_guard<std::mutex> lock(job.mu);
  // A cancelled job stays cancelled.
  if (job.row.state == "cancelled") return;
  job.row.state = state;
  if (!error.empty()) job.row.error = error;
  EventLocked(job, message);
  Log()->info("job {}: {}", job.row.id, message);
}

std::shared_ptr<JobManager::Job> JobManager::Find(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
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

absl::StatusOr<SubmitResult> JobManager::Submit(const SubmitRequest& req) {
  if (req.device_key.empty()) return absl::InvalidArgumentError("device_key is empty");
  if (req.trials < 1 || req.trials > options_.max_trials) {
    return absl::InvalidArgumentError(
        StrCat("trials must be in 1..", options_.max_trials, ", got ", req.trials));
  }
  if (req.model_sha256.empty()) {
    return absl::InvalidArgumentError(
        "no model: upload it first (UploadModel) and name it by its model_sha256");
  }
  StoredOptions stored;
  if (!req.strategy.empty()) stored.strategy = req.strategy;
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
  compiler::ImportOptions import = ImportOptionsOf(stored, *store_, options_.max_elements);
  auto model = LoadModel(req.model_sha256, import);
  if (!model.ok()) {
    absl::StatusCode code = model.status().code();
    if (code != absl::StatusCode::kUnimplemented) code = absl::StatusCode::kInvalidArgument;
    return absl::Status(code, std::string(model.status().message()));
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
  job->import = std::move(import);
  stored.timing = job->timing;
  job->row.id = *id;
  job->row.model_name = req.model_name.empty() ? "model" : req.model_name;
  job->row.model_sha256 = *sha;
  job->row.device_key = req.device_key;
  job->row.target = target->Spec();
  job->row.state = "queued";
  job->row.trials = req.trials;
  job->row.options_json = OptionsToJson(stored);
  job->row.created_unix_ms = now;
  job->row.updated_unix_ms = now;
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

void JobManager::Launch(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[job->row.id] = job;
  }
  job->thread = std::thread([this, job] { Run(job); });
}

absl::Status JobManager::Start() {
  auto rows = db_->UnfinishedJobs();
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) {
    auto job = std::make_shared<Job>();
    job->row = row;
    auto stored = OptionsFromJson(row.options_json, options_.default_timing);
    if (stored.ok()) {
      job->timing = stored->timing;
      job->strategy = stored->strategy;
      job->import = ImportOptionsOf(*stored, *store_, options_.max_elements);
    } else {
      // The job fails when it cannot load its model with these options.
      Log()->warn("job {}: unreadable options: {}", row.id, stored.status().ToString());
      job->timing = options_.default_timing;
    }
    Log()->info("resuming job {} (state {})", row.id, row.state);
    {
      std::lock_guard<std::mutex> lock(job->mu);
      job->events.push_back(
          {clock_->NowMs(), StrCat("job ", row.id, " resumed"), SnapshotLocked(*job)});
    }
    Launch(job);
  }
  return absl::OkStatus();
}

absl::StatusOr<compiler::Model> JobManager::LoadModel(const std::string& model_sha256,
                                                      const compiler::ImportOptions& options) {
  if (!store_->Contains(model_sha256)) {
    return absl::NotFoundError(StrCat("model ", model_sha256, " is not in the store"));
  }
  auto model = compiler::Model::FromOnnxFile(store_->PathOf(model_sha256), options);
  if (!model.ok()) return model.status();
  if (model->source_sha256() != model_sha256) {
    return absl::DataLossError(StrCat("stored model ", model_sha256, " is corrupt"));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<ModelUpload>> JobManager::NewUpload() {
  return ModelUpload::Begin(store_, db_, clock_, options_.max_model_bytes);
}

void JobManager::Run(std::shared_ptr<Job> job) {
  // A finished (or stopped) job lets go of its model: its weights may be
  // hundreds of megabytes.
  struct ReleaseModel {
    Job* job;
    ~ReleaseModel() { job->model.reset(); }
  } release{job.get()};
  absl::Status st = absl::OkStatus();
  if (!job->model.has_value()) {
    // A resumed job: reload the model and the target.
    auto model = LoadModel(job->row.model_sha256, job->import);
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
  if (st.ok()) st = Tune(*job);
  if (stopping_) return;  // the job stays unfinished and resumes next start
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->cancelled) return;
  }
  if (st.ok()) st = Compile(*job);
  if (stopping_) return;
  if (!st.ok()) {
    dispatcher_->CancelJob(job->row.id);
    std::string error =
        StrCat(absl::StatusCodeToString(st.code()), ": ", std::string(st.message()));
    SetState(*job, "failed", StrCat("job failed: ", error), error);
  }
}

absl::Status JobManager::Tune(Job& job) {
  const auto& tasks = job.model->Tasks();
  std::vector<double> weights;
  for (const auto& t : tasks) {
    weights.push_back(std::max(1.0, t.workload.Flops()) * std::max(1, t.occurrences));
  }
  std::vector<int> budgets;
  if (!tasks.empty()) {
    // Every task gets a share before the rest follows the flops: a cheap-looking
    // task (a pooling, a small dense) can still be slow with a bad config.
    // Deterministic in (trials, tasks), so a resumed job gets the same split.
    int n = static_cast<int>(tasks.size());
    int min_per_task = std::clamp(job.row.trials / (2 * n), 1, 16);
    budgets = tuner::AllocateTrials(weights, job.row.trials, min_per_task);
    KILN_CHECK(budgets.size() == tasks.size()) << "AllocateTrials returned a wrong size";
  }
  {
    std::lock_guard<std::mutex> lock(job.mu);
    job.tasks.clear();
    job.workloads.clear();
    for (size_t i = 0; i < tasks.size(); ++i) {
      const auto& w = tasks[i].workload;
      TaskStatus ts;
      ts.workload_key = w.Key();
      ts.op = w.op;
      ts.canonical = w.Canonical();
      ts.flops = w.Flops();
      ts.trials_budget = budgets[i];
      job.tasks.push_back(ts);
      job.workloads.push_back(w);
    }
  }
  // Trials this job already spent (a resumed job), per task.
  auto done_records = db_->QueryRecords("", job.row.target, 0);
  if (!done_records.ok()) return done_records.status();
  {
    std::lock_guard<std::mutex> lock(job.mu);
    int total = 0;
    for (const auto& r : *done_records) {
      if (r.job_id != job.row.id) continue;
      for (auto& t : job.tasks) {
        if (t.workload_key != r.workload_key) continue;
        t.trials_done++;
        if (r.error_kind != "none") t.errors++;
        total++;
        break;
      }
    }
    job.row.trials_done = total;
    if (job.cancelled) return absl::OkStatus();
    job.row.state = "tuning";
    EventLocked(job, StrCat("tuning ", tasks.size(), " tasks, ", job.row.trials, " trials"));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (stopping_) return absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(job.mu);
      if (job.cancelled) return absl::OkStatus();
    }
    if (absl::Status st = TuneTask(job, i); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status JobManager::TuneTask(Job& job, size_t task_index) {
  const compiler::Workload workload = job.workloads[task_index];
  const std::string key = workload.Key();
  const std::string target_spec = job.row.target;
  auto knobs = compiler::KnobsOf(workload, job.target);
  if (!knobs.ok()) return knobs.status();
  auto measured = db_->MeasuredConfigs(key, target_spec, options_.compiler_version);
  if (!measured.ok()) return measured.status();
  std::set<std::string> seen = *measured;
  auto best = db_->BestRecord(key, target_spec);
  if (!best.ok()) return best.status();

  int budget = 0;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    TaskStatus& ts = job.tasks[task_index];
    if (best->has_value()) ts.best_cost_s = (*best)->mean_cost_s;
    budget = ts.trials_budget;
    EventLocked(job, StrCat("task ", task_index + 1, "/", job.tasks.size(), " (", key,
                            "): ", ts.trials_done, "/", budget, " trials"));
  }

  tuner::ConfigSpace space(*knobs);
  tuner::SearchContext context{workload, job.target, SeedOf(job.row.id + "/" + key), {}};
  if (job.strategy == "xgb") {
    // Transfer learning: the cost model starts from the log's records of the
    // same operator on other workloads. Read per task, not once per job: the
    // job's own earlier tasks are among them.
    auto prior = tuner::PriorFromLog(*db_, workload, job.target, options_.compiler_version);
    if (!prior.ok()) return prior.status();
    context.prior = *std::move(prior);
  }
  auto search = tuner::MakeSearch(job.strategy, space, std::move(context));
  if (!search.ok()) return search.status();
  // What this workload's earlier measurements (a resumed job's included)
  // taught: the strategy and its model start from them.
  auto past = tuner::PastResults(*db_, key, target_spec, options_.compiler_version);
  if (!past.ok()) return past.status();
  (*search)->Update(*past);
  // The template's default config is measured first (unless the log already
  // has it), so that the tuned module is never slower than the untuned one.
  std::optional<compiler::Config> default_config;
  if (auto d = compiler::DefaultConfig(workload, job.target);
      d.ok() && !seen.count(compiler::CanonicalConfig(*d))) {
    default_config = *std::move(d);
  }
  struct InFlight {
    MeasureWork work;
    std::map<std::string, std::string> canonical_of;  // candidate id -> config
  };
  std::map<std::string, InFlight> in_flight;
  int outstanding = 0;  // candidates sent and not yet answered
  bool exhausted = false;
  int barren_rounds = 0;
  std::shared_ptr<Job> self = Find(job.row.id);
  KILN_CHECK(self != nullptr) << "running job is not registered";
  auto abandon = [&] {
    {
      std::lock_guard<std::mutex> lock(job.mu);
      job.pending.clear();
    }
    dispatcher_->CancelJob(job.row.id);
    return absl::OkStatus();
  };
  while (true) {
    // Keep one batch in flight per connected agent of the key.
    size_t limit = static_cast<size_t>(std::max(1, agents_->ConnectedCount(job.row.device_key)));
    while (!exhausted && in_flight.size() < limit) {
      int done = 0;
      double best_s = 0;
      {
        std::lock_guard<std::mutex> lock(job.mu);
        if (job.cancelled) break;
        done = job.tasks[task_index].trials_done;
        best_s = job.tasks[task_index].best_cost_s;
      }
      int want = std::min(options_.batch_size, budget - done - outstanding);
      if (want <= 0) break;
      std::vector<compiler::Config> proposals;
      if (default_config) {
        proposals.push_back(*std::move(default_config));
        default_config.reset();
      }
      if (static_cast<int>(proposals.size()) < want) {
        for (auto& c : (*search)->Propose(want - static_cast<int>(proposals.size()), seen)) {
          proposals.push_back(std::move(c));
        }
      }
      if (proposals.empty()) {
        Log()->info("job {}: task {} space exhausted after {} trials", job.row.id, key, done);
        exhausted = true;
        break;
      }
      InFlight batch;
      MeasureWork& work = batch.work;
      work.job_id = job.row.id;
      work.device_key = job.row.device_key;
      work.workload_key = key;
      work.workload_op = workload.op;
      work.workload_canonical = workload.Canonical();
      work.workload_flops = workload.Flops();
      work.target = target_spec;
      work.timing = job.timing;
      work.timing.stop_above_s = kStopAboveBest * best_s;
      for (const auto& config : proposals) {
        std::string canonical = compiler::CanonicalConfig(config);
        if (!seen.insert(canonical).second) continue;
        // Invalid configs are never measured.
        if (!compiler::ValidateConfig(workload, job.target, config).ok()) continue;
        std::string cid = StrCat("c", work.candidates.size());
        batch.canonical_of[cid] = canonical;
        work.candidates.push_back({cid, config});
      }
      if (work.candidates.empty()) {
        if (++barren_rounds > 64) {
          Log()->info("job {}: task {}: no valid configs left to propose", job.row.id, key);
          exhausted = true;
        }
        continue;
      }
      barren_rounds = 0;
      {
        std::lock_guard<std::mutex> lock(job.mu);
        // Submitting under the job lock: the callback cannot run before the
        // batch is registered as pending.
        std::string batch_id = dispatcher_->Submit(
            work, [self](const MeasureWork& w, std::vector<MeasureOutcome> results) {
              std::lock_guard<std::mutex> lock(self->mu);
              auto it = self->pending.find(w.batch_id);
              if (it == self->pending.end()) return;
              it->second = std::move(results);
              self->cv.notify_all();
            });
        job.pending[batch_id] = std::nullopt;
        work.batch_id = batch_id;
      }
      outstanding += static_cast<int>(work.candidates.size());
      std::string id = work.batch_id;
      in_flight.emplace(id, std::move(batch));
    }
    if (stopping_) return abandon();
    if (in_flight.empty()) {
      std::lock_guard<std::mutex> lock(job.mu);
      if (job.cancelled) return absl::OkStatus();
      break;
    }

    // Wait for any batch's results.
    std::string ready_id;
    std::vector<MeasureOutcome> results;
    {
      std::unique_lock<std::mutex> lock(job.mu);
      auto ready = [&] {
        for (const auto& [id, r] : job.pending) {
          if (r.has_value()) return true;
        }
        return false;
      };
      job.cv.wait(lock, [&] { return ready() || job.cancelled || stopping_.load(); });
      if (job.cancelled || stopping_) {
        lock.unlock();
        return abandon();
      }
      for (auto it = job.pending.begin(); it != job.pending.end(); ++it) {
        if (!it->second.has_value()) continue;
        ready_id = it->first;
        results = std::move(*it->second);
        job.pending.erase(it);
        break;
      }
    }
    auto flight = in_flight.find(ready_id);
    KILN_CHECK(flight != in_flight.end()) << "results for unknown batch " << ready_id;
    const MeasureWork work = std::move(flight->second.work);
    std::map<std::string, std::string> canonical_of = std::move(flight->second.canonical_of);
    in_flight.erase(flight);
    outstanding -= static_cast<int>(work.candidates.size());

    // Store every result; candidates without one count as lost.
    std::map<std::string, MeasureOutcome> by_id;
    for (auto& r : results) by_id[r.candidate_id] = std::move(r);
    std::map<std::string, int64_t> per_agent;
    int64_t now = clock_->NowMs();
    std::vector<storage::RecordRow> rows;
    for (const auto& c : work.candidates) {
      storage::RecordRow rec;
      rec.workload_key = key;
      rec.target = target_spec;
      rec.config = canonical_of[c.candidate_id];
      rec.compiler_version = options_.compiler_version;
      rec.job_id = job.row.id;
      rec.unix_ms = now;
      auto it = by_id.find(c.candidate_id);
      if (it == by_id.end()) {
        rec.error_kind = "agent_lost";
        rec.error_message = "the agent sent no result for this candidate";
      } else {
        const MeasureOutcome& o = it->second;
        rec.agent_id = o.agent_id;
        rec.error_kind = o.error_kind.empty() ? "none" : o.error_kind;
        rec.error_message = o.error_message;
        if (o.cut_short && rec.error_message.empty()) {
          rec.error_message = StrCat("timed once: slower than ", kStopAboveBest, "x the best");
        }
        rec.costs_s = o.costs_s;
        if (rec.error_kind == "none" && rec.costs_s.empty()) {
          rec.error_kind = "runtime";
          rec.error_message = "no costs reported";
        }
        rec.mean_cost_s = rec.error_kind == "none" ? Mean(rec.costs_s) : 0;
        if (rec.error_kind != "none") rec.costs_s.clear();
        if (!o.agent_id.empty()) per_agent[o.agent_id]++;
      }
      auto id = db_->AddRecord(rec);
      if (!id.ok()) return id.status();
      rows.push_back(std::move(rec));
    }
    for (const auto& [agent, n] : per_agent) agents_->AddResults(agent, n);
    std::vector<std::pair<compiler::Config, double>> results_of_batch;
    for (const auto& rec : rows) {
      if (auto r = tuner::ResultOf(rec)) results_of_batch.push_back(*std::move(r));
    }
    (*search)->Update(results_of_batch);
    {
      std::lock_guard<std::mutex> lock(job.mu);
      TaskStatus& ts = job.tasks[task_index];
      for (const auto& rec : rows) {
        ts.trials_done++;
        job.row.trials_done++;
        if (rec.error_kind != "none") {
          ts.errors++;
        } else if (ts.best_cost_s == 0 || rec.mean_cost_s < ts.best_cost_s) {
          ts.best_cost_s = rec.mean_cost_s;
        }
      }
      EventLocked(job, StrCat("task ", task_index + 1, "/", job.tasks.size(), ": ", ts.trials_done,
                              "/", ts.trials_budget, " trials, best ", ts.best_cost_s * 1e3,
                              " ms, ", ts.errors, " errors"));
    }
  }
  return absl::OkStatus();
}

absl::Status JobManager::Compile(Job& job) {
  SetState(job, "compiling", "compiling the model with the best configs");
  const std::string target_spec = job.row.target;
  storage::LogDb* db = db_;
  compiler::ConfigLookup lookup =
      [db, target_spec](const compiler::Workload& w) -> std::optional<compiler::Config> {
    auto best = db->BestRecord(w.Key(), target_spec);
    if (!best.ok() || !best->has_value()) return std::nullopt;
    auto config = compiler::ParseConfig((*best)->config);
    if (!config.ok()) return std::nullopt;
    return *config;
  };
  compiler::CompileReport report;
  auto bytes = compiler::CompileModel(*job.model, job.target, lookup, {}, &report);
  if (!bytes.ok()) return bytes.status();
  auto sha = store_->Put(*bytes);
  if (!sha.ok()) return sha.status();
  storage::ArtifactRow art;
  art.sha256 = *sha;
  art.size = static_cast<int64_t>(bytes->size());
  art.kind = "module";
  art.job_id = job.row.id;
  art.created_unix_ms = clock_->NowMs();
  if (absl::Status st = db_->AddArtifact(art); !st.ok()) return st;
  {
    std::lock_guard<std::mutex> lock(job.mu);
    if (job.row.state == "cancelled") return absl::OkStatus();
    job.row.artifact_sha256 = *sha;
    job.row.state = "completed";
    EventLocked(job, StrCat("completed: ", report.kernels, " kernels (", report.tuned_kernels,
                            " tuned), artifact ", *sha, " (", bytes->size(), " bytes)"));
  }
  Log()->info("job {} completed: artifact {} ({} bytes)", job.row.id, *sha, bytes->size());
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
  // table comes from the records the job stored.
  JobStatus s;
  s.row = **row;
  auto records = db_->RecordsOfJob(job_id);
  if (!records.ok()) return records.status();
  std::map<std::string, size_t> index;
  for (const storage::RecordRow& r : *records) {
    auto [it, added] = index.emplace(r.workload_key, s.tasks.size());
    if (added) {
      TaskStatus t;
      t.workload_key = r.workload_key;
      if (auto w = db_->GetWorkload(r.workload_key); w.ok() && w->has_value()) {
        t.op = (*w)->op;
        t.canonical = (*w)->canonical;
        t.flops = (*w)->flops;
      }
      s.tasks.push_back(std::move(t));
    }
    TaskStatus& t = s.tasks[it->second];
    ++t.trials_done;
    t.trials_budget = t.trials_done;
    if (r.error_kind != "none") {
      ++t.errors;
    } else if (t.best_cost_s == 0 || r.mean_cost_s < t.best_cost_s) {
      t.best_cost_s = r.mean_cost_s;
    }
  }
  return s;
}

absl::StatusOr<JobStatus> JobManager::Cancel(const std::string& job_id) {
  auto job = Find(job_id);
  if (!job) return Get(job_id);  // not running here: nothing to cancel
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->row.state == "completed" || job->row.state == "failed" ||
        job->row.state == "cancelled") {
      return SnapshotLocked(*job);
    }
    job->cancelled = true;
    job->row.state = "cancelled";
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
    const std::string& job_id, size_t from, std::chrono::milliseconds max_wait, bool* finished) {
  *finished = false;
  auto job = Find(job_id);
  if (!job) {
    // Not running in this process: one event with the stored state.
    auto status = Get(job_id);
    if (!status.ok()) return status.status();
    *finished = true;
    if (from > 0) return std::vector<JobEventEntry>{};
    return std::vector<JobEventEntry>{
        {status->row.updated_unix_ms, StrCat("job ", job_id, " is ", status->row.state), *status}};
  }
  std::unique_lock<std::mutex> lock(job->mu);
  auto ended = [&] {
    return job->row.state == "completed" || job->row.state == "failed" ||
           job->row.state == "cancelled";
  };
  job->cv.wait_for(lock, max_wait, [&] { return job->events.size() > from || stopping_.load(); });
  std::vector<JobEventEntry> out;
  for (size_t i = from; i < job->events.size(); ++i) out.push_back(job->events[i]);
  *finished = ended() && from + out.size() == job->events.size();
  return out;
}

}  // namespace kiln::tracker
