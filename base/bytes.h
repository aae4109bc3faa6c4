#pragma once
// Little-endian integers in byte buffers and lowercase hex: what the
// artifact container (deploy/, compiler/), its tests and the object store
// write and read.
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

inline uint32_t ReadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

inline uint64_t ReadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Two lowercase hex digits per byte.
inline std::string Hex(std::string_view raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * raw.size());
  for (char ch : raw) {
    out += kDigits[static_cast<uint8_t>(ch) >> 4];
    out += kDigits[static_cast<uint8_t>(ch) & 15];
  }
  return out;
}

}  // namespace kiln
