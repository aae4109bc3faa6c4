#include "storage/log_db.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "base/str.h"
#include "storage/database.h"
#include "storage/migrations.h"
#include "storage/record_rows.h"

namespace kiln::storage {

// ------------------------------------------------------------ record rows

namespace rows {

bool IsKnown(ErrorKind kind) { return ParseErrorKind(ErrorKindName(kind)).has_value(); }
bool IsKnown(JobState state) { return ParseJobState(JobStateName(state)).has_value(); }

std::string CostsToText(const std::vector<double>& costs) {
  std::string out;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += FormatDouble(costs[i]);
  }
  return out;
}

absl::StatusOr<std::vector<double>> CostsFromText(const std::string& text) {
  std::vector<double> costs;
  if (text.empty()) return costs;
  for (std::string_view piece : StrSplit(text, ',')) {
    double v = 0;
    if (!ParseDouble(piece, &v)) {
      return absl::DataLossError(StrCat("records.costs_s holds a non-number '", piece, "'"));
    }
    costs.push_back(v);
  }
  return costs;
}

absl::Status ValidateRecord(const RecordRow& row) {
  if (row.workload_key.empty()) return absl::InvalidArgumentError("record has no workload key");
  if (row.target.empty()) return absl::InvalidArgumentError("record has no target");
  if (!IsKnown(row.error_kind)) {
    return absl::InvalidArgumentError(
        StrCat("unknown error kind ", static_cast<int>(row.error_kind)));
  }
  for (double c : row.costs_s) {
    if (!std::isfinite(c) || c < 0) {
      return absl::InvalidArgumentError(StrCat("record cost ", c, " is not a finite duration"));
    }
  }
  if (!std::isfinite(row.mean_cost_s) || row.mean_cost_s < 0) {
    return absl::InvalidArgumentError(
        StrCat("record mean cost ", row.mean_cost_s, " is not a finite duration"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RecordRow> ReadRecord(const Statement& st) {
  RecordRow row;
  row.id = st.ColumnInt64(0);
  row.workload_key = st.ColumnText(1);
  row.target = st.ColumnText(2);
  row.config = st.ColumnText(3);
  const std::string kind = st.ColumnText(4);
  std::optional<ErrorKind> error_kind = ParseErrorKind(kind);
  if (!error_kind.has_value()) {
    return absl::DataLossError(StrCat("records.error_kind holds an unknown kind '", kind, "'"));
  }
  row.error_kind = *error_kind;
  row.error_message = st.ColumnText(5);
  KILN_STORAGE_ASSIGN_OR_RETURN(costs, CostsFromText(st.ColumnText(6)));
  row.costs_s = std::move(costs);
  row.mean_cost_s = st.ColumnDouble(7);
  row.compiler_version = st.ColumnText(8);
  row.agent_id = st.ColumnText(9);
  row.job_id = st.ColumnText(10);
  row.unix_ms = st.ColumnInt64(11);
  row.farm = st.ColumnText(12);
  row.owner = st.ColumnText(13);
  return row;
}

// Inserts a record; the caller validated it.
absl::StatusOr<int64_t> InsertRecord(Database& db, const RecordRow& row) {
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db.Prepare("INSERT INTO records(workload_key, target, config, error_kind, "
                     "error_message, costs_s, mean_cost_s, compiler_version, agent_id, job_id, "
                     "unix_ms, farm, owner) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.config));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, ErrorKindName(row.error_kind)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.error_message));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(6, CostsToText(row.costs_s)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindDouble(7, row.mean_cost_s));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(8, row.compiler_version));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(9, row.agent_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(10, row.job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(11, row.unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(12, row.farm));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(13, row.owner));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return absl::InternalError("INSERT ... RETURNING gave no id");
  return st.ColumnInt64(0);
}

std::string ScopeSql(int all_param, int user_param) {
  return StrCat("(?", all_param, " = 1 OR owner = '' OR owner = ?", user_param, ")");
}

// ------------------------------------------------------------------ job rows

absl::StatusOr<JobRow> ReadJob(const Statement& st) {
  JobRow row;
  row.id = st.ColumnText(0);
  row.model_name = st.ColumnText(1);
  row.model_sha256 = st.ColumnText(2);
  row.device_key = st.ColumnText(3);
  row.target = st.ColumnText(4);
  const std::string state_name = st.ColumnText(5);
  std::optional<JobState> state = ParseJobState(state_name);
  if (!state.has_value()) {
    return absl::DataLossError(
        StrCat("jobs.state of job '", row.id, "' holds an unknown state '", state_name, "'"));
  }
  row.state = *state;
  row.trials = static_cast<int32_t>(st.ColumnInt64(6));
  row.trials_done = static_cast<int32_t>(st.ColumnInt64(7));
  row.options_json = st.ColumnText(8);
  row.error = st.ColumnText(9);
  row.artifact_sha256 = st.ColumnText(10);
  row.created_unix_ms = st.ColumnInt64(11);
  row.updated_unix_ms = st.ColumnInt64(12);
  row.tuning_ms = st.ColumnInt64(13);
  row.owner = st.ColumnText(14);
  row.end_to_end_json = st.ColumnText(15);
  return row;
}

// "'queued', 'tuning', 'compiling'": the states of a job that runs again, as
// SQL text.
const std::string& UnfinishedStatesSql() {
  static const std::string* text = [] {
    auto* out = new std::string;
    for (JobState s : kJobStates) {
      if (!IsFinal(s)) *out += StrCat(out->empty() ? "'" : ", '", JobStateName(s), "'");
    }
    return out;
  }();
  return *text;
}

absl::StatusOr<std::vector<JobRow>> CollectJobs(Statement& st) {
  std::vector<JobRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    KILN_STORAGE_ASSIGN_OR_RETURN(row, ReadJob(st));
    out.push_back(std::move(row));
  }
}

}  // namespace rows

namespace {

using rows::CollectJobs;
using rows::InsertRecord;
using rows::IsKnown;
using rows::kJobColumns;
using rows::kRecordColumns;
using rows::ReadJob;
using rows::ReadRecord;
using rows::UnfinishedStatesSql;
using rows::ValidateRecord;

// LIMIT for "no limit" (SQLite's -1 is an error on PostgreSQL).
constexpr int64_t kNoLimit = INT64_MAX;

// Binds a RecordScope to the parameters of rows::ScopeSql(all_param, user_param).
absl::Status BindScope(Statement& st, int all_param, int user_param, const RecordScope& scope) {
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(all_param, scope.all ? 1 : 0));
  return st.BindText(user_param, scope.user);
}

constexpr char kTokenColumns[] =
    "id, \"user\", role, hash, created_unix_ms, revoked_unix_ms, owner";
constexpr char kAgentColumns[] =
    "id, device_key, target, hardware, compiler_version, first_seen_unix_ms, "
    "last_seen_unix_ms, results";

TokenRow ReadToken(const Statement& st) {
  TokenRow row;
  row.id = st.ColumnInt64(0);
  row.user = st.ColumnText(1);
  row.role = st.ColumnText(2);
  row.hash = st.ColumnText(3);
  row.created_unix_ms = st.ColumnInt64(4);
  row.revoked_unix_ms = st.ColumnInt64(5);
  row.owner = st.ColumnText(6);
  return row;
}

AgentRow ReadAgent(const Statement& st) {
  AgentRow row;
  row.id = st.ColumnText(0);
  row.device_key = st.ColumnText(1);
  row.target = st.ColumnText(2);
  row.hardware = st.ColumnText(3);
  row.compiler_version = st.ColumnText(4);
  row.first_seen_unix_ms = st.ColumnInt64(5);
  row.last_seen_unix_ms = st.ColumnInt64(6);
  row.results = st.ColumnInt64(7);
  return row;
}

absl::StatusOr<std::vector<RecordRow>> CollectRecords(Statement& st) {
  std::vector<RecordRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    KILN_STORAGE_ASSIGN_OR_RETURN(row, ReadRecord(st));
    out.push_back(std::move(row));
  }
}

}  // namespace

LogDb::LogDb(std::unique_ptr<Database> db) : db_(std::move(db)) {}
LogDb::~LogDb() = default;

int LogDb::CurrentSchemaVersion() { return static_cast<int>(SchemaMigrations().size()); }

absl::StatusOr<std::unique_ptr<LogDb>> LogDb::Open(const std::string& path) {
  KILN_STORAGE_ASSIGN_OR_RETURN(db, Database::Open(path));
  KILN_STORAGE_RETURN_IF_ERROR(MigrateSchema(*db, SchemaMigrations()));
  return std::unique_ptr<LogDb>(new LogDb(std::move(db)));
}

absl::StatusOr<int> LogDb::SchemaVersion() {
  std::lock_guard<std::mutex> lock(mu_);
  return ReadSchemaVersion(*db_);
}

// ---------------------------------------------------------------- workloads

absl::Status LogDb::UpsertWorkload(const WorkloadRow& row) {
  if (row.key.empty()) return absl::InvalidArgumentError("workload has no key");
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("INSERT INTO workloads(key, op, canonical, flops) VALUES(?,?,?,?) "
                       "ON CONFLICT(key) DO UPDATE SET op = excluded.op, "
                       "canonical = excluded.canonical, flops = excluded.flops"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.op));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.canonical));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindDouble(4, row.flops));
  return st.Run();
}

