#include "tuner/measurer.h"

#include <cmath>

#include "base/str.h"
#include "deploy/parallel.h"

namespace kiln::tuner {
namespace {

// The log database's kind of what a measurement itself can produce.
storage::ErrorKind ErrorKindOf(compiler::MeasureError error) {
  switch (error) {
    case compiler::MeasureError::kNone:
      return storage::ErrorKind::kNone;
    case compiler::MeasureError::kInvalidConfig:
      return storage::ErrorKind::kInvalidConfig;
    case compiler::MeasureError::kCompile:
      return storage::ErrorKind::kCompile;
    case compiler::MeasureError::kRuntime:
      return storage::ErrorKind::kRuntime;
    case compiler::MeasureError::kWrongResult:
      return storage::ErrorKind::kWrongResult;
  }
  return storage::ErrorKind::kRuntime;
}

}  // namespace

absl::Status CheckCosts(const std::vector<double>& costs_s, double max_cost_s) {
  if (costs_s.empty()) return absl::InvalidArgumentError("no costs reported");
  for (double c : costs_s) {
    if (!std::isfinite(c) || c <= 0) {
      return absl::InvalidArgumentError(
          StrCat("reported cost ", c, " s is not a finite, positive duration"));
    }
    if (max_cost_s > 0 && c > max_cost_s) {
      return absl::InvalidArgumentError(StrCat(
          "reported cost ", c, " s is above the candidate time limit of ", max_cost_s, " s"));
    }
  }
  return absl::OkStatus();
}

uint64_t LocalMeasurer::Submit(MeasureBatch batch) {
  queue_.emplace_back(next_, std::move(batch));
  return next_++;
}

absl::StatusOr<std::pair<uint64_t, std::vector<MeasureResult>>> LocalMeasurer::WaitAny() {
  if (queue_.empty()) return absl::FailedPreconditionError("no batch was submitted");
  auto [ticket, batch] = std::move(queue_.front());
  queue_.erase(queue_.begin());
  // Parallel kernels resolve kiln_parallel_for from libkiln_runtime.so; this
  // reference keeps the library linked into every binary that measures.
  static const int threads [[maybe_unused]] = kiln_num_threads();
  // The batch's CPU kernels are built first, on every core; then each is
  // verified and timed alone.
  std::vector<compiler::Prebuilt> built;
  if (!target_.is_gpu()) built = compiler::PrebuildJit(batch.workload, batch.configs, target_);
  std::vector<MeasureResult> results;
  for (size_t i = 0; i < batch.configs.size(); ++i) {
    compiler::MeasurePolicy policy = policy_;
    policy.stop_above_s = batch.stop_above_s;
    compiler::Measurement m = compiler::Measure(batch.workload, batch.configs[i], policy, target_,
                                                42, built.empty() ? nullptr : &built[i]);
    if (!built.empty()) built[i] = compiler::Prebuilt();  // its kernel is no longer needed
    MeasureResult r;
    r.error_kind = ErrorKindOf(m.error);
    r.error_message = std::move(m.message);
    r.costs_s = std::move(m.costs_s);
    r.cut_short = m.cut_short;
    r.agent_id = "local";
    results.push_back(std::move(r));
  }
  return std::make_pair(ticket, std::move(results));
}

}  // namespace kiln::tuner
