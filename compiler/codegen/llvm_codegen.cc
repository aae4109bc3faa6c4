#include "compiler/codegen/llvm_codegen.h"

#include <unordered_map>
#include <unordered_set>

#include "base/str.h"
#include "compiler/codegen/llvm_codegen_internal.h"
#include "compiler/ir/functor.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::compiler::codegen {

using namespace kiln::ir;  // NOLINT

namespace detail {

namespace {

// Collects the variables and buffers referenced in a statement.
class RefCollector : public StmtVisitor {
 public:
  std::vector<const VarNode*> vars;
  std::vector<const BufferNode*> bufs;

 protected:
  void VisitVar(const VarNode* op) override {
    if (seen_vars_.insert(op).second) vars.push_back(op);
  }
  void VisitBufferLoad(const BufferLoadNode* op) override {
    UseBuffer(op->buffer.get());
    StmtVisitor::VisitBufferLoad(op);
  }
  void VisitBufferStore(const BufferStoreNode* op) override {
    UseBuffer(op->buffer.get());
    StmtVisitor::VisitBufferStore(op);
  }

 private:
  void UseBuffer(const BufferNode* b) {
    if (seen_bufs_.insert(b).second) bufs.push_back(b);
  }
  std::unordered_set<const VarNode*> seen_vars_;
  std::unordered_set<const BufferNode*> seen_bufs_;
};

}  // namespace

absl::Status CodeGen::EmitKernel(const PrimFunc& f) {
  name_ = f.name;
  slp_vectorize_ = f.slp_vectorize;
  run_once_ = f.run_once;
  // impl: int32 (ptr noalias, ...)
  std::vector<llvm::Type*> ptypes(f.params.size(), ptr_);
  auto* impl_ty = llvm::FunctionType::get(i32_, ptypes, false);
  auto* impl =
      llvm::Function::Create(impl_ty, llvm::Function::InternalLinkage, f.name + ".impl", mod_);
  MarkImpl(impl);
  for (size_t i = 0; i < f.params.size(); ++i) {
    impl->addParamAttr(i, llvm::Attribute::NoAlias);
    impl->addParamAttr(i, llvm::Attribute::NoCapture);
    impl->getArg(i)->setName(f.params[i]->name);
  }
  fn_ = impl;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
  for (size_t i = 0; i < f.params.size(); ++i) BindBuffer(f.params[i], impl->getArg(i));
  EmitStmt(f.body);
  b_.CreateRet(llvm::ConstantInt::get(i32_, 0));

  // Wrapper: int32 name(ptr args)
  auto* wrap_ty = llvm::FunctionType::get(i32_, {ptr_}, false);
  auto* wrap = llvm::Function::Create(wrap_ty, llvm::Function::ExternalLinkage, f.name, mod_);
  wrap->addFnAttr(llvm::Attribute::NoUnwind);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", wrap));
  std::vector<llvm::Value*> args;
  for (size_t i = 0; i < f.params.size(); ++i) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr_, wrap->getArg(0), i);
    args.push_back(b_.CreateAlignedLoad(ptr_, slot, llvm::Align(8), f.params[i]->name));
  }
  b_.CreateRet(b_.CreateCall(impl, args));
  return status_;
}

