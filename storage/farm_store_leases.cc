// The farm store's tables for several trackers on one database: job
// leases (which tracker runs a job, until when) and the batches trackers
// relay to each other's agents. Row locks are skipped, not waited for
// (PostgreSQL's FOR UPDATE SKIP LOCKED), so each job and each batch goes to
// exactly one tracker however many ask at once.
#include "base/str.h"
#include "storage/connection.h"
#include "storage/database.h"
#include "storage/farm_store.h"
#include "storage/job_rows.h"
#include "storage/row_reads.h"

namespace kiln::storage {

namespace {

constexpr char kBatchColumns[] =
    "id, job_id, device_key, owner, holder, state, work, results, lease_until_ms, "
    "created_unix_ms";

// A batch state as an SQL literal: 'queued'.
std::string Sql(BatchState state) { return StrCat("'", NameOf(state), "'"); }

absl::StatusOr<BatchRow> ReadBatch(const Statement& st) {
  BatchRow row;
  row.id = st.ColumnText(0);
  row.job_id = st.ColumnText(1);
  row.device_key = st.ColumnText(2);
  row.owner = st.ColumnText(3);
  row.holder = st.ColumnText(4);
  const std::string state = st.ColumnText(5);
  std::optional<BatchState> parsed = ParseName<BatchState>(state);
  if (!parsed.has_value()) {
    return absl::DataLossError(StrCat("batches.state holds an unknown state '", state, "'"));
  }
  row.state = *parsed;
  row.work = st.ColumnText(6);
  row.results = st.ColumnText(7);
  row.lease_until_ms = st.ColumnInt64(8);
  row.created_unix_ms = st.ColumnInt64(9);
  return row;
}

}  // namespace

bool FarmStore::SharedByTrackers() const { return c_->db->engine() == Database::Engine::kPostgres; }

const char* FarmStore::SkipLocked() const {
  return SharedByTrackers() ? " FOR UPDATE SKIP LOCKED" : "";
}

// -------------------------------------------------------------- job leases

absl::StatusOr<std::vector<JobRow>> FarmStore::ClaimJobs(const std::string& tracker, int64_t now_ms,
                                                         int64_t until_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st,
      c_->db->Prepare(StrCat("UPDATE jobs SET tracker_id = ?1, lease_until_ms = ?2 WHERE id IN "
                             "(SELECT id FROM jobs WHERE state IN (",
                             rows::UnfinishedStatesSql(),
                             ") AND tracker_id <> ?1 AND (tracker_id = '' OR lease_until_ms < ?3) "
                             "ORDER BY created_unix_ms",
                             SkipLocked(), ") RETURNING ", rows::kJobColumns)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, tracker));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, until_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, now_ms));
  return rows::AllRows(st, rows::ReadJob);
}

absl::StatusOr<std::vector<std::pair<std::string, bool>>> FarmStore::RenewJobLeases(
    const std::string& tracker, int64_t until_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("UPDATE jobs SET lease_until_ms = ?2 WHERE tracker_id = ?1 AND "
                                 "state IN (",
                                 rows::UnfinishedStatesSql(), ") RETURNING id, cancel_requested")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, tracker));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, until_ms));
  std::vector<std::pair<std::string, bool>> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out.emplace_back(st.ColumnText(0), st.ColumnInt64(1) != 0);
  }
}

absl::Status FarmStore::RequestCancel(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("UPDATE jobs SET cancel_requested = 1 WHERE id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (c_->db->Changes() == 0) return absl::NotFoundError(StrCat("no job '", job_id, "'"));
  return absl::OkStatus();
}

RecordFence FarmStore::JobHeldBy(std::string tracker) {
  return [tracker = std::move(tracker)](Database& db, const std::string& job_id) -> absl::Status {
    const bool shared = db.engine() == Database::Engine::kPostgres;
    KILN_STORAGE_ASSIGN_OR_RETURN(
        held, db.Prepare(
                  StrCat("SELECT tracker_id FROM jobs WHERE id = ?", shared ? " FOR UPDATE" : "")));
    KILN_STORAGE_RETURN_IF_ERROR(held.BindText(1, job_id));
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, held.Step());
    if (!has_row || held.ColumnText(0) != tracker) {
      return absl::AbortedError(StrCat("job ", job_id, " is held by ",
                                       has_row ? "tracker '" + held.ColumnText(0) + "'" : "nobody",
                                       " now, not '", tracker, "': its records are not stored"));
    }
    return absl::OkStatus();
  };
}

