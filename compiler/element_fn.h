#pragma once
// The elementwise functions of kiln's epilogues and operators: a closed
// vocabulary (base/vocabulary.h). The name is what a workload's canonical
// text (`u:<fn>`, `b:<fn>`), and so its key, carries; everything between
// holds the enum. Each is defined once in the tensor IR
// (compiler/ops/elementwise.h: UnaryFn, BinaryFn).

#include <array>
#include <cstdint>
#include <ostream>
#include <string_view>
#include <utility>

#include "base/vocabulary.h"

namespace kiln::compiler {

enum class ElementFn : uint8_t {
  // Unary: y = fn(x, params).
  kCast,
  kNot,
  kBitNot,
  kNeg,
  kAbs,
  kRelu,
  kSign,
  kIsNan,
  kIsInf,
  kErf,
  kSqrt,
  kExp,
  kLog,
  kFloor,
  kCeil,
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
  kRound,
  kReciprocal,
  kSoftplus,
  kSoftsign,
  kLeakyRelu,
  kElu,
  kSelu,
  kCelu,
  kHardSigmoid,
  kHardSwish,
  kThresholdedRelu,
  kShrink,
  kClip,
  kGelu,
  kGeluTanh,
  kMish,
  kSwish,
  kScale,
  kPowC,
  // Binary: y = fn(a, b).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kFmod,
  kPow,
  kMin,
  kMax,
  kPRelu,
  kEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kAnd,
  kOr,
  kXor,
  kBitAnd,
  kBitOr,
  kBitXor,
  kShl,
  kShr,
};

// Whether fn takes one operand (the unary ones above), else two.
constexpr bool IsUnary(ElementFn fn) { return fn < ElementFn::kAdd; }

}  // namespace kiln::compiler

namespace kiln {

template <>
struct Vocabulary<compiler::ElementFn> {
  using E = compiler::ElementFn;
  static constexpr std::array<std::pair<E, std::string_view>, 70> kNames = {{
      {E::kCast, "cast"},
      {E::kNot, "not"},
      {E::kBitNot, "bitnot"},
      {E::kNeg, "neg"},
      {E::kAbs, "abs"},
      {E::kRelu, "relu"},
      {E::kSign, "sign"},
      {E::kIsNan, "isnan"},
      {E::kIsInf, "isinf"},
      {E::kErf, "erf"},
      {E::kSqrt, "sqrt"},
      {E::kExp, "exp"},
      {E::kLog, "log"},
      {E::kFloor, "floor"},
      {E::kCeil, "ceil"},
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
      {E::kRound, "round"},
      {E::kReciprocal, "reciprocal"},
      {E::kSoftplus, "softplus"},
      {E::kSoftsign, "softsign"},
      {E::kLeakyRelu, "leakyrelu"},
      {E::kElu, "elu"},
      {E::kSelu, "selu"},
      {E::kCelu, "celu"},
      {E::kHardSigmoid, "hardsigmoid"},
      {E::kHardSwish, "hardswish"},
      {E::kThresholdedRelu, "thresholdedrelu"},
      {E::kShrink, "shrink"},
      {E::kClip, "clip"},
      {E::kGelu, "gelu"},
      {E::kGeluTanh, "gelu_tanh"},
      {E::kMish, "mish"},
      {E::kSwish, "swish"},
      {E::kScale, "scale"},
      {E::kPowC, "powc"},
      {E::kAdd, "add"},
      {E::kSub, "sub"},
      {E::kMul, "mul"},
      {E::kDiv, "div"},
      {E::kMod, "mod"},
      {E::kFmod, "fmod"},
      {E::kPow, "pow"},
      {E::kMin, "min"},
      {E::kMax, "max"},
      {E::kPRelu, "prelu"},
      {E::kEqual, "equal"},
      {E::kLess, "less"},
      {E::kLessEqual, "lessequal"},
      {E::kGreater, "greater"},
      {E::kGreaterEqual, "greaterequal"},
      {E::kAnd, "and"},
      {E::kOr, "or"},
      {E::kXor, "xor"},
      {E::kBitAnd, "bitand"},
      {E::kBitOr, "bitor"},
      {E::kBitXor, "bitxor"},
      {E::kShl, "shl"},
      {E::kShr, "shr"},
  }};
};

}  // namespace kiln

namespace kiln::compiler {

// Writes the function's name (test output, streams; StrCat writes it by
// itself).
inline std::ostream& operator<<(std::ostream& os, ElementFn fn) { return os << NameOf(fn); }

}  // namespace kiln::compiler
