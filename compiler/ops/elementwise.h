#pragma once
// The elementwise functions of kiln's operators, each defined once in the
// tensor IR: epilogues (`u:<fn>`, `b:<fn>`), standalone eltwise kernels and
// the interpreter all use these definitions. Values of float16 tensors are
// computed in float32 (Promote), integers and bools in their own type.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "compiler/element_fn.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::ops {

// The IR type of a tensor element (bool is ir bool; float16 is half).
ir::DataType IrType(DType t);
DType FromIrType(ir::DataType t);
// The type values of `t` are computed in (float16 -> float32).
ir::DataType ComputeType(DType t);
// x converted to its compute type.
ir::Expr Promote(ir::Expr x);

// Storage-only types (base/dtype.h) are carried as their bit patterns
// (IrType: uint8/uint16; int4/uint4 one per int8/uint8). A bfloat16 or float8
// pattern as float32 and back (round to nearest even; out-of-range values
// saturate when `saturate`, else give infinity or NaN, as ONNX's Cast), and
// any value as int4/uint4 (saturated; floats rounded half to even). These
// are the IR forms of the conversions in base/dtype.h.
ir::Expr DecodeStorageFloat(DType t, const ir::Expr& bits);
ir::Expr EncodeStorageFloat(DType t, const ir::Expr& x, bool saturate);
ir::Expr EncodeInt4(DType t, ir::Expr x);

// y = fn(x, params). A binary fn and wrong parameter counts are
// INVALID_ARGUMENT. The unary functions: neg abs sqrt exp log reciprocal floor ceil round
// sign relu sigmoid tanh sin cos tan asin acos atan sinh cosh asinh acosh
// atanh erf softplus softsign not isnan isinf(detect_pos, detect_neg)
// leakyrelu(alpha) elu(alpha) selu(alpha, gamma) celu(alpha)
// hardsigmoid(alpha, beta) hardswish thresholdedrelu(alpha) shrink(bias,
// lambd) clip(min, max) gelu gelu_tanh mish swish(alpha) bitnot
// cast(onnx dtype code[, saturate, from dtype code: for storage-only types])
// scale(a, b: a*x+b) powc(p: x^p).
absl::StatusOr<ir::Expr> UnaryFn(ElementFn fn, ir::Expr x, const std::vector<double>& params);
// y = fn(a, b) on operands of one type. The binary functions: add sub mul div mod fmod pow
// min max prelu equal less lessequal greater greaterequal and or xor bitand
// bitor bitxor shl shr.
absl::StatusOr<ir::Expr> BinaryFn(ElementFn fn, ir::Expr a, ir::Expr b);

// The result type of fn on an input of type `in` (compute types).
absl::StatusOr<ir::DataType> UnaryResultType(ElementFn fn, ir::DataType in,
                                             const std::vector<double>& params);
absl::StatusOr<ir::DataType> BinaryResultType(ElementFn fn, ir::DataType a);

}  // namespace kiln::compiler::ops
