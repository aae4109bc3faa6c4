#pragma once
// The closed vocabularies that travel through storage, the tuner, the
// tracker and the CLI: a job's state, a measurement's error kind and a
// token's role. One enum each; the first two numbered exactly like the
// protocol's enums (kiln.v1.JobState and kiln.v1.MeasureErrorKind; the
// tracker converts with a static_cast and checks the numbers at compile
// time). The database stores the lowercase names below as text, and the JSON
// lines export writes them.

#include <array>
#include <optional>
#include <string_view>

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

inline constexpr std::array<JobState, 6> kJobStates = {JobState::kQueued,    JobState::kTuning,
                                                       JobState::kCompiling, JobState::kCompleted,
                                                       JobState::kFailed,    JobState::kCancelled};

// "queued", "tuning", "compiling", "completed", "failed", "cancelled";
// "unknown" for a value outside the enum.
constexpr std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kTuning:
      return "tuning";
    case JobState::kCompiling:
      return "compiling";
    case JobState::kCompleted:
      return "completed";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

// The state named `name` (as JobStateName writes it); nullopt for any other text.
constexpr std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : kJobStates) {
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

// Completed, failed and cancelled: a job in one of them never runs again.
constexpr bool IsFinal(JobState state) {
  return state == JobState::kCompleted || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

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

inline constexpr std::array<ErrorKind, 8> kErrorKinds = {
    ErrorKind::kNone,    ErrorKind::kCompile,   ErrorKind::kRuntime,       ErrorKind::kWrongResult,
    ErrorKind::kTimeout, ErrorKind::kAgentLost, ErrorKind::kInvalidConfig, ErrorKind::kInvalidCost};

// "none", "compile", "runtime", "wrong_result", "timeout", "agent_lost",
// "invalid_config", "invalid_cost"; "unknown" for a value outside the enum.
constexpr std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "none";
    case ErrorKind::kCompile:
      return "compile";
    case ErrorKind::kRuntime:
      return "runtime";
    case ErrorKind::kWrongResult:
      return "wrong_result";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kAgentLost:
      return "agent_lost";
    case ErrorKind::kInvalidConfig:
      return "invalid_config";
    case ErrorKind::kInvalidCost:
      return "invalid_cost";
  }
  return "unknown";
}

// The kind named `name` (as ErrorKindName writes it); nullopt for any other text.
constexpr std::optional<ErrorKind> ParseErrorKind(std::string_view name) {
  for (ErrorKind k : kErrorKinds) {
    if (ErrorKindName(k) == name) return k;
  }
  return std::nullopt;
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

// Who a bearer token is: a user (submits jobs, sees their own), an agent
// (opens agent sessions only) or an admin (sees everything).
enum class Role : int {
  kUser = 1,
  kAgent = 2,
  kAdmin = 3,
};

inline constexpr std::array<Role, 3> kRoles = {Role::kUser, Role::kAgent, Role::kAdmin};

// "user", "agent", "admin"; "unknown" for a value outside the enum.
constexpr std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kUser:
      return "user";
    case Role::kAgent:
      return "agent";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

// The role named `name` (as RoleName writes it); nullopt for any other text.
constexpr std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : kRoles) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

}  // namespace kiln::storage
