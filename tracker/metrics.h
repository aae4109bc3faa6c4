#pragma once
// The tracker's counters for Prometheus (GET /metrics on kiln-tracker
// --http, the text exposition format 0.0.4): measurements and their errors
// by kind, lease expiries, batch latency as a histogram; the gauges (queue
// length per key, agents by state, jobs by state, measurements per second)
// are read from the farm when the page is rendered (tracker/http.cc).
// Thread-safe; cheap on the result path (one lock, no allocation once every
// key has been seen).

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "storage/vocabulary.h"

namespace kiln::tracker {

struct MeasureOutcome;  // tracker/dispatcher.h

class Metrics {
 public:
  // Upper bounds (seconds) of the batch latency histogram's buckets.
  static constexpr std::array<double, 12> kLatencyBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5,
                                                             1,     5,     10,   30,   60,  300};

  // A batch's results came back (or were given up): one measurement per
  // result, the failed ones counted by error kind; `latency_s`: from the
  // lease to the results (< 0: no lease, nothing observed).
  void CountResults(const std::string& device_key, const std::vector<MeasureOutcome>& results,
                    double latency_s, int64_t now_ms);
  void CountLeaseExpiry(const std::string& device_key);

  // Measurements recorded over the last `window_ms` (per second).
  double MeasurementsPerSecond(int64_t now_ms, int64_t window_ms = 10000) const;

  // The counters as exposition text (HELP, TYPE and samples).
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> measurements_;  // by key
  // By kind, indexed by the enum's value (kErrorKinds); kNone unused.
  std::array<int64_t, storage::kErrorKinds.size() + 1> errors_{};
  std::map<std::string, int64_t> expiries_;  // by key
  std::array<int64_t, kLatencyBuckets.size()> buckets_{};
  int64_t latency_count_ = 0;
  double latency_sum_ = 0;
  // (second, measurements) of the last minute, for the rate.
  std::deque<std::pair<int64_t, int64_t>> per_second_;
};

// Exposition helpers: a label value escaped (\, ", newline), and one sample
// line `name{k="v",...} value`.
std::string PromEscape(const std::string& value);
std::string PromSample(const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& labels,
                       double value);

}  // namespace kiln::tracker
