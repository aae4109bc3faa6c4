// The tuning loop against a synthetic measurer: what it records, resume from
// the database, retries, budgets and early stopping.
#include "tuner/tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "compiler/kernel.h"
#include "tests/storage/test_util.h"
#include "tests/tuner/workloads.h"
#include "tuner/history.h"

namespace kiln::tuner {
namespace {

using testing::Dense;

// A deterministic cost per config, in [1, 2) ms, scaled per workload.
double SyntheticCost(const compiler::Workload& w, const compiler::Config& c) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : w.Key() + compiler::CanonicalConfig(c)) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ull;
  }
  return 1e-3 * (1 + static_cast<double>(h % 1000) / 1000.0) * (w.ints.at("M")[0] / 32.0);
}

// Measures in WaitAny with the synthetic cost, or what `outcome` says.
class FakeMeasurer : public Measurer {
 public:
  int parallelism = 2;
  // Overrides the outcome of a config (its canonical string) per attempt;
  // returns "" for a normal measurement or an error kind.
  std::function<std::string(const std::string& canonical, int attempt)> outcome;
  int stop_after_batches = -1;  // WaitAny returns CANCELLED after this many
  std::function<void()> on_batch;
  // Overrides the synthetic cost: from the config, its attempt and the
  // order in which configs were first measured (0 for the first).
  std::function<double(const std::string& canonical, int attempt, int order)> cost;
  std::map<std::string, int> attempts;  // canonical -> measurements
  std::map<std::string, int> order;     // canonical -> first measured as n-th
  int batches = 0;

  int Parallelism() override { return parallelism; }
  uint64_t Submit(MeasureBatch batch) override {
    queue_.emplace_back(next_, std::move(batch));
    return next_++;
  }
  absl::StatusOr<std::pair<uint64_t, std::vector<MeasureResult>>> WaitAny() override {
    if (stop_after_batches >= 0 && batches >= stop_after_batches) {
      return absl::CancelledError("stopped");
    }
    auto [ticket, batch] = std::move(queue_.front());
    queue_.pop_front();
    std::vector<MeasureResult> results;
    for (const auto& c : batch.configs) {
      const std::string canonical = compiler::CanonicalConfig(c);
      const int attempt = ++attempts[canonical];
      const int first = order.emplace(canonical, static_cast<int>(order.size())).first->second;
      MeasureResult r;
      r.agent_id = "fake";
      std::string kind = outcome ? outcome(canonical, attempt) : "";
      if (kind.empty()) {
        r.costs_s = {cost ? cost(canonical, attempt, first) : SyntheticCost(batch.workload, c)};
      } else {
        std::optional<storage::ErrorKind> error_kind = storage::ParseErrorKind(kind);
        EXPECT_TRUE(error_kind.has_value()) << kind;
        r.error_kind = error_kind.value_or(storage::ErrorKind::kRuntime);
        r.error_message = "synthetic " + kind;
      }
      results.push_back(std::move(r));
    }
    ++batches;
    if (on_batch) on_batch();
    return std::make_pair(ticket, std::move(results));
  }

 private:
  uint64_t next_ = 1;
  std::deque<std::pair<uint64_t, MeasureBatch>> queue_;
};

class TunerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = storage::TuningDb::Open(dir_.File("kiln.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  TunerOptions Options(SearchKind strategy, int trials) {
    TunerOptions o;
    o.job_id = "job-t";
    o.strategy = strategy;
    o.trials = trials;
    o.compiler_version = "test";
    return o;
  }
  std::vector<storage::RecordRow> Records() {
    auto r = db_->RecordsOfJob("job-t");
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<storage::RecordRow>{};
  }
  // Fails the test if a config of a workload was measured twice with a
  // final outcome.
  void ExpectNoConfigMeasuredTwice() {
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& r : Records()) {
      if (storage::IsTransient(r.error_kind)) continue;
      EXPECT_TRUE(seen.insert({r.workload_key, r.config}).second)
          << r.config << " of " << r.workload_key << " measured twice";
    }
  }
  compiler::Target target_ = compiler::Target::Host();
  storage::testing::TempDir dir_;
  std::unique_ptr<storage::TuningDb> db_;
};

