#pragma once
// Network address helpers. Part of base/: header-only and dependency-free.
#include <string>
#include <string_view>

namespace kiln {

// Whether HOST:PORT (or [V6]:PORT) names this machine only: 127.0.0.0/8,
// ::1 or localhost.
inline bool IsLoopbackAddress(std::string_view address) {
  std::string_view host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.substr(0, 4) == "127.";
}

}  // namespace kiln
