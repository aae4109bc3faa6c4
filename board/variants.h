#pragma once
// Variants of one model (the same network compiled with other configs)
// timed against each other, end to end, on this machine, as the user's
// application runs them (the deploy runtime's Module): what a job's
// whole-model check runs on a board, whether the agent's own worker (a CPU
// agent, device_agent/model_measure.h) or kiln-board (a board that cannot
// host a compiler) does it.
//
// - Every variant runs once first on the same inputs (float32 uniform in
//   [-1, 1), zeros elsewhere), and its outputs are compared with the first
//   runnable variant's (a job sends its defaults first): float32 within
//   1e-3 of the output's largest magnitude (tilings sum in other orders),
//   int8/uint8 within one unit (a requantized value may round the other
//   way), other types exactly. A variant that computes something else is a
//   wrong result.
// - The variants are timed interleaved, in `repeat` rounds (rotating which
//   goes first), each a block of `number` runs (grown until a block of the
//   slowest lasts min_repeat_ms): a slow spell of a shared machine slows
//   every variant alike. Each round is one cost (seconds per run).
// - Then each runs with the kernel profile on (deploy/profile.h): each
//   task's kernels' seconds inside the model's runs, by workload key (the
//   last word of a call's label).
// The runs use the runtime's threads (KILN_NUM_THREADS).

#include <map>
#include <string>
#include <vector>

#include "deploy/runtime.h"

namespace kiln::board {

struct VariantPolicy {
  int number = 0;  // <= 0: grown until a block lasts min_repeat_ms
  int repeat = 3;
  int min_repeat_ms = 5;
};

enum class VariantError : uint8_t { kNone = 0, kLoad = 1, kRuntime = 2, kWrongResult = 3 };

struct VariantTimes {
  VariantError error = VariantError::kNone;
  std::string message;
  std::vector<double> costs_s;
  std::map<std::string, double> kernel_s;  // per model run, by workload key
};

// `modules[v]` null: variant v is not run (its entry is kLoad, message
// empty: the caller knows why). One entry per module.
std::vector<VariantTimes> TimeVariants(const std::vector<deploy::Module*>& modules,
                                       const VariantPolicy& policy);

}  // namespace kiln::board
