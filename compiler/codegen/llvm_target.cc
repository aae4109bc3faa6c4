// The LLVM side that is not IR emission: target initialization, target
// machines for any triple (the host's CPU features read from LLVM), the
// optimization pipeline, and textual IR for tests and --dump-ir.
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <vector>

#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen {

using namespace kiln::ir;  // NOLINT

void InitializeLlvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
    // LLVM's own command-line options (e.g. "-slp-threshold=2
    // -debug-pass-manager"), for compiler engineers who need to see or
    // steer a pass; parsed once, before any pipeline is built.
    if (const char* opts = std::getenv("KILN_LLVM_OPTIONS"); opts != nullptr && *opts != 0) {
      std::vector<std::string> words = {"kiln"};
      for (std::string_view w : StrSplit(opts, ' ', /*skip_empty=*/true)) words.emplace_back(w);
      std::vector<const char*> argv;
      for (const std::string& w : words) argv.push_back(w.c_str());
      llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "kiln\n");
    }
  });
}

namespace {

// The feature string for `target`: its attrs, or for the host CPU (no
// attrs given) the features the host actually has.
std::string FeaturesFor(const Target& target) {
  if (!target.attrs.empty()) return target.attrs;
  if (target.cpu == llvm::sys::getHostCPUName().str() &&
      llvm::Triple(target.triple).getArch() ==
          llvm::Triple(llvm::sys::getProcessTriple()).getArch()) {
    std::vector<std::string> feats;
    for (const auto& f : llvm::sys::getHostCPUFeatures()) {
      feats.push_back(StrCat(f.getValue() ? "+" : "-", f.getKey().str()));
    }
    return StrJoin(feats, ",");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const Target& target,
                                                                         bool pic) {
  InitializeLlvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, err);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("LLVM does not support triple '", target.triple, "': ", err));
  }
  llvm::TargetOptions opts;
  std::optional<llvm::Reloc::Model> reloc;
  if (pic) reloc = llvm::Reloc::PIC_;
  std::string cpu = target.cpu.empty() ? "generic" : target.cpu;
  std::unique_ptr<llvm::TargetMachine> tm(
      t->createTargetMachine(target.triple, cpu, FeaturesFor(target), opts, reloc, std::nullopt,
                             llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    return absl::InvalidArgumentError(StrCat("cannot create a target machine for ", target.Spec()));
  return tm;
}

std::unique_ptr<llvm::Module> NewModule(llvm::LLVMContext& ctx, const std::string& name,
                                        llvm::TargetMachine& tm) {
  auto m = std::make_unique<llvm::Module>(name, ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  return m;
}

absl::Status OptimizeModule(llvm::Module* module, llvm::TargetMachine* tm) {
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*module, &os)) {
    os.flush();
    return absl::InternalError(StrCat("generated LLVM IR does not verify: ", err));
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  // Templates unroll what they mean to unroll (their unroll knobs); LLVM's
  // unroller on top made no kernel measurably faster and took a third of
  // each candidate's build time (bench/turnaround_bench).
  pto.LoopUnrolling = false;
  llvm::PassBuilder pb(tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(*module, mam);
  return absl::OkStatus();
}

absl::StatusOr<std::string> EmitLlvmIrText(const std::vector<PrimFunc>& funcs, const Target& target,
                                           bool optimize) {
  auto tm = CreateTargetMachine(target, /*pic=*/true);
  if (!tm.ok()) return tm.status();
  llvm::LLVMContext ctx;
  auto mod = NewModule(ctx, "kiln", **tm);
  for (const PrimFunc& f : funcs) {
    if (absl::Status s = EmitKernel(f, mod.get()); !s.ok()) return s;
  }
  if (optimize) {
    if (absl::Status s = OptimizeModule(mod.get(), tm->get()); !s.ok()) return s;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  mod->print(os, nullptr);
  os.flush();
  return text;
}

}  // namespace kiln::compiler::codegen
