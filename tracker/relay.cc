#include "tracker/relay.h"

#include <algorithm>

#include "base/str.h"
#include "google/protobuf/util/json_util.h"
#include "kiln/v1/relay.pb.h"
#include "tracker/measure_proto.h"
#include "tracker/rpc.h"

namespace kiln::tracker {

namespace pb = kiln::v1;
using rpc::Log;

std::string WorkToJson(const MeasureWork& work) {
  pb::RelayedBatch r;
  r.set_job_id(work.job_id);
  r.set_device_key(work.device_key);
  r.set_user(work.user);
  r.set_priority(work.priority);
  FillMeasureBatch(work, r.mutable_batch());
  r.mutable_batch()->clear_batch_id();  // the claiming tracker's dispatcher names it
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(r, &out);  // fails only on invalid UTF-8
  return out;
}

absl::StatusOr<MeasureWork> WorkFromJson(const std::string& text) {
  pb::RelayedBatch r;
  if (auto st = google::protobuf::util::JsonStringToMessage(text, &r); !st.ok()) {
    return absl::DataLossError(StrCat("relayed batch: ", std::string(st.message())));
  }
  auto w = WorkFromMeasureBatch(r.batch());
  if (!w.ok()) return absl::DataLossError(StrCat("relayed batch: ", w.status().message()));
  w->job_id = r.job_id();
  w->device_key = r.device_key();
  w->user = r.user();
  w->priority = r.priority();
  return w;
}

std::string OutcomesToJson(const std::vector<MeasureOutcome>& outcomes) {
  pb::RelayedResults r;
  for (const MeasureOutcome& o : outcomes) {
    pb::RelayedResult* one = r.add_results();
    FillMeasureResult(o, one->mutable_result());
    one->set_agent_owner(o.owner);
  }
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(r, &out);
  return out;
}

absl::StatusOr<std::vector<MeasureOutcome>> OutcomesFromJson(const std::string& text,
                                                             double max_cost_s) {
  pb::RelayedResults r;
  if (auto st = google::protobuf::util::JsonStringToMessage(text, &r); !st.ok()) {
    return absl::DataLossError(StrCat("relayed results: ", std::string(st.message())));
  }
  // Results enter this tracker here: checked as an agent's are.
  std::vector<MeasureOutcome> out;
  for (const pb::RelayedResult& one : r.results()) {
    out.push_back(
        OutcomeFromProto(one.result(), one.result().agent_id(), one.agent_owner(), max_cost_s));
  }
  return out;
}

Relay::Relay(storage::FarmStore* db, Dispatcher* dispatcher, AgentRegistry* agents,
             const Clock* clock, RelayOptions options)
    : db_(db), dispatcher_(dispatcher), agents_(agents), clock_(clock), options_(options) {}

Relay::~Relay() { Stop(); }

void Relay::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Relay::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Relay::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Step();
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [&] { return stopping_; });
  }
}

void Relay::Step() {
  CollectResults();
  // The local queues and idle agents once per round (memory only).
  const Queues q{dispatcher_->QueuedByKey(), dispatcher_->WaitingByKey()};
  TakeBack(q);
  Publish(q);
  Claim(q);
  const int64_t now = clock_->NowMs();
  if (now - last_housekeeping_ms_ >= 1000) {
    last_housekeeping_ms_ = now;
    if (auto n = db_->RequeueExpiredBatches(now); n.ok() && *n > 0) {
      Log()->warn(
          "relay: {} relayed batches whose tracker stopped answering went back to the queue", *n);
    }
    CountRemoteAgents();
    RenewClaims(now);
  }
}

void Relay::RenewClaims(int64_t now) {
  std::map<std::string, int64_t> claimed;
  {
    std::lock_guard<std::mutex> lock(claims_->mu);
    claimed = claims_->leases;
  }
  for (const auto& [id, lease_ms] : claimed) {
    (void)db_->SetBatchLease(id, options_.tracker_id, now + lease_ms);
  }
}

void Relay::CollectResults() {
  if (published_.empty()) return;
  auto done = db_->TakeFinishedBatches(options_.tracker_id);
  if (!done.ok()) {
    WarnNowAndThen(StrCat("relay: reading results: ", done.status().ToString()));
    return;
  }
  for (const storage::BatchRow& row : *done) {
    auto it = published_.find(row.id);
    if (it == published_.end()) continue;  // published before a restart of this tracker
    auto outcomes = OutcomesFromJson(row.results, it->second.cost_limit_s);
    if (!outcomes.ok()) {
      Log()->warn("relay: batch {}: {}", row.id, outcomes.status().ToString());
      dispatcher_->ReleaseAgent(it->second.holder);  // measured again here
    } else if (!dispatcher_->Complete(it->second.local_batch, it->second.holder,
                                      *std::move(outcomes))) {
      Log()->info("relay: results of batch {} (tracker {}) came after its lease ended", row.id,
                  row.holder);
    }
    published_.erase(it);
  }
}

void Relay::TakeBack(const Queues& q) {
  for (auto it = published_.begin(); it != published_.end();) {
    if (dispatcher_->InFlight(it->second.holder) == 0) {
      // Its job ended here (cancelled, failed, given up): nobody wants it.
      (void)db_->WithdrawBatch(it->first);
      it = published_.erase(it);
      continue;
    }
    if (q.Waiting(it->second.device_key) == 0) {
      ++it;
      continue;
    }
    auto withdrawn = db_->WithdrawBatch(it->first);
    if (withdrawn.ok() && *withdrawn) {
      dispatcher_->ReleaseAgent(it->second.holder);  // back at the front of the queue here
      it = published_.erase(it);
    } else {
      ++it;
    }
  }
}

