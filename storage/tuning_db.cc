#include "storage/tuning_db.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "base/str.h"
#include "storage/connection.h"
#include "storage/database.h"
#include "storage/migrations.h"
#include "storage/record_rows.h"
#include "storage/row_reads.h"

namespace kiln::storage {

// ------------------------------------------------------------ record rows

namespace rows {

namespace {

// Costs go in and out in chunks of this many (fixed statements: one text
// each, prepared once per connection, whatever the number of costs).
constexpr int kCostChunk = 64;

}  // namespace

absl::Status InsertCosts(Database& db, int64_t record_id, const std::vector<double>& costs) {
  // Whole chunks of kCostChunk rows in one statement, the rest one by one.
  static const std::string kOne =
      "INSERT INTO record_costs(record_id, position, cost_s) VALUES(?,?,?)";
  static const std::string kChunk = [] {
    std::string sql = "INSERT INTO record_costs(record_id, position, cost_s) VALUES";
    for (int i = 0; i < kCostChunk; ++i) sql += i == 0 ? "(?,?,?)" : ",(?,?,?)";
    return sql;
  }();
  size_t i = 0;
  while (i < costs.size()) {
    const bool chunk = costs.size() - i >= static_cast<size_t>(kCostChunk);
    const size_t n = chunk ? kCostChunk : 1;
    KILN_STORAGE_ASSIGN_OR_RETURN(st, db.Prepare(chunk ? kChunk : kOne));
    for (size_t k = 0; k < n; ++k, ++i) {
      const int p = static_cast<int>(3 * k);
      KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(p + 1, record_id));
      KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(p + 2, static_cast<int64_t>(i)));
      KILN_STORAGE_RETURN_IF_ERROR(st.BindDouble(p + 3, costs[i]));
    }
    KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  }
  return absl::OkStatus();
}

absl::Status AttachCosts(Database& db, std::vector<RecordRow>& rows) {
  static const std::string kSql = [] {
    std::string sql = "SELECT record_id, position, cost_s FROM record_costs WHERE record_id IN (";
    for (int i = 0; i < kCostChunk; ++i) sql += i == 0 ? "?" : ",?";
    return sql + ") ORDER BY record_id, position";
  }();
  std::map<int64_t, RecordRow*> by_id;
  for (size_t first = 0; first < rows.size(); first += kCostChunk) {
    KILN_STORAGE_ASSIGN_OR_RETURN(st, db.Prepare(kSql));
    by_id.clear();
    for (int k = 0; k < kCostChunk; ++k) {
      const size_t i = first + static_cast<size_t>(k);
      // Ids start at 1: 0 pads a short chunk and matches nothing.
      const int64_t id = i < rows.size() ? rows[i].id : 0;
      if (i < rows.size()) {
        rows[i].costs_s.clear();
        by_id[id] = &rows[i];
      }
      KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(k + 1, id));
    }
    while (true) {
      KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
      if (!has_row) break;
      auto it = by_id.find(st.ColumnInt64(0));
      if (it == by_id.end()) return absl::InternalError("record_costs answered another record");
      RecordRow* row = it->second;
      if (st.ColumnInt64(1) != static_cast<int64_t>(row->costs_s.size())) {
        return absl::DataLossError(
            StrCat("record_costs of record ", row->id, " skip position ", row->costs_s.size()));
      }
      row->costs_s.push_back(st.ColumnDouble(2));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRow(const RecordRow& row) {
  if (row.workload_key.empty()) return absl::InvalidArgumentError("record has no workload key");
  if (row.target.empty()) return absl::InvalidArgumentError("record has no target");
  if (!IsKnownValue(row.error_kind)) {
    return absl::InvalidArgumentError(
        StrCat("unknown error kind ", static_cast<int>(row.error_kind)));
  }
  return absl::OkStatus();
}

absl::Status CheckImported(const RecordRow& row) {
  KILN_STORAGE_RETURN_IF_ERROR(CheckRow(row));
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
  row.mean_cost_s = st.ColumnDouble(6);
  row.compiler_version = st.ColumnText(7);
  row.agent_id = st.ColumnText(8);
  row.job_id = st.ColumnText(9);
  row.unix_ms = st.ColumnInt64(10);
  row.farm = st.ColumnText(11);
  row.owner = st.ColumnText(12);
  row.cut_short = st.ColumnInt64(13) != 0;
  return row;
}

// Inserts a record; the caller validated it.
absl::StatusOr<int64_t> InsertRecord(Database& db, const RecordRow& row) {
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, db.Prepare("INSERT INTO records(workload_key, target, config, error_kind, "
                     "error_message, mean_cost_s, compiler_version, agent_id, job_id, "
                     "unix_ms, farm, owner, cut_short) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?) "
                     "RETURNING id"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.config));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, ErrorKindName(row.error_kind)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.error_message));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindDouble(6, row.mean_cost_s));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(7, row.compiler_version));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(8, row.agent_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(9, row.job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(10, row.unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(11, row.farm));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(12, row.owner));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(13, row.cut_short ? 1 : 0));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return absl::InternalError("INSERT ... RETURNING gave no id");
  const int64_t id = st.ColumnInt64(0);
  KILN_STORAGE_RETURN_IF_ERROR(InsertCosts(db, id, row.costs_s));
  return id;
}

