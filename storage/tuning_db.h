#pragma once
// The tuning database: workloads, measurement records (with their
// provenance: target, compiler version, agent, job, farm, owner), the tasks
// each job tuned and the tuner's cost models. It is what `kiln compile` reads, what the tuner
// writes, and the unit users export, import and share (`kiln records
// export/import`, JSON lines). It knows nothing of jobs, tokens or agents:
// those are the farm store's (storage/farm_store.h). Both live in one
// SQL database (SQLite or PostgreSQL, storage/database.h) with one schema
// ladder; storage/stores.h opens them together on one connection.
//
// Thread-safe: calls are serialized on the connection's mutex.

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/vocabulary.h"

namespace kiln::storage {

class Database;     // storage/database.h
struct Connection;  // storage/connection.h

struct WorkloadRow {
  std::string key;
  std::string op;
  std::string canonical;
  double flops = 0;
};

// One candidate's measurement, the one type it keeps from the agent's answer
// to the records table: the tracker's MeasureOutcome and the tuner's
// MeasureResult are it (with where it answers), a RecordRow is it with what
// was measured and when. Checked once, where it enters kiln
// (tracker/measure_proto.cc's OutcomeFromProto for an agent's or a relayed
// answer; tuner::LocalMeasurer's own timings; `kiln records import` for a
// file): with error_kind kNone its costs are finite, positive and at most
// the candidate's time limit, and not empty; with another kind they are
// empty.
struct Measurement {
  ErrorKind error_kind = ErrorKind::kNone;  // stored as its name ("none", ...)
  std::string error_message;
  std::vector<double> costs_s;  // every repeat
  bool cut_short = false;       // timed once: slower than the batch's stop_above_s
  std::string agent_id;         // who measured it
  // The user who runs the agent that measured it ("" for the farm's own
  // agents, and for any agent of a key the farm shares): see RecordScope.
  // Set by the tracker from the agent's token, never by the agent.
  std::string owner;
};

struct RecordRow : Measurement {
  int64_t id = 0;
  std::string workload_key;
  std::string target;
  std::string config;      // canonical config string
  double mean_cost_s = 0;  // mean of costs_s; 0 on error
  std::string compiler_version;
  std::string job_id;
  int64_t unix_ms = 0;
  // The farm that measured it: "" for this database's own; an imported
  // record keeps the name its export gave (kiln records export --farm).
  std::string farm;
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

// One task a tuning run (a job) tuned, in its order: with the records of the
// job, what it measured of its model.
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

// A condition records are stored under: run inside AddRecords's transaction,
// on the same connection, before the first insert, with the job of the
// batch's first record; an error stores nothing and is AddRecords's answer.
// The farm store's JobHeldBy (several trackers on one database) is one.
using RecordFence = std::function<absl::Status(Database& db, const std::string& job_id)>;

class TuningDb {
 public:
  // Opens (or creates) the database and migrates it to the current schema.
  // `url`: "sqlite:PATH", a plain path (SQLite), or "postgresql://..."
  // (libpq's URI; the database must exist). FAILED_PRECONDITION when its
  // schema is newer than this code; UNAVAILABLE when the server does not answer.
  static absl::StatusOr<std::unique_ptr<TuningDb>> Open(const std::string& url);
  explicit TuningDb(std::shared_ptr<Connection> connection);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  absl::StatusOr<int> SchemaVersion();

  // Workloads.
  absl::Status UpsertWorkload(const WorkloadRow& row);
  absl::StatusOr<std::optional<WorkloadRow>> GetWorkload(const std::string& key);

  // Records. AddRecord fills id; returns the id.
  absl::StatusOr<int64_t> AddRecord(const RecordRow& row);
  // All of them in one transaction (a batch's results: one commit, not one
  // per record); none is stored when one is invalid, or when `fence` (if
  // given) refuses.
  absl::Status AddRecords(const std::vector<RecordRow>& rows, const RecordFence& fence = nullptr);
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

  // A job's tasks, replaced as a whole; in position order.
  absl::Status SetJobTasks(const std::string& job_id, const std::vector<JobTaskRow>& tasks);
  absl::StatusOr<std::vector<JobTaskRow>> JobTasks(const std::string& job_id);

  // Cost models: one per (workload, target, compiler version), replaced on save.
  absl::Status SaveCostModel(const CostModelRow& row);
  absl::StatusOr<std::optional<CostModelRow>> GetCostModel(const std::string& workload_key,
                                                           const std::string& target,
                                                           const std::string& compiler_version);

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
  std::shared_ptr<Connection> c_;
};

}  // namespace kiln::storage