absl::StatusOr<std::optional<WorkloadRow>> LogDb::GetWorkload(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("SELECT key, op, canonical, flops FROM workloads WHERE key = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, key));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return std::optional<WorkloadRow>();
  WorkloadRow row;
  row.key = st.ColumnText(0);
  row.op = st.ColumnText(1);
  row.canonical = st.ColumnText(2);
  row.flops = st.ColumnDouble(3);
  return std::optional<WorkloadRow>(std::move(row));
}

// ------------------------------------------------------------------ records

absl::StatusOr<int64_t> LogDb::AddRecord(const RecordRow& row) {
  KILN_STORAGE_RETURN_IF_ERROR(ValidateRecord(row));
  std::lock_guard<std::mutex> lock(mu_);
  return InsertRecord(*db_, row);
}

absl::Status LogDb::AddRecords(const std::vector<RecordRow>& rows, const std::string& holder) {
  for (const RecordRow& row : rows) KILN_STORAGE_RETURN_IF_ERROR(ValidateRecord(row));
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(*db_);
  KILN_STORAGE_RETURN_IF_ERROR(tx.status());
  if (!holder.empty() && !rows.empty()) {
    // The fence: the job's row, locked until the records are in, names this
    // tracker (a claim by another waits for it, or skips the job).
    KILN_STORAGE_ASSIGN_OR_RETURN(
        held, db_->Prepare(StrCat("SELECT tracker_id FROM jobs WHERE id = ?", ForUpdate())));
    KILN_STORAGE_RETURN_IF_ERROR(held.BindText(1, rows.front().job_id));
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, held.Step());
    if (!has_row || held.ColumnText(0) != holder) {
      return absl::AbortedError(StrCat("job ", rows.front().job_id, " is held by ",
                                       has_row ? "tracker '" + held.ColumnText(0) + "'" : "nobody",
                                       " now, not '", holder, "': its records are not stored"));
    }
  }
  for (const RecordRow& row : rows) {
    KILN_STORAGE_ASSIGN_OR_RETURN(id, InsertRecord(*db_, row));
    (void)id;
  }
  return tx.Commit();
}

