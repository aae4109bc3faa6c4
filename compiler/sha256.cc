#include "compiler/sha256.h"

#include <openssl/evp.h>

#include "base/check.h"

namespace kiln::compiler {

std::string Sha256(std::string_view bytes) {
  std::string md(32, '\0');
  unsigned int len = 0;
  KILN_CHECK(EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(md.data()),
                        &len, EVP_sha256(), nullptr) == 1 &&
             len == 32)
      << "EVP_Digest(SHA-256) failed";
  return md;
}

}  // namespace kiln::compiler
