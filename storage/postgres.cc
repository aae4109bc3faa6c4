// The PostgreSQL engine of storage/database.h, on libpq: statements are
// prepared on the server once per connection and SQL text, parameters go as
// text (blobs as binary), results come back as text.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <regex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/str.h"
#include "storage/database.h"

namespace kiln::storage {

namespace {

// The SQLSTATE classes a caller can act on; the rest is INTERNAL.
absl::Status PgError(const PGresult* res, const PGconn* conn, std::string_view what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  msg = StrCat(what, ": ", msg.empty() ? std::string(PQerrorMessage(conn)) : msg);
  const std::string_view code = state ? state : "";
  if (PQstatus(conn) != CONNECTION_OK || code.starts_with("08") || code.starts_with("57P")) {
    return absl::UnavailableError(msg);
  }
  if (code.starts_with("23")) return absl::FailedPreconditionError(msg);
  if (code.starts_with("40")) return absl::AbortedError(msg);
  if (code.starts_with("22")) return absl::InvalidArgumentError(msg);
  if (code.starts_with("53")) return absl::ResourceExhaustedError(msg);
  if (code.starts_with("28") || code.starts_with("42501")) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// `?N` -> `$N`, `?` -> the next `$N`, outside quotes. *params: the highest N.
std::string Placeholders(std::string_view sql, int* params) {
  std::string out;
  out.reserve(sql.size() + 8);
  int next = 0;
  *params = 0;
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      size_t j = i + 1;
      int n = 0;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
      if (j == i + 1) n = ++next;
      *params = std::max(*params, n);
      out += StrCat("$", n);
      i = j - 1;
    } else {
      out += c;
    }
  }
  return out;
}

// A URI's password is never printed.
std::string Redacted(const std::string& conninfo) {
  static const std::regex kPassword(R"(^(postgres(ql)?://[^:/@]*:)[^@]*@)");
  std::string out = std::regex_replace(conninfo, kPassword, "$1***@");
  static const std::regex kKeyword(R"(password\s*=\s*\S+)");
  return std::regex_replace(out, kKeyword, "password=***");
}

class PostgresDatabase;

class PostgresStatement final : public StatementImpl {
 public:
  PostgresStatement(PostgresDatabase* db, std::string sql, int params)
      : db_(db), sql_(std::move(sql)), values_(params), null_(params, 1), binary_(params, 0) {}
  ~PostgresStatement() override { PQclear(res_); }

  absl::Status BindInt64(int index, int64_t value) override {
    return Bind(index, std::to_string(value), false);
  }
  absl::Status BindDouble(int index, double value) override {
    if (std::isnan(value)) return Bind(index, "NaN", false);
    if (std::isinf(value)) return Bind(index, value > 0 ? "Infinity" : "-Infinity", false);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    return Bind(index, buf, false);
  }
  absl::Status BindText(int index, std::string_view value) override {
    return Bind(index, std::string(value), false);
  }
  absl::Status BindBlob(int index, std::string_view value) override {
    return Bind(index, std::string(value), true);
  }
  absl::Status BindNull(int index) override {
    if (absl::Status s = CheckIndex(index); !s.ok()) return s;
    null_[index - 1] = 1;
    return absl::OkStatus();
  }
  absl::StatusOr<bool> Step() override;
  absl::Status Reset() override {
    PQclear(res_);
    res_ = nullptr;
    row_ = -1;
    std::fill(null_.begin(), null_.end(), 1);
    return absl::OkStatus();
  }
  int ColumnCount() const override { return res_ ? PQnfields(res_) : 0; }
  bool ColumnIsNull(int col) const override { return PQgetisnull(res_, row_, col) != 0; }
  int64_t ColumnInt64(int col) const override {
    const char* v = PQgetvalue(res_, row_, col);
    if (v[0] == 't' || v[0] == 'f') return v[0] == 't';  // a boolean
    return std::strtoll(v, nullptr, 10);
  }
  double ColumnDouble(int col) const override {
    return std::strtod(PQgetvalue(res_, row_, col), nullptr);
  }
  std::string ColumnText(int col) const override {
    return std::string(PQgetvalue(res_, row_, col), PQgetlength(res_, row_, col));
  }
  std::string ColumnBlob(int col) const override {
    size_t n = 0;
    unsigned char* bytes =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(res_, row_, col)), &n);
    if (bytes == nullptr) return "";
    std::string out(reinterpret_cast<const char*>(bytes), n);
    PQfreemem(bytes);
    return out;
  }

 private:
  absl::Status CheckIndex(int index) const {
    if (index < 1 || index > static_cast<int>(values_.size())) {
      return absl::OutOfRangeError(
          StrCat("bind: parameter ", index, " of a statement with ", values_.size()));
    }
    return absl::OkStatus();
  }
  absl::Status Bind(int index, std::string value, bool binary) {
    if (absl::Status s = CheckIndex(index); !s.ok()) return s;
    values_[index - 1] = std::move(value);
    null_[index - 1] = 0;
    binary_[index - 1] = binary ? 1 : 0;
    return absl::OkStatus();
  }
  PostgresDatabase* db_;
  std::string sql_;  // prepared on the database's session (again after a reconnect)
  std::vector<std::string> values_;
  std::vector<char> null_;
  std::vector<int> binary_;
  PGresult* res_ = nullptr;  // after the first Step
  int row_ = -1;
};

