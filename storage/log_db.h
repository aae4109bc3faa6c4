#pragma once
// The log database: tuning records, workloads, jobs, agents and artifact
// metadata, on SQLite (one file in WAL mode: the default for one machine) or
// PostgreSQL (several trackers sharing one farm); one interface, the same
// SQL and schema ladder on both (storage/database.h). Knows nothing of the compiler or of
// protobuf: rows are plain structs of strings and numbers.
//
// Thread-safe: one LogDb may be used from many threads (calls are serialized
// on an internal mutex).

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/vocabulary.h"

namespace kiln::storage {

class Database;  // storage/database.h

struct WorkloadRow {
  std::string key;
  std::string op;
  std::string canonical;
  double flops = 0;
};

// error_kind is stored as its name (ErrorKindName: "none", "compile", ...).
struct RecordRow {
  int64_t id = 0;
  std::string workload_key;
  std::string target;
  std::string config;  // canonical config string
  ErrorKind error_kind = ErrorKind::kNone;
  std::string error_message;
  std::vector<double> costs_s;  // every repeat
  double mean_cost_s = 0;       // mean of costs_s; 0 on error
  std::string compiler_version;
  std::string agent_id;
  std::string job_id;
  int64_t unix_ms = 0;
  // The farm that measured it: "" for this database's own; an imported
  // record keeps the name its export gave (kiln records export --farm).
  std::string farm;
  // The user who runs the agent that measured it ("" for the farm's own
  // agents, and for any agent of a key the farm shares): see RecordScope.
  std::string owner;
};

// Whose measurements a query reads. A job of user U starts from, and is
// compiled with, the farm's records (owner "") and U's own agents' only:
// what one user's agent reports never becomes another user's config. The
// default reads all (a local log, `kiln compile`, an admin's listing).
struct RecordScope {
  bool all = true;
  std::string user;
  static RecordScope Of(std::string user) { return {false, std::move(user)}; }
};

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

// A bearer token: who it is (user name and role: "user", "agent" or
// "admin") and the SHA-256 of its secret; the secret itself is never stored.
// An agent's token may name its owner, the user who runs the agent: that
// agent measures only its owner's jobs and its records seed only theirs
// (unless the farm shares its key: kiln-tracker --shared-keys).
struct TokenRow {
  int64_t id = 0;
  std::string user;
  std::string role;
  std::string owner;  // agent tokens only; "" for the farm's own agents
  std::string hash;
  int64_t created_unix_ms = 0;
  int64_t revoked_unix_ms = 0;  // 0: valid
};

// One tuning task of a job, in the job's order.
struct JobTaskRow {
  std::string workload_key;
  int32_t occurrences = 1;  // how often the model runs it
};

// A tuner's cost model (XGBoost UBJSON) for one workload, target and
// compiler version, trained on `trained_on` results.
struct CostModelRow {
  std::string workload_key;
  std::string target;
  std::string compiler_version;
  int64_t trained_on = 0;
  std::string model;
  int64_t updated_unix_ms = 0;
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
  std::string kind;  // "model" (submitted ONNX) or "module" (compiled artifact)
  std::string job_id;
  int64_t created_unix_ms = 0;
};

// A batch relayed between trackers sharing one database: published by the
// tracker that runs its job (owner), leased to the tracker of an agent that
// measures it (holder), its results left for the owner. `work` and `results`
// are the tracker's JSON; state "queued", "leased" or "done".
struct BatchRow {
  std::string id;
  std::string job_id;
  std::string device_key;
  std::string owner;
  std::string holder;
  std::string state;
  std::string work;
  std::string results;
  int64_t lease_until_ms = 0;
  int64_t created_unix_ms = 0;
};

class LogDb {
 public:
  // Opens (or creates) the database and migrates it to the current schema.
  // `url`: "sqlite:PATH", a plain path (SQLite), or "postgresql://..."
  // (libpq's URI; the database must exist). FAILED_PRECONDITION when its
  // schema is newer than this code; UNAVAILABLE when the server does not answer.
  static absl::StatusOr<std::unique_ptr<LogDb>> Open(const std::string& url);
  ~LogDb();
  LogDb(const LogDb&) = delete;
  LogDb& operator=(const LogDb&) = delete;

