#pragma once
// Shared by the code generator's element-type tests (codegen_types_test.cc,
// codegen_math_test.cc): kernels built by hand from the IR, run through the
// JIT, once scalar and once with 8-lane vector accesses.
// The code generator on every element type: integers of every width and
// signedness, bool, float16/32/64, casts, math intrinsics and bit
// operations, scalar and vectorized (split from codegen_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/codegen/jit.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/codegen/module.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/printer.h"
#include "compiler/kernel.h"
#include "compiler/lower/vectorize.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler::codegen_types {

using namespace kiln::ir;  // NOLINT
using test_util::Jit;

// ---------------------------------------------------------------------------
// Element types: integers of every width and signedness, bool, float64,
// casts and intrinsics. Each kernel is built by hand and run through the JIT,
// once scalar and once with 8-lane vector accesses.

template <typename T>
DataType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::Float32();
  if constexpr (std::is_same_v<T, double>) return DataType::Float64();
  if constexpr (std::is_signed_v<T>) return DataType::Int(8 * sizeof(T));
  return DataType::UInt(8 * sizeof(T));
}

// `v` as a constant of `t` (element type), broadcast to `lanes`.
inline Expr Const(DataType t, double v, int lanes) {
  Expr c = t.is_float() ? FloatImm(v, t) : IntImm(static_cast<int64_t>(v), t);
  return lanes > 1 ? Broadcast(c, lanes) : c;
}

using OutFn = std::function<Expr(const std::vector<Expr>& in)>;
struct OutSpec {
  DataType dtype;
  OutFn fn;
};

// out_k[i] = outs[k].fn(in_0[i], in_1[i], ...) for i in [0, n), `lanes`
// elements at a time (unit-stride Ramp accesses when lanes > 1).
inline PrimFunc Elementwise(const std::string& name, const std::vector<DataType>& ins,
                            const std::vector<OutSpec>& outs, int64_t n, int lanes) {
  std::vector<Buffer> params;
  std::vector<Expr> loads;
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : Ramp(i * IntImm(lanes), IntImm(1), lanes);
  for (size_t k = 0; k < ins.size(); ++k) {
    params.push_back(Buffer("in" + std::to_string(k), ins[k], {IntImm(n)}));
    loads.push_back(Load(params.back(), {idx}));
  }
  std::vector<Stmt> stores;
  for (size_t k = 0; k < outs.size(); ++k) {
    params.push_back(Buffer("out" + std::to_string(k), outs[k].dtype, {IntImm(n)}));
    stores.push_back(Store(params.back(), outs[k].fn(loads), {idx}));
  }
  return PrimFunc{name, params, For(i, 0, n / lanes, ForKind::kSerial, Seq(stores))};
}

// Runs `f` through the JIT on `args` (one pointer per parameter).
inline void RunJit(const PrimFunc& f, std::vector<void*> args) {
  std::unique_ptr<codegen::JitModule> keep;
  auto fn = Jit(f, &keep);
  ASSERT_NE(fn, nullptr);
  ASSERT_EQ(fn(args.data()), 0);
}

template <typename T>
std::vector<T> InterestingValues() {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_signed_v<T>) {
    return {0, 1, 2, 3, 7, 100, -1, -7, -100, L::max(), L::min(), static_cast<T>(L::min() + 1)};
  } else {
    return {0,
            1,
            2,
            3,
            5,
            7,
            100,
            200,
            L::max(),
            static_cast<T>(L::max() - 1),
            static_cast<T>(L::max() / 2),
            static_cast<T>(L::max() / 2 + 1)};
  }
}

// Wrapping arithmetic and the generated code's division rules: x / 0 = 0,
// x % 0 = 0, INT_MIN / -1 = INT_MIN.

}  // namespace kiln::compiler::codegen_types
