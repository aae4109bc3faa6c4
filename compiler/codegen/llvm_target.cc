// The LLVM side that is not IR emission: target initialization, target
// machines for any triple (the host's CPU features read from LLVM), the
// optimization pipeline, and textual IR for tests and --dump-ir.
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/codegen/llvm_intrinsics.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/PassTimingInfo.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Vectorize/SLPVectorizer.h"

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

// The feature string for `target`: for the host's CPU the features the host
// has, then its attrs (a later +f/-f wins); for another CPU its attrs (LLVM
// adds the CPU's own).
std::string FeaturesFor(const Target& target) {
  if (!target.IsHostCpu()) return target.attrs;
  std::vector<std::string> feats;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) {
    feats.push_back(StrCat(f.getValue() ? "+" : "-", f.getKey().str()));
  }
  if (!target.attrs.empty()) feats.push_back(target.attrs);
  return StrJoin(feats, ",");
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

namespace {

// Idle target machines by target and relocation model; at most
// kIdleMachinesPerKey each (more only while more threads build at once).
constexpr size_t kIdleMachinesPerKey = 4;
std::mutex pool_mu;
std::map<std::string, std::vector<std::unique_ptr<llvm::TargetMachine>>>& Pool() {
  static auto* pool = new std::map<std::string, std::vector<std::unique_ptr<llvm::TargetMachine>>>;
  return *pool;
}

}  // namespace

TargetMachineLease::TargetMachineLease(std::string key, std::unique_ptr<llvm::TargetMachine> tm)
    : key_(std::move(key)), tm_(std::move(tm)) {}

TargetMachineLease::TargetMachineLease(TargetMachineLease&& other) noexcept = default;

TargetMachineLease::~TargetMachineLease() {
  if (tm_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_mu);
  auto& idle = Pool()[key_];
  if (idle.size() < kIdleMachinesPerKey) idle.push_back(std::move(tm_));
}

absl::StatusOr<TargetMachineLease> LeaseTargetMachine(const Target& target, bool pic) {
  std::string key = StrCat(target.Spec(), pic ? " pic" : " static");
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    auto& idle = Pool()[key];
    if (!idle.empty()) {
      std::unique_ptr<llvm::TargetMachine> tm = std::move(idle.back());
      idle.pop_back();
      return TargetMachineLease(std::move(key), std::move(tm));
    }
  }
  auto tm = CreateTargetMachine(target, pic);
  if (!tm.ok()) return tm.status();
  return TargetMachineLease(std::move(key), *std::move(tm));
}

