#pragma once
// Workloads the tuner's tests share.
#include <cstdint>

#include "compiler/workload.h"

namespace kiln::tuner::testing {

// An M x 64 x 64 dense (MatMul) workload.
inline compiler::Workload Dense(int64_t m) {
  compiler::Workload w;
  w.op = "dense";
  w.ints = {{"M", {m}},     {"N", {64}},      {"K", {64}},      {"transA", {0}}, {"transB", {0}},
            {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  return w;
}

}  // namespace kiln::tuner::testing
