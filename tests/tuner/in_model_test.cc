// Tuning confirmed inside the model (tuner/in_model.h), with a board made of
// a table: each task's kernel time per option, the model's time their sum.
#include "tuner/in_model.h"

#include <functional>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::tuner {
namespace {

using ::testing::HasSubstr;

compiler::Config Knob(int64_t v) { return compiler::Config{{"tile", v}}; }

// Tasks "a", "b", "c", each with a default and `tuned` tuned options.
std::vector<InModelTask> Tasks(int tuned) {
  std::vector<InModelTask> tasks;
  for (const char* key : {"a", "b", "c"}) {
    InModelTask t{key, {std::nullopt}};
    for (int k = 1; k <= tuned; ++k) t.options.push_back(Knob(k));
    tasks.push_back(std::move(t));
  }
  return tasks;
}

// A board: `kernel_s[task][option]` seconds per run, plus a fixed rest; each
// round `noise[round]` scales every variant alike (a machine's slow spell),
// and `tuned_noise` scales rounds of variants that are not the defaults.
struct TableBoard {
  std::vector<std::vector<double>> kernel_s;
  double rest_s = 1e-3;
  std::vector<double> noise = {1.0, 1.1, 0.95, 1.05, 1.0, 0.9, 1.2};
  std::vector<double> tuned_noise;        // per round; empty: none
  std::vector<double> later_tuned_noise;  // from the second call on, where set
  // A task's time as its neighbours change it (task, variant, table's time).
  std::function<double(size_t, const ModelVariant&, double)> beside;
  std::vector<std::vector<ModelVariant>> calls;

  VariantRunner Runner(const std::vector<InModelTask>& tasks) {
    return [this, &tasks](const std::vector<ModelVariant>& variants)
               -> absl::StatusOr<std::vector<VariantTiming>> {
      calls.push_back(variants);
      std::vector<VariantTiming> out;
      for (const ModelVariant& v : variants) {
        VariantTiming t;
        double total = rest_s;
        for (size_t i = 0; i < tasks.size(); ++i) {
          double s = kernel_s[i][static_cast<size_t>(v[i])];
          if (beside) s = beside(i, v, s);
          t.kernel_costs_s[tasks[i].workload_key] = s;
          total += s;
        }
        const bool defaults = std::all_of(v.begin(), v.end(), [](int o) { return o == 0; });
        const std::vector<double>& tn =
            calls.size() > 1 && !later_tuned_noise.empty() ? later_tuned_noise : tuned_noise;
        for (size_t r = 0; r < noise.size(); ++r) {
          const double extra = !defaults && r < tn.size() ? tn[r] : 1.0;
          t.costs_s.push_back(total * noise[r] * extra);
        }
        out.push_back(std::move(t));
      }
      return out;
    };
  }
};

// Task b's tuned config won alone but loses inside the model: it is
// reverted; a and c keep theirs, and the mix (not a variant of round one)
// is timed in a second round and returned.
TEST(ChooseInModel, AChoiceTheModelDisprovesIsReverted) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board;
  board.kernel_s = {{4e-3, 3e-3}, {2e-3, 2.6e-3}, {5e-3, 4e-3}};
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{1, 0, 1}));
  EXPECT_EQ(result->tasks_reverted, 1);
  EXPECT_EQ(result->tasks_tuned, 2);
  EXPECT_TRUE(result->returned_tuned);
  EXPECT_TRUE(result->beyond_noise);
  ASSERT_EQ(board.calls.size(), 2u) << "round two times the mix";
  EXPECT_EQ(board.calls[1][0], (ModelVariant{0, 0, 0})) << "beside the defaults";
  EXPECT_NEAR(result->untuned.median_s, 12e-3, 1.5e-3);
  EXPECT_NEAR(result->tuned.median_s, 10e-3, 1.5e-3);
  EXPECT_THAT(result->note, HasSubstr("faster on the board"));
}

// Of two tuned options, the one faster inside the model is taken per task.
TEST(ChooseInModel, EachTaskTakesItsFastestOptionInsideTheModel) {
  const std::vector<InModelTask> tasks = Tasks(2);
  TableBoard board;
  board.kernel_s = {{4e-3, 3.5e-3, 3e-3}, {2e-3, 1.5e-3, 2.5e-3}, {5e-3, 5e-3, 5e-3}};
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{2, 1, 0}));
  EXPECT_EQ(result->tasks_reverted, 1) << "c gains nothing over its default";
  ASSERT_EQ(board.calls[0].size(), 3u) << "round one: defaults, first and second options";
}

