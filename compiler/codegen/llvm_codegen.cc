#include "compiler/codegen/llvm_codegen.h"

#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "deploy/str.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
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

class CodeGen {
 public:
  CodeGen(llvm::Module* m) : mod_(m), ctx_(m->getContext()), b_(ctx_) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(fmf);
    i32_ = llvm::Type::getInt32Ty(ctx_);
    i64_ = llvm::Type::getInt64Ty(ctx_);
    ptr_ = llvm::PointerType::get(ctx_, 0);
  }

  absl::Status EmitKernel(const PrimFunc& f) {
    name_ = f.name;
    // impl: int32 (ptr noalias, ...)
    std::vector<llvm::Type*> ptypes(f.params.size(), ptr_);
    auto* impl_ty = llvm::FunctionType::get(i32_, ptypes, false);
    auto* impl =
        llvm::Function::Create(impl_ty, llvm::Function::InternalLinkage, f.name + ".impl", mod_);
    impl->addFnAttr(llvm::Attribute::AlwaysInline);
    impl->addFnAttr(llvm::Attribute::NoUnwind);
    SetTargetAttrs(impl);
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
    SetTargetAttrs(wrap);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", wrap));
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < f.params.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(ptr_, wrap->getArg(0), i);
      args.push_back(b_.CreateAlignedLoad(ptr_, slot, llvm::Align(8), f.params[i]->name));
    }
    b_.CreateRet(b_.CreateCall(impl, args));
    return status_;
  }

 private:
  // ----- helpers
  void Fail(std::string msg) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(StrCat("codegen of ", name_, ": ", msg));
  }

  void SetTargetAttrs(llvm::Function* f) {
    // The module's target machine decides cpu/features; nothing per function.
    (void)f;
  }

  llvm::Type* TypeOf(DataType t) {
    llvm::Type* e = nullptr;
    switch (t.code) {
      case TypeCode::kInt:
        e = llvm::Type::getIntNTy(ctx_, t.bits);
        break;
      case TypeCode::kBool:
        e = llvm::Type::getInt1Ty(ctx_);
        break;
      case TypeCode::kHandle:
        e = ptr_;
        break;
      case TypeCode::kFloat:
        e = t.bits == 64   ? llvm::Type::getDoubleTy(ctx_)
            : t.bits == 16 ? llvm::Type::getHalfTy(ctx_)
                           : llvm::Type::getFloatTy(ctx_);
        break;
    }
    return t.lanes > 1 ? llvm::FixedVectorType::get(e, t.lanes) : e;
  }

  void BindBuffer(const Buffer& b, llvm::Value* ptr) {
    bufs_[b.get()] = ptr;
    vars_[b->data.operator->()] = ptr;
  }

  llvm::Value* BufferPtr(const Buffer& b) {
    auto it = bufs_.find(b.get());
    if (it == bufs_.end()) {
      Fail(StrCat("buffer ", b->name, " is neither a parameter nor allocated"));
      return llvm::PoisonValue::get(ptr_);
    }
    return it->second;
  }

  llvm::AllocaInst* EntryAlloca(llvm::Type* ty, uint64_t align, const std::string& name) {
    llvm::BasicBlock& entry = fn_->getEntryBlock();
    llvm::IRBuilder<> eb(&entry, entry.begin());
    auto* a = eb.CreateAlloca(ty, nullptr, name);
    a->setAlignment(llvm::Align(align));
    return a;
  }

  llvm::Value* Splat(int lanes, llvm::Value* v) {
    return lanes > 1 && !v->getType()->isVectorTy() ? b_.CreateVectorSplat(lanes, v) : v;
  }

  // ----- expressions
  llvm::Value* EmitExpr(const Expr& e) {
    if (IsBinary(e.kind())) return EmitBinary(static_cast<const BinaryNode*>(e.get()));
    switch (e.kind()) {
      case ExprKind::kIntImm:
        return llvm::ConstantInt::get(TypeOf(e.dtype()), e.to<IntImmNode>()->value, true);
      case ExprKind::kFloatImm:
        return llvm::ConstantFP::get(TypeOf(e.dtype()), e.to<FloatImmNode>()->value);
      case ExprKind::kVar: {
        auto it = vars_.find(e.to<VarNode>());
        if (it == vars_.end()) {
          Fail(StrCat("unbound variable ", e.to<VarNode>()->name));
          return llvm::PoisonValue::get(TypeOf(e.dtype()));
        }
        return it->second;
      }
      case ExprKind::kNot:
        return b_.CreateNot(EmitExpr(e.to<NotNode>()->a));
      case ExprKind::kSelect: {
        const auto* n = e.to<SelectNode>();
        llvm::Value* c = EmitExpr(n->cond);
        llvm::Value* t = EmitExpr(n->true_value);
        llvm::Value* f = EmitExpr(n->false_value);
        return b_.CreateSelect(c, t, f);
      }
      case ExprKind::kCast:
        return EmitCast(e.dtype(), e.to<CastNode>()->value);
      case ExprKind::kBroadcast: {
        const auto* n = e.to<BroadcastNode>();
        return b_.CreateVectorSplat(n->lanes, EmitExpr(n->value));
      }
      case ExprKind::kRamp: {
        const auto* n = e.to<RampNode>();
        llvm::Value* base = b_.CreateVectorSplat(n->lanes, EmitExpr(n->base));
        llvm::Value* stride = b_.CreateVectorSplat(n->lanes, EmitExpr(n->stride));
        std::vector<llvm::Constant*> steps;
        llvm::Type* et = TypeOf(n->base.dtype());
        for (int i = 0; i < n->lanes; ++i) steps.push_back(llvm::ConstantInt::get(et, i));
        return b_.CreateAdd(base, b_.CreateMul(stride, llvm::ConstantVector::get(steps)));
      }
      case ExprKind::kBufferLoad:
        return EmitLoad(e.to<BufferLoadNode>());
      case ExprKind::kCall:
        return EmitCall(e.to<CallNode>());
      case ExprKind::kReduce:
        Fail("a Reduce node reached code generation (lower the compute first)");
        return llvm::PoisonValue::get(TypeOf(e.dtype()));
      case ExprKind::kLet: {
        const auto* n = e.to<LetNode>();
        llvm::Value* v = EmitExpr(n->value);
        const VarNode* var = n->var.operator->();
        auto saved = vars_.find(var) != vars_.end() ? vars_[var] : nullptr;
        vars_[var] = v;
        llvm::Value* r = EmitExpr(n->body);
        if (saved)
          vars_[var] = saved;
        else
          vars_.erase(var);
        return r;
      }
      default:
        break;
    }
    Fail(StrCat("unsupported expression kind ", static_cast<int>(e.kind())));
    return llvm::PoisonValue::get(TypeOf(e.dtype()));
  }

  llvm::Value* EmitBinary(const BinaryNode* n) {
    llvm::Value* a = EmitExpr(n->a);
    llvm::Value* b = EmitExpr(n->b);
    DataType t = n->a.dtype();
    bool fp = t.is_float();
    switch (n->kind) {
      case ExprKind::kAdd:
        return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b, "", false, t.is_int());
      case ExprKind::kSub:
        return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b, "", false, t.is_int());
      case ExprKind::kMul:
        return fp ? b_.CreateFMul(a, b) : b_.CreateMul(a, b, "", false, t.is_int());
      case ExprKind::kDiv:
        return fp ? b_.CreateFDiv(a, b) : b_.CreateSDiv(a, b);
      case ExprKind::kMod:
        return fp ? b_.CreateFRem(a, b) : b_.CreateSRem(a, b);
      case ExprKind::kFloorDiv: {
        if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
        // q = a / b (truncating); subtract 1 when the remainder is nonzero
        // and its sign differs from the divisor's.
        llvm::Value* q = b_.CreateSDiv(a, b);
        llvm::Value* r = b_.CreateSRem(a, b);
        llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
        llvm::Value* adjust =
            b_.CreateAnd(b_.CreateICmpNE(r, zero),
                         b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(b, zero)));
        return b_.CreateSub(q, b_.CreateZExt(adjust, a->getType()));
      }
      case ExprKind::kFloorMod: {
        if (fp) {
          llvm::Value* q = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
          return b_.CreateFSub(a, b_.CreateFMul(q, b));
        }
        llvm::Value* r = b_.CreateSRem(a, b);
        llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
        llvm::Value* adjust =
            b_.CreateAnd(b_.CreateICmpNE(r, zero),
                         b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(b, zero)));
        return b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
      }
      case ExprKind::kMin:
        if (fp) return b_.CreateSelect(b_.CreateFCmpOLT(a, b), a, b);
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, b);
      case ExprKind::kMax:
        if (fp) return b_.CreateSelect(b_.CreateFCmpOGT(a, b), a, b);
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, b);
      case ExprKind::kEQ:
        return fp ? b_.CreateFCmpOEQ(a, b) : b_.CreateICmpEQ(a, b);
      case ExprKind::kNE:
        return fp ? b_.CreateFCmpUNE(a, b) : b_.CreateICmpNE(a, b);
      case ExprKind::kLT:
        return fp ? b_.CreateFCmpOLT(a, b) : b_.CreateICmpSLT(a, b);
      case ExprKind::kLE:
        return fp ? b_.CreateFCmpOLE(a, b) : b_.CreateICmpSLE(a, b);
      case ExprKind::kGT:
        return fp ? b_.CreateFCmpOGT(a, b) : b_.CreateICmpSGT(a, b);
      case ExprKind::kGE:
        return fp ? b_.CreateFCmpOGE(a, b) : b_.CreateICmpSGE(a, b);
      case ExprKind::kAnd:
        return b_.CreateAnd(a, b);
      case ExprKind::kOr:
        return b_.CreateOr(a, b);
      default:
        break;
    }
    Fail("unknown binary kind");
    return a;
  }

  llvm::Value* EmitCast(DataType to, const Expr& from_e) {
    llvm::Value* v = EmitExpr(from_e);
    DataType from = from_e.dtype();
    llvm::Type* ty = TypeOf(to);
    if (from.lanes != to.lanes) v = Splat(to.lanes, v);
    if (to.is_bool()) {
      llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
      return from.is_float() ? b_.CreateFCmpUNE(v, zero) : b_.CreateICmpNE(v, zero);
    }
    if (to.is_float()) {
      if (from.is_float()) return b_.CreateFPCast(v, ty);
      return from.is_bool() ? b_.CreateUIToFP(v, ty) : b_.CreateSIToFP(v, ty);
    }
    if (to.is_int()) {
      if (from.is_float()) return b_.CreateFPToSI(v, ty);
      if (from.is_bool()) return b_.CreateZExt(v, ty);
      if (from.code == TypeCode::kHandle) return b_.CreatePtrToInt(v, ty);
      return b_.CreateSExtOrTrunc(v, ty);
    }
    Fail(StrCat("unsupported cast from ", ToString(from), " to ", ToString(to)));
    return llvm::PoisonValue::get(ty);
  }

  // The element pointer(s) of an access: a scalar pointer for a scalar index
  // or a contiguous Ramp (`*contiguous`), else a vector of pointers.
  llvm::Value* Address(const Buffer& buf, const std::vector<Expr>& indices, bool* contiguous) {
    *contiguous = false;
    if (indices.size() != 1) {
      Fail(StrCat("access to ", buf->name, " has ", indices.size(),
                  " indices; flatten storage first"));
      return llvm::PoisonValue::get(ptr_);
    }
    llvm::Type* et = TypeOf(buf->dtype);
    llvm::Value* base = BufferPtr(buf);
    const Expr& idx = indices[0];
    if (const auto* r = idx.as<RampNode>()) {
      if (AsConstInt(r->stride) == 1) {
        *contiguous = true;
        return b_.CreateInBoundsGEP(et, base, EmitExpr(r->base));
      }
    }
    if (!idx.dtype().is_vector()) {
      *contiguous = true;
      return b_.CreateInBoundsGEP(et, base, EmitExpr(idx));
    }
    return b_.CreateInBoundsGEP(et, base, EmitExpr(idx));
  }

  llvm::Align ElemAlign(const Buffer& buf) { return llvm::Align(std::max(1, buf->dtype.bytes())); }

  llvm::Value* EmitLoad(const BufferLoadNode* n) {
    bool contiguous = false;
    llvm::Value* addr = Address(n->buffer, n->indices, &contiguous);
    llvm::Type* ty = TypeOf(n->dtype);
    llvm::Align al = ElemAlign(n->buffer);
    if (contiguous) {
      // A scalar index with a vector result cannot happen (Load takes lanes
      // from the index), so `ty` matches the access width.
      return b_.CreateAlignedLoad(ty, addr, al);
    }
    return b_.CreateMaskedGather(ty, addr, al);
  }

  void EmitStore(const BufferStoreNode* n) {
    llvm::Value* v = EmitExpr(n->value);
    bool contiguous = false;
    llvm::Value* addr = Address(n->buffer, n->indices, &contiguous);
    llvm::Align al = ElemAlign(n->buffer);
    int idx_lanes = n->indices.empty() ? 1 : n->indices[0].dtype().lanes;
    if (idx_lanes != n->value.dtype().lanes) {
      if (idx_lanes > 1 && n->value.dtype().lanes == 1) {
        v = Splat(idx_lanes, v);
      } else {
        Fail(StrCat("store of ", ToString(n->value.dtype()), " with a ", idx_lanes,
                    "-lane index into ", n->buffer->name));
        return;
      }
    }
    if (contiguous) {
      b_.CreateAlignedStore(v, addr, al);
    } else {
      b_.CreateMaskedScatter(v, addr, al);
    }
  }

  llvm::Value* EmitCall(const CallNode* n) {
    std::vector<llvm::Value*> args;
    for (const Expr& a : n->args) args.push_back(EmitExpr(a));
    llvm::Type* ty = TypeOf(n->dtype);
    static const std::unordered_map<std::string, llvm::Intrinsic::ID> kIntrinsics = {
        {"exp", llvm::Intrinsic::exp},     {"exp2", llvm::Intrinsic::exp2},
        {"log", llvm::Intrinsic::log},     {"log2", llvm::Intrinsic::log2},
        {"sqrt", llvm::Intrinsic::sqrt},   {"fabs", llvm::Intrinsic::fabs},
        {"floor", llvm::Intrinsic::floor}, {"ceil", llvm::Intrinsic::ceil},
        {"round", llvm::Intrinsic::round}, {"trunc", llvm::Intrinsic::trunc},
        {"fma", llvm::Intrinsic::fma},     {"fmax", llvm::Intrinsic::maxnum},
        {"fmin", llvm::Intrinsic::minnum}, {"pow", llvm::Intrinsic::pow},
        {"sin", llvm::Intrinsic::sin},     {"cos", llvm::Intrinsic::cos},
    };
    auto arity = [&](size_t k) {
      if (args.size() == k) return true;
      Fail(StrCat("intrinsic ", n->name, " takes ", k, " arguments, got ", args.size()));
      return false;
    };
    for (llvm::Value*& a : args) a = Splat(n->dtype.lanes, a);
    if (n->name == "tanh") {  // 1 - 2 / (exp(2x) + 1)
      if (!arity(1)) return llvm::PoisonValue::get(ty);
      llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
      llvm::Value* two = llvm::ConstantFP::get(ty, 2.0);
      llvm::Value* e = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, b_.CreateFMul(two, args[0]));
      return b_.CreateFSub(one, b_.CreateFDiv(two, b_.CreateFAdd(e, one)));
    }
    if (n->name == "sigmoid") {  // 1 / (1 + exp(-x))
      if (!arity(1)) return llvm::PoisonValue::get(ty);
      llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
      llvm::Value* e = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, b_.CreateFNeg(args[0]));
      return b_.CreateFDiv(one, b_.CreateFAdd(one, e));
    }
    auto it = kIntrinsics.find(n->name);
    if (it == kIntrinsics.end()) {
      Fail(StrCat("unknown intrinsic '", n->name, "'"));
      return llvm::PoisonValue::get(ty);
    }
    if (!n->dtype.is_float()) {
      Fail(StrCat("intrinsic ", n->name, " of non-float type ", ToString(n->dtype)));
      return llvm::PoisonValue::get(ty);
    }
    size_t want = it->second == llvm::Intrinsic::fma ? 3
                  : (it->second == llvm::Intrinsic::maxnum ||
                     it->second == llvm::Intrinsic::minnum || it->second == llvm::Intrinsic::pow)
                      ? 2
                      : 1;
    if (!arity(want)) return llvm::PoisonValue::get(ty);
    return b_.CreateIntrinsic(it->second, {ty}, args);
  }

  // ----- statements
  void EmitStmt(const Stmt& s) {
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
        auto count = AsConstInt(n->buffer.NumElements());
        if (!count || *count <= 0) {
          Fail(StrCat("Allocate of ", n->buffer->name, " needs a positive constant shape"));
          return;
        }
        auto* arr = llvm::ArrayType::get(TypeOf(n->buffer->dtype), *count);
        llvm::Value* p = EntryAlloca(arr, 64, n->buffer->name);
        BindBuffer(n->buffer, p);
        EmitStmt(n->body);
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

  void EmitSerialFor(const ForNode* n) {
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

  // Outlines the loop body into `void <name>.par<N>(i64 i, ptr ctx)`, which
  // unpacks the captured values from ctx and calls an always-inlined
  // `<name>.par<N>.impl` whose buffer pointers are noalias.
  void EmitParallelFor(const ForNode* n) {
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
    impl->addFnAttr(llvm::Attribute::AlwaysInline);
    impl->addFnAttr(llvm::Attribute::NoUnwind);
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

  llvm::Module* mod_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  llvm::Function* fn_ = nullptr;
  std::string name_;
  std::unordered_map<const VarNode*, llvm::Value*> vars_;
  std::unordered_map<const BufferNode*, llvm::Value*> bufs_;
  int parallel_depth_ = 0;
  int par_count_ = 0;
  absl::Status status_;
};

}  // namespace

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
  CodeGen cg(module);
  return cg.EmitKernel(func);
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
  pto.LoopUnrolling = true;
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
