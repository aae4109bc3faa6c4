#include "storage/stores.h"

#include <utility>

#include "storage/connection.h"
#include "storage/migrations.h"
#include "storage/record_rows.h"

namespace kiln::storage {

absl::StatusOr<std::shared_ptr<Connection>> OpenConnection(const std::string& url) {
  KILN_STORAGE_ASSIGN_OR_RETURN(db, Database::Open(url));
  KILN_STORAGE_RETURN_IF_ERROR(MigrateSchema(*db, SchemaMigrations()));
  auto connection = std::make_shared<Connection>();
  connection->db = std::move(db);
  return connection;
}

absl::StatusOr<Stores> OpenStores(const std::string& url) {
  KILN_STORAGE_ASSIGN_OR_RETURN(connection, OpenConnection(url));
  Stores stores;
  stores.tuning = std::make_unique<TuningDb>(connection);
  stores.farm = std::make_unique<FarmStore>(connection);
  return stores;
}

int CurrentSchemaVersion() { return static_cast<int>(SchemaMigrations().size()); }

}  // namespace kiln::storage
