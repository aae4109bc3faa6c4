#include "storage/database.h"

#include "base/check.h"
#include "base/str.h"

namespace kiln::storage {

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& url) {
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    return OpenPostgres(url);
  }
  if (url.starts_with("sqlite:")) return OpenSqlite(url.substr(7));
  if (url.empty())
    return absl::InvalidArgumentError("no database given (sqlite:PATH or postgresql://...)");
  return OpenSqlite(url);
}

absl::StatusOr<bool> Statement::Step() {
  KILN_CHECK(impl_ != nullptr) << "Step on a moved-from statement";
  return impl_->Step();
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

Transaction::Transaction(Database& db) : db_(db) {
  begin_status_ = db_.Exec(db_.BeginSql());
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
