#include "tracker/farm_measurer.h"

#include <algorithm>

#include "base/check.h"
#include "base/str.h"
#include "compiler/config.h"

namespace kiln::tracker {

FarmMeasurer::FarmMeasurer(Dispatcher* dispatcher, AgentRegistry* agents, MeasureWork work,
                           FarmWaiting waiting)
    : dispatcher_(dispatcher),
      agents_(agents),
      job_(std::move(work)),
      waiting_(std::move(waiting)) {
  KILN_CHECK(dispatcher_ && agents_) << "FarmMeasurer dependencies";
}

FarmMeasurer::~FarmMeasurer() { Interrupt(); }

// A batch in flight and one queued per agent of the key: the dispatcher gives
// each job its fair share at every lease only if the job has a batch queued
// then (one with nothing queued is passed over). An agent on the tracker's
// own machine gets one at a time while no other job shares its key: the next
// batch is proposed (XGBoost trained, a search run) while the agent times
// the last one, and on shared cores that slowed its parallel candidates 1.3x
// in the median and up to 4x (MobileNetV2 in scripts/demo: the defaults,
// timed first, lost to any serial config, and the tuned model ran slower
// than the untuned one). With other jobs, fair shares need the queued batch
// (and their proposals run beside the timing anyway).
int FarmMeasurer::Parallelism() {
  const int agents = agents_->ConnectedCount(job_.device_key);
  int here = agents_->OnTrackerHostCount(job_.device_key);
  if (here > 0 && dispatcher_->OtherJobsHaveWork(job_.device_key, job_.job_id)) here = 0;
  return std::max(1, 2 * agents - here);
}

uint64_t FarmMeasurer::Submit(tuner::MeasureBatch batch) {
  MeasureWork work = job_;
  work.workload_key = batch.workload.Key();
  work.workload_op = NameOf(batch.workload.op);
  work.workload_canonical = batch.workload.Canonical();
  work.workload_flops = batch.workload.Flops();
  work.timing.stop_above_s = batch.stop_above_s;
  for (size_t i = 0; i < batch.configs.size(); ++i) {
    work.candidates.push_back({static_cast<int64_t>(i), std::move(batch.configs[i])});
  }
  const uint64_t ticket = next_++;
  sizes_[ticket] = work.candidates.size();
  std::shared_ptr<State> state = state_;
  // Under the state's lock: the callback cannot run before the batch is
  // registered as pending.
  std::lock_guard<std::mutex> lock(state->mu);
  state->pending[ticket] = std::nullopt;
  dispatcher_->Submit(std::move(work),
                      [state, ticket](const MeasureWork&, std::vector<MeasureOutcome> results) {
                        std::lock_guard<std::mutex> lock(state->mu);
                        auto it = state->pending.find(ticket);
                        if (it == state->pending.end()) return;
                        it->second = std::move(results);
                        state->cv.notify_all();
                      });
  return ticket;
}

absl::StatusOr<std::pair<uint64_t, std::vector<tuner::MeasureResult>>> FarmMeasurer::WaitAny() {
  uint64_t ticket = 0;
  std::vector<MeasureOutcome> outcomes;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    auto ready = [&] {
      for (const auto& [t, r] : state_->pending) {
        if (r.has_value()) return true;
      }
      return false;
    };
    if (state_->pending.empty() && !state_->interrupted) {
      return absl::FailedPreconditionError("no batch was submitted");
    }
    auto past_deadline = [&] {
      return waiting_.clock != nullptr && waiting_.deadline_unix_ms > 0 &&
             waiting_.clock->NowMs() >= waiting_.deadline_unix_ms;
    };
    while (!state_->interrupted) {
      if (past_deadline()) {
        return absl::DeadlineExceededError(
            no_agents_ ? StrCat("the job's deadline passed while no agent with key '",
                                job_.device_key, "' was connected")
                       : StrCat("the job's deadline passed with ", state_->pending.size(),
                                " batches being measured"));
      }
      if (state_->cv.wait_for(lock, waiting_.poll,
                              [&] { return state_->interrupted || ready(); })) {
        break;
      }
      // Nothing yet: is anyone serving the key?
      lock.unlock();
      const bool none = agents_->ConnectedCount(job_.device_key) == 0;
      if (none != no_agents_ && waiting_.on_agents) waiting_.on_agents(none);
      no_agents_ = none;
      lock.lock();
    }
    if (state_->interrupted) return absl::CancelledError("measuring was interrupted");
    for (auto it = state_->pending.begin(); it != state_->pending.end(); ++it) {
      if (!it->second.has_value()) continue;
      ticket = it->first;
      outcomes = std::move(*it->second);
      state_->pending.erase(it);
      break;
    }
  }
  // Results in candidate order; a candidate without one is lost.
  const size_t n = sizes_[ticket];
  sizes_.erase(ticket);
  std::vector<tuner::MeasureResult> results(n);
  for (auto& r : results) {
    r.error_kind = storage::ErrorKind::kAgentLost;
    r.error_message = "the agent sent no result for this candidate";
  }
  std::map<std::string, int64_t> per_agent;
  for (MeasureOutcome& o : outcomes) {
    if (o.candidate_index < 0 || o.candidate_index >= static_cast<int64_t>(n)) continue;
    if (!o.agent_id.empty()) per_agent[o.agent_id]++;
    results[static_cast<size_t>(o.candidate_index)] = std::move(o);  // its measurement
  }
  for (const auto& [agent, count] : per_agent) agents_->AddResults(agent, count);
  return std::make_pair(ticket, std::move(results));
}

void FarmMeasurer::Interrupt() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->interrupted) return;
    state_->interrupted = true;
    state_->pending.clear();
    state_->cv.notify_all();
  }
  dispatcher_->CancelJob(job_.job_id);
}

}  // namespace kiln::tracker
