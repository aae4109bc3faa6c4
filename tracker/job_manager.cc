// JobManager: the jobs in memory, their state, events and queries, and
// the job threads' launch (see job_manager_job.h for the other files).
#include "tracker/job_manager.h"

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
#include "tracker/job_manager_job.h"
#include "tracker/job_options.h"
#include "tracker/log.h"
#include "tuner/history.h"
#include "tuner/search.h"

namespace kiln::tracker {

JobManager::JobManager(storage::TuningDb* tuning, storage::FarmStore* farm,
                       storage::ArtifactStore* store, AgentRegistry* agents, Dispatcher* dispatcher,
                       const Clock* clock, JobManagerOptions options)
    : tuning_(tuning),
      farm_(farm),
      store_(store),
      agents_(agents),
      dispatcher_(dispatcher),
      clock_(clock),
      options_(std::move(options)) {
  KILN_CHECK(tuning_ && farm_ && store_ && agents_ && dispatcher_ && clock_)
      << "JobManager dependencies";
}

JobManager::~JobManager() { Stop(); }

void JobManager::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  leases_cv_.notify_all();
  if (leases_thread_.joinable()) leases_thread_.join();
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  for (auto& job : jobs) {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->measurer) job->measurer->Interrupt();
    job->cv.notify_all();
  }
  dispatcher_->Wake();
  for (auto& job : jobs) {
    if (job->thread.joinable()) job->thread.join();
  }
}

JobStatus JobManager::SnapshotLocked(const Job& job) {
  JobStatus s;
  s.row = job.row;
  s.tasks = job.tasks;
  s.budget_s = job.budget_s;
  return s;
}

void JobManager::EventLocked(Job& job, const std::string& message, bool progress_only) {
  if (job.abandoned) return;  // the row is another tracker's now
  job.row.updated_unix_ms = clock_->NowMs();
  // A progress event changes counters the records restore after a crash:
  // its row is written at most every kPersistProgressEveryMs.
  if (!progress_only ||
      job.row.updated_unix_ms - job.persisted_unix_ms >= kPersistProgressEveryMs) {
    job.persisted_unix_ms = job.row.updated_unix_ms;
    absl::Status st = farm_->UpdateJob(job.row);
    if (!st.ok()) Log()->warn("job {}: cannot update: {}", job.row.id, std::string(st.message()));
  }
  JobEventEntry e;
  e.unix_ms = job.row.updated_unix_ms;
  e.message = message;
  e.job = SnapshotLocked(job);
  job.events.push_back(std::move(e));
  while (job.events.size() > options_.max_events_kept) {
    job.events.pop_front();
    ++job.first_event;
  }
  job.cv.notify_all();
}

void JobManager::SetState(Job& job, storage::JobState state, const std::string& message,
                          const std::string& error) {
  std::lock_guard<std::mutex> lock(job.mu);
  // A cancelled job stays cancelled.
  if (job.row.state == storage::JobState::kCancelled) return;
  job.row.state = state;
  if (!error.empty()) job.row.error = error;
  EventLocked(job, message);
  Log()->info("job {}: {}", job.row.id, message);
}

std::shared_ptr<JobManager::Job> JobManager::Find(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  // A job given up to another tracker answers from its row, like one that
  // never ran here.
  if (it == jobs_.end() || it->second->abandoned.load()) return nullptr;
  return it->second;
}

int JobManager::RunningJobsOf(const std::string& owner) {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, job] : jobs_) jobs.push_back(job);
  }
  int n = 0;
  for (const auto& job : jobs) {
    std::lock_guard<std::mutex> lock(job->mu);
    n +=
        job->row.owner == owner && (!storage::IsFinal(job->row.state) || job->ended_ms.load() == 0);
  }
  return n;
}

void JobManager::Launch(std::shared_ptr<Job> job) {
  std::vector<std::shared_ptr<Job>> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Jobs that ended a while ago leave memory (their rows and records stay
    // in the database, where Get, List and WaitEvents find them).
    const int64_t now = clock_->NowMs();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      const int64_t ended = it->second->ended_ms.load();
      if (ended > 0 && now - ended >= options_.keep_finished_ms) {
        evicted.push_back(std::move(it->second));
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
    // The same job again (given up to another tracker once, claimed back
    // now): its old entry leaves, its thread joined below.
    if (auto old = jobs_.find(job->row.id); old != jobs_.end()) {
      evicted.push_back(std::move(old->second));
    }
    job->launch_seq = ++launches_;
    jobs_[job->row.id] = job;
  }
  for (auto& old : evicted) {
    if (old->thread.joinable()) old->thread.join();  // it has returned (or is returning)
  }
  job->thread = std::thread([this, job] {
    // Below the agents' sessions: a result's turnaround (read it, lease the
    // next batch, write it) must not wait for a tuner's proposals on a busy
    // machine. Linux takes a thread's niceness per thread (and raising it
    // needs no privilege).
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kJobThreadNice) != 0) {
      Log()->debug("job {}: cannot lower the job thread's priority", job->row.id);
    }
    Run(job);
  });
}

