#pragma once
// Tensor IR -> LLVM IR for CPUs.
//
// Every PrimFunc becomes `extern "C" int32_t <name>(void* const* args)`: a
// thin wrapper that loads each buffer pointer from `args` and calls an
// internal, always-inlined `<name>.impl` whose pointer parameters are
// `noalias` (inlining turns that into alias scopes). Vector expressions
// (lanes > 1) become LLVM vector types: a Ramp index of stride 1 is a
// contiguous vector load/store, other vector indices a gather/scatter.
// Floating-point adds/multiplies carry the `contract` flag (FMA contraction).
// A kParallel loop is outlined into `void <name>.par<N>(int64_t i, void* ctx)`
// (capturing every free variable and buffer pointer in a struct) and run
// through `kiln_parallel_for` (deploy/parallel.h); parallel loops nested in an
// outlined body run serially. Allocate becomes an entry-block alloca aligned
// to 64 bytes.
//
// LLVM headers stay out of this header (they are slow to compile).

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::compiler::codegen {

// Initializes every LLVM target (JIT for the host, objects for any triple).
// Idempotent and thread-safe.
void InitializeLlvm();

// A TargetMachine for `target` (triple, cpu, attrs) at the aggressive
// optimization level. `pic` selects the PIC relocation model (shared
// objects). INVALID_ARGUMENT for a triple LLVM does not know.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const Target& target,
                                                                         bool pic);

// An empty module with the machine's triple and data layout.
std::unique_ptr<llvm::Module> NewModule(llvm::LLVMContext& ctx, const std::string& name,
                                        llvm::TargetMachine& tm);

// Adds `func` to `module` with the kernel calling convention above.
// INVALID_ARGUMENT when the IR is not fully lowered (a Reduce node, a
// multi-dimensional access, an unknown intrinsic, a non-constant Allocate).
absl::Status EmitKernel(const ir::PrimFunc& func, llvm::Module* module);

// Verifies the module, then runs LLVM's O3 pipeline for the machine.
absl::Status OptimizeModule(llvm::Module* module, llvm::TargetMachine* tm);

// Textual LLVM IR of `funcs` compiled for `target`, optionally optimized
// (for tests and --dump-ir).
absl::StatusOr<std::string> EmitLlvmIrText(const std::vector<ir::PrimFunc>& funcs,
                                           const Target& target, bool optimize);

}  // namespace kiln::compiler::codegen
