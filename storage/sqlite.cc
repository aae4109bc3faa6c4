#include "storage/sqlite.h"

#include <sqlite3.h>

#include <utility>

#include "base/check.h"
#include "base/str.h"

namespace kiln::storage {

namespace {

absl::Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = StrCat(what, ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::PermissionDeniedError(msg);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return absl::DataLossError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace

// ---------------------------------------------------------------- Statement

Statement::~Statement() { Release(); }

void Statement::Release() {
  if (stmt_ == nullptr) return;
  if (owner_ != nullptr) {
    owner_->Recycle(pool_, stmt_);
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      owner_(std::exchange(other.owner_, nullptr)),
      pool_(std::exchange(other.pool_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    owner_ = std::exchange(other.owner_, nullptr);
    pool_ = std::exchange(other.pool_, nullptr);
  }
  return *this;
}

absl::Status Statement::Check(int rc, const char* what) const {
  if (rc == SQLITE_OK) return absl::OkStatus();
  return SqliteError(db_, rc, what);
}

absl::Status Statement::BindInt64(int index, int64_t value) {
  return Check(sqlite3_bind_int64(stmt_, index, value), "bind int64");
}
absl::Status Statement::BindDouble(int index, double value) {
  return Check(sqlite3_bind_double(stmt_, index, value), "bind double");
}
absl::Status Statement::BindText(int index, std::string_view value) {
  // A null pointer would bind NULL; an empty view must bind ''.
  const char* data = value.data() != nullptr ? value.data() : "";
  return Check(sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
               "bind text");
}
absl::Status Statement::BindBlob(int index, std::string_view value) {
  // A zero-length blob with a null pointer would bind NULL; use zeroblob.
  if (value.empty()) return Check(sqlite3_bind_zeroblob(stmt_, index, 0), "bind blob");
  return Check(sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT),
               "bind blob");
}
absl::Status Statement::BindNull(int index) {
  return Check(sqlite3_bind_null(stmt_, index), "bind null");
}

absl::StatusOr<bool> Statement::Step() {
  KILN_CHECK(stmt_ != nullptr) << "Step on a moved-from statement";
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, "step");
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

absl::Status Statement::Reset() {
  int rc = sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  return Check(rc, "reset");
}

int Statement::ColumnCount() const { return sqlite3_column_count(stmt_); }
bool Statement::ColumnIsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
int64_t Statement::ColumnInt64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Statement::ColumnText(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), n);
}
std::string Statement::ColumnBlob(int col) const {
  const void* data = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (data == nullptr) return "";
  return std::string(static_cast<const char*>(data), n);
}

// ----------------------------------------------------------------- Database

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(raw, rc, StrCat("open '", path, "'"));
    sqlite3_close(raw);
    return status;
  }
  std::unique_ptr<Database> db(new Database(raw));
  sqlite3_busy_timeout(raw, 5000);
  sqlite3_extended_result_codes(raw, 1);
  // journal_mode returns a row; Exec ignores it. An in-memory DB stays "memory".
  if (absl::Status s = db->Exec("PRAGMA journal_mode=WAL"); !s.ok()) return s;
  if (absl::Status s = db->Exec("PRAGMA foreign_keys=ON"); !s.ok()) return s;
  if (absl::Status s = db->Exec("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
  // Checkpoint the WAL into the database every 8,000 pages (32 MB) rather
  // than SQLite's 1,000: a farm appends records all the time, and each
  // checkpoint rewrites the indexes' pages that changed since the last.
  if (absl::Status s = db->Exec("PRAGMA wal_autocheckpoint=8000"); !s.ok()) return s;
  return db;
}

Database::~Database() {
  for (auto& [sql, pool] : cache_) {
    for (sqlite3_stmt* stmt : pool) sqlite3_finalize(stmt);
  }
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

absl::Status Database::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  std::string msg = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  absl::Status status = SqliteError(nullptr, rc, "exec");
  return absl::Status(status.code(), StrCat("exec: ", msg));
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  std::vector<sqlite3_stmt*>* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    pool = &cache_[std::string(sql)];
    if (!pool->empty()) {
      sqlite3_stmt* stmt = pool->back();
      pool->pop_back();
      return Statement(db_, stmt, this, pool);
    }
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteError(db_, rc, StrCat("prepare '", sql, "'"));
  }
  return Statement(db_, stmt, this, pool);
}

void Database::Recycle(std::vector<sqlite3_stmt*>* pool, sqlite3_stmt* stmt) {
  // Reset: a statement left mid-step would hold its read transaction open.
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (pool->size() < kMaxCachedPerSql) {
    pool->push_back(stmt);
  } else {
    sqlite3_finalize(stmt);
  }
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int64_t Database::Changes() const { return sqlite3_changes64(db_); }

// -------------------------------------------------------------- Transaction

Transaction::Transaction(Database& db) : db_(db) {
  begin_status_ = db_.Exec("BEGIN IMMEDIATE");
  done_ = !begin_status_.ok();
}

Transaction::~Transaction() {
  if (!done_) (void)db_.Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  if (!begin_status_.ok()) return begin_status_;
  KILN_CHECK(!done_) << "transaction committed twice";
  absl::Status s = db_.Exec("COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace kiln::storage
