#include "board/runner.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "base/cache_lines.h"
#include "base/cpuinfo.h"
#include "base/cpus.h"
#include "base/fma_peak.h"
#include "base/host_caches.h"
#include "base/str.h"
#include "base/timing.h"
#include "board/variants.h"
#include "deploy/parallel.h"
#include "deploy/runtime.h"

namespace kiln::board {
namespace {

using KernelFn = int32_t (*)(void* const* args);

// The runtime's entry points generated kernels call (the thread pool, the
// workspace): referenced here so that kiln-board links libkiln_runtime,
// from whose global-scope symbols a loaded kernel resolves them.
__attribute__((used)) void* const kRuntimeEntries[] = {
    reinterpret_cast<void*>(&kiln_parallel_for), reinterpret_cast<void*>(&kiln_num_threads),
    reinterpret_cast<void*>(&kiln_workspace_alloc), reinterpret_cast<void*>(&kiln_workspace_free)};
using Clock = std::chrono::steady_clock;

#if defined(__aarch64__)
constexpr char kTriple[] = "aarch64-linux-gnu";
#elif defined(__x86_64__)
constexpr char kTriple[] = "x86_64-linux-gnu";
#else
constexpr char kTriple[] = "unknown-linux-gnu";
#endif

Measured Fail(MeasureErrorKind kind, std::string message) {
  Measured m;
  m.error = kind;
  m.message = std::move(message);
  return m;
}

// A buffer aligned to a cache line, as the compiler's buffers are.
struct Aligned {
  explicit Aligned(size_t bytes)
      : size(bytes),
        data(
            static_cast<uint8_t*>(std::aligned_alloc(
                kCacheLineBytes, (bytes + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes +
                                     kCacheLineBytes)),
            &std::free) {}
  size_t size;
  std::unique_ptr<uint8_t, decltype(&std::free)> data;
};

// The first element where `got` differs from `want` (float32 elements
// within `tol`, else bytes), or "" when none does.
std::string FirstMismatch(const MeasureRequest& r, const uint8_t* got) {
  const auto* want = reinterpret_cast<const uint8_t*>(r.reference.data());
  if (r.compare == Compare::kFloat32) {
    for (size_t i = 0; i + 4 <= r.output_bytes; i += 4) {
      float a = 0, b = 0;
      std::memcpy(&a, got + i, 4);
      std::memcpy(&b, want + i, 4);
      const bool same = std::isnan(b) ? std::isnan(a) : std::fabs(a - b) <= r.tolerance;
      if (!same) {
        return StrCat("element ", i / 4, ": ", FormatDouble(a), " where the reference has ",
                      FormatDouble(b), " (tolerance ", FormatDouble(r.tolerance), ")");
      }
    }
    return "";
  }
  if (r.compare == Compare::kInt8 || r.compare == Compare::kUint8) {
    const bool is_signed = r.compare == Compare::kInt8;
    uint64_t ones = 0;
    for (size_t i = 0; i < r.output_bytes; ++i) {
      const int a = is_signed ? int{static_cast<int8_t>(got[i])} : int{got[i]};
      const int b = is_signed ? int{static_cast<int8_t>(want[i])} : int{want[i]};
      if (a == b || (std::abs(a - b) == 1 && ++ones <= r.off_by_one)) continue;
      return StrCat("element ", i, ": ", a, " where the reference has ", b,
                    std::abs(a - b) == 1 ? StrCat(" (more than ", r.off_by_one, " off by one)")
                                         : std::string());
    }
    return "";
  }
  for (size_t i = 0; i < r.output_bytes; ++i) {
    if (got[i] != want[i]) {
      return StrCat("byte ", i, ": ", int{got[i]}, " where the reference has ", int{want[i]});
    }
  }
  return "";
}

// The measurement itself, in the child process.
Measured MeasureHere(const MeasureRequest& r) {
  const int fd = memfd_create("kiln-kernel", MFD_CLOEXEC);
  if (fd < 0) return Fail(MeasureErrorKind::kLoad, StrCat("memfd_create: ", std::strerror(errno)));
  for (size_t off = 0; off < r.object.size();) {
    const ssize_t w = write(fd, r.object.data() + off, r.object.size() - off);
    if (w <= 0) return Fail(MeasureErrorKind::kLoad, "cannot hold the shared object in memory");
    off += static_cast<size_t>(w);
  }
  void* handle = dlopen(StrCat("/proc/self/fd/", fd).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    return Fail(MeasureErrorKind::kLoad, StrCat("the shared object does not load on this board (",
                                                kTriple, "): ", e ? e : "unknown error"));
  }
  auto fn = reinterpret_cast<KernelFn>(dlsym(handle, r.symbol.c_str()));
  if (fn == nullptr) {
    return Fail(MeasureErrorKind::kLoad,
                StrCat("the shared object has no symbol '", Printable(r.symbol), "'"));
  }
  std::vector<Aligned> buffers;
  for (const std::string& in : r.inputs) {
    buffers.emplace_back(in.size());
    std::memcpy(buffers.back().data.get(), in.data(), in.size());
  }
  buffers.emplace_back(r.output_bytes);
  Aligned& out = buffers.back();
  std::memset(out.data.get(), 0xff, out.size);  // NaN: an element never written cannot pass
  std::vector<void*> args;
  for (Aligned& b : buffers) args.push_back(b.data.get());

  if (int32_t rc = fn(args.data()); rc != 0) {
    return Fail(MeasureErrorKind::kRuntime, StrCat("the kernel returned ", rc));
  }
  if (std::string m = FirstMismatch(r, out.data.get()); !m.empty()) {
    return Fail(MeasureErrorKind::kWrongResult, m);
  }
  // The caches as the model leaves them (MeasureRequest::flush_cache).
  const bool keep_first = (r.flush_cache & kFlushKeepFirst) != 0 && buffers.size() > 1;
  std::vector<CacheBuffer> weights;
  for (size_t i = keep_first ? 1 : 0; i + 1 < buffers.size(); ++i) {
    weights.push_back({buffers[i].data.get(), buffers[i].size});
  }
  std::vector<uint8_t> sweep;
  if ((r.flush_cache & kFlushToLastLevel) != 0) {
    sweep.resize(static_cast<size_t>(2 * std::max<int64_t>(HostCaches().core_bytes, 1)));
  }
  auto set_caches = [&] {
    LeaveCachesAsTheModel(
        weights, {out.data.get(), out.size},
        keep_first ? CacheBuffer{buffers[0].data.get(), buffers[0].size} : CacheBuffer{},
        {sweep.data(), sweep.size()});
  };
  auto time_runs = [&](int number) {
    return TimeRuns(number, r.flush_cache != 0, set_caches, [&] { return fn(args.data()); });
  };
  TimingLoop loop;
  loop.number = static_cast<int>(std::min<uint32_t>(r.number, 1u << 30));
  loop.repeat = static_cast<int>(std::min<uint32_t>(std::max<uint32_t>(r.repeat, 1), kMaxCosts));
  loop.min_repeat_ms = static_cast<int>(std::min<uint32_t>(r.min_repeat_ms, 60000));
  loop.cooldown_ms = static_cast<int>(std::min<uint32_t>(r.cooldown_ms, 10000));
  loop.stop_above_s = r.stop_above_s;
  absl::StatusOr<TimedCosts> timed = RunTimingLoop(loop, time_runs);
  if (!timed.ok()) return Fail(MeasureErrorKind::kRuntime, std::string(timed.status().message()));
  Measured m;
  m.costs_s = std::move(timed->costs_s);
  m.cut_short = timed->cut_short ? 1 : 0;
  return m;
}

}  // namespace

Description DescribeThisBoard() {
  Description d;
  d.triple = kTriple;
  d.cpuinfo = FirstCpuInfoBlock();
  d.cpu = CpuInfoValue(d.cpuinfo, "model name");
  if (d.cpu.empty()) d.cpu = CpuInfoValue(d.cpuinfo, "CPU part");
  d.features = CpuInfoValue(d.cpuinfo, "flags");
  if (d.features.empty()) d.features = CpuInfoValue(d.cpuinfo, "Features");
  d.cores = static_cast<uint32_t>(UsableCpus());
  d.l2_bytes = static_cast<uint64_t>(HostCaches().core_bytes);
  d.l3_bytes = static_cast<uint64_t>(HostCaches().last_level_bytes);
  d.runner_version = StrCat("kiln-board, protocol ", kProtocolVersion);
  // The FMA peak over every core: one probe thread each, each timed by its
  // own CPU time, the best of three (std::threads, joined: the runner
  // forks each measurement and must hold no thread pool of its own).
  float probe_sink = 0;
  const bool can_probe = fma_peak::Flops(1, &probe_sink) > 0;  // 0: no probe for this CPU
  for (int attempt = 0; attempt < 3 && can_probe; ++attempt) {
    std::vector<double> gflops(d.cores, 0.0);
    std::vector<float> sinks(d.cores, 0.f);
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < d.cores; ++t) {
      threads.emplace_back(
          [&, t] { gflops[t] = fma_peak::GflopsOnThisThread(int64_t{1} << 22, &sinks[t]); });
    }
    for (std::thread& t : threads) t.join();
    double sum = 0;
    for (double g : gflops) sum += g;
    d.fma_gflops = std::max(d.fma_gflops, sum);
  }
  return d;
}

namespace {

// What a child process measuring for the board ended with: its answer's
// bytes, or why there is none (kTimeout: killed at its limit; kRuntime: it
// crashed, or ended without answering).
struct ChildOutcome {
  MeasureErrorKind error = MeasureErrorKind::kNone;
  std::string message;
  std::string answer;
};

// Runs `work` in a forked child with the kernels' thread count `threads`
// (0: the runner's), reading its answer (at most `max_answer` bytes) within
// `timeout_ms`.
ChildOutcome InChild(uint32_t timeout_ms, uint32_t threads, size_t max_answer,
                     const std::function<std::string()>& work) {
  ChildOutcome out;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.error = MeasureErrorKind::kRuntime;
    out.message = StrCat("pipe: ", std::strerror(errno));
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    out.error = MeasureErrorKind::kRuntime;
    out.message = StrCat("fork: ", std::strerror(errno));
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    // The kernels' thread pool is sized from this when it first runs.
    if (threads > 0) setenv("KILN_NUM_THREADS", StrCat(threads).c_str(), 1);
    const std::string answer = work();
    for (size_t off = 0; off < answer.size();) {
      const ssize_t w = write(fds[1], answer.data() + off, answer.size() - off);
      if (w <= 0) _exit(2);
      off += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<uint32_t>(timeout_ms, 1));
  bool timed_out = false;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.answer.append(buf, static_cast<size_t>(n));
    if (out.answer.size() > max_answer) break;
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    out.error = MeasureErrorKind::kTimeout;
    out.message = StrCat("no answer within ", timeout_ms, " ms: the kernel was stopped");
  } else if (WIFSIGNALED(status)) {
    out.error = MeasureErrorKind::kRuntime;
    out.message = StrCat("the kernel crashed (signal ", WTERMSIG(status), ", ",
                         strsignal(WTERMSIG(status)), ")");
  }
  return out;
}

// The variants, loaded and timed, in the child.
MeasuredModel MeasureModelHere(const MeasureModelRequest& r) {
  MeasuredModel m;
  std::vector<std::unique_ptr<deploy::Module>> modules;
  std::vector<deploy::Module*> loaded;
  std::vector<std::string> load_errors;
  for (const std::string& a : r.artifacts) {
    absl::StatusOr<std::unique_ptr<deploy::Module>> mod = deploy::Module::LoadBytes(a);
    load_errors.push_back(mod.ok() ? "" : std::string(mod.status().message()));
    modules.push_back(mod.ok() ? *std::move(mod) : nullptr);
    loaded.push_back(modules.back().get());
  }
  VariantPolicy policy;
  policy.number = static_cast<int>(std::min<uint32_t>(r.number, 1u << 20));
  policy.repeat = static_cast<int>(std::clamp<uint32_t>(r.repeat, 1, kMaxCosts));
  policy.min_repeat_ms = static_cast<int>(std::min<uint32_t>(r.min_repeat_ms, 60000));
  m.variants = TimeVariants(loaded, policy);
  for (size_t v = 0; v < m.variants.size(); ++v) {
    if (loaded[v] == nullptr) m.variants[v].message = load_errors[v];
  }
  return m;
}

}  // namespace

Measured RunMeasurement(const MeasureRequest& request) {
  ChildOutcome child = InChild(request.timeout_ms, request.threads, kMaxControlPayload,
                               [&] { return Encode(MeasureHere(request)); });
  if (child.error != MeasureErrorKind::kNone) return Fail(child.error, child.message);
  absl::StatusOr<Measured> m = DecodeMeasured(child.answer);
  if (!m.ok()) return Fail(MeasureErrorKind::kRuntime, "the measurement ended without an answer");
  return *std::move(m);
}

MeasuredModel RunModelMeasurement(const MeasureModelRequest& request) {
  ChildOutcome child = InChild(request.timeout_ms, request.threads, kMaxModelAnswerPayload,
                               [&] { return Encode(MeasureModelHere(request)); });
  MeasuredModel m;
  if (child.error != MeasureErrorKind::kNone) {
    m.error = child.error;
    m.message = child.message;
    return m;
  }
  absl::StatusOr<MeasuredModel> decoded = DecodeMeasuredModel(child.answer);
  if (!decoded.ok()) {
    m.error = MeasureErrorKind::kRuntime;
    m.message = "the model's measurement ended without an answer";
    return m;
  }
  return *std::move(decoded);
}

}  // namespace kiln::board
