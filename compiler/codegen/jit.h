#pragma once
// In-process compilation of lowered kernels with LLVM ORC (LLJIT), for
// measurement. Symbols the kernels do not define (kiln_parallel_for from
// libkiln_runtime.so, libm functions) resolve from the current process.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"

namespace kiln::compiler::codegen {

using KernelFn = int32_t (*)(void* const* args);

class JitModule {
 public:
  struct Impl;
  explicit JitModule(std::unique_ptr<Impl> impl);
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;

  // The kernel named `name`; NOT_FOUND when the module has none.
  absl::StatusOr<KernelFn> Lookup(const std::string& name) const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Where one build's time went, in seconds, and its size in LLVM
// instructions before and after the middle end (bench/turnaround_bench).
struct BuildTimes {
  double lower = 0;    // kiln's lowering (BuildJit)
  double emit = 0;     // a target machine (pooled) and LLVM IR emission
  double middle = 0;   // the middle end (OptimizeModule)
  double codegen = 0;  // instruction selection to the object file
  double link = 0;     // loading and linking the object (ORC)
  int64_t emitted = 0, optimized = 0;
};

// Compiles `funcs` (each with the kernel calling convention) for `target`,
// which must be the host (same architecture and OS); other targets give
// INVALID_ARGUMENT. Runs the middle end (OptimizeModule) first. `times`, if
// given, receives the phases' times.
absl::StatusOr<std::unique_ptr<JitModule>> JitCompile(std::vector<ir::PrimFunc> funcs,
                                                      const Target& target,
                                                      BuildTimes* times = nullptr);

}  // namespace kiln::compiler::codegen
