#pragma once
// Cache lines moved by hand, for timing kernels with the caches as a model
// leaves them (LeaveCachesAsTheModel: compiler::Measure, kiln-board): a
// buffer evicted from every level (clflush on x86-64, `dc civac` on
// AArch64), read back a line at a time, or rewritten in place as its
// producer would leave it. Elsewhere a 64 MiB buffer is written instead of
// evicting.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln {

inline constexpr size_t kCacheLineBytes = 64;

// Evicts [p, p + bytes) from every cache level; FenceCacheEvictions() after
// the last, before what is timed.
inline void EvictCacheLines(const void* p, size_t bytes) {
#if defined(__x86_64__) || defined(__aarch64__)
  const char* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += kCacheLineBytes) {
#if defined(__x86_64__)
    __builtin_ia32_clflush(c + off);
#else
    asm volatile("dc civac, %0" : : "r"(c + off) : "memory");
#endif
  }
#else
  (void)p;
  (void)bytes;
#endif
}

inline void FenceCacheEvictions() {
#if defined(__x86_64__)
  __builtin_ia32_mfence();
#elif defined(__aarch64__)
  asm volatile("dsb ish" : : : "memory");
#else
  // No eviction instruction: push everything out by writing a buffer larger
  // than the caches.
  static std::vector<char>* buffer = new std::vector<char>(64 << 20);
  static char value = 0;
  ++value;
  std::memset(buffer->data(), value, buffer->size());
  asm volatile("" : : "r"(buffer->data()) : "memory");  // keep the writes observable
#endif
}

// Reads one byte of each line of [p, p + bytes) (into the caches).
inline void TouchCacheLines(const void* p, size_t bytes) {
  const volatile uint8_t* c = static_cast<const uint8_t*>(p);
  for (size_t off = 0; off < bytes; off += kCacheLineBytes) (void)c[off];
}

// Rewrites one byte of each line of [p, p + bytes) with itself: the lines
// in the caches, modified, as the buffer's producer leaves them.
inline void RewriteCacheLines(void* p, size_t bytes) {
  volatile uint8_t* c = static_cast<uint8_t*>(p);
  for (size_t off = 0; off < bytes; off += kCacheLineBytes) c[off] = c[off];
}

// A kernel's buffers as the model's run leaves them for it (what the farm
// times a candidate in: compiler::Measure, kiln-board): its `weights` and
// `output` evicted from every cache level; with a `sweep` (twice the core's
// own cache), the weights then read back and pushed out of the core's cache
// by reading the sweep, into the last level (a victim L3 takes them as they
// leave the L2); its first input, when it is an `activation` the producer
// has just written, rewritten in place (in the caches, modified).
struct CacheBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};
inline void LeaveCachesAsTheModel(const std::vector<CacheBuffer>& weights, CacheBuffer output,
                                  CacheBuffer activation, CacheBuffer sweep) {
  for (const CacheBuffer& w : weights) EvictCacheLines(w.data, w.bytes);
  EvictCacheLines(output.data, output.bytes);
  FenceCacheEvictions();
  if (sweep.bytes > 0) {
    for (const CacheBuffer& w : weights) TouchCacheLines(w.data, w.bytes);
    TouchCacheLines(sweep.data, sweep.bytes);
  }
  if (activation.bytes > 0) RewriteCacheLines(activation.data, activation.bytes);
}

}  // namespace kiln