TEST_F(TunerTest, SpendsTheTrialsOverTheTasksAndRecordsEveryResult) {
  FakeMeasurer m;
  std::vector<TunerProgress> events;
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}, {Dense(128), 3}},
              Options(SearchKind::kRandom, 64));
  ASSERT_TRUE(tuner.Run([&](const TunerProgress& p) { events.push_back(p); }).ok());
  auto records = Records();
  ASSERT_EQ(records.size(), 64u);
  ExpectNoConfigMeasuredTwice();
  std::map<std::string, int> per_task;
  for (const auto& r : records) {
    per_task[r.workload_key]++;
    EXPECT_EQ(r.compiler_version, "test");
    EXPECT_EQ(r.agent_id, "fake");
    EXPECT_EQ(r.error_kind, storage::ErrorKind::kNone);
    EXPECT_GT(r.mean_cost_s, 0);
  }
  // The heavier task (4x the cost, 3 occurrences) gets most trials; both
  // get some.
  EXPECT_GT(per_task[Dense(128).Key()], per_task[Dense(32).Key()]);
  EXPECT_GE(per_task[Dense(32).Key()], 8);
  // The first config of each task is the template's default.
  for (const auto& w : {Dense(32), Dense(128)}) {
    for (const auto& r : records) {
      if (r.workload_key != w.Key()) continue;
      EXPECT_EQ(r.config, compiler::CanonicalConfig(*compiler::DefaultConfig(w, target_)));
      break;
    }
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back().trials_done, 64);
  EXPECT_EQ(events.back().tasks[1].occurrences, 3);
  EXPECT_EQ(events.back().tasks[0].state, storage::TaskState::kDone);
  EXPECT_NE(events.back().message.find("trial budget spent"), std::string::npos);
  double best = 0;
  for (const auto& r : records) {
    if (r.workload_key == Dense(128).Key() && (best == 0 || r.mean_cost_s < best)) {
      best = r.mean_cost_s;
    }
  }
  EXPECT_DOUBLE_EQ(events.back().tasks[1].best_cost_s, best);
  EXPECT_GT(EstimatedLatency(events.back().tasks), 3 * best);
  // The job's tasks are stored with their occurrences.
  auto tasks = db_->JobTasks("job-t");
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[1].occurrences, 3);
}
// Every algorithm a template offers is timed before the search proposes
// anything: the default, then one config per other conv2d layout, in that
// order; a resumed run measures none of them again.
TEST_F(TunerTest, MeasuresEveryAlgorithmsConfigFirst) {
  const compiler::Workload w = testing::Conv7x7();
  auto variants = compiler::VariantConfigs(w, target_);
  ASSERT_TRUE(variants.ok()) << variants.status();
  ASSERT_GE(variants->size(), 3u);
  FakeMeasurer m;
  m.cost = [](const std::string&, int, int order) { return 1e-3 * (1 + 0.01 * order); };
  Tuner tuner(db_.get(), &m, target_, {{w, 1}}, Options(SearchKind::kRandom, 12));
  ASSERT_TRUE(tuner.Run([](const TunerProgress&) {}).ok());
  for (size_t i = 0; i < variants->size(); ++i) {
    const std::string canonical = compiler::CanonicalConfig((*variants)[i]);
    ASSERT_TRUE(m.order.count(canonical)) << "variant " << i << " never measured";
    EXPECT_EQ(m.order[canonical], static_cast<int>(i)) << canonical;
  }
  FakeMeasurer again;
  again.cost = m.cost;
  Tuner resumed(db_.get(), &again, target_, {{w, 1}}, Options(SearchKind::kRandom, 16));
  ASSERT_TRUE(resumed.Run([](const TunerProgress&) {}).ok());
  for (const compiler::Config& c : *variants) {
    EXPECT_EQ(again.attempts[compiler::CanonicalConfig(c)], 0);
  }
}

TEST_F(TunerTest, ResumesFromTheDatabaseWithoutMeasuringAnythingTwice) {
  std::vector<TuningTask> tasks = {{Dense(32), 1}, {Dense(64), 1}};
  {
    FakeMeasurer m;
    m.stop_after_batches = 3;  // "killed" with batches in flight
    Tuner tuner(db_.get(), &m, target_, tasks, Options(SearchKind::kXgb, 80));
    absl::Status st = tuner.Run([](const TunerProgress&) {});
    EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
  }
  const size_t first = Records().size();
  ASSERT_EQ(first, 24u);  // 3 batches of 8
  // The cost model of a task with enough results was saved with the log.
  int saved = 0;
  for (const auto& t : tasks) {
    auto model = db_->GetCostModel(t.workload.Key(), target_.Spec(), "test");
    ASSERT_TRUE(model.ok());
    if (model->has_value()) {
      ++saved;
      EXPECT_GT((*model)->trained_on, 0);
      EXPECT_FALSE((*model)->model.empty());
    }
  }
  EXPECT_GE(saved, 1);

  FakeMeasurer m;
  std::vector<TunerProgress> events;
  Tuner tuner(db_.get(), &m, target_, tasks, Options(SearchKind::kXgb, 80));
  ASSERT_TRUE(tuner.Run([&](const TunerProgress& p) { events.push_back(p); }).ok());
  // It starts from what the job measured and spends only the rest.
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().trials_done, 24);
  EXPECT_EQ(Records().size(), 80u);
  ExpectNoConfigMeasuredTwice();
}

