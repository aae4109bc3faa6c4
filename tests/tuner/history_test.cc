#include "tuner/history.h"

#include <gtest/gtest.h>

#include <cmath>

#include "compiler/kernel.h"
#include "tests/storage/test_util.h"
#include "tests/tuner/workloads.h"
#include "tuner/features.h"

namespace kiln::tuner {
namespace {

using testing::Dense;

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = storage::TuningDb::Open(dir_.File("kiln.db"));
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  void Add(const compiler::Workload& w, const std::string& target, const compiler::Config& c,
           double cost, const std::string& version = "v1") {
    storage::WorkloadRow wr{w.Key(), std::string(NameOf(w.op)), w.Canonical(), w.Flops()};
    ASSERT_TRUE(db_->UpsertWorkload(wr).ok());
    storage::RecordRow r;
    r.workload_key = w.Key();
    r.target = target;
    r.config = compiler::CanonicalConfig(c);
    r.compiler_version = version;
    if (cost > 0) {
      r.costs_s = {cost};
      r.mean_cost_s = cost;
    } else {
      r.error_kind = storage::ErrorKind::kCompile;
    }
    ASSERT_TRUE(db_->AddRecord(r).ok());
  }
  storage::testing::TempDir dir_;
  std::unique_ptr<storage::TuningDb> db_;
};

TEST_F(HistoryTest, TaskHistoryIsTheWorkloadsOwnRecordsOfThisCompiler) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config c = *compiler::DefaultConfig(Dense(32), t);
  compiler::Config d = c;
  d["unroll_k"] = 1 - d["unroll_k"];
  Add(Dense(32), t.Spec(), c, 2e-3);
  Add(Dense(32), t.Spec(), d, 0);           // failed: +inf
  Add(Dense(32), t.Spec(), c, 1e-3, "v0");  // another compiler version
  Add(Dense(16), t.Spec(), c, 1e-3);        // another workload
  auto past = LoadTaskHistory(*db_, Dense(32).Key(), t.Spec(), "v1");
  ASSERT_TRUE(past.ok()) << past.status();
  ASSERT_EQ(past->results.size(), 2u);
  EXPECT_EQ(past->results[0].first, c);  // oldest first
  EXPECT_DOUBLE_EQ(past->results[0].second, 2e-3);
  EXPECT_TRUE(std::isinf(past->results[1].second));
  EXPECT_EQ(past->settled.size(), 2u);
  EXPECT_TRUE(past->settled.contains(compiler::CanonicalConfig(c)));
  EXPECT_TRUE(past->settled.contains(compiler::CanonicalConfig(d)));
  EXPECT_TRUE(past->retry.empty());
  EXPECT_DOUBLE_EQ(past->best_cost_s, 2e-3);
}

// An older compiler's record (a knob the template has since gained is
// missing) or one naming a choice the template does not offer is passed
// over for the fastest record the template accepts.
TEST_F(HistoryTest, BestValidConfigPassesOverConfigsTheTemplateRejects) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config c = *compiler::DefaultConfig(Dense(32), t);
  c["unroll_k"] = 1 - c["unroll_k"];  // a tuned config
  ASSERT_TRUE(compiler::ValidateConfig(Dense(32), t, c).ok());
  compiler::Config old = c;
  old.erase(old.begin());  // lacks a knob
  compiler::Config bad = c;
  bad["unroll_k"] = 7;  // not a choice
  Add(Dense(32), t.Spec(), old, 1e-4);
  Add(Dense(32), t.Spec(), bad, 2e-4);
  Add(Dense(32), t.Spec(), c, 3e-3);
  Add(Dense(32), "llvm -mtriple=aarch64-linux-gnu", c, 1e-5);  // another target
  int skipped = -1;
  auto best = BestValidConfig(*db_, Dense(32), t, &skipped);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ(**best, c);
  EXPECT_EQ(skipped, 2);
  // Nothing usable: the default config serves.
  auto none = BestValidConfig(*db_, Dense(16), t, &skipped);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(skipped, 0);
}

