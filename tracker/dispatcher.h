#pragma once
// The dispatcher: one queue of measurement batches per device key. Agents
// lease the next batch of their key built for their target (a batch for
// another target waits for an agent of that target). Which batch is next:
// the highest job priority first; within it, the user whose measurements so
// far over their weight are fewest, then that user's job with the fewest
// (stride scheduling: each user gets a share of the key's agents in
// proportion to their weight, split evenly among their jobs, whatever the
// size of their backlog); then the oldest batch. A user or job that joins
// the queue starts level with the least served one there. A lease lasts
// until a deadline;
// leases are held by a holder name, an agent id or "AGENT_ID#SESSION" (the
// tracker holds them per agent session, so that an agent's old session never
// touches its new one's leases). A lease that
// expires (deadline passed, or the agent's stream dropped) puts the batch back
// at the front of its queue for another agent. The first result of a lease is
// accepted and handed to the batch's callback; late or duplicate results are
// ignored. A batch that has been leased and lost `max_attempts` times is
// completed with agent-lost errors so its job never waits forever.
//
// A batch larger than what an agent takes at once is split at its lease: the
// agent's `max_batch` (from its Hello), and its pace: a lease should last
// about `target_lease_s` at the seconds per candidate the agent took so far.
// The rest stays at the front of its job's queue for the next agent; the
// batch's callback runs once, when every part has its results.
//
// An agent's session asks for its next lease with RequestLease: the lease is
// handed to its callback as soon as a batch it can take is queued (at once,
// or later on the thread that queues one), so that no thread waits per agent.
// Requests of a key are served oldest first.
//
// Thread-safe. Time comes from an injected Clock.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "compiler/graph/graph.h"
#include "compiler/measure.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"
#include "tracker/clock.h"

namespace kiln::tracker {

class Metrics;

struct TimingOptions {
  int32_t number = 0;  // <= 0: grown until a measurement lasts min_repeat_ms
  int32_t repeat = compiler::kDefaultRepeat;
  int32_t min_repeat_ms = compiler::kDefaultMinRepeatMs;
  int32_t cooldown_ms = 0;
  bool flush_cache = false;
  int32_t timeout_ms = compiler::kDefaultCandidateTimeoutMs;  // per candidate
  // Set per batch from the task's best cost (never by the user): a candidate
  // slower than this is timed once, not to the end (0: off).
  double stop_above_s = 0;
  // The threads kernels run on as the user deploys them (0: the agent's
  // default).
  int32_t threads = 0;
  int64_t model_bytes = 0;  // with flush_cache: see MeasurePolicy::model_bytes
};

struct MeasureCandidate {
  // Its place in the batch its job made (parts of a split batch keep it); on
  // the wire, Candidate.candidate_id in decimal (tracker/measure_proto.h).
  int64_t candidate_index = 0;
  compiler::Config config;
  // A whole-model batch's variant: the configs of the tasks that do not use
  // their default, by workload key.
  std::map<std::string, compiler::Config> task_configs;
};

// The model a whole-model batch runs (agent.proto's ModelSpec): its files,
// sent to the agent before the batch, and its input shapes.
struct ModelFile {
  std::string sha256;
  std::string location;  // "" for the ONNX file; else as its tensors name it
  std::string path;      // on this tracker's disk
  int64_t size = 0;
};
struct ModelWork {
  std::vector<ModelFile> files;  // the ONNX file first
  std::map<std::string, std::vector<int64_t>> input_shapes;
  compiler::Precision precision = compiler::Precision::kFloat32;
};

// One unit of work for one agent: candidates of one workload.
struct MeasureWork {
  std::string batch_id;  // filled by Dispatcher::Submit
  std::string job_id;
  std::string device_key;
  std::string workload_key;
  std::string workload_op;
  std::string workload_canonical;
  double workload_flops = 0;
  std::string target;    // canonical target spec
  std::string user;      // the job's owner: its share of the key's agents
  int32_t priority = 0;  // higher goes first
  TimingOptions timing;
  std::vector<MeasureCandidate> candidates;
  // Set: a whole-model batch (no workload; each candidate a variant of the
  // model). Never split between agents, nor relayed to another tracker.
  std::optional<ModelWork> model;
};

// The outcome of one candidate: its measurement (checked where it entered,
// tracker/measure_proto.h) and which candidate it answers.
struct MeasureOutcome : storage::Measurement {
  // The candidate it answers (MeasureCandidate::candidate_index); -1 for an
  // id that names none.
  int64_t candidate_index = -1;
  double build_s = 0;
  // A whole-model variant: each task's kernel time per model run, by
  // workload key.
  std::map<std::string, double> kernel_costs_s;
};

// Called once per batch, outside the dispatcher's lock, with the accepted
// results (or agent_lost errors after too many lost leases).
using BatchCallback = std::function<void(const MeasureWork& work, std::vector<MeasureOutcome>)>;

struct Lease {
  MeasureWork work;
  int64_t deadline_ms = 0;
};

// Called once per RequestLease, outside the dispatcher's lock: with the
// lease, or nullopt when the request was dropped (Wake, at shutdown).
using LeaseCallback = std::function<void(std::optional<Lease>)>;

struct DispatcherOptions {
  // When > 0, every lease lasts exactly this long.
  int64_t lease_timeout_ms = 0;
  // Otherwise: candidates x per-candidate timeout (timing.timeout_ms, or this
  // default when that is <= 0) + slack.
  int64_t default_candidate_timeout_ms = compiler::kDefaultCandidateTimeoutMs;
  int64_t slack_ms = 10000;
  int max_attempts = 5;
  // Leases sized to an agent's pace (seconds per candidate, measured from
  // lease to result): at most max(1, target_lease_s / pace) candidates.
  double target_lease_s = 30;
  // Fair-share weights of users (default 1).
  std::map<std::string, double> user_weights;
  // Where results, errors and lease expiries are counted (may be null).
  Metrics* metrics = nullptr;
};

// Lease holders: the tracker holds leases per agent session, "AGENT#SESSION",
// so that an agent's old session never touches its new one's leases; records
// name the agent.
inline std::string HolderOf(const std::string& agent_id, uint64_t session) {
  return agent_id + "#" + std::to_string(session);
}
inline std::string AgentOfHolder(const std::string& holder) {
  return holder.substr(0, holder.rfind('#'));
}

class Dispatcher {
 public:
  Dispatcher(const Clock* clock, DispatcherOptions options = {});
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Queues a batch at the back of its device key's queue; returns its id.
  std::string Submit(MeasureWork work, BatchCallback callback);