TEST_F(TunerTest, RetriesTransientFailuresOnlyAndOnlyUpToTheLimit) {
  FakeMeasurer m;
  m.parallelism = 1;
  std::map<std::string, std::string> fate;  // canonical -> how it fails
  int next = 0;
  m.outcome = [&](const std::string& canonical, int attempt) -> std::string {
    auto [it, added] = fate.emplace(canonical, "");
    if (added) {
      // The 2nd config times out once, the 3rd is always lost, the 4th
      // does not compile.
      static const char* kFates[] = {"", "timeout-once", "agent_lost", "compile"};
      it->second = kFates[std::min(next++, 3)];
      if (next > 4) it->second = "";
    }
    if (it->second == "timeout-once") return attempt == 1 ? "timeout" : "";
    return it->second;
  };
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, Options(SearchKind::kRandom, 24));
  ASSERT_TRUE(tuner.Run([](const TunerProgress&) {}).ok());
  for (const auto& [canonical, how] : fate) {
    if (how == "timeout-once" || how == "agent_lost") {
      EXPECT_EQ(m.attempts[canonical], kMaxAttempts) << how;
    } else {
      EXPECT_EQ(m.attempts[canonical], 1) << (how.empty() ? "ran" : how);
    }
  }
  EXPECT_EQ(Records().size(), 24u);
  ExpectNoConfigMeasuredTwice();
}

// An impossible cost is turned into an invalid_cost error where it enters
// (tracker/measure_proto.cc, tested there); the tuner stores it as the
// agent's error, measures the config again and counts that measurement.
TEST_F(TunerTest, ImpossibleCostsAreErrorsOfTheAgentNotAFailedJob) {
  FakeMeasurer m;
  m.parallelism = 1;
  std::map<std::string, std::string> lie;  // canonical -> its first outcome
  m.outcome = [&](const std::string& canonical, int attempt) -> std::string {
    auto [it, added] = lie.emplace(canonical, "");
    if (added && lie.size() <= 3) it->second = "invalid_cost";
    return attempt == 1 ? it->second : "";
  };
  TunerOptions options = Options(SearchKind::kRandom, 24);
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, options);
  ASSERT_TRUE(tuner.Run([](const TunerProgress&) {}).ok());
  int invalid = 0;
  for (const auto& r : Records()) {
    if (r.error_kind != storage::ErrorKind::kInvalidCost) continue;
    ++invalid;
    EXPECT_EQ(r.agent_id, "fake");
    EXPECT_TRUE(r.costs_s.empty());
    EXPECT_EQ(r.error_message, "synthetic invalid_cost");
  }
  EXPECT_EQ(invalid, 3);
  // Each lie was measured again, and that measurement counted.
  for (const auto& [canonical, how] : lie) {
    EXPECT_EQ(m.attempts[canonical], how.empty() ? 1 : 2) << how;
  }
  EXPECT_EQ(Records().size(), 24u);
  ExpectNoConfigMeasuredTwice();
}

TEST(CheckCostsTest, OnlyFinitePositiveDurationsWithinTheLimitPass) {
  EXPECT_TRUE(CheckCosts({1e-3, 2e-3}, 10).ok());
  EXPECT_TRUE(CheckCosts({1e4}).ok());  // no upper bound
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(), -1e-3, 0.0, 11.0}) {
    absl::Status st = CheckCosts({1e-3, bad}, 10);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(CheckCosts({}).ok());
}

TEST_F(TunerTest, StopsAtTheTimeBudgetAndCountsTimeSpentBefore) {
  double now = 1000;
  FakeMeasurer m;
  m.parallelism = 1;
  m.on_batch = [&] { now += 10; };  // each batch takes 10 s
  TunerOptions o = Options(SearchKind::kRandom, 1000);
  o.budget_s = 45;
  o.spent_s = 20;  // a resumed job that tuned 20 s before
  o.now_s = [&] { return now; };
  std::vector<TunerProgress> events;
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, o);
  ASSERT_TRUE(tuner.Run([&](const TunerProgress& p) { events.push_back(p); }).ok());
  // 20 s before + 3 batches (30 s) reach 50 s >= 45 s.
  EXPECT_EQ(m.batches, 3);
  EXPECT_EQ(Records().size(), 24u);
  EXPECT_DOUBLE_EQ(events.back().tuning_s, 50);
  EXPECT_NE(events.back().message.find("time budget spent"), std::string::npos);
}

