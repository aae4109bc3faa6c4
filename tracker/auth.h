#pragma once
// Who is calling: bearer tokens in gRPC metadata ("authorization: Bearer
// TOKEN"). A token is `kiln_` and 64 random hex digits; the log database
// stores only its SHA-256, with the user name and role it stands for
// ("user", "agent" or "admin"). Tokens are created, listed and revoked with
// `kiln-tracker tokens ...` (tracker_main.cc) on the database file; the
// tracker looks each presented token up as it arrives, so a revocation takes
// effect at the next call.
//
// A caller without a token is anonymous: accepted only when the tracker does
// not require authentication. A caller with a token is checked whether or not
// authentication is required (a wrong or revoked token is never ignored).

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "storage/farm_store.h"

namespace kiln::tracker {

struct Caller {
  std::string user;                   // "" for an anonymous caller
  std::optional<storage::Role> role;  // nullopt for an anonymous caller
  int64_t token_id = 0;
  std::string owner;  // an agent's token: the user who runs that agent ("" the farm)
  bool admin() const { return role == storage::Role::kAdmin; }
  // Whether this caller may see a job (its records, its artifact) of `owner`:
  // an admin sees everything, anyone else the jobs they submitted (anonymous
  // callers see anonymous jobs).
  bool MaySee(const std::string& owner) const { return admin() || owner == user; }
};

// A fresh token secret: `kiln_` and 64 hex digits from the kernel's CSPRNG.
absl::StatusOr<std::string> NewTokenSecret();
// What the database stores of a secret.
std::string TokenHash(std::string_view secret);
// Compares without an early exit (the time does not depend on where two
// equally long strings differ).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class Authenticator {
 public:
  // db may be null (then only anonymous callers exist).
  Authenticator(storage::FarmStore* db, bool require_auth) : db_(db), require_(require_auth) {}

  bool required() const { return require_; }
  // The caller of an RPC from its "authorization" metadata value (empty when
  // absent). UNAUTHENTICATED for a missing (when required), malformed,
  // unknown or revoked token.
  absl::StatusOr<Caller> Authenticate(std::string_view authorization) const;

 private:
  storage::FarmStore* db_;
  bool require_;
};

}  // namespace kiln::tracker
