// kiln_workspace_alloc / kiln_workspace_free: a per-thread stack of scratch
// blocks in reused chunks, so that generated kernels keep large local
// buffers off the thread's stack without a malloc per call (TVM's
// TVMBackendAllocWorkspace plays the same part).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "base/check.h"
#include "deploy/memory.h"
#include "deploy/parallel.h"

namespace kiln::deploy {
namespace {

constexpr int64_t kChunkBytes = int64_t{4} << 20;
constexpr int64_t kAlign = 64;

class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (Chunk& c : chunks_) std::free(c.data);
  }

  void* Alloc(int64_t bytes) {
    const int64_t need = (std::max<int64_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    size_t ci = cur_;
    int64_t off = off_;
    while (ci >= chunks_.size() || off + need > chunks_[ci].size) {
      if (ci < chunks_.size()) {
        ++ci;
        off = 0;
        continue;
      }
      // Chunks on huge pages, as the module's weights and workspace.
      size_t size = 0;
      void* data = AllocLarge(static_cast<size_t>(std::max(kChunkBytes, need)), kAlign, &size);
      if (data == nullptr) {
        std::fprintf(stderr, "kiln: cannot allocate %lld bytes of kernel workspace\n",
                     static_cast<long long>(size));
        std::abort();
      }
      chunks_.push_back({static_cast<char*>(data), static_cast<int64_t>(size)});
      ci = chunks_.size() - 1;
      off = 0;
    }
    char* p = chunks_[ci].data + off;
    marks_.push_back({p, cur_, off_});
    cur_ = ci;
    off_ = off + need;
    return p;
  }

  void Free(void* p) {
    KILN_CHECK(!marks_.empty() && marks_.back().ptr == p)
        << "kiln_workspace_free out of order (" << p << ")";
    cur_ = marks_.back().cur;
    off_ = marks_.back().off;
    marks_.pop_back();
  }

 private:
  struct Chunk {
    char* data;
    int64_t size;
  };
  struct Mark {
    void* ptr;
    size_t cur;
    int64_t off;
  };
  std::vector<Chunk> chunks_;
  std::vector<Mark> marks_;
  size_t cur_ = 0;
  int64_t off_ = 0;
};

Arena& ThreadArena() {
  thread_local Arena arena;
  return arena;
}

}  // namespace
}  // namespace kiln::deploy

extern "C" {

__attribute__((visibility("default"))) void* kiln_workspace_alloc(int64_t bytes) {
  return kiln::deploy::ThreadArena().Alloc(bytes);
}

__attribute__((visibility("default"))) void kiln_workspace_free(void* ptr) {
  kiln::deploy::ThreadArena().Free(ptr);
}

}  // extern "C"
