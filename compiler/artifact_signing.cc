#include "compiler/artifact_signing.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "base/check.h"
#include "base/str.h"

namespace kiln::compiler {
namespace {

constexpr size_t kHeaderBytes = 152;
constexpr char kSignaturePrefix[] = "KILNSIG2";

uint32_t ReadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t ReadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string Sha256(std::string_view bytes) {
  std::string md(32, '\0');
  unsigned int len = 0;
  KILN_CHECK(EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(md.data()),
                        &len, EVP_sha256(), nullptr) == 1)
      << "EVP_Digest failed";
  return md;
}

std::string Hex(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char ch : raw) {
    out += kDigits[static_cast<uint8_t>(ch) >> 4];
    out += kDigits[static_cast<uint8_t>(ch) & 15];
  }
  return out;
}

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

struct SigningKey::Key {
  EVP_PKEY* pkey = nullptr;
  ~Key() { EVP_PKEY_free(pkey); }
};

absl::StatusOr<SigningKey> SigningKey::Generate() {
  auto key = std::make_shared<Key>();
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  const bool ok =
      ctx != nullptr && EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &key->pkey) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return absl::InternalError(StrCat("cannot make an Ed25519 key: ", OpenSslError()));
  return SigningKey(std::move(key));
}

absl::StatusOr<SigningKey> SigningKey::Load(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(StrCat("no signing key at '", path, "'"));
    return absl::PermissionDeniedError(
        StrCat("cannot read the signing key '", path, "': ", std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(
        StrCat("the signing key '", path, "' may be read by others than its owner (mode 0",
               (st.st_mode >> 6) & 7, (st.st_mode >> 3) & 7, st.st_mode & 7, "): chmod 600 it"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in) {
    return absl::PermissionDeniedError(StrCat("cannot read the signing key '", path, "'"));
  }
  const std::string pem = ss.str();
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  auto key = std::make_shared<Key>();
  key->pkey = bio == nullptr ? nullptr : PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ERR_clear_error();
  if (key->pkey == nullptr || EVP_PKEY_id(key->pkey) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError(StrCat(
        "'", path, "' holds no Ed25519 private key in PEM (\"-----BEGIN PRIVATE KEY-----\")"));
  }
  return SigningKey(std::move(key));
}

absl::StatusOr<SigningKey> SigningKey::LoadOrCreate(const std::string& path, bool* created) {
  *created = false;
  absl::StatusOr<SigningKey> loaded = Load(path);
  if (loaded.ok() || loaded.status().code() != absl::StatusCode::kNotFound) return loaded;
  absl::StatusOr<SigningKey> key = Generate();
  if (!key.ok()) return key.status();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    if (std::filesystem::create_directories(parent, ec)) {
      std::filesystem::permissions(parent, std::filesystem::perms::owner_all, ec);
    }
  }
  // Written under a temporary name, then linked into place: two processes
  // creating the key at once end with one key (the other's is discarded and
  // read back).
  const std::string tmp = StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        StrCat("cannot create the signing key '", path, "': ", std::strerror(errno)));
  }
  const std::string pem = key->PrivateKeyPem();
  const bool written =
      ::write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    return absl::InternalError(StrCat("cannot write the signing key '", path, "'"));
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (err == EEXIST) return Load(path);
    return absl::PermissionDeniedError(
        StrCat("cannot create the signing key '", path, "': ", std::strerror(err)));
  }
  *created = true;
  return key;
}

std::string SigningKey::PublicKeyPem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  KILN_CHECK(bio != nullptr && PEM_write_bio_PUBKEY(bio, key_->pkey) == 1) << OpenSslError();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string SigningKey::PrivateKeyPem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  KILN_CHECK(bio != nullptr &&
             PEM_write_bio_PrivateKey(bio, key_->pkey, nullptr, nullptr, 0, nullptr, nullptr) == 1)
      << OpenSslError();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string SigningKey::PublicKeyRaw() const {
  std::string raw(32, '\0');
  size_t len = raw.size();
  KILN_CHECK(EVP_PKEY_get_raw_public_key(key_->pkey, reinterpret_cast<unsigned char*>(raw.data()),
                                         &len) == 1 &&
             len == 32)
      << OpenSslError();
  return raw;
}

