#pragma once
// Linux's /proc/cpuinfo, read as text: what a board says of its CPU
// (kiln-board's description) and what the host makes of it
// (compiler::Target::FromCpuInfo).
#include <fstream>
#include <string>
#include <string_view>

namespace kiln {

// The value of the first `key : value` line of `cpuinfo` ("model name",
// "flags", "Features", "CPU part"), without the spaces around it; "" when
// there is none.
inline std::string_view CpuInfoValue(std::string_view cpuinfo, std::string_view key) {
  while (!cpuinfo.empty()) {
    const size_t end = cpuinfo.find('\n');
    std::string_view line = cpuinfo.substr(0, end);
    cpuinfo.remove_prefix(end == std::string_view::npos ? cpuinfo.size() : end + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.remove_suffix(1);
    if (k != key) continue;
    std::string_view v = line.substr(colon + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
    return v;
  }
  return {};
}

// The first processor's block of this machine's /proc/cpuinfo (up to its
// first blank line), at most `max_bytes`.
inline std::string FirstCpuInfoBlock(size_t max_bytes = 16 << 10) {
  std::ifstream in("/proc/cpuinfo");
  std::string out, line;
  while (std::getline(in, line) && out.size() + line.size() < max_bytes) {
    if (line.empty() && !out.empty()) break;
    out += line + "\n";
  }
  return out;
}

}  // namespace kiln
