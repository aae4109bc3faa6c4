#pragma once
// The operators a workload computes: a closed vocabulary (base/vocabulary.h).
// The name is what a workload's canonical text, and so its key, the wire and
// the log database carry; everything between holds the enum. What each op
// is (its fusion pattern, its compute, its schedule templates) is registered
// once, in the operator registry (compiler/ops/registry.h); its attributes
// and buffers are described in compiler/workload.h and compiler/ops/generic.h.

#include <array>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <utility>

#include "base/vocabulary.h"

namespace kiln::compiler {

enum class Op : uint8_t {
  // The classic anchors, each with templates of its own (ops/conv2d*.cc,
  // dense*.cc, pool.cc) and a hand-written reference.
  kConv2d,
  kDense,
  kPool2d,
  kPool3d,
  // An epilogue chain over a broadcast input (ops/eltwise.cc).
  kEltwise,
  // The generic tensor operators (ops/generic.h), one compute definition
  // each, scheduled by the generic template.
  kNll,
  kReduce,
  kArgReduce,
  kCumSum,
  kTranspose,
  kConcat,
  kSlice,
  kGather,
  kGatherElements,
  kPad,
  kWhere,
  kTile,
  kTrilu,
  kOneHot,
  kEyeLike,
  kResize,
  kGridSample,
  kGatherNd,
  kScatter,
  kTopK,
  kMatMul,
  kConv,
  kWindow,
  kEinsum,
  kLrn,
  kQuantize,
  kDequantize,
  kQAdd,
};

}  // namespace kiln::compiler

namespace kiln {

template <>
struct Vocabulary<compiler::Op> {
  using E = compiler::Op;
  static constexpr std::array<std::pair<E, std::string_view>, 33> kNames = {{
      {E::kConv2d, "conv2d"},
      {E::kDense, "dense"},
      {E::kPool2d, "pool2d"},
      {E::kPool3d, "pool3d"},
      {E::kEltwise, "eltwise"},
      {E::kNll, "nll"},
      {E::kReduce, "reduce"},
      {E::kArgReduce, "argreduce"},
      {E::kCumSum, "cumsum"},
      {E::kTranspose, "transpose"},
      {E::kConcat, "concat"},
      {E::kSlice, "slice"},
      {E::kGather, "gather"},
      {E::kGatherElements, "gather_elements"},
      {E::kPad, "pad"},
      {E::kWhere, "where"},
      {E::kTile, "tile"},
      {E::kTrilu, "trilu"},
      {E::kOneHot, "onehot"},
      {E::kEyeLike, "eyelike"},
      {E::kResize, "resize"},
      {E::kGridSample, "grid_sample"},
      {E::kGatherNd, "gather_nd"},
      {E::kScatter, "scatter"},
      {E::kTopK, "topk"},
      {E::kMatMul, "matmul"},
      {E::kConv, "conv"},
      {E::kWindow, "window"},
      {E::kEinsum, "einsum"},
      {E::kLrn, "lrn"},
      {E::kQuantize, "quantize"},
      {E::kDequantize, "dequantize"},
      {E::kQAdd, "qadd"},
  }};
};

}  // namespace kiln

namespace kiln::compiler {

// Writes the op's name (test output, streams; StrCat writes it by itself).
inline std::ostream& operator<<(std::ostream& os, Op op) { return os << NameOf(op); }

}  // namespace kiln::compiler
