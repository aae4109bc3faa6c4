#pragma once
// The kernel shapes of issue 6 (ResNet-50's and MobileNetV2's layers, BERT's
// projections) as kiln workloads, shared by the kernel benchmarks.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/config.h"
#include "compiler/workload.h"

namespace kiln::bench {

using compiler::Workload;

struct Shape {
  std::string name;
  bool conv;
  // conv: C K H(=W) R(=S) stride pad groups; matmul: M N K.
  int64_t a, b, c, d, e, f, g;
};

inline const std::vector<Shape> kShapes = {
    {"matmul 1024x1024x1024", false, 1024, 1024, 1024},
    {"matmul 128x768x768", false, 128, 768, 768},
    {"matmul 128x3072x768", false, 128, 3072, 768},
    {"matmul 1x1000x512", false, 1, 1000, 512},
    {"conv 3->64 224 7x7 s2", true, 3, 64, 224, 7, 2, 3, 1},
    {"conv 64->64 56 3x3", true, 64, 64, 56, 3, 1, 1, 1},
    {"conv 128->128 28 3x3", true, 128, 128, 28, 3, 1, 1, 1},
    {"conv 256->256 14 3x3", true, 256, 256, 14, 3, 1, 1, 1},
    {"conv 512->512 7 3x3", true, 512, 512, 7, 3, 1, 1, 1},
    {"conv 128->128 56 3x3 s2", true, 128, 128, 56, 3, 2, 1, 1},
    {"conv 256->64 56 1x1", true, 256, 64, 56, 1, 1, 0, 1},
    {"conv 64->256 56 1x1", true, 64, 256, 56, 1, 1, 0, 1},
    {"conv 1024->256 14 1x1", true, 1024, 256, 14, 1, 1, 0, 1},
    {"conv 2048->512 7 1x1", true, 2048, 512, 7, 1, 1, 0, 1},
    {"dwconv 32 112 3x3", true, 32, 32, 112, 3, 1, 1, 32},
    {"dwconv 144 56 3x3 s2", true, 144, 144, 56, 3, 2, 1, 144},
};

// blocked: a conv2d's data and output in channel blocks where the layout
// pass (compiler/graph/passes.h PlanLayouts) stores them between layers of a
// network (16-channel multiples; a depthwise layer only both ways).
inline Workload KilnWorkload(const Shape& s, bool blocked = false) {
  Workload w;
  if (s.conv) {
    int64_t oh = (s.c + 2 * s.f - s.d) / s.e + 1;
    w.op = compiler::Op::kConv2d;
    w.ints = {{"N", {1}},
              {"C", {s.a}},
              {"H", {s.c}},
              {"W", {s.c}},
              {"K", {s.b}},
              {"R", {s.d}},
              {"S", {s.d}},
              {"stride", {s.e, s.e}},
              {"pad", {s.f, s.f, s.f, s.f}},
              {"dilation", {1, 1}},
              {"groups", {s.g}},
              {"bias", {1}},
              {"OH", {oh}},
              {"OW", {oh}}};
    const int64_t b = compiler::kChannelBlock;
    const bool depthwise = compiler::IsDepthwiseConv(w);
    if (blocked && (s.g == 1 || depthwise)) {
      const bool in = s.a % b == 0 && (s.g == 1 ? s.b % b == 0 : true);
      const bool out = s.b % b == 0 && (!depthwise || in);
      if (in && (!depthwise || out)) w.ints["in_block"] = {b};
      if (out) w.ints["out_block"] = {b};
    }
  } else {
    w.op = compiler::Op::kDense;
    w.ints = {{"M", {s.a}},   {"N", {s.b}},     {"K", {s.c}},     {"transA", {0}}, {"transB", {0}},
              {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}, {"bias", {0}}};
  }
  return w;
}

// A config with a uniformly random choice for every knob (not validated).
inline compiler::Config RandomConfig(const std::vector<compiler::Knob>& knobs, std::mt19937& rng) {
  compiler::Config c;
  for (const auto& k : knobs) c[k.name] = k.choices[rng() % k.choices.size()];
  return c;
}

}  // namespace kiln::bench
