#include "compiler/codegen/llvm_intrinsics.h"

#include <algorithm>
#include <unordered_map>

#include "compiler/codegen/fast_math.h"
#include "llvm/Analysis/VectorUtils.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/IntrinsicsAArch64.h"
#include "llvm/IR/IntrinsicsX86.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

namespace kiln::compiler::codegen {

using ir::DataType;

namespace {

using I = ir::Intrinsic;

const std::unordered_map<I, size_t>& IntOps() {
  static const std::unordered_map<I, size_t> ops = {
      {I::kBitAnd, 2}, {I::kBitOr, 2}, {I::kBitXor, 2},   {I::kBitNot, 1}, {I::kShl, 2},
      {I::kShr, 2},    {I::kDot4, 2},  {I::kDot4Vnni, 2}, {I::kDot2, 2},
  };
  return ops;
}

struct FloatOp {
  llvm::Intrinsic::ID id;
  size_t arity;
};

const std::unordered_map<I, FloatOp>& FloatOps() {
  static const std::unordered_map<I, FloatOp> ops = {
      {I::kExp, {llvm::Intrinsic::exp, 1}},
      {I::kLog, {llvm::Intrinsic::log, 1}},
      {I::kSqrt, {llvm::Intrinsic::sqrt, 1}},
      {I::kFabs, {llvm::Intrinsic::fabs, 1}},
      {I::kFloor, {llvm::Intrinsic::floor, 1}},
      {I::kCeil, {llvm::Intrinsic::ceil, 1}},
      {I::kTrunc, {llvm::Intrinsic::trunc, 1}},
      {I::kRoundEven, {llvm::Intrinsic::roundeven, 1}},
      {I::kSin, {llvm::Intrinsic::sin, 1}},
      {I::kCos, {llvm::Intrinsic::cos, 1}},
      {I::kTan, {llvm::Intrinsic::tan, 1}},
      {I::kAsin, {llvm::Intrinsic::asin, 1}},
      {I::kAcos, {llvm::Intrinsic::acos, 1}},
      {I::kAtan, {llvm::Intrinsic::atan, 1}},
      {I::kSinh, {llvm::Intrinsic::sinh, 1}},
      {I::kCosh, {llvm::Intrinsic::cosh, 1}},
      {I::kTanh, {llvm::Intrinsic::tanh, 1}},
      {I::kPow, {llvm::Intrinsic::pow, 2}},
      // Not LLVM intrinsics: emitted in EmitFloat.
      {I::kFmod, {llvm::Intrinsic::not_intrinsic, 2}},
      {I::kErf, {llvm::Intrinsic::not_intrinsic, 1}},
      {I::kSigmoid, {llvm::Intrinsic::not_intrinsic, 1}},
      {I::kAsinh, {llvm::Intrinsic::not_intrinsic, 1}},
      {I::kAcosh, {llvm::Intrinsic::not_intrinsic, 1}},
      {I::kAtanh, {llvm::Intrinsic::not_intrinsic, 1}},
  };
  return ops;
}

// A libm function of one argument (`f32` for float32 and float16, `f64`
// for float64), called once per lane.
llvm::Value* LibmCall(llvm::IRBuilderBase& b, llvm::Module* module, const char* f32,
                      const char* f64, llvm::Value* x, DataType t) {
  const bool dbl = t.bits == 64;
  llvm::Type* et = dbl ? b.getDoubleTy() : b.getFloatTy();
  llvm::FunctionCallee fn =
      module->getOrInsertFunction(dbl ? f64 : f32, llvm::FunctionType::get(et, {et}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotThrow();
    f->setWillReturn();
    f->setDoesNotAccessMemory();
  }
  llvm::Type* lane_ty = x->getType()->getScalarType();
  auto one = [&](llvm::Value* s) {
    llvm::Value* r = b.CreateCall(fn, {b.CreateFPCast(s, et)});
    return b.CreateFPCast(r, lane_ty);
  };
  if (t.lanes == 1) return one(x);
  llvm::Value* out = llvm::PoisonValue::get(x->getType());
  for (int i = 0; i < t.lanes; ++i) {
    out = b.CreateInsertElement(out, one(b.CreateExtractElement(x, i)), i);
  }
  return out;
}

// A function of float32 (float16 through float32) inline and vectorized
// (`fast`, fast_math.h); of float64 through LLVM's intrinsic `id`.
llvm::Value* ViaFloat32(llvm::IRBuilderBase& b, llvm::Value* x, DataType t,
                        llvm::Value* (*fast)(llvm::IRBuilderBase&, llvm::Value*),
                        llvm::Intrinsic::ID id) {
  if (t.bits == 64) return b.CreateUnaryIntrinsic(id, x);
  llvm::Type* fty = b.getFloatTy();
  if (t.lanes > 1) fty = llvm::FixedVectorType::get(fty, t.lanes);
  return b.CreateFPCast(fast(b, b.CreateFPCast(x, fty)), x->getType());
}

llvm::Value* Exp(llvm::IRBuilderBase& b, llvm::Value* x, DataType t) {
  return ViaFloat32(b, x, t, FastExp, llvm::Intrinsic::exp);
}

// dot4 as plain instructions: each lane's four bytes widened (a's
// unsigned, b's signed), multiplied, and the four products summed.
llvm::Value* Dot4Generic(llvm::IRBuilderBase& b, llvm::Value* acc, llvm::Value* a, llvm::Value* v,
                         int lanes) {
  auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 4 * lanes);
  if (lanes == 1) {
    auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), 4);
    llvm::Value* p = b.CreateMul(b.CreateZExt(b.CreateBitCast(a, bytes), wide),
                                 b.CreateSExt(b.CreateBitCast(v, bytes), wide));
    return b.CreateAdd(acc, b.CreateAddReduce(p));
  }
  // Pairs of products first, each the sum of two 16-bit products in 32 bits
  // (the form x86's pmaddwd takes: exact, where pmaddubsw's 16-bit sums of
  // u8 x s8 pairs would saturate), then the two pairs of each lane.
  auto* words = llvm::FixedVectorType::get(b.getInt16Ty(), 4 * lanes);
  auto* pairs = llvm::FixedVectorType::get(b.getInt32Ty(), 2 * lanes);
  llvm::Value* a16 = b.CreateZExt(b.CreateBitCast(a, bytes), words);
  llvm::Value* v16 = b.CreateSExt(b.CreateBitCast(v, bytes), words);
  auto half = [&](llvm::Value* x, int first, int count) {
    std::vector<int> pick;
    for (int i = 0; i < count; ++i) pick.push_back(first + 2 * i);
    return b.CreateShuffleVector(x, pick);
  };
  llvm::Value* pair = b.CreateAdd(b.CreateMul(b.CreateSExt(half(a16, 0, 2 * lanes), pairs),
                                              b.CreateSExt(half(v16, 0, 2 * lanes), pairs)),
                                  b.CreateMul(b.CreateSExt(half(a16, 1, 2 * lanes), pairs),
                                              b.CreateSExt(half(v16, 1, 2 * lanes), pairs)));
  return b.CreateAdd(acc, b.CreateAdd(half(pair, 0, lanes), half(pair, 1, lanes)));
}

}  // namespace

