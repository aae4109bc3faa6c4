#pragma once
// JobManager's job (tracker/job_manager.h), shared by the files that make
// up the job manager: job_manager.cc (the jobs in memory, their state,
// events and queries), job_submit.cc (submission), job_runner.cc (the job
// thread: tuning, the end-to-end checks, the final compile) and
// job_lease.cc (the multi-tracker lease: claim, hold, abandon, resume).
// Internal to them.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tracker/job_manager.h"

namespace kiln::tracker {

struct JobManager::Job {
  std::mutex mu;
  compiler::ImportOptions import;  // input shapes and external data files
  std::condition_variable cv;
  storage::JobRow row;
  int64_t persisted_unix_ms = 0;  // when row was last written
  std::vector<TaskStatus> tasks;
  std::vector<compiler::Workload> workloads;
  std::vector<int> occurrences;
  TimingOptions timing;
  tuner::SearchKind strategy = tuner::SearchKind::kXgb;
  double budget_s = 0;
  int early_stopping = 0;
  int64_t deadline_unix_ms = 0;  // 0: none
  int32_t priority = 0;
  bool skip_end_to_end = false;
  std::map<std::string, std::string> external_data;  // location -> sha256
  // Where the end-to-end curve is (end_to_end.h): the next fraction of the
  // budget at which the best configs so far run beside the defaults.
  double next_checkpoint = 0.25;
  std::optional<compiler::Model> model;
  compiler::Target target;
  // The newest events (at most JobManagerOptions::max_events_kept), the
  // first of them the job's event number first_event.
  std::deque<JobEventEntry> events;
  size_t first_event = 0;
  bool cancelled = false;
  // Another tracker holds the job now (this one's lease ran out while it
  // stalled): the job thread stops and writes nothing more.
  std::atomic<bool> abandoned{false};
  uint64_t launch_seq = 0;           // JobManager::launches_ when it was launched
  FarmMeasurer* measurer = nullptr;  // while tuning
  std::thread thread;
  std::atomic<int64_t> ended_ms{0};  // when Run returned (0: running)
};

}  // namespace kiln::tracker