// Every tuned config loses inside the model: the defaults are returned, and
// the note says tuning did not pay, with the figures.
TEST(ChooseInModel, WhenTuningLosesTheDefaultsAreReturnedAndTheJobSaysWhy) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board;
  board.kernel_s = {{3e-3, 3.3e-3}, {2e-3, 2.2e-3}, {4e-3, 4.4e-3}};
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{0, 0, 0}));
  EXPECT_FALSE(result->returned_tuned);
  EXPECT_EQ(result->tasks_reverted, 3);
  EXPECT_EQ(result->tasks_tuned, 0);
  EXPECT_THAT(result->note, HasSubstr("tuning did not pay"));
  EXPECT_THAT(result->note, HasSubstr("defaults' module is returned"));
  EXPECT_EQ(board.calls.size(), 1u) << "the mix is the defaults: nothing more to time";
}

// Per task the tuned configs look faster, but the model as a whole is not,
// beyond noise: the job returns the faster by median and says it is noise.
TEST(ChooseInModel, ALeadWithinNoiseIsSaidToBeNoise) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board;
  board.kernel_s = {{4e-3, 3.9e-3}, {2e-3, 2e-3}, {5e-3, 5e-3}};
  board.noise = {1, 1, 1, 1, 1, 1, 1, 1};
  // Inside the model, the tuned variant wins some rounds and loses others.
  board.tuned_noise = {0.97, 1.03, 0.98, 1.02, 0.97, 1.02, 0.99, 1.01};
  auto result = ChooseInModel(tasks, board.Runner(tasks), {.max_options = 3, .min_gain = 0.01});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->beyond_noise);
  EXPECT_TRUE(result->returned_tuned) << "the faster by its median";
  EXPECT_THAT(result->note, HasSubstr("not faster than the defaults beyond noise"));
  // Still undecided after the runs it may add: bounded, and said.
  EXPECT_EQ(result->confirm_runs, 2);
  EXPECT_EQ(board.calls.size(), 4u) << "rounds one and two, then two confirmation runs";
  EXPECT_THAT(result->note, HasSubstr("24 rounds over 3 runs"));
}

// A 5 % lead of every task's tuned option that the first run cannot tell
// from noise (half its rounds for the tuned variant, half against) and
// every later run shows in each round.
TableBoard UndecidedThenClear() {
  TableBoard board;
  board.kernel_s = {{4e-3, 3.8e-3}, {2e-3, 1.9e-3}, {5e-3, 4.75e-3}};
  board.noise = {1, 1, 1, 1, 1, 1, 1, 1};
  board.tuned_noise = {0.93, 1.08, 0.94, 1.07, 0.95, 1.06, 0.96, 1.05};
  board.later_tuned_noise = {1, 1, 1, 1, 1, 1, 1, 1};
  return board;
}

// A 5 % lead that one run on a noisy board cannot tell from noise (half its
// rounds favour the tuned variant, half the defaults) is timed again, the
// two alone beside each other, and the runs' rounds pooled decide it.
TEST(ChooseInModel, ALeadUndecidedInOneRunIsTimedAgain) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board = UndecidedThenClear();
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(board.calls.size(), 2u) << "round one timed the mix; one confirmation run decided";
  EXPECT_EQ(board.calls[1], (std::vector<ModelVariant>{{0, 0, 0}, {1, 1, 1}}));
  EXPECT_EQ(result->confirm_runs, 1);
  EXPECT_TRUE(result->beyond_noise);
  EXPECT_TRUE(result->returned_tuned);
  EXPECT_EQ(result->tuned.rounds, 16);
  EXPECT_THAT(result->note, HasSubstr("faster on the board"));
  EXPECT_THAT(result->note, HasSubstr("16 rounds over 2 runs"));
}

// A run may time its variants for different numbers of rounds (a round cut
// short): rounds are paired within each run, never across runs.
TEST(ChooseInModel, RoundsArePairedWithinEachRun) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board = UndecidedThenClear();
  VariantRunner runner = [&](const std::vector<ModelVariant>& v) {
    auto out = board.Runner(tasks)(v);
    if (board.calls.size() == 1) (*out)[0].costs_s.resize(6);  // the defaults' last two lost
    return out;
  };
  auto result = ChooseInModel(tasks, runner);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->confirm_runs, 1);
  EXPECT_EQ(result->untuned.rounds, 14);
  EXPECT_EQ(result->tuned.rounds, 14) << "6 pairs of the first run, 8 of the second";
  EXPECT_THAT(result->note, HasSubstr("14 rounds over 2 runs"));
}