llvm::Value* EmitDot4(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name, DataType t,
                      llvm::Value* acc, llvm::Value* a, llvm::Value* v) {
  const int lanes = t.lanes;
  if (name == I::kDot2 && lanes % 4 == 0) {
    // x86's pmaddwd, as wide as the CPU has it (kX86IntVectorBitsFlag).
    auto* bits = llvm::mdconst::extract_or_null<llvm::ConstantInt>(
        module->getModuleFlag(kX86IntVectorBitsFlag));
    if (bits != nullptr) {
      const int chunk =
          std::min<int>(static_cast<int>(bits->getZExtValue()) / 32, lanes % 16 == 0  ? 16
                                                                     : lanes % 8 == 0 ? 8
                                                                                      : 4);
      const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512_pmaddw_d_512
                                     : chunk == 8 ? llvm::Intrinsic::x86_avx2_pmadd_wd
                                                  : llvm::Intrinsic::x86_sse2_pmadd_wd;
      auto* words = llvm::FixedVectorType::get(b.getInt16Ty(), 2 * chunk);
      std::vector<llvm::Value*> parts;
      for (int first = 0; first < lanes; first += chunk) {
        auto part = [&](llvm::Value* x) {
          std::vector<int> pick;
          for (int l = 0; l < chunk; ++l) pick.push_back(first + l);
          return b.CreateBitCast(chunk == lanes ? x : b.CreateShuffleVector(x, pick), words);
        };
        parts.push_back(b.CreateIntrinsic(id, {}, {part(a), part(v)}));
      }
      return b.CreateAdd(acc, parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts));
    }
  }
  if (name == I::kDot2) {
    // Each lane's two signed 16-bit halves multiplied and summed in 32 bits.
    auto* words = llvm::FixedVectorType::get(b.getInt16Ty(), 2 * lanes);
    auto* wide = llvm::FixedVectorType::get(b.getInt32Ty(), lanes);
    llvm::Value* a16 = b.CreateBitCast(a, words);
    llvm::Value* v16 = b.CreateBitCast(v, words);
    auto half = [&](llvm::Value* x, int first) {
      std::vector<int> pick;
      for (int l = 0; l < lanes; ++l) pick.push_back(2 * l + first);
      return b.CreateSExt(b.CreateShuffleVector(x, pick), wide);
    };
    llvm::Value* sum = b.CreateAdd(b.CreateMul(half(a16, 0), half(v16, 0)),
                                   b.CreateMul(half(a16, 1), half(v16, 1)));
    return lanes == 1 ? b.CreateAdd(acc, b.CreateExtractElement(sum, uint64_t{0}))
                      : b.CreateAdd(acc, sum);
  }
  const llvm::Triple triple(module->getTargetTriple());
  auto* arm_dot =
      llvm::mdconst::extract_or_null<llvm::ConstantInt>(module->getModuleFlag(kAarch64DotFlag));
  const int arm = triple.isAArch64() && arm_dot != nullptr ? arm_dot->getZExtValue() : 0;
  if (name != I::kDot4Vnni || lanes == 1 || (!triple.isX86() && arm == 0)) {
    return Dot4Generic(b, acc, a, v, lanes);
  }
  // Lanes that no register width divides (a 7-pixel row): widened to the
  // next multiple of 4, 8 or 16 with poison lanes, then narrowed back.
  const int wide = lanes < 4 ? 4 : lanes < 8 ? 8 : (lanes + 15) / 16 * 16;
  if (lanes % 4 != 0) {
    std::vector<int> grow, shrink;
    for (int l = 0; l < wide; ++l) grow.push_back(l < lanes ? l : -1);
    for (int l = 0; l < lanes; ++l) shrink.push_back(l);
    llvm::Value* r = EmitDot4(b, module, name, t.WithLanes(wide), b.CreateShuffleVector(acc, grow),
                              b.CreateShuffleVector(a, grow), b.CreateShuffleVector(v, grow));
    return b.CreateShuffleVector(r, shrink);
  }
  auto part_of = [&](llvm::Value* x, int first, int chunk) {
    if (chunk == lanes) return x;
    std::vector<int> pick;
    for (int l = 0; l < chunk; ++l) pick.push_back(first + l);
    return b.CreateShuffleVector(x, pick);
  };
  std::vector<llvm::Value*> parts;
  if (arm != 0) {
    // 128 bits at a time: usdot (u8 x s8) with i8mm; with dotprod alone,
    // sdot of a's bytes flipped (a - 128, signed) plus 128 b, that is less
    // sdot(-128, b).
    auto* quad = llvm::FixedVectorType::get(b.getInt32Ty(), 4);
    auto* bytes = llvm::FixedVectorType::get(b.getInt8Ty(), 16);
    const llvm::Intrinsic::ID sdot = llvm::Intrinsic::aarch64_neon_sdot;
    for (int first = 0; first < lanes; first += 4) {
      llvm::Value* c = part_of(acc, first, 4);
      llvm::Value* x = b.CreateBitCast(part_of(a, first, 4), bytes);
      llvm::Value* y = b.CreateBitCast(part_of(v, first, 4), bytes);
      if (arm == 2) {
        parts.push_back(
            b.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_usdot, {quad, bytes}, {c, x, y}));
        continue;
      }
      llvm::Value* m128 = llvm::ConstantInt::get(bytes, 0x80);
      llvm::Value* flipped = b.CreateIntrinsic(sdot, {quad, bytes}, {c, b.CreateXor(x, m128), y});
      llvm::Value* bias =
          b.CreateIntrinsic(sdot, {quad, bytes}, {llvm::Constant::getNullValue(quad), m128, y});
      parts.push_back(b.CreateSub(flipped, bias));
    }
    return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
  }
  const int chunk = lanes % 16 == 0 ? 16 : lanes % 8 == 0 ? 8 : 4;
  // vpdpbusd on `chunk` lanes at a time (512, 256 or 128 bits).
  const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                 : chunk == 8 ? llvm::Intrinsic::x86_avx512_vpdpbusd_256
                                              : llvm::Intrinsic::x86_avx512_vpdpbusd_128;
  for (int first = 0; first < lanes; first += chunk) {
    parts.push_back(b.CreateIntrinsic(
        id, {}, {part_of(acc, first, chunk), part_of(a, first, chunk), part_of(v, first, chunk)}));
  }
  return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
}

