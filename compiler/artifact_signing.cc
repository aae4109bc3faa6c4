#include "compiler/artifact_signing.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include "absl/status/status.h"
#include "base/bytes.h"
#include "base/check.h"
#include "base/sha256.h"
#include "base/str.h"

namespace kiln::compiler {
namespace {

constexpr size_t kHeaderBytes = 152;
constexpr char kSignaturePrefix[] = "KILNSIG2";

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

namespace {

// What `write` puts in a memory BIO, as text (a PEM block).
std::string PemOf(const std::function<int(BIO*)>& write) {
  BIO* bio = BIO_new(BIO_s_mem());
  KILN_CHECK(bio != nullptr && write(bio) == 1) << OpenSslError();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace

std::string SigningKey::PublicKeyPem() const {
  return PemOf([&](BIO* bio) { return PEM_write_bio_PUBKEY(bio, key_->pkey); });
}

std::string SigningKey::PrivateKeyPem() const {
  return PemOf([&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key_->pkey, nullptr, nullptr, 0, nullptr, nullptr);
  });
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

std::string SigningKey::Fingerprint() const { return kiln::KeyFingerprint(PublicKeyRaw()); }

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

namespace {

// The signature block (header bytes 48..152) for `bytes`, an artifact,
// after checking its container and digests.
absl::StatusOr<std::string> SignatureBlock(std::string_view bytes, const SigningKey& key) {
  const uint64_t file_size = bytes.size();
  auto bytes_at = [&](uint64_t offset, uint64_t size) -> absl::StatusOr<std::string_view> {
    if (offset > file_size || size > file_size - offset) {
      return absl::DataLossError("truncated artifact");
    }
    return bytes.substr(offset, size);
  };
  const std::string_view header = bytes.substr(0, kHeaderBytes);
  if (header.size() < 16 || header.substr(0, 8) != "KILNART1") {
    return absl::InvalidArgumentError("not a kiln artifact: bad magic");
  }
  if (const uint32_t version = ReadU32(header.data() + 8); version != 2) {
    return absl::InvalidArgumentError(StrCat("cannot sign an artifact of format version ", version,
                                             " (only version 2 carries digests): recompile it"));
  }
  if (header.size() < kHeaderBytes) return absl::DataLossError("truncated artifact header");
  const uint32_t count = ReadU32(header.data() + 12);
  if (count > 1024) return absl::DataLossError(StrCat("section count ", count));
  std::map<std::string, std::string_view> sections;
  uint64_t pos = kHeaderBytes;
  for (uint32_t s = 0; s < count; ++s) {
    absl::StatusOr<std::string_view> len_bytes = bytes_at(pos, 4);
    if (!len_bytes.ok()) return absl::DataLossError("truncated section table");
    const uint32_t len = ReadU32(len_bytes->data());
    absl::StatusOr<std::string_view> entry = bytes_at(pos + 4, uint64_t{len} + 16);
    if (!entry.ok()) return absl::DataLossError("truncated section table");
    std::string name(entry->substr(0, len));
    pos += 4 + uint64_t{len} + 16;
    absl::StatusOr<std::string_view> data =
        bytes_at(ReadU64(entry->data() + len), ReadU64(entry->data() + len + 8));
    if (!data.ok()) {
      return absl::DataLossError(StrCat("section '", name, "' runs past the end of the file"));
    }
    if (!sections.emplace(name, *data).second) {
      return absl::DataLossError(StrCat("duplicate section '", name, "'"));
    }
  }
  auto manifest = sections.find("manifest");
  if (manifest == sections.end()) return absl::DataLossError("the artifact has no manifest");
  const std::string digest = kiln::Sha256(manifest->second);
  if (digest != header.substr(16, 32)) {
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
    if (it == listed.end() || it->second != Hex(kiln::Sha256(data))) {
      return absl::DataLossError(
          StrCat("section '", name, "' does not match its digest in the manifest"));
    }
  }
  if (listed.size() + 1 != sections.size()) {
    return absl::DataLossError("the manifest lists a section the file does not have");
  }
  std::string block(kHeaderBytes - 48, '\0');
  block[0] = 1;  // scheme: Ed25519 (u32, little-endian); then 4 reserved bytes
  const std::string raw = key.PublicKeyRaw();
  const std::string signature = key.Sign(StrCat(std::string_view(kSignaturePrefix, 8), digest));
  std::memcpy(block.data() + 8, raw.data(), 32);
  std::memcpy(block.data() + 40, signature.data(), 64);
  return block;
}

}  // namespace

absl::Status SignArtifact(std::string* artifact, const SigningKey& key) {
  absl::StatusOr<std::string> block = SignatureBlock(*artifact, key);
  if (!block.ok()) return block.status();
  artifact->replace(48, block->size(), *block);
  return absl::OkStatus();
}

absl::Status SignArtifactFile(const std::string& path, const SigningKey& key,
                              const std::function<absl::Status(std::string_view)>& write) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  struct stat st;
  const bool stated = ::fstat(fd, &st) == 0;
  const size_t size = stated ? static_cast<size_t>(st.st_size) : 0;
  // Mapped, not read: the file's pages stay the page cache's, so a large
  // artifact is never copied into the signer's memory.
  void* map = stated && size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (!stated) return absl::InternalError(StrCat("cannot stat '", path, "'"));
  if (map == MAP_FAILED) {
    return absl::InternalError(StrCat("cannot map '", path, "': ", std::strerror(errno)));
  }
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() {
      if (p != nullptr) ::munmap(p, n);
    }
  } unmap{map, size};
  const std::string_view bytes(static_cast<const char*>(map), size);
  absl::StatusOr<std::string> block = SignatureBlock(bytes, key);
  if (!block.ok()) return block.status();
  // The header with its signature block, then the rest as it is.
  if (absl::Status st = write(StrCat(bytes.substr(0, 48), *block)); !st.ok()) return st;
  for (size_t done = kHeaderBytes; done < size; done += 1 << 20) {
    if (absl::Status st = write(bytes.substr(done, 1 << 20)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
