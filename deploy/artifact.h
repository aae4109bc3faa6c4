#pragma once
// Parsing of the artifact container and its manifest (docs/artifact-format.md),
// separate from loading so that tools and tests can inspect a file.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "deploy/runtime.h"

namespace kiln::deploy {

inline constexpr char kArtifactMagic[] = "KILNART1";  // 8 bytes, no NUL in the file
inline constexpr uint32_t kArtifactVersion = 2;
// The fixed header: magic, version, section count, the manifest's SHA-256,
// the signature block (scheme, reserved, signer's key, signature).
inline constexpr size_t kArtifactHeaderBytes = 152;
// What an Ed25519 signature of an artifact signs: this prefix, then the 32
// bytes of the manifest's SHA-256.
inline constexpr char kSignaturePrefix[] = "KILNSIG2";  // 8 bytes

enum class SignatureScheme : uint32_t { kNone = 0, kEd25519 = 1 };

// The sections of a container; the views point into the parsed bytes. Checks
// magic, version, bounds, that every byte outside the header and the
// sections is zero padding, and that `manifest`, `module.so` and `weights`
// exist. Checks no digest (VerifyManifestDigest, VerifySectionDigests).
struct Container {
  std::map<std::string, std::string_view> sections;
  std::string manifest_sha256;  // 32 bytes, from the header
  SignatureScheme scheme = SignatureScheme::kNone;
  std::string signer_key;  // Ed25519 public key, 32 bytes (signed artifacts)
  std::string signature;   // 64 bytes (signed artifacts)
};
absl::StatusOr<Container> ParseContainer(std::string_view bytes);

// DATA_LOSS unless the manifest section hashes to the header's digest.
absl::Status VerifyManifestDigest(const Container& c);
// A signed artifact's signature, checked against the key it names, and,
// when `trust_key` (a PEM public key, "-----BEGIN PUBLIC KEY-----") is not
// empty, that key must be the trusted one: UNAUTHENTICATED when the artifact
// is unsigned, signed by another key, or its signature is wrong;
// INVALID_ARGUMENT for a trust key that is not an Ed25519 PEM public key.
absl::Status VerifySignature(const Container& c, std::string_view trust_key);
// DATA_LOSS unless every section other than the manifest is listed in the
// manifest and hashes to its digest there, and every listed one exists.
absl::Status VerifySectionDigests(const Container& c, const Manifest& m);

// The raw 32 bytes of an Ed25519 public key in PEM; INVALID_ARGUMENT.
absl::StatusOr<std::string> ParseTrustKey(std::string_view pem);

// What the CPU entry point's `<entry>_io` string must say for a manifest:
// its workspace and weights sizes and its input and output records, one a
// line, as in the manifest.
std::string IoContract(const Manifest& m);

// Parses the manifest text. INVALID_ARGUMENT naming the line on a bad record.
absl::StatusOr<Manifest> ParseManifest(std::string_view text);

// "1x3x32x32", or "scalar" for no dimensions.
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace kiln::deploy