// A record logged before conv2d gained `prefetch` (first_if_absent: off is
// what ran before) reads prefetch=0 and serves; one lacking any other knob
// is still passed over.
TEST_F(HistoryTest, BestValidConfigReadsAKnobAddedSinceTheRecordAtItsFirstChoice) {
  compiler::Target t = compiler::Target::Host();
  const compiler::Workload w = testing::Conv7x7();
  compiler::Config def = *compiler::DefaultConfig(w, t);
  compiler::Config c = def;
  c["layout"] = 1;
  c = compiler::NormalizeConfig(c, *compiler::KnobsOf(w, t));
  ASSERT_TRUE(compiler::ValidateConfig(w, t, c).ok()) << compiler::ValidateConfig(w, t, c);
  ASSERT_NE(c, def);
  compiler::Config old = c;
  ASSERT_EQ(old.erase("prefetch"), 1u);
  compiler::Config older = old;
  ASSERT_EQ(older.erase("cin"), 1u);
  Add(w, t.Spec(), older, 1e-5);
  Add(w, t.Spec(), def, 3e-3);
  Add(w, t.Spec(), old, 1e-3);
  int skipped = -1;
  auto best = BestValidConfig(*db_, w, t, &skipped);
  ASSERT_TRUE(best.ok()) << best.status();
  ASSERT_TRUE(best->has_value());
  EXPECT_EQ(**best, c);
  EXPECT_EQ((*best)->at("prefetch"), 0);
  EXPECT_EQ(skipped, 1);  // the record without cin
}

// A tuned config replaces a timed default only when it is at least
// kDefaultMargin faster: 3 % faster keeps the default, 10 % faster wins; with
// no record of the default, the fastest record serves.
TEST_F(HistoryTest, BestValidConfigKeepsTheDefaultUnlessClearlyBeaten) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config def = *compiler::DefaultConfig(Dense(32), t);
  compiler::Config near = def, far = def;
  near["unroll_k"] = 1 - near["unroll_k"];
  far["tile_k"] = 1;
  ASSERT_TRUE(compiler::ValidateConfig(Dense(32), t, near).ok());
  ASSERT_TRUE(compiler::ValidateConfig(Dense(32), t, far).ok());
  Add(Dense(32), t.Spec(), near, 0.97e-3);
  auto alone = BestValidConfig(*db_, Dense(32), t);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(**alone, near);  // the default never timed
  Add(Dense(32), t.Spec(), def, 1.2e-3);
  Add(Dense(32), t.Spec(), def, 1.0e-3);  // the default's fastest counts
  auto kept = BestValidConfig(*db_, Dense(32), t);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->has_value());  // the default
  Add(Dense(32), t.Spec(), far, 0.9e-3);
  auto beaten = BestValidConfig(*db_, Dense(32), t);
  ASSERT_TRUE(beaten.ok()) << beaten.status();
  EXPECT_EQ(**beaten, far);
}

// Once configs were timed again (the tuner's confirmation), the confirmed
// ones compete by their median: a config fastest once but slow since loses
// to one that is fast every time, and a lucky config never confirmed is
// passed over; the default is judged by its median too.
TEST_F(HistoryTest, BestValidConfigRanksConfirmedConfigsByTheirMedian) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config def = *compiler::DefaultConfig(Dense(32), t);
  compiler::Config lucky = def, steady = def, unconfirmed = def;
  lucky["unroll_k"] = 1 - lucky["unroll_k"];
  steady["tile_k"] = 1;
  unconfirmed["tile_k"] = 4;
  for (const auto& c : {lucky, steady, unconfirmed}) {
    ASSERT_TRUE(compiler::ValidateConfig(Dense(32), t, c).ok());
  }
  for (double cost : {1.0e-3, 1.1e-3, 1.05e-3, 1.02e-3}) Add(Dense(32), t.Spec(), def, cost);
  for (double cost : {0.7e-3, 1.2e-3, 1.25e-3, 1.1e-3}) Add(Dense(32), t.Spec(), lucky, cost);
  for (double cost : {0.95e-3, 0.93e-3, 0.96e-3, 0.94e-3}) Add(Dense(32), t.Spec(), steady, cost);
  Add(Dense(32), t.Spec(), unconfirmed, 0.8e-3);
  auto cost = CostOfConfig(*db_, Dense(32).Key(), t.Spec(), compiler::CanonicalConfig(lucky));
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->records, 4);
  EXPECT_DOUBLE_EQ(cost->fastest_s, 0.7e-3);
  EXPECT_DOUBLE_EQ(cost->median_s, (1.1e-3 + 1.2e-3) / 2);
  auto best = BestValidConfig(*db_, Dense(32), t);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(**best, steady);  // median 0.945 ms against the default's 1.035
  // Timed again, its median is 1.0 ms: 3 % under the default's is not enough.
  for (double cost : {1.0e-3, 1.01e-3, 1.02e-3, 1.03e-3, 1.04e-3}) {
    Add(Dense(32), t.Spec(), steady, cost);
  }
  auto kept = BestValidConfig(*db_, Dense(32), t);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->has_value());  // the default
}

