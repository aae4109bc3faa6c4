#pragma once
// Several trackers on one database (PostgreSQL): the relay moves batches
// between them, so that a job runs on one tracker while agents connected to
// any tracker measure it.
//
// - Out: when this tracker has batches queued for a device key and none of
//   its agents of that key is waiting for work, the relay leases one batch
//   from its dispatcher (as a holder of its own) and publishes it in the
//   database's batch table (at most kMaxPublishedPerKey unclaimed per key).
//   Only while other trackers have agents of the key (a lone tracker on
//   PostgreSQL publishes nothing). A published batch nobody claimed goes back to the local queue
//   when a local agent of the key asks for work. Its lease here does not expire
//   (Dispatcher::KeepLease): the table's lease of the tracker that claimed it
//   does, and then the batch goes to another tracker, so no batch is
//   measured here and elsewhere at once.
// - In: when an agent here is waiting and nothing is queued here for its key,
//   the relay claims another tracker's batch of that key (row locks skipped:
//   one tracker gets it), queues it here, and writes the agent's results back;
//   it renews the table's lease of the batch while it is measured here.
// - Back: the results of this tracker's published batches complete their
//   local leases, so the job's records are written once, by its tracker.
//
// The relay also counts the other trackers' agents (from the agents table)
// for the registry, so that jobs here size their parallelism to the farm.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "storage/farm_store.h"
#include "tracker/agent_registry.h"
#include "tracker/clock.h"
#include "tracker/dispatcher.h"

namespace kiln::tracker {

// A batch's work and its results as the text of the batches table: the
// messages of proto/kiln/v1/relay.proto in protobuf's JSON mapping
// (DATA_LOSS for text that is not). Results read back are checked as an
// agent's are (OutcomeFromProto, against `max_cost_s`: the batch's
// CostLimitOf).
std::string WorkToJson(const MeasureWork& work);
absl::StatusOr<MeasureWork> WorkFromJson(const std::string& text);
std::string OutcomesToJson(const std::vector<MeasureOutcome>& outcomes);
absl::StatusOr<std::vector<MeasureOutcome>> OutcomesFromJson(const std::string& text,
                                                             double max_cost_s = 0);

struct RelayOptions {
  std::string tracker_id;
  int64_t poll_ms = 20;  // how often the relay looks at the queues
  // Agents seen (persisted heartbeat) this recently count as connected.
  int64_t agent_seen_ms = 75000;
};

class Relay {
 public:
  static constexpr size_t kMaxPublishedPerKey = 2;
  // A claimed batch's first lease in the table, until its work is read.
  static constexpr int64_t kClaimMs = 60000;

  Relay(storage::FarmStore* db, Dispatcher* dispatcher, AgentRegistry* agents, const Clock* clock,
        RelayOptions options);
  ~Relay();  // Stop()
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void Start();
  void Stop();
  // One round of the loop (tests call it directly).
  void Step();

 private:
  void Loop();
  // This tracker's queued batches and waiting lease requests, by device key.
  struct Queues {
    std::map<std::string, size_t> queued;
    std::map<std::string, size_t> waiting;
    size_t Queued(const std::string& key) const { return Get(queued, key); }
    size_t Waiting(const std::string& key) const { return Get(waiting, key); }
    static size_t Get(const std::map<std::string, size_t>& m, const std::string& key) {
      auto it = m.find(key);
      return it == m.end() ? 0 : it->second;
    }
  };
  void Publish(const Queues& q);
  void TakeBack(const Queues& q);
  void Claim(const Queues& q);
  void CollectResults();
  void CountRemoteAgents();
  // Extends the table's leases of the batches measured here.
  void RenewClaims(int64_t now);
  // A warning, unless one was logged less than kWarnEveryMs ago (a database
  // that is down would otherwise fill the log every poll).
  void WarnNowAndThen(const std::string& message);
  static constexpr int64_t kWarnEveryMs = 5000;
  int64_t last_warning_ms_ = -kWarnEveryMs;

  struct Published {
    std::string holder;       // this relay's dispatcher holder for the batch
    std::string local_batch;  // the dispatcher's batch id
    std::string device_key;
    double cost_limit_s = 0;  // CostLimitOf its work
  };
  storage::FarmStore* db_;
  Dispatcher* dispatcher_;
  AgentRegistry* agents_;
  const Clock* clock_;
  RelayOptions options_;
  std::map<std::string, Published> published_;  // by batch table id
  // Other trackers' batches measured here: table id -> lease length (shared
  // with the dispatcher's callbacks, which may outlive the relay).
  struct Claims {
    std::mutex mu;
    std::map<std::string, int64_t> leases;
  };
  std::shared_ptr<Claims> claims_ = std::make_shared<Claims>();
  uint64_t next_holder_ = 0;
  int64_t last_housekeeping_ms_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::tracker
