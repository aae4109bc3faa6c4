#include "tracker/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "base/check.h"
#include "base/str.h"
#include "tracker/metrics.h"

namespace kiln::tracker {
namespace {

std::string RandomPrefix() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 6; ++i) s += kHex[rd() % 16];
  return s;
}

// Weight of a lease's pace in the agent's moving average.
constexpr double kPaceWeight = 0.3;

}  // namespace

Dispatcher::Dispatcher(const Clock* clock, DispatcherOptions options)
    : clock_(clock), options_(options) {
  KILN_CHECK(clock_ != nullptr) << "Dispatcher needs a clock";
}

int64_t Dispatcher::LeaseTimeoutMs(const MeasureWork& work) const {
  if (options_.lease_timeout_ms > 0) return options_.lease_timeout_ms;
  int64_t per =
      work.timing.timeout_ms > 0 ? work.timing.timeout_ms : options_.default_candidate_timeout_ms;
  int64_t n = std::max<int64_t>(1, static_cast<int64_t>(work.candidates.size()));
  return n * per + options_.slack_ms;
}

std::string Dispatcher::NewBatchIdLocked() {
  static const std::string prefix = RandomPrefix();
  return StrCat("batch-", prefix, "-", next_id_++);
}

std::string Dispatcher::Submit(MeasureWork work, BatchCallback callback) {
  std::string id;
  Finished finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = NewBatchIdLocked();
    work.batch_id = id;
    std::string key = work.device_key;
    Entry entry;
    entry.seq = next_id_;
    entry.work = std::move(work);
    entry.callback = std::move(callback);
    batches_.emplace(id, std::move(entry));
    const MeasureWork& w = batches_.at(id).work;
    JobQueue& q = queues_[key][w.job_id];
    q.user = w.user;
    q.priority = w.priority;
    q.target = w.target;
    q.batches.push_back(id);
    ServeRequestsLocked(key, &finished);
  }
  RunCallbacks(std::move(finished));
  return id;
}

void Dispatcher::ServeRequestsLocked(const std::string& device_key, Finished* finished) {
  auto it = requests_.find(device_key);
  if (it == requests_.end()) return;
  auto queued = [&] {
    auto q = queues_.find(device_key);
    if (q == queues_.end()) return false;
    for (const auto& [job, jq] : q->second) {
      if (!jq.batches.empty()) return true;
    }
    return false;
  };
  std::list<Request>& list = it->second;
  for (auto r = list.begin(); r != list.end() && queued();) {
    auto lease = LeaseLocked(r->holder, device_key, r->target, r->max_candidates);
    if (!lease.has_value()) {  // nothing for its target
      ++r;
      continue;
    }
    finished->leases.emplace_back(std::move(r->callback), std::move(lease));
    request_keys_.erase(r->id);
    r = list.erase(r);
  }
}

uint64_t Dispatcher::RequestLease(const std::string& agent_id, const std::string& device_key,
                                  const std::string& target, int max_candidates,
                                  LeaseCallback callback) {
  ExpireLeasesNowAndThen();
  Finished finished;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto lease = LeaseLocked(agent_id, device_key, target, max_candidates)) {
      finished.leases.emplace_back(std::move(callback), std::move(lease));
      ServeRequestsLocked(device_key, &finished);  // a split may have queued a part
    } else {
      id = next_request_++;
      requests_[device_key].push_back(
          Request{id, agent_id, target, max_candidates, std::move(callback)});
      request_keys_[id] = device_key;
    }
  }
  RunCallbacks(std::move(finished));
  return id;
}

bool Dispatcher::CancelRequest(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = request_keys_.find(request_id);
  if (key == request_keys_.end()) return false;
  std::list<Request>& list = requests_[key->second];
  list.remove_if([&](const Request& r) { return r.id == request_id; });
  request_keys_.erase(key);
  return true;
}