void CodeGen::EmitStmt(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* n = s.to<ForNode>();
      if (n->for_kind == ForKind::kParallel && parallel_depth_ == 0) {
        EmitParallelFor(n);
      } else {
        EmitSerialFor(n);
      }
      return;
    }
    case StmtKind::kBufferStore:
      EmitStore(s.to<BufferStoreNode>());
      return;
    case StmtKind::kSeq:
      for (const Stmt& c : s.to<SeqNode>()->seq) EmitStmt(c);
      return;
    case StmtKind::kIfThenElse: {
      const auto* n = s.to<IfThenElseNode>();
      llvm::Value* c = EmitExpr(n->cond);
      if (c->getType()->isVectorTy()) {
        Fail("vector condition in IfThenElse");
        return;
      }
      auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
      auto* end_bb = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
      auto* else_bb =
          n->else_case.defined() ? llvm::BasicBlock::Create(ctx_, "if.else", fn_) : end_bb;
      b_.CreateCondBr(c, then_bb, else_bb);
      b_.SetInsertPoint(then_bb);
      EmitStmt(n->then_case);
      b_.CreateBr(end_bb);
      if (n->else_case.defined()) {
        b_.SetInsertPoint(else_bb);
        EmitStmt(n->else_case);
        b_.CreateBr(end_bb);
      }
      b_.SetInsertPoint(end_bb);
      return;
    }
    case StmtKind::kAllocate: {
      const auto* n = s.to<AllocateNode>();
      if (n->scope == StorageScope::kShared) {
        Fail(StrCat(n->buffer->name,
                    " is shared by a GPU block's threads: a GPU target's "
                    "schedule, not a CPU's"));
        return;
      }
      auto count = AsConstInt(n->buffer.NumElements());
      if (!count || *count <= 0) {
        Fail(StrCat("Allocate of ", n->buffer->name, " needs a positive constant shape"));
        return;
      }
      auto* arr = llvm::ArrayType::get(MemTypeOf(n->buffer->dtype), *count);
      const uint64_t bytes = mod_->getDataLayout().getTypeAllocSize(arr);
      if (bytes <= kMaxStackScratchBytes) {
        llvm::Value* p = EntryAlloca(arr, 64, n->buffer->name);
        BindBuffer(n->buffer, p);
        EmitStmt(n->body);
        return;
      }
      // Too large for the stack: the runtime's per-thread workspace, held
      // for the Allocate's scope.
      llvm::FunctionCallee alloc = mod_->getOrInsertFunction(
          "kiln_workspace_alloc", llvm::FunctionType::get(ptr_, {i64_}, false));
      llvm::FunctionCallee release = mod_->getOrInsertFunction(
          "kiln_workspace_free",
          llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {ptr_}, false));
      llvm::CallInst* p =
          b_.CreateCall(alloc, {llvm::ConstantInt::get(i64_, bytes)}, n->buffer->name);
      p->addRetAttr(llvm::Attribute::NoAlias);
      p->addRetAttr(llvm::Attribute::getWithAlignment(ctx_, llvm::Align(64)));
      p->addRetAttr(llvm::Attribute::NonNull);
      BindBuffer(n->buffer, p);
      EmitStmt(n->body);
      b_.CreateCall(release, {p});
      return;
    }
    case StmtKind::kLetStmt: {
      const auto* n = s.to<LetStmtNode>();
      llvm::Value* v = EmitExpr(n->value);
      v->setName(n->var->name);
      vars_[n->var.operator->()] = v;
      EmitStmt(n->body);
      return;
    }
    case StmtKind::kEvaluate:
      EmitExpr(s.to<EvaluateNode>()->value);
      return;
  }
}

void CodeGen::EmitSerialFor(const ForNode* n) {
  llvm::Type* ty = TypeOf(n->loop_var.dtype());
  llvm::Value* mn = b_.CreateSExtOrTrunc(EmitExpr(n->min), ty);
  llvm::Value* ext = b_.CreateSExtOrTrunc(EmitExpr(n->extent), ty);
  llvm::Value* end = b_.CreateAdd(mn, ext, "", false, true);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, "for.head." + n->loop_var->name, fn_);
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body." + n->loop_var->name, fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.end." + n->loop_var->name, fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* iv = b_.CreatePHI(ty, 2, n->loop_var->name);
  iv->addIncoming(mn, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(iv, end), body, exit);
  b_.SetInsertPoint(body);
  vars_[n->loop_var.operator->()] = iv;
  EmitStmt(n->body);
  llvm::Value* next = b_.CreateAdd(iv, llvm::ConstantInt::get(ty, 1), "", true, true);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(head);
  b_.SetInsertPoint(exit);
}

