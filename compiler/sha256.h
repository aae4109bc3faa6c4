#pragma once
// SHA-256 through OpenSSL, for the compiler's digests: a model's source
// hash, the artifact's section and manifest digests, a signing key's
// fingerprint. base/bytes.h's Hex writes them as text.
#include <string>
#include <string_view>

namespace kiln::compiler {

// The 32 raw bytes of the SHA-256 of `bytes`.
std::string Sha256(std::string_view bytes);

}  // namespace kiln::compiler
