#include "tracker/agent_registry.h"

#include "base/check.h"
#include "base/str.h"
#include "spdlog/spdlog.h"

namespace kiln::tracker {

bool IsLoopbackPeer(std::string_view peer) {
  if (peer.starts_with("unix:") || peer.starts_with("unix-abstract:")) return true;
  if (peer.starts_with("ipv4:")) return peer.substr(5).starts_with("127.");
  if (peer.starts_with("ipv6:")) {
    std::string_view a = peer.substr(5);
    for (std::string_view open : {"[", "%5B", "%5b"}) {
      if (a.starts_with(open)) {
        a.remove_prefix(open.size());
        break;
      }
    }
    return a.starts_with("::1]") || a.starts_with("::1%5D") || a.starts_with("::1%5d") ||
           a.starts_with("::ffff:127.");
  }
  return false;
}

AgentRegistry::AgentRegistry(storage::FarmStore* db, const Clock* clock, HealthOptions health)
    : db_(db), clock_(clock), health_(health) {
  KILN_CHECK(clock_ != nullptr) << "AgentRegistry needs a clock";
}

absl::Status AgentRegistry::Load() {
  if (db_ == nullptr) return absl::OkStatus();
  auto rows = db_->ListAgents();
  if (!rows.ok()) return rows.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& row : *rows) {
    if (agents_.count(row.id)) continue;
    Slot slot;
    slot.info.id = row.id;
    slot.info.device_key = row.device_key;
    slot.info.target = row.target;
    slot.info.hardware = row.hardware;
    slot.info.compiler_version = row.compiler_version;
    slot.info.first_seen_unix_ms = row.first_seen_unix_ms;
    slot.info.last_seen_unix_ms = row.last_seen_unix_ms;
    slot.info.results = row.results;
    agents_.emplace(row.id, std::move(slot));
  }
  return absl::OkStatus();
}

std::optional<storage::AgentRow> AgentRegistry::RowToPersistLocked(Slot& slot) {
  if (db_ == nullptr) return std::nullopt;
  slot.persisted_unix_ms = clock_->NowMs();
  slot.persisted_results = slot.info.results;
  const AgentInfo& info = slot.info;
  storage::AgentRow row;
  row.id = info.id;
  row.device_key = info.device_key;
  row.target = info.target;
  row.hardware = info.hardware;
  row.compiler_version = info.compiler_version;
  row.first_seen_unix_ms = info.first_seen_unix_ms;
  row.last_seen_unix_ms = info.last_seen_unix_ms;
  row.results = info.results;
  return row;
}

absl::Status AgentRegistry::Persist(const std::optional<storage::AgentRow>& row) {
  if (!row.has_value()) return absl::OkStatus();
  absl::Status st = db_->UpsertAgent(*row);
  if (!st.ok()) {
    if (auto log = spdlog::get("tracker")) {
      log->warn("could not persist agent {}: {}", row->id, std::string(st.message()));
    }
  }
  return st;
}

absl::StatusOr<uint64_t> AgentRegistry::Connect(const AgentInfo& hello) {
  if (hello.id.empty()) return absl::InvalidArgumentError("agent id is empty");
  if (hello.device_key.empty()) return absl::InvalidArgumentError("device key is empty");
  std::unique_lock<std::mutex> lock(mu_);
  int64_t now = clock_->NowMs();
  Slot& slot = agents_[hello.id];
  // The hello replaces what the agent says of itself; its counters and health
  // stay (reconnecting does not end a quarantine).
  AgentInfo& info = slot.info;
  info.id = hello.id;
  info.device_key = hello.device_key;
  info.target = hello.target;
  info.hardware = hello.hardware;
  info.peak_gflops = hello.peak_gflops;
  info.compiler_version = hello.compiler_version;
  info.on_tracker_host = hello.on_tracker_host;
  info.connected = true;
  if (info.first_seen_unix_ms == 0) info.first_seen_unix_ms = now;
  info.last_seen_unix_ms = now;
  info.in_flight = 0;
  const uint64_t session = slot.session = next_session_++;
  auto row = RowToPersistLocked(slot);
  lock.unlock();
  if (absl::Status st = Persist(row); !st.ok()) return st;
  return session;
}

void AgentRegistry::Disconnect(const std::string& agent_id, uint64_t session) {
  std::optional<storage::AgentRow> row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = agents_.find(agent_id);
    if (it == agents_.end() || it->second.session != session) return;
    it->second.info.connected = false;
    it->second.info.in_flight = 0;
    it->second.info.last_seen_unix_ms = clock_->NowMs();
    row = RowToPersistLocked(it->second);
  }
  (void)Persist(row);
}

void AgentRegistry::Heartbeat(const std::string& agent_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it != agents_.end()) it->second.info.last_seen_unix_ms = clock_->NowMs();
}

