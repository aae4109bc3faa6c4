#pragma once
// What the tuning database's sources share about record rows (tuning_db.cc,
// the JSON lines import and export in tuning_db_jsonl.cc): the columns a
// record is read with, its costs as text, its checks, reading and inserting
// one; and storage's status macros. Private to storage/.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/tuning_db.h"
#include "storage/vocabulary.h"

#define KILN_STORAGE_RETURN_IF_ERROR(expr)    \
  do {                                        \
    if (absl::Status _s = (expr); !_s.ok()) { \
      return _s;                              \
    }                                         \
  } while (false)

#define KILN_STORAGE_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_or = (expr);                        \
  if (!lhs##_or.ok()) return lhs##_or.status();  \
  auto lhs = std::move(*lhs##_or)

namespace kiln::storage::rows {

// A record's columns; its costs are rows of record_costs (record_id,
// position, cost_s), read by AttachCosts.
inline constexpr char kRecordColumns[] =
    "id, workload_key, target, config, error_kind, error_message, mean_cost_s, "
    "compiler_version, agent_id, job_id, unix_ms, farm, owner, cut_short";
// Columns of kRecordColumns (a query's further columns start here).
inline constexpr int kRecordColumnCount = 14;
// The SQL condition of a RecordScope whose `all` and `user` are bound to
// parameters ?A and ?U (as numbered in the query).
std::string ScopeSql(int all_param, int user_param);

// A record's costs stored as rows of record_costs, in order.
absl::Status InsertCosts(Database& db, int64_t record_id, const std::vector<double>& costs);
// Reads the costs of `rows` (selected with kRecordColumns) into them;
// DATA_LOSS for a record whose positions have a gap.
absl::Status AttachCosts(Database& db, std::vector<RecordRow>& rows);
// INVALID_ARGUMENT for a row the table cannot hold: no workload key or
// target, an error kind outside the enum. What every insert checks; the
// measurement itself was checked where it entered kiln (Measurement).
absl::Status CheckRow(const RecordRow& row);
// CheckRow, and the check of a measurement that enters from a file (`kiln
// records import`): finite, non-negative costs and mean.
absl::Status CheckImported(const RecordRow& row);
// A row selected with kRecordColumns first, without its costs
// (AttachCosts); DATA_LOSS for text no kiln wrote.
absl::StatusOr<RecordRow> ReadRecord(const Statement& st);
// Inserts a record the caller validated; its id.
absl::StatusOr<int64_t> InsertRecord(Database& db, const RecordRow& row);

}  // namespace kiln::storage::rows
