#pragma once
// One C-like source emitter for the lowered tensor IR, with two dialects
// that differ only where they must: OpenCL C (`__kernel`, `__global`
// pointers, `floatN` vectors with vloadN/vstoreN, `convert_T`, `select`) and
// CUDA C (`extern "C" __global__`, scalars only for now). The CPU pipeline
// keeps its LLVM code generator; GPU devices build this text with their own
// driver (OpenCL) or NVRTC (CUDA).
//
// What it emits today: the kernel as lowered for a CPU target, run by one
// work-item (OpenCL) or thread (CUDA): parallel loops are serial, scratch
// buffers are private arrays. Thread binding (`bind`), shared/local storage
// scopes and barriers come with the GPU schedule primitives (issue 9).
//
// UNIMPLEMENTED (naming the construct) for what a dialect cannot express
// yet: vectors in CUDA C, bfloat16/float8 storage types, Let expressions.

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::codegen {

enum class SourceDialect { kOpenCL, kCuda };

// The kernel's source text: one entry point named `func.name`, its buffer
// parameters in `func.params` order, as global pointers of their element
// type.
absl::StatusOr<std::string> EmitCSource(const ir::PrimFunc& func, SourceDialect dialect);

}  // namespace kiln::compiler::codegen
