#pragma once
// What the tracker's gRPC services share at the RPC edge: the log, status
// conversion, the caller's bearer token, and the protocol's enums, which
// storage::JobState and storage::ErrorKind mirror number for number (so the
// edge converts with a cast, checked here at compile time).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "compiler/config.h"
#include "kiln/v1/agent.pb.h"
#include "kiln/v1/tracker.pb.h"
#include "storage/vocabulary.h"
#include "tracker/log.h"

namespace kiln::tracker::rpc {

namespace pb = ::kiln::v1;

using ::kiln::tracker::Log;  // tracker/log.h

inline grpc::Status ToGrpc(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

// The "authorization" metadata of a call ("" when absent).
inline std::string Authorization(const grpc::ServerContextBase* ctx) {
  auto it = ctx->client_metadata().find("authorization");
  if (it == ctx->client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

using storage::ErrorKind;
using storage::JobState;
static_assert(static_cast<int>(JobState::kQueued) == pb::JOB_STATE_QUEUED);
static_assert(static_cast<int>(JobState::kTuning) == pb::JOB_STATE_TUNING);
static_assert(static_cast<int>(JobState::kCompiling) == pb::JOB_STATE_COMPILING);
static_assert(static_cast<int>(JobState::kCompleted) == pb::JOB_STATE_COMPLETED);
static_assert(static_cast<int>(JobState::kFailed) == pb::JOB_STATE_FAILED);
static_assert(static_cast<int>(JobState::kCancelled) == pb::JOB_STATE_CANCELLED);
static_assert(storage::kJobStates.size() == pb::JobState_ARRAYSIZE - 1);
static_assert(static_cast<int>(ErrorKind::kNone) == pb::MEASURE_ERROR_KIND_NONE);
static_assert(static_cast<int>(ErrorKind::kCompile) == pb::MEASURE_ERROR_KIND_COMPILE);
static_assert(static_cast<int>(ErrorKind::kRuntime) == pb::MEASURE_ERROR_KIND_RUNTIME);
static_assert(static_cast<int>(ErrorKind::kWrongResult) == pb::MEASURE_ERROR_KIND_WRONG_RESULT);
static_assert(static_cast<int>(ErrorKind::kTimeout) == pb::MEASURE_ERROR_KIND_TIMEOUT);
static_assert(static_cast<int>(ErrorKind::kAgentLost) == pb::MEASURE_ERROR_KIND_AGENT_LOST);
static_assert(static_cast<int>(ErrorKind::kInvalidConfig) == pb::MEASURE_ERROR_KIND_INVALID_CONFIG);
static_assert(static_cast<int>(ErrorKind::kInvalidCost) == pb::MEASURE_ERROR_KIND_INVALID_COST);
static_assert(storage::kErrorKinds.size() == pb::MeasureErrorKind_ARRAYSIZE - 1);

inline pb::JobState JobStateToProto(JobState state) { return static_cast<pb::JobState>(state); }

inline pb::MeasureErrorKind ErrorKindToProto(ErrorKind kind) {
  return static_cast<pb::MeasureErrorKind>(kind);
}

inline ErrorKind ErrorKindFromProto(pb::MeasureErrorKind kind) {
  // Unspecified (or a number this tracker does not know): the agent did not
  // say what went wrong.
  if (kind == pb::MEASURE_ERROR_KIND_UNSPECIFIED || !pb::MeasureErrorKind_IsValid(kind)) {
    return ErrorKind::kRuntime;
  }
  return static_cast<ErrorKind>(kind);
}

inline void FillConfig(const compiler::Config& config, pb::Config* out) {
  for (const auto& [name, value] : config) (*out->mutable_knobs())[name] = value;
  out->set_canonical(compiler::CanonicalConfig(config));
}

}  // namespace kiln::tracker::rpc