std::string ScopeSql(int all_param, int user_param) {
  return StrCat("(?", all_param, " = 1 OR owner = '' OR owner = ?", user_param, ")");
}

}  // namespace rows

namespace {

using rows::CheckRow;
using rows::InsertRecord;
using rows::kRecordColumns;
using rows::ReadRecord;

// LIMIT for "no limit" (SQLite's -1 is an error on PostgreSQL).
constexpr int64_t kNoLimit = INT64_MAX;

// Binds a RecordScope to the parameters of rows::ScopeSql(all_param, user_param).
absl::Status BindScope(Statement& st, int all_param, int user_param, const RecordScope& scope) {
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(all_param, scope.all ? 1 : 0));
  return st.BindText(user_param, scope.user);
}

absl::StatusOr<std::vector<RecordRow>> CollectRecords(Database& db, Statement& st) {
  KILN_STORAGE_ASSIGN_OR_RETURN(out, rows::AllRows(st, ReadRecord));
  KILN_STORAGE_RETURN_IF_ERROR(rows::AttachCosts(db, out));
  return out;
}

}  // namespace

TuningDb::TuningDb(std::shared_ptr<Connection> connection) : c_(std::move(connection)) {}
TuningDb::~TuningDb() = default;

absl::StatusOr<std::unique_ptr<TuningDb>> TuningDb::Open(const std::string& url) {
  KILN_STORAGE_ASSIGN_OR_RETURN(connection, OpenConnection(url));
  return std::make_unique<TuningDb>(std::move(connection));
}

absl::StatusOr<int> TuningDb::SchemaVersion() {
  std::lock_guard<std::mutex> lock(c_->mu);
  return ReadSchemaVersion(*c_->db);
}

// ---------------------------------------------------------------- workloads

absl::Status TuningDb::UpsertWorkload(const WorkloadRow& row) {
  if (row.key.empty()) return absl::InvalidArgumentError("workload has no key");
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("INSERT INTO workloads(key, op, canonical, flops) VALUES(?,?,?,?) "
                          "ON CONFLICT(key) DO UPDATE SET op = excluded.op, "
                          "canonical = excluded.canonical, flops = excluded.flops"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.op));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.canonical));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindDouble(4, row.flops));
  return st.Run();
}

absl::StatusOr<std::optional<WorkloadRow>> TuningDb::GetWorkload(const std::string& key) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("SELECT key, op, canonical, flops FROM workloads WHERE key = ?"));
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

absl::StatusOr<int64_t> TuningDb::AddRecord(const RecordRow& row) {
  KILN_STORAGE_RETURN_IF_ERROR(CheckRow(row));
  std::lock_guard<std::mutex> lock(c_->mu);
  return InsertRecord(*c_->db, row);
}

absl::Status TuningDb::AddRecords(const std::vector<RecordRow>& rows, const RecordFence& fence) {
  for (const RecordRow& row : rows) KILN_STORAGE_RETURN_IF_ERROR(CheckRow(row));
  std::lock_guard<std::mutex> lock(c_->mu);
  Transaction tx(*c_->db);
  KILN_STORAGE_RETURN_IF_ERROR(tx.status());
  if (fence && !rows.empty()) KILN_STORAGE_RETURN_IF_ERROR(fence(*c_->db, rows.front().job_id));
  for (const RecordRow& row : rows) {
    KILN_STORAGE_ASSIGN_OR_RETURN(id, InsertRecord(*c_->db, row));
    (void)id;
  }
  return tx.Commit();
}

