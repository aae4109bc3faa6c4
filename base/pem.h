#pragma once
// ReadPem: a PEM file (certificate, key, CA bundle) read whole, for the TLS
// options of kiln-tracker, kiln-agent and kiln. Part of base/: header-only.
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace kiln {

// The file's text; nullopt when it cannot be read or holds no PEM block.
inline std::optional<std::string> ReadPem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || text.find("-----BEGIN") == std::string::npos) return std::nullopt;
  return text;
}

}  // namespace kiln
