#pragma once
// Workloads the tuner's tests share.
#include <cstdint>

#include "compiler/workload.h"

namespace kiln::tuner::testing {

// An M x 64 x 64 dense (MatMul) workload.
inline compiler::Workload Dense(int64_t m) {
  compiler::Workload w;
  w.op = compiler::Op::kDense;
  w.ints = {{"M", {m}},     {"N", {64}},      {"K", {64}},      {"transA", {0}}, {"transB", {0}},
            {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  return w;
}

// A 3x3, stride-1, padded conv2d of 16 -> 32 channels on a 7x7 image: its
// template offers several algorithms (layouts: direct, NCHWc, Winograd
// F(4x4, 3x3) and F(2x2, 3x3)).
inline compiler::Workload Conv7x7() {
  compiler::Workload w;
  w.op = compiler::Op::kConv2d;
  w.ints = {{"N", {1}},           {"C", {16}},        {"H", {7}},
            {"W", {7}},           {"K", {32}},        {"R", {3}},
            {"S", {3}},           {"stride", {1, 1}}, {"pad", {1, 1, 1, 1}},
            {"dilation", {1, 1}}, {"groups", {1}},    {"bias", {1}},
            {"OH", {7}},          {"OW", {7}}};
  return w;
}

}  // namespace kiln::tuner::testing
