#pragma once
// Tensor IR -> LLVM IR for CPUs.
//
// Every PrimFunc becomes `extern "C" int32_t <name>(void* const* args)`: a
// thin wrapper that loads each buffer pointer from `args` and calls an
// internal `<name>.impl` whose pointer parameters are `noalias`. The call is
// kept (noinline): inlining cloned every kernel body, a third of the middle
// end's time, to save one call per kernel run. Vector expressions
// (lanes > 1) become LLVM vector types: a Ramp index of stride 1 is a
// contiguous vector load/store, a load of constant stride 2-4 one masked wide
// load and a shuffle, other vector indices a gather/scatter.
// Floating-point adds/multiplies carry the `contract` flag (FMA contraction).
// A kParallel loop is outlined into `void <name>.par<N>(int64_t i, void* ctx)`
// (capturing every free variable and buffer pointer in a struct) and run
// through `kiln_parallel_for` (deploy/parallel.h); parallel loops nested in an
// outlined body run serially. Allocate becomes an entry-block alloca aligned
// to 64 bytes, or, above kMaxStackScratchBytes, a block of the runtime's
// per-thread workspace (kiln_workspace_alloc / kiln_workspace_free,
// deploy/parallel.h) held for the Allocate's scope: no large stack frames.
//
// Element types: float16/32/64, int8..int64 (signed: sdiv, smin, icmp slt;
// nsw only on int64, the index type: narrower data arithmetic wraps),
// uint8..uint64 (udiv/urem, umin/umax, icmp ult) and bool, which is i1 in
// registers and one byte (0 or 1) in memory: loads compare the byte with 0,
// stores zero-extend. Integer division by zero gives 0 and INT_MIN / -1
// gives INT_MIN (a divisor that is not a safe constant is guarded). Casts:
// fpext/fptrunc, saturating fptosi/fptoui (truncation toward zero, NaN -> 0),
// (vectors to 8 and 16 bits: NaN -> 0, clamped in float, then through
// int32, since x86 expands the saturating intrinsics lane by lane),
// sitofp/uitofp, sext from signed and zext from unsigned or bool sources,
// trunc; anything -> bool is `!= 0`.
// Intrinsic calls (ir::Call) on floats (float32 exp, tanh and sigmoid inline,
// compiler/codegen/fast_math.h): exp exp2 log log2 log10 sqrt fabs
// (abs) floor ceil trunc round (half away from zero) roundeven sin cos tan
// asin acos atan sinh cosh tanh asinh acosh atanh erf sigmoid pow fmod fma
// fmax fmin (NaN-ignoring) fmaximum fminimum (NaN-propagating); isnan isinf
// (bool results); on integers: abs bitand bitor bitxor bitnot shl shr
// (arithmetic for signed, logical for unsigned; shifting by the width or
// more gives 0, or the sign for an arithmetic shift). erf, asinh, acosh and
// atanh call the C library (erff, ...) lane by lane, as LLVM does for tan,
// sinh... Unknown names, wrong arities and argument types fail the build.
//
// LLVM headers stay out of this header (they are slow to compile).
// llvm_codegen.cc emits the IR; llvm_target.cc holds target machines, the
// optimization pipeline and textual IR.

#include <cstdint>
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

// The largest local buffer kept on the stack (register tiles and small
// staging buffers, which LLVM may promote to registers); larger ones live in
// the runtime's workspace.
inline constexpr uint64_t kMaxStackScratchBytes = 32 * 1024;

// Initializes every LLVM target (JIT for the host, objects for any triple).
// Idempotent and thread-safe.
void InitializeLlvm();

// A TargetMachine for `target` (triple, cpu, attrs) at the aggressive
// optimization level. `pic` selects the PIC relocation model (shared
// objects). INVALID_ARGUMENT for a triple LLVM does not know.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const Target& target,
                                                                         bool pic);

// A target machine lent from a per-process pool, returned when the lease
// ends. Creating one is a large share of a small kernel's build (its
// subtarget builds the instruction-selection and legalization tables on
// first use), so tuning candidates reuse them. A machine serves one thread
// at a time, which the lease guarantees.
class TargetMachineLease {
 public:
  TargetMachineLease(std::string key, std::unique_ptr<llvm::TargetMachine> tm);
  TargetMachineLease(TargetMachineLease&& other) noexcept;
  TargetMachineLease& operator=(TargetMachineLease&&) = delete;
  TargetMachineLease(const TargetMachineLease&) = delete;
  ~TargetMachineLease();
  llvm::TargetMachine& operator*() const { return *tm_; }
  llvm::TargetMachine* get() const { return tm_.get(); }

 private:
  std::string key_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

// CreateTargetMachine's machine, from the pool when one is free.
absl::StatusOr<TargetMachineLease> LeaseTargetMachine(const Target& target, bool pic);

// An empty module with the machine's triple and data layout.
std::unique_ptr<llvm::Module> NewModule(llvm::LLVMContext& ctx, const std::string& name,
                                        llvm::TargetMachine& tm);

// Adds `func` to `module` with the kernel calling convention above.
// INVALID_ARGUMENT when the IR is not fully lowered (a Reduce node, a
// multi-dimensional access, an unknown intrinsic, a non-constant Allocate).
absl::Status EmitKernel(const ir::PrimFunc& func, llvm::Module* module);

// The function attribute that asks the middle end for LLVM's SLP vectorizer
// (ir::PrimFunc::slp_vectorize), set on the functions holding the kernel's code.
inline constexpr char kSlpVectorizeAttribute[] = "kiln-slp-vectorize";

// Verifies the module, then runs the middle end for kernels (SROA, EarlyCSE,
// InstCombine, LICM, the loop vectorizer, and the SLP vectorizer on the
// functions marked with kSlpVectorizeAttribute; KILN_LLVM_PIPELINE replaces
// it, e.g. "default<O3>", where "kiln-slp" names that marked-only SLP pass).
absl::Status OptimizeModule(llvm::Module* module, llvm::TargetMachine* tm);

// The module compiled to an object file by `tm` (its target's machine code).
absl::StatusOr<std::string> EmitObject(llvm::Module* module, llvm::TargetMachine& tm);

// Textual LLVM IR of `funcs` compiled for `target`, optionally optimized
// (for tests and --dump-ir).
absl::StatusOr<std::string> EmitLlvmIrText(const std::vector<ir::PrimFunc>& funcs,
                                           const Target& target, bool optimize);

}  // namespace kiln::compiler::codegen