llvm::Value* EmitDotBf16(llvm::IRBuilderBase& b, llvm::Module* module, DataType t, llvm::Value* acc,
                         llvm::Value* a, llvm::Value* v) {
  const int lanes = t.lanes;
  auto has = [&](const char* name) {
    auto* flag = llvm::mdconst::extract_or_null<llvm::ConstantInt>(module->getModuleFlag(name));
    return flag != nullptr && flag->getZExtValue() != 0;
  };
  if (has(kAarch64Bf16DotFlag) && lanes % 4 == 0) {
    auto* quad = llvm::FixedVectorType::get(b.getFloatTy(), 4);
    auto* halves = llvm::FixedVectorType::get(b.getBFloatTy(), 8);
    std::vector<llvm::Value*> parts;
    for (int first = 0; first < lanes; first += 4) {
      auto part = [&](llvm::Value* x) {
        if (lanes == 4) return x;
        return b.CreateShuffleVector(x, std::vector<int>{first, first + 1, first + 2, first + 3});
      };
      parts.push_back(b.CreateIntrinsic(
          llvm::Intrinsic::aarch64_neon_bfdot, {quad, halves},
          {part(acc), b.CreateBitCast(part(a), halves), b.CreateBitCast(part(v), halves)}));
    }
    return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
  }
  if (has(kX86Bf16DotFlag) && lanes % 4 == 0) {
    const int chunk = lanes % 16 == 0 ? 16 : lanes % 8 == 0 ? 8 : 4;
    const llvm::Intrinsic::ID id = chunk == 16  ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512
                                   : chunk == 8 ? llvm::Intrinsic::x86_avx512bf16_dpbf16ps_256
                                                : llvm::Intrinsic::x86_avx512bf16_dpbf16ps_128;
    auto* halves = llvm::FixedVectorType::get(b.getBFloatTy(), 2 * chunk);
    std::vector<llvm::Value*> parts;
    for (int first = 0; first < lanes; first += chunk) {
      auto part = [&](llvm::Value* x) {
        if (chunk == lanes) return x;
        std::vector<int> pick;
        for (int l = 0; l < chunk; ++l) pick.push_back(first + l);
        return b.CreateShuffleVector(x, pick);
      };
      parts.push_back(b.CreateIntrinsic(
          id, {}, {part(acc), b.CreateBitCast(part(a), halves), b.CreateBitCast(part(v), halves)}));
    }
    return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b, parts);
  }
  // Each half as the float32 of the same top 16 bits.
  llvm::Type* fty = acc->getType();
  llvm::Value* high = llvm::ConstantInt::get(a->getType(), 0xffff0000u);
  auto lo = [&](llvm::Value* x) { return b.CreateBitCast(b.CreateShl(x, 16), fty); };
  auto hi = [&](llvm::Value* x) { return b.CreateBitCast(b.CreateAnd(x, high), fty); };
  llvm::Value* r = b.CreateIntrinsic(llvm::Intrinsic::fma, {fty}, {lo(a), lo(v), acc});
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {fty}, {hi(a), hi(v), r});
}

