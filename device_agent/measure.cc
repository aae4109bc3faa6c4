#include "device_agent/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"
#include "deploy/str.h"

namespace kiln::agent {
namespace {

using kiln::v1::MeasureErrorKind;
using kiln::v1::MeasureResult;
using Clock = std::chrono::steady_clock;

MeasureResult Error(MeasureErrorKind kind, std::string message) {
  MeasureResult r;
  r.set_error_kind(kind);
  r.set_error_message(std::move(message));
  return r;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Evicts the caches by writing a buffer larger than any last-level cache.
void FlushCache() {
  static std::vector<char>* buffer = new std::vector<char>(64 << 20);
  static char value = 0;
  ++value;
  std::memset(buffer->data(), value, buffer->size());
  // Keep the writes observable.
  asm volatile("" : : "r"(buffer->data()) : "memory");
}

absl::StatusOr<compiler::Config> ConfigFromProto(const kiln::v1::Config& config) {
  if (!config.knobs().empty()) {
    compiler::Config c;
    for (const auto& [name, value] : config.knobs()) c[name] = value;
    return c;
  }
  return compiler::ParseConfig(config.canonical());
}

// The reference output of the last workload verified: the candidates of a
// batch share their workload and inputs, and the reference implementation is
// naive (seconds for a large MatMul), so it runs once per workload, not once
// per candidate.
class ReferenceCache {
 public:
  absl::Status Get(const compiler::Workload& workload, const std::string& canonical, uint64_t seed,
                   const std::vector<const void*>& inputs, std::vector<uint8_t>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (canonical != canonical_ || seed != seed_) {
      canonical_.clear();
      output_.assign(out->size(), 0);
      if (absl::Status s = compiler::RunReference(workload, inputs, output_.data()); !s.ok()) {
        return s;
      }
      canonical_ = canonical;
      seed_ = seed;
    }
    *out = output_;
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  std::string canonical_;
  uint64_t seed_ = 0;
  std::vector<uint8_t> output_;
};

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = sigdescr_np(sig);
  return StrCat(abbrev ? StrCat("SIG", abbrev) : StrCat("signal ", sig), " (",
                desc ? desc : "unknown signal", ")");
}

ResolvedTiming ResolveTiming(const kiln::v1::TimingPolicy& policy) {
  ResolvedTiming t;
  t.number = std::max(0, policy.number());
  t.repeat = policy.repeat() > 0 ? policy.repeat() : 3;
  if (policy.min_repeat_ms() > 0) {
    t.min_repeat_ms = policy.min_repeat_ms();
  } else {
    // An explicit number with no explicit minimum is used as is.
    t.min_repeat_ms = t.number > 0 ? 0 : 10;
  }
  t.cooldown_ms = std::max(0, policy.cooldown_ms());
  t.flush_cache = policy.flush_cache();
  t.timeout_ms = policy.timeout_ms() > 0 ? policy.timeout_ms() : 10000;
  t.stop_above_s = policy.stop_above_s() > 0 ? policy.stop_above_s() : 0;
  return t;
}

MeasureResult MeasureCandidate(const std::string& workload_canonical,
                               const kiln::v1::Config& config_proto,
                               const kiln::v1::TimingPolicy& policy, const compiler::Target& target,
                               uint64_t seed) {
  absl::StatusOr<compiler::Workload> workload = compiler::Workload::Parse(workload_canonical);
  if (!workload.ok()) {
    return Error(kiln::v1::MEASURE_ERROR_KIND_COMPILE,
                 StrCat("bad workload: ", workload.status().message()));
  }
  absl::StatusOr<compiler::Config> config = ConfigFromProto(config_proto);
  if (!config.ok()) {
    return Error(kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG,
                 std::string(config.status().message()));
  }
  if (absl::Status s = compiler::ValidateConfig(*workload, target, *config); !s.ok()) {
    return Error(kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG, std::string(s.message()));
  }
  absl::StatusOr<compiler::KernelSignature> sig = workload->Signature();
  if (!sig.ok()) {
    return Error(kiln::v1::MEASURE_ERROR_KIND_COMPILE,
                 StrCat("bad workload: ", sig.status().message()));
  }

  Clock::time_point build_start = Clock::now();
  absl::StatusOr<std::unique_ptr<compiler::JitKernel>> kernel =
      compiler::BuildJit(*workload, *config, target);
  double build_s = Seconds(Clock::now() - build_start);
  if (!kernel.ok()) {
    MeasureResult r =
        Error(kiln::v1::MEASURE_ERROR_KIND_COMPILE, std::string(kernel.status().message()));
    r.set_build_s(build_s);
    return r;
  }

  // Inputs: seeded uniform values in [-1, 1]; the output starts as NaN so
  // that an element the kernel never writes cannot pass verification.
  compiler::KernelBuffers buffers = compiler::MakeKernelBuffers(*sig, seed, std::nanf(""));
  if (absl::Status s = compiler::PackKernelInputs(**kernel, buffers); !s.ok()) {
    MeasureResult r = Error(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(s.message()));
    r.set_build_s(build_s);
    return r;
  }
  const std::vector<void*>& args = buffers.args;
  const int64_t out_n = buffers.OutputSize();
  std::vector<uint8_t> reference(buffers.output.size(), 0);

  auto fail = [&](MeasureErrorKind kind, std::string message) {
    MeasureResult r = Error(kind, std::move(message));
    r.set_build_s(build_s);
    return r;
  };

  if (int32_t rc = (*kernel)->Run(args.data()); rc != 0) {
    return fail(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, StrCat("kernel returned ", rc));
  }
  static ReferenceCache* references = new ReferenceCache;
  if (absl::Status s =
          references->Get(*workload, workload_canonical, seed, buffers.input_ptrs, &reference);
      !s.ok()) {
    return fail(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                StrCat("reference implementation failed: ", s.message()));
  }
  // Floats: an absolute tolerance scaled by the largest reference value;
  // integers and bools: exact.
  double max_ref = 0;
  for (int64_t i = 0; i < out_n; ++i) {
    double v = std::fabs(ElementToDouble(buffers.output_dtype, reference.data(), i));
    if (std::isfinite(v)) max_ref = std::max(max_ref, v);
  }
  const double tol = 1e-3 * std::max(1.0, max_ref);
  std::string detail;
  if (!compiler::OutputsMatch(buffers.output_dtype, buffers.output.data(), reference.data(), out_n,
                              0.0, tol, &detail)) {
    return fail(kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT,
                StrCat(detail, " (tolerance ", tol, ")"));
  }

  const ResolvedTiming timing = ResolveTiming(policy);
  auto time_runs = [&](int number) -> absl::StatusOr<double> {
    Clock::time_point start = Clock::now();
    for (int i = 0; i < number; ++i) {
      if (int32_t rc = (*kernel)->Run(args.data()); rc != 0) {
        return absl::InternalError(StrCat("kernel returned ", rc));
      }
    }
    return Seconds(Clock::now() - start);
  };

  MeasureResult result;
  result.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_NONE);
  result.set_build_s(build_s);
  // A hopeless candidate (one warm run slower than the policy's bound) is
  // not timed to the end: that run is its cost.
  if (timing.stop_above_s > 0) {
    absl::StatusOr<double> t = time_runs(1);
    if (!t.ok())
      return fail(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(t.status().message()));
    if (*t > timing.stop_above_s) {
      result.add_costs_s(*t);
      result.set_cut_short(true);
      return result;
    }
  }

  int number = timing.number > 0 ? timing.number : 1;
  if (timing.min_repeat_ms > 0) {
    const double min_s = timing.min_repeat_ms / 1000.0;
    while (true) {
      absl::StatusOr<double> t = time_runs(number);
      if (!t.ok())
        return fail(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(t.status().message()));
      if (*t >= min_s || number >= (1 << 30)) break;
      number *= 2;
    }
  }

  for (int r = 0; r < timing.repeat; ++r) {
    if (r > 0 && timing.cooldown_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timing.cooldown_ms));
    }
    if (timing.flush_cache) FlushCache();
    absl::StatusOr<double> t = time_runs(number);
    if (!t.ok())
      return fail(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(t.status().message()));
    result.add_costs_s(*t / number);
  }
  // Parallel kernels resolve kiln_parallel_for from libkiln_runtime.so; this
  // reference keeps the library linked into every agent binary.
  static const int threads [[maybe_unused]] = kiln_num_threads();
  return result;
}

}  // namespace kiln::agent
