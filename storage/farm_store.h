#pragma once
// The farm store: what the service keeps to run its farm, apart from what it
// learned (the tuning database, storage/tuning_db.h): jobs and their tasks,
// the leases of several trackers on one database, the batches they relay,
// bearer tokens, agents, and the metadata of stored artifacts (their bytes
// are the artifact store's, storage/artifact_store.h). On SQLite (one
// tracker) or PostgreSQL (several); rows are plain structs of strings and
// numbers.
//
// Thread-safe: calls are serialized on the connection's mutex.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"

namespace kiln::storage {

struct JobRow {
  std::string id;
  std::string model_name;
  std::string model_sha256;  // the ONNX bytes live in the artifact store
  std::string device_key;
  std::string target;
  JobState state = JobState::kQueued;  // stored as its name (JobStateName)
  int32_t trials = 0;
  int32_t trials_done = 0;
  std::string options_json;  // timing policy and other submit options
  std::string error;
  std::string artifact_sha256;
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  int64_t tuning_ms = 0;  // wall-clock time spent tuning so far
  std::string owner;      // the submitting user ("" without authentication); never updated
  // What the job measured of its whole model on the board (JSON written by
  // tracker/end_to_end.h; "" until it has).
  std::string end_to_end_json;
  // Several trackers on one database: the tracker that runs the job, until
  // when (its lease). Written by CreateJob; then only ClaimJobs moves them
  // (RenewJobLeases extends the lease); not read back into rows.
  std::string tracker_id;
  int64_t lease_until_ms = 0;
};

// A bearer token: who it is (user name and role, stored by its name:
// "user", "agent" or "admin") and the SHA-256 of its secret; the secret itself is never stored.
// An agent's token may name its owner, the user who runs the agent: that
// agent measures only its owner's jobs and its records seed only theirs
// (unless the farm shares its key: kiln-tracker --shared-keys).
struct TokenRow {
  int64_t id = 0;
  std::string user;
  Role role = Role::kUser;
  std::string owner;  // agent tokens only; "" for the farm's own agents
  std::string hash;
  int64_t created_unix_ms = 0;
  int64_t revoked_unix_ms = 0;  // 0: valid
};

struct AgentRow {
  std::string id;
  std::string device_key;
  std::string target;
  std::string hardware;
  std::string compiler_version;
  int64_t first_seen_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
  int64_t results = 0;
};

struct ArtifactRow {
  std::string sha256;
  int64_t size = 0;
  ArtifactKind kind = ArtifactKind::kModel;
  std::string job_id;
  int64_t created_unix_ms = 0;
};

// A batch relayed between trackers sharing one database: published by the
// tracker that runs its job (owner), leased to the tracker of an agent that
// measures it (holder), its results left for the owner. `work` and `results`
// are the tracker's text (proto/kiln/v1/relay.proto's messages in protobuf's
// JSON mapping).
struct BatchRow {
  std::string id;
  std::string job_id;
  std::string device_key;
  std::string owner;
  std::string holder;
  BatchState state = BatchState::kQueued;
  std::string work;
  std::string results;
  int64_t lease_until_ms = 0;
  int64_t created_unix_ms = 0;
};

class FarmStore {
 public:
  // Opens (or creates) the database and migrates it, as TuningDb::Open.
  static absl::StatusOr<std::unique_ptr<FarmStore>> Open(const std::string& url);
  explicit FarmStore(std::shared_ptr<Connection> connection);
  ~FarmStore();
  FarmStore(const FarmStore&) = delete;
  FarmStore& operator=(const FarmStore&) = delete;

  // Whether several trackers may share this database (PostgreSQL: yes;
  // SQLite: one tracker).
  bool SharedByTrackers() const;
  absl::StatusOr<int> SchemaVersion();

  // Jobs.
  absl::Status CreateJob(const JobRow& row);  // ALREADY_EXISTS on a duplicate id
  absl::Status UpdateJob(const JobRow& row);  // NOT_FOUND for an unknown id
  absl::StatusOr<std::optional<JobRow>> GetJob(const std::string& id);
  absl::StatusOr<std::vector<JobRow>> ListJobs();  // newest first
  absl::StatusOr<std::vector<JobRow>> UnfinishedJobs();