  // The next batch for an agent with this key (and this target, when not
  // empty: batches of other targets are skipped), leased to it; nullopt when
  // there is none. Expires overdue leases first (at most every 0.1 s).
  // At most max_candidates candidates (0: no limit) and what the agent's pace
  // allows: a larger batch is split.
  // `whole_models` false: whole-model batches are skipped (the relay, which
  // does not carry a model's files to another tracker).
  std::optional<Lease> TryLease(const std::string& agent_id, const std::string& device_key,
                                const std::string& target = "", int max_candidates = 0,
                                bool whole_models = true);
  // The next lease of this holder, as TryLease would give it, handed to
  // `callback` when a batch is there (at once, on this thread, when one is
  // queued now). Returns the request's id (0 when served at once).
  uint64_t RequestLease(const std::string& agent_id, const std::string& device_key,
                        const std::string& target, int max_candidates, LeaseCallback callback);
  // Withdraws a request not served yet; false when it was served (or dropped)
  // already: its callback runs or has run.
  bool CancelRequest(uint64_t request_id);
  // Like TryLease, but waits (real time, at most max_wait) until the agent has
  // fewer than max_in_flight leases and a batch is queued, or Wake() is called.
  // (For tests and simple fake agents: the tracker's sessions RequestLease.)
  std::optional<Lease> WaitLease(const std::string& agent_id, const std::string& device_key,
                                 int max_in_flight, std::chrono::milliseconds max_wait,
                                 const std::string& target = "", int max_candidates = 0);

  // Accepts the results of a batch currently leased to agent_id and runs its
  // callback. False (and nothing happens) for an unknown, expired, cancelled
  // or already completed batch, or one leased to another agent.
  bool Complete(const std::string& batch_id, const std::string& agent_id,
                std::vector<MeasureOutcome> results);

  // Puts every lease whose deadline has passed back at the front of its
  // queue. Returns how many expired.
  int ExpireLeases();
  // Expires every lease of this agent now (its stream dropped).
  int ReleaseAgent(const std::string& agent_id);
  // An agent that measures one user's batches only (an agent its owner runs,
  // on a key the farm does not share): its leases skip every other user's
  // jobs. nullopt: any batch of its key again (its session is over).
  void ServeOnly(const std::string& agent_id, std::optional<std::string> user);
  // Drops queued and leased batches of a job; their callbacks never run.
  // Returns the ids of batches that were leased; TakeCancelled gives them to
  // their holders (to tell agents to stop).
  std::vector<std::string> CancelJob(const std::string& job_id);
  // The batches of this holder cancelled since the last call.
  std::vector<std::string> TakeCancelled(const std::string& agent_id);

  int InFlight(const std::string& agent_id) const;
  // How many candidates this agent's next lease may hold by its pace (0: no
  // pace known yet, no limit).
  int PacedCandidates(const std::string& agent_id) const;
  size_t QueuedCount(const std::string& device_key) const;
  // Whether a job other than `job_id` has batches of this key queued or
  // leased.
  bool OtherJobsHaveWork(const std::string& device_key, const std::string& job_id) const;
  // Queued batches of every key that has a queue.
  std::map<std::string, size_t> QueuedByKey() const;
  // Lease requests waiting for a batch (idle agents' sessions), by key.
  std::map<std::string, size_t> WaitingByKey() const;
  // Drops every pending lease request (their callbacks get nullopt) and
  // wakes every WaitLease (e.g. on shutdown).
  void Wake();

  int64_t LeaseTimeoutMs(const MeasureWork& work) const;

