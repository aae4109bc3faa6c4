#pragma once
// A batch and its results between the tracker's domain types (MeasureWork,
// MeasureOutcome: tracker/dispatcher.h) and protobuf, written once: the
// agent session sends batches and reads results with it, and the relay
// (tracker/relay.h) stores batches and results for other trackers with the
// same messages in protobuf's JSON mapping. A result is checked where it
// enters, by OutcomeFromProto: from an agent's session, or from another
// tracker's row.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kiln/v1/agent.pb.h"
#include "kiln/v1/common.pb.h"
#include "tracker/dispatcher.h"

namespace kiln::tracker {

// The most kernel costs one whole-model result may carry, and the most
// costs (repeats) one result may carry: a job asks for at most this many.
inline constexpr size_t kMaxKernelCosts = 100000;
inline constexpr int32_t kMaxCosts = 1000;

// The batch as the agent session sends it (no lease deadline; a whole-model
// batch's files go first, apart).
void FillMeasureBatch(const MeasureWork& work, kiln::v1::MeasureBatch* out);
// A workload's batch back (what the relay stores: never a whole-model one);
// INVALID_ARGUMENT for a config that does not parse.
absl::StatusOr<MeasureWork> WorkFromMeasureBatch(const kiln::v1::MeasureBatch& batch);

// A result from `agent_id`, run by `owner` ("" the farm's), checked: the one
// check of a measurement that enters kiln from an agent or another tracker
// (storage::Measurement). An impossible cost (none, not finite, not
// positive, above `max_cost_s` when that is > 0: the candidate's time
// limit, or too many kernel costs) makes it that agent's INVALID_COST
// error; an error's costs are dropped.
MeasureOutcome OutcomeFromProto(const kiln::v1::MeasureResult& result, const std::string& agent_id,
                                const std::string& owner, double max_cost_s = 0);
// The limit OutcomeFromProto checks a batch's costs against: its candidate
// timeout (a workload's batch; 0, none, for a whole-model one, whose runs
// the agent times differently).
double CostLimitOf(const MeasureWork& work);
void FillMeasureResult(const MeasureOutcome& outcome, kiln::v1::MeasureResult* out);

}  // namespace kiln::tracker
