#include "tracker/metrics.h"

#include <cmath>

#include "base/str.h"
#include "tracker/dispatcher.h"

namespace kiln::tracker {

std::string PromEscape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PromSample(const std::string& name,
                       const std::vector<std::pair<std::string, std::string>>& labels,
                       double value) {
  std::string out = name;
  if (!labels.empty()) {
    out += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      out += StrCat(i ? "," : "", labels[i].first, "=\"", PromEscape(labels[i].second), "\"");
    }
    out += '}';
  }
  if (std::isinf(value)) return StrCat(out, value > 0 ? " +Inf\n" : " -Inf\n");
  if (value == std::floor(value) && std::fabs(value) < 9e15) {
    return StrCat(out, " ", static_cast<int64_t>(value), "\n");
  }
  return StrCat(out, " ", FormatDouble(value), "\n");
}

void Metrics::CountResults(const std::string& device_key,
                           const std::vector<MeasureOutcome>& results, double latency_s,
                           int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  measurements_[device_key] += static_cast<int64_t>(results.size());
  for (const MeasureOutcome& r : results) {
    const auto k = static_cast<size_t>(r.error_kind);
    if (r.error_kind != storage::ErrorKind::kNone && k < errors_.size()) errors_[k]++;
  }
  if (latency_s >= 0) {
    for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      if (latency_s <= kLatencyBuckets[b]) buckets_[b]++;
    }
    latency_count_++;
    latency_sum_ += latency_s;
  }
  const int64_t second = now_ms / 1000;
  if (per_second_.empty() || per_second_.back().first != second) {
    per_second_.emplace_back(second, 0);
  }
  per_second_.back().second += static_cast<int64_t>(results.size());
  while (!per_second_.empty() && per_second_.front().first < second - 60) per_second_.pop_front();
}

void Metrics::CountLeaseExpiry(const std::string& device_key) {
  std::lock_guard<std::mutex> lock(mu_);
  expiries_[device_key]++;
}

double Metrics::MeasurementsPerSecond(int64_t now_ms, int64_t window_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t from = (now_ms - window_ms) / 1000;
  int64_t n = 0;
  for (const auto& [second, count] : per_second_) {
    if (second > from) n += count;
  }
  return static_cast<double>(n) * 1000.0 / static_cast<double>(window_ms);
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP kiln_measurements_total Candidates measured (or given up), by device key.\n";
  out += "# TYPE kiln_measurements_total counter\n";
  for (const auto& [key, n] : measurements_) {
    out += PromSample("kiln_measurements_total", {{"key", key}}, static_cast<double>(n));
  }
  out += "# HELP kiln_measurement_errors_total Measurements that ended in an error, by kind.\n";
  out += "# TYPE kiln_measurement_errors_total counter\n";
  for (storage::ErrorKind kind : storage::kErrorKinds) {
    const int64_t n = errors_[static_cast<size_t>(kind)];
    if (kind == storage::ErrorKind::kNone || n == 0) continue;
    out +=
        PromSample("kiln_measurement_errors_total",
                   {{"kind", std::string(storage::ErrorKindName(kind))}}, static_cast<double>(n));
  }
  out += "# HELP kiln_lease_expiries_total Leased batches whose agent did not answer in time.\n";
  out += "# TYPE kiln_lease_expiries_total counter\n";
  for (const auto& [key, n] : expiries_) {
    out += PromSample("kiln_lease_expiries_total", {{"key", key}}, static_cast<double>(n));
  }
  out += "# HELP kiln_batch_latency_seconds From a batch's lease to its results.\n";
  out += "# TYPE kiln_batch_latency_seconds histogram\n";
  for (size_t b = 0; b < kLatencyBuckets.size(); ++b) {
    out += PromSample("kiln_batch_latency_seconds_bucket",
                      {{"le", FormatDouble(kLatencyBuckets[b])}}, static_cast<double>(buckets_[b]));
  }
  out += PromSample("kiln_batch_latency_seconds_bucket", {{"le", "+Inf"}},
                    static_cast<double>(latency_count_));
  out += PromSample("kiln_batch_latency_seconds_sum", {}, latency_sum_);
  out += PromSample("kiln_batch_latency_seconds_count", {}, static_cast<double>(latency_count_));
  return out;
}

}  // namespace kiln::tracker
