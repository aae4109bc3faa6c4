#include "compiler/codegen/module_builder.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler {
namespace codegen {
namespace {

// int32 kiln_main(ptr inputs, ptr outputs, ptr weights, ptr workspace)
absl::Status EmitEntry(const EntryPlan& plan, const std::unordered_map<std::string, size_t>& arity,
                       llvm::Module* mod) {
  llvm::LLVMContext& ctx = mod->getContext();
  llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type* i8 = llvm::Type::getInt8Ty(ctx);
  llvm::PointerType* ptr = llvm::PointerType::get(ctx, 0);
  if (plan.name.empty()) return absl::InvalidArgumentError("entry plan without a name");
  if (mod->getFunction(plan.name)) {
    return absl::InvalidArgumentError(StrCat("entry name ", plan.name, " clashes with a kernel"));
  }
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32, {ptr, ptr, ptr, ptr}, false),
                                    llvm::Function::ExternalLinkage, plan.name, mod);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* inputs = fn->getArg(0);
  llvm::Value* outputs = fn->getArg(1);
  llvm::Value* weights = fn->getArg(2);
  llvm::Value* workspace = fn->getArg(3);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  auto* kernel_ty = llvm::FunctionType::get(i32, {ptr}, false);
  // The runtime's profiling hooks (deploy/profile.h) around every call.
  llvm::Type* void_ty = llvm::Type::getVoidTy(ctx);
  llvm::FunctionCallee begin = mod->getOrInsertFunction(
      "kiln_kernel_begin", llvm::FunctionType::get(void_ty, {i32, ptr}, false));
  llvm::FunctionCallee end =
      mod->getOrInsertFunction("kiln_kernel_end", llvm::FunctionType::get(void_ty, {i32}, false));
  for (size_t c = 0; c < plan.calls.size(); ++c) {
    const KernelCall& call = plan.calls[c];
    if (absl::Status s = CheckEntryCall(c, call, arity); !s.ok()) return s;
    auto* arr_ty = llvm::ArrayType::get(ptr, std::max<size_t>(1, call.args.size()));
    llvm::AllocaInst* args;
    {
      llvm::IRBuilder<> eb(&fn->getEntryBlock(), fn->getEntryBlock().begin());
      args = eb.CreateAlloca(arr_ty, nullptr, StrCat("args.", c));
    }
    for (size_t a = 0; a < call.args.size(); ++a) {
      const BufferRef& ref = call.args[a];
      if (ref.byte_offset < 0 || ref.index < 0) {
        return absl::InvalidArgumentError(
            StrCat("entry call ", c, " argument ", a, " has a negative offset/index"));
      }
      llvm::Value* base = nullptr;
      switch (ref.kind) {
        case BufferRef::Kind::kInput:
          base = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, inputs, ref.index));
          break;
        case BufferRef::Kind::kOutput:
          base = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, outputs, ref.index));
          break;
        case BufferRef::Kind::kWeight:
          base = weights;
          break;
        case BufferRef::Kind::kWorkspace:
          base = workspace;
          break;
      }
      llvm::Value* p =
          ref.byte_offset ? b.CreateConstInBoundsGEP1_64(i8, base, ref.byte_offset) : base;
      b.CreateStore(p, b.CreateConstInBoundsGEP2_64(arr_ty, args, 0, a));
    }
    llvm::Function* kernel = mod->getFunction(call.kernel);
    llvm::Value* index = llvm::ConstantInt::get(i32, c);
    b.CreateCall(begin,
                 {index, b.CreateGlobalStringPtr(call.label.empty() ? call.kernel : call.label,
                                                 StrCat("label.", c))});
    llvm::Value* rc = b.CreateCall(kernel_ty, kernel, {args});
    b.CreateCall(end, {index});
    auto* fail = llvm::BasicBlock::Create(ctx, StrCat("fail.", c), fn);
    auto* next = llvm::BasicBlock::Create(ctx, StrCat("next.", c), fn);
    b.CreateCondBr(b.CreateICmpNE(rc, llvm::ConstantInt::get(i32, 0)), fail, next);
    b.SetInsertPoint(fail);
    b.CreateRet(rc);
    b.SetInsertPoint(next);
  }
  b.CreateRet(llvm::ConstantInt::get(i32, 0));
  if (!plan.io.empty()) {
    llvm::Constant* text = llvm::ConstantDataArray::getString(ctx, plan.io, /*AddNull=*/true);
    auto* io = new llvm::GlobalVariable(*mod, text->getType(), /*isConstant=*/true,
                                        llvm::GlobalValue::ExternalLinkage, text,
                                        StrCat(plan.name, "_io"));
    io->setAlignment(llvm::Align(1));
  }
  return absl::OkStatus();
}

