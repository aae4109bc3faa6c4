#include "storage/farm_store.h"

#include <utility>

#include "absl/status/status.h"
#include "base/sha256.h"
#include "base/str.h"
#include "storage/connection.h"
#include "storage/database.h"
#include "storage/job_rows.h"
#include "storage/migrations.h"
#include "storage/row_reads.h"

namespace kiln::storage {

// ------------------------------------------------------------------ job rows

namespace rows {

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

}  // namespace rows

namespace {

using rows::kJobColumns;
using rows::ReadJob;
using rows::UnfinishedStatesSql;

constexpr char kTokenColumns[] =
    "id, \"user\", role, hash, created_unix_ms, revoked_unix_ms, owner";
constexpr char kAgentColumns[] =
    "id, device_key, target, hardware, compiler_version, first_seen_unix_ms, "
    "last_seen_unix_ms, results";

// DATA_LOSS for a role no kiln wrote.
absl::StatusOr<TokenRow> ReadToken(const Statement& st) {
  TokenRow row;
  row.id = st.ColumnInt64(0);
  row.user = st.ColumnText(1);
  const std::string role = st.ColumnText(2);
  std::optional<Role> parsed = ParseRole(role);
  if (!parsed.has_value()) {
    return absl::DataLossError(
        StrCat("tokens.role of token ", row.id, " holds an unknown role '", role, "'"));
  }
  row.role = *parsed;
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

// Binds parameters 1-11 of an insert or update of the jobs table, in
// kJobColumns' order: id to artifact_sha256.
absl::Status BindJobFields(Statement& st, const JobRow& row) {
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
  return absl::OkStatus();
}

}  // namespace

FarmStore::FarmStore(std::shared_ptr<Connection> connection) : c_(std::move(connection)) {}
FarmStore::~FarmStore() = default;

absl::StatusOr<std::unique_ptr<FarmStore>> FarmStore::Open(const std::string& url) {
  KILN_STORAGE_ASSIGN_OR_RETURN(connection, OpenConnection(url));
  return std::make_unique<FarmStore>(std::move(connection));
}

absl::StatusOr<int> FarmStore::SchemaVersion() {
  std::lock_guard<std::mutex> lock(c_->mu);
  return ReadSchemaVersion(*c_->db);
}

// --------------------------------------------------------------------- jobs

absl::Status FarmStore::CreateJob(const JobRow& row) {
  if (row.id.empty()) return absl::InvalidArgumentError("job has no id");
  if (!IsKnownValue(row.state)) {
    return absl::InvalidArgumentError(StrCat("unknown job state ", static_cast<int>(row.state)));
  }
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("INSERT INTO jobs(", kJobColumns, ", tracker_id, lease_until_ms",
                                 ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                                 "ON CONFLICT DO NOTHING")));
  KILN_STORAGE_RETURN_IF_ERROR(BindJobFields(st, row));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(12, row.created_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(13, row.updated_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(14, row.tuning_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(15, row.owner));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(16, row.end_to_end_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(17, row.tracker_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(18, row.lease_until_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (c_->db->Changes() == 0) {
    return absl::AlreadyExistsError(StrCat("job '", row.id, "' already exists"));
  }
  return absl::OkStatus();
}

absl::Status FarmStore::UpdateJob(const JobRow& row) {
  if (!IsKnownValue(row.state)) {
    return absl::InvalidArgumentError(StrCat("unknown job state ", static_cast<int>(row.state)));
  }
  std::lock_guard<std::mutex> lock(c_->mu);
  // The id and the creation time never change.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st,
      c_->db->Prepare("UPDATE jobs SET model_name = ?2, model_sha256 = ?3, device_key = ?4, "
                      "target = ?5, state = ?6, trials = ?7, trials_done = ?8, "
                      "options_json = ?9, error = ?10, artifact_sha256 = ?11, "
                      "updated_unix_ms = ?12, tuning_ms = ?13, end_to_end = ?14 WHERE id = ?1"));
  KILN_STORAGE_RETURN_IF_ERROR(BindJobFields(st, row));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(12, row.updated_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(13, row.tuning_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(14, row.end_to_end_json));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (c_->db->Changes() == 0) return absl::NotFoundError(StrCat("no job '", row.id, "'"));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<JobRow>> FarmStore::GetJob(const std::string& id) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, id));
  return rows::FirstRow(st, ReadJob);
}

absl::StatusOr<std::vector<JobRow>> FarmStore::ListJobs() {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(
              StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY created_unix_ms DESC, id DESC")));
  return rows::AllRows(st, ReadJob);
}

absl::StatusOr<std::vector<JobRow>> FarmStore::UnfinishedJobs() {
  std::lock_guard<std::mutex> lock(c_->mu);
  // Oldest first: the order in which a restarted tracker resumes them.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kJobColumns, " FROM jobs WHERE state IN (",
                                 UnfinishedStatesSql(),
                                 ") "
                                 "ORDER BY created_unix_ms ASC, id ASC")));
  return rows::AllRows(st, ReadJob);
}

// ------------------------------------------------------------------- tokens

absl::StatusOr<int64_t> FarmStore::AddToken(const TokenRow& row) {
  if (row.user.empty()) return absl::InvalidArgumentError("a token needs a user name");
  if (!ParseRole(RoleName(row.role)).has_value()) {
    return absl::InvalidArgumentError(
        StrCat("unknown role ", static_cast<int>(row.role), " (user, agent or admin)"));
  }
  if (!IsSha256Hex(row.hash)) return absl::InvalidArgumentError("a token hash is a SHA-256");
  if (!row.owner.empty() && row.role != Role::kAgent) {
    return absl::InvalidArgumentError("only an agent's token has an owner");
  }
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("INSERT INTO tokens(\"user\", role, hash, created_unix_ms, owner) "
                          "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.user));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(2, RoleName(row.role)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, row.hash));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(4, row.created_unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(5, row.owner));
  KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
  if (!has_row) return absl::AlreadyExistsError("this token is stored already");
  return st.ColumnInt64(0);
}

absl::StatusOr<std::vector<TokenRow>> FarmStore::ListTokens() {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kTokenColumns, " FROM tokens ORDER BY id")));
  return rows::AllRows(st, ReadToken);
}

