#pragma once
// This host's cache sizes, read once from Linux's sysfs: where a kernel's
// weights sit between two runs of a model (compiler::CacheStateFor) and
// what a board reports of itself (kiln-board).
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "base/str.h"

namespace kiln {

struct CacheSizes {
  int64_t core_bytes = 0;        // a core's own largest cache (L2); 0: unknown
  int64_t last_level_bytes = 0;  // the shared last level (L3); 0: unknown
};

// The size in /sys/devices/system/cpu/cpu0/cache/indexN/size ("1024K").
inline int64_t SysfsCacheBytes(const std::string& dir) {
  std::ifstream size_file(dir + "/size");
  std::string text;
  if (!(size_file >> text) || text.empty()) return 0;
  int64_t scale = 1;
  const char unit = text.back();
  if (unit == 'K') scale = int64_t{1} << 10;
  if (unit == 'M') scale = int64_t{1} << 20;
  if (unit == 'K' || unit == 'M') text.pop_back();
  int64_t n = 0;
  return ParseInt64(text, &n) && n > 0 ? n * scale : 0;
}

// This host's, read once from /sys/devices/system/cpu/cpu0/cache (glibc's
// sysconf reports every L3 of a many-die EPYC as one).
inline const CacheSizes& HostCaches() {
  static const CacheSizes caches = [] {
    CacheSizes c;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = StrCat("/sys/devices/system/cpu/cpu0/cache/index", i);
      std::ifstream level_file(dir + "/level"), type_file(dir + "/type");
      int level = 0;
      std::string type;
      if (!(level_file >> level) || !(type_file >> type)) continue;
      if (type != "Unified" && type != "Data") continue;
      const int64_t bytes = SysfsCacheBytes(dir);
      if (level == 2) c.core_bytes = std::max(c.core_bytes, bytes);
      if (level >= 3) c.last_level_bytes = std::max(c.last_level_bytes, bytes);
    }
    return c;
  }();
  return caches;
}

}  // namespace kiln
