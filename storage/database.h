#pragma once
// The SQL engines under the log database: one small non-copyable interface,
// implemented on SQLite (storage/sqlite.cc: the embedded default, a file in
// WAL mode) and on PostgreSQL (storage/postgres.cc: libpq, for several
// trackers sharing one farm). A connection runs SQL text, prepared
// statements take typed binds and give column getters, and a scoped
// transaction rolls back unless committed. Errors carry the engine's message.
//
// SQL is written once for both engines: `?` and `?N` placeholders (the
// PostgreSQL engine rewrites them to `$N`), `INSERT ... ON CONFLICT`,
// `RETURNING`, double-quoted identifiers for reserved words ("user"). Schema
// text (migrations) is written with SQLite's type names and translated by
// SchemaSql().

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::storage {

// One engine's prepared statement (see Statement).
class StatementImpl {
 public:
  virtual ~StatementImpl() = default;
  virtual absl::Status BindInt64(int index, int64_t value) = 0;
  virtual absl::Status BindDouble(int index, double value) = 0;
  virtual absl::Status BindText(int index, std::string_view value) = 0;
  virtual absl::Status BindBlob(int index, std::string_view value) = 0;
  virtual absl::Status BindNull(int index) = 0;
  virtual absl::StatusOr<bool> Step() = 0;
  virtual absl::Status Reset() = 0;
  virtual int ColumnCount() const = 0;
  virtual bool ColumnIsNull(int col) const = 0;
  virtual int64_t ColumnInt64(int col) const = 0;
  virtual double ColumnDouble(int col) const = 0;
  virtual std::string ColumnText(int col) const = 0;
  virtual std::string ColumnBlob(int col) const = 0;
};

class Statement {
 public:
  explicit Statement(std::unique_ptr<StatementImpl> impl) : impl_(std::move(impl)) {}
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  // Parameters are 1-based, as in SQLite.
  absl::Status BindInt64(int index, int64_t value) { return impl_->BindInt64(index, value); }
  absl::Status BindDouble(int index, double value) { return impl_->BindDouble(index, value); }
  absl::Status BindText(int index, std::string_view value) { return impl_->BindText(index, value); }
  absl::Status BindBlob(int index, std::string_view value) { return impl_->BindBlob(index, value); }
  absl::Status BindNull(int index) { return impl_->BindNull(index); }

  // true: a row is available; false: done.
  absl::StatusOr<bool> Step();
  // Steps to completion, for statements that return no rows.
  absl::Status Run();
  // Resets the statement and clears its bindings.
  absl::Status Reset() { return impl_->Reset(); }

  // Columns are 0-based.
  int ColumnCount() const { return impl_->ColumnCount(); }
  bool ColumnIsNull(int col) const { return impl_->ColumnIsNull(col); }
  int64_t ColumnInt64(int col) const { return impl_->ColumnInt64(col); }
  double ColumnDouble(int col) const { return impl_->ColumnDouble(col); }
  std::string ColumnText(int col) const { return impl_->ColumnText(col); }
  std::string ColumnBlob(int col) const { return impl_->ColumnBlob(col); }

 private:
  std::unique_ptr<StatementImpl> impl_;
};

class Database {
 public:
  // `url`: "sqlite:PATH", "postgresql://..." or "postgres://..." (libpq's
  // connection URI), or a plain path (SQLite).
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& url);
  virtual ~Database() = default;
  Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  enum class Engine { kSqlite, kPostgres };
  virtual Engine engine() const = 0;

  // Runs one or more statements that return no rows of interest.
  virtual absl::Status Exec(const std::string& sql) = 0;
  // One statement (from the cache when this text was prepared before). Every
  // Statement must be destroyed before its Database.
  virtual absl::StatusOr<Statement> Prepare(std::string_view sql) = 0;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int64_t Changes() const = 0;

  // The statement that opens a write transaction.
  virtual const char* BeginSql() const = 0;
  // Inside a transaction: holds off every other process migrating the same
  // database until this transaction ends (SQLite's BEGIN IMMEDIATE already
  // does; PostgreSQL takes an advisory lock).
  virtual absl::Status LockSchema() = 0;
  // Schema text written with SQLite's type names in this engine's dialect.
  virtual std::string SchemaSql(const std::string& sqlite_ddl) const = 0;
};

// SQLite: a file (WAL mode, busy timeout, foreign keys).
absl::StatusOr<std::unique_ptr<Database>> OpenSqlite(const std::string& path);
// PostgreSQL through libpq: `conninfo` is a URI or key=value string.
absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo);

// BEGIN on construction (see status()); ROLLBACK on destruction unless
// Commit() succeeded.
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