absl::StatusOr<std::optional<RecordRow>> TuningDb::BestRecord(const std::string& workload_key,
                                                              const std::string& target,
                                                              const std::string& config,
                                                              const RecordScope& scope) {
  KILN_STORAGE_ASSIGN_OR_RETURN(top, TopK(workload_key, target, 1, config, scope));
  if (top.empty()) return std::optional<RecordRow>();
  return std::optional<RecordRow>(std::move(top.front()));
}

absl::StatusOr<std::vector<RecordRow>> TuningDb::TopK(const std::string& workload_key,
                                                      const std::string& target, int k,
                                                      const std::string& config,
                                                      const RecordScope& scope) {
  if (k <= 0) return std::vector<RecordRow>();
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kRecordColumns,
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
  return CollectRecords(*c_->db, st);
}

absl::StatusOr<std::vector<RecordRow>> TuningDb::QueryRecords(const std::string& workload_key,
                                                              const std::string& target, int limit,
                                                              int64_t offset,
                                                              const RecordScope& scope) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kRecordColumns,
                                 " FROM records WHERE (?1 = '' OR workload_key = ?1) "
                                 "AND (?2 = '' OR target = ?2) AND ",
                                 rows::ScopeSql(5, 6),
                                 " ORDER BY unix_ms DESC, id DESC LIMIT ?3 OFFSET ?4")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, workload_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, target));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, limit <= 0 ? kNoLimit : limit));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(4, std::max<int64_t>(offset, 0)));
  KILN_STORAGE_RETURN_IF_ERROR(BindScope(st, 5, 6, scope));
  return CollectRecords(*c_->db, st);
}

absl::StatusOr<std::set<std::string>> TuningDb::MeasuredConfigs(const std::string& workload_key,
                                                                const std::string& target,
                                                                const std::string& compiler_version,
                                                                const RecordScope& scope) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT DISTINCT config FROM records WHERE workload_key = ?1 AND "
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

absl::StatusOr<int64_t> TuningDb::CountRecords(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(st,
                                c_->db->Prepare("SELECT COUNT(*) FROM records WHERE job_id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  return has_row ? st.ColumnInt64(0) : 0;
}

absl::StatusOr<std::vector<RecordRow>> TuningDb::RecordsOfJob(const std::string& job_id, int limit,
                                                              int64_t offset) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st,
      c_->db->Prepare(StrCat("SELECT ", kRecordColumns,
                             " FROM records WHERE job_id = ? ORDER BY id ASC LIMIT ? OFFSET ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, limit <= 0 ? kNoLimit : limit));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, std::max<int64_t>(offset, 0)));
  return CollectRecords(*c_->db, st);
}

// ---------------------------------------------------------------- job tasks

absl::Status TuningDb::SetJobTasks(const std::string& job_id,
                                   const std::vector<JobTaskRow>& tasks) {
  std::lock_guard<std::mutex> lock(c_->mu);
  Transaction tx(*c_->db);
  KILN_STORAGE_RETURN_IF_ERROR(tx.status());
  KILN_STORAGE_ASSIGN_OR_RETURN(del, c_->db->Prepare("DELETE FROM job_tasks WHERE job_id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(del.BindText(1, job_id));
  KILN_STORAGE_RETURN_IF_ERROR(del.Run());
  KILN_STORAGE_ASSIGN_OR_RETURN(
      add, c_->db->Prepare("INSERT INTO job_tasks(job_id, position, workload_key, occurrences) "
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

absl::StatusOr<std::vector<JobTaskRow>> TuningDb::JobTasks(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("SELECT workload_key, occurrences FROM job_tasks WHERE job_id = ? "
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

absl::Status TuningDb::SaveCostModel(const CostModelRow& row) {
  if (row.model.empty()) return absl::InvalidArgumentError("empty cost model");
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("INSERT INTO cost_models(workload_key, target, "
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

absl::StatusOr<std::optional<CostModelRow>> TuningDb::GetCostModel(
    const std::string& workload_key, const std::string& target,
    const std::string& compiler_version) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("SELECT trained_on, model, updated_unix_ms FROM cost_models WHERE "
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

}  // namespace kiln::storage