  // The lease of this batch by `holder` never expires (the relay's, while
  // another tracker measures the batch: tracker/relay.h ends it itself).
  // False when the holder does not hold it.
  bool KeepLease(const std::string& batch_id, const std::string& holder);

 private:
  // The parts of a split batch: their results gather here; the batch's
  // callback runs when the last part is in.
  struct Split {
    std::mutex mu;
    MeasureWork work;  // the whole batch
    BatchCallback callback;
    int parts_left = 0;
    std::vector<MeasureOutcome> results;
  };
  struct Entry {
    MeasureWork work;
    BatchCallback callback;  // unless split
    std::shared_ptr<Split> split;
    uint64_t seq = 0;  // submission order
    int attempts = 0;
    std::string agent_id;  // current holder; empty when queued
    int64_t leased_ms = 0;
    int64_t deadline_ms = 0;
    std::multimap<int64_t, std::string>::iterator deadline_it;  // in deadlines_ while leased
  };
  std::string NewBatchIdLocked();
  // Runs an entry's callback, or adds its results to its split batch's.
  static void Finish(Entry& entry, std::vector<MeasureOutcome> results);
  // Leaves the first `keep` candidates in the entry (queued, not leased) and
  // queues the rest as a part of their own at the front of the job's queue.
  void SplitLocked(const std::string& batch_id, size_t keep);
  // What runs after the lock is released: batches' callbacks, and leases
  // for requests.
  struct Finished {
    std::vector<std::pair<Entry, std::vector<MeasureOutcome>>> batches;
    std::vector<std::pair<LeaseCallback, std::optional<Lease>>> leases;
  };

  std::optional<Lease> LeaseLocked(const std::string& agent_id, const std::string& device_key,
                                   const std::string& target, int max_candidates,
                                   bool whole_models = true);
  int PacedCandidatesLocked(const std::string& agent_id) const;
  // The queued batches of one job, oldest first (a requeued batch goes back
  // to the front), and what the choice between jobs reads.
  struct JobQueue {
    std::string user;
    int32_t priority = 0;
    std::string target;
    std::deque<std::string> batches;
  };
  // The job whose front batch an agent of `target` takes next (nullptr:
  // none); a choice over the key's jobs, not its batches.
  JobQueue* LeasableLocked(const std::string& device_key, const std::string& target,
                           const std::string* only_user = nullptr, bool whole_models = true);
  // Requeues (or gives up on) one leased batch; appends given-up batches.
  void ExpireLocked(const std::string& batch_id, Finished* finished);
  // Expires the given leased batches, oldest submission ending up in front.
  void ExpireAllLocked(std::vector<std::string> ids, Finished* finished);
  static void RunCallbacks(Finished finished);
  // Serves the key's pending requests (oldest first) from its queue.
  void ServeRequestsLocked(const std::string& device_key, Finished* finished);
  int InFlightLocked(const std::string& agent_id) const;
  // ExpireLeases at most every kExpireEveryMs (it scans every batch; leases
  // last seconds): what leasing calls.
  void ExpireLeasesNowAndThen();
  static constexpr int64_t kExpireEveryMs = 100;
  int64_t expired_at_ms_ = -1;
  // A lease ended (completed, expired or cancelled): out of deadlines_, and
  // its holder has one lease less.
  void EndLeaseLocked(Entry& e);

  const Clock* clock_;
  DispatcherOptions options_;
  mutable std::mutex mu_;
  struct Request {
    uint64_t id = 0;
    std::string holder;
    std::string target;
    int max_candidates = 0;
    LeaseCallback callback;
  };
  std::map<std::string, std::list<Request>> requests_;  // device key -> oldest first
  std::map<uint64_t, std::string> request_keys_;        // request id -> its device key
  uint64_t next_request_ = 1;
  // WaitLease waits here for its holder's leases to end.
  std::condition_variable released_cv_;
  uint64_t next_id_ = 1;
  uint64_t wake_generation_ = 0;
  std::map<std::string, Entry> batches_;  // by batch id
  // Leased batches by deadline: expiry looks at the overdue ones only (it
  // scanned every batch, 8,000 under load, ten times a second).
  std::multimap<int64_t, std::string> deadlines_;
  // device key -> job id -> its queued batches (a job with none is erased)
  std::map<std::string, std::map<std::string, JobQueue>> queues_;
  // Batches queued over a key's jobs.
  static size_t QueuedLocked(const std::map<std::string, JobQueue>& jobs);
  std::map<std::string, std::vector<std::string>> cancelled_;  // holder -> batch ids
  std::map<std::string, int> in_flight_;  // holder -> leased batches (no entry: none)
  // Stride scheduling: candidates leased so far over the weight, per device
  // key and user, and per job.
  std::map<std::string, std::map<std::string, double>> user_pass_;
  // Agents (holders) that serve one user only (ServeOnly).
  std::map<std::string, std::string> serves_only_;
  std::map<std::string, double> job_pass_;
  // Seconds per candidate of each agent (not holder: it outlives sessions),
  // a moving average over its completed leases.
  std::map<std::string, double> pace_s_;
};

}  // namespace kiln::tracker
