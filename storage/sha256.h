#pragma once
// SHA-256 (OpenSSL's EVP): the content address of artifacts and models, and
// the digest of token secrets.

#include <string>
#include <string_view>

namespace kiln::storage {

// SHA-256 of bytes given in pieces.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(std::string_view bytes);
  // Lowercase hex; the hasher is spent afterwards.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// SHA-256 of bytes, lowercase hex. (Also used for model hashes.)
std::string Sha256Hex(std::string_view bytes);
// "a 64-digit lowercase hex string".
bool IsSha256Hex(std::string_view text);

}  // namespace kiln::storage
