#pragma once
// Search strategies: propose batches of configs from a ConfigSpace to measure.
// A strategy never proposes a config twice, nor one the caller says was
// already measured; it returns fewer than asked once the space is exhausted.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/vocabulary.h"
#include "compiler/config.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "tuner/config_set.h"
#include "tuner/config_space.h"
#include "tuner/cost_model.h"

namespace kiln::tuner {

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  // Up to n new configs; `already_measured_canonical` holds canonical config
  // strings (compiler::CanonicalConfig) that must not be proposed.
  virtual std::vector<compiler::Config> Propose(int n,
                                                const ConfigSet& already_measured_canonical) = 0;
  // Measured results: cost in seconds, or +inf for a failed measurement.
  virtual void Update(const std::vector<std::pair<compiler::Config, double>>& results) {
    (void)results;
  }
  // A strategy with a cost model: the model as bytes and how many of the
  // results given to Update it was trained on; nullopt while it has none.
  virtual std::optional<std::pair<std::string, size_t>> SavedModel() const { return std::nullopt; }
  // Restores a saved model. When trained_on equals the results given to
  // Update so far, it is used as is, without retraining.
  virtual absl::Status RestoreModel(std::string_view bytes, size_t trained_on) {
    (void)bytes;
    (void)trained_on;
    return absl::OkStatus();
  }
};

// Uniform random sampling without replacement.
class RandomSearch : public SearchStrategy {
 public:
  RandomSearch(ConfigSpace space, uint64_t seed);
  std::vector<compiler::Config> Propose(int n,
                                        const ConfigSet& already_measured_canonical) override;

 private:
  bool Excluded(const std::string& canonical, const ConfigSet& measured) const;
  ConfigSpace space_;
  std::mt19937_64 rng_;
  ConfigSet proposed_;
  // Once rejection sampling struggles: the indices not yet excluded then, in
  // random order, drawn from the back (what was excluded since is skipped).
  // Enumerated once, not at every batch.
  bool enumerated_ = false;
  std::vector<uint64_t> left_;
};

// Every config in index order.
class GridSearch : public SearchStrategy {
 public:
  explicit GridSearch(ConfigSpace space);
  std::vector<compiler::Config> Propose(int n,
                                        const ConfigSet& already_measured_canonical) override;

 private:
  ConfigSpace space_;
  uint64_t next_ = 0;
  bool done_ = false;
};

// What a strategy may use beside the space: the workload and target (the
// model-guided strategies extract features; every strategy but random and
// grid skips configs the template rejects), a seed, and records of other
// tasks to warm-start a cost model from (transfer learning).
struct SearchContext {
  compiler::Workload workload;
  compiler::Target target;
  uint64_t seed = 0;
  TrainingSet prior;
};

// The search strategies: uniform sampling, the grid in order, a genetic
// search, and the XGBoost-guided search (with transfer learning).
enum class SearchKind : int { kRandom = 1, kGrid = 2, kGa = 3, kXgb = 4 };

// The strategy `kiln tune --strategy` and the protocol name `name`;
// INVALID_ARGUMENT listing the known names for any other.
absl::StatusOr<SearchKind> ParseSearch(std::string_view name);

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeSearch(SearchKind kind, ConfigSpace space,
                                                           SearchContext context);

}  // namespace kiln::tuner

namespace kiln {

// The names, in the order `kiln tune --strategy` lists them.
template <>
struct Vocabulary<tuner::SearchKind> {
  using E = tuner::SearchKind;
  static constexpr std::array<std::pair<E, std::string_view>, 4> kNames = {{
      {E::kRandom, "random"},
      {E::kGrid, "grid"},
      {E::kGa, "ga"},
      {E::kXgb, "xgb"},
  }};
};

}  // namespace kiln
