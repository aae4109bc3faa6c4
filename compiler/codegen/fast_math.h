#pragma once
// Vectorizable float32 approximations of transcendental functions, emitted
// inline: LLVM lowers llvm.exp on a vector to one libm call per lane.
// `x` is a float or a vector of floats; the result has its type.

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::compiler::codegen {

// exp(x): Cephes' expf (range reduction by ln 2 in two parts, a degree-6
// polynomial on [-ln2/2, ln2/2], the power of two applied in two halves so
// that results in the subnormal range stay exact): within 2 ulp of expf;
// +inf above 88.72284, 0 below -103.97208, NaN for NaN.
llvm::Value* FastExp(llvm::IRBuilderBase& b, llvm::Value* x);

// tanh(x): 1 - 2 / (exp(2x) + 1), exact at the ends (exp overflows to inf
// or underflows to 0), and for |x| < 0.5, where that formula cancels, its
// Taylor series up to x^17 (error < 5e-10).
llvm::Value* FastTanh(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::compiler::codegen