Dispatcher::JobQueue* Dispatcher::LeasableLocked(const std::string& device_key,
                                                 const std::string& target,
                                                 const std::string* only_user, bool whole_models) {
  auto key = queues_.find(device_key);
  if (key == queues_.end()) return nullptr;
  auto& users = user_pass_[device_key];
  // Users and jobs with queued batches start level with the least served of
  // them: no credit for having been away, no debt.
  double user_floor = std::numeric_limits<double>::infinity();
  double job_floor = std::numeric_limits<double>::infinity();
  for (const auto& [job, q] : key->second) {
    if (auto u = users.find(q.user); u != users.end()) user_floor = std::min(user_floor, u->second);
    if (auto j = job_pass_.find(job); j != job_pass_.end())
      job_floor = std::min(job_floor, j->second);
  }
  if (!std::isfinite(user_floor)) user_floor = 0;
  if (!std::isfinite(job_floor)) job_floor = 0;
  JobQueue* best = nullptr;
  std::tuple<int32_t, double, double, uint64_t> best_rank;
  for (auto& [job, q] : key->second) {
    if (q.batches.empty()) continue;
    if (!(target.empty() || q.target.empty() || q.target == target)) continue;
    if (only_user != nullptr && q.user != *only_user) continue;
    if (!whole_models && batches_.at(q.batches.front()).work.model.has_value()) continue;
    double& user = users.try_emplace(q.user, user_floor).first->second;
    double& pass = job_pass_.try_emplace(job, job_floor).first->second;
    user = std::max(user, user_floor);
    pass = std::max(pass, job_floor);
    auto rank = std::make_tuple(-q.priority, user, pass, batches_.at(q.batches.front()).seq);
    if (best == nullptr || rank < best_rank) {
      best = &q;
      best_rank = rank;
    }
  }
  return best;
}

std::optional<Lease> Dispatcher::LeaseLocked(const std::string& agent_id,
                                             const std::string& device_key,
                                             const std::string& target, int max_candidates,
                                             bool whole_models) {
  auto only = serves_only_.find(agent_id);
  JobQueue* next = LeasableLocked(
      device_key, target, only == serves_only_.end() ? nullptr : &only->second, whole_models);
  if (next == nullptr) return std::nullopt;
  std::string id = next->batches.front();
  next->batches.pop_front();
  auto it = batches_.find(id);
  KILN_CHECK(it != batches_.end()) << "queued batch " << id << " has no entry";
  int limit = PacedCandidatesLocked(AgentOfHolder(agent_id));
  if (max_candidates > 0 && (limit == 0 || max_candidates < limit)) limit = max_candidates;
  // A whole model's variants are timed together, interleaved: never split.
  if (limit > 0 && !it->second.work.model.has_value() &&
      it->second.work.candidates.size() > static_cast<size_t>(limit)) {
    SplitLocked(id, static_cast<size_t>(limit));
  }
  Entry& e = it->second;
  // Charge the user (over their weight) and the job for what they get.
  const double n = static_cast<double>(std::max<size_t>(e.work.candidates.size(), 1));
  auto weight = options_.user_weights.find(e.work.user);
  user_pass_[device_key][e.work.user] +=
      n / (weight != options_.user_weights.end() && weight->second > 0 ? weight->second : 1.0);
  job_pass_[e.work.job_id] += n;
  e.agent_id = agent_id;
  ++in_flight_[agent_id];
  e.attempts++;
  e.leased_ms = clock_->NowMs();
  e.deadline_ms = e.leased_ms + LeaseTimeoutMs(e.work);
  e.deadline_it = deadlines_.emplace(e.deadline_ms, id);
  return Lease{e.work, e.deadline_ms};
}

