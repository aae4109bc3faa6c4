#pragma once
// The intrinsics an ir::Call names: a closed vocabulary (base/vocabulary.h).
// Templates and the elementwise functions create them; lowering, the
// interpreter and the code generators (LLVM, CUDA C, OpenCL C) dispatch on
// the enum. The names are what the IR printer writes (--dump-ir) and, for
// the math functions, the C names the source dialects call.

#include <array>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <utility>

#include "base/vocabulary.h"

namespace kiln::ir {

enum class Intrinsic : uint8_t {
  // Floating-point functions of one argument (pow and fmod of two), the
  // C library's names; sigmoid is 1 / (1 + exp(-x)).
  kSqrt,
  kExp,
  kLog,
  kFloor,
  kCeil,
  kTrunc,
  kRoundEven,
  kFabs,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kTanh,
  kAsinh,
  kAcosh,
  kAtanh,
  kSigmoid,
  kErf,
  kPow,
  kFmod,
  // A bool: whether the float is NaN.
  kIsNan,
  // Integer bit operations (shifts by the second operand as unsigned; by
  // the width or more: 0, or the sign for an arithmetic shr).
  kBitNot,
  kBitAnd,
  kBitOr,
  kBitXor,
  kShl,
  kShr,
  // The operand's bits as the call's type (same width).
  kReinterpret,
  // Integer and bfloat16 dot products (codegen/llvm_intrinsics.h).
  kDot4,
  kDot4Vnni,
  kDot2,
  kDot2Bf16,
  // AMX tile products of a tensorized region (codegen/llvm_amx.h).
  kAmxDpbusd,
  kAmxDpbf16ps,
  // Control: a branch condition that is usually true (lowering's tail
  // partitioning), the address of a load, a prefetch of an address, a GPU
  // block's barrier.
  kLikely,
  kAddressOf,
  kPrefetch,
  kBarrier,
};

}  // namespace kiln::ir

namespace kiln {

template <>
struct Vocabulary<ir::Intrinsic> {
  using E = ir::Intrinsic;
  static constexpr std::array<std::pair<E, std::string_view>, 42> kNames = {{
      {E::kSqrt, "sqrt"},
      {E::kExp, "exp"},
      {E::kLog, "log"},
      {E::kFloor, "floor"},
      {E::kCeil, "ceil"},
      {E::kTrunc, "trunc"},
      {E::kRoundEven, "roundeven"},
      {E::kFabs, "fabs"},
      {E::kSin, "sin"},
      {E::kCos, "cos"},
      {E::kTan, "tan"},
      {E::kAsin, "asin"},
      {E::kAcos, "acos"},
      {E::kAtan, "atan"},
      {E::kSinh, "sinh"},
      {E::kCosh, "cosh"},
      {E::kTanh, "tanh"},
      {E::kAsinh, "asinh"},
      {E::kAcosh, "acosh"},
      {E::kAtanh, "atanh"},
      {E::kSigmoid, "sigmoid"},
      {E::kErf, "erf"},
      {E::kPow, "pow"},
      {E::kFmod, "fmod"},
      {E::kIsNan, "isnan"},
      {E::kBitNot, "bitnot"},
      {E::kBitAnd, "bitand"},
      {E::kBitOr, "bitor"},
      {E::kBitXor, "bitxor"},
      {E::kShl, "shl"},
      {E::kShr, "shr"},
      {E::kReinterpret, "reinterpret"},
      {E::kDot4, "dot4"},
      {E::kDot4Vnni, "dot4_vnni"},
      {E::kDot2, "dot2"},
      {E::kDot2Bf16, "dot2_bf16"},
      {E::kAmxDpbusd, "amx_dpbusd"},
      {E::kAmxDpbf16ps, "amx_dpbf16ps"},
      {E::kLikely, "likely"},
      {E::kAddressOf, "kiln.address_of"},
      {E::kPrefetch, "prefetch"},
      {E::kBarrier, "kiln.barrier"},
  }};
};

}  // namespace kiln

namespace kiln::ir {

// Writes the intrinsic's name (test output, streams; StrCat writes it by
// itself).
inline std::ostream& operator<<(std::ostream& os, Intrinsic f) { return os << NameOf(f); }

}  // namespace kiln::ir
