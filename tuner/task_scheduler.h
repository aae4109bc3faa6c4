#pragma once
// Which task of a model gets the next batch of trials: Ansor's gradient
// task scheduler. The objective is the model's latency, sum over tasks of
// occurrences x best cost. After a round-robin warm-up (every task measured
// once), each batch goes to the task with the largest expected decrease of
// that objective per trial, estimated from the task's own curve:
//
//   gain_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)
//   backward_i = (best_i(t - window) - best_i(t)) / window  (recent progress)
//   forward_i  = best_i(t) / t * 2^(-stale_i / half_life)   (optimism: 1/t decay)
//
// where stale_i counts the task's trials since its best last improved by 1%:
// a task that stopped improving loses its optimism (Ansor instead compares
// with similar tasks' throughput, which kiln does not track).
// A task with nothing measured yet goes first (for a window of trials; if all
// of them failed, last); a retired task (its space
// exhausted, or stopped early) gets nothing more.

#include <cstddef>
#include <optional>
#include <vector>

namespace kiln::tuner {

struct TaskSchedulerOptions {
  double alpha = 0.2;
  int window = 16;  // trials of the backward difference
  // Trials every task gets, round-robin, before gains decide.
  int warmup_trials = 1;
  int half_life = 64;  // trials without a gain that halve the forward term
};

class TaskScheduler {
 public:
  // weights: each task's occurrences in the model (finite, > 0).
  explicit TaskScheduler(std::vector<double> weights, TaskSchedulerOptions options = {});

  // Task `task` has now had `trials` trials in all and its best cost is
  // best_cost_s (0: nothing ran yet).
  void Record(size_t task, int trials, double best_cost_s);
  // No more trials for this task.
  void Retire(size_t task);
  bool Retired(size_t task) const { return tasks_[task].retired; }

  // The task to give the next batch to; nullopt once all are retired.
  // pending[i]: trials of task i in flight, counted as spent (they lower the
  // task's forward gain), so that several agents spread over the tasks.
  std::optional<size_t> Next(const std::vector<int>& pending = {}) const;
  // Expected decrease of the weighted latency per trial (the gain above)
  // with `pending` trials in flight; +inf for a task in warm-up or with
  // nothing measured yet.
  double Gain(size_t task, int pending = 0) const;

 private:
  struct Task {
    double weight = 1;
    bool retired = false;
    std::vector<std::pair<int, double>> curve;  // (trials, best cost), best > 0
    int trials = 0;
    int last_gain = 0;  // trials when the best last improved by 1%
  };
  double BestAt(const Task& t, int trials) const;  // 0 before anything ran
  TaskSchedulerOptions options_;
  std::vector<Task> tasks_;
};

}  // namespace kiln::tuner