absl::StatusOr<std::optional<RecordRow>> LogDb::BestRecord(const std::string& workload_key,
                                                           const std::string& target,
                                                           const std::string& config,
                                                           const RecordScope& scope) {
  KILN_STORAGE_ASSIGN_OR_RETURN(top, TopK(workload_key, target, 1, config, scope));
  if (top.empty()) return std::optional<RecordRow>();
  return std::optional<RecordRow>(std::move(top.front()));
}

absl::StatusOr<std::vector<RecordRow>> LogDb::TopK(const std::string& workload_key,
                                                   const std::string& target, int k,
                                                   const std::string& config,
                                                   const RecordScope& scope) {
  if (k <= 0) return std::vector<RecordRow>();
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kRecordColumns,
                              " FROM records WHERE workload_key = ?1 AND target = ?2 "
                              "AND (?4 = '' OR config = ?4) AND ",
                              rows::ScopeSql(5, 6), " AND error_kind = '",
                              ErrorKindName(ErrorKind::kNone),
                              "' ORDER BY mean_cost_s ASC, id ASC LIMIT ?3")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, k));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, config));
  KILN_STORAGE_RETURN_IF_ERROR(BindScope(st, 5, 6, scope));
  return CollectRecords(st);
}

absl::StatusOr<std::vector<RecordRow>> LogDb::QueryRecords(const std::string& workload_key,
                                                           const std::string& target, int limit,
                                                           int64_t offset,
                                                           const RecordScope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kRecordColumns,
                              " FROM records WHERE (?1 = '' OR workload_key = ?1) "
                              "AND (?2 = '' OR target = ?2) AND ",
                              rows::ScopeSql(5, 6),
                              " ORDER BY unix_ms DESC, id DESC LIMIT ?3 OFFSET ?4")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, limit <= 0 ? kNoLimit : limit));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(4, std::max<int64_t>(offset, 0)));
  KILN_STORAGE_RETURN_IF_ERROR(BindScope(st, 5, 6, scope));
  return CollectRecords(st);
}

