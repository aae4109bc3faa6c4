#pragma once
// The farm as a tuner::Measurer: each batch becomes a MeasureWork on the
// dispatcher's queue for the job's device key, and its agents' results come
// back through WaitAny. Two batches outstanding per connected agent of the key
// (one measured, one queued: what fair sharing needs).
// Interrupt() (the job was cancelled, the tracker is stopping) makes WaitAny
// return CANCELLED and drops the job's batches from the dispatcher.
//
// Thread-safe: the dispatcher's callbacks arrive on other threads.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tracker/agent_registry.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"
#include "tuner/measurer.h"

namespace kiln::tracker {

// What WaitAny watches while it waits: whether any agent serves the key
// (on_agents(true) once none is connected, on_agents(false) when one is
// again) and the job's deadline (WaitAny then returns DEADLINE_EXCEEDED).
struct FarmWaiting {
  const Clock* clock = nullptr;  // for the deadline; null: none
  int64_t deadline_unix_ms = 0;  // 0: none
  std::function<void(bool none)> on_agents;
  std::chrono::milliseconds poll{200};
};
class FarmMeasurer : public tuner::Measurer {
 public:
  // `work` carries the job's fields (job id, device key, target, timing);
  // each batch fills in the rest.
  FarmMeasurer(Dispatcher* dispatcher, AgentRegistry* agents, MeasureWork work,
               FarmWaiting waiting = {});
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
  FarmWaiting waiting_;
  bool no_agents_ = false;  // on_agents(true) was the last call
  std::shared_ptr<State> state_ = std::make_shared<State>();
  uint64_t next_ = 1;
  std::map<uint64_t, size_t> sizes_;  // ticket -> candidates
};

}  // namespace kiln::tracker
