#include "device_agent/measure.h"

#include <algorithm>
#include <csignal>
#include <cstring>

#include "absl/status/statusor.h"
#include "base/str.h"
#include "compiler/config.h"
#include "compiler/measure.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"

namespace kiln::agent {
namespace {

using kiln::v1::MeasureErrorKind;
using kiln::v1::MeasureResult;

}  // namespace

MeasureErrorKind ErrorKindOf(compiler::MeasureError error) {
  switch (error) {
    case compiler::MeasureError::kNone:
      return kiln::v1::MEASURE_ERROR_KIND_NONE;
    case compiler::MeasureError::kInvalidConfig:
      return kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG;
    case compiler::MeasureError::kCompile:
      return kiln::v1::MEASURE_ERROR_KIND_COMPILE;
    case compiler::MeasureError::kRuntime:
      return kiln::v1::MEASURE_ERROR_KIND_RUNTIME;
    case compiler::MeasureError::kWrongResult:
      return kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT;
  }
  return kiln::v1::MEASURE_ERROR_KIND_RUNTIME;
}

MeasureResult ErrorResult(MeasureErrorKind kind, std::string message) {
  MeasureResult r;
  r.set_error_kind(kind);
  r.set_error_message(std::move(message));
  return r;
}

absl::StatusOr<compiler::Config> ConfigFromProto(const kiln::v1::Config& config) {
  if (!config.knobs().empty()) {
    compiler::Config c;
    for (const auto& [name, value] : config.knobs()) c[name] = value;
    return c;
  }
  return compiler::ParseConfig(config.canonical());
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = sigdescr_np(sig);
  return StrCat(abbrev ? StrCat("SIG", abbrev) : StrCat("signal ", sig), " (",
                desc ? desc : "unknown signal", ")");
}

ResolvedTiming ResolveTiming(const kiln::v1::TimingPolicy& policy) {
  ResolvedTiming t;
  t.number = std::max(0, policy.number());
  t.repeat = policy.repeat() > 0 ? policy.repeat() : compiler::kDefaultRepeat;
  if (policy.min_repeat_ms() > 0) {
    t.min_repeat_ms = policy.min_repeat_ms();
  } else {
    // An explicit number with no explicit minimum is used as is.
    t.min_repeat_ms = t.number > 0 ? 0 : compiler::kDefaultMinRepeatMs;
  }
  t.cooldown_ms = std::max(0, policy.cooldown_ms());
  t.flush_cache = policy.flush_cache();
  t.model_bytes = std::max<int64_t>(0, policy.model_bytes());
  t.timeout_ms =
      policy.timeout_ms() > 0 ? policy.timeout_ms() : compiler::kDefaultCandidateTimeoutMs;
  t.stop_above_s = policy.stop_above_s() > 0 ? policy.stop_above_s() : 0;
  return t;
}

std::vector<compiler::Prebuilt> PrebuildCandidates(const std::string& workload_canonical,
                                                   const std::vector<kiln::v1::Config>& configs,
                                                   const compiler::Target& target) {
  std::vector<compiler::Prebuilt> built(configs.size());
  absl::StatusOr<compiler::Workload> workload = compiler::Workload::Parse(workload_canonical);
  if (!workload.ok() || target.is_gpu()) return built;
  std::vector<compiler::Config> parsed;
  std::vector<size_t> where;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (absl::StatusOr<compiler::Config> c = ConfigFromProto(configs[i]); c.ok()) {
      parsed.push_back(*std::move(c));
      where.push_back(i);
    }
  }
  std::vector<compiler::Prebuilt> some = compiler::PrebuildJit(*workload, parsed, target);
  for (size_t j = 0; j < some.size(); ++j) built[where[j]] = std::move(some[j]);
  return built;
}

MeasureResult MeasureCandidate(const std::string& workload_canonical,
                               const kiln::v1::Config& config_proto,
                               const kiln::v1::TimingPolicy& policy, const compiler::Target& target,
                               uint64_t seed, compiler::Prebuilt* prebuilt) {
  absl::StatusOr<compiler::Workload> workload = compiler::Workload::Parse(workload_canonical);
  if (!workload.ok()) {
    return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_COMPILE,
                       StrCat("bad workload: ", workload.status().message()));
  }
  absl::StatusOr<compiler::Config> config = ConfigFromProto(config_proto);
  if (!config.ok()) {
    return ErrorResult(kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG,
                       std::string(config.status().message()));
  }
  const compiler::MeasurePolicy timing = ResolveTiming(policy);
  compiler::Measurement m = compiler::Measure(*workload, *config, timing, target, seed, prebuilt);
  MeasureResult result = ErrorResult(ErrorKindOf(m.error), std::move(m.message));
  result.set_build_s(m.build_s);
  result.set_cut_short(m.cut_short);
  for (double c : m.costs_s) result.add_costs_s(c);
  // Parallel kernels resolve kiln_parallel_for from libkiln_runtime.so; this
  // reference keeps the library linked into every agent binary.
  static const int threads [[maybe_unused]] = kiln_num_threads();
  return result;
}

}  // namespace kiln::agent