namespace {

llvm::Value* EmitInteger(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name,
                         DataType t, const std::vector<llvm::Value*>& args) {
  llvm::Value* a = args[0];
  llvm::Type* ty = a->getType();
  if (name == I::kDot4 || name == I::kDot4Vnni || name == I::kDot2) {
    return EmitDot4(b, module, name, t, llvm::Constant::getNullValue(ty), a, args[1]);
  }
  if (name == I::kBitNot) return b.CreateNot(a);
  llvm::Value* v = args[1];
  if (name == I::kBitAnd) return b.CreateAnd(a, v);
  if (name == I::kBitOr) return b.CreateOr(a, v);
  if (name == I::kBitXor) return b.CreateXor(a, v);
  // Shifts by the second operand, taken as unsigned. Shifting by the width
  // or more gives 0 (shl, logical shr) or the sign (arithmetic shr) rather
  // than poison.
  const int bits = t.is_bool() ? 1 : t.bits;
  llvm::Value* maxsh = llvm::ConstantInt::get(ty, bits - 1);
  llvm::Value* sh = b.CreateBinaryIntrinsic(llvm::Intrinsic::umin, v, maxsh);
  if (name == I::kShr && t.is_int()) return b.CreateAShr(a, sh);
  llvm::Value* r = name == I::kShl ? b.CreateShl(a, sh) : b.CreateLShr(a, sh);
  return b.CreateSelect(b.CreateICmpUGT(v, maxsh), llvm::Constant::getNullValue(ty), r);
}

llvm::Value* EmitFloat(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name, DataType t,
                       const std::vector<llvm::Value*>& args) {
  llvm::Value* x = args[0];
  llvm::Type* ty = x->getType();
  if (name == I::kExp) return Exp(b, x, t);
  if (name == I::kTanh) return ViaFloat32(b, x, t, FastTanh, llvm::Intrinsic::tanh);
  if (name == I::kSigmoid) {  // 1 / (1 + exp(-x))
    llvm::Value* one = llvm::ConstantFP::get(ty, 1.0);
    return b.CreateFDiv(one, b.CreateFAdd(one, Exp(b, b.CreateFNeg(x), t)));
  }
  if (name == I::kFmod) return b.CreateFRem(x, args[1]);  // C fmod: sign of x
  if (name == I::kErf) return LibmCall(b, module, "erff", "erf", x, t);
  if (name == I::kAsinh) return LibmCall(b, module, "asinhf", "asinh", x, t);
  if (name == I::kAcosh) return LibmCall(b, module, "acoshf", "acosh", x, t);
  if (name == I::kAtanh) return LibmCall(b, module, "atanhf", "atanh", x, t);
  return b.CreateIntrinsic(FloatOps().at(name).id, {ty}, args);
}

}  // namespace

std::optional<size_t> IntrinsicArity(ir::Intrinsic name, DataType t) {
  if (t.is_integer() || t.is_bool()) {
    auto it = IntOps().find(name);
    if (it != IntOps().end()) return it->second;
  } else if (t.is_float()) {
    auto it = FloatOps().find(name);
    if (it != FloatOps().end()) return it->second.arity;
  }
  return std::nullopt;
}

llvm::Value* EmitIntrinsic(llvm::IRBuilderBase& b, llvm::Module* module, ir::Intrinsic name,
                           DataType t, const std::vector<llvm::Value*>& args) {
  return t.is_float() ? EmitFloat(b, module, name, t, args) : EmitInteger(b, module, name, t, args);
}

}  // namespace kiln::compiler::codegen
