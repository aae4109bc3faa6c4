#include "compiler/codegen/jit.h"

#include <atomic>
#include <chrono>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen {

namespace {

std::string ErrorText(llvm::Error e) { return llvm::toString(std::move(e)); }

// The process's one LLJIT, used as a linker and loader only: kiln compiles
// each module to an object itself (with a leased target machine) and adds
// it to a JITDylib of its own, which the module's destructor removes.
// Creating an LLJIT per candidate cost two more target machines and the
// session's set-up on every build. Never destroyed: modules may outlive any
// static destructor order.
absl::StatusOr<llvm::orc::LLJIT*> ProcessJit() {
  static const absl::StatusOr<llvm::orc::LLJIT*> jit = []() -> absl::StatusOr<llvm::orc::LLJIT*> {
    // No platform: kernels have no static initializers, and the generic
    // platform would add a support module to every library created.
    auto built =
        llvm::orc::LLJITBuilder().setPlatformSetUp(llvm::orc::setUpInactivePlatform).create();
    if (!built) {
      return absl::InternalError(StrCat("creating the JIT: ", ErrorText(built.takeError())));
    }
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        (*built)->getDataLayout().getGlobalPrefix());
    if (!gen) {
      return absl::InternalError(StrCat("JIT process symbols: ", ErrorText(gen.takeError())));
    }
    (*built)->getMainJITDylib().addGenerator(std::move(*gen));
    return built->release();
  }();
  return jit;
}

using Clock = std::chrono::steady_clock;

// Seconds since `t`, restarting `t`.
double Lap(Clock::time_point& t) {
  Clock::time_point now = Clock::now();
  double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

int64_t Instructions(const llvm::Module& m) {
  int64_t n = 0;
  for (const llvm::Function& f : m) n += f.getInstructionCount();
  return n;
}

}  // namespace

struct JitModule::Impl {
  llvm::orc::LLJIT* jit = nullptr;
  llvm::orc::JITDylib* dylib = nullptr;
  ~Impl() {
    if (dylib == nullptr) return;
    if (llvm::Error e = jit->getExecutionSession().removeJITDylib(*dylib)) {
      llvm::consumeError(std::move(e));
    }
  }
};

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

absl::StatusOr<KernelFn> JitModule::Lookup(const std::string& name) const {
  auto sym = impl_->jit->lookup(*impl_->dylib, name);
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
                                                      const Target& target, BuildTimes* times) {
  BuildTimes ignored;
  BuildTimes& t = times != nullptr ? *times : ignored;
  Clock::time_point lap = Clock::now();
  InitializeLlvm();
  llvm::Triple want(target.triple);
  llvm::Triple host(llvm::sys::getProcessTriple());
  if (want.getArch() != host.getArch() || want.getOS() != host.getOS()) {
    return absl::InvalidArgumentError(StrCat("cannot JIT-compile for ", target.Spec(), " on a ",
                                             host.str(),
                                             " host: only the host target can be JIT-compiled"));
  }
  auto jit = ProcessJit();
  if (!jit.ok()) return jit.status();
  // PIC and the small code model, as the JIT's linker (JITLink) expects.
  auto tm = LeaseTargetMachine(target, /*pic=*/true);
  if (!tm.ok()) return tm.status();

  llvm::LLVMContext ctx;
  auto mod = NewModule(ctx, "kiln_jit", **tm);
  for (const ir::PrimFunc& f : funcs) {
    if (absl::Status s = EmitKernel(f, mod.get()); !s.ok()) return s;
  }
  t.emit = Lap(lap);
  if (times != nullptr) t.emitted = Instructions(*mod);
  if (absl::Status s = OptimizeModule(mod.get(), tm->get()); !s.ok()) return s;
  t.middle = Lap(lap);
  if (times != nullptr) t.optimized = Instructions(*mod);
  auto object = EmitObject(mod.get(), **tm);
  if (!object.ok()) return object.status();
  t.codegen = Lap(lap);

  static std::atomic<uint64_t> next_id{0};
  const std::string name = StrCat("kiln_jit_", next_id.fetch_add(1));
  auto dylib = (*jit)->createJITDylib(name);
  if (!dylib) {
    return absl::InternalError(StrCat("creating a JIT library: ", ErrorText(dylib.takeError())));
  }
  auto impl = std::make_unique<JitModule::Impl>();
  impl->jit = *jit;
  impl->dylib = &*dylib;
  // Symbols the module does not define resolve from the process (the main
  // library's generator): kiln_parallel_for, libm.
  dylib->addToLinkOrder((*jit)->getMainJITDylib());
  if (llvm::Error e =
          (*jit)->addObjectFile(*dylib, llvm::MemoryBuffer::getMemBufferCopy(*object, name))) {
    return absl::InternalError(StrCat("adding the module to the JIT: ", ErrorText(std::move(e))));
  }
  auto module = std::make_unique<JitModule>(std::move(impl));
  // Link every kernel now so that errors (an unresolved symbol) surface here.
  for (const ir::PrimFunc& f : funcs) {
    if (auto fn = module->Lookup(f.name); !fn.ok()) return fn.status();
  }
  t.link = Lap(lap);
  return module;
}

}  // namespace kiln::compiler::codegen
