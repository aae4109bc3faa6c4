#pragma once
// The job manager: validates and stores submitted models, and runs each job
// (one thread per job): tuning (the tuner's loop, tuner/tuner.h, measuring
// over the farm through a FarmMeasurer), then compiling the model with the
// best records into the artifact store. Unfinished jobs are resumed on
// Start(). Each job keeps a log of progress events for WatchJob.
//
// Thread-safe. No gRPC types here.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/artifact_signing.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "storage/artifact_store.h"
#include "storage/farm_store.h"
#include "storage/tuning_db.h"
#include "tracker/agent_registry.h"
#include "tracker/clock.h"
#include "tracker/compile_sandbox.h"
#include "tracker/dispatcher.h"
#include "tracker/end_to_end.h"
#include "tracker/model_upload.h"
#include "tuner/tuner.h"

namespace kiln::tracker {

struct JobManagerOptions {
  // The most bytes an uploaded model may have (with its external data files,
  // for a job); the operator's setting (kiln-tracker --max-model-bytes).
  int64_t max_model_bytes = int64_t{4} << 30;
  // The most elements any one tensor of a model may have, its inputs and
  // every intermediate value (kiln-tracker --max-elements;
  // compiler::ImportOptions::max_elements, capped at 2^32). 2^28: 1 GiB of
  // float32, more than any tensor of the models people tune (VGG's largest
  // weight has 2^26.6) and little enough for an agent to allocate a few.
  int64_t max_elements = int64_t{1} << 28;
  int32_t max_trials = 100000;
  // Jobs one user (or all anonymous callers together) may have running:
  // unfinished ones, cancelled ones whose thread has not returned yet, and
  // submissions being imported.
  int max_jobs_per_user = 16;
  // Progress events kept in memory per job (WatchJob), the newest.
  size_t max_events_kept = 1000;
  // How long an ended job stays in memory (then its row answers for it).
  int64_t keep_finished_ms = 10 * 60 * 1000;
  int batch_size = 8;  // candidates per MeasureBatch
  TimingOptions default_timing;
  std::string compiler_version = KILN_VERSION;
  // When set, a job's final compile runs in a child process of this binary
  // (`BINARY compile-worker`: tracker/compile_sandbox.h) under
  // compile_limits, opening db_path and artifacts_dir; a crash fails the job,
  // not the tracker. Unset (unit tests): in this process.
  std::string compile_worker;
  std::string db_path;
  std::string artifacts_dir;
  CompileLimits compile_limits;
  // Final compiles running at once (LLVM on every kernel of a model: many
  // at once starve the agents' sessions of CPU and the machine of memory);
  // 0: half the machine's cores, at least one. The others wait, "compiling".
  int max_concurrent_compiles = 0;
  // Several trackers on one database (PostgreSQL): this tracker's id, unique
  // among them. Set, the manager runs only the jobs it holds: those
  // submitted here and those it claims (unheld, or their tracker's lease ran
  // out: it died), renewing its leases every job_lease_ms / 3; a cancel of a
  // job another tracker runs is passed to it through the database. Empty
  // (one tracker): every unfinished job is resumed on Start.
  std::string tracker_id;
  int64_t job_lease_ms = 15000;
  // The tracker's key (kiln-tracker keys): every job's artifact is signed
  // with it before it is recorded (compiler/artifact_signing.h). Unset
  // (unit tests, or no key configured): artifacts are stored unsigned.
  std::shared_ptr<const compiler::SigningKey> signing_key;
};

struct SubmitRequest {
  std::string owner;         // the submitting user (tracker/auth.h Caller::user)
  std::string model_sha256;  // an uploaded model (NewUpload)
  // External data files of the model: location -> sha256 of an uploaded file.
  std::map<std::string, std::string> external_data;
  // Shapes for inputs with symbolic dimensions (compiler::ImportOptions).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::string model_name;
  std::string target;  // spec; empty: the target of an agent with device_key
  std::string device_key;
  int32_t trials = 0;
  std::string strategy;        // tuner::kSearchStrategies; empty: "xgb"
  double budget_s = 0;         // wall-clock budget of tuning; 0: none
  int32_t early_stopping = 0;  // tuner::TunerOptions::early_stopping
  double deadline_s = 0;       // after submission, the job fails if not ended (0: none)
  int32_t priority = 0;        // on the key's agents, higher first (-100..100)
  // Fields <= 0 take the defaults (flush_cache is taken as given).
  TimingOptions timing{0, 0, 0, 0, false, 0};
  // No whole-model check after the search (tracker/end_to_end.h).
  bool skip_end_to_end = false;
  std::string precision;  // compiler::ParsePrecision's names; empty: fp32
};

struct SubmitResult {
  std::string job_id;
  int num_tasks = 0;
};

// A task as the user sees it: trials, errors, best cost, state.
using TaskStatus = tuner::TaskProgress;

struct JobStatus {
  storage::JobRow row;
  std::vector<TaskStatus> tasks;
  double budget_s = 0;  // the job's time budget (0: none)
  bool Finished() const { return storage::IsFinal(row.state); }
  // The model's estimated latency from its tasks' best kernels: each
  // task's best time x its runs in the model; 0 until every task has one.
  double EstimatedLatencyS() const {
    double sum = 0;
    for (const TaskStatus& t : tasks) {
      if (t.best_cost_s <= 0) return 0;
      sum += t.best_cost_s * std::max(t.occurrences, 1);
    }
    return sum;
  }
};

struct JobEventEntry {
  int64_t unix_ms = 0;
  std::string message;
  JobStatus job;
};

class JobManager {
 public:
  JobManager(storage::TuningDb* tuning, storage::FarmStore* farm, storage::ArtifactStore* store,
             AgentRegistry* agents, Dispatcher* dispatcher, const Clock* clock,
             JobManagerOptions options = {});
  ~JobManager();  // Stop()
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Resumes every unfinished job of the database (with a tracker_id: the
  // jobs it claims, and starts claiming and renewing).
  absl::Status Start();
  // Stops all job threads; unfinished jobs stay unfinished in the database.
  void Stop();

  // A new upload into the store, under the model size limit.
  absl::StatusOr<std::unique_ptr<ModelUpload>> NewUpload();
  // NOT_FOUND when the model or a data file was not uploaded;
  // RESOURCE_EXHAUSTED when they are together larger than the limit.
  absl::StatusOr<SubmitResult> Submit(const SubmitRequest& request);
  absl::StatusOr<JobStatus> Get(const std::string& job_id);
  absl::StatusOr<JobStatus> Cancel(const std::string& job_id);
  absl::StatusOr<std::vector<JobStatus>> List();

  // Events of a job from number *next on, waiting at most max_wait for one
  // when there is none yet; *next is set past the last one returned. Only
  // the newest max_events_kept events are kept: a watcher that falls further
  // behind resumes at the oldest kept. *finished is set when the job has
  // ended and every event has been returned. NOT_FOUND for an unknown job.
  absl::StatusOr<std::vector<JobEventEntry>> WaitEvents(const std::string& job_id, size_t* next,
                                                        std::chrono::milliseconds max_wait,
                                                        bool* finished);
  // Jobs held in memory (running, or ended less than keep_finished_ms ago
  // when the last job was launched).
  size_t JobsInMemory();

 private:
  struct Job;
  std::shared_ptr<Job> Find(const std::string& job_id);
  absl::StatusOr<std::string> NewJobId();
  void Launch(std::shared_ptr<Job> job);
  // Runs a stored unfinished job again from its records.
  void Resume(const storage::JobRow& row);
  // With a tracker_id: claims jobs no live tracker holds, renews this
  // tracker's leases and passes on cancels asked elsewhere, until Stop.
  void HoldJobs();
  absl::Status ClaimAndResume();
  // Stops, without writing, running jobs missing from `held` (the jobs the
  // database says this tracker holds): another tracker has taken them over.
  // Only jobs launched before `launched` (launches_ when `held` was asked).
  void Abandon(const std::vector<std::pair<std::string, bool>>& held, uint64_t launched);
  uint64_t launches_ = 0;  // guarded by mu_
  std::thread leases_thread_;
  std::condition_variable leases_cv_;
  // The jobs of `owner` that count against max_jobs_per_user.
  int RunningJobsOf(const std::string& owner);
  void Run(std::shared_ptr<Job> job);
  absl::Status Tune(Job& job);
  // The whole model on the board (end_to_end.h): a point of the curve
  // during the search, and the final check that decides which configs the
  // module uses. Neither fails the job: what went wrong is in its report.
  static constexpr int32_t kCheckpointRounds = 7;
  absl::StatusOr<FarmRunnerOptions> RunnerOptions(Job& job);
  void MeasureCheckpoint(Job& job, int32_t trials);
  void CheckEndToEnd(Job& job);
  absl::StatusOr<EndToEndReport> LoadEndToEnd(Job& job);
  void SaveEndToEnd(Job& job, const EndToEndReport& report, const std::string& event);
  absl::Status Compile(Job& job);
  // Persists the row and appends an event (with a snapshot); job.mu held.
  // Records an event (and writes the job's row; a progress-only event at
  // most every kPersistProgressEveryMs).
  void EventLocked(Job& job, const std::string& message, bool progress_only = false);
  static constexpr int64_t kPersistProgressEveryMs = 1000;
  // The niceness of job threads (tuning, the final compile).
  static constexpr int kJobThreadNice = 5;
  // A compile slot (max_concurrent_compiles) for the job; false when the
  // tracker stops or the job is cancelled while it waits.
  bool AcquireCompileSlot(Job& job);
  void ReleaseCompileSlot();
  std::mutex compile_mu_;
  std::condition_variable compile_cv_;
  int compiles_running_ = 0;
  void SetState(Job& job, storage::JobState state, const std::string& message,
                const std::string& error = "");
  static JobStatus SnapshotLocked(const Job& job);

  storage::TuningDb* tuning_;
  storage::FarmStore* farm_;
  storage::ArtifactStore* store_;
  AgentRegistry* agents_;
  Dispatcher* dispatcher_;
  const Clock* clock_;
  JobManagerOptions options_;

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
  // Submissions being checked and imported, per owner (guarded by
  // submit_mu_, which is taken before mu_).
  std::mutex submit_mu_;
  std::map<std::string, int> submitting_;
  std::atomic<bool> stopping_{false};
  uint64_t id_counter_ = 0;
};

}  // namespace kiln::tracker
