#pragma once
// Measuring one candidate in-process: validate the config, JIT-build the
// kernel, verify its output against the reference implementation, then time
// it. The agent runs this in a sandboxed child process; `kiln tune --local`
// and the benchmarks run it directly.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "base/host_caches.h"
#include "base/timing.h"
#include "compiler/config.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::compiler {

// The farm's timing defaults, the one place the tracker (a job's timing),
// the agent (a batch's zero fields) and `kiln tune --local` take them from.
// (base/timing.h)
using ::kiln::kDefaultCandidateTimeoutMs;
using ::kiln::kDefaultMinRepeatMs;
using ::kiln::kDefaultRepeat;

// How a candidate is timed.
struct MeasurePolicy {
  int number = 0;  // runs per repeat; <= 0: doubled from 1 until min_repeat_ms
  int repeat = kDefaultRepeat;
  int min_repeat_ms = kDefaultMinRepeatMs;
  int cooldown_ms = 0;
  // Before every run (timing the runs alone), the caches as the model
  // leaves them: the kernel's weights and output evicted (inside a model its
  // weights come from the last-level cache or memory), its first input just
  // written, as by its producer (`kiln tune --flush-cache`).
  bool flush_cache = false;
  // With flush_cache: the bytes the whole model's run passes through the
  // caches (the model's file and external data), which with this host's
  // caches say where the weights start each run (CacheStateFor); 0: from
  // memory.
  int64_t model_bytes = 0;
  // A candidate whose one warm run is slower than this is not timed to the
  // end: that run is its cost (0: time every candidate fully).
  double stop_above_s = 0;
};

// Where a kernel's weights (and output) start each timed run.
enum class CacheState {
  kHot,        // where the last run left them: a model that fits a core's own cache
  kLastLevel,  // in the last-level cache, out of the core's own
  kMemory,     // evicted from every level
};
const char* CacheStateName(CacheState state);

// A host's caches (base/host_caches.h), here as the measurement speaks them.
using ::kiln::CacheSizes;
using ::kiln::HostCaches;

// The rule: no flush_cache: hot; model_bytes 0 or caches unknown: memory;
// a model within the core's cache: hot; within 3/4 of the last level (the
// rest for its activations and whatever else runs): last level; bigger:
// memory.
CacheState CacheStateFor(const MeasurePolicy& policy, const CacheSizes& caches);

// The error kinds a measurement itself can produce (the tuner and the agent
// map them to storage::ErrorKind and the protocol's MeasureErrorKind).
enum class MeasureError { kNone, kInvalidConfig, kCompile, kRuntime, kWrongResult };

struct Measurement {
  MeasureError error = MeasureError::kNone;
  std::string message;
  std::vector<double> costs_s;  // one per repeat (one run when cut_short)
  double build_s = 0;
  bool cut_short = false;  // timed once: slower than stop_above_s
};

class JitKernel;

// A CPU candidate built ahead of its measurement (PrebuildJit): the kernel,
// or why it did not build, and the build's wall time.
struct Prebuilt {
  std::unique_ptr<JitKernel> kernel;
  absl::Status status;
  double build_s = 0;
  Prebuilt();
  ~Prebuilt();
  Prebuilt(Prebuilt&&) noexcept;
  Prebuilt& operator=(Prebuilt&&) noexcept;
};

// Builds the configs of one workload for a CPU `target` on up to `threads`
// threads (0: one per core), so that a batch's builds use every core while
// its timings (Measure) still run one at a time on a quiet machine. One
// entry per config, in order; an invalid config fails its build at once
// (BuildJit validates), and Measure reports it as INVALID_CONFIG.
std::vector<Prebuilt> PrebuildJit(const Workload& workload, const std::vector<Config>& configs,
                                  const Target& target, int threads = 0);

// Measures one config of a workload on `target` (which must be the host's
// or compatible with it). Never fails as a call: errors are typed in the
// result. `seed` seeds the random inputs. `prebuilt` (a CPU target only):
// the candidate's kernel from PrebuildJit, used instead of building it here
// (an empty Prebuilt is ignored).
Measurement Measure(const Workload& workload, const Config& config, const MeasurePolicy& policy,
                    const Target& target, uint64_t seed = 42, Prebuilt* prebuilt = nullptr);

// A candidate built for a board that verifies and times it itself
// (kiln-board, docs/protocol.md "Boards"): the kernel alone as a shared
// object for `target` (linked with ld.lld for another triple), the inputs
// it takes, packed ones packed here (PackConstant), and the output the
// reference implementation computes on this host from the same inputs.
struct RemoteKernel {
  std::string object;  // exports `symbol`, the kernel calling convention
  std::string symbol;
  // Every argument but the output, in order, as the kernel takes it.
  std::vector<std::string> args;
  // args[0] is the workload's first input as its producer writes it (not a
  // packed weight): what a cache flush leaves in place.
  bool first_is_activation = false;
  std::string reference;  // the expected output's bytes
  DType output_dtype = DType::kFloat32;
  double tolerance = 0;    // absolute, for a float output (as Measure verifies)
  int64_t off_by_one = 0;  // integer elements that may differ by one (RoundingTies)
};
struct RemoteBuild {
  MeasureError error = MeasureError::kNone;  // kInvalidConfig, kCompile or kRuntime
  std::string message;
  RemoteKernel kernel;
  double build_s = 0;
};

// Builds each config of one workload for a board of `target` on up to
// `threads` threads (0: one per core); one entry per config, in order.
// `seed` seeds the inputs (as Measure's). Never fails as a call.
std::vector<RemoteBuild> BuildRemote(const Workload& workload, const std::vector<Config>& configs,
                                     const Target& target, uint64_t seed = 42, int threads = 0);

}  // namespace kiln::compiler
