#pragma once
// What the dense templates for CPUs (dense.cc) and GPUs (dense_gpu.cc)
// share: the workload's dimensions and the compute definitions.
#include <cstdint>
#include <vector>

#include "compiler/ops/common.h"

namespace kiln::compiler::ops {

struct DenseDims {
  int64_t M, N, K, batch;
  bool ba, bb, batched;  // A / B carry the batch axis; either does
};
DenseDims DenseDimsOf(const Workload& w);

// acc[.., m, n] = sum_k op(A)[m, k] op(B)[k, n]; B read from `Bp`, its
// [ceil(N/tn)][K][tn] panels, when Bp is defined.
te::Tensor DenseAcc(const Workload& w, const te::Tensor& A, const te::Tensor& B,
                    const te::Tensor& Bp, int64_t tn, const std::vector<int64_t>& out_shape);
// out = epilogue(alpha * acc + beta * C) (C, the bias, when defined).
te::Tensor DenseOut(const Workload& w, const te::Tensor& acc, const te::Tensor& C,
                    const std::vector<te::Tensor>& eps, const std::vector<int64_t>& out_shape);

}  // namespace kiln::compiler::ops
