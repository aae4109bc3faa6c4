#pragma once
// Lowering a workload with a config to a fully lowered PrimFunc: params are
// the KernelSignature buffers in order (inputs, epilogue operands, output),
// accesses are flat single-index, no Reduce nodes, vectorized loops turned into
// Ramp/Broadcast vector expressions, unrolled loops replicated; remaining loops
// are kSerial or kParallel. Scratch buffers are Allocate nodes (<= 256 KiB).

#include <string>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/ir/ir.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::compiler {

absl::StatusOr<ir::PrimFunc> LowerWorkload(const Workload& w, const Config& c, const Target& t,
                                           const std::string& func_name, const LowerOptions& opts);

// The packed inputs of the workload's kernel with config c.
absl::StatusOr<std::vector<PackedInput>> PackedInputsOf(const Workload& w, const Config& c,
                                                        const Target& t);
// The layout transform of packed input `input` (a KernelSignature input
// index) as a kernel of two arguments: the input as the workload declares it,
// then the packed buffer. NOT_FOUND when the kernel takes that input as is.
absl::StatusOr<ir::PrimFunc> LowerPack(const Workload& w, const Config& c, const Target& t,
                                       int input, const std::string& func_name,
                                       const LowerOptions& opts);

// The name LowerKernel gives the layout transform of packed input `input`:
// "kiln_pack<input>".
std::string PackFunctionName(int input);

// What BuildJit compiles: the kernel `kernel_name` (LowerWorkload), then
// PackFunctionName(input) for each packed input (LowerPack); the packed
// inputs in `packed` when it is not null.
absl::StatusOr<std::vector<ir::PrimFunc>> LowerKernel(const Workload& workload,
                                                      const Config& config, const Target& target,
                                                      const std::string& kernel_name,
                                                      const LowerOptions& options = {},
                                                      std::vector<PackedInput>* packed = nullptr);

}  // namespace kiln::compiler
