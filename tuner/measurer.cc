#include "tuner/measurer.h"

#include "deploy/parallel.h"

namespace kiln::tuner {

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
  std::vector<MeasureResult> results;
  for (const compiler::Config& config : batch.configs) {
    compiler::MeasurePolicy policy = policy_;
    policy.stop_above_s = batch.stop_above_s;
    compiler::Measurement m = compiler::Measure(batch.workload, config, policy, target_);
    MeasureResult r;
    r.error_kind = std::string(compiler::MeasureErrorName(m.error));
    r.error_message = std::move(m.message);
    r.costs_s = std::move(m.costs_s);
    r.cut_short = m.cut_short;
    r.agent_id = "local";
    results.push_back(std::move(r));
  }
  return std::make_pair(ticket, std::move(results));
}

}  // namespace kiln::tuner