void Dispatcher::SplitLocked(const std::string& batch_id, size_t keep) {
  Entry& e = batches_.at(batch_id);
  if (!e.split) {
    e.split = std::make_shared<Split>();
    e.split->work = e.work;
    e.split->callback = std::move(e.callback);
    e.split->parts_left = 1;
    e.callback = nullptr;
  }
  Entry rest;
  rest.work = e.work;
  rest.work.batch_id = NewBatchIdLocked();
  rest.work.candidates.assign(std::make_move_iterator(e.work.candidates.begin() + keep),
                              std::make_move_iterator(e.work.candidates.end()));
  e.work.candidates.resize(keep);
  rest.split = e.split;
  {
    std::lock_guard<std::mutex> lock(e.split->mu);
    e.split->parts_left++;
  }
  rest.seq = e.seq;
  rest.attempts = e.attempts;
  const std::string id = rest.work.batch_id;
  const MeasureWork& w = batches_.emplace(id, std::move(rest)).first->second.work;
  JobQueue& q = queues_[w.device_key][w.job_id];
  q.user = w.user;
  q.priority = w.priority;
  q.target = w.target;
  q.batches.push_front(id);
}

void Dispatcher::Finish(Entry& entry, std::vector<MeasureOutcome> results) {
  if (!entry.split) {
    if (entry.callback) entry.callback(entry.work, std::move(results));
    return;
  }
  Split& split = *entry.split;
  std::vector<MeasureOutcome> all;
  {
    std::lock_guard<std::mutex> lock(split.mu);
    for (auto& r : results) split.results.push_back(std::move(r));
    if (--split.parts_left > 0) return;
    all = std::move(split.results);
  }
  if (split.callback) split.callback(split.work, std::move(all));
}

int Dispatcher::PacedCandidates(const std::string& agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return PacedCandidatesLocked(agent_id);
}

int Dispatcher::PacedCandidatesLocked(const std::string& agent_id) const {
  auto it = pace_s_.find(agent_id);
  if (it == pace_s_.end() || it->second <= 0 || options_.target_lease_s <= 0) return 0;
  const double n = std::floor(options_.target_lease_s / it->second);
  return static_cast<int>(std::clamp(n, 1.0, 1e6));
}

std::optional<Lease> Dispatcher::TryLease(const std::string& agent_id,
                                          const std::string& device_key, const std::string& target,
                                          int max_candidates, bool whole_models) {
  ExpireLeasesNowAndThen();
  Finished finished;
  std::optional<Lease> lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lease = LeaseLocked(agent_id, device_key, target, max_candidates, whole_models);
    ServeRequestsLocked(device_key, &finished);  // a split may have queued a part
  }
  RunCallbacks(std::move(finished));
  return lease;
}

std::optional<Lease> Dispatcher::WaitLease(const std::string& agent_id,
                                           const std::string& device_key, int max_in_flight,
                                           std::chrono::milliseconds max_wait,
                                           const std::string& target, int max_candidates) {
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = wake_generation_;
    while (InFlightLocked(agent_id) >= max_in_flight) {
      if (released_cv_.wait_until(lock, deadline) == std::cv_status::timeout ||
          wake_generation_ != generation) {
        return std::nullopt;
      }
    }
  }
  struct Slot {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::optional<Lease> lease;
  };
  auto slot = std::make_shared<Slot>();
  const uint64_t id = RequestLease(agent_id, device_key, target, max_candidates,
                                   [slot](std::optional<Lease> lease) {
                                     std::lock_guard<std::mutex> lock(slot->mu);
                                     slot->lease = std::move(lease);
                                     slot->done = true;
                                     slot->cv.notify_all();
                                   });
  std::unique_lock<std::mutex> lock(slot->mu);
  if (!slot->cv.wait_until(lock, deadline, [&] { return slot->done; })) {
    lock.unlock();
    if (CancelRequest(id)) return std::nullopt;
    lock.lock();  // served meanwhile: its callback is running
    slot->cv.wait(lock, [&] { return slot->done; });
  }
  return std::move(slot->lease);
}

