#pragma once
// Signing artifacts (docs/artifact-format.md, "Signature"): the tracker's
// Ed25519 key, and SignArtifact, which checks an artifact's digests as the
// runtime does and writes the signature of its manifest digest into its
// header. The runtime (deploy/artifact.cc) verifies; the two share no code,
// only the format page.
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kiln::compiler {

class SigningKey {
 public:
  // Reads a PEM Ed25519 private key (PKCS#8, "-----BEGIN PRIVATE KEY-----").
  // NOT_FOUND when there is no file; INVALID_ARGUMENT when it holds no
  // Ed25519 key; PERMISSION_DENIED when others than its owner may read it.
  static absl::StatusOr<SigningKey> Load(const std::string& path);
  // Load, or where there is no file, a new key written there (mode 0600,
  // its folder created 0700 if missing); *created says which.
  static absl::StatusOr<SigningKey> LoadOrCreate(const std::string& path, bool* created);
  // A fresh key, in memory (tests).
  static absl::StatusOr<SigningKey> Generate();

  // The public key as PEM ("-----BEGIN PUBLIC KEY-----"), what
  // `kiln-run --trust-key` and the runtime's trust key take.
  std::string PublicKeyPem() const;
  std::string PublicKeyRaw() const;  // 32 bytes
  // "SHA256:<16 hex digits>", as the runtime names keys in its messages.
  std::string Fingerprint() const;
  // The private key as PEM (PKCS#8).
  std::string PrivateKeyPem() const;
  // Ed25519 signature of `message` (64 bytes).
  std::string Sign(std::string_view message) const;

 private:
  struct Key;
  explicit SigningKey(std::shared_ptr<Key> key) : key_(std::move(key)) {}
  std::shared_ptr<Key> key_;
};

// Checks the container of `artifact` (format version 2), its manifest's
// digest and every section's, then signs it with `key` in place (a signature
// already there is replaced). DATA_LOSS / INVALID_ARGUMENT on a bad artifact.
absl::Status SignArtifact(std::string* artifact, const SigningKey& key);

// As SignArtifact, for the artifact in the file at `path`, mapped rather
// than read into memory: checks it, then passes the signed artifact's bytes
// to `write`, in order, in pieces of at most a MiB (the file itself is left
// as it is).
absl::Status SignArtifactFile(const std::string& path, const SigningKey& key,
                              const std::function<absl::Status(std::string_view)>& write);

}  // namespace kiln::compiler
