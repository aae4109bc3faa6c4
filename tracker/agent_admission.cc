#include "tracker/agent_admission.h"

#include <tuple>

#include "base/names.h"
#include "base/str.h"
#include "compiler/target.h"

namespace kiln::tracker {

absl::StatusOr<Admission> AdmitAgent(const Caller& caller, const AgentHello& hello,
                                     const AdmissionPolicy& policy,
                                     const std::string& tracker_version) {
  if (caller.role.has_value() && *caller.role != storage::Role::kAgent) {
    return absl::PermissionDeniedError(
        StrCat("token ", caller.token_id, " is a ", storage::RoleName(*caller.role),
               "'s, not an agent's (kiln-tracker tokens create --role agent)"));
  }
  if (!caller.role.has_value() && !policy.token.empty() &&
      !ConstantTimeEquals(hello.token, policy.token)) {
    return absl::UnauthenticatedError("wrong or missing agent token");
  }
  for (const auto& [what, value, max] :
       {std::tuple<const char*, const std::string&, size_t>{"agent_id", hello.agent_id,
                                                            kMaxNameBytes},
        {"device_key", hello.device_key, kMaxNameBytes},
        {"target", hello.target, kMaxSpecBytes},
        {"hardware", hello.hardware, kMaxSpecBytes},
        {"compiler_version", hello.compiler_version, kMaxNameBytes}}) {
    if (absl::Status st = CheckName(StrCat("Hello's ", what), value, max); !st.ok()) return st;
  }
  if (hello.compiler_version != tracker_version) {
    return absl::FailedPreconditionError(StrCat("agent compiler version '", hello.compiler_version,
                                                "' differs from the tracker's '", tracker_version,
                                                "'"));
  }
  if (hello.agent_id.empty() || hello.device_key.empty()) {
    return absl::InvalidArgumentError("Hello needs an agent_id and a device_key");
  }
  Admission a;
  a.info.target = hello.target;
  if (!hello.target.empty()) {
    auto parsed = compiler::Target::Parse(hello.target);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(StrCat("bad agent target '", hello.target,
                                               "': ", std::string(parsed.status().message())));
    }
    a.info.target = parsed->Spec();
  }
  // An agent token's holder is its user; one process serving several boards
  // (kiln-agent --board) names each session ID/BOARD, kept as USER/BOARD:
  // under the token's own name only.
  a.info.id = hello.agent_id;
  if (caller.role.has_value()) {
    const size_t slash = hello.agent_id.find('/');
    a.info.id = slash == std::string::npos || slash + 1 == hello.agent_id.size()
                    ? caller.user
                    : StrCat(caller.user, hello.agent_id.substr(slash));
    if (absl::Status st = CheckName("the agent's id", a.info.id, kMaxNameBytes); !st.ok()) {
      return st;
    }
  }
  a.info.device_key = hello.device_key;
  a.info.hardware = hello.hardware;
  a.info.peak_gflops = hello.peak_gflops;
  a.info.compiler_version = hello.compiler_version;
  if (!caller.owner.empty() && !policy.Shared(a.info.device_key)) a.runs_for = caller.owner;
  return a;
}

}  // namespace kiln::tracker
