#pragma once
// The operator registry: every op of compiler/op.h registered once, with its
// fusion pattern, its compute definition (the generic operators) and its
// schedule templates, CPU and GPU. The graph's fusion pass (FuseOps,
// compiler/graph/passes.h) decides by the patterns; lowering, knobs and
// validation (lower_workload.cc) find a workload's template here; nothing
// above the registry compares op names.

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/op.h"
#include "compiler/ops/common.h"
#include "compiler/target.h"
#include "compiler/te/tensor.h"
#include "compiler/workload.h"

namespace kiln::compiler::ops {

// How an op's output relates to its inputs, for fusion: TVM's OpPattern, in
// its order (a smaller pattern fuses into more).
//   kElemWise        output element i from input element i (same shapes)
//   kBroadcast       elementwise after broadcasting the inputs
//   kInjective       each output element from input elements chosen by index
//                    arithmetic (transpose, slice, gather, pad, resize, ...)
//   kCommReduce      each output element combines many input elements
//                    (reductions, scans, windows, top-k, scatter)
//   kOutEWiseFusable a heavy anchor whose elementwise consumers fuse into its
//                    output (conv2d, dense, pools, the matmul and conv of
//                    any dtype), taking no producer into its inputs
//   kOpaque          fuses with nothing (no kiln op today: every template
//                    applies an epilogue to its output)
// TVM's kTuple is not here: a kiln node has one output, so there are no
// tuples to fuse through.
enum class OpPattern { kElemWise, kBroadcast, kInjective, kCommReduce, kOutEWiseFusable, kOpaque };

struct OpDef {
  Op op;
  OpPattern pattern;
  // The generic operators: the op's output from its input placeholders (may
  // create intermediate computes); INVALID_ARGUMENT for attributes that do
  // not fit the shapes. nullptr for the classic anchors and eltwise, whose
  // templates define their own computes.
  absl::StatusOr<te::Tensor> (*compute)(const Workload& w,
                                        const std::vector<te::Tensor>& in) = nullptr;
  // The template that schedules workload w of this op on a CPU, and on a GPU.
  const OpTemplate* (*cpu)(const Workload& w) = nullptr;
  const OpTemplate* (*gpu)(const Workload& w) = nullptr;
  // Every output element reads its inputs of the output's shape at its own
  // index (and the others whole): the CPU loops may run over the tensors
  // flattened (FlatElementwise).
  bool elementwise = false;
};

// The registration of `op` (every value of Op has exactly one).
const OpDef& Registered(Op op);
// Every registration, in Op's order.
const std::vector<OpDef>& Registry();

// The pattern of workload w: its op's, except that an eltwise whose input
// has the output's shape is kElemWise (kBroadcast otherwise).
OpPattern PatternOf(const Workload& w);
// Whether w's op is a generic operator (has a compute definition): the
// generic template schedules it and builds its prologues.
bool IsGeneric(Op op);
// Whether generic workload w computes in a type of its own, whatever its
// kernel's output dtype (so an epilogue may convert it): the integer matmul
// and conv with zero points (int32, as ONNX defines them) and qadd (float32).
// Every other generic op computes in its output's dtype.
bool HasOwnComputeType(const Workload& w);

// The template of workload w on target t; INVALID_ARGUMENT when w is
// inconsistent (Workload::Signature).
absl::StatusOr<const OpTemplate*> TemplateFor(const Workload& w, const Target& t);

}  // namespace kiln::compiler::ops
