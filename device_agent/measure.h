#pragma once
// Measuring one candidate from the protocol's messages: compiler::Measure
// (validate, JIT-build, verify, time) under a TimingPolicy. The sandbox
// (sandbox.h) runs this in a child process.

#include <string>

#include "compiler/target.h"
#include "kiln/v1/common.pb.h"

namespace kiln::agent {

// The timing policy with the documented defaults filled in for zero fields:
// repeat 3, min_repeat_ms 10 (when `number` is automatic), timeout_ms 10000.
struct ResolvedTiming {
  int number = 0;  // <= 0: automatic (grown by doubling from 1)
  int repeat = 3;
  int min_repeat_ms = 10;
  int cooldown_ms = 0;
  bool flush_cache = false;
  int timeout_ms = 10000;
  double stop_above_s = 0;  // 0: time every candidate to the end
};
ResolvedTiming ResolveTiming(const kiln::v1::TimingPolicy& policy);

// Measures one candidate. Never fails as a call: errors are typed in the
// result (INVALID_CONFIG, COMPILE, RUNTIME, WRONG_RESULT). `target` is the
// target to build for. `seed` seeds the random inputs.
kiln::v1::MeasureResult MeasureCandidate(const std::string& workload_canonical,
                                         const kiln::v1::Config& config,
                                         const kiln::v1::TimingPolicy& policy,
                                         const compiler::Target& target, uint64_t seed = 42);

// "SIGSEGV (Segmentation fault)".
std::string SignalName(int sig);

}  // namespace kiln::agent
