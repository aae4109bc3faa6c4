// BuildJit: lower a workload with its config, then JIT-compile it.
#include <memory>

#include "absl/status/status.h"
#include "compiler/codegen/jit.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"

namespace kiln::compiler {
namespace {

class OrcJitKernel : public JitKernel {
 public:
  OrcJitKernel(std::unique_ptr<codegen::JitModule> module, codegen::KernelFn fn)
      : module_(std::move(module)), fn_(fn) {}
  int32_t Run(void* const* args) const override { return fn_(args); }

 private:
  std::unique_ptr<codegen::JitModule> module_;  // owns the code fn_ points into
  codegen::KernelFn fn_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<JitKernel>> BuildJit(const Workload& workload, const Config& config,
                                                    const Target& target,
                                                    const LowerOptions& options) {
  const std::string name = "kiln_kernel";
  absl::StatusOr<ir::PrimFunc> func = LowerWorkload(workload, config, target, name, options);
  if (!func.ok()) return func.status();
  auto module = codegen::JitCompile({*func}, target);
  if (!module.ok()) return module.status();
  auto fn = (*module)->Lookup(name);
  if (!fn.ok()) return fn.status();
  return std::unique_ptr<JitKernel>(new OrcJitKernel(std::move(*module), *fn));
}

}  // namespace kiln::compiler