bool Dispatcher::Complete(const std::string& batch_id, const std::string& agent_id,
                          std::vector<MeasureOutcome> results) {
  Entry entry;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = batches_.find(batch_id);
    if (it == batches_.end() || it->second.agent_id.empty() || it->second.agent_id != agent_id) {
      return false;
    }
    EndLeaseLocked(it->second);
    entry = std::move(it->second);
    batches_.erase(it);
    // The agent's pace, from this lease (a whole model's variants are not
    // the candidates it paces).
    if (!entry.work.model.has_value()) {
      const double n = static_cast<double>(std::max<size_t>(entry.work.candidates.size(), 1));
      const double pace = static_cast<double>(clock_->NowMs() - entry.leased_ms) / 1000.0 / n;
      auto [p, fresh] = pace_s_.try_emplace(AgentOfHolder(agent_id), pace);
      if (!fresh) p->second = (1 - kPaceWeight) * p->second + kPaceWeight * pace;
    }
  }
  for (auto& r : results) {
    if (r.agent_id.empty()) r.agent_id = agent_id;
  }
  if (options_.metrics != nullptr) {
    const int64_t now = clock_->NowMs();
    options_.metrics->CountResults(entry.work.device_key, results,
                                   static_cast<double>(now - entry.leased_ms) / 1000.0, now);
  }
  Finish(entry, std::move(results));
  return true;
}

void Dispatcher::ExpireLocked(const std::string& batch_id, Finished* finished) {
  auto it = batches_.find(batch_id);
  if (it == batches_.end()) return;
  Entry& e = it->second;
  std::string lost_agent = e.agent_id;
  if (options_.metrics != nullptr && !lost_agent.empty()) {
    options_.metrics->CountLeaseExpiry(e.work.device_key);
  }
  EndLeaseLocked(e);
  e.agent_id.clear();
  e.deadline_ms = 0;
  if (e.attempts >= options_.max_attempts) {
    std::vector<MeasureOutcome> outcomes;
    for (const auto& c : e.work.candidates) {
      MeasureOutcome o;
      o.candidate_index = c.candidate_index;
      o.error_kind = storage::ErrorKind::kAgentLost;
      const std::string agent = AgentOfHolder(lost_agent);
      o.error_message = StrCat("lease lost ", e.attempts, " times (last agent '", agent, "')");
      o.agent_id = agent;
      outcomes.push_back(std::move(o));
    }
    if (options_.metrics != nullptr) {
      options_.metrics->CountResults(e.work.device_key, outcomes, -1, clock_->NowMs());
    }
    finished->batches.emplace_back(std::move(e), std::move(outcomes));
    batches_.erase(it);
    return;
  }
  queues_[e.work.device_key][e.work.job_id].batches.push_front(batch_id);
}

void Dispatcher::ExpireAllLocked(std::vector<std::string> ids, Finished* finished) {
  // Push to the front newest first, so the oldest batch ends up in front.
  std::sort(ids.begin(), ids.end(), [&](const std::string& a, const std::string& b) {
    return batches_.at(a).seq > batches_.at(b).seq;
  });
  std::set<std::string> keys;
  for (const auto& id : ids) {
    keys.insert(batches_.at(id).work.device_key);
    ExpireLocked(id, finished);
  }
  for (const auto& key : keys) ServeRequestsLocked(key, finished);
}

void Dispatcher::RunCallbacks(Finished finished) {
  for (auto& [entry, outcomes] : finished.batches) Finish(entry, std::move(outcomes));
  for (auto& [callback, lease] : finished.leases) callback(std::move(lease));
}

void Dispatcher::ExpireLeasesNowAndThen() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMs();
    if (expired_at_ms_ >= 0 && now - expired_at_ms_ < kExpireEveryMs) return;
    expired_at_ms_ = now;
  }
  ExpireLeases();
}

int Dispatcher::ExpireLeases() {
  Finished finished;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t now = clock_->NowMs();
    std::vector<std::string> overdue;
    for (auto d = deadlines_.begin(); d != deadlines_.end() && d->first <= now; ++d) {
      overdue.push_back(d->second);
    }
    n = static_cast<int>(overdue.size());
    ExpireAllLocked(std::move(overdue), &finished);
  }
  RunCallbacks(std::move(finished));
  return n;
}

void Dispatcher::ServeOnly(const std::string& agent_id, std::optional<std::string> user) {
  std::lock_guard<std::mutex> lock(mu_);
  if (user.has_value()) {
    serves_only_[agent_id] = *std::move(user);
  } else {
    serves_only_.erase(agent_id);
  }
}

