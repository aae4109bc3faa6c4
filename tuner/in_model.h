#pragma once
// Tuning confirmed inside the model (what TensorRT does with its tactics):
// kernels timed alone find their weights in the caches and their inputs hot,
// which inside the model they do not, so a config that won alone can lose
// in the model. After the search, the job builds variants of the whole
// model, has the board run them end to end, interleaved, with each task's
// kernel time inside the runs (the kernel profile), and decides from that:
//
// 1. Round one: for k = 1..K, the variant whose every task uses its k-th
//    tuned option (its last where it has fewer), in batches of at most
//    `max_variants` variants, each batch led by the defaults (variant 0),
//    so that the board holds a bounded number of modules at once and each
//    option is judged against the defaults timed beside it. Each task's
//    option is then judged by the task's own time inside the model, as a
//    ratio to the default's in the same batch: an option is kept only when
//    it is at least `min_gain` faster there than the default; otherwise the
//    task is reverted to its default. The model's winners are often deep in
//    the isolated ranking, hence K options, not the first few.
// 2. The mix of those per-task choices runs in round two beside the
//    defaults and round one's fastest variant (unless round one, in one
//    batch, already timed it).
// 3. Inside the mix a task's neighbours are not those it was judged beside:
//    a task of the mix whose kernel is not `min_gain` faster than the
//    default's kernel in round two is reverted, and that mix runs in a
//    third round beside the defaults and round two's fastest.
// 4. The last round's fastest tuned variant is judged against the defaults
//    by the rounds' paired ratios (each round times every variant back to
//    back): while the middle half of defaults / tuned straddles 1 (neither
//    three rounds in four for it nor three in four against it), the two run
//    again beside each other, at most `max_confirm_runs` times, and every
//    run's rounds are pooled: one run of fifteen rounds on a noisy board
//    cannot tell a 5 % lead from a 5 % loss. The job returns the tuned
//    variant when the pooled median ratio favours it, and says whether its
//    lead is beyond noise (the lower quartile above 1).

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"

namespace kiln::tuner {

// One task of the model: its options, [0] the template's default (nullopt),
// then tuned configs, the most promising first.
struct InModelTask {
  std::string workload_key;
  std::vector<std::optional<compiler::Config>> options;
};

// A module to build: the option each task uses, by index into its options.
using ModelVariant = std::vector<int>;

// What the board measured for one variant: the model's time per run in each
// round, and each task's kernels' time per run (by workload key). An error
// (costs empty) when it did not build, run or compute the same outputs.
struct VariantTiming {
  std::vector<double> costs_s;
  std::map<std::string, double> kernel_costs_s;
  std::string error;
};

// Runs the variants interleaved on the board; one timing per variant.
using VariantRunner =
    std::function<absl::StatusOr<std::vector<VariantTiming>>(const std::vector<ModelVariant>&)>;

struct LatencyStats {
  double median_s = 0;
  double p25_s = 0;
  double p75_s = 0;
  int rounds = 0;
};
LatencyStats StatsOf(std::vector<double> costs_s);

struct InModelOptions {
  int max_options = 16;      // tuned options per task tried (K)
  int max_variants = 9;      // variants in one run of the board (defaults included), >= 2
  double min_gain = 0.01;    // a tuned option's lead inside the model over the default
  int max_confirm_runs = 2;  // further runs of the fastest beside the defaults while undecided
};

struct InModelResult {
  ModelVariant chosen;   // what the job returns
  LatencyStats untuned;  // the defaults, in the last round and its confirmation runs
  LatencyStats tuned;    // the fastest tuned variant of the last round, likewise
  int confirm_runs = 0;  // further runs of the two while their lead was undecided
  bool returned_tuned = false;
  bool beyond_noise = false;  // the tuned variant's lead over the defaults
  int tasks_tuned = 0;        // tasks whose returned option is tuned
  int tasks_reverted = 0;     // tasks with tuned options whose default won inside the model
  std::string note;           // what was decided and why, in words
};

// FAILED_PRECONDITION when the defaults' variant itself fails on the board
// (nothing to compare with); the runner's own errors as they come.
absl::StatusOr<InModelResult> ChooseInModel(const std::vector<InModelTask>& tasks,
                                            const VariantRunner& run,
                                            const InModelOptions& options = {});

// The variant of each task's first tuned option (its default where it has
// none): the best configs so far, as the end-to-end curve measures them.
ModelVariant BestSoFar(const std::vector<InModelTask>& tasks);

}  // namespace kiln::tuner