void CodeGen::EmitParallelFor(const ForNode* n) {
  RefCollector refs;
  refs.VisitStmt(n->body);
  // Captured: loop min, free scalar vars, buffer pointers.
  std::vector<std::pair<const VarNode*, llvm::Value*>> cap_vars;
  for (const VarNode* v : refs.vars) {
    if (v == n->loop_var.operator->()) continue;
    auto it = vars_.find(v);
    if (it != vars_.end()) cap_vars.push_back(*it);
  }
  std::vector<std::pair<const BufferNode*, llvm::Value*>> cap_bufs;
  for (const BufferNode* bn : refs.bufs) {
    auto it = bufs_.find(bn);
    if (it != bufs_.end()) cap_bufs.push_back(*it);
  }
  llvm::Type* ity = TypeOf(n->loop_var.dtype());
  llvm::Value* mn = b_.CreateSExtOrTrunc(EmitExpr(n->min), ity);
  llvm::Value* ext = b_.CreateSExtOrTrunc(EmitExpr(n->extent), i64_);

  std::vector<llvm::Type*> fields = {ity};
  for (auto& [v, val] : cap_vars) fields.push_back(val->getType());
  for (auto& [bn, val] : cap_bufs) fields.push_back(ptr_);
  auto* st = llvm::StructType::get(ctx_, fields);
  llvm::AllocaInst* ctx = EntryAlloca(st, 8, "par.ctx");
  {
    std::vector<llvm::Value*> vals = {mn};
    for (auto& [v, val] : cap_vars) vals.push_back(val);
    for (auto& [bn, val] : cap_bufs) vals.push_back(val);
    for (size_t k = 0; k < vals.size(); ++k)
      b_.CreateStore(vals[k], b_.CreateStructGEP(st, ctx, k));
  }

  std::string fname = StrCat(name_, ".par", par_count_++);
  // impl(i64 i, fields...)
  std::vector<llvm::Type*> impl_params = {i64_};
  impl_params.insert(impl_params.end(), fields.begin(), fields.end());
  auto* impl = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), impl_params, false),
      llvm::Function::InternalLinkage, fname + ".impl", mod_);
  MarkImpl(impl);
  size_t buf_arg0 = 2 + cap_vars.size();
  for (size_t k = 0; k < cap_bufs.size(); ++k) {
    impl->addParamAttr(buf_arg0 + k, llvm::Attribute::NoAlias);
    impl->addParamAttr(buf_arg0 + k, llvm::Attribute::NoCapture);
  }
  // The trampoline, the function kiln_parallel_for calls.
  auto* body_fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {i64_, ptr_}, false),
      llvm::Function::InternalLinkage, fname, mod_);
  body_fn->addFnAttr(llvm::Attribute::NoUnwind);

  // Save this function's state and emit the impl.
  auto saved_ip = b_.saveIP();
  llvm::Function* saved_fn = fn_;
  auto saved_vars = vars_;
  auto saved_bufs = bufs_;
  ++parallel_depth_;
  fn_ = impl;
  vars_.clear();
  bufs_.clear();
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", impl));
  llvm::Value* i = b_.CreateSExtOrTrunc(impl->getArg(0), ity);
  vars_[n->loop_var.operator->()] =
      b_.CreateAdd(impl->getArg(1), i, n->loop_var->name, false, true);
  for (size_t k = 0; k < cap_vars.size(); ++k) vars_[cap_vars[k].first] = impl->getArg(2 + k);
  for (size_t k = 0; k < cap_bufs.size(); ++k) {
    llvm::Value* p = impl->getArg(buf_arg0 + k);
    bufs_[cap_bufs[k].first] = p;
    vars_[cap_bufs[k].first->data.operator->()] = p;
  }
  EmitStmt(n->body);
  b_.CreateRetVoid();

  // Trampoline: unpack ctx, call impl.
  fn_ = body_fn;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body_fn));
  std::vector<llvm::Value*> call_args = {body_fn->getArg(0)};
  for (size_t k = 0; k < fields.size(); ++k) {
    call_args.push_back(b_.CreateLoad(fields[k], b_.CreateStructGEP(st, body_fn->getArg(1), k)));
  }
  b_.CreateCall(impl, call_args);
  b_.CreateRetVoid();

  --parallel_depth_;
  fn_ = saved_fn;
  vars_ = std::move(saved_vars);
  bufs_ = std::move(saved_bufs);
  b_.restoreIP(saved_ip);

  llvm::FunctionCallee pf = mod_->getOrInsertFunction(
      "kiln_parallel_for",
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {i64_, ptr_, ptr_}, false));
  b_.CreateCall(pf, {ext, body_fn, ctx});
}

}  // namespace detail

absl::Status EmitKernel(const PrimFunc& func, llvm::Module* module) {
  if (func.name.empty()) return absl::InvalidArgumentError("kernel without a name");
  if (module->getFunction(func.name) != nullptr) {
    return absl::InvalidArgumentError(StrCat("duplicate kernel name ", func.name));
  }
  for (const Buffer& b : func.params) {
    if (!b)
      return absl::InvalidArgumentError(
          StrCat("kernel ", func.name, " has an undefined parameter"));
  }
  if (!func.body.defined())
    return absl::InvalidArgumentError(StrCat("kernel ", func.name, " has no body"));
  detail::CodeGen cg(module);
  return cg.EmitKernel(func);
}

}  // namespace kiln::compiler::codegen