  // Several trackers on one database (PostgreSQL; each tracker's id is its
  // own). ClaimJobs: unfinished jobs no tracker holds (or whose tracker's
  // lease ran out before now_ms) become `tracker`'s until until_ms, each to
  // exactly one tracker (row locks skipped, not waited for); returns them.
  absl::StatusOr<std::vector<JobRow>> ClaimJobs(const std::string& tracker, int64_t now_ms,
                                                int64_t until_ms);
  // Extends the leases of `tracker`'s unfinished jobs to until_ms; returns
  // them, each with whether another tracker was asked to cancel it.
  absl::StatusOr<std::vector<std::pair<std::string, bool>>> RenewJobLeases(
      const std::string& tracker, int64_t until_ms);
  // Marks a job to be cancelled by the tracker that runs it; NOT_FOUND for
  // an unknown job.
  absl::Status RequestCancel(const std::string& job_id);
  // The fence a tracker stores its jobs' records under (TuningDb::AddRecords):
  // the job's row, locked until the records are in, names `tracker` (a claim
  // by another waits for it, or skips the job); ABORTED, and nothing stored,
  // once another tracker has taken the job over.
  static RecordFence JobHeldBy(std::string tracker);

  // Relayed batches (see BatchRow).
  absl::Status PublishBatch(const BatchRow& row);
  // The oldest queued batch of this key published by another tracker,
  // leased to `holder` until until_ms; nullopt when there is none.
  absl::StatusOr<std::optional<BatchRow>> ClaimBatch(const std::string& device_key,
                                                     const std::string& holder, int64_t until_ms);
  // Sets the lease of a batch `holder` holds; false when it holds it no more.
  absl::StatusOr<bool> SetBatchLease(const std::string& id, const std::string& holder,
                                     int64_t until_ms);
  // The holder's results; false when the batch is no longer its own (its
  // lease ran out and it was requeued or withdrawn).
  absl::StatusOr<bool> FinishBatch(const std::string& id, const std::string& holder,
                                   const std::string& results);
  // The owner's finished batches, removed from the table.
  absl::StatusOr<std::vector<BatchRow>> TakeFinishedBatches(const std::string& owner);
  // Removes a batch its owner published if nobody leased it yet: true then.
  absl::StatusOr<bool> WithdrawBatch(const std::string& id);
  // Queued batches by device key, of every owner but `except_owner`.
  absl::StatusOr<std::map<std::string, int64_t>> QueuedBatchesByKey(
      const std::string& except_owner);
  // Leased batches whose lease ran out before now_ms go back to the queue;
  // returns how many.
  absl::StatusOr<int64_t> RequeueExpiredBatches(int64_t now_ms);
  // Drops every relayed batch of a job (its new tracker starts afresh).
  absl::Status DropBatchesOfJob(const std::string& job_id);

  // Tokens. AddToken returns the new id (ALREADY_EXISTS for a hash stored
  // before); RevokeToken: NOT_FOUND for an unknown id.
  absl::StatusOr<int64_t> AddToken(const TokenRow& row);
  absl::StatusOr<std::vector<TokenRow>> ListTokens();
  absl::Status RevokeToken(int64_t id, int64_t unix_ms);
  absl::StatusOr<std::optional<TokenRow>> TokenByHash(const std::string& hash);

  // Agents.
  absl::Status UpsertAgent(const AgentRow& row);
  absl::StatusOr<std::vector<AgentRow>> ListAgents();

  // Artifact metadata (the bytes are in ArtifactStore).
  absl::Status AddArtifact(const ArtifactRow& row);
  absl::StatusOr<std::optional<ArtifactRow>> GetArtifact(const std::string& sha256);
  // The artifacts of one kind, oldest first.
  absl::StatusOr<std::vector<ArtifactRow>> ListArtifacts(ArtifactKind kind);
  // Forgets an artifact's metadata (the bytes are the store's: Remove).
  absl::Status DeleteArtifact(const std::string& sha256);

 private:
  // " FOR UPDATE SKIP LOCKED" on PostgreSQL; "" on SQLite (its write
  // transactions exclude each other already).
  const char* SkipLocked() const;
  std::shared_ptr<Connection> c_;
};

}  // namespace kiln::storage
