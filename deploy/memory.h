#pragma once
// Large runtime buffers (a module's weights and workspace, the kernel scratch
// arena): from 2 MiB on, aligned to 2 MiB and advised onto transparent huge
// pages (MADV_HUGEPAGE; the kernel's default `madvise` mode honours it), so
// that kernels streaming megabytes of weights do not miss the TLB every
// 4 KiB. Smaller ones are aligned to `align`.
#include <cstddef>

namespace kiln::deploy {

// At least `bytes` (rounded up to the alignment; the size in *rounded), or
// nullptr when the memory cannot be had. Release with std::free.
void* AllocLarge(size_t bytes, size_t align, size_t* rounded);

}  // namespace kiln::deploy
