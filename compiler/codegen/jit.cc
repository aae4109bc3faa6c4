#include "compiler/codegen/jit.h"

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen {

struct JitModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

namespace {
std::string ErrorText(llvm::Error e) { return llvm::toString(std::move(e)); }
}  // namespace

absl::StatusOr<KernelFn> JitModule::Lookup(const std::string& name) const {
  auto sym = impl_->jit->lookup(name);
  if (!sym) {
    std::string msg = ErrorText(sym.takeError());
    if (msg.find("kiln_parallel_for") != std::string::npos) {
      msg +=
          " (parallel kernels need libkiln_runtime.so loaded in this process: link it and "
          "reference "
          "kiln_parallel_for so the linker keeps it)";
    }
    return absl::NotFoundError(StrCat("JIT symbol ", name, ": ", msg));
  }
  return sym->toPtr<KernelFn>();
}

absl::StatusOr<std::unique_ptr<JitModule>> JitCompile(std::vector<ir::PrimFunc> funcs,
                                                      const Target& target) {
  InitializeLlvm();
  llvm::Triple want(target.triple);
  llvm::Triple host(llvm::sys::getProcessTriple());
  if (want.getArch() != host.getArch() || want.getOS() != host.getOS()) {
    return absl::InvalidArgumentError(StrCat("cannot JIT-compile for ", target.Spec(), " on a ",
                                             host.str(),
                                             " host: only the host target can be JIT-compiled"));
  }
  auto tm = CreateTargetMachine(target, /*pic=*/false);
  if (!tm.ok()) return tm.status();

  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto mod = NewModule(*ctx, "kiln_jit", **tm);
  for (const ir::PrimFunc& f : funcs) {
    if (absl::Status s = EmitKernel(f, mod.get()); !s.ok()) return s;
  }
  if (absl::Status s = OptimizeModule(mod.get(), tm->get()); !s.ok()) return s;

  llvm::orc::JITTargetMachineBuilder jtmb(want);
  jtmb.setCPU((*tm)->getTargetCPU().str());
  jtmb.getFeatures() = llvm::SubtargetFeatures((*tm)->getTargetFeatureString());
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) return absl::InternalError(StrCat("creating the JIT: ", ErrorText(jit.takeError())));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) return absl::InternalError(StrCat("JIT process symbols: ", ErrorText(gen.takeError())));
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (llvm::Error e =
          (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx)))) {
    return absl::InternalError(StrCat("adding the module to the JIT: ", ErrorText(std::move(e))));
  }
  auto impl = std::make_unique<JitModule::Impl>();
  impl->jit = std::move(*jit);
  auto module = std::make_unique<JitModule>(std::move(impl));
  // Materialize every kernel now so that compile errors surface here.
  for (const ir::PrimFunc& f : funcs) {
    if (auto fn = module->Lookup(f.name); !fn.ok()) return fn.status();
  }
  return module;
}

}  // namespace kiln::compiler::codegen
