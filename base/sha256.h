#pragma once
// SHA-256 through OpenSSL's libcrypto, header-only so that every component
// shares one: the artifact's section and manifest digests, a model's source
// hash, a key's fingerprint, the artifact store's content addresses, token
// digests. base/bytes.h's Hex writes a digest as text.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/check.h"
#include "base/str.h"

namespace kiln {

// The 32 raw bytes of the SHA-256 of `bytes`.
inline std::string Sha256(std::string_view bytes) {
  std::string md(32, '\0');
  unsigned int len = 0;
  KILN_CHECK(EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(md.data()),
                        &len, EVP_sha256(), nullptr) == 1 &&
             len == 32)
      << "EVP_Digest(SHA-256) failed";
  return md;
}

// SHA-256 of bytes that come in pieces (a file read a megabyte at a time).
class Sha256Stream {
 public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
    KILN_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1)
        << "EVP_DigestInit(SHA-256) failed";
  }
  ~Sha256Stream() { EVP_MD_CTX_free(ctx_); }
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void Update(std::string_view bytes) {
    KILN_CHECK(EVP_DigestUpdate(ctx_, bytes.data(), bytes.size()) == 1)
        << "EVP_DigestUpdate(SHA-256) failed";
  }
  // The 32 raw bytes; call once (or HexDigest once).
  std::string Digest() {
    std::string md(32, '\0');
    unsigned int len = 0;
    KILN_CHECK(EVP_DigestFinal_ex(ctx_, reinterpret_cast<unsigned char*>(md.data()), &len) == 1 &&
               len == 32)
        << "EVP_DigestFinal(SHA-256) failed";
    return md;
  }
  std::string HexDigest() { return Hex(Digest()); }

 private:
  EVP_MD_CTX* ctx_;
};

// The SHA-256 of `bytes` as 64 lowercase hex digits (a content address).
inline std::string Sha256Hex(std::string_view bytes) { return Hex(Sha256(bytes)); }

// Whether `text` is 64 lowercase hex digits.
inline bool IsSha256Hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The 32 raw bytes of HMAC-SHA-256 of `bytes` under `key` (RFC 2104).
inline std::string HmacSha256(std::string_view key, std::string_view bytes) {
  std::string mac(32, '\0');
  unsigned int len = 0;
  KILN_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(),
                  reinterpret_cast<unsigned char*>(mac.data()), &len) != nullptr &&
             len == 32)
      << "HMAC(SHA-256) failed";
  return mac;
}

// Whether two secrets' digests are equal, in time that does not depend on
// where they differ (CRYPTO_memcmp): never compare a MAC with ==.
inline bool SameSecret(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// "SHA256:<first 16 hex digits of the SHA-256 of the raw key>": how kiln
// names a signing key in messages.
inline std::string KeyFingerprint(std::string_view raw_key) {
  return StrCat("SHA256:", Hex(Sha256(raw_key)).substr(0, 16));
}

}  // namespace kiln
