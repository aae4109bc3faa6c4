#include "compiler/graph/memory_plan.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "base/check.h"

namespace kiln::compiler {

MemoryPlan PlanMemory(const std::vector<BufferLifetime>& buffers) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), -1);
  int steps = 0;
  for (const auto& b : buffers) {
    KILN_CHECK(b.first <= b.last && b.first >= 0) << "bad lifetime";
    steps = std::max(steps, b.last + 1);
  }
  std::map<int64_t, int64_t> free_list;  // offset -> size, disjoint, coalesced
  int64_t top = 0;
  auto release = [&](int64_t off, int64_t size) {
    auto it = free_list.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_list.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_list.erase(next);
    }
    if (it != free_list.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_list.erase(it);
      }
    }
  };
  for (int t = 0; t < steps; ++t) {
    // Allocate what step t writes before freeing what it reads last, so a
    // kernel's output never overlaps its inputs.
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].first != t) continue;
      int64_t size = AlignUp(std::max<int64_t>(buffers[i].bytes, 1));
      auto fit = std::find_if(free_list.begin(), free_list.end(),
                              [&](const auto& f) { return f.second >= size; });
      if (fit != free_list.end()) {
        int64_t off = fit->first, rest = fit->second - size;
        free_list.erase(fit);
        if (rest > 0) free_list.emplace(off + size, rest);
        plan.offsets[i] = off;
      } else if (!free_list.empty() &&
                 std::prev(free_list.end())->first + std::prev(free_list.end())->second == top) {
        // Grow the free block at the top instead of leaving it unused.
        auto last = std::prev(free_list.end());
        int64_t off = last->first;
        free_list.erase(last);
        plan.offsets[i] = off;
        top = off + size;
      } else {
        plan.offsets[i] = top;
        top += size;
      }
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].last == t)
        release(plan.offsets[i], AlignUp(std::max<int64_t>(buffers[i].bytes, 1)));
    }
  }
  plan.total_bytes = top;
  return plan;
}

}  // namespace kiln::compiler
