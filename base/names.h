#pragma once
// The rule for strings a user or an agent names things with (a model's
// name, a device key, an agent id, a target, a file location): bounded and
// printable UTF-8 (base/str.h: IsPrintableUtf8), checked where they enter,
// so that no log line, terminal, page or plot gets a control character from
// them and no row grows with them.
#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "base/str.h"

namespace kiln {

// Names and keys; target specs and hardware descriptions are longer.
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxSpecBytes = 1024;

// INVALID_ARGUMENT naming `what` when `value` is longer than `max_bytes` or
// not printable UTF-8. The message never repeats the value.
[[nodiscard]] inline absl::Status CheckName(std::string_view what, std::string_view value,
                                            size_t max_bytes = kMaxNameBytes) {
  if (value.size() > max_bytes) {
    return absl::InvalidArgumentError(
        StrCat(what, " is ", value.size(), " bytes; at most ", max_bytes, " are allowed"));
  }
  if (!IsPrintableUtf8(value)) {
    return absl::InvalidArgumentError(
        StrCat(what, " must be printable UTF-8 (no control characters)"));
  }
  return absl::OkStatus();
}

// A name as a reply, a page or a request shows it: printable (Printable),
// and at most kMaxNameBytes ("..." ends a cut). For rows written before
// names were checked (CheckName), so that no old row can make a reply fail,
// and for names a client derives (a file's name).
inline std::string ShownName(std::string_view value) {
  if (value.size() <= kMaxNameBytes && IsPrintableUtf8(value)) return std::string(value);
  std::string shown = Printable(value.substr(0, 4 * kMaxNameBytes));
  if (shown.size() <= kMaxNameBytes && value.size() <= 4 * kMaxNameBytes) return shown;
  size_t cut = kMaxNameBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xc0) == 0x80) --cut;
  return shown.substr(0, cut) + "...";
}

}  // namespace kiln