class PostgresDatabase final : public Database {
 public:
  explicit PostgresDatabase(PGconn* conn) : conn_(conn) {}
  ~PostgresDatabase() override { PQfinish(conn_); }

  Engine engine() const override { return Engine::kPostgres; }

  absl::Status Exec(const std::string& sql) override {
    return Retrying([&]() -> absl::Status {
      PGresult* res = PQexec(conn_, sql.c_str());
      absl::Status s = Done(res, "exec");
      PQclear(res);
      return s;
    });
  }

  absl::StatusOr<Statement> Prepare(std::string_view sql) override {
    Reconnect();
    auto prepared = Prepared(std::string(sql));
    if (!prepared.ok()) return prepared.status();
    return Statement(std::make_unique<PostgresStatement>(this, std::string(sql), prepared->params));
  }

  int64_t Changes() const override { return changes_; }
  const char* BeginSql() const override { return "BEGIN"; }
  absl::Status LockSchema() override {
    return Exec("SELECT pg_advisory_xact_lock(7046915)");  // "kiln" migrations
  }
  std::string SchemaSql(const std::string& sqlite_ddl) const override {
    // SQLite's types, and the one function a migration uses that the two
    // spell differently (instr(text, part) is PostgreSQL's strpos).
    static const std::vector<std::pair<std::regex, std::string>> kRewrites = {
        {std::regex(R"(INTEGER PRIMARY KEY AUTOINCREMENT)"),
         "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
        {std::regex(R"(\bINTEGER\b)"), "BIGINT"},
        {std::regex(R"(\bREAL\b)"), "DOUBLE PRECISION"},
        {std::regex(R"(\bBLOB\b)"), "BYTEA"},
        {std::regex(R"(\binstr\()"), "strpos("},
    };
    std::string out = sqlite_ddl;
    for (const auto& [from, to] : kRewrites) out = std::regex_replace(out, from, to);
    return out;
  }

  // Runs the statement prepared from `sql` (again, on a new session); the
  // result is the caller's.
  absl::StatusOr<PGresult*> Execute(const std::string& sql, const std::vector<std::string>& values,
                                    const std::vector<char>& null, const std::vector<int>& binary) {
    const int n = static_cast<int>(values.size());
    std::vector<const char*> ptrs(n);
    std::vector<int> lengths(n);
    for (int i = 0; i < n; ++i) {
      ptrs[i] = null[i] ? nullptr : values[i].data();
      lengths[i] = static_cast<int>(values[i].size());
    }
    PGresult* res = nullptr;
    absl::Status s = Retrying([&]() -> absl::Status {
      auto prepared = Prepared(sql);
      if (!prepared.ok()) return prepared.status();
      res = PQexecPrepared(conn_, prepared->name.c_str(), n, ptrs.data(), lengths.data(),
                           binary.data(), /*resultFormat=*/0);
      absl::Status done = Done(res, "step");
      if (!done.ok()) {
        PQclear(res);
        res = nullptr;
      }
      return done;
    });
    if (!s.ok()) return s;
    return res;
  }

 private:
  // Checks a result and notes the rows it changed.
  absl::Status Done(PGresult* res, std::string_view what) {
    const ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return PgError(res, conn_, what);
    const char* tuples = PQcmdTuples(res);
    changes_ = (tuples != nullptr && *tuples != '\0') ? std::strtoll(tuples, nullptr, 10) : 0;
    return absl::OkStatus();
  }
  // After the server went away: a new session (its prepared statements are
  // gone), tried for up to kReconnectMs while the server comes back.
  void Reconnect() {
    if (PQstatus(conn_) == CONNECTION_OK) return;
    prepared_.clear();
    auto wait = std::chrono::milliseconds(100);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReconnectMs);
    while (true) {
      PQreset(conn_);
      if (PQstatus(conn_) == CONNECTION_OK || std::chrono::steady_clock::now() >= give_up) return;
      std::this_thread::sleep_for(wait);
      wait = std::min(wait * 2, std::chrono::milliseconds(1000));
    }
  }

