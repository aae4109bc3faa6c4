// kiln_kernel_begin / kiln_kernel_end: per-call time of a module's kernels,
// recorded only between StartKernelProfile and StopKernelProfile.
#include "deploy/profile.h"

#include <atomic>
#include <chrono>
#include <mutex>

namespace kiln::deploy {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu;
std::vector<KernelTime> g_calls;  // indexed by call; guarded by g_mu
thread_local std::chrono::steady_clock::time_point t_begin;
thread_local const char* t_label = nullptr;

}  // namespace

void StartKernelProfile() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.clear();
  g_on.store(true, std::memory_order_release);
}

std::vector<KernelTime> StopKernelProfile() {
  g_on.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<KernelTime> out;
  for (KernelTime& k : g_calls) {
    if (k.runs > 0) out.push_back(std::move(k));
  }
  g_calls.clear();
  return out;
}

}  // namespace kiln::deploy

extern "C" {

__attribute__((visibility("default"))) void kiln_kernel_begin(int32_t call, const char* label) {
  (void)call;
  if (!kiln::deploy::g_on.load(std::memory_order_relaxed)) return;
  kiln::deploy::t_label = label;
  kiln::deploy::t_begin = std::chrono::steady_clock::now();
}

__attribute__((visibility("default"))) void kiln_kernel_end(int32_t call) {
  using namespace kiln::deploy;
  if (!g_on.load(std::memory_order_relaxed) || call < 0) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_begin).count();
  std::lock_guard<std::mutex> lock(g_mu);
  if (static_cast<size_t>(call) >= g_calls.size()) g_calls.resize(static_cast<size_t>(call) + 1);
  KernelTime& k = g_calls[static_cast<size_t>(call)];
  k.call = call;
  if (k.label.empty() && t_label != nullptr) k.label = t_label;
  ++k.runs;
  k.total_ms += ms;
}

}  // extern "C"
