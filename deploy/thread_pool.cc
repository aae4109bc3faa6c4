// kiln_parallel_for: a persistent pool of worker threads; the calling thread
// takes part. Static chunking: chunk t of T covers [t*n/T, (t+1)*n/T).
// Nested calls (from inside a body) and calls made while another thread holds
// the pool run serially inline, so the function is safe from any thread.
//
// Waiting threads (idle workers, and the caller waiting for the last chunk)
// spin for KILN_SPIN_US microseconds (default 1000) before they sleep: a
// model's parallel kernels come one after another with serial kernels
// between, and a sleeping thread takes a futex wake-up (tens of microseconds
// on a VM) to start the next one. With 51 us of spinning, ResNet-50 at 2
// threads put a thread to sleep about 17 times per run, with 1 ms almost
// never. 0 sleeps at once (a machine with more busy threads than cores).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "base/cpus.h"
#include "deploy/parallel.h"

namespace kiln::deploy {
namespace {

thread_local bool t_in_parallel = false;

int ThreadCountFromEnv() {
  const char* env = std::getenv("KILN_NUM_THREADS");
  if (env != nullptr && *env != '\0') {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != nullptr && *end == '\0' && v >= 1) return static_cast<int>(std::min(v, 1024L));
  }
  return std::min(UsableCpus(), 1024);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::chrono::nanoseconds SpinTime() {
  static const std::chrono::nanoseconds t = [] {
    long us = 1000;
    const char* env = std::getenv("KILN_SPIN_US");
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      long v = std::strtol(env, &end, 10);
      if (end != nullptr && *end == '\0' && v >= 0) us = std::min(v, 1000000L);
    }
    return std::chrono::nanoseconds(us * 1000);
  }();
  return t;
}

// Spins until done() or SpinTime() has passed; returns done().
template <typename Done>
bool SpinUntil(Done done) {
  const auto limit = SpinTime();
  if (limit.count() == 0) return done();
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() - start >= limit) return done();
  }
}

void RunRange(int64_t begin, int64_t end, void (*body)(int64_t, void*), void* ctx) {
  bool saved = t_in_parallel;
  t_in_parallel = true;
  for (int64_t i = begin; i < end; ++i) body(i, ctx);
  t_in_parallel = saved;
}

// The n indices are cut into `parts` fixed contiguous chunks (static
// chunking); participants claim chunks through one atomic word that holds the
// job's generation and the next chunk, so a worker that is slow to wake (an
// oversubscribed machine) never stalls the loop: the caller runs the chunk.
class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int w = 1; w < threads_; ++w) std::thread([this] { WorkerLoop(); }).detach();
    // Workers live as long as the process (the pool is never destroyed, so
    // no static destructor races with a module still calling in).
  }

  // Returns false when another thread holds the pool (the caller runs inline).
  bool TryRun(int64_t n, void (*body)(int64_t, void*), void* ctx) {
    std::unique_lock<std::mutex> dispatch(dispatch_mu_, std::try_to_lock);
    if (!dispatch.owns_lock()) return false;
    const int parts = static_cast<int>(std::min<int64_t>(threads_, n));
    uint32_t gen;
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu_);
      gen = ++generation_;
      n_ = n;
      body_ = body;
      ctx_ = ctx;
      parts_ = parts;
      done_.store(0, std::memory_order_relaxed);
      claim_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
      wake = sleeping_ > 0;
    }
    if (wake) cv_.notify_all();
    RunChunks(gen, n, parts, body, ctx);
    if (SpinUntil([&] { return done_.load(std::memory_order_acquire) == parts; })) return true;
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == parts; });
    return true;
  }

 private:
  // Claims and runs chunks of job `gen` until none is left.
  void RunChunks(uint32_t gen, int64_t n, int parts, void (*body)(int64_t, void*), void* ctx) {
    uint64_t v = claim_.load(std::memory_order_acquire);
    while (true) {
      if (static_cast<uint32_t>(v >> 32) != gen || static_cast<int>(v & 0xffffffffu) >= parts) {
        return;
      }
      if (!claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) continue;
      const int64_t c = static_cast<int64_t>(v & 0xffffffffu);
      RunRange(n * c / parts, n * (c + 1) / parts, body, ctx);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == parts) {
        std::lock_guard<std::mutex> lk(mu_);
        done_cv_.notify_one();
      }
      v = claim_.load(std::memory_order_acquire);
    }
  }

  void WorkerLoop() {
    uint32_t seen = 0;
    while (true) {
      // Spin before sleeping: back-to-back parallel loops are common.
      SpinUntil([&] {
        return static_cast<uint32_t>(claim_.load(std::memory_order_acquire) >> 32) != seen;
      });
      int64_t n;
      void (*body)(int64_t, void*);
      void* ctx;
      int parts;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (generation_ == seen) {
          ++sleeping_;
          cv_.wait(lk, [&] { return generation_ != seen; });
          --sleeping_;
        }
        seen = generation_;
        n = n_;
        body = body_;
        ctx = ctx_;
        parts = parts_;
      }
      RunChunks(seen, n, parts, body, ctx);
    }
  }

  const int threads_;
  std::mutex dispatch_mu_;  // one parallel loop at a time
  std::mutex mu_;           // guards the job fields below
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  uint32_t generation_ = 0;
  int sleeping_ = 0;
  int64_t n_ = 0;
  void (*body_)(int64_t, void*) = nullptr;
  void* ctx_ = nullptr;
  int parts_ = 0;
  std::atomic<uint64_t> claim_{0};  // generation << 32 | next chunk
  std::atomic<int> done_{0};        // chunks finished in this generation
};

std::mutex g_create_mu;
std::atomic<Pool*> g_pool{nullptr};
std::atomic<int> g_threads{0};

// A forked child has none of the parent's workers: give it a fresh pool
// (the parent's is leaked in the child), sized again when first used.
// Creation is locked across fork.
void AtForkPrepare() { g_create_mu.lock(); }
void AtForkParent() { g_create_mu.unlock(); }
void AtForkChild() {
  g_pool.store(nullptr, std::memory_order_relaxed);
  g_threads.store(0, std::memory_order_relaxed);  // counted again: the child's affinity
  new (&g_create_mu) std::mutex();
}
const int g_atfork_registered [[maybe_unused]] =
    pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);

int Threads() {
  int t = g_threads.load(std::memory_order_acquire);
  if (t == 0) {
    t = ThreadCountFromEnv();
    g_threads.store(t, std::memory_order_release);
  }
  return t;
}

Pool* GetPool() {
  Pool* pool = g_pool.load(std::memory_order_acquire);
  if (pool != nullptr) return pool;
  std::lock_guard<std::mutex> lk(g_create_mu);
  pool = g_pool.load(std::memory_order_acquire);
  if (pool == nullptr) {
    pool = new Pool(Threads());
    g_pool.store(pool, std::memory_order_release);
  }
  return pool;
}

}  // namespace
}  // namespace kiln::deploy

extern "C" {

__attribute__((visibility("default"))) void kiln_parallel_for(int64_t n,
                                                              void (*body)(int64_t, void*),
                                                              void* ctx) {
  using namespace kiln::deploy;
  if (n <= 0) return;
  if (n == 1 || t_in_parallel || Threads() == 1) {
    RunRange(0, n, body, ctx);
    return;
  }
  if (!GetPool()->TryRun(n, body, ctx)) RunRange(0, n, body, ctx);
}

__attribute__((visibility("default"))) int kiln_num_threads(void) {
  return kiln::deploy::Threads();
}

}  // extern "C"
