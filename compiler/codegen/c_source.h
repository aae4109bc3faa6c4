#pragma once
// One C-like source emitter for the lowered tensor IR, with two dialects
// that differ only where they must: OpenCL C (`__kernel`, `__global`
// pointers, `floatN` vectors with vloadN/vstoreN, `convert_T`, `select`) and
// CUDA C (`extern "C" __global__`, scalars only for now). The CPU pipeline
// keeps its LLVM code generator; GPU devices build this text with their own
// driver (OpenCL) or NVRTC (CUDA).
//
// A loop bound to a thread index (te::Schedule::Bind) runs one iteration per
// thread of the launch (LaunchDimsOf), guarded by its extent; every other
// loop, parallel ones included, runs in each thread; scratch buffers are
// private arrays, shared ones (ir::StorageScope::kShared) __shared__ /
// __local arrays declared at the kernel's top; ir::Barrier() is
// __syncthreads() / barrier(CLK_LOCAL_MEM_FENCE). A kernel without bound
// loops is run by one work-item.
//
// UNIMPLEMENTED (naming the construct) for what a dialect cannot express
// yet: vectors in CUDA C, bfloat16/float8 storage types, Let expressions.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::codegen {

enum class SourceDialect { kOpenCL, kCuda };

struct CSourceOptions {
  // The helpers every kernel may call (CSourcePrelude) ahead of the kernel;
  // off where several kernels share one program that starts with them.
  bool prelude = true;
  // OpenCL: each buffer parameter as a byte pointer and a byte offset
  // (`__global uchar* A_base, ulong A_off`), the kernel's pointer computed
  // from them, so that one device buffer (a model's workspace) serves
  // several tensors at any offset. CUDA C adds offsets to device pointers
  // on the host instead.
  bool offset_params = false;
};

// The kernel's source text: one entry point named `func.name`, its buffer
// parameters in `func.params` order, as global pointers of their element
// type.
absl::StatusOr<std::string> EmitCSource(const ir::PrimFunc& func, SourceDialect dialect,
                                        const CSourceOptions& options = {});
// The helper functions kernels call (floor division and modulo).
std::string CSourcePrelude(SourceDialect dialect);

// The launch a kernel needs: blocks (OpenCL work-groups) along x, y, z and
// threads per block (work-items per group), the largest extent bound to
// each index (1 where none is). INVALID_ARGUMENT for a bound loop whose
// extent is not a constant.
struct LaunchDims {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t shared_bytes = 0;  // shared (OpenCL: local) memory per block
};
absl::StatusOr<LaunchDims> LaunchDimsOf(const ir::PrimFunc& func);

}  // namespace kiln::compiler::codegen
