#pragma once
// Shared by the benchmarks: the median time of one call, and two calls
// timed in alternation.
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace kiln::bench {

// Median seconds of one call of `fn` over `repeat` samples, after a
// warm-up; each sample runs `fn` enough times to last >= `min_sample_s`
// (at most 1000 calls).
inline double MedianSeconds(const std::function<void()>& fn, int repeat, double min_sample_s) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) fn();
  auto t0 = Clock::now();
  fn();
  double one = std::chrono::duration<double>(Clock::now() - t0).count();
  int inner = one > 0 ? static_cast<int>(std::clamp(min_sample_s / one, 1.0, 1000.0)) : 1000;
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(repeat));
  for (int r = 0; r < repeat; ++r) {
    auto s = Clock::now();
    for (int i = 0; i < inner; ++i) fn();
    samples.push_back(std::chrono::duration<double>(Clock::now() - s).count() / inner);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// `a` and `b` timed in alternating rounds (MedianSeconds of a few samples
// each), so that both see the same spells of a noisy machine: each one's
// median over the rounds, and the median of the rounds' ratios a / b.
struct Paired {
  double a, b, ratio;
};
inline Paired PairedMedians(const std::function<void()>& a, const std::function<void()>& b,
                            int repeat, double min_sample_s = 2e-3) {
  constexpr int kPerRound = 5;
  const int rounds = std::max(5, repeat / kPerRound);
  std::vector<double> ta, tb, ratio;
  for (int r = 0; r < rounds; ++r) {
    ta.push_back(MedianSeconds(a, kPerRound, min_sample_s));
    tb.push_back(MedianSeconds(b, kPerRound, min_sample_s));
    ratio.push_back(ta.back() / tb.back());
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  return {median(ta), median(tb), median(ratio)};
}

}  // namespace kiln::bench