TEST(ChooseInModel, NothingTunedMeansTheDefaults) {
  const std::vector<InModelTask> tasks = Tasks(0);
  TableBoard board;
  board.kernel_s = {{4e-3}, {2e-3}, {5e-3}};
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{0, 0, 0}));
  EXPECT_FALSE(result->returned_tuned);
  EXPECT_THAT(result->note, HasSubstr("no task has a tuned config"));
}

TEST(ChooseInModel, DefaultsThatFailOnTheBoardAreAnError) {
  const std::vector<InModelTask> tasks = Tasks(1);
  VariantRunner broken = [](const std::vector<ModelVariant>& v) {
    std::vector<VariantTiming> out(v.size());
    out[0].error = "RUNTIME: out of memory";
    return absl::StatusOr<std::vector<VariantTiming>>(out);
  };
  auto result = ChooseInModel(tasks, broken);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("out of memory"));
}

// A tuned variant that fails on the board (it compiles into something else)
// is never chosen.
TEST(ChooseInModel, AFailedVariantIsNeverChosen) {
  const std::vector<InModelTask> tasks = Tasks(1);
  TableBoard board;
  board.kernel_s = {{4e-3, 1e-3}, {2e-3, 1e-3}, {5e-3, 1e-3}};
  VariantRunner runner = [&](const std::vector<ModelVariant>& v) {
    auto out = board.Runner(tasks)(v);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != ModelVariant{0, 0, 0}) {
        (*out)[i] = VariantTiming{{}, {}, "WRONG_RESULT: output differs"};
      }
    }
    return out;
  };
  auto result = ChooseInModel(tasks, runner);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{0, 0, 0}));
  EXPECT_FALSE(result->returned_tuned);
}

// The model's winner is deep in the isolated ranking (task a's 12th
// option): round one tries 16 options per task, in batches the board holds
// at once (at most 9 variants), each led by the defaults it is judged by.
TEST(ChooseInModel, DeepOptionsAreTriedInBatchesLedByTheDefaults) {
  const std::vector<InModelTask> tasks = Tasks(20);
  TableBoard board;
  board.kernel_s.assign(3, std::vector<double>(21, 4e-3));
  for (auto& row : board.kernel_s) row[0] = 3.5e-3;  // the defaults win...
  board.kernel_s[0][12] = 2e-3;                      // ...but for a's 12th
  board.kernel_s[0][17] = 1e-3;                      // (beyond K: never tried)
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->chosen, (ModelVariant{12, 0, 0}));
  ASSERT_GE(board.calls.size(), 2u);
  EXPECT_EQ(board.calls[0].size(), 9u) << "defaults and options 1-8";
  EXPECT_EQ(board.calls[1].size(), 9u) << "defaults and options 9-16";
  for (const auto& call : board.calls) {
    EXPECT_LE(call.size(), 9u);
    EXPECT_EQ(call[0], (ModelVariant{0, 0, 0}));
  }
  EXPECT_EQ(board.calls[1].back(), (ModelVariant{16, 16, 16}));
  EXPECT_EQ(result->tasks_tuned, 1);
  EXPECT_EQ(result->tasks_reverted, 2);
}

// b's first option won beside a's first, but the mix gives a its second,
// beside which b's option is slower than its default: round two shows it,
// b is reverted, and that mix (timed in a third round) is returned.
TEST(ChooseInModel, ATaskItsNeighboursSlowInTheMixIsReverted) {
  const std::vector<InModelTask> tasks = Tasks(2);
  TableBoard board;
  board.kernel_s = {{4e-3, 3e-3, 2.2e-3}, {2e-3, 1.5e-3, 2.1e-3}, {5e-3, 4e-3, 4.5e-3}};
  board.beside = [](size_t task, const ModelVariant& v, double s) {
    return task == 1 && v[1] == 1 && v[0] != 1 ? 2.5e-3 : s;
  };
  auto result = ChooseInModel(tasks, board.Runner(tasks));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(board.calls.size(), 3u);
  EXPECT_EQ(board.calls[1][1], (ModelVariant{2, 1, 1})) << "round two: the mix";
  EXPECT_EQ(board.calls[2][1], (ModelVariant{2, 0, 1})) << "round three: b reverted";
  EXPECT_EQ(result->chosen, (ModelVariant{2, 0, 1}));
  EXPECT_EQ(result->tasks_reverted, 1);
  EXPECT_TRUE(result->returned_tuned);
}

TEST(StatsOf, MedianAndQuartiles) {
  LatencyStats s = StatsOf({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median_s, 3);
  EXPECT_DOUBLE_EQ(s.p25_s, 2);
  EXPECT_DOUBLE_EQ(s.p75_s, 4);
  EXPECT_EQ(s.rounds, 5);
}

}  // namespace
}  // namespace kiln::tuner
