#pragma once
// How the tuning loop (tuner/tuner.h) gets candidates measured. The tracker
// measures over the farm (its dispatcher hands batches to agents); the
// LocalMeasurer measures in-process, for tests and `kiln tune --local`.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/measure.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"

namespace kiln::tuner {

// Candidates of one workload, measured together.
struct MeasureBatch {
  compiler::Workload workload;
  std::vector<compiler::Config> configs;
  // A candidate whose one warm run is slower than this is timed once
  // (0: every candidate is timed fully).
  double stop_above_s = 0;
};

// One candidate's outcome, checked where it entered (storage::Measurement).
// The transient error kinds (storage::IsTransient: timeout, agent lost, and
// invalid cost: the agent reported a cost no run can have) have the config
// measured again.
using MeasureResult = storage::Measurement;

// OK when every cost is a finite, positive duration of at most max_cost_s
// (0: no upper bound); INVALID_ARGUMENT naming the first that is not. What
// an agent reports is checked with this where it enters, before anything
// stores it.
absl::Status CheckCosts(const std::vector<double>& costs_s, double max_cost_s = 0);

class Measurer {
 public:
  virtual ~Measurer() = default;
  // How many batches are worth having in flight now (the farm: one per
  // connected agent). At least 1.
  virtual int Parallelism() = 0;
  // Starts measuring a batch; returns its ticket.
  virtual uint64_t Submit(MeasureBatch batch) = 0;
  // Waits until a submitted batch is measured: its ticket and one result per
  // config, in order. CANCELLED when measuring must stop (the job was
  // cancelled or the tracker is stopping): the tuner then returns at once.
  virtual absl::StatusOr<std::pair<uint64_t, std::vector<MeasureResult>>> WaitAny() = 0;
};

// Measures each batch in the calling thread (in WaitAny), one at a time, with
// compiler::Measure on the host. No sandbox: a candidate that crashes takes
// the process with it, which is why the farm measures in agents.
class LocalMeasurer : public Measurer {
 public:
  LocalMeasurer(compiler::Target target, compiler::MeasurePolicy policy)
      : target_(std::move(target)), policy_(policy) {}
  int Parallelism() override { return 1; }
  uint64_t Submit(MeasureBatch batch) override;
  absl::StatusOr<std::pair<uint64_t, std::vector<MeasureResult>>> WaitAny() override;

 private:
  compiler::Target target_;
  compiler::MeasurePolicy policy_;
  uint64_t next_ = 1;
  std::vector<std::pair<uint64_t, MeasureBatch>> queue_;
};

}  // namespace kiln::tuner
