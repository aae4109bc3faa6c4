#pragma once
// Static memory planning: buffers with lifetimes over kernel steps get
// 64-byte-aligned offsets in one workspace; a buffer's region is reused once
// its last reader has run (first-fit over a free list, coalescing on free).

#include <cstdint>
#include <vector>

namespace kiln::compiler {

struct BufferLifetime {
  int64_t bytes = 0;
  int first = 0;  // the step that writes it
  int last = 0;   // the last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per buffer, multiples of 64
  int64_t total_bytes = 0;       // a multiple of 64
};

inline constexpr int64_t kAlign = 64;
inline int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers);

}  // namespace kiln::compiler
