#pragma once
// A direct interpreter of compute definitions: evaluates every element of a
// te::Tensor by walking its body expression, with no schedule, lowering or
// code generation. It is the reference that generated kernels of generic
// operators are verified against, and what folds constant subgraphs at import
// (shape arithmetic, casts of initializers) without JIT-compiling anything.

#include <span>
#include <vector>

#include "absl/status/status.h"
#include "compiler/te/tensor.h"

namespace kiln::compiler::ops {

// `args`: the placeholders the computation reads, in the order of `inputs`,
// then the output tensor. Each buffer is dense row-major of its tensor's
// dtype. Intermediate computes are evaluated into scratch memory. An
// out-of-bounds load is an error, never a read outside a buffer.
absl::Status Interpret(const std::vector<te::Tensor>& args, std::span<const void* const> inputs,
                       void* output);

}  // namespace kiln::compiler::ops
