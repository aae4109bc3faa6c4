#pragma once
// Search strategies guided by what has been measured:
//
// - GeneticSearch ("ga"): a population of the fastest measured configs; each
//   proposal is a child of two parents drawn in proportion to their speed
//   (uniform crossover per knob), mutated knob by knob.
// - ModelSearch ("xgb"): the AutoTVM XGBTuner design. An XGBoost rank model
//   (tuner/cost_model.h) on loop-IR features, retrained as results arrive.
//   With other tasks' records in the context (transfer learning), a prior
//   model trained on them ranks the first batches, and the task's own model
//   is trained on top of it (the prior's predictions as its base margin, as
//   AutoTVM's transfer learning does), the prior weighted by how well it
//   ranks the task's own results (Spearman, 0 when it ranks them wrong):
//   where this task's results disagree with the other shapes', its own
//   trees correct the prior;
//   explored by simulated annealing from the best measured configs and the
//   best predicted of a random sample; the batch is picked from the best predicted for diversity (a
//   config gains for knob values the batch does not have yet), and an epsilon share of it is random
//   (exploration).
//
// Both never propose a config the template rejects, nor two configs that
// build the same kernel (equal lowered loops: tuner/feature_cache.h), nor one
// already measured; until there is something to learn from they sample at
// random.

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tuner/config_set.h"
#include "tuner/cost_model.h"
#include "tuner/feature_cache.h"
#include "tuner/search.h"

namespace kiln::tuner {

// The state both share: the space, measured results, the proposals so far.
class GuidedSearch : public SearchStrategy {
 public:
  GuidedSearch(ConfigSpace space, const SearchContext& context);
  void Update(const std::vector<std::pair<compiler::Config, double>>& results) override;

 protected:
  struct Result {
    compiler::Config config;
    double cost_s = 0;  // +inf: failed
  };
  // Whether `config` may be proposed: valid, not measured, not proposed, and
  // not the same kernel as one that was.
  bool Fresh(const compiler::Config& config, const ConfigSet& measured);
  // Marks `config` proposed.
  void Take(const compiler::Config& config);
  // Up to n fresh random configs.
  std::vector<compiler::Config> RandomFresh(int n, const ConfigSet& measured);
  // `config` with one knob (of those with more than one choice) changed.
  compiler::Config Mutate(compiler::Config config);
  // The measured configs that ran, fastest first.
  std::vector<const Result*> Ranked() const;

  ConfigSpace space_;
  std::mt19937_64 rng_;
  FeatureCache cache_;
  std::vector<Result> results_;
  double best_s_ = 0;  // 0: nothing ran yet

 private:
  ConfigSet proposed_;
  std::set<uint64_t> kernels_;  // kernel hashes proposed or measured
};

struct GeneticOptions {
  int population = 16;
  double mutation = 0.1;  // per knob
};

class GeneticSearch : public GuidedSearch {
 public:
  GeneticSearch(ConfigSpace space, const SearchContext& context, GeneticOptions options = {});
  std::vector<compiler::Config> Propose(int n, const ConfigSet& measured) override;

 private:
  GeneticOptions options_;
};

struct ModelSearchOptions {
  // Results of this task before its own model is trained (until then, the
  // prior model alone ranks, if there are prior records).
  int min_results = 8;
  int samples = 512;       // random configs ranked to seed the annealing
  int chains = 64;         // simulated annealing points
  int max_steps = 60;      // annealing steps per proposal
  int patience = 8;        // steps without a better pool before stopping
  double epsilon = 0.1;    // share of each batch drawn at random
  double diversity = 0.5;  // weight of new knob values against rank
  CostModelOptions model;
};

class ModelSearch : public GuidedSearch {
 public:
  ModelSearch(ConfigSpace space, SearchContext context, ModelSearchOptions options = {});
  std::vector<compiler::Config> Propose(int n, const ConfigSet& measured) override;

  const CostModel& model() const { return model_; }
  // Whether other tasks' records trained a prior model (transfer learning).
  bool warm_started() const { return prior_model_.trained(); }
  // The prior's weight in the scores: 1 until the task's own model is
  // trained, then the prior's rank correlation with the task's results.
  double prior_weight() const { return prior_weight_; }
  std::optional<std::pair<std::string, size_t>> SavedModel() const override;
  absl::Status RestoreModel(std::string_view bytes, size_t trained_on) override;
  // Retrains when results arrived since the last training (and there are
  // enough); what Propose does first.
  absl::Status TrainIfNeeded();
  // Predicted scores (higher: faster) of configs; -inf for invalid ones:
  // the prior model's (times prior_weight()) plus the task's own model's, of
  // those trained.
  // FAILED_PRECONDITION while neither is.
  absl::StatusOr<std::vector<float>> Score(const std::vector<compiler::Config>& configs);

 private:
  // The best predicted fresh configs found by simulated annealing, best first.
  std::vector<std::pair<float, compiler::Config>> Anneal(size_t pool, const ConfigSet& measured);
  std::vector<compiler::Config> PickDiverse(std::vector<std::pair<float, compiler::Config>> pool,
                                            int n);

  ModelSearchOptions options_;
  TrainingSet prior_;
  CostModel prior_model_;  // trained on prior_, once
  CostModel model_;        // on this task's results (on top of prior_model_)
  size_t trained_on_ = 0;  // results_.size() at the last training
  double prior_weight_ = 1.0;
};

}  // namespace kiln::tuner
