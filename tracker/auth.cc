#include "tracker/auth.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/sha256.h"
#include "base/str.h"

namespace kiln::tracker {

absl::StatusOr<std::string> NewTokenSecret() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(StrCat("getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out = "kiln_";
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string TokenHash(std::string_view secret) { return kiln::Sha256Hex(secret); }

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = static_cast<unsigned char>(
        diff | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  // Keeps the compiler from ending the loop at the first difference.
  asm volatile("" : "+r"(diff));
  return diff == 0;
}

absl::StatusOr<Caller> Authenticator::Authenticate(std::string_view authorization) const {
  if (authorization.empty()) {
    if (require_) {
      return absl::UnauthenticatedError(
          "this tracker requires a token (kiln --token or KILN_TOKEN; an operator creates one "
          "with kiln-tracker tokens create)");
    }
    return Caller{};
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) {
    return absl::UnauthenticatedError("the authorization metadata is not 'Bearer TOKEN'");
  }
  std::string_view secret = authorization.substr(kBearer.size());
  if (db_ == nullptr) return absl::UnauthenticatedError("unknown token");
  // Looked up by hash: what the comparison's timing could reveal is the
  // hash, not the secret.
  auto row = db_->TokenByHash(TokenHash(secret));
  if (!row.ok()) return row.status();
  if (!row->has_value()) return absl::UnauthenticatedError("unknown token");
  if ((*row)->revoked_unix_ms != 0) {
    return absl::UnauthenticatedError(StrCat("token ", (*row)->id, " was revoked"));
  }
  return Caller{(*row)->user, (*row)->role, (*row)->id, (*row)->owner};
}

}  // namespace kiln::tracker
