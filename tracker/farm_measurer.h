#pragma once
// The farm as a tuner::Measurer: each batch becomes a MeasureWork on the
// dispatcher's queue for the job's device key, and its agents' results come
// back through WaitAny. One batch in flight per connected agent of the key.
// Interrupt() (the job was cancelled, the tracker is stopping) makes WaitAny
// return CANCELLED and drops the job's batches from the dispatcher.
//
// Thread-safe: the dispatcher's callbacks arrive on other threads.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracker/agent_registry.h"
#include "tracker/dispatcher.h"
#include "tuner/measurer.h"

namespace kiln::tracker {

class FarmMeasurer : public tuner::Measurer {
 public:
  // `work` carries the job's fields (job id, device key, target, timing);
  // each batch fills in the rest.
  FarmMeasurer(Dispatcher* dispatcher, AgentRegistry* agents, MeasureWork work);
  ~FarmMeasurer() override;

  int Parallelism() override;
  uint64_t Submit(tuner::MeasureBatch batch) override;
  absl::StatusOr<std::pair<uint64_t, std::vector<tuner::MeasureResult>>> WaitAny() override;

  // Wakes WaitAny with CANCELLED, now and from then on.
  void Interrupt();

 private:
  // What the dispatcher's callbacks write to: shared, so a callback that
  // runs after this measurer is gone writes nowhere harmful.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool interrupted = false;
    // ticket -> results once they arrive
    std::map<uint64_t, std::optional<std::vector<MeasureOutcome>>> pending;
  };
  Dispatcher* dispatcher_;
  AgentRegistry* agents_;
  MeasureWork job_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  uint64_t next_ = 1;
  std::map<uint64_t, size_t> sizes_;  // ticket -> candidates
};

}  // namespace kiln::tracker
