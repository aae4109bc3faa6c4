#pragma once
// Whether an agent's Hello admits it to the farm, and as whom: the session
// policy the AgentSession adapter (tracker/agent_session.cc) applies once
// the caller's token is authenticated, as a domain function with no gRPC.
//
// With a bearer token the token's user is the agent's id (whatever the
// Hello says; a Hello's "ID/BOARD", one of the sessions of an agent process
// serving several boards, becomes USER/BOARD: under the token's own name), and
// only an agent's token opens a session: an admin's names
// a person, and what an agent reports becomes every user's starting point.
// Without one (a tracker that allows anonymous agents) the Hello's id, after
// the legacy shared secret when the tracker has one. Every name is bounded
// and printable, the compiler version must be the tracker's, the target is
// canonicalized. An agent whose token names its owner measures that
// owner's jobs only, unless the farm shares its key.

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "tracker/agent_registry.h"
#include "tracker/auth.h"

namespace kiln::tracker {

struct AdmissionPolicy {
  std::string token;  // the legacy shared secret ("": none)
  // Keys whose agents the farm shares (kiln-tracker --shared-keys; "*": all):
  // there an agent its owner runs measures anyone's batches, and what it
  // measures is everyone's. Elsewhere such an agent serves its owner only.
  std::set<std::string> shared_keys;
  bool Shared(const std::string& key) const {
    return shared_keys.count("*") > 0 || shared_keys.count(key) > 0;
  }
};

// What a Hello says, out of its message.
struct AgentHello {
  std::string agent_id;
  std::string device_key;
  std::string target;  // an LLVM or GPU target spec, or "" (the host's)
  std::string hardware;
  std::string compiler_version;
  std::string token;  // the legacy shared secret
  double peak_gflops = 0;
};

struct Admission {
  AgentInfo info;        // id, key, canonical target, hardware, version, peak
  std::string runs_for;  // the user whose jobs alone it measures, or ""
};

// PERMISSION_DENIED for a token that is not an agent's, UNAUTHENTICATED for
// a wrong legacy secret, INVALID_ARGUMENT for a bad name or target,
// FAILED_PRECONDITION for another compiler version than `tracker_version`.
absl::StatusOr<Admission> AdmitAgent(const Caller& caller, const AgentHello& hello,
                                     const AdmissionPolicy& policy,
                                     const std::string& tracker_version);

}  // namespace kiln::tracker
