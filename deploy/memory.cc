#include "deploy/memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace kiln::deploy {

void* AllocLarge(size_t bytes, size_t align, size_t* rounded) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes >= kHugePage) align = std::max(align, kHugePage);
  *rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, *rounded);
  if (p != nullptr && align >= kHugePage) ::madvise(p, *rounded, MADV_HUGEPAGE);  // advice only
  return p;
}

}  // namespace kiln::deploy
