#pragma once
// Splitting a model's trial budget across its tuning tasks.

#include <vector>

namespace kiln::tuner {

// Splits total_trials across tasks proportionally to their weights
// (weight = flops x occurrences), giving each task at least min_per_task
// where the total allows (the heaviest tasks first where it does not).
// The result sums to exactly total_trials (0 for an empty task list).
// Weights must be finite and non-negative; all-zero weights split evenly.
std::vector<int> AllocateTrials(const std::vector<double>& task_weights, int total_trials,
                                int min_per_task);

}  // namespace kiln::tuner