absl::StatusOr<std::set<std::string>> LogDb::MeasuredConfigs(const std::string& workload_key,
                                                             const std::string& target,
                                                             const std::string& compiler_version,
                                                             const RecordScope& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT DISTINCT config FROM records WHERE workload_key = ?1 AND "
                              "target = ?2 AND compiler_version = ?3 AND ",
                              rows::ScopeSql(4, 5))));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, compiler_version));
  KILN_STORAGE_RETURN_IF_ERROR(BindScope(st, 4, 5, scope));
  std::set<std::string> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out.insert(st.ColumnText(0));
  }
}

absl::StatusOr<int64_t> LogDb::CountRecords(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(st, db_->Prepare("SELECT COUNT(*) FROM records WHERE job_id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  return has_row ? st.ColumnInt64(0) : 0;
}

absl::StatusOr<std::vector<RecordRow>> LogDb::RecordsOfJob(const std::string& job_id, int limit,
                                                           int64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kRecordColumns,
                              " FROM records WHERE job_id = ? ORDER BY id ASC LIMIT ? OFFSET ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, limit <= 0 ? kNoLimit : limit));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, std::max<int64_t>(offset, 0)));
  return CollectRecords(st);
}

// --------------------------------------------------------------------- jobs

absl::Status LogDb::CreateJob(const JobRow& row) {
  if (row.id.empty()) return absl::InvalidArgumentError("job has no id");
  if (!IsKnown(row.state)) {
    return absl::InvalidArgumentError(StrCat("unknown job state ", static_cast<int>(row.state)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("INSERT INTO jobs(", kJobColumns, ", tracker_id, lease_until_ms",
                              ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                              "ON CONFLICT DO NOTHING")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.model_name));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.model_sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.device_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(6, JobStateName(row.state)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(7, row.trials));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(8, row.trials_done));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(9, row.options_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(10, row.error));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(11, row.artifact_sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(12, row.created_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(13, row.updated_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(14, row.tuning_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(15, row.owner));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(16, row.end_to_end_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(17, row.tracker_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(18, row.lease_until_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (db_->Changes() == 0) {
    return absl::AlreadyExistsError(StrCat("job '", row.id, "' already exists"));
  }
  return absl::OkStatus();
}

absl::Status LogDb::UpdateJob(const JobRow& row) {
  if (!IsKnown(row.state)) {
    return absl::InvalidArgumentError(StrCat("unknown job state ", static_cast<int>(row.state)));
  }
  std::lock_guard<std::mutex> lock(mu_);
  // The id and the creation time never change.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("UPDATE jobs SET model_name = ?2, model_sha256 = ?3, device_key = ?4, "
                       "target = ?5, state = ?6, trials = ?7, trials_done = ?8, "
                       "options_json = ?9, error = ?10, artifact_sha256 = ?11, "
                       "updated_unix_ms = ?12, tuning_ms = ?13, end_to_end = ?14 WHERE id = ?1"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.model_name));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.model_sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.device_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(6, JobStateName(row.state)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(7, row.trials));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(8, row.trials_done));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(9, row.options_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(10, row.error));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(11, row.artifact_sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(12, row.updated_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(13, row.tuning_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(14, row.end_to_end_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (db_->Changes() == 0) return absl::NotFoundError(StrCat("no job '", row.id, "'"));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRow>> LogDb::GetJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, id));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return std::optional<JobRow>();
  KILN_STORAGE_ASSIGN_OR_RETURN(row, ReadJob(st));
  return std::optional<JobRow>(std::move(row));
}

absl::StatusOr<std::vector<JobRow>> LogDb::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(
              StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY created_unix_ms DESC, id DESC")));
  return CollectJobs(st);
}

absl::StatusOr<std::vector<JobRow>> LogDb::UnfinishedJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  // Oldest first: the order in which a restarted tracker resumes them.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
                              UnfinishedStatesSql(),
                              ") "
                              "ORDER BY created_unix_ms ASC, id ASC")));
  return CollectJobs(st);
}

// ------------------------------------------------------------------- tokens

absl::StatusOr<int64_t> LogDb::AddToken(const TokenRow& row) {
  if (row.user.empty()) return absl::InvalidArgumentError("a token needs a user name");
  if (row.role != "user" && row.role != "agent" && row.role != "admin") {
    return absl::InvalidArgumentError(
        StrCat("unknown role '", row.role, "' (user, agent or admin)"));
  }
  if (!IsSha256Hex(row.hash)) return absl::InvalidArgumentError("a token hash is a SHA-256");
  if (!row.owner.empty() && row.role != "agent") {
    return absl::InvalidArgumentError("only an agent's token has an owner");
  }
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("INSERT INTO tokens(\"user\", role, hash, created_unix_ms, owner) "
                       "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.user));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.role));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.hash));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(4, row.created_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.owner));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return absl::AlreadyExistsError("this token is stored already");
  return st.ColumnInt64(0);
}

absl::StatusOr<std::vector<TokenRow>> LogDb::ListTokens() {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kTokenColumns, " FROM tokens ORDER BY id")));
  std::vector<TokenRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) break;
    out.push_back(ReadToken(st));
  }
  return out;
}