absl::Status FarmStore::RevokeToken(int64_t id, int64_t unix_ms) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare("UPDATE tokens SET revoked_unix_ms = ?2 WHERE id = ?1 AND "
                          "revoked_unix_ms = 0"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(1, id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, unix_ms));
  KILN_STORAGE_RETURN_IF_ERROR(st.Run());
  if (c_->db->Changes() == 0) {
    return absl::NotFoundError(StrCat("no valid token with id ", id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<TokenRow>> FarmStore::TokenByHash(const std::string& hash) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kTokenColumns, " FROM tokens WHERE hash = ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, hash));
  return rows::FirstRow(st, ReadToken);
}

// ------------------------------------------------------------------- agents

absl::Status FarmStore::UpsertAgent(const AgentRow& row) {
  if (row.id.empty()) return absl::InvalidArgumentError("agent has no id");
  std::lock_guard<std::mutex> lock(c_->mu);
  // first_seen keeps the earliest non-zero time; the rest is overwritten.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat(
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

absl::StatusOr<std::vector<AgentRow>> FarmStore::ListAgents() {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kAgentColumns, " FROM agents ORDER BY id")));
  std::vector<AgentRow> out;
  while (true) {
    KILN_STORAGE_ASSIGN_OR_RETURN(has_row, st.Step());
    if (!has_row) return out;
    out.push_back(ReadAgent(st));
  }
}

// ---------------------------------------------------------------- artifacts

namespace {

constexpr char kArtifactColumns[] = "sha256, size, kind, job_id, created_unix_ms";

// A row selected with kArtifactColumns; DATA_LOSS for a kind no kiln wrote.
absl::StatusOr<ArtifactRow> ReadArtifact(const Statement& st) {
  ArtifactRow row;
  row.sha256 = st.ColumnText(0);
  row.size = st.ColumnInt64(1);
  const std::string kind = st.ColumnText(2);
  std::optional<ArtifactKind> parsed = ParseName<ArtifactKind>(kind);
  if (!parsed.has_value()) {
    return absl::DataLossError(StrCat("artifacts.kind holds an unknown kind '", kind, "'"));
  }
  row.kind = *parsed;
  row.job_id = st.ColumnText(3);
  row.created_unix_ms = st.ColumnInt64(4);
  return row;
}

}  // namespace

absl::Status FarmStore::AddArtifact(const ArtifactRow& row) {
  if (row.sha256.empty()) return absl::InvalidArgumentError("artifact has no sha256");
  if (!IsKnownValue(row.kind)) {
    return absl::InvalidArgumentError(StrCat("unknown artifact kind ", static_cast<int>(row.kind)));
  }
  std::lock_guard<std::mutex> lock(c_->mu);
  // Content-addressed: adding the same bytes again is a no-op.
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("INSERT INTO artifacts(", kArtifactColumns,
                                 ") VALUES(?,?,?,?,?) ON CONFLICT DO NOTHING")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, row.sha256));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(2, row.size));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(3, NameOf(row.kind)));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(4, row.job_id));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindInt64(5, row.created_unix_ms));
  return st.Run();
}

absl::StatusOr<std::vector<ArtifactRow>> FarmStore::ListArtifacts(ArtifactKind kind) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kArtifactColumns,
                                 " FROM artifacts WHERE kind = ? "
                                 "ORDER BY created_unix_ms ASC, sha256 ASC")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, NameOf(kind)));
  return rows::AllRows(st, ReadArtifact);
}

absl::Status FarmStore::DeleteArtifact(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(st, c_->db->Prepare("DELETE FROM artifacts WHERE sha256 = ?"));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, sha256));
  return st.Run();
}

absl::StatusOr<std::optional<ArtifactRow>> FarmStore::GetArtifact(const std::string& sha256) {
  std::lock_guard<std::mutex> lock(c_->mu);
  KILN_STORAGE_ASSIGN_OR_RETURN(
      st, c_->db->Prepare(StrCat("SELECT ", kArtifactColumns, " FROM artifacts WHERE sha256 = ?")));
  KILN_STORAGE_RETURN_IF_ERROR(st.BindText(1, sha256));
  return rows::FirstRow(st, ReadArtifact);
}

}  // namespace kiln::storage