TEST_F(TunerTest, EarlyStoppingEndsATaskThatStopsImproving) {
  FakeMeasurer m;
  m.parallelism = 1;
  // After the first batch every config is slower than the best.
  m.outcome = [&](const std::string&, int) -> std::string { return ""; };
  TunerOptions o = Options(SearchKind::kRandom, 400);
  o.early_stopping = 16;
  int batches_seen = 0;
  std::vector<TunerProgress> events;
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, o);
  ASSERT_TRUE(tuner
                  .Run([&](const TunerProgress& p) {
                    events.push_back(p);
                    ++batches_seen;
                  })
                  .ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().tasks[0].state, storage::TaskState::kStoppedEarly);
  EXPECT_LT(events.back().trials_done, 400);
  // It stopped 16-23 trials after the last 1% gain.
  EXPECT_NE(events.back().message.find("every task has stopped"), std::string::npos);
}

// A config only lucky once loses to one truly faster once both are timed
// again beside the default: the run keeps a tenth of its trials for it
// (what the rounds leave goes back to the search), and compile
// (BestValidConfig) ranks the confirmed configs by their median.
TEST_F(TunerTest, ConfirmsTheFastestConfigsBesideTheDefault) {
  FakeMeasurer m;
  m.parallelism = 1;
  std::string lucky, fast;
  m.cost = [&](const std::string& canonical, int attempt, int order) {
    if (order == 0) return 1.0e-3;  // the default, measured first
    if (order == 1) {
      lucky = canonical;
      return attempt == 1 ? 0.8e-3 : 1.2e-3;
    }
    if (order == 2) {
      fast = canonical;
      return 0.9e-3;
    }
    return 1.1e-3 + 1e-6 * static_cast<double>(order % 50);
  };
  std::vector<TunerProgress> events;
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, Options(SearchKind::kRandom, 120));
  ASSERT_TRUE(tuner.Run([&](const TunerProgress& p) { events.push_back(p); }).ok());
  const std::string def = compiler::CanonicalConfig(*compiler::DefaultConfig(Dense(32), target_));
  ASSERT_FALSE(lucky.empty());
  ASSERT_FALSE(fast.empty());
  auto records = Records();
  // The search spent 108 trials; then 3 rounds of the default and the two
  // fastest, in turn; the 3 trials left went back to the search.
  ASSERT_EQ(records.size(), 120u);
  for (size_t i = 108; i < 117; ++i) {
    const std::string& want = (i - 108) % 3 == 0 ? def : (i - 108) % 3 == 1 ? lucky : fast;
    EXPECT_EQ(records[i].config, want) << "record " << i;
  }
  for (size_t i = 117; i < 120; ++i) {
    EXPECT_TRUE(records[i].config != def && records[i].config != lucky && records[i].config != fast)
        << "record " << i;
  }
  EXPECT_EQ(m.attempts[def], 4);
  EXPECT_EQ(m.attempts[lucky], 4);
  EXPECT_EQ(m.attempts[fast], 4);
  EXPECT_EQ(events.back().trials_done, 120);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const TunerProgress& p) {
    return p.message.find("again beside the default (round 3 of 3)") != std::string::npos;
  }));
  auto best = BestValidConfig(*db_, Dense(32), target_);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ(compiler::CanonicalConfig(**best), fast);

  // Run again (a resumed job): every config has had its rounds.
  FakeMeasurer again;
  Tuner resumed(db_.get(), &again, target_, {{Dense(32), 1}}, Options(SearchKind::kRandom, 120));
  ASSERT_TRUE(resumed.Run([](const TunerProgress&) {}).ok());
  EXPECT_EQ(again.attempts[def] + again.attempts[lucky] + again.attempts[fast], 0);
}

TEST_F(TunerTest, UnknownStrategyIsInvalidArgument) {
  FakeMeasurer m;
  Tuner tuner(db_.get(), &m, target_, {{Dense(32), 1}}, Options(static_cast<SearchKind>(99), 8));
  EXPECT_EQ(tuner.Run([](const TunerProgress&) {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Records().empty());
}

}  // namespace
}  // namespace kiln::tuner
