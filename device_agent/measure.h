#pragma once
// Measuring one candidate from the protocol's messages: compiler::Measure
// (validate, JIT-build, verify, time) under a TimingPolicy. The sandbox
// (sandbox.h) runs this in a child process.

#include <string>
#include <vector>

#include "compiler/measure.h"
#include "compiler/target.h"
#include "kiln/v1/common.pb.h"

namespace kiln::agent {

// The timing policy with the farm's defaults (compiler/measure.h) filled in
// for zero fields: repeat 3, min_repeat_ms 5 (when `number` is automatic),
// timeout_ms 20000. The measurement's part is compiler::MeasurePolicy; the
// timeout is the sandbox's.
struct ResolvedTiming : compiler::MeasurePolicy {
  int timeout_ms = compiler::kDefaultCandidateTimeoutMs;
};
ResolvedTiming ResolveTiming(const kiln::v1::TimingPolicy& policy);

// Measures one candidate. Never fails as a call: errors are typed in the
// result (INVALID_CONFIG, COMPILE, RUNTIME, WRONG_RESULT). `target` is the
// target to build for. `seed` seeds the random inputs.
// `prebuilt`: the candidate's kernel from PrebuildCandidates, if it was built
// ahead.
kiln::v1::MeasureResult MeasureCandidate(const std::string& workload_canonical,
                                         const kiln::v1::Config& config,
                                         const kiln::v1::TimingPolicy& policy,
                                         const compiler::Target& target, uint64_t seed = 42,
                                         compiler::Prebuilt* prebuilt = nullptr);

// compiler::PrebuildJit for candidates in the protocol's terms (a CPU target;
// one entry per config, empty where the workload or config does not parse:
// MeasureCandidate then reports why).
std::vector<compiler::Prebuilt> PrebuildCandidates(const std::string& workload_canonical,
                                                   const std::vector<kiln::v1::Config>& configs,
                                                   const compiler::Target& target);

// A config from the protocol: its knobs, or else its canonical text.
absl::StatusOr<compiler::Config> ConfigFromProto(const kiln::v1::Config& config);

// A result of error `kind` saying `message`.
kiln::v1::MeasureResult ErrorResult(kiln::v1::MeasureErrorKind kind, std::string message);

// The protocol's kind of a measurement's error.
kiln::v1::MeasureErrorKind ErrorKindOf(compiler::MeasureError error);

// "SIGSEGV (Segmentation fault)".
std::string SignalName(int sig);

}  // namespace kiln::agent
