#pragma once
// A small non-copyable SQLite wrapper: a connection (WAL mode, busy timeout,
// foreign keys), prepared statements with typed binds and column getters, and
// a scoped transaction that rolls back unless committed. Errors carry
// SQLite's message. Prepared statements are cached per SQL text: a statement
// goes back to its connection's cache (reset, bindings cleared) when it is
// destroyed, and the next Prepare of the same text reuses it.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::storage {

class Statement {
 public:
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite.
  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindDouble(int index, double value);
  absl::Status BindText(int index, std::string_view value);
  absl::Status BindBlob(int index, std::string_view value);
  absl::Status BindNull(int index);

  // true: a row is available; false: done.
  absl::StatusOr<bool> Step();
  // Steps to completion, for statements that return no rows.
  absl::Status Run();
  // Resets the statement and clears its bindings.
  absl::Status Reset();

  // Columns are 0-based.
  int ColumnCount() const;
  bool ColumnIsNull(int col) const;
  int64_t ColumnInt64(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;
  std::string ColumnBlob(int col) const;

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* stmt, class Database* owner,
            std::vector<sqlite3_stmt*>* pool)
      : db_(db), stmt_(stmt), owner_(owner), pool_(pool) {}
  absl::Status Check(int rc, const char* what) const;
  // Back to the owner's cache.
  void Release();
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  class Database* owner_ = nullptr;
  std::vector<sqlite3_stmt*>* pool_ = nullptr;
};

class Database {
 public:
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows of interest.
  absl::Status Exec(const std::string& sql);
  // One statement (from the cache when this text was prepared before). Every
  // Statement must be destroyed before its Database.
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  int64_t Changes() const;

 private:
  friend class Statement;
  explicit Database(sqlite3* db) : db_(db) {}
  void Recycle(std::vector<sqlite3_stmt*>* pool, sqlite3_stmt* stmt);
  // Statements of one text in use at once beyond this are finalized.
  static constexpr size_t kMaxCachedPerSql = 4;
  sqlite3* db_ = nullptr;
  std::mutex cache_mu_;
  // SQL text -> prepared statements not in use (nodes are stable: a
  // Statement points at its text's vector).
  std::unordered_map<std::string, std::vector<sqlite3_stmt*>> cache_;
};

// BEGIN IMMEDIATE on construction (see status()); ROLLBACK on destruction
// unless Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Whether BEGIN succeeded.
  const absl::Status& status() const { return begin_status_; }
  absl::Status Commit();

 private:
  Database& db_;
  absl::Status begin_status_;
  bool done_ = false;
};

}  // namespace kiln::storage