std::unique_ptr<llvm::Module> NewModule(llvm::LLVMContext& ctx, const std::string& name,
                                        llvm::TargetMachine& tm) {
  auto m = std::make_unique<llvm::Module>(name, ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  // The widest x86 integer vectors the CPU multiplies 16-bit lanes in
  // (pmaddwd), for the intrinsics that pick an instruction by width
  // (EmitDot4's dot2), and whether it has vdpbf16ps (EmitDotBf16); on AArch64, the byte dot
  // products it has (EmitDot4's dot4_vnni).
  if (tm.getTargetTriple().isX86()) {
    const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
    const int bits = sti->checkFeatures("+avx512bw") ? 512
                     : sti->checkFeatures("+avx2")   ? 256
                                                     : 128;
    m->addModuleFlag(llvm::Module::Warning, kX86IntVectorBitsFlag, bits);
    m->addModuleFlag(llvm::Module::Warning, kX86Bf16DotFlag,
                     sti->checkFeatures("+avx512bf16,+avx512vl") ? 1 : 0);
  }
  if (tm.getTargetTriple().isAArch64()) {
    const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
    const int dot = sti->checkFeatures("+i8mm") ? 2 : sti->checkFeatures("+dotprod") ? 1 : 0;
    m->addModuleFlag(llvm::Module::Warning, kAarch64DotFlag, dot);
    m->addModuleFlag(llvm::Module::Warning, kAarch64Bf16DotFlag,
                     sti->checkFeatures("+bf16") ? 1 : 0);
  }
  return m;
}

namespace {

// The middle end kiln's kernels need. The templates already do what O3's
// heavier passes are for: they vectorize their register tiles (explicit
// vector types), unroll what their knobs say, and hand over noalias
// buffers. What is left is promoting the accumulators to registers (SROA),
// cleaning up the address arithmetic (EarlyCSE, InstCombine), hoisting
// invariants out of the loops (LICM), and vectorizing the loops no template
// vectorized (the loop vectorizer skips loops that already hold vector
// code). Measured on the AVX2 EPYC: the middle end of a tuning candidate
// 24-27 -> 11-12 ms median (bench/turnaround_bench --phases), ResNet-50,
// MobileNetV2 and the BERT layer within noise of O3 at 1 and 2 threads
// (git history of docs/results.md, session ten). The SLP vectorizer runs only on the
// kernels whose templates ask for it (kiln-slp, kSlpVectorizeAttribute):
// on the others it changed the code of 1 of 64 tuning candidates and cost
// 5 % of their builds' instructions (session eleven), while the NCHWc
// convolutions that write NCHW need it for their stores (session twelve).
constexpr char kKernelPipeline[] =
    "function(sroa<modify-cfg>,early-cse<memssa>,"
    "instcombine<no-verify-fixpoint>,simplifycfg,loop-mssa(loop-rotate,licm),"
    "loop-vectorize,kiln-slp,instcombine<no-verify-fixpoint>,simplifycfg)";

// LLVM's SLP vectorizer on the functions marked kSlpVectorizeAttribute only.
struct MarkedSlpVectorizer : llvm::PassInfoMixin<MarkedSlpVectorizer> {
  llvm::PreservedAnalyses run(llvm::Function& f, llvm::FunctionAnalysisManager& fam) {
    if (!f.hasFnAttribute(kSlpVectorizeAttribute)) return llvm::PreservedAnalyses::all();
    return llvm::SLPVectorizerPass().run(f, fam);
  }
};

}  // namespace

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
  // These shape only LLVM's own default<On> pipelines, which
  // KILN_LLVM_PIPELINE may name: with the vectorizers on and the unroller off
  // (templates unroll what their knobs say; LLVM's unroller on top made no
  // kernel faster and took a third of the build), default<O3> is the O3
  // that kKernelPipeline replaced, the baseline of its comparisons.
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = false;
  // With LLVM's -time-passes (KILN_LLVM_OPTIONS), the middle end's passes
  // are timed too, summed over the process and reported at exit (a
  // diagnostic for one thread at a time).
  llvm::PassInstrumentationCallbacks pic;
  if (llvm::TimePassesIsEnabled) {
    static auto* timing = new llvm::TimePassesHandler(/*Enabled=*/true);
    static const int report_at_exit = std::atexit([] { timing->print(); });
    (void)report_at_exit;
    timing->registerCallbacks(pic);
  }
  llvm::PassBuilder pb(tm, pto, std::nullopt, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.registerPipelineParsingCallback([](llvm::StringRef name, llvm::FunctionPassManager& fpm,
                                        llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
    if (name != "kiln-slp") return false;
    fpm.addPass(MarkedSlpVectorizer());
    return true;
  });
  // KILN_LLVM_PIPELINE replaces the pipeline (opt's syntax, e.g.
  // "default<O3>"), for compiler engineers comparing pipelines; read once,
  // like KILN_LLVM_OPTIONS.
  static const std::string text = [] {
    const char* env = std::getenv("KILN_LLVM_PIPELINE");
    return std::string(env != nullptr && *env != 0 ? env : kKernelPipeline);
  }();
  llvm::ModulePassManager mpm;
  if (llvm::Error e = pb.parsePassPipeline(mpm, text)) {
    return absl::InvalidArgumentError(
        StrCat("LLVM pass pipeline \"", text, "\": ", llvm::toString(std::move(e))));
  }
  mpm.run(*module, mam);
  return absl::OkStatus();
}

absl::StatusOr<std::string> EmitObject(llvm::Module* module, llvm::TargetMachine& tm) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    return absl::InternalError(
        StrCat("LLVM cannot emit object files for ", tm.getTargetTriple().str()));
  }
  pm.run(*module);
  return std::string(buf.begin(), buf.end());
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
