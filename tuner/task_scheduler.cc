#include "tuner/task_scheduler.h"

#include <cmath>
#include <limits>

#include "base/check.h"

namespace kiln::tuner {

TaskScheduler::TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options)
    : options_(options) {
  for (double w : weights) {
    KILN_CHECK(std::isfinite(w) && w > 0) << "task weight " << w << " is not a positive weight";
    Task t;
    t.weight = w;
    tasks_.push_back(t);
  }
  options_.window = std::max(1, options_.window);
}

void TaskScheduler::Record(size_t task, int trials, double best_cost_s) {
  KILN_CHECK(task < tasks_.size()) << "no task " << task;
  Task& t = tasks_[task];
  t.trials = trials;
  if (best_cost_s <= 0) return;
  if (t.curve.empty() || best_cost_s < t.curve.back().second * 0.99) t.last_gain = trials;
  t.curve.emplace_back(trials, best_cost_s);
}

void TaskScheduler::Retire(size_t task) {
  KILN_CHECK(task < tasks_.size()) << "no task " << task;
  tasks_[task].retired = true;
}

double TaskScheduler::BestAt(const Task& t, int trials) const {
  double best = 0;
  for (const auto& [n, cost] : t.curve) {
    if (n > trials) break;
    best = cost;
  }
  return best;
}

double TaskScheduler::Gain(size_t task, int pending) const {
  KILN_CHECK(task < tasks_.size()) << "no task " << task;
  const Task& t = tasks_[task];
  const int trials = t.trials + std::max(0, pending);
  if (trials < options_.warmup_trials) return std::numeric_limits<double>::infinity();
  if (t.curve.empty()) {
    // Nothing ran yet: first in line for a window of trials (unless its
    // first results are on their way), then last.
    if (pending > 0) return 0;
    return trials < options_.window ? std::numeric_limits<double>::infinity() : 0;
  }
  const double best = t.curve.back().second;
  const double before = BestAt(t, t.trials - options_.window);
  // Before the window began nothing ran: the first result counts as progress
  // from twice its cost (an optimistic guess, as Ansor's is).
  const double backward = ((before > 0 ? before : 2 * best) - best) / options_.window;
  const double stale = static_cast<double>(trials - t.last_gain) / std::max(1, options_.half_life);
  const double forward = best / std::max(1, trials) * std::exp2(-stale);
  return t.weight * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

std::optional<size_t> TaskScheduler::Next(const std::vector<int>& pending) const {
  std::optional<size_t> best;
  double best_gain = -1;
  int best_trials = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (tasks_[i].retired) continue;
    const int p = i < pending.size() ? pending[i] : 0;
    const double g = Gain(i, p);
    const int trials = tasks_[i].trials + p;
    // Ties (warm-up) go to the task with fewer trials, then the first.
    if (!best || g > best_gain || (g == best_gain && trials < best_trials)) {
      best = i;
      best_gain = g;
      best_trials = trials;
    }
  }
  return best;
}

}  // namespace kiln::tuner
