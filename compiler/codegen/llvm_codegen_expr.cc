// codegen::detail::CodeGen's expressions: values, integer division, casts,
// addresses, loads and stores (masked and strided), and calls (math,
// intrinsics, AMX tiles). Statements: llvm_codegen.cc.
#include <cmath>
#include <optional>
#include <unordered_map>

#include "base/str.h"
#include "compiler/codegen/llvm_amx.h"
#include "compiler/codegen/llvm_codegen_internal.h"
#include "compiler/codegen/llvm_intrinsics.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/lower/ir_util.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace kiln::compiler::codegen::detail {

namespace {

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
  if (!nan || nan->op != Intrinsic::kIsNan || ConstFloat(sel->true_value) != 0.0) return false;
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

}  // namespace

llvm::Value* CodeGen::EmitExpr(const Expr& e) {
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

bool CodeGen::SafeDivisor(const Expr& b, bool is_signed) {
  Expr c = b;
  if (const auto* bc = b.as<BroadcastNode>()) c = bc->value;
  auto v = AsConstInt(c);
  if (!v) return false;
  int64_t w = lower::WrapInt(*v, c.dtype());
  return w != 0 && !(is_signed && w == -1);
}

llvm::Value* CodeGen::IntDivMod(ExprKind kind, llvm::Value* a, llvm::Value* b, const Expr& b_expr,
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

llvm::Value* CodeGen::EmitBinary(const BinaryNode* n) {
  // acc + dot4(x, y): one instruction that accumulates (vpdpbusd).
  if (n->kind == ExprKind::kAdd && n->dtype.is_int() && n->dtype.bits == 32) {
    for (const auto& [acc, call] : {std::pair{n->a, n->b}, std::pair{n->b, n->a}}) {
      const auto* c = call.as<CallNode>();
      if (c == nullptr ||
          (c->op != Intrinsic::kDot4 && c->op != Intrinsic::kDot4Vnni &&
           c->op != Intrinsic::kDot2) ||
          c->args.size() != 2 || c->args[0].dtype() != n->dtype || c->args[1].dtype() != n->dtype) {
        continue;
      }
      llvm::Value* x = EmitExpr(acc);
      return EmitDot4(b_, mod_, c->op, n->dtype, x, EmitExpr(c->args[0]), EmitExpr(c->args[1]));
    }
  }
  // acc + dot2_bf16(x, y): one instruction that accumulates (vdpbf16ps).
  if (n->kind == ExprKind::kAdd && n->dtype.is_float() && n->dtype.bits == 32) {
    for (const auto& [acc, call] : {std::pair{n->a, n->b}, std::pair{n->b, n->a}}) {
      const auto* c = call.as<CallNode>();
      if (c == nullptr || c->op != Intrinsic::kDot2Bf16 || !Bf16DotArgs(c, n->dtype)) continue;
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

llvm::Value* CodeGen::CastValue(llvm::Value* v, DataType from, DataType to, bool inside) {
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
      llvm::Value* x = b_.CreateSelect(b_.CreateFCmpUNO(v, v), llvm::Constant::getNullValue(ft), v);
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

llvm::Value* CodeGen::Address(const Buffer& buf, const std::vector<Expr>& indices,
                              bool* contiguous) {
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

llvm::Value* CodeGen::StridedLoad(const BufferLoadNode* n) {
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

llvm::Value* CodeGen::EmitLoad(const BufferLoadNode* n) {
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

void CodeGen::EmitStore(const BufferStoreNode* n) {
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

bool CodeGen::Bf16DotArgs(const CallNode* c, DataType t) {
  if (c->args.size() != 2 || t != DataType::Float32().WithLanes(t.lanes)) return false;
  for (const Expr& a : c->args) {
    if (a.dtype() != DataType::Int32().WithLanes(t.lanes)) return false;
  }
  return true;
}

llvm::Value* CodeGen::EmitCall(const CallNode* n) {
  const Intrinsic f = n->op;
  const std::string_view name = NameOf(f);
  DataType t = n->dtype;
  llvm::Type* ty = TypeOf(t);
  llvm::Value* poison = llvm::PoisonValue::get(ty);
  for (const Expr& a : n->args) {
    if (a.dtype().lanes != 1 && a.dtype().lanes != t.lanes) {
      Fail(StrCat("a ", ToString(a.dtype()), " argument of ", name, " returning ", ToString(t)));
      return poison;
    }
  }
  if (f == Intrinsic::kAddressOf) {
    // The footprint's extents after the load are for bound inference.
    const auto* load = n->args.empty() ? nullptr : n->args[0].as<BufferLoadNode>();
    if (load == nullptr || load->dtype.lanes != 1) {
      Fail("kiln.address_of takes a scalar load");
      return poison;
    }
    bool contiguous = false;
    return Address(load->buffer, load->indices, &contiguous);
  }
  if (f == Intrinsic::kPrefetch) {
    // A read prefetch into every cache level (locality 3) of a data line.
    const auto* addr = n->args.size() == 1 ? n->args[0].as<CallNode>() : nullptr;
    if (addr == nullptr || addr->op != Intrinsic::kAddressOf) {
      Fail("prefetch takes the address of a load");
      return poison;
    }
    llvm::Value* p = EmitExpr(n->args[0]);
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                       {p, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
    return llvm::ConstantInt::get(ty, 0);
  }
  if (IsAmxIntrinsic(f)) {
    std::vector<llvm::Value*> args;
    for (const Expr& a : n->args) args.push_back(EmitExpr(a));
    if (absl::Status s = EmitAmxTiles(b_, mod_, f, args); !s.ok()) {
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

  if (f == Intrinsic::kLikely) {
    if (!arity(1)) return poison;
    return args[0];
  }
  // The bits of the argument as the call's type (of the same width).
  if (f == Intrinsic::kReinterpret) {
    if (!arity(1)) return poison;
    if (n->args[0].dtype().bits != t.bits) {
      Fail(StrCat("reinterpret of a ", ToString(n->args[0].dtype()), " as ", ToString(t)));
      return poison;
    }
    return b_.CreateBitCast(args[0], ty);
  }
  // Two bfloat16 products per lane, summed in float32 (int32 arguments).
  if (f == Intrinsic::kDot2Bf16) {
    if (!arity(2)) return poison;
    if (!Bf16DotArgs(n, t)) {
      Fail(StrCat("dot2_bf16 of ", ToString(n->args[0].dtype()), " returning ", ToString(t)));
      return poison;
    }
    return EmitDotBf16(b_, mod_, t, llvm::Constant::getNullValue(ty), args[0], args[1]);
  }
  // Float classification: a bool result.
  if (f == Intrinsic::kIsNan) {
    if (!arity(1)) return poison;
    DataType at = n->args[0].dtype().WithLanes(t.lanes);
    if (!at.is_float()) {
      Fail(StrCat("intrinsic ", name, " of a ", ToString(n->args[0].dtype()), " argument"));
      return poison;
    }
    llvm::Value* x = args[0];
    return CastValue(b_.CreateFCmpUNO(x, x), DataType::Bool().WithLanes(t.lanes), t);
  }

  if (!t.is_integer() && !t.is_bool() && !t.is_float()) {
    Fail(StrCat("intrinsic ", name, " of type ", ToString(t)));
    return poison;
  }
  std::optional<size_t> k = IntrinsicArity(f, t);
  if (!k.has_value()) {
    Fail(StrCat("intrinsic ", name, " of type ", ToString(t)));
    return poison;
  }
  if (!arity(*k) || !same_type_args()) return poison;
  return EmitIntrinsic(b_, mod_, f, t, args);
}

}  // namespace kiln::compiler::codegen::detail
