#include "tuner/guided_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "compiler/kernel.h"
#include "tuner/features.h"

namespace kiln::tuner {
namespace {

compiler::Workload Dense() {
  compiler::Workload w;
  w.op = compiler::Op::kDense;
  w.ints = {{"M", {64}},    {"N", {64}},      {"K", {128}},     {"transA", {0}}, {"transB", {0}},
            {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  return w;
}

// One fixed target, whatever the host: nothing here runs a kernel (features
// come from the lowered loops), and the synthetic costs, the space and so the
// searches' paths are then the same on every machine (on an AVX2 host the
// prior's weight came out at 0.22, on AVX-512 above 0.5).
compiler::Target Avx512() {
  return *compiler::Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512");
}

SearchContext Context(uint64_t seed) { return {Dense(), Avx512(), seed, {}}; }

ConfigSpace Space() { return ConfigSpace(*compiler::KnobsOf(Dense(), Avx512())); }

// A synthetic cost, lowest near row and reduction tiles of 4 and 16,
// unrolled, packed B, the widest column tile, column panels outside, in
// parallel. Every term changes the lowered loops.
double Cost(const compiler::Config& c) {
  static const int64_t widest = Space().knobs()[1].choices.back();
  double cost = 1.0;
  cost += std::fabs(std::log2(static_cast<double>(c.at("tile_m"))) - 2.0);
  cost += 0.5 * std::fabs(std::log2(static_cast<double>(c.at("tile_k"))) - 4.0);
  cost += 0.3 * std::fabs(std::log2(static_cast<double>(widest) / c.at("tile_n")));
  cost += c.at("unroll_k") ? 0.0 : 0.7;
  cost += c.at("pack_b") ? 0.0 : 0.4;
  cost += c.at("n_outer") ? 0.0 : 0.2;
  cost += c.at("parallel") ? 0.0 : 0.3;
  return cost;
}

// The lowest cost of a valid config: which configs are valid depends on the
// target's vector width (on AVX-512 the widest column tile leaves a single
// column panel, which cannot run in parallel).
double BestCost() {
  static const double best = [] {
    ConfigSpace space = Space();
    double b = std::numeric_limits<double>::infinity();
    for (uint64_t i = 0; i < space.Size(); ++i) {
      compiler::Config c = space.ConfigAt(i);
      if (compiler::ValidateConfig(Dense(), Avx512(), c).ok()) {
        b = std::min(b, Cost(c));
      }
    }
    return b;
  }();
  return best;
}

// Runs `search` with the synthetic cost until it measures the best config or
// `trials` configs (invalid ones, which random search proposes, are skipped
// as the job manager skips them); the trials it took, `trials` + 1 when it
// never found the best.
int Tune(SearchStrategy& search, int trials, std::set<std::string>* measured, bool guided) {
  int done = 0;
  while (done < trials) {
    auto batch = search.Propose(8, *measured);
    if (batch.empty()) break;
    std::vector<std::pair<compiler::Config, double>> results;
    for (const auto& c : batch) {
      EXPECT_TRUE(measured->insert(compiler::CanonicalConfig(c)).second) << "proposed twice";
      bool valid = compiler::ValidateConfig(Dense(), Avx512(), c).ok();
      if (guided) EXPECT_TRUE(valid);
      if (!valid) continue;
      ++done;
      if (Cost(c) == BestCost()) return done;
      results.push_back({c, Cost(c)});
    }
    search.Update(results);
  }
  return trials + 1;
}

TEST(GuidedSearchTest, ProposalsAreValidDistinctKernelsNeverMeasuredBefore) {
  for (SearchKind kind : {SearchKind::kGa, SearchKind::kXgb}) {
    const std::string_view name = NameOf(kind);
    auto search = MakeSearch(kind, Space(), Context(5));
    ASSERT_TRUE(search.ok());
    std::set<std::string> measured;
    Tune(**search, 64, &measured, true);
    EXPECT_GE(measured.size(), 8u) << name;
    // Distinct kernels: the lowered loops of no two measured configs match.
    FeatureCache cache(Dense(), Avx512());
    std::set<uint64_t> kernels;
    for (const auto& canonical : measured) {
      const auto& f = cache.Get(*compiler::ParseConfig(canonical));
      ASSERT_TRUE(f.has_value());
      EXPECT_TRUE(kernels.insert(f->kernel_hash).second) << name << ": same kernel twice";
    }
  }
}

TEST(GuidedSearchTest, GuidedStrategiesFindTheBestInFewerTrialsThanRandom) {
  // Summed over seeds: the trials each takes to measure the best config.
  int random = 0, ga = 0, xgb = 0;
  for (uint64_t seed : {1, 2, 3}) {
    std::set<std::string> m1, m2, m3;
    auto r = MakeSearch(SearchKind::kRandom, Space(), Context(seed));
    auto g = MakeSearch(SearchKind::kGa, Space(), Context(seed));
    auto x = MakeSearch(SearchKind::kXgb, Space(), Context(seed));
    random += Tune(**r, 400, &m1, false);
    ga += Tune(**g, 400, &m2, true);
    xgb += Tune(**x, 400, &m3, true);
  }
  std::printf("trials to the best (3 seeds): random %d, ga %d, xgb %d\n", random, ga, xgb);
  EXPECT_LT(xgb, random / 2);
  EXPECT_LT(ga, random);
}

// Prior records: the synthetic cost on random configs of the same template,
// scored the right way (faster is better) or backwards.
TrainingSet Prior(bool backwards) {
  FeatureCache cache(Dense(), Avx512());
  ConfigSpace space = Space();
  std::mt19937_64 rng(4);
  std::vector<std::vector<float>> rows;
  std::vector<float> scores;
  while (rows.size() < 64) {
    compiler::Config c = space.Sample(rng);
    const auto& f = cache.Get(c);
    if (!f.has_value()) continue;
    rows.push_back(f->features);
    scores.push_back(static_cast<float>(backwards ? Cost(c) : 1.0 / Cost(c)));
  }
  TrainingSet prior;
  prior.AddGroup(rows, scores);
  return prior;
}

TEST(GuidedSearchTest, PriorRecordsTrainTheModelBeforeAnyResult) {
  SearchContext context = Context(9);
  context.prior = Prior(false);
  ConfigSpace space = Space();
  std::mt19937_64 rng(5);
  ModelSearch search(Space(), context);
  auto first = search.Propose(8, {});
  ASSERT_TRUE(search.warm_started());
  EXPECT_FALSE(search.model().trained());  // no result of its own yet
  ASSERT_EQ(first.size(), 8u);
  // The first batch, picked by the warm model, beats a random one.
  double guided = 0, random = 0;
  for (const auto& c : first) guided += Cost(c);
  for (int i = 0; i < 8; ++i) random += Cost(space.Sample(rng));
  EXPECT_LT(guided, random);
}

TEST(GuidedSearchTest, APriorThatRanksTheTasksResultsWrongLosesItsWeight) {
  double weight[2];
  for (bool backwards : {false, true}) {
    SearchContext context = Context(11);
    context.prior = Prior(backwards);
    ModelSearch search(Space(), context);
    std::set<std::string> measured;
    Tune(search, 32, &measured, true);
    ASSERT_TRUE(search.TrainIfNeeded().ok());
    ASSERT_TRUE(search.model().trained());
    weight[backwards] = search.prior_weight();
  }
  EXPECT_GT(weight[false], 0.5);
  EXPECT_LT(weight[true], 0.1);
}

TEST(GuidedSearchTest, FewerThanAskedWhenTheSpaceRunsOut) {
  // A 1x1 dense has a handful of distinct kernels.
  compiler::Workload w;
  w.op = compiler::Op::kDense;
  w.ints = {{"M", {1}},     {"N", {1}},       {"K", {1}},       {"transA", {0}}, {"transB", {0}},
            {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  ConfigSpace space(*compiler::KnobsOf(w, Avx512()));
  GeneticSearch search(space, {w, Avx512(), 1, {}});
  std::set<std::string> measured;
  for (int round = 0; round < 20; ++round) {
    for (const auto& c : search.Propose(8, measured)) {
      measured.insert(compiler::CanonicalConfig(c));
      search.Update({{c, 1.0}});
    }
  }
  EXPECT_LT(measured.size(), space.Size());
  EXPECT_TRUE(search.Propose(8, measured).empty());
}

}  // namespace
}  // namespace kiln::tuner