// The options a job tries inside the model: every usable config but the
// default, confirmed ones first by their median, then the rest by their
// fastest record, at most k; even when none beats the default alone.
TEST_F(HistoryTest, TunedConfigsAreTheConfirmedThenTheFastestButNeverTheDefault) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config def = *compiler::DefaultConfig(Dense(32), t);
  compiler::Config a = def, b = def, c = def, bad = def;
  a["unroll_k"] = 1 - a["unroll_k"];
  b["tile_k"] = 1;
  c["tile_k"] = 4;
  bad["no_such_knob"] = 1;
  for (const auto& x : {a, b, c}) ASSERT_TRUE(compiler::ValidateConfig(Dense(32), t, x).ok());
  for (double cost : {0.5e-3, 0.6e-3}) Add(Dense(32), t.Spec(), def, cost);
  Add(Dense(32), t.Spec(), bad, 0.1e-3);
  Add(Dense(32), t.Spec(), c, 0.7e-3);  // fastest alone, never confirmed
  for (double cost : {0.9e-3, 0.95e-3}) Add(Dense(32), t.Spec(), a, cost);
  for (double cost : {0.8e-3, 0.85e-3}) Add(Dense(32), t.Spec(), b, cost);
  auto all = TunedConfigs(*db_, Dense(32), t, 8);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, (std::vector<compiler::Config>{b, a, c}));
  auto two = TunedConfigs(*db_, Dense(32), t, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<compiler::Config>{b, a}));
}
// The options inside the model hold each algorithm's fastest right after
// the fastest, when within kAlgorithmSpan of it, even when many configs of
// the fastest algorithm are faster alone.
TEST_F(HistoryTest, TunedConfigsPutEachAlgorithmsFastestSecond) {
  compiler::Target t = compiler::Target::Host();
  const compiler::Workload w = testing::Conv7x7();
  auto variants = compiler::VariantConfigs(w, t);
  ASSERT_TRUE(variants.ok()) << variants.status();
  compiler::Config nchwc, f2, direct;
  for (const compiler::Config& c : *variants) {
    if (c.at("layout") == 1) nchwc = c;
    if (c.at("layout") == 5) f2 = c;
    if (c.at("layout") == 0) direct = c;
  }
  ASSERT_FALSE(nchwc.empty() || f2.empty() || direct.empty());
  // NCHWc configs (the default's neighbours) faster alone than the Winograd
  // one, and a direct one too slow to try.
  auto knobs = compiler::KnobsOf(w, t);
  ASSERT_TRUE(knobs.ok());
  std::vector<compiler::Config> others;
  for (const compiler::Knob& k : *knobs) {
    if (k.gate != "layout" ||
        std::find(k.gate_values.begin(), k.gate_values.end(), 1) == k.gate_values.end()) {
      continue;
    }
    for (int64_t v : k.choices) {
      compiler::Config c = nchwc;
      c[k.name] = v;
      if (c != nchwc && compiler::ValidateConfig(w, t, c).ok() &&
          std::find(others.begin(), others.end(), c) == others.end()) {
        others.push_back(c);
      }
    }
  }
  ASSERT_GE(others.size(), 3u);
  Add(w, t.Spec(), nchwc, 1.05e-3);  // the default: never an option
  for (size_t i = 0; i < others.size(); ++i) Add(w, t.Spec(), others[i], 1.0e-3 + 1e-6 * i);
  Add(w, t.Spec(), f2, 1.2e-3);
  Add(w, t.Spec(), direct, 1.6e-3);
  auto options = TunedConfigs(*db_, w, t, 4);
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_EQ(options->size(), 4u);
  EXPECT_EQ((*options)[0], others[0]);
  EXPECT_EQ((*options)[1], f2);
  EXPECT_EQ((*options)[2], others[1]);
  EXPECT_EQ((*options)[3], others[2]);
}