absl::Status LogDb::RevokeToken(int64_t id, int64_t unix_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("UPDATE tokens SET revoked_unix_ms = ?2 WHERE id = ?1 AND "
                       "revoked_unix_ms = 0"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(1, id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(StrCat("no valid token with id ", id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<TokenRow>> LogDb::TokenByHash(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kTokenColumns, " FROM tokens WHERE hash = ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, hash));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return std::optional<TokenRow>();
  return std::optional<TokenRow>(ReadToken(st));
}

absl::Status LogDb::SetJobTasks(const std::string& job_id, const std::vector<JobTaskRow>& tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(*db_);
  KILN_STORAGE_RETURN_IF_ERROR(tx.status());
  KILN_STORAGE_ASSIGN_OR_RETURN(del, db_->Prepare("DELETE FROM job_tasks WHERE job_id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(del.BindText(1, job_id));
  KILN_STORAGE_RETURN_IF_ERROR(del.Run());
  KILN_STORAGE_ASSIGN_OR_RETURN(
      add, db_->Prepare("INSERT INTO job_tasks(job_id, position, workload_key, occurrences) "
                        "VALUES(?, ?, ?, ?)"));
  for (size_t i = 0; i < tasks.size(); ++i) {
    KILN_STORAGE_RETURN_IF_ERROR(add.Reset());
    KILN_STORAGE_RETURN_IF_ERROR(add.BindText(1, job_id));
    KILN_STORAGE_RETURN_IF_ERROR(add.BindInt64(2, static_cast<int64_t>(i)));
    KILN_STORAGE_RETURN_IF_ERROR(add.BindText(3, tasks[i].workload_key));
    KILN_STORAGE_RETURN_IF_ERROR(add.BindInt64(4, tasks[i].occurrences));
    KILN_STORAGE_RETURN_IF_ERROR(add.Run());
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<JobTaskRow>> LogDb::JobTasks(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("SELECT workload_key, occurrences FROM job_tasks WHERE job_id = ? "
                       "ORDER BY position"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  std::vector<JobTaskRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out.push_back({st.ColumnText(0), static_cast<int32_t>(st.ColumnInt64(1))});
  }
}

// -------------------------------------------------------------- cost models

absl::Status LogDb::SaveCostModel(const CostModelRow& row) {
  if (row.model.empty()) return absl::InvalidArgumentError("empty cost model");
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("INSERT INTO cost_models(workload_key, target, "
                       "compiler_version, trained_on, model, updated_unix_ms) "
                       "VALUES(?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT(workload_key, target, compiler_version) DO UPDATE SET "
                       "trained_on = excluded.trained_on, model = excluded.model, "
                       "updated_unix_ms = excluded.updated_unix_ms"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.compiler_version));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(4, row.trained_on));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindBlob(5, row.model));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(6, row.updated_unix_ms));
  return st.Run();
}

absl::StatusOr<std::optional<CostModelRow>> LogDb::GetCostModel(
    const std::string& workload_key, const std::string& target,
    const std::string& compiler_version) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("SELECT trained_on, model, updated_unix_ms FROM cost_models WHERE "
                       "workload_key = ? AND target = ? AND compiler_version = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, compiler_version));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return std::optional<CostModelRow>();
  CostModelRow row;
  row.workload_key = workload_key;
  row.target = target;
  row.compiler_version = compiler_version;
  row.trained_on = st.ColumnInt64(0);
  row.model = st.ColumnBlob(1);
  row.updated_unix_ms = st.ColumnInt64(2);
  return std::optional<CostModelRow>(std::move(row));
}

// ------------------------------------------------------------------- agents

absl::Status LogDb::UpsertAgent(const AgentRow& row) {
  if (row.id.empty()) return absl::InvalidArgumentError("agent has no id");
  std::lock_guard<std::mutex> lock(mu_);
  // first_seen keeps the earliest non-zero time; the rest is overwritten.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat(
              "INSERT INTO agents(", kAgentColumns,
              ") VALUES(?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET "
              "device_key = excluded.device_key, target = excluded.target, "
              "hardware = excluded.hardware, compiler_version = excluded.compiler_version, "
              "first_seen_unix_ms = CASE WHEN agents.first_seen_unix_ms = 0 "
              "THEN excluded.first_seen_unix_ms "
              "WHEN excluded.first_seen_unix_ms = 0 THEN agents.first_seen_unix_ms "
              "WHEN agents.first_seen_unix_ms < excluded.first_seen_unix_ms "
              "THEN agents.first_seen_unix_ms ELSE excluded.first_seen_unix_ms END, "
              "last_seen_unix_ms = excluded.last_seen_unix_ms, results = excluded.results")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.device_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.hardware));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.compiler_version));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(6, row.first_seen_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(7, row.last_seen_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(8, row.results));
  return st.Run();
}

absl::StatusOr<std::vector<AgentRow>> LogDb::ListAgents() {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare(StrCat("SELECT ", kAgentColumns, " FROM agents ORDER BY id")));
  std::vector<AgentRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out.push_back(ReadAgent(st));
  }
}

