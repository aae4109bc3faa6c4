// The SQLite engine of storage/database.h.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/str.h"
#include "storage/database.h"

namespace kiln::storage {

namespace {

// How long a connection waits on another's lock (SQLite's busy handler,
// and OpenSqlite's retries of the switch to WAL).
constexpr int kBusyTimeoutMs = 5000;

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

class SqliteDatabase;

// A prepared statement; on destruction it goes back to its connection's
// cache (reset, bindings cleared), and the next Prepare of the same text
// reuses it.
class SqliteStatement final : public StatementImpl {
 public:
  SqliteStatement(sqlite3* db, sqlite3_stmt* stmt, SqliteDatabase* owner,
                  std::vector<sqlite3_stmt*>* pool)
      : db_(db), stmt_(stmt), owner_(owner), pool_(pool) {}
  ~SqliteStatement() override;

  absl::Status BindInt64(int index, int64_t value) override {
    return Check(sqlite3_bind_int64(stmt_, index, value), "bind int64");
  }
  absl::Status BindDouble(int index, double value) override {
    return Check(sqlite3_bind_double(stmt_, index, value), "bind double");
  }
  absl::Status BindText(int index, std::string_view value) override {
    // A null pointer would bind NULL; an empty view must bind ''.
    const char* data = value.data() != nullptr ? value.data() : "";
    return Check(
        sqlite3_bind_text64(stmt_, index, data, value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
        "bind text");
  }
  absl::Status BindBlob(int index, std::string_view value) override {
    // A zero-length blob with a null pointer would bind NULL; use zeroblob.
    if (value.empty()) return Check(sqlite3_bind_zeroblob(stmt_, index, 0), "bind blob");
    return Check(sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT),
                 "bind blob");
  }
  absl::Status BindNull(int index) override {
    return Check(sqlite3_bind_null(stmt_, index), "bind null");
  }
  absl::StatusOr<bool> Step() override {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, "step");
  }
  absl::Status Reset() override {
    int rc = sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return Check(rc, "reset");
  }
  int ColumnCount() const override { return sqlite3_column_count(stmt_); }
  bool ColumnIsNull(int col) const override {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
  }
  int64_t ColumnInt64(int col) const override { return sqlite3_column_int64(stmt_, col); }
  double ColumnDouble(int col) const override { return sqlite3_column_double(stmt_, col); }
  std::string ColumnText(int col) const override {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    if (text == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(text), n);
  }
  std::string ColumnBlob(int col) const override {
    const void* data = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    if (data == nullptr) return "";
    return std::string(static_cast<const char*>(data), n);
  }

 private:
  absl::Status Check(int rc, const char* what) const {
    if (rc == SQLITE_OK) return absl::OkStatus();
    return SqliteError(db_, rc, what);
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  SqliteDatabase* owner_;
  std::vector<sqlite3_stmt*>* pool_;
};

class SqliteDatabase final : public Database {
 public:
  explicit SqliteDatabase(sqlite3* db) : db_(db) {}
  ~SqliteDatabase() override {
    for (auto& [sql, pool] : cache_) {
      for (sqlite3_stmt* stmt : pool) sqlite3_finalize(stmt);
    }
    if (db_ != nullptr) sqlite3_close_v2(db_);
  }

  Engine engine() const override { return Engine::kSqlite; }

  absl::Status Exec(const std::string& sql) override {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return absl::OkStatus();
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    absl::Status status = SqliteError(nullptr, rc, "exec");
    // The statement's start names what failed (a migration is long).
    std::string what = sql.substr(0, std::min(sql.find('\n'), size_t{60}));
    return absl::Status(status.code(), StrCat("exec ", what, ": ", msg));
  }

  absl::StatusOr<Statement> Prepare(std::string_view sql) override {
    std::vector<sqlite3_stmt*>* pool = nullptr;
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      pool = &cache_[std::string(sql)];
      if (!pool->empty()) {
        sqlite3_stmt* stmt = pool->back();
        pool->pop_back();
        return Statement(std::make_unique<SqliteStatement>(db_, stmt, this, pool));
      }
    }
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return SqliteError(db_, rc, StrCat("prepare '", sql, "'"));
    }
    return Statement(std::make_unique<SqliteStatement>(db_, stmt, this, pool));
  }

  int64_t Changes() const override { return sqlite3_changes64(db_); }
  const char* BeginSql() const override { return "BEGIN IMMEDIATE"; }
  absl::Status LockSchema() override { return absl::OkStatus(); }
  std::string SchemaSql(const std::string& sqlite_ddl) const override { return sqlite_ddl; }

  void Recycle(std::vector<sqlite3_stmt*>* pool, sqlite3_stmt* stmt) {
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

 private:
  // Statements of one text in use at once beyond this are finalized.
  static constexpr size_t kMaxCachedPerSql = 4;
  sqlite3* db_;
  std::mutex cache_mu_;
  // SQL text -> prepared statements not in use (nodes are stable: a
  // statement points at its text's vector).
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> cache_;
};

SqliteStatement::~SqliteStatement() { owner_->Recycle(pool_, stmt_); }

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(raw, rc, StrCat("open '", path, "'"));
    sqlite3_close(raw);
    return status;
  }
  auto db = std::make_unique<SqliteDatabase>(raw);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  sqlite3_extended_result_codes(raw, 1);
  // journal_mode returns a row; Exec ignores it. An in-memory DB stays "memory".
  // Switching a fresh file to WAL takes an exclusive lock, and SQLite answers
  // BUSY at once, without the busy handler, while another connection opening
  // the same new file holds a lock (1 in 10 runs of four concurrent opens,
  // TuningDbTest.ConcurrentOpensOfAFreshDatabaseMigrateOnce): retried
  // for as long as the busy timeout.
  for (int waited_ms = 0;; waited_ms += 5) {
    absl::Status s = db->Exec("PRAGMA journal_mode=WAL");
    if (s.ok()) break;
    if (!absl::IsUnavailable(s) || waited_ms >= kBusyTimeoutMs) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (absl::Status s = db->Exec("PRAGMA foreign_keys=ON"); !s.ok()) return s;
  if (absl::Status s = db->Exec("PRAGMA synchronous=NORMAL"); !s.ok()) return s;
  // Checkpoint the WAL into the database every 8,000 pages (32 MB) rather
  // than SQLite's 1,000: a farm appends records all the time, and each
  // checkpoint rewrites the indexes' pages that changed since the last.
  if (absl::Status s = db->Exec("PRAGMA wal_autocheckpoint=8000"); !s.ok()) return s;
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace kiln::storage