  static int CurrentSchemaVersion();
  // Whether several trackers may share this database (PostgreSQL: yes;
  // SQLite: one tracker).
  bool SharedByTrackers() const;
  absl::StatusOr<int> SchemaVersion();

  // Workloads.
  absl::Status UpsertWorkload(const WorkloadRow& row);
  absl::StatusOr<std::optional<WorkloadRow>> GetWorkload(const std::string& key);

  // Records. AddRecord fills id; returns the id.
  absl::StatusOr<int64_t> AddRecord(const RecordRow& row);
  // All of them in one transaction (a batch's results: one commit, not one
  // per record); none is stored when one is invalid.
  // With a `holder` (several trackers on one database), they are stored only
  // while that tracker holds their job (the first record's): ABORTED, and
  // nothing stored, once another tracker has taken the job over.
  absl::Status AddRecords(const std::vector<RecordRow>& rows, const std::string& holder = "");
  // The successful record with the lowest mean cost, if any; of one
  // canonical config only when `config` is not empty.
  // Each reads the records of `scope` only.
  absl::StatusOr<std::optional<RecordRow>> BestRecord(const std::string& workload_key,
                                                      const std::string& target,
                                                      const std::string& config = "",
                                                      const RecordScope& scope = {});
  absl::StatusOr<std::vector<RecordRow>> TopK(const std::string& workload_key,
                                              const std::string& target, int k,
                                              const std::string& config = "",
                                              const RecordScope& scope = {});
  // Empty key / target match everything; newest first; limit <= 0: no limit;
  // the first `offset` matches skipped (paging).
  absl::StatusOr<std::vector<RecordRow>> QueryRecords(const std::string& workload_key,
                                                      const std::string& target, int limit,
                                                      int64_t offset = 0,
                                                      const RecordScope& scope = {});
  // Canonical configs already measured (successfully or not) for this
  // workload, target and compiler version: the tuner never measures them again.
  absl::StatusOr<std::set<std::string>> MeasuredConfigs(const std::string& workload_key,
                                                        const std::string& target,
                                                        const std::string& compiler_version,
                                                        const RecordScope& scope = {});
  absl::StatusOr<int64_t> CountRecords(const std::string& job_id);
  // The records a job stored, in measurement order (limit <= 0: all; the
  // first `offset` skipped).
  absl::StatusOr<std::vector<RecordRow>> RecordsOfJob(const std::string& job_id, int limit = 0,
                                                      int64_t offset = 0);

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
  // A job's tasks, replaced as a whole; in position order.
  absl::Status SetJobTasks(const std::string& job_id, const std::vector<JobTaskRow>& tasks);
  absl::StatusOr<std::vector<JobTaskRow>> JobTasks(const std::string& job_id);

  // Cost models: one per (workload, target, compiler version), replaced on save.
  absl::Status SaveCostModel(const CostModelRow& row);
  absl::StatusOr<std::optional<CostModelRow>> GetCostModel(const std::string& workload_key,
                                                           const std::string& target,
                                                           const std::string& compiler_version);

  // Agents.
  absl::Status UpsertAgent(const AgentRow& row);
  absl::StatusOr<std::vector<AgentRow>> ListAgents();

  // Artifact metadata (the bytes are in ArtifactStore).
  absl::Status AddArtifact(const ArtifactRow& row);
  absl::StatusOr<std::optional<ArtifactRow>> GetArtifact(const std::string& sha256);
  // The artifacts of one kind ("model", "module"), oldest first.
  absl::StatusOr<std::vector<ArtifactRow>> ListArtifacts(const std::string& kind);
  // Forgets an artifact's metadata (the bytes are the store's: Remove).
  absl::Status DeleteArtifact(const std::string& sha256);

  // JSON lines: one {"workload":..., "target":..., "config":..., ...,
  // "farm":...} object per record, workloads included so an import into an
  // empty file is complete; the compiler version and target are kept.
  // Export names this database's own records' farm `farm` (others keep
  // theirs). Import merges duplicates (the same workload, target, compiler
  // version, config and costs: skipped, whichever farm measured them) and
  // names the farm of lines without one `farm`; returns how many it added.
  // A malformed line fails the whole import (nothing is written), naming
  // the line number.
  absl::Status ExportJsonl(std::ostream& out, const std::string& farm = "");
  absl::StatusOr<int64_t> ImportJsonl(std::istream& in, const std::string& farm = "");

