#include "compiler/codegen/llvm_codegen.h"

#include <cmath>
#include <iterator>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/str.h"
#include "compiler/codegen/llvm_amx.h"
#include "compiler/codegen/llvm_intrinsics.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/lower/ir_util.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen {

using namespace kiln::ir;  // NOLINT

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

// A float constant (scalar or broadcast) or nothing.
std::optional<double> ConstFloat(const Expr& e) {
  if (const auto* b = e.as<BroadcastNode>()) return ConstFloat(b->value);
  if (const auto* f = e.as<FloatImmNode>()) return f->value;
  return std::nullopt;
}

// Whether float `e` is already within the range of integer type `to` with
// NaN mapped to 0: select(isnan(x), 0, max(min(x, hi), lo)) (either order)
// with [lo, hi] inside the type's range, as the elementwise cast writes it
// (compiler/ops/elementwise.cc) for targets whose conversion does not
// saturate. The conversion then needs no clamp of its own.
bool InRange(const Expr& e, DataType to) {
  if (!e.dtype().is_float() || !to.is_integer() || to.bits > 16) return false;
  const auto* sel = e.as<SelectNode>();
  const auto* nan = sel ? sel->cond.as<CallNode>() : nullptr;
  if (!nan || nan->name != "isnan" || ConstFloat(sel->true_value) != 0.0) return false;
  const double tlo = to.is_uint() ? 0.0 : -std::ldexp(1.0, to.bits - 1);
  const double thi = to.is_uint() ? std::ldexp(1.0, to.bits) - 1 : std::ldexp(1.0, to.bits - 1) - 1;
  std::optional<double> lo, hi;
  const Expr& f = sel->false_value;
  if (const auto* mx = f.as<MaxNode>()) {
    const auto* mn = mx->a.as<MinNode>();
    lo = ConstFloat(mx->b);
    if (mn) hi = ConstFloat(mn->b);
  } else if (const auto* mn = f.as<MinNode>()) {
    const auto* mx = mn->a.as<MaxNode>();
    hi = ConstFloat(mn->b);
    if (mx) lo = ConstFloat(mx->b);
  }
  return lo && hi && *lo >= tlo && *hi <= thi;
}

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

 private:
  // ----- helpers
  void Fail(std::string msg) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(StrCat("codegen of ", name_, ": ", msg));
  }

  // A function holding a kernel's code (the kernel's or a parallel body's
  // .impl): called, not inlined (noalias parameters carry the same alias
  // information, and the inliner cloned every body); marked for the SLP
  // vectorizer when the kernel asks for it, left unoptimized when it runs
  // once (PrimFunc::run_once). The module's target machine decides cpu and
  // features, nothing is set per function.
  void MarkImpl(llvm::Function* f) {
    f->addFnAttr(llvm::Attribute::NoInline);
    f->addFnAttr(llvm::Attribute::NoUnwind);
    if (slp_vectorize_) f->addFnAttr(kSlpVectorizeAttribute);
    if (run_once_) f->addFnAttr(llvm::Attribute::OptimizeNone);
  }

  llvm::Type* TypeOf(DataType t) {
    llvm::Type* e = nullptr;
    switch (t.code) {
      case TypeCode::kInt:
      case TypeCode::kUInt:
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

  // The in-memory type of a value of type `t`: a bool is one byte (0 or 1).
  llvm::Type* MemTypeOf(DataType t) {
    if (!t.is_bool()) return TypeOf(t);
    llvm::Type* e = llvm::Type::getInt8Ty(ctx_);
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
  llvm::Value* Poison(DataType t) { return llvm::PoisonValue::get(TypeOf(t)); }

  llvm::Value* EmitExpr(const Expr& e) {
    if (IsBinary(e.kind())) return EmitBinary(static_cast<const BinaryNode*>(e.get()));
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        DataType t = e.dtype();
        if (!t.is_integer() && !t.is_bool()) break;
        int64_t v = lower::WrapInt(e.to<IntImmNode>()->value, t);
        llvm::APInt ap(64, static_cast<uint64_t>(v));
        return llvm::ConstantInt::get(TypeOf(t), ap.zextOrTrunc(t.is_bool() ? 1 : t.bits));
      }
      case ExprKind::kFloatImm:
        return llvm::ConstantFP::get(TypeOf(e.dtype()), e.to<FloatImmNode>()->value);
      case ExprKind::kVar: {
        auto it = vars_.find(e.to<VarNode>());
        if (it == vars_.end()) {
          Fail(StrCat("unbound variable ", e.to<VarNode>()->name));
          return Poison(e.dtype());
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
        // A vector condition over scalar arms selects lane by lane.
        int lanes = n->cond.dtype().lanes;
        if (lanes > 1) {
          t = Splat(lanes, t);
          f = Splat(lanes, f);
          if (t->getType() != f->getType() ||
              llvm::cast<llvm::FixedVectorType>(t->getType())->getNumElements() !=
                  static_cast<unsigned>(lanes)) {
            Fail(StrCat("Select of ", ToString(n->true_value.dtype()), " with a ",
                        ToString(n->cond.dtype()), " condition"));
            return Poison(e.dtype());
          }
        }
        return b_.CreateSelect(c, t, f);
      }
      case ExprKind::kCast: {
        const auto* n = e.to<CastNode>();
        return CastValue(EmitExpr(n->value), n->value.dtype(), e.dtype(),
                         InRange(n->value, e.dtype()));
      }
      case ExprKind::kBroadcast: {
        const auto* n = e.to<BroadcastNode>();
        return b_.CreateVectorSplat(n->lanes, EmitExpr(n->value));
      }
      case ExprKind::kRamp: {
        const auto* n = e.to<RampNode>();
        DataType bt = n->base.dtype();
        llvm::Value* base = b_.CreateVectorSplat(n->lanes, EmitExpr(n->base));
        llvm::Value* stride = b_.CreateVectorSplat(n->lanes, EmitExpr(n->stride));
        std::vector<llvm::Constant*> steps;
        llvm::Type* et = TypeOf(bt);
        if (bt.is_float()) {
          for (int i = 0; i < n->lanes; ++i) steps.push_back(llvm::ConstantFP::get(et, i));
          return b_.CreateFAdd(base, b_.CreateFMul(stride, llvm::ConstantVector::get(steps)));
        }
        if (!bt.is_integer()) {
          Fail(StrCat("Ramp of ", ToString(bt)));
          return Poison(e.dtype());
        }
        for (int i = 0; i < n->lanes; ++i) steps.push_back(llvm::ConstantInt::get(et, i));
        return b_.CreateAdd(base, b_.CreateMul(stride, llvm::ConstantVector::get(steps)));
      }
      case ExprKind::kBufferLoad:
        return EmitLoad(e.to<BufferLoadNode>());
      case ExprKind::kCall:
        return EmitCall(e.to<CallNode>());
      case ExprKind::kReduce:
        Fail("a Reduce node reached code generation (lower the compute first)");
        return Poison(e.dtype());
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
    Fail(StrCat("unsupported expression kind ", static_cast<int>(e.kind()), " of type ",
                ToString(e.dtype())));
    return Poison(e.dtype());
  }

  // A divisor that needs no guard: a constant (or a broadcast one) that is
  // not 0, nor -1 for a signed type.
  static bool SafeDivisor(const Expr& b, bool is_signed) {
    Expr c = b;
    if (const auto* bc = b.as<BroadcastNode>()) c = bc->value;
    auto v = AsConstInt(c);
    if (!v) return false;
    int64_t w = lower::WrapInt(*v, c.dtype());
    return w != 0 && !(is_signed && w == -1);
  }

  // Integer kDiv / kMod / kFloorDiv / kFloorMod. A zero divisor gives 0 and
  // INT_MIN / -1 gives INT_MIN (wrapping) instead of undefined behaviour:
  // unless the divisor is a safe constant, it is replaced by 1 where it is 0
  // (or -1) and the quotient patched afterwards.
  llvm::Value* IntDivMod(ExprKind kind, llvm::Value* a, llvm::Value* b, const Expr& b_expr,
                         bool is_signed) {
    llvm::Type* ty = a->getType();
    llvm::Value* zero = llvm::Constant::getNullValue(ty);
    llvm::Value* one = llvm::ConstantInt::get(ty, 1);
    llvm::Value* b_zero = nullptr;
    llvm::Value* b_minus1 = nullptr;
    llvm::Value* d = b;
    if (!SafeDivisor(b_expr, is_signed)) {
      b_zero = b_.CreateICmpEQ(b, zero);
      llvm::Value* bad = b_zero;
      if (is_signed) {
        b_minus1 = b_.CreateICmpEQ(b, llvm::Constant::getAllOnesValue(ty));
        bad = b_.CreateOr(b_zero, b_minus1);
      }
      d = b_.CreateSelect(bad, one, b);
    }
    bool want_div = kind == ExprKind::kDiv || kind == ExprKind::kFloorDiv;
    if (!is_signed) {  // floor and truncation agree
      if (!want_div) return b_.CreateURem(a, d);
      llvm::Value* q = b_.CreateUDiv(a, d);
      return b_zero ? b_.CreateSelect(b_zero, zero, q) : q;
    }
    llvm::Value* r = b_.CreateSRem(a, d);  // 0 where d was patched
    llvm::Value* adjust = nullptr;
    if (kind == ExprKind::kFloorDiv || kind == ExprKind::kFloorMod) {
      // Truncation rounds toward zero; floor differs when the remainder is
      // nonzero and its sign differs from the divisor's.
      adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                            b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(d, zero)));
    }
    if (kind == ExprKind::kMod) return r;
    if (kind == ExprKind::kFloorMod) return b_.CreateSelect(adjust, b_.CreateAdd(r, d), r);
    llvm::Value* q = b_.CreateSDiv(a, d);
    if (b_minus1) q = b_.CreateSelect(b_minus1, b_.CreateSub(zero, a), q);
    if (adjust) q = b_.CreateSub(q, b_.CreateZExt(adjust, ty));
    return b_zero ? b_.CreateSelect(b_zero, zero, q) : q;
  }

  llvm::Value* EmitBinary(const BinaryNode* n) {
    // acc + dot4(x, y): one instruction that accumulates (vpdpbusd).
    if (n->kind == ExprKind::kAdd && n->dtype.is_int() && n->dtype.bits == 32) {
      for (const auto& [acc, call] : {std::pair{n->a, n->b}, std::pair{n->b, n->a}}) {
        const auto* c = call.as<CallNode>();
        if (c == nullptr || (c->name != "dot4" && c->name != "dot4_vnni" && c->name != "dot2") ||
            c->args.size() != 2 || c->args[0].dtype() != n->dtype ||
            c->args[1].dtype() != n->dtype) {
          continue;
        }
        llvm::Value* x = EmitExpr(acc);
        return EmitDot4(b_, mod_, c->name, n->dtype, x, EmitExpr(c->args[0]), EmitExpr(c->args[1]));
      }
    }
    // acc + dot2_bf16(x, y): one instruction that accumulates (vdpbf16ps).
    if (n->kind == ExprKind::kAdd && n->dtype.is_float() && n->dtype.bits == 32) {
      for (const auto& [acc, call] : {std::pair{n->a, n->b}, std::pair{n->b, n->a}}) {
        const auto* c = call.as<CallNode>();
        if (c == nullptr || c->name != "dot2_bf16" || !Bf16DotArgs(c, n->dtype)) continue;
        llvm::Value* x = EmitExpr(acc);
        return EmitDotBf16(b_, mod_, n->dtype, x, EmitExpr(c->args[0]), EmitExpr(c->args[1]));
      }
    }
    llvm::Value* a = EmitExpr(n->a);
    llvm::Value* b = EmitExpr(n->b);
    DataType t = n->a.dtype();
    if (a->getType() != b->getType()) {
      Fail(StrCat("binary operands of ", ToString(n->a.dtype()), " and ", ToString(n->b.dtype())));
      return Poison(n->dtype);
    }
    if (t.code == TypeCode::kHandle) {
      Fail(StrCat("arithmetic on ", ToString(t)));
      return Poison(n->dtype);
    }
    bool fp = t.is_float();
    bool sgn = t.is_int();  // bool compares and orders as unsigned (false < true)
    // Signed overflow is undefined only for int64 (index arithmetic); data
    // arithmetic on narrower integers wraps, as in ONNX.
    bool nsw = sgn && t.bits >= 64;
    switch (n->kind) {
      case ExprKind::kAdd:
        return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b, "", false, nsw);
      case ExprKind::kSub:
        return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b, "", false, nsw);
      case ExprKind::kMul:
        return fp ? b_.CreateFMul(a, b) : b_.CreateMul(a, b, "", false, nsw);
      case ExprKind::kDiv:
        if (fp) return b_.CreateFDiv(a, b);
        return IntDivMod(n->kind, a, b, n->b, sgn);
      case ExprKind::kMod:
        if (fp) return b_.CreateFRem(a, b);
        return IntDivMod(n->kind, a, b, n->b, sgn);
      case ExprKind::kFloorDiv:
        if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
        return IntDivMod(n->kind, a, b, n->b, sgn);
      case ExprKind::kFloorMod: {
        if (fp) {
          llvm::Value* q = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
          return b_.CreateFSub(a, b_.CreateFMul(q, b));
        }
        return IntDivMod(n->kind, a, b, n->b, sgn);
      }
      case ExprKind::kMin:
        if (fp) return b_.CreateSelect(b_.CreateFCmpOLT(a, b), a, b);
        return b_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a, b);
      case ExprKind::kMax:
        if (fp) return b_.CreateSelect(b_.CreateFCmpOGT(a, b), a, b);
        return b_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a, b);
      case ExprKind::kEQ:
        return fp ? b_.CreateFCmpOEQ(a, b) : b_.CreateICmpEQ(a, b);
      case ExprKind::kNE:
        return fp ? b_.CreateFCmpUNE(a, b) : b_.CreateICmpNE(a, b);
      case ExprKind::kLT:
        return fp ? b_.CreateFCmpOLT(a, b) : sgn ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
      case ExprKind::kLE:
        return fp ? b_.CreateFCmpOLE(a, b) : sgn ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
      case ExprKind::kGT:
        return fp ? b_.CreateFCmpOGT(a, b) : sgn ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
      case ExprKind::kGE:
        return fp ? b_.CreateFCmpOGE(a, b) : sgn ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
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

  // Converts `v` of type `from` to `to` (same lanes, or a scalar `v` that is
  // splat). Float -> integer truncates toward zero and saturates (NaN gives
  // 0) instead of producing poison for out-of-range values.
  // `inside`: v is known to be an integer-type value's saturation already
  // (InRange), so no clamp is needed.
  llvm::Value* CastValue(llvm::Value* v, DataType from, DataType to, bool inside = false) {
    llvm::Type* ty = TypeOf(to);
    if (from.lanes != to.lanes) {
      if (from.lanes != 1) {
        Fail(StrCat("cast from ", ToString(from), " to ", ToString(to)));
        return llvm::PoisonValue::get(ty);
      }
      v = Splat(to.lanes, v);
    }
    if (from == to) return v;
    bool from_unsigned = from.is_uint() || from.is_bool();
    if (to.is_bool()) {
      llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
      // NaN is nonzero: it converts to true, as in C.
      return from.is_float() ? b_.CreateFCmpUNE(v, zero) : b_.CreateICmpNE(v, zero);
    }
    if (from.code == TypeCode::kHandle && to.is_integer()) return b_.CreatePtrToInt(v, ty);
    if (to.is_float()) {
      if (from.is_float()) return b_.CreateFPCast(v, ty);
      if (from.is_integer() || from.is_bool())
        return from_unsigned ? b_.CreateUIToFP(v, ty) : b_.CreateSIToFP(v, ty);
    }
    if (to.is_integer()) {
      if (from.is_float() && to.lanes > 1 && to.bits <= 16) {
        // A vector to 8 or 16 bits: x86 expands fptosi.sat/fptoui.sat of
        // vectors lane by lane (a quantize's epilogue ran 5x slower), so
        // NaN -> 0, clamped to the range (exact in any float type), then
        // through int32.
        // (x86's own max/min, not maxnum/minnum, whose NaN rules cost
        // compares and masked moves: the NaN is gone first.)
        llvm::Type* ft = v->getType();
        llvm::Type* i32v = llvm::FixedVectorType::get(i32_, to.lanes);
        if (inside) return b_.CreateTrunc(b_.CreateFPToSI(v, i32v), ty);
        llvm::Value* zero = llvm::Constant::getNullValue(ft);
        llvm::Constant* lo =
            llvm::ConstantFP::get(ft, to.is_uint() ? 0.0 : -std::ldexp(1.0, to.bits - 1));
        llvm::Constant* hi = llvm::ConstantFP::get(
            ft, to.is_uint() ? std::ldexp(1.0, to.bits) - 1 : std::ldexp(1.0, to.bits - 1) - 1);
        llvm::Value* x = b_.CreateSelect(b_.CreateFCmpUNO(v, v), zero, v);
        x = b_.CreateSelect(b_.CreateFCmpOGT(x, lo), x, lo);
        x = b_.CreateSelect(b_.CreateFCmpOLT(x, hi), x, hi);
        return b_.CreateTrunc(b_.CreateFPToSI(x, i32v), ty);
      }
      if (from.is_float() && from.bits == 32 && to.lanes > 1 && to.bits == 32 && !to.is_uint()) {
        // A vector to int32 alike (the float sums of the int8 depthwise
        // conv): NaN -> 0, clamped below at -2^31 (exact), converted at most
        // 2^31 - 128 (the largest float below 2^31), and 2^31 or more ->
        // INT32_MAX.
        llvm::Type* ft = v->getType();
        llvm::Value* x =
            b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::Constant::getNullValue(ft), v);
        x = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x,
                                     llvm::ConstantFP::get(ft, -std::ldexp(1.0, 31)));
        llvm::Value* big = b_.CreateFCmpOGE(x, llvm::ConstantFP::get(ft, std::ldexp(1.0, 31)));
        x = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x,
                                     llvm::ConstantFP::get(ft, std::ldexp(1.0, 31) - 128));
        return b_.CreateSelect(big, llvm::ConstantInt::get(ty, 0x7fffffff), b_.CreateFPToSI(x, ty));
      }
      if (from.is_float()) {
        return b_.CreateIntrinsic(
            to.is_uint() ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat,
            {ty, v->getType()}, {v});
      }
      if (from.is_integer() || from.is_bool())
        return from_unsigned ? b_.CreateZExtOrTrunc(v, ty) : b_.CreateSExtOrTrunc(v, ty);
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
    if (!indices[0].dtype().is_integer()) {
      Fail(StrCat("access to ", buf->name, " with a ", ToString(indices[0].dtype()), " index"));
      return llvm::PoisonValue::get(ptr_);
    }
    llvm::Type* et = MemTypeOf(buf->dtype.Element());
    llvm::Value* base = BufferPtr(buf);
    const Expr& idx = indices[0];
    if (const auto* r = idx.as<RampNode>()) {
      if (AsConstInt(r->stride) == 1) {
        *contiguous = true;
        return b_.CreateInBoundsGEP(et, base, EmitExpr(r->base));
      }
    }
    if (!idx.dtype().is_vector()) *contiguous = true;
    return b_.CreateInBoundsGEP(et, base, EmitExpr(idx));
  }

  llvm::Align ElemAlign(const Buffer& buf) { return llvm::Align(std::max(1, buf->dtype.bytes())); }

  // x86 (AVX, AVX-512) moves a vector whose lane count is not a power of two
  // (the 14-pixel rows of a 14x14 image, a 13-lane phase column) as one
  // masked access of the next power of two; LLVM would split it into
  // 8 + 4 + 2 pieces. Lanes of 1-2 bytes and other targets keep their width.
  int MemLanes(int lanes, DataType t) const {
    if (lanes <= 2 || (lanes & (lanes - 1)) == 0 || t.bytes() < 4 || t.is_bool() ||
        !llvm::Triple(mod_->getTargetTriple()).isX86()) {
      return lanes;
    }
    return static_cast<int>(llvm::PowerOf2Ceil(static_cast<uint64_t>(lanes)));
  }
  llvm::Constant* FirstLanesMask(int lanes, int wide) {
    std::vector<llvm::Constant*> mask;
    for (int i = 0; i < wide; ++i) mask.push_back(b_.getInt1(i < lanes));
    return llvm::ConstantVector::get(mask);
  }
  static std::vector<int> LaneRange(int lanes, int wide) {
    std::vector<int> idx;
    for (int i = 0; i < wide; ++i) idx.push_back(i < lanes ? i : -1);
    return idx;
  }

  // A Ramp index of constant stride 2..kMaxLoadStride reads its lanes as
  // one wide load of the span they cover (masked past the last lane, which
  // never faults) and a shuffle that keeps every stride-th element: one or
  // two vector loads and a permute instead of a gather (a stride-2
  // convolution reading its input, or a deinterleaving copy).
  static constexpr int64_t kMaxLoadStride = 4;
  llvm::Value* StridedLoad(const BufferLoadNode* n) {
    if (n->indices.size() != 1 || n->dtype.is_bool()) return nullptr;
    const auto* r = n->indices[0].as<RampNode>();
    std::optional<int64_t> stride = r ? AsConstInt(r->stride) : std::nullopt;
    if (!stride || *stride < 2 || *stride > kMaxLoadStride) return nullptr;
    const int lanes = r->lanes, st = static_cast<int>(*stride);
    const int wide = MemLanes(lanes * st, n->dtype), span = (lanes - 1) * st + 1;
    llvm::Type* wty = MemTypeOf(n->dtype.Element().WithLanes(wide));
    llvm::Value* addr = b_.CreateInBoundsGEP(MemTypeOf(n->buffer->dtype.Element()),
                                             BufferPtr(n->buffer), EmitExpr(r->base));
    llvm::Value* all =
        b_.CreateMaskedLoad(wty, addr, ElemAlign(n->buffer), FirstLanesMask(span, wide));
    std::vector<int> keep;
    for (int i = 0; i < lanes; ++i) keep.push_back(i * st);
    return b_.CreateShuffleVector(all, keep);
  }

  llvm::Value* EmitLoad(const BufferLoadNode* n) {
    if (llvm::Value* v = StridedLoad(n)) return v;
    bool contiguous = false;
    llvm::Value* addr = Address(n->buffer, n->indices, &contiguous);
    // A scalar index with a vector result cannot happen (Load takes lanes
    // from the index), so the type matches the access width.
    llvm::Type* mty = MemTypeOf(n->dtype);
    llvm::Align al = ElemAlign(n->buffer);
    const int lanes = n->dtype.lanes, wide = MemLanes(lanes, n->dtype);
    if (contiguous && wide != lanes) {
      llvm::Value* all = b_.CreateMaskedLoad(MemTypeOf(n->dtype.WithLanes(wide)), addr, al,
                                             FirstLanesMask(lanes, wide));
      return b_.CreateShuffleVector(all, LaneRange(lanes, lanes));
    }
    llvm::Value* v = contiguous ? static_cast<llvm::Value*>(b_.CreateAlignedLoad(mty, addr, al))
                                : b_.CreateMaskedGather(mty, addr, al);
    if (n->dtype.is_bool()) v = b_.CreateICmpNE(v, llvm::Constant::getNullValue(mty));
    return v;
  }

  void EmitStore(const BufferStoreNode* n) {
    llvm::Value* v = EmitExpr(n->value);
    bool contiguous = false;
    llvm::Value* addr = Address(n->buffer, n->indices, &contiguous);
    llvm::Align al = ElemAlign(n->buffer);
    int idx_lanes = n->indices.empty() ? 1 : n->indices[0].dtype().lanes;
    DataType vt = n->value.dtype();
    if (idx_lanes != vt.lanes) {
      if (idx_lanes > 1 && vt.lanes == 1) {
        v = Splat(idx_lanes, v);
        vt = vt.WithLanes(idx_lanes);
      } else {
        Fail(StrCat("store of ", ToString(n->value.dtype()), " with a ", idx_lanes,
                    "-lane index into ", n->buffer->name));
        return;
      }
    }
    if (vt.is_bool()) v = b_.CreateZExt(v, MemTypeOf(vt));
    const int wide = MemLanes(vt.lanes, vt);
    if (contiguous && wide != vt.lanes) {
      b_.CreateMaskedStore(b_.CreateShuffleVector(v, LaneRange(vt.lanes, wide)), addr, al,
                           FirstLanesMask(vt.lanes, wide));
    } else if (contiguous) {
      b_.CreateAlignedStore(v, addr, al);
    } else {
      b_.CreateMaskedScatter(v, addr, al);
    }
  }

  // ----- intrinsic calls

  // A call of the C library's `f32` / `f64` (float / double -> same) on
  // every lane of `x` (float16 goes through float).
  // dot2_bf16's arguments: int32 of the call's lanes, returning float32.
  static bool Bf16DotArgs(const CallNode* c, DataType t) {
    if (c->args.size() != 2 || t != DataType::Float32().WithLanes(t.lanes)) return false;
    for (const Expr& a : c->args) {
      if (a.dtype() != DataType::Int32().WithLanes(t.lanes)) return false;
    }
    return true;
  }

  llvm::Value* EmitCall(const CallNode* n) {
    const std::string& name = n->name;
    DataType t = n->dtype;
    llvm::Type* ty = TypeOf(t);
    llvm::Value* poison = llvm::PoisonValue::get(ty);
    for (const Expr& a : n->args) {
      if (a.dtype().lanes != 1 && a.dtype().lanes != t.lanes) {
        Fail(StrCat("a ", ToString(a.dtype()), " argument of ", name, " returning ", ToString(t)));
        return poison;
      }
    }
    if (name == "kiln.address_of") {
      // The footprint's extents after the load are for bound inference.
      const auto* load = n->args.empty() ? nullptr : n->args[0].as<BufferLoadNode>();
      if (load == nullptr || load->dtype.lanes != 1) {
        Fail("kiln.address_of takes a scalar load");
        return poison;
      }
      bool contiguous = false;
      return Address(load->buffer, load->indices, &contiguous);
    }
    if (IsAmxIntrinsic(name)) {
      std::vector<llvm::Value*> args;
      for (const Expr& a : n->args) args.push_back(EmitExpr(a));
      if (absl::Status s = EmitAmxTiles(b_, mod_, name, args); !s.ok()) {
        Fail(std::string(s.message()));
      }
      return llvm::ConstantInt::get(ty, 0);
    }
    std::vector<llvm::Value*> args;
    for (const Expr& a : n->args) args.push_back(Splat(t.lanes, EmitExpr(a)));
    auto arity = [&](size_t k) {
      if (args.size() == k) return true;
      Fail(StrCat("intrinsic ", name, " takes ", k, " argument", k == 1 ? "" : "s", ", got ",
                  args.size()));
      return false;
    };
    // Every argument must have the call's type (after splatting scalars).
    auto same_type_args = [&]() {
      for (size_t i = 0; i < args.size(); ++i) {
        if (args[i]->getType() != ty) {
          Fail(StrCat("argument ", i, " of ", name, " has type ", ToString(n->args[i].dtype()),
                      ", the call ", ToString(t)));
          return false;
        }
      }
      return true;
    };

    if (name == "likely") {
      if (!arity(1)) return poison;
      return args[0];
    }
    // The bits of the argument as the call's type (of the same width).
    if (name == "reinterpret") {
      if (!arity(1)) return poison;
      if (n->args[0].dtype().bits != t.bits) {
        Fail(StrCat("reinterpret of a ", ToString(n->args[0].dtype()), " as ", ToString(t)));
        return poison;
      }
      return b_.CreateBitCast(args[0], ty);
    }
    // Two bfloat16 products per lane, summed in float32 (int32 arguments).
    if (name == "dot2_bf16") {
      if (!arity(2)) return poison;
      if (!Bf16DotArgs(n, t)) {
        Fail(StrCat("dot2_bf16 of ", ToString(n->args[0].dtype()), " returning ", ToString(t)));
        return poison;
      }
      return EmitDotBf16(b_, mod_, t, llvm::Constant::getNullValue(ty), args[0], args[1]);
    }
    // Float classification: bool results.
    if (name == "isnan" || name == "isinf") {
      if (!arity(1)) return poison;
      DataType at = n->args[0].dtype().WithLanes(t.lanes);
      if (!at.is_float()) {
        Fail(StrCat("intrinsic ", name, " of a ", ToString(n->args[0].dtype()), " argument"));
        return poison;
      }
      llvm::Value* x = args[0];
      llvm::Value* r = name == "isnan"
                           ? b_.CreateFCmpUNO(x, x)
                           : b_.CreateFCmpOEQ(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                              llvm::ConstantFP::getInfinity(x->getType()));
      return CastValue(r, DataType::Bool().WithLanes(t.lanes), t);
    }

    if (!t.is_integer() && !t.is_bool() && !t.is_float()) {
      Fail(StrCat("intrinsic ", name, " of type ", ToString(t)));
      return poison;
    }
    std::optional<size_t> k = IntrinsicArity(name, t);
    if (!k.has_value()) {
      Fail(t.is_float() ? StrCat("unknown intrinsic '", name, "'")
                        : StrCat("unknown intrinsic '", name, "' for type ", ToString(t)));
      return poison;
    }
    if (!arity(*k) || !same_type_args()) return poison;
    return EmitIntrinsic(b_, mod_, name, t, args);
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
  // unpacks the captured values from ctx and calls
  // `<name>.par<N>.impl`, whose buffer pointers are noalias.
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

  llvm::Module* mod_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  llvm::Function* fn_ = nullptr;
  std::string name_;
  bool slp_vectorize_ = false;  // PrimFunc::slp_vectorize of the kernel being emitted
  bool run_once_ = false;       // and its PrimFunc::run_once
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

}  // namespace kiln::compiler::codegen
