#include "compiler/codegen/fast_math.h"

#include <iterator>
#include <limits>

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::compiler::codegen {

namespace {

llvm::Type* IntTypeLike(llvm::IRBuilderBase& b, llvm::Type* fty) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(fty))
    return llvm::VectorType::get(b.getInt32Ty(), v->getElementCount());
  return b.getInt32Ty();
}

}  // namespace

llvm::Value* FastExp(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* fty = x->getType();
  llvm::Type* ity = IntTypeLike(b, fty);
  auto c = [&](double v) { return llvm::ConstantFP::get(fty, v); };
  auto fma = [&](llvm::Value* p, llvm::Value* q, llvm::Value* r) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {fty}, {p, q, r});
  };
  constexpr double kMax = 88.72283935546875, kMin = -103.97207641601562;
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, c(kMin)), c(kMax));
  // n = round(x / ln 2), r = x - n ln 2 with ln 2 split in two (Cephes).
  llvm::Value* n =
      b.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, b.CreateFMul(xc, c(1.44269504088896341)));
  llvm::Value* r = fma(n, c(-0.693359375), xc);
  r = fma(n, c(2.12194440e-4), r);
  static const double kPoly[] = {1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
                                 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
  llvm::Value* p = c(kPoly[0]);
  for (size_t i = 1; i < std::size(kPoly); ++i) p = fma(p, r, c(kPoly[i]));
  llvm::Value* y = fma(b.CreateFMul(p, r), r, b.CreateFAdd(r, c(1.0)));
  // y * 2^n as y * 2^h * 2^(n-h), h = n / 2: both factors normal for n in
  // [-150, 128].
  llvm::Value* ni = b.CreateFPToSI(n, ity);
  llvm::Value* h = b.CreateAShr(ni, 1);
  auto pow2 = [&](llvm::Value* e) {
    llvm::Value* bits = b.CreateShl(b.CreateAdd(e, llvm::ConstantInt::get(ity, 127)),
                                    llvm::ConstantInt::get(ity, 23));
    return b.CreateBitCast(bits, fty);
  };
  y = b.CreateFMul(b.CreateFMul(y, pow2(h)), pow2(b.CreateSub(ni, h)));
  y = b.CreateSelect(b.CreateFCmpOGT(x, c(kMax)), c(std::numeric_limits<double>::infinity()), y);
  y = b.CreateSelect(b.CreateFCmpOLT(x, c(kMin)), c(0.0), y);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, y);
}

llvm::Value* FastTanh(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* fty = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(fty, v); };
  llvm::Value* one = c(1.0);
  llvm::Value* e = FastExp(b, b.CreateFMul(c(2.0), x));
  llvm::Value* big = b.CreateFSub(one, b.CreateFDiv(c(2.0), b.CreateFAdd(e, one)));
  static const double kTaylor[] = {
      // x^17 ... x^3
      6404582.0 / 10854718875.0,
      -929569.0 / 638512875.0,
      21844.0 / 6081075.0,
      -1382.0 / 155925.0,
      62.0 / 2835.0,
      -17.0 / 315.0,
      2.0 / 15.0,
      -1.0 / 3.0,
  };
  llvm::Value* x2 = b.CreateFMul(x, x);
  llvm::Value* p = c(kTaylor[0]);
  for (size_t i = 1; i < std::size(kTaylor); ++i)
    p = b.CreateFAdd(b.CreateFMul(p, x2), c(kTaylor[i]));
  llvm::Value* small = b.CreateFAdd(x, b.CreateFMul(b.CreateFMul(x, x2), p));
  llvm::Value* is_small = b.CreateFCmpOLT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), c(0.5));
  return b.CreateSelect(is_small, small, big);
}

}  // namespace kiln::compiler::codegen