bool IsHost(const Target& target) {
  llvm::Triple want(target.triple), host(llvm::sys::getProcessTriple());
  return want.getArch() == host.getArch() && want.getOS() == host.getOS();
}

// Runs a shell command; returns its exit code (127: not found).
int RunCommand(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool OnPath(const std::string& tool) {
  return RunCommand(StrCat("command -v ", tool, " >/dev/null 2>&1")) == 0;
}

}  // namespace

absl::StatusOr<std::string> EmitObjectFile(const std::vector<ir::PrimFunc>& kernels,
                                           const EntryPlan& plan, const Target& target) {
  auto tm = CreateTargetMachine(target, /*pic=*/true);
  if (!tm.ok()) return tm.status();
  llvm::LLVMContext ctx;
  auto mod = NewModule(ctx, "kiln_module", **tm);
  std::unordered_map<std::string, size_t> arity;
  for (const ir::PrimFunc& f : kernels) {
    if (absl::Status s = EmitKernel(f, mod.get()); !s.ok()) return s;
    arity[f.name] = f.params.size();
  }
  if (absl::Status s = EmitEntry(plan, arity, mod.get()); !s.ok()) return s;
  if (absl::Status s = OptimizeModule(mod.get(), tm->get()); !s.ok()) return s;
  return EmitObject(mod.get(), **tm);
}

absl::StatusOr<std::string> LinkSharedObject(const std::string& object, const Target& target) {
  std::string linker;
  if (IsHost(target) && OnPath("cc")) {
    linker = "cc -shared -nostdlib";
  } else if (OnPath("ld.lld")) {
    linker = "ld.lld -shared";
  } else if (IsHost(target) && OnPath("ld")) {
    linker = "ld -shared";
  } else {
    return absl::UnavailableError(StrCat(
        "no linker for ", target.triple, ": need ", IsHost(target) ? "cc, ld.lld or ld" : "ld.lld",
        " on PATH (the object file could be emitted, but not linked into a shared object)"));
  }
  char tmpl[] = "/tmp/kiln-link-XXXXXX";
  if (mkdtemp(tmpl) == nullptr)
    return absl::InternalError("cannot create a temporary directory for linking");
  std::filesystem::path dir(tmpl);
  struct Cleanup {
    std::filesystem::path d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  {
    std::ofstream out(dir / "module.o", std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out) return absl::InternalError("cannot write the object file for linking");
  }
  std::string cmd = StrCat(linker, " -o '", (dir / "module.so").string(), "' '",
                           (dir / "module.o").string(), "' 2>'", (dir / "link.err").string(), "'");
  int rc = RunCommand(cmd);
  if (rc != 0) {
    return absl::InternalError(StrCat("linking the shared object failed (", linker, ", exit ", rc,
                                      "): ", ReadFile(dir / "link.err")));
  }
  std::string so = ReadFile(dir / "module.so");
  if (so.empty()) return absl::InternalError("the linker produced an empty shared object");
  return so;
}

absl::StatusOr<std::string> BuildSharedObjectFromFuncs(const std::vector<ir::PrimFunc>& kernels,
                                                       const EntryPlan& plan,
                                                       const Target& target) {
  auto obj = EmitObjectFile(kernels, plan, target);
  if (!obj.ok()) return obj.status();
  return LinkSharedObject(*obj, target);
}

}  // namespace codegen

}  // namespace kiln::compiler
