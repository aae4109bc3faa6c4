#pragma once
// The tuning database and the farm store of one SQL database, opened
// together on one connection: what a tracker holds. A tool that needs only
// records (`kiln compile`, `kiln records`) opens TuningDb alone.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/farm_store.h"
#include "storage/tuning_db.h"

namespace kiln::storage {

struct Stores {
  std::unique_ptr<TuningDb> tuning;
  std::unique_ptr<FarmStore> farm;
};

// `url` as TuningDb::Open's.
absl::StatusOr<Stores> OpenStores(const std::string& url);

// The schema version this build of kiln migrates databases to.
int CurrentSchemaVersion();

}  // namespace kiln::storage
