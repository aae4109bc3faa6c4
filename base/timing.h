#pragma once
// The farm's timing loop, one place for every measurer (compiler::Measure on
// the agent's own device, kiln-board on a board): a hopeless candidate cut
// short after one warm run, runs per repeat doubled until a repeat lasts
// min_repeat_ms, then `repeat` repeats (a cooldown between them), each the
// time of its runs divided by their number. `time_runs(n)` runs the kernel
// n times and returns their time in seconds (or why it could not).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

// The farm's timing defaults, the one place the tracker (a job's timing),
// the agent (a batch's zero fields), `kiln tune --local` and kiln-board take
// them from.
constexpr int kDefaultRepeat = 3;
constexpr int kDefaultMinRepeatMs = 5;
constexpr int kDefaultCandidateTimeoutMs = 20000;

struct TimingLoop {
  int number = 0;  // runs per repeat; <= 0: doubled from 1 until min_repeat_ms
  int repeat = kDefaultRepeat;
  int min_repeat_ms = kDefaultMinRepeatMs;
  int cooldown_ms = 0;
  // A candidate whose one warm run is slower than this is not timed to the
  // end: that run is its cost (0: time every candidate fully).
  double stop_above_s = 0;
};

struct TimedCosts {
  std::vector<double> costs_s;  // one per repeat (one run when cut_short)
  bool cut_short = false;
};

// `number` runs of `run` (an int32_t return code, 0: ok), their wall time in
// seconds; with `prepare_each`, `prepare()` before every run, untimed (the
// caches set as the model leaves them).
template <typename Prepare, typename Run>
absl::StatusOr<double> TimeRuns(int number, bool prepare_each, Prepare&& prepare, Run&& run) {
  using Clock = std::chrono::steady_clock;
  double total = 0;
  for (int i = 0; i < number;) {
    if (prepare_each) prepare();
    const int runs = prepare_each ? 1 : number;
    const Clock::time_point start = Clock::now();
    for (int j = 0; j < runs; ++j, ++i) {
      if (int32_t rc = run(); rc != 0) {
        return absl::InternalError("the kernel returned " + std::to_string(rc));
      }
    }
    total += std::chrono::duration<double>(Clock::now() - start).count();
  }
  return total;
}

template <typename TimeRuns>
absl::StatusOr<TimedCosts> RunTimingLoop(const TimingLoop& loop, TimeRuns&& time_runs) {
  TimedCosts out;
  if (loop.stop_above_s > 0) {
    absl::StatusOr<double> t = time_runs(1);
    if (!t.ok()) return t.status();
    if (*t > loop.stop_above_s) {
      out.costs_s.push_back(*t);
      out.cut_short = true;
      return out;
    }
  }
  int number = loop.number > 0 ? loop.number : 1;
  if (loop.min_repeat_ms > 0) {
    const double min_s = loop.min_repeat_ms / 1000.0;
    while (true) {
      absl::StatusOr<double> t = time_runs(number);
      if (!t.ok()) return t.status();
      if (*t >= min_s || number >= (1 << 30)) break;
      number *= 2;
    }
  }
  for (int r = 0; r < std::max(1, loop.repeat); ++r) {
    if (r > 0 && loop.cooldown_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(loop.cooldown_ms));
    }
    absl::StatusOr<double> t = time_runs(number);
    if (!t.ok()) return t.status();
    out.costs_s.push_back(*t / number);
  }
  return out;
}

}  // namespace kiln