TEST_F(HistoryTest, TransientFailuresAreRetriedUpToTheAttemptLimit) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config c = *compiler::DefaultConfig(Dense(32), t);
  compiler::Config d = c;
  d["unroll_k"] = 1 - d["unroll_k"];
  auto add_error = [&](const compiler::Config& config, storage::ErrorKind kind) {
    storage::RecordRow r;
    r.workload_key = Dense(32).Key();
    r.target = t.Spec();
    r.config = compiler::CanonicalConfig(config);
    r.compiler_version = "v1";
    r.error_kind = kind;
    ASSERT_TRUE(db_->AddRecord(r).ok());
  };
  add_error(c, storage::ErrorKind::kAgentLost);
  add_error(d, storage::ErrorKind::kTimeout);
  auto once = LoadTaskHistory(*db_, Dense(32).Key(), t.Spec(), "v1");
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_TRUE(once->settled.empty());
  EXPECT_TRUE(once->results.empty());
  EXPECT_EQ(once->retry.size(), 2u);
  // c ran on its second attempt; d timed out again and is given up (+inf).
  Add(Dense(32), t.Spec(), c, 1e-3);
  add_error(d, storage::ErrorKind::kTimeout);
  auto twice = LoadTaskHistory(*db_, Dense(32).Key(), t.Spec(), "v1");
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_TRUE(twice->retry.empty());
  EXPECT_EQ(twice->settled.size(), 2u);
  ASSERT_EQ(twice->results.size(), 2u);
  EXPECT_DOUBLE_EQ(twice->results[0].second, 1e-3);
  EXPECT_TRUE(std::isinf(twice->results[1].second));
  // A compile error is final at once.
  EXPECT_FALSE(storage::IsTransient(storage::ErrorKind::kCompile));
  EXPECT_TRUE(storage::IsTransient(storage::ErrorKind::kTimeout));
}

TEST_F(HistoryTest, PriorGroupsAreOtherWorkloadsOfTheSameOperator) {
  compiler::Target t = compiler::Target::Host();
  compiler::Config c = *compiler::DefaultConfig(Dense(32), t);
  // A column tile that every x86 target offers (SSE's 4 lanes to AVX-512's
  // 16), so that the generic target's records have features too, and a row
  // tile that every workload here offers.
  c["tile_n"] = 16;
  c["tile_m"] = 4;
  compiler::Config d = c;
  d["unroll_k"] = 1 - d["unroll_k"];
  Add(Dense(32), t.Spec(), c, 2e-3);  // the task's own workload: not prior
  Add(Dense(16), t.Spec(), c, 1e-3);
  Add(Dense(16), t.Spec(), d, 4e-3);
  Add(Dense(8), "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic", c, 1e-3);
  Add(Dense(8), "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=generic", d, 0);
  compiler::Workload relu;
  relu.op = compiler::Op::kEltwise;
  relu.ints = {{"shape", {64}}, {"in_shape", {64}}};
  relu.epilogue = {{compiler::EpilogueKind::kRelu}};
  Add(relu, t.Spec(), {}, 1e-3);  // another operator
  auto prior = PriorFromLog(*db_, Dense(32), t, "v1");
  ASSERT_TRUE(prior.ok()) << prior.status();
  ASSERT_EQ(prior->group_sizes.size(), 2u);
  EXPECT_EQ(prior->rows.size(), 4u);
  ASSERT_EQ(prior->rows[0].size(), static_cast<size_t>(kNumFeatures));
  // Groups are ordered by workload key; each one's scores are best / cost.
  std::vector<float> weights = prior->group_weights;
  std::sort(weights.begin(), weights.end());
  EXPECT_FLOAT_EQ(weights[0], kOtherTargetWeight);
  EXPECT_FLOAT_EQ(weights[1], 1.0f);
  std::vector<float> scores = prior->scores;
  std::sort(scores.begin(), scores.end());
  EXPECT_EQ(scores, (std::vector<float>{0.0f, 0.25f, 1.0f, 1.0f}));
  // Another compiler version's records are not used.
  auto none = PriorFromLog(*db_, Dense(32), t, "v2");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->rows.empty());
}

}  // namespace
}  // namespace kiln::tuner
