#pragma once
// What the log database already knows, for a task's search strategy: its own
// past results (a resumed job, or earlier jobs on the same workload) and, for
// the cost model's warm start, other workloads' records of the same operator
// (transfer learning).

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "storage/log_db.h"
#include "tuner/cost_model.h"

namespace kiln::tuner {

// Weight of a prior group measured on another target than the task's.
inline constexpr float kOtherTargetWeight = 0.3f;

// A record as a search strategy's result: its config and mean cost (+inf for
// a failure); nullopt for a config string that does not parse.
std::optional<std::pair<compiler::Config, double>> ResultOf(const storage::RecordRow& record);

// The workload's records on `target` by `compiler_version`, oldest first, as
// SearchStrategy::Update takes them (failed ones cost +inf).
absl::StatusOr<std::vector<std::pair<compiler::Config, double>>> PastResults(
    storage::LogDb& db, const std::string& workload_key, const std::string& target,
    const std::string& compiler_version);

// The newest records of other workloads of the same operator by
// `compiler_version`, one ranking group per (workload, target) with their
// features and scores (the group's best cost over each cost; 0 for a
// failure); groups measured on another target weigh kOtherTargetWeight.
// At most `max_rows` rows; records whose config no longer lowers are skipped.
absl::StatusOr<TrainingSet> PriorFromLog(storage::LogDb& db, const compiler::Workload& workload,
                                         const compiler::Target& target,
                                         const std::string& compiler_version,
                                         size_t max_rows = 2000);

}  // namespace kiln::tuner
