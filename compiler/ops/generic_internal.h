#pragma once
// Internal to compiler/ops: helpers shared by the generic operators' compute
// definitions (generic.cc, generic_linalg.cc, generic_index.cc,
// generic_resize.cc), and those definitions, which the operator registry
// (registry.cc) names. Not an API.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/str.h"
#include "compiler/te/tensor.h"
#include "compiler/workload.h"

namespace kiln::compiler::ops::generic_internal {

using Shape = std::vector<int64_t>;

inline absl::Status Bad(const Workload& w, const std::string& what) {
  return absl::InvalidArgumentError(StrCat(w.op, ": ", what));
}

inline ir::Expr Clamp(ir::Expr v, int64_t lo, int64_t hi) {
  return ir::Min(ir::Max(v, ir::IntImm(lo)), ir::IntImm(hi));
}

// A constant of type t.
inline ir::Expr Const(ir::DataType t, double v) {
  if (t.is_float()) return ir::FloatImm(v, t);
  return ir::IntImm(t.is_bool() ? (v != 0) : static_cast<int64_t>(v), t);
}

// v converted to type t; v itself when it already is.
inline ir::Expr To(ir::DataType t, ir::Expr v) { return v.dtype() == t ? v : ir::Cast(t, v); }

// A reduce workload's output; with lanes > 1, along its input's last axis
// in that many vector lanes (generic_template.cc's rvec).
absl::StatusOr<te::Tensor> ReduceCompute(const Workload& w, const std::vector<te::Tensor>& in,
                                         int64_t lanes);

// The lowest and highest values of type t (infinities for floats).
ir::Expr Lowest(ir::DataType t);
ir::Expr Highest(ir::DataType t);

inline std::vector<ir::Expr> AsExprs(const std::vector<ir::Var>& v) { return {v.begin(), v.end()}; }

inline absl::StatusOr<int64_t> AxisOf(const Workload& w, const char* name, size_t rank) {
  int64_t a = w.IntOr(name, 0);
  if (a < 0 || a >= static_cast<int64_t>(std::max<size_t>(rank, 1))) {
    return Bad(w, StrCat(name, " ", a, " out of range for rank ", rank));
  }
  return a;
}

// A normalized (negative counts from the end), clamped index into a
// dimension of size n.
inline ir::Expr IndexInto(ir::Expr i, int64_t n) {
  i = ir::Cast(ir::DataType::Int64(), i);
  return Clamp(ir::Select(i < ir::IntImm(0), i + ir::IntImm(n), i), 0, std::max<int64_t>(n - 1, 0));
}

// The operators of generic.cc.
absl::StatusOr<te::Tensor> ReduceOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> ArgReduceOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> CumSumOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> TransposeOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> ConcatOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> SliceOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> GatherOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> GatherElementsOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> PadOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> WhereOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> TileOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> TriluOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> OneHotOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> EyeLikeOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> NllOp(const Workload& w, const std::vector<te::Tensor>& in);
// The operators of generic_linalg.cc.
absl::StatusOr<te::Tensor> MatMulOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> ConvOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> WindowOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> EinsumOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> LrnOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> QuantizeOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> DequantizeOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> QAddOp(const Workload& w, const std::vector<te::Tensor>& in);
// generic_resize.cc.
absl::StatusOr<te::Tensor> ResizeOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> GridSampleOp(const Workload& w, const std::vector<te::Tensor>& in);
// The operators of generic_index.cc.
absl::StatusOr<te::Tensor> GatherNdOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> ScatterOp(const Workload& w, const std::vector<te::Tensor>& in);
absl::StatusOr<te::Tensor> TopKOp(const Workload& w, const std::vector<te::Tensor>& in);

}  // namespace kiln::compiler::ops::generic_internal
