#pragma once
// A batch and its results between the tracker's domain types (MeasureWork,
// MeasureOutcome: tracker/dispatcher.h) and protobuf, written once: the
// agent session sends batches and reads results with it, and the relay
// (tracker/relay.h) stores batches and results for other trackers with the
// same messages in protobuf's JSON mapping. A result is checked where it
// enters, by OutcomeFromProto: from an agent's session, or from another
// tracker's row.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/v1/agent.pb.h"
#include "kiln/v1/common.pb.h"
#include "tracker/dispatcher.h"

namespace kiln::tracker {

// The most kernel costs one whole-model result may carry.
inline constexpr size_t kMaxKernelCosts = 100000;

// The batch as the agent session sends it (no lease deadline; a whole-model
// batch's files go first, apart).
void FillMeasureBatch(const MeasureWork& work, kiln::v1::MeasureBatch* out);
// A workload's batch back (what the relay stores: never a whole-model one);
// INVALID_ARGUMENT for a config that does not parse.
absl::StatusOr<MeasureWork> WorkFromMeasureBatch(const kiln::v1::MeasureBatch& batch);

// A result from `agent_id`, run by `agent_owner` ("" the farm's), checked:
// an impossible cost (not finite, not positive, or too many kernel costs)
// makes it that agent's INVALID_COST error, its costs dropped.
MeasureOutcome OutcomeFromProto(const kiln::v1::MeasureResult& result, const std::string& agent_id,
                                const std::string& agent_owner);
void FillMeasureResult(const MeasureOutcome& outcome, kiln::v1::MeasureResult* out);

}  // namespace kiln::tracker