void Relay::WarnNowAndThen(const std::string& message) {
  const int64_t now = clock_->NowMs();
  if (now - last_warning_ms_ < kWarnEveryMs) return;
  last_warning_ms_ = now;
  Log()->warn("{} (the relay logs this at most every {} s)", message, kWarnEveryMs / 1000);
}

void Relay::Publish(const Queues& q) {
  std::map<std::string, size_t> unclaimed;
  for (const auto& [id, p] : published_) ++unclaimed[p.device_key];
  for (const auto& [key, queued] : q.queued) {
    if (queued == 0 || q.Waiting(key) > 0) continue;
    if (agents_->RemoteCount(key) == 0) continue;  // no other tracker's agent would take it
    if (unclaimed[key] >= kMaxPublishedPerKey) continue;
    const std::string holder = HolderOf(StrCat("relay:", options_.tracker_id), ++next_holder_);
    std::optional<Lease> lease = dispatcher_->TryLease(holder, key, "", 0, /*whole_models=*/false);
    if (!lease.has_value()) continue;
    // Held here until its results come back, it is taken back, or its job
    // ends: a remote agent may take longer than a lease here lasts, and an
    // expiry here would measure the batch twice.
    dispatcher_->KeepLease(lease->work.batch_id, holder);
    storage::BatchRow row;
    row.id = StrCat(options_.tracker_id, "/", lease->work.batch_id);
    row.job_id = lease->work.job_id;
    row.device_key = key;
    row.owner = options_.tracker_id;
    row.work = WorkToJson(lease->work);
    row.created_unix_ms = clock_->NowMs();
    if (absl::Status s = db_->PublishBatch(row); !s.ok()) {
      WarnNowAndThen(StrCat("relay: publishing batch ", row.id, ": ", s.ToString()));
      dispatcher_->ReleaseAgent(holder);
      continue;
    }
    published_[row.id] = {holder, lease->work.batch_id, key, CostLimitOf(lease->work)};
  }
}

void Relay::Claim(const Queues& q) {
  // Only keys with an idle agent here and nothing of this tracker's own to
  // give it: the table is not read otherwise.
  auto idle = [&](const std::string& key) { return q.Waiting(key) > 0 && q.Queued(key) == 0; };
  if (std::none_of(q.waiting.begin(), q.waiting.end(),
                   [&](const auto& kv) { return idle(kv.first); })) {
    return;
  }
  auto queued = db_->QueuedBatchesByKey(options_.tracker_id);
  if (!queued.ok()) {
    WarnNowAndThen(StrCat("relay: reading the batch table: ", queued.status().ToString()));
    return;
  }
  for (const auto& [key, n] : *queued) {
    if (n == 0 || !idle(key)) continue;
    // Claimed for a while, then for as long as a lease of its work lasts
    // here; past it the batch goes back to the table's queue.
    auto row = db_->ClaimBatch(key, options_.tracker_id, clock_->NowMs() + kClaimMs);
    if (!row.ok() || !row->has_value()) continue;
    auto work = WorkFromJson((*row)->work);
    if (!work.ok()) {
      Log()->warn("relay: batch {}: {}", (*row)->id, work.status().ToString());
      continue;
    }
    // Renewed every second while it is measured here (RenewClaims).
    const int64_t lease_ms = dispatcher_->LeaseTimeoutMs(*work);
    (void)db_->SetBatchLease((*row)->id, options_.tracker_id, clock_->NowMs() + lease_ms);
    {
      std::lock_guard<std::mutex> lock(claims_->mu);
      claims_->leases[(*row)->id] = lease_ms;
    }
    const std::string id = (*row)->id;
    const std::string me = options_.tracker_id;
    storage::FarmStore* db = db_;
    dispatcher_->Submit(
        *std::move(work),
        [claims = claims_, db, id, me](const MeasureWork&, std::vector<MeasureOutcome> outcomes) {
          {
            std::lock_guard<std::mutex> lock(claims->mu);
            claims->leases.erase(id);
          }
          auto ok = db->FinishBatch(id, me, OutcomesToJson(outcomes));
          if (!ok.ok() || !*ok) {
            Log()->info(
                "relay: results of batch {} were not taken (its lease "
                "ended)",
                id);
          }
        });
  }
}

void Relay::CountRemoteAgents() {
  auto rows = db_->ListAgents();
  if (!rows.ok()) return;
  std::map<std::string, int> local;
  for (const AgentInfo& a : agents_->List()) local[a.device_key] += a.connected;
  const int64_t since = clock_->NowMs() - options_.agent_seen_ms;
  std::map<std::string, AgentRegistry::Remote> remote;
  for (const storage::AgentRow& r : *rows) {
    if (r.last_seen_unix_ms < since) continue;
    AgentRegistry::Remote& k = remote[r.device_key];
    ++k.count;
    if (k.target.empty()) k.target = r.target;
  }
  for (auto& [key, r] : remote) r.count = std::max(0, r.count - local[key]);
  agents_->SetRemote(std::move(remote));
}

}  // namespace kiln::tracker