int AgentRegistry::PersistStale() {
  std::vector<storage::AgentRow> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = clock_->NowMs();
    for (auto& [id, slot] : agents_) {
      const int64_t age = now - slot.persisted_unix_ms;
      if ((slot.info.results != slot.persisted_results && age >= kPersistResultsEveryMs) ||
          (slot.info.last_seen_unix_ms > slot.persisted_unix_ms &&
           age >= kPersistHeartbeatEveryMs)) {
        if (auto row = RowToPersistLocked(slot)) rows.push_back(*std::move(row));
      }
    }
  }
  for (const auto& row : rows) (void)Persist(row);
  return static_cast<int>(rows.size());
}

std::vector<std::string> AgentRegistry::Silent(int64_t max_silence_ms) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t now = clock_->NowMs();
  std::vector<std::string> out;
  for (const auto& [id, slot] : agents_) {
    if (slot.info.connected && now - slot.info.last_seen_unix_ms > max_silence_ms)
      out.push_back(id);
  }
  return out;
}

void AgentRegistry::AddResults(const std::string& agent_id, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return;
  it->second.info.results += n;
  it->second.info.last_seen_unix_ms = clock_->NowMs();
}

void AgentRegistry::SetInFlight(const std::string& agent_id, int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it != agents_.end()) it->second.info.in_flight = n;
}

bool AgentRegistry::RecordOutcomes(const std::string& agent_id, int ok, int failed,
                                   int invalid_costs) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return false;
  AgentInfo& a = it->second.info;
  if (ok > 0) {
    a.consecutive_failures = failed;
    a.consecutive_invalid_costs = invalid_costs;
  } else {
    a.consecutive_failures += failed;
    a.consecutive_invalid_costs += invalid_costs;
  }
  const int64_t now = clock_->NowMs();
  if (now < a.quarantined_until_unix_ms) return false;
  std::string why;
  if (a.consecutive_invalid_costs >= health_.max_invalid_costs) {
    why = StrCat(a.consecutive_invalid_costs, " impossible costs in a row");
  } else if (a.consecutive_failures >= health_.max_consecutive_failures) {
    why = StrCat(a.consecutive_failures, " failed measurements in a row");
  }
  if (why.empty()) return false;
  a.quarantined_until_unix_ms = now + health_.quarantine_ms;
  a.quarantine_reason = why;
  // Out of quarantine, the agent starts over.
  a.consecutive_failures = 0;
  a.consecutive_invalid_costs = 0;
  if (auto log = spdlog::get("tracker")) {
    log->warn("agent {} quarantined for {} s: {}", agent_id, health_.quarantine_ms / 1000, why);
  }
  return true;
}

bool AgentRegistry::Quarantined(const std::string& agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  return it != agents_.end() && clock_->NowMs() < it->second.info.quarantined_until_unix_ms;
}

std::vector<AgentInfo> AgentRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AgentInfo> out;
  for (const auto& [id, slot] : agents_) out.push_back(slot.info);
  return out;
}

int AgentRegistry::ConnectedCount(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [id, slot] : agents_) {
    n += slot.info.connected && slot.info.device_key == device_key;
  }
  auto remote = remote_.find(device_key);
  return n + (remote == remote_.end() ? 0 : remote->second.count);
}

int AgentRegistry::OnTrackerHostCount(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [id, slot] : agents_) {
    n += slot.info.connected && slot.info.on_tracker_host && slot.info.device_key == device_key;
  }
  return n;
}

int AgentRegistry::RemoteCount(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto remote = remote_.find(device_key);
  return remote == remote_.end() ? 0 : remote->second.count;
}

void AgentRegistry::SetRemote(std::map<std::string, Remote> remote) {
  std::lock_guard<std::mutex> lock(mu_);
  remote_ = std::move(remote);
}

std::optional<AgentInfo> AgentRegistry::Get(const std::string& agent_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = agents_.find(agent_id);
  if (it == agents_.end()) return std::nullopt;
  return it->second.info;
}

std::optional<std::string> AgentRegistry::TargetForKey(const std::string& device_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  const AgentInfo* best = nullptr;
  for (const auto& [id, slot] : agents_) {
    const AgentInfo& a = slot.info;
    if (a.device_key != device_key || a.target.empty()) continue;
    if (best == nullptr || (a.connected && !best->connected) ||
        (a.connected == best->connected && a.last_seen_unix_ms > best->last_seen_unix_ms)) {
      best = &a;
    }
  }
  if (best == nullptr || !best->connected) {
    auto remote = remote_.find(device_key);
    if (remote != remote_.end() && !remote->second.target.empty()) return remote->second.target;
  }
  if (best == nullptr) return std::nullopt;
  return best->target;
}

}  // namespace kiln::tracker