// --------------------------------------------------------- relayed batches

absl::Status FarmStore::PublishBatch(const BatchRow& row) {
  if (row.id.empty() || row.owner.empty() || row.device_key.empty()) {
    return absl::InvalidArgumentError("a relayed batch needs an id, an owner and a device key");
  }
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("INSERT INTO batches(", kBatchColumns, ") VALUES(?, ?, ?, ?, '', ",
                                 Sql(BatchState::kQueued), ", ?, '', 0, ?)")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, row.job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.device_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.owner));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.work));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(6, row.created_unix_ms));
  return st.Run();
}

absl::StatusOr<std::optional<BatchRow>> FarmStore::ClaimBatch(const std::string& device_key,
                                                              const std::string& holder,
                                                              int64_t until_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("UPDATE batches SET state = ", Sql(BatchState::kLeased),
                                 ", holder = ?2, lease_until_ms = ?3 WHERE id = (SELECT id FROM "
                                 "batches WHERE device_key = ?1 AND state = ",
                                 Sql(BatchState::kQueued),
                                 " AND owner <> ?2 "
                                 "ORDER BY created_unix_ms LIMIT 1",
                                 SkipLocked(), ") RETURNING ", kBatchColumns)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, device_key));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, holder));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(3, until_ms));
  return rows::FirstRow(st, ReadBatch);
}

absl::StatusOr<bool> FarmStore::SetBatchLease(const std::string& id, const std::string& holder,
                                              int64_t until_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("UPDATE batches SET lease_until_ms = ? WHERE id = ? AND "
                                 "holder = ? AND state = ",
                                 Sql(BatchState::kLeased))));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(1, until_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, holder));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  return c_->db->Changes() > 0;
}

absl::StatusOr<bool> FarmStore::FinishBatch(const std::string& id, const std::string& holder,
                                            const std::string& results) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat(
              "UPDATE batches SET state = ", Sql(BatchState::kDone),
              ", results = ? WHERE id = ? AND holder = ? AND state = ", Sql(BatchState::kLeased))));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, results));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, holder));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  return c_->db->Changes() > 0;
}

absl::StatusOr<std::vector<BatchRow>> FarmStore::TakeFinishedBatches(const std::string& owner) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("DELETE FROM batches WHERE owner = ? AND state = ",
                                 Sql(BatchState::kDone), " RETURNING ", kBatchColumns)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, owner));
  return rows::AllRows(st, ReadBatch);
}

absl::StatusOr<bool> FarmStore::WithdrawBatch(const std::string& id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(
              StrCat("DELETE FROM batches WHERE id = ? AND state = ", Sql(BatchState::kQueued))));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, id));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  return c_->db->Changes() > 0;
}

absl::StatusOr<std::map<std::string, int64_t>> FarmStore::QueuedBatchesByKey(
    const std::string& except_owner) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT device_key, COUNT(*) FROM batches WHERE state = ",
                                 Sql(BatchState::kQueued), " AND owner <> ? GROUP BY device_key")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, except_owner));
  std::map<std::string, int64_t> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out[st.ColumnText(0)] = st.ColumnInt64(1);
  }
}

absl::StatusOr<int64_t> FarmStore::RequeueExpiredBatches(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("UPDATE batches SET state = ", Sql(BatchState::kQueued),
                                 ", holder = '', lease_until_ms = 0 WHERE state = ",
                                 Sql(BatchState::kLeased), " AND lease_until_ms < ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(1, now_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  return c_->db->Changes();
}

absl::Status FarmStore::DropBatchesOfJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(st, c_->db->Prepare("DELETE FROM batches WHERE job_id = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, job_id));
  return st.Run();
}

}  // namespace kiln::storage
