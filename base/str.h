#pragma once
// kiln::StrCat / StrJoin: string building that accepts std::string_view.
// (Debian 12's Abseil is built as C++14: absl::string_view is not
// std::string_view, so absl::StrCat rejects std::string_view arguments.)
// Part of base/: header-only and dependency-free, usable from every component.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/vocabulary.h"

namespace kiln {

namespace str_internal {
// Appends one StrCat argument as `std::ostream <<` would print it: text as
// is, integers in decimal, floating point as "%g" (the stream's default),
// bool as 0/1, an enum of a closed vocabulary (base/vocabulary.h) as its
// name; any other type through its operator<<. Without a stream for
// the common types: StrCat is on the tracker's per-record paths.
template <typename T>
void Append(std::string& out, const T& value) {
  using D = std::decay_t<T>;
  if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out.append(std::string_view(value));
  } else if constexpr (std::is_same_v<D, char> || std::is_same_v<D, signed char> ||
                       std::is_same_v<D, unsigned char>) {
    out.push_back(static_cast<char>(value));
  } else if constexpr (requires { Vocabulary<D>::kNames; }) {
    out.append(NameOf(value));
  } else if constexpr (std::is_same_v<D, bool>) {
    out.push_back(value ? '1' : '0');
  } else if constexpr (std::is_integral_v<D>) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out.append(buf, end);
  } else if constexpr (std::is_floating_point_v<D>) {
    char buf[32];
    int n = std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(value));
    out.append(buf, n > 0 ? static_cast<size_t>(n) : 0);
  } else {
    std::ostringstream os;
    os << value;
    out += os.str();
  }
}
}  // namespace str_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (str_internal::Append(out, args), ...);
  return out;
}

template <typename Range>
std::string StrJoin(const Range& range, std::string_view sep) {
  std::ostringstream os;
  bool first = true;
  for (const auto& item : range) {
    if (!first) os << sep;
    os << item;
    first = false;
  }
  return os.str();
}

// Splits on `sep`; with skip_empty, empty pieces are dropped. The views point
// into `text`.
inline std::vector<std::string_view> StrSplit(std::string_view text, char sep,
                                              bool skip_empty = false) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    std::string_view piece = text.substr(start, pos == std::string_view::npos ? pos : pos - start);
    if (!skip_empty || !piece.empty()) out.push_back(piece);
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

// Whole-string parses; false on any junk.
// A device's name as target specs and agents write it: spaces as '_'
// ("NVIDIA H100 80GB HBM3" -> "NVIDIA_H100_80GB_HBM3").
inline std::string DeviceId(std::string name) {
  for (char& c : name) c = c == ' ' ? '_' : c;
  return name;
}

inline bool ParseInt64(std::string_view text, int64_t* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

inline bool ParseDouble(std::string_view text, double* out) {
  if (text.empty()) return false;
  std::string copy(text);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

// The shortest decimal text ("%.15g" to "%.17g") that parses back to the
// same double.
inline std::string FormatDouble(double value) {
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

// A positive duration as a short human value: "12.34 us", "1.234 ms",
// "1.234 s".
inline std::string FormatSeconds(double seconds) {
  char buf[64];
  if (seconds < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.2f us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(buf, sizeof(buf), "%.3f ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3f s", seconds);
  }
  return buf;
}

// The length of the UTF-8 sequence at the start of `s` (1 to 4), or 0 where
// it is not valid UTF-8 (overlong forms, surrogates and code points past
// U+10FFFF are not).
inline size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2, cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, cp = c & 0x07;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// The code point of a valid sequence of `n` bytes (Utf8SequenceLength).
inline uint32_t Utf8CodePoint(std::string_view s, size_t n) {
  static constexpr unsigned char kLead[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  uint32_t cp = static_cast<unsigned char>(s[0]) & kLead[n];
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3f);
  return cp;
}

// Control characters: C0, DEL, C1, and the bidirectional overrides and
// isolates that reorder what a terminal or page shows.
inline bool IsControlCodePoint(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// Valid UTF-8 with no control characters (Utf8SequenceLength,
// IsControlCodePoint): what names and keys from users must be.
inline bool IsPrintableUtf8(std::string_view s) {
  while (!s.empty()) {
    const size_t n = Utf8SequenceLength(s);
    if (n == 0 || IsControlCodePoint(Utf8CodePoint(s, n))) return false;
    s.remove_prefix(n);
  }
  return true;
}

// `s` as printable text for a log line or a terminal: control characters and
// bytes that are not UTF-8 as \xNN (a control code point of several bytes as
// \u{NNNN}), a backslash doubled, everything else as it is. Strings from
// users pass through here before they reach a log or a terminal.
inline std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  while (!s.empty()) {
    size_t n = Utf8SequenceLength(s);
    if (n == 0) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(s[0]));
      out += buf;
      n = 1;
    } else if (const uint32_t cp = Utf8CodePoint(s, n); IsControlCodePoint(cp)) {
      std::snprintf(buf, sizeof(buf), cp < 0x80 ? "\\x%02x" : "\\u{%04x}", cp);
      out += buf;
    } else if (s[0] == '\\') {
      out += "\\\\";
    } else {
      out.append(s.data(), n);
    }
    s.remove_prefix(n);
  }
  return out;
}

}  // namespace kiln