// ---------------------------------------------------------------- artifacts

absl::Status LogDb::AddArtifact(const ArtifactRow& row) {
  if (row.sha256.empty()) return absl::InvalidArgumentError("artifact has no sha256");
  std::lock_guard<std::mutex> lock(mu_);
  // Content-addressed: adding the same bytes again is a no-op.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("INSERT INTO artifacts(sha256, size, kind, job_id, "
                       "created_unix_ms) VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, row.size));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.kind));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(5, row.created_unix_ms));
  return st.Run();
}

absl::StatusOr<std::vector<ArtifactRow>> LogDb::ListArtifacts(const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("SELECT sha256, size, kind, job_id, created_unix_ms FROM artifacts "
                       "WHERE kind = ? ORDER BY created_unix_ms ASC, sha256 ASC"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, kind));
  std::vector<ArtifactRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    ArtifactRow row;
    row.sha256 = st.ColumnText(0);
    row.size = st.ColumnInt64(1);
    row.kind = st.ColumnText(2);
    row.job_id = st.ColumnText(3);
    row.created_unix_ms = st.ColumnInt64(4);
    out.push_back(std::move(row));
  }
}

absl::Status LogDb::DeleteArtifact(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(st, db_->Prepare("DELETE FROM artifacts WHERE sha256 = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, sha256));
  return st.Run();
}

absl::StatusOr<std::optional<ArtifactRow>> LogDb::GetArtifact(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db_->Prepare("SELECT sha256, size, kind, job_id, created_unix_ms FROM artifacts "
                       "WHERE sha256 = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, sha256));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return std::optional<ArtifactRow>();
  ArtifactRow row;
  row.sha256 = st.ColumnText(0);
  row.size = st.ColumnInt64(1);
  row.kind = st.ColumnText(2);
  row.job_id = st.ColumnText(3);
  row.created_unix_ms = st.ColumnInt64(4);
  return std::optional<ArtifactRow>(std::move(row));
}

}  // namespace kiln::storage
