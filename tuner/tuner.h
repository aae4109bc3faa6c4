#pragma once
// The tuning loop of one job: every task of a model shares one trial budget
// (and optionally a wall-clock budget). The TaskScheduler picks the task of
// each batch, the task's search strategy proposes its configs, a Measurer
// measures them, every result is stored in the log database as a record,
// and the strategy learns from it (its cost model is saved there too).
//
// Resumable: a Tuner built again for the same job reads back what the job
// measured, the time it spent, each task's history (so no config is measured
// twice for a workload, target and compiler version), and the cost models.
// Transient failures (timeout, agent lost) are measured again, up to
// kMaxAttempts in all (tuner/history.h); other failures never are.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"
#include "tuner/measurer.h"
#include "tuner/search.h"
#include "tuner/task_scheduler.h"

namespace kiln::tuner {

// A candidate whose one warm run is slower than this multiple of its task's
// best cost so far is not timed to the end (its one run is its cost): it
// cannot become the best, and a cost model only needs its rank.
inline constexpr double kStopAboveBest = 3.0;

// Confirmation. The fastest of hundreds of near-equal timings on a shared
// machine is often only the luckiest. So at the end of a run each task's
// kConfirmTop fastest configs other than the template's default are timed
// again beside the default, kConfirmRounds times (each batch times the
// default and them in turn, so that a slow spell of the machine hits them
// alike), and compile ranks them by the median of their records
// (BestValidConfig, tuner/history.h). Runs of kConfirmMinTrials trials or
// more keep kConfirmShare of their trials and of their time budget for it;
// the tasks are confirmed largest share of the model's estimated latency
// first, while that lasts. The confirming measurements count as trials.
inline constexpr int kConfirmTop = 2;
inline constexpr int kConfirmRounds = 3;
inline constexpr int kConfirmMinTrials = 100;
inline constexpr double kConfirmShare = 0.1;

struct TuningTask {
  compiler::Workload workload;
  int occurrences = 1;  // how often the model runs it
};

struct TunerOptions {
  std::string job_id;  // written into every record; seeds the search
  // Several trackers on one database: what must hold for the job's records
  // to be stored (storage::FarmStore::JobHeldBy); none for one tracker.
  storage::RecordFence record_fence;
  // Whose records the job reads: its history, the prior for its cost
  // model, the configs it skips as measured, its winners (RecordScope).
  storage::RecordScope record_scope;
  SearchKind strategy = SearchKind::kXgb;
  int trials = 0;       // measurements over all tasks
  double budget_s = 0;  // wall-clock budget of tuning (0: none)
  double spent_s = 0;   // of it, spent before (a resumed job)
  int batch_size = 8;
  // A task stops once this many of its trials brought no gain of 1% or more
  // over its best (0: never).
  int early_stopping = 0;
  std::string compiler_version = KILN_VERSION;
  // Where the time comes from (seconds; a steady clock unless set).
  std::function<double()> now_s;
  // True when tuning must end now (the job was cancelled, the tracker is
  // stopping): Run returns CANCELLED at its next check, before each task is
  // loaded and each batch proposed, not only when a measurement returns.
  std::function<bool()> stop;
};

// One task as the user sees it.
struct TaskProgress {
  std::string workload_key;
  std::string op;
  std::string canonical;
  double flops = 0;
  int occurrences = 1;
  int trials_done = 0;  // by this job
  int errors = 0;
  double best_cost_s = 0;  // 0: nothing ran yet (the log's best included)
  storage::TaskState state = storage::TaskState::kWaiting;
};

struct TunerProgress {
  std::vector<TaskProgress> tasks;
  int trials_done = 0;
  double tuning_s = 0;  // wall-clock time spent so far (resumed runs included)
  std::string message;  // what just happened, one line
};

class Tuner {
 public:
  // `db` and `measurer` must outlive the Tuner.
  Tuner(storage::TuningDb* db, Measurer* measurer, compiler::Target target,
        std::vector<TuningTask> tasks, TunerOptions options);
  ~Tuner();

  // Runs until the trial or time budget is spent or every task has stopped.
  // `progress` is called after each measured batch (and once at the start).
  // CANCELLED when the measurer was told to stop; any other error is the
  // database's or the template's.
  using ProgressFn = std::function<void(const TunerProgress&)>;
  absl::Status Run(const ProgressFn& progress);

 private:
  struct TaskRun;  // a task's search, history and progress
  struct Flight;   // a batch being measured

  absl::Status LoadTasks();
  // CANCELLED when TunerOptions::stop says so.
  absl::Status CheckStop() const;
  absl::Status StartTask(size_t task);
  absl::StatusOr<Flight> Propose(size_t task, int want);
  absl::StatusOr<std::string> Absorb(const Flight& flight,
                                     const std::vector<MeasureResult>& results);
  absl::Status Search(const ProgressFn& progress, int reserve, double budget_s, std::string* end);
  absl::Status Confirm(const ProgressFn& progress);
  absl::StatusOr<std::optional<Flight>> ConfirmFlight(size_t task, int* rounds);
  double TuningSeconds() const;
  TunerProgress Snapshot(std::string message) const;
  std::string TaskName(size_t task) const;

  storage::TuningDb* db_;
  Measurer* measurer_;
  compiler::Target target_;
  std::string target_spec_;
  std::vector<TuningTask> tasks_;
  TunerOptions options_;
  // One run's state.
  std::vector<TaskRun> runs_;
  std::unique_ptr<TaskScheduler> scheduler_;
  int trials_done_ = 0;
  double start_s_ = 0;
};

// A job's tasks as stored (its job_tasks, in order, with their workloads)
// and what the job's records say of each: trials, errors, and the best cost
// of its own records. A task with records but no stored row (a job from
// before tasks were stored) is appended with 1 occurrence. States are
// `state` for every task.
absl::StatusOr<std::vector<TaskProgress>> StoredTaskProgress(storage::TuningDb& db,
                                                             const std::string& job_id,
                                                             storage::TaskState state);

// The model's latency as the tuner sees it: sum over tasks of occurrences x
// best cost; 0 while a task has no cost yet.
double EstimatedLatency(const std::vector<TaskProgress>& tasks);

}  // namespace kiln::tuner
