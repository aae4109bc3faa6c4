#include "tuner/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln::tuner {
namespace {

// A synthetic task: the "speed" of a candidate is a non-linear function of
// its 6 features (a sweet spot in the first, a cliff in the second, an
// interaction of the next two; the last two are noise).
double Speed(const std::vector<float>& x) {
  double s = 1.0 - std::fabs(x[0] - 0.6);
  if (x[1] > 0.7) s *= 0.3;
  s += 0.5 * x[2] * x[3];
  return s;
}

std::vector<std::vector<float>> Rows(int n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<std::vector<float>> rows(n, std::vector<float>(6));
  for (auto& r : rows) {
    for (auto& v : r) v = u(rng);
  }
  return rows;
}

TrainingSet Synthetic(int groups, int per_group, std::mt19937& rng) {
  TrainingSet t;
  for (int g = 0; g < groups; ++g) {
    auto rows = Rows(per_group, rng);
    std::vector<float> scores;
    for (const auto& r : rows) scores.push_back(static_cast<float>(Speed(r)));
    t.AddGroup(std::move(rows), std::move(scores));
  }
  return t;
}

TEST(CostModelTest, RanksAHeldOutSetOfASyntheticTask) {
  std::mt19937 rng(7);
  CostModel model;
  EXPECT_FALSE(model.trained());
  ASSERT_TRUE(model.Train(Synthetic(4, 100, rng)).ok());
  ASSERT_TRUE(model.trained());
  auto held_out = Rows(300, rng);
  auto pred = model.Predict(held_out);
  ASSERT_TRUE(pred.ok()) << pred.status();
  std::vector<double> want, got;
  for (size_t i = 0; i < held_out.size(); ++i) {
    want.push_back(Speed(held_out[i]));
    got.push_back((*pred)[i]);
  }
  EXPECT_GT(SpearmanCorrelation(want, got), 0.8);
}

TEST(CostModelTest, TreesOnABaseMarginCorrectAWrongPrior) {
  // A prior that ranks the task backwards (another task's model, say); the
  // new model is trained on top of it and, with its margin added back, ranks
  // held-out rows the task's way.
  std::mt19937 rng(5);
  auto prior = [](const std::vector<float>& x) { return static_cast<float>(-Speed(x)); };
  TrainingSet set = Synthetic(1, 200, rng);
  for (const auto& r : set.rows) set.base_margin.push_back(prior(r));
  CostModel model;
  ASSERT_TRUE(model.Train(set).ok());
  auto held_out = Rows(300, rng);
  auto pred = model.Predict(held_out);
  ASSERT_TRUE(pred.ok()) << pred.status();
  std::vector<double> want, got, prior_only;
  for (size_t i = 0; i < held_out.size(); ++i) {
    want.push_back(Speed(held_out[i]));
    got.push_back((*pred)[i] + prior(held_out[i]));
    prior_only.push_back(prior(held_out[i]));
  }
  EXPECT_LT(SpearmanCorrelation(want, prior_only), -0.9);
  EXPECT_GT(SpearmanCorrelation(want, got), 0.6);
  // One margin per row, finite.
  set.base_margin.pop_back();
  EXPECT_EQ(model.Train(set).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CostModelTest, SavedModelPredictsTheSame) {
  std::mt19937 rng(3);
  CostModel model;
  ASSERT_TRUE(model.Train(Synthetic(2, 60, rng)).ok());
  auto bytes = model.Save();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto loaded = CostModel::Load(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto rows = Rows(50, rng);
  auto a = model.Predict(rows), b = loaded->Predict(rows);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST(CostModelTest, BadInputIsAnError) {
  CostModel model;
  EXPECT_EQ(model.Predict({{1, 2}}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model.Save().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(model.Train({}).code(), absl::StatusCode::kInvalidArgument);
  TrainingSet ragged;
  ragged.AddGroup({{1, 2}, {1}}, {1, 2});
  EXPECT_EQ(model.Train(ragged).code(), absl::StatusCode::kInvalidArgument);
  TrainingSet nan;
  nan.AddGroup({{1, 2}, {1, 3}}, {1, std::nanf("")});
  EXPECT_EQ(model.Train(nan).code(), absl::StatusCode::kInvalidArgument);
  TrainingSet ok;
  ok.AddGroup({{1, 2}, {1, 3}, {2, 2}}, {1, 2, 3});
  ASSERT_TRUE(model.Train(ok).ok());
  EXPECT_EQ(model.Predict({{1, 2, 3}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CostModel::Load("not a model").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CostModelTest, Spearman) {
  EXPECT_DOUBLE_EQ(SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(SpearmanCorrelation({1, 2, 3}, {5, 5, 5}), 0.0);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 2, 3}, {1, 2, 3, 4}), 0.9487, 1e-3);
}

}  // namespace
}  // namespace kiln::tuner
