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
inline constexpr uint32_t kArtifactVersion = 1;

// The sections of a container; the views point into the parsed bytes. Checks
// magic, version, bounds and that `manifest`, `module.so` and `weights` exist.
struct Container {
  std::map<std::string, std::string_view> sections;
};
absl::StatusOr<Container> ParseContainer(std::string_view bytes);

// Parses the manifest text. INVALID_ARGUMENT naming the line on a bad record.
absl::StatusOr<Manifest> ParseManifest(std::string_view text);

// "1x3x32x32", or "scalar" for no dimensions.
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace kiln::deploy