size_t JobManager::JobsInMemory() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

absl::StatusOr<std::unique_ptr<ModelUpload>> JobManager::NewUpload() {
  return ModelUpload::Begin(store_, farm_, clock_, options_.max_model_bytes);
}

absl::StatusOr<JobStatus> JobManager::Get(const std::string& job_id) {
  if (auto job = Find(job_id)) {
    std::lock_guard<std::mutex> lock(job->mu);
    return SnapshotLocked(*job);
  }
  auto row = farm_->GetJob(job_id);
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::NotFoundError(StrCat("unknown job '", job_id, "'"));
  // Not running in this process (finished before a restart): the per-task
  // table comes from the job's tasks and the records it stored.
  JobStatus s;
  s.row = **row;
  if (auto stored = OptionsFromJson(s.row.options_json, options_.default_timing); stored.ok()) {
    s.budget_s = stored->budget_s;
  }
  auto tasks = tuner::StoredTaskProgress(
      *tuning_, job_id, s.Finished() ? storage::TaskState::kDone : storage::TaskState::kWaiting);
  if (!tasks.ok()) return tasks.status();
  s.tasks = *std::move(tasks);
  return s;
}

absl::StatusOr<JobStatus> JobManager::Cancel(const std::string& job_id) {
  auto job = Find(job_id);
  if (!job) {
    // Not running here: another tracker's (several on one database) is
    // asked through the database; otherwise there is nothing to cancel.
    auto status = Get(job_id);
    if (status.ok() && !status->Finished() && !options_.tracker_id.empty()) {
      if (absl::Status s = farm_->RequestCancel(job_id); !s.ok()) return s;
    }
    return status;
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (storage::IsFinal(job->row.state)) {
      return SnapshotLocked(*job);
    }
    job->cancelled = true;
    job->row.state = storage::JobState::kCancelled;
    if (job->measurer) job->measurer->Interrupt();
    EventLocked(*job, "cancelled");
  }
  dispatcher_->CancelJob(job_id);
  Log()->info("job {} cancelled", job_id);
  std::lock_guard<std::mutex> lock(job->mu);
  return SnapshotLocked(*job);
}

absl::StatusOr<std::vector<JobStatus>> JobManager::List() {
  auto rows = farm_->ListJobs();
  if (!rows.ok()) return rows.status();
  std::vector<JobStatus> out;
  for (const auto& row : *rows) {
    if (auto job = Find(row.id)) {
      std::lock_guard<std::mutex> lock(job->mu);
      out.push_back(SnapshotLocked(*job));
    } else {
      JobStatus s;
      s.row = row;
      out.push_back(std::move(s));
    }
  }
  return out;
}

absl::StatusOr<std::vector<JobEventEntry>> JobManager::WaitEvents(
    const std::string& job_id, size_t* next, std::chrono::milliseconds max_wait, bool* finished) {
  *finished = false;
  auto job = Find(job_id);
  if (!job) {
    // Not running in this process: one event with the stored state (and,
    // while another tracker runs it, one per wait until it ends).
    auto status = Get(job_id);
    if (!status.ok()) return status.status();
    if (!options_.tracker_id.empty() && !status->Finished() && *next > 0) {
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(max_wait, std::chrono::milliseconds(1000)));
      status = Get(job_id);
      if (!status.ok()) return status.status();
      ++*next;
      *finished = status->Finished();
      return std::vector<JobEventEntry>{
          {status->row.updated_unix_ms,
           StrCat("job ", job_id, " is ", storage::JobStateName(status->row.state)), *status}};
    }
    *finished = options_.tracker_id.empty() || status->Finished();
    if (*next > 0) return std::vector<JobEventEntry>{};
    *next = 1;
    return std::vector<JobEventEntry>{
        {status->row.updated_unix_ms,
         StrCat("job ", job_id, " is ", storage::JobStateName(status->row.state)), *status}};
  }
  std::unique_lock<std::mutex> lock(job->mu);
  auto total = [&] { return job->first_event + job->events.size(); };
  job->cv.wait_for(lock, max_wait, [&] { return total() > *next || stopping_.load(); });
  std::vector<JobEventEntry> out;
  for (size_t i = std::max(*next, job->first_event); i < total(); ++i) {
    out.push_back(job->events[i - job->first_event]);
  }
  *next = std::max(*next, total());
  *finished = storage::IsFinal(job->row.state);
  return out;
}

}  // namespace kiln::tracker
