#include "tuner/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "deploy/check.h"

namespace kiln::tuner {

std::vector<int> AllocateTrials(const std::vector<double>& task_weights, int total_trials,
                                int min_per_task) {
  KILN_CHECK(total_trials >= 0) << "negative trial budget " << total_trials;
  const size_t n = task_weights.size();
  std::vector<int> out(n, 0);
  if (n == 0) return out;
  for (double w : task_weights) {
    KILN_CHECK(std::isfinite(w) && w >= 0) << "task weight " << w << " is not a finite weight";
  }
  min_per_task = std::max(min_per_task, 0);

  // Tasks by weight, heaviest first (index breaks ties).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return task_weights[a] > task_weights[b]; });

  if (static_cast<int64_t>(min_per_task) * static_cast<int64_t>(n) > total_trials) {
    // Not enough for everyone's minimum: heaviest tasks get theirs first.
    int left = total_trials;
    for (size_t i : order) {
      int give = std::min(left, min_per_task);
      out[i] = give;
      left -= give;
    }
    return out;
  }

  int remaining = total_trials - min_per_task * static_cast<int>(n);
  double sum = std::accumulate(task_weights.begin(), task_weights.end(), 0.0);
  std::vector<double> share(n);
  for (size_t i = 0; i < n; ++i) {
    share[i] = sum > 0 ? remaining * (task_weights[i] / sum) : static_cast<double>(remaining) / n;
  }
  // Largest remainder: floors first, then one more to the biggest fractions.
  int given = 0;
  std::vector<double> frac(n);
  for (size_t i = 0; i < n; ++i) {
    int whole = static_cast<int>(std::floor(share[i]));
    whole = std::min(whole, remaining - given);
    out[i] = min_per_task + whole;
    given += whole;
    frac[i] = share[i] - whole;
  }
  std::vector<size_t> by_frac = order;
  std::stable_sort(by_frac.begin(), by_frac.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  for (size_t k = 0; given < remaining; k = (k + 1) % n) {
    ++out[by_frac[k]];
    ++given;
  }
  return out;
}

}  // namespace kiln::tuner
