#pragma once
// The log database's migration ladder: ladder[v] is the SQL that takes a
// database from schema version v to v + 1. The version lives in
// meta(key='schema_version'); a fresh file is version 0.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kiln::storage {

class Database;

// The ladder of this build of kiln.
const std::vector<std::string>& SchemaMigrations();

// Reads meta.schema_version (0 when absent).
absl::StatusOr<int> ReadSchemaVersion(Database& db);

// Applies the missing steps of `ladder`, each in its own transaction.
// FAILED_PRECONDITION when the database is newer than the ladder.
absl::Status MigrateSchema(Database& db, const std::vector<std::string>& ladder);

}  // namespace kiln::storage
