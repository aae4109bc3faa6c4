#pragma once
// What the farm store's sources share about job rows (farm_store.cc,
// farm_store_leases.cc): the columns a job is read with and reading them.
// Private to storage/.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/farm_store.h"
#include "storage/record_rows.h"
#include "storage/vocabulary.h"

namespace kiln::storage::rows {

inline constexpr char kJobColumns[] =
    "id, model_name, model_sha256, device_key, target, state, trials, trials_done, "
    "options_json, error, artifact_sha256, created_unix_ms, updated_unix_ms, tuning_ms, owner, "
    "end_to_end";
// "'queued', 'tuning', 'compiling'": the states of a job that runs again, as
// SQL text.
const std::string& UnfinishedStatesSql();
// A row selected with kJobColumns; DATA_LOSS for text no kiln wrote.
absl::StatusOr<JobRow> ReadJob(const Statement& st);

}  // namespace kiln::storage::rows
