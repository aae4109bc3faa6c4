#include "storage/migrations.h"

#include "base/str.h"
#include "storage/database.h"

namespace kiln::storage {

const std::vector<std::string>& SchemaMigrations() {
  static const std::vector<std::string> kLadder = {
      // 0 -> 1: the initial schema.
      R"sql(
CREATE TABLE workloads (
  key TEXT PRIMARY KEY,
  op TEXT NOT NULL,
  canonical TEXT NOT NULL,
  flops REAL NOT NULL
);
CREATE TABLE records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  workload_key TEXT NOT NULL,
  target TEXT NOT NULL,
  config TEXT NOT NULL,
  error_kind TEXT NOT NULL,
  error_message TEXT NOT NULL,
  costs_s TEXT NOT NULL,
  mean_cost_s REAL NOT NULL,
  compiler_version TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  unix_ms INTEGER NOT NULL
);
CREATE INDEX records_by_cost ON records(workload_key, target, mean_cost_s);
CREATE INDEX records_by_config ON records(workload_key, target, compiler_version, config);
CREATE INDEX records_by_job ON records(job_id);
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  model_name TEXT NOT NULL,
  model_sha256 TEXT NOT NULL,
  device_key TEXT NOT NULL,
  target TEXT NOT NULL,
  state TEXT NOT NULL,
  trials INTEGER NOT NULL,
  trials_done INTEGER NOT NULL,
  options_json TEXT NOT NULL,
  error TEXT NOT NULL,
  artifact_sha256 TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  updated_unix_ms INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  device_key TEXT NOT NULL,
  target TEXT NOT NULL,
  hardware TEXT NOT NULL,
  compiler_version TEXT NOT NULL,
  first_seen_unix_ms INTEGER NOT NULL,
  last_seen_unix_ms INTEGER NOT NULL,
  results INTEGER NOT NULL
);
CREATE TABLE artifacts (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  kind TEXT NOT NULL,
  job_id TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);
)sql",
      // 1 -> 2: the tuner's state. A job's tuning time (its wall-clock
      // budget survives a restart), its tasks with their occurrences, and the
      // cost models the tuner trained, per workload, target and compiler.
      R"sql(
ALTER TABLE jobs ADD COLUMN tuning_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE job_tasks (
  job_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  workload_key TEXT NOT NULL,
  occurrences INTEGER NOT NULL,
  PRIMARY KEY (job_id, position)
);
CREATE TABLE cost_models (
  workload_key TEXT NOT NULL,
  target TEXT NOT NULL,
  compiler_version TEXT NOT NULL,
  trained_on INTEGER NOT NULL,
  model BLOB NOT NULL,
  updated_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (workload_key, target, compiler_version)
);
)sql",
      // 2 -> 3: identity. Who submitted each job (the user of its token;
      // empty for a tracker without authentication), and the bearer tokens,
      // stored as SHA-256 hashes only.
      R"sql(
ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE TABLE tokens (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  "user" TEXT NOT NULL,
  role TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_unix_ms INTEGER NOT NULL,
  revoked_unix_ms INTEGER NOT NULL DEFAULT 0
);
)sql",
      // 3 -> 4: provenance. The farm that measured each record ("" for this
      // one): `kiln records import` keeps other farms' names.
      R"sql(
ALTER TABLE records ADD COLUMN farm TEXT NOT NULL DEFAULT '';
)sql",
      // 4 -> 5: several trackers on one database (PostgreSQL). Which
      // tracker runs each job until when (its lease, renewed while it
      // lives), a cancel asked of a tracker that does not run the job, and
      // batches relayed between trackers: published by the job's tracker
      // (owner), measured by an agent of another (holder).
      R"sql(
ALTER TABLE jobs ADD COLUMN tracker_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN lease_until_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE TABLE batches (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  device_key TEXT NOT NULL,
  owner TEXT NOT NULL,
  holder TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL,
  work TEXT NOT NULL,
  results TEXT NOT NULL DEFAULT '',
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX batches_by_key ON batches(device_key, state);
CREATE INDEX batches_by_owner ON batches(owner, state);
)sql",
      // 5 -> 6: trust. An agent token may name the user who runs the agent
      // (its owner); each record keeps the owner of the agent that measured
      // it ("" for the farm's own agents and for keys the farm shares).
      R"sql(
