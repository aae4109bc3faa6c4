// JobManager's multi-tracker lease: jobs claimed at start, held while they
// run, abandoned when another tracker took them, resumed from their rows.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "base/check.h"
#include "base/cpus.h"
#include "base/names.h"
#include "base/str.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "tracker/farm_measurer.h"
#include "tracker/job_manager.h"
#include "tracker/job_manager_job.h"
#include "tracker/job_options.h"
#include "tracker/log.h"
#include "tuner/history.h"
#include "tuner/search.h"

namespace kiln::tracker {

absl::Status JobManager::Start() {
  if (!options_.tracker_id.empty()) {
    if (absl::Status s = ClaimAndResume(); !s.ok()) return s;
    leases_thread_ = std::thread([this] { HoldJobs(); });
    return absl::OkStatus();
  }
  auto rows = farm_->UnfinishedJobs();
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) Resume(row);
  return absl::OkStatus();
}

absl::Status JobManager::ClaimAndResume() {
  const int64_t now = clock_->NowMs();
  auto rows = farm_->ClaimJobs(options_.tracker_id, now, now + options_.job_lease_ms);
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) {
    // Batches its last tracker relayed are that tracker's; their results
    // would reach nobody.
    if (absl::Status s = farm_->DropBatchesOfJob(row.id); !s.ok()) return s;
    Log()->info("job {}: taken over by tracker {}", row.id, options_.tracker_id);
    Resume(row);
  }
  return absl::OkStatus();
}

void JobManager::HoldJobs() {
  const auto period = std::chrono::milliseconds(std::max<int64_t>(options_.job_lease_ms / 3, 1));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    leases_cv_.wait_for(lock, period, [&] { return stopping_.load(); });
    if (stopping_) break;
    // Jobs launched after this point may be missing from the answer (their
    // rows were written after it was read): Abandon leaves them alone.
    const uint64_t launched = launches_;
    lock.unlock();
    auto held = farm_->RenewJobLeases(options_.tracker_id, clock_->NowMs() + options_.job_lease_ms);
    if (!held.ok()) {
      Log()->warn("renewing job leases: {}", held.status().ToString());
    } else {
      Abandon(*held, launched);
      for (const auto& [id, cancel] : *held) {
        if (!cancel) continue;
        auto job = Find(id);
        bool running = false;
        if (job) {
          std::lock_guard<std::mutex> job_lock(job->mu);
          running = !job->cancelled;
        }
        if (running) (void)Cancel(id);
      }
      if (absl::Status s = ClaimAndResume(); !s.ok()) {
        Log()->warn("claiming jobs: {}", s.ToString());
      }
    }
    lock.lock();
  }
}

void JobManager::Abandon(const std::vector<std::pair<std::string, bool>>& held, uint64_t launched) {
  std::set<std::string> ids;
  for (const auto& [id, cancel] : held) ids.insert(id);
  std::vector<std::shared_ptr<Job>> lost;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, job] : jobs_) {
      if (job->ended_ms.load() == 0 && job->launch_seq <= launched && !ids.count(id)) {
        lost.push_back(job);
      }
    }
  }
  std::vector<std::string> given_up;
  for (const auto& job : lost) {
    std::lock_guard<std::mutex> lock(job->mu);
    // Ended here, or its row was written final here: nothing to give up.
    if (storage::IsFinal(job->row.state) || job->abandoned) continue;
    Log()->error(
        "job {}: this tracker's lease ran out and another tracker holds it now; "
        "stopping it here",
        job->row.id);
    job->abandoned = true;
    if (job->measurer) job->measurer->Interrupt();
    job->cv.notify_all();
    given_up.push_back(job->row.id);
  }
  for (const std::string& id : given_up) dispatcher_->CancelJob(id);  // its batches too
}

void JobManager::Resume(const storage::JobRow& row) {
  auto job = std::make_shared<Job>();
  job->row = row;
  auto stored = OptionsFromJson(row.options_json, options_.default_timing);
  if (stored.ok()) {
    job->timing = stored->timing;
    job->strategy = stored->strategy;
    job->budget_s = stored->budget_s;
    job->early_stopping = stored->early_stopping;
    job->deadline_unix_ms = stored->deadline_unix_ms;
    job->priority = stored->priority;
    job->skip_end_to_end = stored->skip_end_to_end;
    job->external_data = stored->external_data;
    auto target = compiler::Target::Parse(row.target);
    job->import = ImportOptionsOf(*stored, *store_, row.model_sha256, options_.max_elements,
                                  target.ok() ? *target : compiler::Target::Host());
  } else {
    // The job fails when it cannot load its model with these options.
    Log()->warn("job {}: unreadable options: {}", row.id, stored.status().ToString());
    job->timing = options_.default_timing;
  }
  Log()->info("resuming job {} (state {})", row.id, storage::JobStateName(row.state));
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->events.push_back(
        {clock_->NowMs(), StrCat("job ", row.id, " resumed"), SnapshotLocked(*job)});
  }
  Launch(job);
}

}  // namespace kiln::tracker
