#pragma once
// Features of a candidate (a workload with a config) for the cost model,
// read from its lowered loop IR (compiler::LowerOptions::loops_only: loops
// keep their annotations, accesses are flat single indices), in the spirit of
// AutoTVM's itervar features. One fixed-length vector of floats:
//
//   global   [0, 8)     log2(1+float ops), log2(1+bytes touched),
//                       log2(1+ops/bytes), log2(1+parallel extent),
//                       log2(1+scratch bytes), number of stores,
//                       log2(1+vector width), log2(1+unrolled body size)
//   loops    [8, 48)    the dominant store's innermost kLoopLevels loops,
//                       innermost last (outer slots zero when it has fewer):
//                       log2(1+extent), serial, parallel, vectorized, unrolled
//   accesses [48, 120)  the dominant store's kAccesses buffer accesses (its
//                       output, then each loaded buffer in order of first
//                       appearance): log2(1+|stride|) along the innermost
//                       loop and along the vectorized loop, then per loop
//                       level (innermost last) log2(1+bytes touched inside
//                       that loop) and log2(1+reuse: accesses per element)
//   knobs    [120, 132) log2(1+value) of the config's first kKnobSlots knobs
//                       in canonical (name) order: the fallback for what the
//                       IR does not show
//
// The dominant store is the one with the most float ops (iterations times
// arithmetic per iteration). Strides are element strides of the flat index,
// read as index(v=1) - index(v=0) with every other variable 0; an access
// uses a loop when its index mentions the loop's variable.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::tuner {

inline constexpr int kGlobalFeatures = 8;
inline constexpr int kLoopLevels = 8;
inline constexpr int kLoopFeatures = 5;
inline constexpr int kAccesses = 4;
inline constexpr int kAccessFeatures = 2 + 2 * kLoopLevels;
inline constexpr int kKnobSlots = 12;
inline constexpr int kLoopOffset = kGlobalFeatures;
inline constexpr int kAccessOffset = kLoopOffset + kLoopLevels * kLoopFeatures;
inline constexpr int kKnobOffset = kAccessOffset + kAccesses * kAccessFeatures;
inline constexpr int kNumFeatures = kKnobOffset + kKnobSlots;

// The features of a lowered (loops_only) function and its config.
std::vector<float> FeaturesOf(const ir::PrimFunc& func, const compiler::Config& config);

// Lowers the candidate (loops_only) and extracts its features; with
// `kernel_hash`, also the structural hash of the lowered loops (equal for
// configs that build the same kernel). INVALID_ARGUMENT for a config the
// template rejects.
absl::StatusOr<std::vector<float>> ExtractFeatures(const compiler::Workload& workload,
                                                   const compiler::Target& target,
                                                   const compiler::Config& config,
                                                   uint64_t* kernel_hash = nullptr);

}  // namespace kiln::tuner
