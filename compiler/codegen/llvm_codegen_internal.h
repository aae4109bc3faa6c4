#pragma once
// The emitter behind codegen::EmitKernel (llvm_codegen.h): one CodeGen a
// kernel turns its lowered PrimFunc into LLVM IR in the module. Statements
// (the kernel, loops, parallel bodies) are emitted in llvm_codegen.cc,
// expressions, loads, stores and calls in llvm_codegen_expr.cc.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/ir/ir.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen::detail {

using namespace kiln::ir;  // NOLINT

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

  absl::Status EmitKernel(const PrimFunc& f);

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

  llvm::Value* EmitExpr(const Expr& e);

  // A divisor that needs no guard: a constant (or a broadcast one) that is
  // not 0, nor -1 for a signed type.
  static bool SafeDivisor(const Expr& b, bool is_signed);

  // Integer kDiv / kMod / kFloorDiv / kFloorMod. A zero divisor gives 0 and
  // INT_MIN / -1 gives INT_MIN (wrapping) instead of undefined behaviour:
  // unless the divisor is a safe constant, it is replaced by 1 where it is 0
  // (or -1) and the quotient patched afterwards.
  llvm::Value* IntDivMod(ExprKind kind, llvm::Value* a, llvm::Value* b, const Expr& b_expr,
                         bool is_signed);

  llvm::Value* EmitBinary(const BinaryNode* n);

  // Converts `v` of type `from` to `to` (same lanes, or a scalar `v` that is
  // splat). Float -> integer truncates toward zero and saturates (NaN gives
  // 0) instead of producing poison for out-of-range values.
  // `inside`: v is known to be an integer-type value's saturation already
  // (InRange), so no clamp is needed.
  llvm::Value* CastValue(llvm::Value* v, DataType from, DataType to, bool inside = false);

  // The element pointer(s) of an access: a scalar pointer for a scalar index
  // or a contiguous Ramp (`*contiguous`), else a vector of pointers.
  llvm::Value* Address(const Buffer& buf, const std::vector<Expr>& indices, bool* contiguous);

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
  llvm::Value* StridedLoad(const BufferLoadNode* n);

  llvm::Value* EmitLoad(const BufferLoadNode* n);

  void EmitStore(const BufferStoreNode* n);

  // ----- intrinsic calls

  // A call of the C library's `f32` / `f64` (float / double -> same) on
  // every lane of `x` (float16 goes through float).
  // dot2_bf16's arguments: int32 of the call's lanes, returning float32.
  static bool Bf16DotArgs(const CallNode* c, DataType t);

  llvm::Value* EmitCall(const CallNode* n);

  // ----- statements
  void EmitStmt(const Stmt& s);

  void EmitSerialFor(const ForNode* n);

  // Outlines the loop body into `void <name>.par<N>(i64 i, ptr ctx)`, which
  // unpacks the captured values from ctx and calls
  // `<name>.par<N>.impl`, whose buffer pointers are noalias.
  void EmitParallelFor(const ForNode* n);

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

}  // namespace kiln::compiler::codegen::detail
