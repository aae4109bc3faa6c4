#pragma once
// The cost model: gradient-boosted trees (XGBoost's C API) with a pairwise
// rank objective, trained on candidates' features (tuner/features.h) and
// scores (higher is faster; the tuner uses throughput relative to the best of
// the candidate's workload). Rows form groups (one per workload): only the
// order within a group is learned, so records of other shapes and devices can
// be mixed in (transfer learning) with a weight per group.
//
// Not thread-safe; movable.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::tuner {

struct TrainingSet {
  std::vector<std::vector<float>> rows;  // all of one length
  std::vector<float> scores;             // one per row, higher is faster
  std::vector<unsigned> group_sizes;     // consecutive rows per group; sums to rows
  std::vector<float> group_weights;      // one per group; empty: all 1
  // One per row, or empty: a starting score the trees add to (another
  // model's prediction, which the trained trees then correct: how a task's
  // model builds on one trained on other tasks' records).
  std::vector<float> base_margin;
  void AddGroup(std::vector<std::vector<float>> group_rows, std::vector<float> group_scores,
                float weight = 1.0f);
};

struct CostModelOptions {
  int rounds = 80;
  int max_depth = 6;
  double eta = 0.2;
  double subsample = 1.0;
  int threads = 1;
  uint64_t seed = 0;
};

class CostModel {
 public:
  explicit CostModel(CostModelOptions options = {});
  ~CostModel();
  CostModel(CostModel&& other) noexcept;
  CostModel& operator=(CostModel&& other) noexcept;
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Retrains from scratch on `data`. INVALID_ARGUMENT for an empty or
  // inconsistent set (ragged rows, groups not summing to the rows, a
  // non-finite value, a base margin of another length). Predictions are the
  // trees' alone, without the base margin.
  absl::Status Train(const TrainingSet& data);
  bool trained() const { return booster_ != nullptr; }
  // One score per row (higher: predicted faster). FAILED_PRECONDITION before
  // training; INVALID_ARGUMENT for rows of another length than trained on.
  absl::StatusOr<std::vector<float>> Predict(const std::vector<std::vector<float>>& rows) const;

  // The trained model as bytes (XGBoost's UBJSON), and back.
  absl::StatusOr<std::string> Save() const;
  static absl::StatusOr<CostModel> Load(std::string_view bytes, CostModelOptions options = {});

 private:
  void Free();
  CostModelOptions options_;
  void* booster_ = nullptr;  // BoosterHandle
  int64_t num_features_ = 0;
};

// Spearman's rank correlation of two equally long series (ties get their
// mean rank); 0 for fewer than two values or a constant series.
double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace kiln::tuner
