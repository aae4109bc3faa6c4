#pragma once
// The one SQL connection a TuningDb and a FarmStore opened together share
// (storage/stores.h): their calls are serialized on its mutex, and a fence
// one passes to the other (FarmStore::JobHeldBy) runs in the same
// transaction. Private to storage/.

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "storage/database.h"

namespace kiln::storage {

struct Connection {
  std::mutex mu;
  std::unique_ptr<Database> db;
};

// Opens (or creates) the database at `url` and migrates it to the current
// schema (storage/migrations.h).
absl::StatusOr<std::shared_ptr<Connection>> OpenConnection(const std::string& url);

}  // namespace kiln::storage
