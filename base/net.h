#pragma once
// Network address helpers. Part of base/: header-only and dependency-free.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Whether HOST:PORT (or [V6]:PORT), or every one of "HOST:PORT,HOST:PORT"
// (several trackers of one farm), names this machine only: 127.0.0.0/8, ::1
// or localhost.
inline bool IsLoopbackAddress(std::string_view addresses) {
  bool any = false;
  while (!addresses.empty()) {
    const size_t comma = addresses.find(',');
    std::string_view address = addresses.substr(0, comma);
    addresses.remove_prefix(comma == std::string_view::npos ? addresses.size() : comma + 1);
    if (address.empty()) continue;
    std::string_view host = address.substr(0, address.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (host != "localhost" && host != "::1" && host.substr(0, 4) != "127.") return false;
    any = true;
  }
  return any;
}

// "HOST:PORT[,HOST:PORT...]" split at the commas.
inline std::vector<std::string> SplitAddresses(std::string_view addresses) {
  std::vector<std::string> out;
  while (!addresses.empty()) {
    const size_t comma = addresses.find(',');
    std::string_view one = addresses.substr(0, comma);
    if (!one.empty()) out.emplace_back(one);
    if (comma == std::string_view::npos) break;
    addresses.remove_prefix(comma + 1);
  }
  return out;
}

// The gRPC channel target for "HOST:PORT[,HOST:PORT...]" (several trackers
// of one farm): one address as given; several as one "ipv4:" list (names
// resolved here), along which gRPC's pick_first policy fails over: the
// first that answers serves the channel, and when it goes away the next
// call moves on to the next. When a name does not resolve to IPv4 the
// addresses are left to gRPC one by one: the first only.
inline std::string ChannelTarget(std::string_view addresses) {
  const std::vector<std::string> list = SplitAddresses(addresses);
  if (list.size() <= 1) return list.empty() ? std::string(addresses) : list[0];
  std::string out = "ipv4:";
  for (const std::string& a : list) {
    const size_t colon = a.rfind(':');
    if (colon == std::string::npos) return list[0];
    const std::string host = a.substr(0, colon);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return list[0];
    char ip[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, ip, sizeof ip);
    ::freeaddrinfo(res);
    out += (out.size() > 5 ? "," : "") + std::string(ip) + a.substr(colon);
  }
  return out;
}

}  // namespace kiln