  // Runs `attempt`; when it failed because the connection was lost and it
  // began outside a transaction (BEGIN, or a statement on its own), runs it
  // once more on a new session. Inside a transaction the loss fails the
  // call: the transaction is gone. (A statement whose reply was lost may
  // have been applied: kiln's statements on their own are upserts, updates
  // and reads; records are written in transactions.)
  absl::Status Retrying(const std::function<absl::Status()>& attempt) {
    Reconnect();
    const bool outside = PQtransactionStatus(conn_) == PQTRANS_IDLE;
    absl::Status s = attempt();
    if (s.ok() || !outside || PQstatus(conn_) == CONNECTION_OK) return s;
    Reconnect();
    if (PQstatus(conn_) != CONNECTION_OK) return s;
    return attempt();
  }

  struct PreparedStatement {
    std::string name;
    int params;
  };
  // The statement prepared from `sql` on this session.
  absl::StatusOr<PreparedStatement> Prepared(const std::string& sql) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return it->second;
    int params = 0;
    const std::string text = Placeholders(sql, &params);
    std::string name = StrCat("kiln_", ++statements_);
    PGresult* res = PQprepare(conn_, name.c_str(), text.c_str(), params, nullptr);
    absl::Status s = Done(res, StrCat("prepare '", sql, "'"));
    PQclear(res);
    if (!s.ok()) return s;
    return prepared_.emplace(sql, PreparedStatement{std::move(name), params}).first->second;
  }

  static constexpr int64_t kReconnectMs = 15000;
  uint64_t statements_ = 0;  // names kiln_N, unique per session
  PGconn* conn_;
  std::unordered_map<std::string, PreparedStatement> prepared_;
  int64_t changes_ = 0;
};

absl::StatusOr<bool> PostgresStatement::Step() {
  if (res_ == nullptr) {
    absl::StatusOr<PGresult*> res = db_->Execute(sql_, values_, null_, binary_);
    if (!res.ok()) return res.status();
    res_ = *res;
    row_ = -1;
  }
  ++row_;
  return row_ < PQntuples(res_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> OpenPostgres(const std::string& conninfo) {
  // A server that does not answer fails the open within 10 s unless the
  // URI says otherwise (keywords later in the list win).
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "kiln", conninfo.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    PQfinish(conn);
    return absl::UnavailableError(StrCat("open '", Redacted(conninfo), "': ", msg));
  }
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  auto db = std::make_unique<PostgresDatabase>(conn);
  if (absl::Status s = db->Exec("SET client_min_messages = warning"); !s.ok()) return s;
  return std::unique_ptr<Database>(std::move(db));
}

}  // namespace kiln::storage
