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

#include "compiler/config.h"
#include "compiler/kernel.h"
#include "deploy/check.h"
#include "deploy/str.h"
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

struct TaskRun {
  compiler::Workload workload;
  std::string key;
  std::unique_ptr<SearchStrategy> search;  // made at the task's first batch
  TaskHistory history;
  std::set<std::string> in_flight;  // canonical configs being measured
  bool default_pending = true;      // the template's default is measured first
  int last_gain_trial = 0;          // trials_done when the best last improved
  TaskProgress progress;
};

struct Flight {
  size_t task = 0;
  std::vector<compiler::Config> configs;
  std::vector<std::string> canonical;
};

}  // namespace

double EstimatedLatency(const std::vector<TaskProgress>& tasks) {
  double total = 0;
  for (const TaskProgress& t : tasks) {
    if (t.best_cost_s <= 0) return 0;
    total += t.occurrences * t.best_cost_s;
  }
  return total;
}

absl::StatusOr<std::vector<TaskProgress>> StoredTaskProgress(storage::LogDb& db,
                                                             const std::string& job_id,
                                                             const std::string& state) {
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
    if (r.error_kind != "none") {
      ++t.errors;
    } else if (t.best_cost_s == 0 || r.mean_cost_s < t.best_cost_s) {
      t.best_cost_s = r.mean_cost_s;
    }
  }
  return tasks;
}

Tuner::Tuner(storage::LogDb* db, Measurer* measurer, compiler::Target target,
             std::vector<TuningTask> tasks, TunerOptions options)
    : db_(db),
      measurer_(measurer),
      target_(std::move(target)),
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