int Dispatcher::ReleaseAgent(const std::string& agent_id) {
  Finished finished;
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> held;
    for (const auto& [id, e] : batches_) {
      if (e.agent_id == agent_id) held.push_back(id);
    }
    n = static_cast<int>(held.size());
    ExpireAllLocked(std::move(held), &finished);
    cancelled_.erase(agent_id);
  }
  RunCallbacks(std::move(finished));
  return n;
}

std::vector<std::string> Dispatcher::TakeCancelled(const std::string& agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cancelled_.find(agent_id);
  if (it == cancelled_.end()) return {};
  std::vector<std::string> out = std::move(it->second);
  cancelled_.erase(it);
  return out;
}

std::vector<std::string> Dispatcher::CancelJob(const std::string& job_id) {
  std::vector<std::string> leased;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = batches_.begin(); it != batches_.end();) {
      if (it->second.work.job_id != job_id) {
        ++it;
        continue;
      }
      if (!it->second.agent_id.empty()) {
        leased.push_back(it->first);
        cancelled_[it->second.agent_id].push_back(it->first);
        EndLeaseLocked(it->second);
      }
      queues_[it->second.work.device_key].erase(job_id);
      it = batches_.erase(it);
    }
    job_pass_.erase(job_id);
  }
  return leased;
}

int Dispatcher::InFlight(const std::string& agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return InFlightLocked(agent_id);
}

int Dispatcher::InFlightLocked(const std::string& agent_id) const {
  auto it = in_flight_.find(agent_id);
  return it == in_flight_.end() ? 0 : it->second;
}

void Dispatcher::EndLeaseLocked(Entry& e) {
  deadlines_.erase(e.deadline_it);
  auto it = in_flight_.find(e.agent_id);
  if (it != in_flight_.end() && --it->second <= 0) in_flight_.erase(it);
  released_cv_.notify_all();  // a WaitLease of this holder may go on
}

size_t Dispatcher::QueuedCount(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto q = queues_.find(device_key);
  return q == queues_.end() ? 0 : QueuedLocked(q->second);
}

bool Dispatcher::OtherJobsHaveWork(const std::string& device_key, const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto q = queues_.find(device_key); q != queues_.end()) {
    for (const auto& [job, queue] : q->second) {
      if (job != job_id && !queue.batches.empty()) return true;
    }
  }
  for (const auto& [id, e] : batches_) {
    if (!e.agent_id.empty() && e.work.device_key == device_key && e.work.job_id != job_id) {
      return true;
    }
  }
  return false;
}

std::map<std::string, size_t> Dispatcher::QueuedByKey() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, size_t> out;
  for (const auto& [key, jobs] : queues_) out[key] = QueuedLocked(jobs);
  return out;
}

bool Dispatcher::KeepLease(const std::string& batch_id, const std::string& holder) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = batches_.find(batch_id);
  if (it == batches_.end() || it->second.agent_id != holder) return false;
  Entry& e = it->second;
  deadlines_.erase(e.deadline_it);
  e.deadline_ms = std::numeric_limits<int64_t>::max();
  e.deadline_it = deadlines_.emplace(e.deadline_ms, batch_id);
  return true;
}

std::map<std::string, size_t> Dispatcher::WaitingByKey() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, size_t> out;
  for (const auto& [key, requests] : requests_) {
    if (!requests.empty()) out[key] = requests.size();
  }
  return out;
}

size_t Dispatcher::QueuedLocked(const std::map<std::string, JobQueue>& jobs) {
  size_t n = 0;
  for (const auto& [job, jq] : jobs) n += jq.batches.size();
  return n;
}

void Dispatcher::Wake() {
  Finished finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_generation_++;
    for (auto& [key, list] : requests_) {
      for (Request& r : list) finished.leases.emplace_back(std::move(r.callback), std::nullopt);
    }
    requests_.clear();
    request_keys_.clear();
    released_cv_.notify_all();
  }
  RunCallbacks(std::move(finished));
}

}  // namespace kiln::tracker
