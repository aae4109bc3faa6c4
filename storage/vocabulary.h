#pragma once
// The closed vocabularies that travel through storage, the tuner, the
// tracker and the CLI: a job's state, a task's state, a measurement's error
// kind, a token's role, a relayed batch's state and an artifact's kind. One
// enum each, its names declared once (base/vocabulary.h); the first two
// numbered exactly like the protocol's enums (kiln.v1.JobState and
// kiln.v1.MeasureErrorKind; the tracker converts with a static_cast and
// checks the numbers at compile time). The database stores the lowercase
// names below as text, and the JSON lines export writes them; reading a name
// no kiln wrote is DATA_LOSS.

#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "base/vocabulary.h"

namespace kiln::storage {

// kiln.v1.JobState without JOB_STATE_UNSPECIFIED.
enum class JobState : int {
  kQueued = 1,
  kTuning = 2,
  kCompiling = 3,
  kCompleted = 4,
  kFailed = 5,
  kCancelled = 6,
};

// kiln.v1.MeasureErrorKind without MEASURE_ERROR_KIND_UNSPECIFIED.
enum class ErrorKind : int {
  kNone = 1,
  kCompile = 2,
  kRuntime = 3,
  kWrongResult = 4,
  kTimeout = 5,
  kAgentLost = 6,
  kInvalidConfig = 7,
  // The agent reported a cost no run can have (not finite, not positive, or
  // above the candidate time limit); set by the tracker, never by an agent.
  kInvalidCost = 8,
};

// Who a bearer token is: a user (submits jobs, sees their own), an agent
// (opens agent sessions only) or an admin (sees everything).
enum class Role : int {
  kUser = 1,
  kAgent = 2,
  kAdmin = 3,
};

// Where one task of a tuning run stands (tuner::TaskProgress; the protocol's
// TaskStatus.state carries the name): not started, being tuned, done with its
// trials, stopped early (no gain in its last rounds), or its space exhausted.
enum class TaskState : int {
  kWaiting = 1,
  kTuning = 2,
  kDone = 3,
  kStoppedEarly = 4,
  kExhausted = 5,
};

// A batch relayed between trackers (BatchRow): published, leased by another
// tracker's agent, its results left for the owner.
enum class BatchState : int {
  kQueued = 1,
  kLeased = 2,
  kDone = 3,
};

// What an artifact file holds: a submitted ONNX model or a compiled module.
enum class ArtifactKind : int {
  kModel = 1,
  kModule = 2,
};

}  // namespace kiln::storage

namespace kiln {

template <>
struct Vocabulary<storage::JobState> {
  using E = storage::JobState;
  static constexpr std::array<std::pair<E, std::string_view>, 6> kNames = {{
      {E::kQueued, "queued"},
      {E::kTuning, "tuning"},
      {E::kCompiling, "compiling"},
      {E::kCompleted, "completed"},
      {E::kFailed, "failed"},
      {E::kCancelled, "cancelled"},
  }};
};

template <>
struct Vocabulary<storage::ErrorKind> {
  using E = storage::ErrorKind;
  static constexpr std::array<std::pair<E, std::string_view>, 8> kNames = {{
      {E::kNone, "none"},
      {E::kCompile, "compile"},
      {E::kRuntime, "runtime"},
      {E::kWrongResult, "wrong_result"},
      {E::kTimeout, "timeout"},
      {E::kAgentLost, "agent_lost"},
      {E::kInvalidConfig, "invalid_config"},
      {E::kInvalidCost, "invalid_cost"},
  }};
};

template <>
struct Vocabulary<storage::Role> {
  using E = storage::Role;
  static constexpr std::array<std::pair<E, std::string_view>, 3> kNames = {{
      {E::kUser, "user"},
      {E::kAgent, "agent"},
      {E::kAdmin, "admin"},
  }};
};

template <>
struct Vocabulary<storage::TaskState> {
  using E = storage::TaskState;
  static constexpr std::array<std::pair<E, std::string_view>, 5> kNames = {{
      {E::kWaiting, "waiting"},
      {E::kTuning, "tuning"},
      {E::kDone, "done"},
      {E::kStoppedEarly, "stopped early"},
      {E::kExhausted, "exhausted"},
  }};
};

template <>
struct Vocabulary<storage::BatchState> {
  using E = storage::BatchState;
  static constexpr std::array<std::pair<E, std::string_view>, 3> kNames = {{
      {E::kQueued, "queued"},
      {E::kLeased, "leased"},
      {E::kDone, "done"},
  }};
};

template <>
struct Vocabulary<storage::ArtifactKind> {
  using E = storage::ArtifactKind;
  static constexpr std::array<std::pair<E, std::string_view>, 2> kNames = {{
      {E::kModel, "model"},
      {E::kModule, "module"},
  }};
};

}  // namespace kiln

namespace kiln::storage {

inline constexpr auto kJobStates = ValuesOf<JobState>();
inline constexpr auto kErrorKinds = ValuesOf<ErrorKind>();
inline constexpr auto kRoles = ValuesOf<Role>();

// The names above ("queued", "none", "user", ...; "unknown" for a value
// outside the enum), and the value a name names (nullopt for any other text).
constexpr std::string_view JobStateName(JobState s) { return NameOf(s); }
constexpr std::optional<JobState> ParseJobState(std::string_view n) {
  return ParseName<JobState>(n);
}
constexpr std::string_view ErrorKindName(ErrorKind k) { return NameOf(k); }
constexpr std::optional<ErrorKind> ParseErrorKind(std::string_view n) {
  return ParseName<ErrorKind>(n);
}
constexpr std::string_view RoleName(Role r) { return NameOf(r); }
constexpr std::optional<Role> ParseRole(std::string_view n) { return ParseName<Role>(n); }

// Completed, failed and cancelled: a job in one of them never runs again.
constexpr bool IsFinal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

// A transient failure (a timeout, a lost agent, a cost no run can have, a
// wrong result: an agent's fault or bad luck, a faulty board as likely as a
// faulty kernel) says nothing certain about a config, which the tuner
// measures again (tuner::kMaxAttempts). Other outcomes (a cost, or a compile
// error, invalid config, runtime error) are final.
constexpr bool IsTransient(ErrorKind kind) {
  return kind == ErrorKind::kTimeout || kind == ErrorKind::kAgentLost ||
         kind == ErrorKind::kInvalidCost || kind == ErrorKind::kWrongResult;
}

}  // namespace kiln::storage
