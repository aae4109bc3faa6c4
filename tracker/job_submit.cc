// JobManager::Submit: a request checked, its model imported and split into
// tasks, the job stored and launched.
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
#include "tracker/measure_proto.h"
#include "tuner/history.h"
#include "tuner/search.h"

namespace kiln::tracker {

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
    auto existing = farm_->GetJob(id);
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
  if (!req.strategy.empty()) {
    absl::StatusOr<tuner::SearchKind> search = tuner::ParseSearch(req.strategy);
    if (!search.ok()) return search.status();
    stored.strategy = *search;
  }
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
  // The timing policy: 0 is the farm's default; each bounded so that no job
  // keeps an agent (or the records table) busy without end.
  struct Bound {
    const char* name;
    int32_t value, max;
  };
  for (const Bound& b :
       {Bound{"number", req.timing.number, 1000000}, Bound{"repeat", req.timing.repeat, kMaxCosts},
        Bound{"min_repeat_ms", req.timing.min_repeat_ms, 60000},
        Bound{"cooldown_ms", req.timing.cooldown_ms, 60000},
        Bound{"timeout_ms", req.timing.timeout_ms, 3600000}}) {
    if (b.value < 0 || b.value > b.max) {
      return absl::InvalidArgumentError(StrCat(
          "timing ", b.name, " must be 0 (the farm's default) to ", b.max, ", got ", b.value));
    }
  }
  if (req.deadline_s > 0) {
    stored.deadline_unix_ms = clock_->NowMs() + static_cast<int64_t>(req.deadline_s * 1000);
  }
  stored.input_shapes = req.input_shapes;
  stored.external_data = req.external_data;
  if (!req.precision.empty()) {
    absl::StatusOr<compiler::Precision> p = compiler::ParsePrecision(req.precision);
    if (!p.ok()) return p.status();
    stored.precision = *p;
  }
  int64_t total = 0;
  auto stored_size = [&](const std::string& sha, const std::string& what) -> absl::Status {
    if (!kiln::IsSha256Hex(sha)) {
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
  if (target.ok() && target->is_gpu() && stored.precision != compiler::Precision::kFloat32) {
    return absl::InvalidArgumentError(StrCat("precision ",
                                             compiler::PrecisionName(stored.precision),
                                             " is built for CPU targets only, not '", spec, "'"));
  }
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
  art.kind = storage::ArtifactKind::kModel;
  art.job_id = *id;
  art.created_unix_ms = now;
  if (absl::Status st = farm_->AddArtifact(art); !st.ok()) return st;
  for (const auto& task : model->Tasks()) {
    storage::WorkloadRow w;
    w.key = task.workload.Key();
    w.op = NameOf(task.workload.op);
    w.canonical = task.workload.Canonical();
    w.flops = task.workload.Flops();
    if (absl::Status st = tuning_->UpsertWorkload(w); !st.ok()) return st;
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
  if (absl::Status st = farm_->CreateJob(job->row); !st.ok()) return st;
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

}  // namespace kiln::tracker