ALTER TABLE tokens ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN owner TEXT NOT NULL DEFAULT '';
)sql",
      // 6 -> 7: tuning confirmed end to end. What a job measured of its
      // whole model on the board (the curve, the per-task choices it made
      // inside the model and what it returned), as JSON.
      R"sql(
ALTER TABLE jobs ADD COLUMN end_to_end TEXT NOT NULL DEFAULT '';
)sql",
      // 7 -> 8: typed costs. Each repeat's cost a row of its own (a REAL,
      // in order), not the record's comma-joined text, which is split
      // here and dropped.
      R"sql(
CREATE TABLE record_costs (
  record_id INTEGER NOT NULL,
  position INTEGER NOT NULL,
  cost_s REAL NOT NULL,
  PRIMARY KEY (record_id, position)
);
INSERT INTO record_costs(record_id, position, cost_s)
WITH RECURSIVE split(record_id, position, cost, rest) AS (
  SELECT id, 0, CAST('' AS TEXT), costs_s || ',' FROM records WHERE costs_s <> ''
  UNION ALL
  SELECT record_id, position + 1, substr(rest, 1, instr(rest, ',') - 1),
         substr(rest, instr(rest, ',') + 1)
  FROM split WHERE rest <> ''
)
SELECT record_id, position - 1, CAST(cost AS REAL) FROM split WHERE position > 0;
ALTER TABLE records DROP COLUMN costs_s;
)sql",
      // 8 -> 9: a record timed once (slower than the batch's stop_above_s,
      // so not repeated) says so in a column of its own, not only in its
      // message; earlier ones are found by the message the tuner wrote.
      R"sql(
ALTER TABLE records ADD COLUMN cut_short INTEGER NOT NULL DEFAULT 0;
UPDATE records SET cut_short = 1
WHERE error_kind = 'none' AND error_message LIKE 'timed once: %';
)sql",
  };
  return kLadder;
}

absl::StatusOr<int> ReadSchemaVersion(Database& db) {
  absl::StatusOr<Statement> stmt =
      db.Prepare("SELECT value FROM meta WHERE key = 'schema_version'");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  if (!*row) return 0;
  int64_t version = 0;
  std::string text = stmt->ColumnText(0);
  if (!ParseInt64(text, &version) || version < 0) {
    return absl::DataLossError(StrCat("meta.schema_version is not a version: '", text, "'"));
  }
  return static_cast<int>(version);
}

absl::Status MigrateSchema(Database& db, const std::vector<std::string>& ladder) {
  const int newest = static_cast<int>(ladder.size());
  while (true) {
    // Read the version inside the write transaction, holding off other
    // processes (LockSchema), so two processes opening the same fresh
    // database never apply a step twice.
    Transaction tx(db);
    if (!tx.status().ok()) return tx.status();
    if (absl::Status s = db.LockSchema(); !s.ok()) return s;
    if (absl::Status s =
            db.Exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
        !s.ok()) {
      return s;
    }
    absl::StatusOr<int> version = ReadSchemaVersion(db);
    if (!version.ok()) return version.status();
    if (*version > newest) {
      return absl::FailedPreconditionError(StrCat("log database schema version ", *version,
                                                  " is newer than this kiln supports (", newest,
                                                  "); upgrade kiln"));
    }
    if (*version == newest) return absl::OkStatus();
    if (absl::Status s = db.Exec(db.SchemaSql(ladder[*version])); !s.ok()) {
      return absl::Status(
          s.code(), StrCat("migration to schema version ", *version + 1, " failed: ", s.message()));
    }
    absl::StatusOr<Statement> set = db.Prepare(
        "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (!set.ok()) return set.status();
    if (absl::Status s = set->BindText(1, std::to_string(*version + 1)); !s.ok()) return s;
    if (absl::Status s = set->Run(); !s.ok()) return s;
    if (absl::Status s = tx.Commit(); !s.ok()) return s;
  }
}

}  // namespace kiln::storage
