#pragma once
// The agents the tracker knows: connected ones (with their session) and those
// seen before (loaded from the log database). Every change of an agent's
// identity or counters is persisted with FarmStore::UpsertAgent.
//
// Health: an agent whose measurements keep failing (a batch with no success
// after another, HealthOptions::max_consecutive_failures failures in a row,
// or max_invalid_costs results with impossible costs in a row) is
// quarantined for quarantine_ms: it keeps its session but is leased no work,
// and `kiln devices` shows why. Quarantine lives in memory: a restarted
// tracker gives every agent a fresh start.
//
// Thread-safe.

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "storage/farm_store.h"
#include "tracker/clock.h"

namespace kiln::tracker {

struct AgentInfo {
  std::string id;
  std::string device_key;
  std::string target;  // canonical target spec
  std::string hardware;
  std::string compiler_version;
  bool connected = false;
  int64_t first_seen_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
  int32_t in_flight = 0;
  int64_t results = 0;
  int32_t consecutive_failures = 0;
  int32_t consecutive_invalid_costs = 0;
  int64_t quarantined_until_unix_ms = 0;  // 0: never quarantined
  std::string quarantine_reason;
  double peak_gflops = 0;  // the agent's hello (not persisted: every hello says it)
  // Connected over loopback or a Unix socket: it shares the tracker's CPUs
  // (not persisted: every session says it).
  bool on_tracker_host = false;
};

// Whether a gRPC peer ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:...")
// is this machine: a loopback address or a Unix socket.
bool IsLoopbackPeer(std::string_view peer);

struct HealthOptions {
  int max_consecutive_failures = 16;  // two batches of 8 without one success
  int max_invalid_costs = 3;          // impossible costs in a row
  int64_t quarantine_ms = 10 * 60 * 1000;
};

class AgentRegistry {
 public:
  // db may be null (nothing is persisted).
  AgentRegistry(storage::FarmStore* db, const Clock* clock, HealthOptions health = {});

  // Loads the agents the database knows, as disconnected.
  absl::Status Load();

  // Marks the agent connected (replacing an older session of the same id);
  // returns the session number to pass to Disconnect.
  absl::StatusOr<uint64_t> Connect(const AgentInfo& hello);
  // Marks it disconnected unless a newer session of the same id has started.
  void Disconnect(const std::string& agent_id, uint64_t session);
  // Heartbeats and results update memory only (they come on the paths that
  // hand out the next batch); PersistStale writes what changed.
  void Heartbeat(const std::string& agent_id);
  void AddResults(const std::string& agent_id, int64_t n);
  // Writes the rows of agents whose results count changed more than
  // kPersistResultsEveryMs ago, or whose last heartbeat is kPersistHeartbeatEveryMs
  // newer than their row (from the tracker's housekeeping thread). Returns
  // how many.
  int PersistStale();
  void SetInFlight(const std::string& agent_id, int32_t n);
  // Counts one batch's outcomes of this agent (successes, failures of any
  // kind, and of those the impossible costs); returns true when this put the
  // agent in quarantine.
  bool RecordOutcomes(const std::string& agent_id, int ok, int failed, int invalid_costs);
  // Whether the agent is in quarantine now (no work for it).
  bool Quarantined(const std::string& agent_id) const;

  // Connected agents not heard from (heartbeat, result or hello) for more
  // than max_silence_ms.
  std::vector<std::string> Silent(int64_t max_silence_ms) const;

  std::vector<AgentInfo> List() const;
  // Connected agents of the key: this tracker's, and those of the other
  // trackers on the same database (SetRemote).
  int ConnectedCount(const std::string& device_key) const;
  // Of them, this tracker's that share its CPUs (AgentInfo::on_tracker_host).
  int OnTrackerHostCount(const std::string& device_key) const;
  // Agents of other trackers on the same database, by key: how many, and
  // the target of one (tracker/relay.h sets them).
  struct Remote {
    int count = 0;
    std::string target;
  };
  void SetRemote(std::map<std::string, Remote> remote);
  // Agents of the key connected to other trackers.
  int RemoteCount(const std::string& device_key) const;
  std::optional<AgentInfo> Get(const std::string& agent_id) const;
  // The target of an agent with this key: a connected one first, else the
  // most recently seen one.
  std::optional<std::string> TargetForKey(const std::string& device_key) const;

 private:
  std::map<std::string, Remote> remote_;
  struct Slot {
    AgentInfo info;
    uint64_t session = 0;
    int64_t persisted_unix_ms = 0;  // when the row was last written
    int64_t persisted_results = 0;  // the results count it holds
  };
  // Heartbeats refresh the stored last_seen at most this often; the
  // in-memory time (what Silent() reads) is always current.
  static constexpr int64_t kPersistHeartbeatEveryMs = 30000;
  // Results counts: at most this often (and when the session ends).
  static constexpr int64_t kPersistResultsEveryMs = 5000;
  // The slot's row to write (nullopt without a database), written by Persist
  // after the registry's lock is released: a database stalled by another
  // writer must not stall every session that asks the registry something.
  std::optional<storage::AgentRow> RowToPersistLocked(Slot& slot);
  absl::Status Persist(const std::optional<storage::AgentRow>& row);

  storage::FarmStore* db_;
  const Clock* clock_;
  HealthOptions health_;
  mutable std::mutex mu_;
  uint64_t next_session_ = 1;
  std::map<std::string, Slot> agents_;
};

}  // namespace kiln::tracker
