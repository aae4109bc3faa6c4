#include "tuner/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "base/check.h"
#include "base/str.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "tuner/config_space.h"
#include "tuner/history.h"
#include "tuner/search.h"
#include "tuner/task_scheduler.h"

namespace kiln::tuner {
namespace {

// A batch whose proposals were all invalid or already taken is proposed
// again; after this many in a row the task's space counts as exhausted.
constexpr int kMaxBarrenRounds = 64;
// A gain smaller than this share of the best does not reset early stopping.
constexpr double kMinGain = 0.01;

uint64_t SeedOf(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// "0.123 ms (45.2 GFLOP/s)", or "none".
std::string FormatBest(double cost_s, double flops) {
  if (cost_s <= 0) return "none";
  std::string out = FormatSeconds(cost_s);
  if (flops > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " (%.1f GFLOP/s)", flops / cost_s / 1e9);
    out += buf;
  }
  return out;
}

}  // namespace

double EstimatedLatency(const std::vector<TaskProgress>& tasks) {
  double total = 0;
  for (const TaskProgress& t : tasks) {
    if (t.best_cost_s <= 0) return 0;
    total += t.occurrences * t.best_cost_s;
  }
  return total;
}

absl::StatusOr<std::vector<TaskProgress>> StoredTaskProgress(storage::TuningDb& db,
                                                             const std::string& job_id,
                                                             storage::TaskState state) {
  auto planned = db.JobTasks(job_id);
  if (!planned.ok()) return planned.status();
  auto records = db.RecordsOfJob(job_id);
  if (!records.ok()) return records.status();
  std::vector<TaskProgress> tasks;
  std::map<std::string, size_t> index;
  auto task_of = [&](const std::string& key, int occurrences) -> TaskProgress& {
    auto [it, added] = index.emplace(key, tasks.size());
    if (added) {
      TaskProgress t;
      t.workload_key = key;
      t.occurrences = occurrences;
      t.state = state;
      if (auto w = db.GetWorkload(key); w.ok() && w->has_value()) {
        t.op = (*w)->op;
        t.canonical = (*w)->canonical;
        t.flops = (*w)->flops;
      }
      tasks.push_back(std::move(t));
    }
    return tasks[it->second];
  };
  for (const storage::JobTaskRow& t : *planned) task_of(t.workload_key, t.occurrences);
  for (const storage::RecordRow& r : *records) {
    TaskProgress& t = task_of(r.workload_key, 1);
    ++t.trials_done;
    if (r.error_kind != storage::ErrorKind::kNone) {
      ++t.errors;
    } else if (t.best_cost_s == 0 || r.mean_cost_s < t.best_cost_s) {
      t.best_cost_s = r.mean_cost_s;
    }
  }
  return tasks;
}

struct Tuner::TaskRun {
  compiler::Workload workload;
  std::string key;
  std::unique_ptr<SearchStrategy> search;  // made at the task's first batch
  std::vector<compiler::Knob> knobs;       // its template's, for validating proposals
  TaskHistory history;
  std::set<std::string> in_flight;  // canonical configs being measured
  // Every config settled, in flight, awaiting a retry or found invalid: what
  // the strategy must not propose. Only grows, so it is kept, not rebuilt
  // from the others at every batch.
  ConfigSet taken;
  // The template's default, then one config per other algorithm it offers
  // (compiler::VariantConfigs), not yet measured: measured first.
  std::vector<compiler::Config> seeds;
  int last_gain_trial = 0;  // trials_done when the best last improved
  TaskProgress progress;
};

struct Tuner::Flight {
  size_t task = 0;
  bool confirm = false;       // settled configs timed again (Confirm)
  bool with_default = false;  // of them, the first is the template's default
  std::vector<compiler::Config> configs;
  std::vector<std::string> canonical;
};

Tuner::Tuner(storage::TuningDb* db, Measurer* measurer, compiler::Target target,
             std::vector<TuningTask> tasks, TunerOptions options)
    : db_(db),
      measurer_(measurer),
      target_(std::move(target)),
      target_spec_(target_.Spec()),
      tasks_(std::move(tasks)),
      options_(std::move(options)) {
  KILN_CHECK(db_ && measurer_) << "Tuner dependencies";
  if (!options_.now_s) {
    options_.now_s = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
}

Tuner::~Tuner() = default;

double Tuner::TuningSeconds() const { return options_.spent_s + options_.now_s() - start_s_; }

TunerProgress Tuner::Snapshot(std::string message) const {
  TunerProgress p;
  for (const TaskRun& run : runs_) p.tasks.push_back(run.progress);
  p.trials_done = trials_done_;
  p.tuning_s = TuningSeconds();
  p.message = std::move(message);
  return p;
}

std::string Tuner::TaskName(size_t i) const {
  return StrCat("task ", i + 1, "/", runs_.size(), " (", runs_[i].workload.op, ")");
}

absl::Status Tuner::CheckStop() const {
  if (options_.stop && options_.stop()) return absl::CancelledError("tuning was stopped");
  return absl::OkStatus();
}

absl::Status Tuner::LoadTasks() {
  // Each task's history, and what this job measured of it before.
  runs_ = std::vector<TaskRun>(tasks_.size());
  trials_done_ = 0;
  std::map<std::string, size_t> task_of;
  std::vector<storage::JobTaskRow> task_rows;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (absl::Status st = CheckStop(); !st.ok()) return st;
    TaskRun& run = runs_[i];
    run.workload = tasks_[i].workload;
    run.key = run.workload.Key();
    storage::WorkloadRow w{run.key, std::string(NameOf(run.workload.op)), run.workload.Canonical(),
                           run.workload.Flops()};
    if (absl::Status st = db_->UpsertWorkload(w); !st.ok()) return st;
    task_of[run.key] = i;
    task_rows.push_back({run.key, tasks_[i].occurrences});
    auto history = LoadTaskHistory(*db_, run.key, target_spec_, options_.compiler_version,
                                   options_.record_scope);
    if (!history.ok()) return history.status();
    run.history = *std::move(history);
    TaskProgress& p = run.progress;
    p.workload_key = run.key;
    p.op = NameOf(run.workload.op);
    p.canonical = run.workload.Canonical();
    p.flops = run.workload.Flops();
    p.occurrences = tasks_[i].occurrences;
    p.best_cost_s = run.history.best_cost_s;
  }
  if (!options_.job_id.empty()) {
    if (absl::Status st = db_->SetJobTasks(options_.job_id, task_rows); !st.ok()) return st;
    // What this job measured before (a resumed job).
    auto stored = StoredTaskProgress(*db_, options_.job_id, storage::TaskState::kWaiting);
    if (!stored.ok()) return stored.status();
    for (const TaskProgress& t : *stored) {
      auto it = task_of.find(t.workload_key);
      if (it == task_of.end()) continue;
      TaskProgress& p = runs_[it->second].progress;
      p.trials_done = t.trials_done;
      p.errors = t.errors;
      trials_done_ += t.trials_done;
    }
  }

  std::vector<double> weights;
  for (const TuningTask& t : tasks_) weights.push_back(std::max(1, t.occurrences));
  scheduler_ = std::make_unique<TaskScheduler>(weights);
  for (size_t i = 0; i < runs_.size(); ++i) {
    TaskRun& run = runs_[i];
    run.last_gain_trial = run.progress.trials_done;
    if (run.progress.trials_done > 0) {
      run.progress.state = storage::TaskState::kTuning;
      scheduler_->Record(i, run.progress.trials_done, run.progress.best_cost_s);
    }
  }
  return absl::OkStatus();
}

// Makes the task's search strategy, from its history and (xgb) the log's
// records of the same operator; restores its saved cost model.
absl::Status Tuner::StartTask(size_t i) {
  TaskRun& run = runs_[i];
  const std::string& version = options_.compiler_version;
  auto knobs = compiler::KnobsOf(run.workload, target_);
  if (!knobs.ok()) return knobs.status();
  SearchContext context{run.workload, target_, SeedOf(options_.job_id + "/" + run.key), {}};
  if (options_.strategy == SearchKind::kXgb) {
    // Transfer learning. Read when the task starts, not once per job: the
    // job's own earlier tasks are among the records.
    auto prior = PriorFromLog(*db_, run.workload, target_, version, 2000, options_.record_scope);
    if (!prior.ok()) return prior.status();
    context.prior = *std::move(prior);
  }
  run.knobs = *knobs;
  auto search = MakeSearch(options_.strategy, ConfigSpace(*knobs), std::move(context));
  if (!search.ok()) return search.status();
  run.search = *std::move(search);
  run.search->Update(run.history.results);
  // The strategy has them now; what it keeps of them is its own business.
  // (A config is about 1 KB of map nodes: 20 jobs of 100,000 trials held
  // gigabytes.)
  run.history.results.clear();
  run.history.results.shrink_to_fit();
  run.taken = run.history.settled;
  run.taken.insert(run.in_flight.begin(), run.in_flight.end());
  for (const auto& [canonical, attempts] : run.history.retry) run.taken.insert(canonical);
  auto saved = db_->GetCostModel(run.key, target_spec_, version);
  if (!saved.ok()) return saved.status();
  if (saved->has_value()) {
    // An unreadable model is retrained from the records instead.
    (void)run.search->RestoreModel((*saved)->model, static_cast<size_t>((*saved)->trained_on));
  }
  run.seeds.clear();
  if (auto v = compiler::VariantConfigs(run.workload, target_); v.ok()) {
    for (compiler::Config& c : *v) {
      if (!run.history.settled.count(compiler::CanonicalConfig(c)))
        run.seeds.push_back(std::move(c));
    }
  }
  return absl::OkStatus();
}

// Up to `want` configs to measure for task i: transient failures again, the
// template's default and one config per other algorithm first, then the
// strategy's proposals; never a settled,
// in-flight or invalid config. Empty once the space is exhausted.
absl::StatusOr<Tuner::Flight> Tuner::Propose(size_t i, int want) {
  TaskRun& run = runs_[i];
  if (!run.search) {
    if (absl::Status st = StartTask(i); !st.ok()) return st;
  }
  Flight flight;
  flight.task = i;
  ConfigSet& taken = run.taken;
  auto add = [&](compiler::Config config, std::string canonical) {
    flight.configs.push_back(std::move(config));
    flight.canonical.push_back(canonical);
    taken.insert(std::move(canonical));
  };
  auto full = [&] { return static_cast<int>(flight.configs.size()) >= want; };
  for (const auto& [canonical, attempts] : run.history.retry) {
    if (full()) break;
    if (run.in_flight.count(canonical)) continue;
    if (auto config = compiler::ParseConfig(canonical); config.ok()) add(*config, canonical);
  }
  size_t seeded = 0;
  for (; seeded < run.seeds.size() && !full(); ++seeded) {
    std::string canonical = compiler::CanonicalConfig(run.seeds[seeded]);
    if (!taken.count(canonical)) add(std::move(run.seeds[seeded]), std::move(canonical));
  }
  run.seeds.erase(run.seeds.begin(), run.seeds.begin() + static_cast<std::ptrdiff_t>(seeded));
  for (int barren = 0; !full();) {
    auto proposals = run.search->Propose(want - static_cast<int>(flight.configs.size()), taken);
    if (proposals.empty()) break;  // exhausted
    size_t before = flight.configs.size();
    for (auto& config : proposals) {
      std::string canonical = compiler::CanonicalConfig(config);
      if (taken.count(canonical)) continue;
      // Invalid configs are never measured.
      if (!compiler::ValidateConfig(run.workload, target_, config, run.knobs).ok()) {
        taken.insert(canonical);
        continue;
      }
      add(std::move(config), std::move(canonical));
    }
    if (flight.configs.size() == before && ++barren > kMaxBarrenRounds) break;
  }
  return flight;
}

// Stores a measured flight's records, updates the task's history, search
// and saved model, the scheduler and early stopping; returns the progress
// line.
absl::StatusOr<std::string> Tuner::Absorb(const Flight& flight,
                                          const std::vector<MeasureResult>& results) {
  TaskRun& run = runs_[flight.task];
  TaskProgress& p = run.progress;
  const std::string& version = options_.compiler_version;
  const double best_before = p.best_cost_s;
  std::vector<storage::RecordRow> records;
  for (size_t c = 0; c < flight.configs.size(); ++c) {
    storage::RecordRow rec;
    if (c >= results.size()) {
      rec.error_kind = storage::ErrorKind::kAgentLost;
      rec.error_message = "no result came back for this candidate";
    } else {
      // The measurement as it entered (checked there: storage::Measurement).
      static_cast<storage::Measurement&>(rec) = results[c];
      if (rec.cut_short && rec.error_message.empty()) {
        rec.error_message = StrCat("timed once: slower than ", kStopAboveBest, "x the best");
      }
      if (rec.error_kind == storage::ErrorKind::kNone) rec.mean_cost_s = Mean(rec.costs_s);
    }
    rec.workload_key = run.key;
    rec.target = target_spec_;
    rec.config = flight.canonical[c];
    rec.compiler_version = version;
    rec.job_id = options_.job_id;
    rec.unix_ms = NowUnixMs();
    records.push_back(std::move(rec));
  }
  // The batch's records in one transaction, then the bookkeeping.
  if (absl::Status st = db_->AddRecords(records, options_.record_fence); !st.ok()) return st;
  for (const storage::RecordRow& rec : records) {
    run.in_flight.erase(rec.config);
    AddToHistory(rec, run.history);
    ++p.trials_done;
    ++trials_done_;
    if (rec.error_kind != storage::ErrorKind::kNone) ++p.errors;
  }
  p.best_cost_s = run.history.best_cost_s;
  if (flight.confirm) {
    // Settled configs: their history and the strategy have them already.
    const size_t tuned = flight.configs.size() - (flight.with_default ? 1 : 0);
    return StrCat(TaskName(flight.task), ": timed its ", tuned, " fastest configs again",
                  flight.with_default ? " beside the default" : "");
  }
  // The new results go to the strategy, not into the task's memory.
  run.search->Update(run.history.results);
  run.history.results.clear();
  if (auto model = run.search->SavedModel()) {
    storage::CostModelRow row{run.key,
                              target_spec_,
                              version,
                              static_cast<int64_t>(model->second),
                              std::move(model->first),
                              NowUnixMs()};
    if (absl::Status st = db_->SaveCostModel(row); !st.ok()) return st;
  }
  scheduler_->Record(flight.task, p.trials_done, p.best_cost_s);
  if (p.best_cost_s > 0 && (best_before == 0 || p.best_cost_s < best_before * (1 - kMinGain))) {
    run.last_gain_trial = p.trials_done;
  }
  std::string message = StrCat(TaskName(flight.task), ": ", p.trials_done, " trials, best ",
                               FormatBest(p.best_cost_s, p.flops), ", ", p.errors, " errors");
  if (options_.early_stopping > 0 && !scheduler_->Retired(flight.task) &&
      p.trials_done - run.last_gain_trial >= options_.early_stopping) {
    scheduler_->Retire(flight.task);
    p.state = storage::TaskState::kStoppedEarly;
    message +=
        StrCat("; stopped early: no gain in ", p.trials_done - run.last_gain_trial, " trials");
  }
  return message;
}

// The search: batches proposed by the task scheduler and the tasks'
// strategies, as many in flight as the measurer takes, until all but `reserve` trials are
// spent, the clock reads `budget_s` (0: no limit), or every task stopped;
// `end` says which.
absl::Status Tuner::Search(const ProgressFn& progress, int reserve, double budget_s,
                           std::string* end) {
  std::map<uint64_t, Flight> flights;
  int outstanding = 0;
  *end = "trial budget spent";
  while (true) {
    while (static_cast<int>(flights.size()) < std::max(1, measurer_->Parallelism())) {
      if (absl::Status st = CheckStop(); !st.ok()) return st;
      const int left = options_.trials - reserve - trials_done_ - outstanding;
      if (left <= 0) break;
      if (options_.budget_s > 0 && TuningSeconds() >= budget_s) {
        *end = "time budget spent";
        break;
      }
      std::vector<int> pending(runs_.size(), 0);
      for (const auto& [ticket, f] : flights) pending[f.task] += static_cast<int>(f.configs.size());
      std::optional<size_t> next = scheduler_->Next(pending);
      if (!next) {
        *end = "every task has stopped";
        break;
      }
      // With few trials per task, smaller batches, so that every task gets some.
      const int share = std::max(1, options_.trials / std::max<int>(1, runs_.size()));
      auto flight = Propose(*next, std::min({options_.batch_size, left, share}));
      if (!flight.ok()) return flight.status();
      TaskRun& run = runs_[*next];
      if (flight->configs.empty()) {
        scheduler_->Retire(*next);
        if (run.in_flight.empty()) run.progress.state = storage::TaskState::kExhausted;
        progress(Snapshot(StrCat(TaskName(*next), ": search space exhausted after ",
                                 run.progress.trials_done, " trials")));
        continue;
      }
      run.progress.state = storage::TaskState::kTuning;
      run.in_flight.insert(flight->canonical.begin(), flight->canonical.end());
      MeasureBatch batch;
      batch.workload = run.workload;
      batch.configs = flight->configs;
      batch.stop_above_s = kStopAboveBest * run.progress.best_cost_s;
      outstanding += static_cast<int>(flight->configs.size());
      uint64_t ticket = measurer_->Submit(std::move(batch));
      flights.emplace(ticket, *std::move(flight));
    }
    if (flights.empty()) break;

    auto measured = measurer_->WaitAny();
    if (!measured.ok()) return measured.status();
    auto it = flights.find(measured->first);
    if (it == flights.end()) {
      return absl::InternalError(StrCat("the measurer returned unknown batch ", measured->first));
    }
    Flight flight = std::move(it->second);
    flights.erase(it);
    outstanding -= static_cast<int>(flight.configs.size());
    auto message = Absorb(flight, measured->second);
    if (!message.ok()) return message.status();
    progress(Snapshot(*std::move(message)));
  }
  return absl::OkStatus();
}

absl::Status Tuner::Run(const ProgressFn& progress) {
  if (!IsKnownValue(options_.strategy)) {
    return absl::InvalidArgumentError(
        StrCat("unknown search strategy ", static_cast<int>(options_.strategy)));
  }
  start_s_ = options_.now_s();
  if (absl::Status st = LoadTasks(); !st.ok()) return st;
  progress(Snapshot(StrCat("tuning ", runs_.size(), " tasks: ", trials_done_, "/", options_.trials,
                           " trials done")));

  // What the search leaves for confirming; what the confirmation leaves
  // (fewer tasks to confirm, or fewer trials than a batch) goes back to it.
  const bool confirm = options_.trials >= kConfirmMinTrials;
  const int reserve = confirm ? static_cast<int>(options_.trials * kConfirmShare) : 0;
  std::string end;
  absl::Status st =
      Search(progress, reserve,
             confirm ? options_.budget_s * (1 - kConfirmShare) : options_.budget_s, &end);
  if (st.ok() && confirm) st = Confirm(progress);
  if (st.ok() && confirm) st = Search(progress, 0, options_.budget_s, &end);
  if (!st.ok()) return st;
  for (TaskRun& run : runs_) {
    if (run.progress.state == storage::TaskState::kTuning ||
        run.progress.state == storage::TaskState::kWaiting) {
      run.progress.state = storage::TaskState::kDone;
    }
  }
  progress(Snapshot(StrCat("tuning finished (", end, "): ", trials_done_, " trials in ",
                           static_cast<int64_t>(TuningSeconds()), " s")));
  return absl::OkStatus();
}

// Task i's confirming batch: its kConfirmTop fastest configs that are not
// the template's default and that the template accepts, after the default
// when it ran (also when the default's record is the fastest: that one can
// be the lucky timing); nullopt when there is nothing to confirm (no other
// config ran, or every config has had its rounds: a resumed job). `rounds`:
// how many times the batch is still to be timed.
absl::StatusOr<std::optional<Tuner::Flight>> Tuner::ConfirmFlight(size_t i, int* rounds) {
  const TaskRun& run = runs_[i];
  auto top = db_->TopK(run.key, target_spec_, kBestCandidates, "", options_.record_scope);
  if (!top.ok()) return top.status();
  auto d = compiler::DefaultConfig(run.workload, target_);
  const std::string default_canonical = d.ok() ? compiler::CanonicalConfig(*d) : std::string();
  Flight flight;
  flight.task = i;
  flight.confirm = true;
  // Each config's first record was the search's; the rounds come on top of
  // the fewest records of the batch's configs.
  int fewest = kMaxConfigRecords;
  if (d.ok()) {
    auto timed =
        CostOfConfig(*db_, run.key, target_spec_, default_canonical, options_.record_scope);
    if (!timed.ok()) return timed.status();
    if (timed->records > 0) {
      fewest = timed->records;
      flight.with_default = true;
      flight.configs.push_back(*d);
      flight.canonical.push_back(default_canonical);
    }
  }
  const size_t others = flight.configs.size();
  for (const storage::RecordRow& r : *top) {
    if (flight.configs.size() - others >= static_cast<size_t>(kConfirmTop)) break;
    if (r.config == default_canonical || std::find(flight.canonical.begin(), flight.canonical.end(),
                                                   r.config) != flight.canonical.end()) {
      continue;
    }
    auto config = compiler::ParseConfig(r.config);
    if (config.ok()) *config = compiler::CompleteLoggedConfig(*config, run.knobs);
    if (!config.ok() || !compiler::ValidateConfig(run.workload, target_, *config, run.knobs).ok()) {
      continue;
    }
    flight.configs.push_back(*std::move(config));
    flight.canonical.push_back(r.config);
  }
  if (flight.configs.size() == others) return std::optional<Flight>();
  for (size_t c = others; c < flight.canonical.size(); ++c) {
    auto cost =
        CostOfConfig(*db_, run.key, target_spec_, flight.canonical[c], options_.record_scope);
    if (!cost.ok()) return cost.status();
    fewest = std::min(fewest, cost->records);
  }
  *rounds = kConfirmRounds + 1 - fewest;
  if (*rounds <= 0) return std::optional<Flight>();
  return std::optional<Flight>(std::move(flight));
}

// Times each task's fastest configs again beside its default (kConfirmTop,
// kConfirmRounds), largest share of the estimated latency first, while
// trials and time are left.
absl::Status Tuner::Confirm(const ProgressFn& progress) {
  std::vector<size_t> order(runs_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto share = [&](size_t i) {
    return runs_[i].progress.occurrences * runs_[i].progress.best_cost_s;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return share(a) > share(b); });
  for (size_t i : order) {
    int rounds = 0;
    auto flight = ConfirmFlight(i, &rounds);
    if (!flight.ok()) return flight.status();
    if (!flight->has_value()) continue;
    for (int r = 0; r < rounds; ++r) {
      if (absl::Status st = CheckStop(); !st.ok()) return st;
      const int size = static_cast<int>((*flight)->configs.size());
      if (options_.trials - trials_done_ < size) return absl::OkStatus();
      if (options_.budget_s > 0 && TuningSeconds() >= options_.budget_s) return absl::OkStatus();
      MeasureBatch batch;
      batch.workload = runs_[i].workload;
      batch.configs = (*flight)->configs;
      const uint64_t ticket = measurer_->Submit(std::move(batch));
      auto measured = measurer_->WaitAny();
      if (!measured.ok()) return measured.status();
      if (measured->first != ticket) {
        return absl::InternalError(StrCat("the measurer returned unknown batch ", measured->first));
      }
      auto message = Absorb(**flight, measured->second);
      if (!message.ok()) return message.status();
      progress(Snapshot(StrCat(*message, " (round ", r + 1, " of ", rounds, ")")));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::tuner