absl::Status Tuner::Run(const ProgressFn& progress) {
  if (absl::Status st = CheckSearchName(options_.strategy); !st.ok()) return st;
  const std::string target_spec = target_.Spec();
  const std::string& version = options_.compiler_version;
  const double start_s = options_.now_s();
  auto tuning_s = [&] { return options_.spent_s + options_.now_s() - start_s; };

  // Each task's history, and what this job measured of it before.
  std::vector<TaskRun> runs(tasks_.size());
  std::map<std::string, size_t> task_of;
  std::vector<storage::JobTaskRow> task_rows;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    TaskRun& run = runs[i];
    run.workload = tasks_[i].workload;
    run.key = run.workload.Key();
    storage::WorkloadRow w{run.key, run.workload.op, run.workload.Canonical(),
                           run.workload.Flops()};
    if (absl::Status st = db_->UpsertWorkload(w); !st.ok()) return st;
    task_of[run.key] = i;
    task_rows.push_back({run.key, tasks_[i].occurrences});
    auto history = LoadTaskHistory(*db_, run.key, target_spec, version);
    if (!history.ok()) return history.status();
    run.history = *std::move(history);
    TaskProgress& p = run.progress;
    p.workload_key = run.key;
    p.op = run.workload.op;
    p.canonical = run.workload.Canonical();
    p.flops = run.workload.Flops();
    p.occurrences = tasks_[i].occurrences;
    p.best_cost_s = run.history.best_cost_s;
  }
  if (!options_.job_id.empty()) {
    if (absl::Status st = db_->SetJobTasks(options_.job_id, task_rows); !st.ok()) return st;
  }
  // What this job measured before (a resumed job).
  int trials_done = 0;
  if (!options_.job_id.empty()) {
    auto stored = StoredTaskProgress(*db_, options_.job_id, "");
    if (!stored.ok()) return stored.status();
    for (const TaskProgress& t : *stored) {
      auto it = task_of.find(t.workload_key);
      if (it == task_of.end()) continue;
      TaskProgress& p = runs[it->second].progress;
      p.trials_done = t.trials_done;
      p.errors = t.errors;
      trials_done += t.trials_done;
    }
  }

  std::vector<double> weights;
  for (const TuningTask& t : tasks_) weights.push_back(std::max(1, t.occurrences));
  TaskScheduler scheduler(weights);
  for (size_t i = 0; i < runs.size(); ++i) {
    TaskRun& run = runs[i];
    run.last_gain_trial = run.progress.trials_done;
    if (run.progress.trials_done > 0) {
      run.progress.state = "tuning";
      scheduler.Record(i, run.progress.trials_done, run.progress.best_cost_s);
    }
  }

  auto snapshot = [&](std::string message) {
    TunerProgress p;
    for (const TaskRun& run : runs) p.tasks.push_back(run.progress);
    p.trials_done = trials_done;
    p.tuning_s = tuning_s();
    p.message = std::move(message);
    return p;
  };
  auto task_name = [&](size_t i) {
    return StrCat("task ", i + 1, "/", runs.size(), " (", runs[i].workload.op, ")");
  };

  // Makes the task's search strategy, from its history and (xgb) the log's
  // records of the same operator; restores its saved cost model.
  auto start_task = [&](size_t i) -> absl::Status {
    TaskRun& run = runs[i];
    auto knobs = compiler::KnobsOf(run.workload, target_);
    if (!knobs.ok()) return knobs.status();
    SearchContext context{run.workload, target_, SeedOf(options_.job_id + "/" + run.key), {}};
    if (options_.strategy == "xgb") {
      // Transfer learning. Read when the task starts, not once per job: the
      // job's own earlier tasks are among the records.
      auto prior = PriorFromLog(*db_, run.workload, target_, version);
      if (!prior.ok()) return prior.status();
      context.prior = *std::move(prior);
    }
    auto search = MakeSearch(options_.strategy, ConfigSpace(*knobs), std::move(context));
    if (!search.ok()) return search.status();
    run.search = *std::move(search);
    run.search->Update(run.history.results);
    auto saved = db_->GetCostModel(run.key, target_spec, version);
    if (!saved.ok()) return saved.status();
    if (saved->has_value()) {
      // An unreadable model is retrained from the records instead.
      (void)run.search->RestoreModel((*saved)->model, static_cast<size_t>((*saved)->trained_on));
    }
    if (auto d = compiler::DefaultConfig(run.workload, target_); d.ok()) {
      run.default_pending = !run.history.settled.count(compiler::CanonicalConfig(*d));
    } else {
      run.default_pending = false;
    }
    return absl::OkStatus();
  };

  // Up to `want` configs to measure for task i: transient failures again,
  // the template's default first, then the strategy's proposals; never a
  // settled or invalid config. Empty once the space is exhausted.
  auto propose = [&](size_t i, int want) -> absl::StatusOr<Flight> {
    TaskRun& run = runs[i];
    if (!run.search) {
      if (absl::Status st = start_task(i); !st.ok()) return st;
    }
    Flight flight;
    flight.task = i;
    std::set<std::string> taken = run.history.settled;
    taken.insert(run.in_flight.begin(), run.in_flight.end());
    for (const auto& [canonical, attempts] : run.history.retry) taken.insert(canonical);
    auto add = [&](compiler::Config config, std::string canonical) {
      flight.configs.push_back(std::move(config));
      flight.canonical.push_back(canonical);
      taken.insert(std::move(canonical));
    };
    for (const auto& [canonical, attempts] : run.history.retry) {
      if (static_cast<int>(flight.configs.size()) >= want) break;
      if (run.in_flight.count(canonical)) continue;
      if (auto config = compiler::ParseConfig(canonical); config.ok()) add(*config, canonical);
    }
    if (run.default_pending && static_cast<int>(flight.configs.size()) < want) {
      run.default_pending = false;
      auto d = compiler::DefaultConfig(run.workload, target_);
      if (d.ok()) {
        std::string canonical = compiler::CanonicalConfig(*d);
        if (!taken.count(canonical)) add(*d, canonical);
      }
    }
    for (int barren = 0; static_cast<int>(flight.configs.size()) < want;) {
      auto proposals = run.search->Propose(want - static_cast<int>(flight.configs.size()), taken);
      if (proposals.empty()) break;  // exhausted
      size_t before = flight.configs.size();
      for (auto& config : proposals) {
        std::string canonical = compiler::CanonicalConfig(config);
        if (taken.count(canonical)) continue;
        // Invalid configs are never measured.
        if (!compiler::ValidateConfig(run.workload, target_, config).ok()) {
          taken.insert(canonical);
          continue;
        }
        add(std::move(config), std::move(canonical));
      }
      if (flight.configs.size() == before && ++barren > kMaxBarrenRounds) break;
    }
    return flight;
  };

  progress(snapshot(StrCat("tuning ", runs.size(), " tasks: ", trials_done, "/", options_.trials,
                           " trials done")));

  std::map<uint64_t, Flight> flights;
  int outstanding = 0;
  std::string end = "trial budget spent";
  while (true) {
    while (static_cast<int>(flights.size()) < std::max(1, measurer_->Parallelism())) {
      const int left = options_.trials - trials_done - outstanding;
      if (left <= 0) break;
      if (options_.budget_s > 0 && tuning_s() >= options_.budget_s) {
        end = "time budget spent";
        break;
      }
      std::vector<int> pending(runs.size(), 0);
      for (const auto& [ticket, f] : flights) pending[f.task] += static_cast<int>(f.configs.size());
      std::optional<size_t> next = scheduler.Next(pending);
      if (!next) {
        end = "every task has stopped";
        break;
      }
      // With few trials per task, smaller batches, so that every task gets some.
      const int share = std::max(1, options_.trials / std::max<int>(1, runs.size()));
      auto flight = propose(*next, std::min({options_.batch_size, left, share}));
      if (!flight.ok()) return flight.status();
      TaskRun& run = runs[*next];
      if (flight->configs.empty()) {
        scheduler.Retire(*next);
        if (run.in_flight.empty()) run.progress.state = "exhausted";
        progress(snapshot(StrCat(task_name(*next), ": search space exhausted after ",
                                 run.progress.trials_done, " trials")));
        continue;
      }
      run.progress.state = "tuning";
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
    TaskRun& run = runs[flight.task];
    TaskProgress& p = run.progress;
    const double best_before = p.best_cost_s;
    const size_t known_before = run.history.results.size();
    const std::vector<MeasureResult>& results = measured->second;
    for (size_t c = 0; c < flight.configs.size(); ++c) {
      storage::RecordRow rec;
      rec.workload_key = run.key;
      rec.target = target_spec;
      rec.config = flight.canonical[c];
      rec.compiler_version = version;
      rec.job_id = options_.job_id;
      rec.unix_ms = NowUnixMs();
      if (c >= results.size()) {
        rec.error_kind = "agent_lost";
        rec.error_message = "no result came back for this candidate";
      } else {
        const MeasureResult& r = results[c];
        rec.agent_id = r.agent_id;
        rec.error_kind = r.error_kind.empty() ? "none" : r.error_kind;
        rec.error_message = r.error_message;
        if (r.cut_short && rec.error_message.empty()) {
          rec.error_message = StrCat("timed once: slower than ", kStopAboveBest, "x the best");
        }
        rec.costs_s = r.costs_s;
        if (rec.error_kind == "none" && rec.costs_s.empty()) {
          rec.error_kind = "runtime";
          rec.error_message = "no costs reported";
        }
        if (rec.error_kind == "none") {
          rec.mean_cost_s = Mean(rec.costs_s);
        } else {
          rec.costs_s.clear();
        }
      }
      auto id = db_->AddRecord(rec);
      if (!id.ok()) return id.status();
      run.in_flight.erase(rec.config);
      AddToHistory(rec, run.history);
      ++p.trials_done;
      ++trials_done;
      if (rec.error_kind != "none") ++p.errors;
    }
    p.best_cost_s = run.history.best_cost_s;
    std::vector<std::pair<compiler::Config, double>> fresh(
        run.history.results.begin() + static_cast<std::ptrdiff_t>(known_before),
        run.history.results.end());
    run.search->Update(fresh);
    if (auto model = run.search->SavedModel()) {
      storage::CostModelRow row{run.key,
                                target_spec,
                                version,
                                static_cast<int64_t>(model->second),
                                std::move(model->first),
                                NowUnixMs()};
      if (absl::Status st = db_->SaveCostModel(row); !st.ok()) return st;
    }
    scheduler.Record(flight.task, p.trials_done, p.best_cost_s);
    if (p.best_cost_s > 0 && (best_before == 0 || p.best_cost_s < best_before * (1 - kMinGain))) {
      run.last_gain_trial = p.trials_done;
    }
    std::string message = StrCat(task_name(flight.task), ": ", p.trials_done, " trials, best ",
                                 FormatBest(p.best_cost_s, p.flops), ", ", p.errors, " errors");
    if (options_.early_stopping > 0 && !scheduler.Retired(flight.task) &&
        p.trials_done - run.last_gain_trial >= options_.early_stopping) {
      scheduler.Retire(flight.task);
      p.state = "stopped early";
      message +=
          StrCat("; stopped early: no gain in ", p.trials_done - run.last_gain_trial, " trials");
    }
    progress(snapshot(std::move(message)));
  }
  for (TaskRun& run : runs) {
    if (run.progress.state == "tuning" || run.progress.state == "waiting") {
      run.progress.state = "done";
    }
  }
  progress(snapshot(StrCat("tuning finished (", end, "): ", trials_done, " trials in ",
                           static_cast<int64_t>(tuning_s()), " s")));
  return absl::OkStatus();
}

}  // namespace kiln::tuner