 private:
  explicit LogDb(std::unique_ptr<Database> db);
  // " FOR UPDATE SKIP LOCKED" / " FOR UPDATE" on PostgreSQL; "" on SQLite
  // (its write transactions exclude each other already).
  const char* SkipLocked() const;
  const char* ForUpdate() const;
  std::mutex mu_;
  std::unique_ptr<Database> db_;
};

// SHA-256 of bytes given in pieces.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(std::string_view bytes);
  // Lowercase hex; the hasher is spent afterwards.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// A file on its way into the store: bytes are written to a temporary file as
// they arrive and hashed on the way; Commit renames it to its content
// address. Destroying an uncommitted writer removes the partial file.
class BlobWriter {
 public:
  ~BlobWriter();
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  absl::Status Append(std::string_view bytes);
  int64_t size() const { return size_; }

  struct Stored {
    std::string sha256;
    int64_t size = 0;
    bool already_stored = false;  // the store had these bytes; the new copy was dropped
  };
  // Flushes the file to disk and moves it into place. DATA_LOSS when
  // `expected_sha256` is given and the bytes hash to something else (the
  // partial file is removed).
  absl::StatusOr<Stored> Commit(std::string_view expected_sha256 = {});

 private:
  friend class ArtifactStore;
  BlobWriter(const class ArtifactStore* store, std::string tmp_path, int fd)
      : store_(store), tmp_path_(std::move(tmp_path)), fd_(fd) {}
  void Discard();
  const class ArtifactStore* store_;
  std::string tmp_path_;
  int fd_;
  int64_t size_ = 0;
  Sha256Hasher hasher_;
};

class S3Client;  // storage/s3.h

// Content-addressed files under one folder: <dir>/<sha[0:2]>/<sha256>.
// Writes go to a temporary file under <dir>/.tmp that is renamed into place,
// so a crash never leaves a partial file under its final name; temporaries of
// processes that died are removed by Open.
//
// On an object store ("s3://BUCKET[/PREFIX]", storage/s3.h) the folder is a
// local cache: every committed file is uploaded to <PREFIX>/<sha[0:2]>/<sha256>
// (unless the bucket has it), and a file missing here is downloaded, its
// checksum verified, before it is read. Several trackers on several hosts
// share one bucket.
class ArtifactStore {
 public:
  // `spec`: a folder, or an s3:// URL (cache folder: KILN_ARTIFACT_CACHE, else
  // one under the temporary directory named after the URL).
  static absl::StatusOr<std::unique_ptr<ArtifactStore>> Open(const std::string& spec);
  ~ArtifactStore();
  // Stores the bytes; returns their SHA-256 (hex).
  absl::StatusOr<std::string> Put(std::string_view bytes);
  // Starts storing a file whose bytes come in pieces.
  absl::StatusOr<std::unique_ptr<BlobWriter>> NewWriter() const;
  absl::StatusOr<std::string> Get(const std::string& sha256) const;  // NOT_FOUND
  // Where the file is (or would be) in the local folder.
  std::string PathOf(const std::string& sha256) const;
  // PathOf, after downloading the file from the object store if needed.
  absl::StatusOr<std::string> LocalPath(const std::string& sha256) const;
  bool Contains(const std::string& sha256) const;
  // Removes the file from the folder and, on an object store, the bucket's
  // object too (NOT_FOUND when it was in neither).
  absl::Status Remove(const std::string& sha256) const;
  // The stored file's size; NOT_FOUND when it is not stored.
  absl::StatusOr<int64_t> SizeOf(const std::string& sha256) const;

 private:
  friend class BlobWriter;
  explicit ArtifactStore(std::string dir);
  bool HasLocal(const std::string& sha256) const;
  // Downloads a file the folder lacks (object store only).
  absl::Status Fetch(const std::string& sha256) const;
  // Uploads a committed file the bucket lacks (object store only).
  absl::Status Upload(const std::string& sha256, int64_t size) const;
  std::string dir_;
  std::unique_ptr<S3Client> remote_;
  std::string remote_url_;
};

// SHA-256 of bytes, lowercase hex. (Also used for model hashes.)
std::string Sha256Hex(std::string_view bytes);
// "a 64-digit lowercase hex string".
bool IsSha256Hex(std::string_view text);

}  // namespace kiln::storage