std::string SigningKey::Fingerprint() const {
  return StrCat("SHA256:", Hex(Sha256(PublicKeyRaw())).substr(0, 16));
}

std::string SigningKey::Sign(std::string_view message) const {
  std::string sig(64, '\0');
  size_t len = sig.size();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  KILN_CHECK(
      ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_->pkey) == 1 &&
      EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1 &&
      len == 64)
      << "Ed25519 signing failed: " << OpenSslError();
  EVP_MD_CTX_free(ctx);
  return sig;
}

absl::Status SignArtifact(std::string* artifact, const SigningKey& key) {
  const std::string_view bytes = *artifact;
  if (bytes.size() < 16 || bytes.substr(0, 8) != "KILNART1") {
    return absl::InvalidArgumentError("not a kiln artifact: bad magic");
  }
  if (const uint32_t version = ReadU32(bytes.data() + 8); version != 2) {
    return absl::InvalidArgumentError(StrCat("cannot sign an artifact of format version ", version,
                                             " (only version 2 carries digests): recompile it"));
  }
  if (bytes.size() < kHeaderBytes) return absl::DataLossError("truncated artifact header");
  const uint32_t count = ReadU32(bytes.data() + 12);
  std::map<std::string, std::string_view> sections;
  uint64_t pos = kHeaderBytes;
  for (uint32_t s = 0; s < count; ++s) {
    if (bytes.size() - pos < 4) return absl::DataLossError("truncated section table");
    const uint32_t len = ReadU32(bytes.data() + pos);
    pos += 4;
    if (bytes.size() - pos < uint64_t{len} + 16) {
      return absl::DataLossError("truncated section table");
    }
    std::string name(bytes.substr(pos, len));
    const uint64_t offset = ReadU64(bytes.data() + pos + len);
    const uint64_t size = ReadU64(bytes.data() + pos + len + 8);
    pos += len + 16;
    if (offset > bytes.size() || size > bytes.size() - offset) {
      return absl::DataLossError(StrCat("section '", name, "' runs past the end of the file"));
    }
    if (!sections.emplace(name, bytes.substr(offset, size)).second) {
      return absl::DataLossError(StrCat("duplicate section '", name, "'"));
    }
  }
  auto manifest = sections.find("manifest");
  if (manifest == sections.end()) return absl::DataLossError("the artifact has no manifest");
  const std::string digest = Sha256(manifest->second);
  if (digest != bytes.substr(16, 32)) {
    return absl::DataLossError("the manifest does not hash to the header's digest");
  }
  std::map<std::string, std::string> listed;  // name -> hex
  for (std::string_view line : StrSplit(manifest->second, '\n')) {
    if (line.substr(0, 8) != "section ") continue;
    std::vector<std::string_view> f = StrSplit(line.substr(8), ' ');
    if (f.size() != 3 || f[1] != "sha256") {
      return absl::DataLossError(StrCat("bad manifest record '", line, "'"));
    }
    listed.emplace(std::string(f[0]), std::string(f[2]));
  }
  for (const auto& [name, data] : sections) {
    if (name == "manifest") continue;
    auto it = listed.find(name);
    if (it == listed.end() || it->second != Hex(Sha256(data))) {
      return absl::DataLossError(
          StrCat("section '", name, "' does not match its digest in the manifest"));
    }
  }
  if (listed.size() + 1 != sections.size()) {
    return absl::DataLossError("the manifest lists a section the file does not have");
  }
  const std::string signature = key.Sign(StrCat(std::string_view(kSignaturePrefix, 8), digest));
  const std::string raw = key.PublicKeyRaw();
  char* header = artifact->data();
  header[48] = 1;  // scheme: Ed25519 (u32, little-endian)
  std::memset(header + 49, 0, 7);
  std::memcpy(header + 56, raw.data(), 32);
  std::memcpy(header + 88, signature.data(), 64);
  return absl::OkStatus();
}

}  // namespace kiln::compiler
