// The inline float32 exp (compiler/codegen/fast_math.h) against the C
// library's, vectorized and scalar: within 2 ulp over the whole range, the
// subnormal results included, and exact at the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/jit.h"
#include "compiler/ir/ir.h"
#include "compiler/target.h"

namespace kiln::compiler {
namespace {

using namespace kiln::ir;  // NOLINT

// Out[i] = f(In[i]) for i < n, `lanes` at a time (n a multiple of lanes).
std::vector<float> Apply(Intrinsic f, const std::vector<float>& in, int lanes) {
  const int64_t n = static_cast<int64_t>(in.size());
  Buffer a("In", DataType::Float32(), {IntImm(n)});
  Buffer out("Out", DataType::Float32(), {IntImm(n)});
  Var i("i");
  Expr idx = lanes == 1 ? Expr(i) : Ramp(i * IntImm(lanes), IntImm(1), lanes);
  Stmt body =
      For(i, 0, n / lanes, ForKind::kSerial,
          Store(out, Call(DataType::Float32().WithLanes(lanes), f, {Load(a, {idx})}), {idx}));
  auto m = codegen::JitCompile({PrimFunc{"k", {a, out}, body}}, Target::Host());
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto fn = (*m)->Lookup("k");
  EXPECT_TRUE(fn.ok()) << fn.status();
  std::vector<float> y(in.size(), -1.0f);
  void* args[] = {const_cast<float*>(in.data()), y.data()};
  EXPECT_EQ((*fn)(args), 0);
  return y;
}

int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int32_t>::min() - ib;
  return std::abs(static_cast<int64_t>(ia) - ib);
}

TEST(CodegenFastMath, ExpWithinTwoUlpOfTheCLibrary) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f,    -0.0f,  1.0f,  -1.0f,   88.72283f, 88.7229f,
                          89.0f,   -87.3f, -95.f, -103.9f, -103.973f, -104.0f,
                          -200.0f, inf,    -inf,  1e-8f,   -1e-8f,    0.5f * 0.6931472f};
  for (int k = 0; k <= 20000; ++k) x.push_back(-104.0f + 193.0f * static_cast<float>(k) / 20000);
  while (x.size() % 16 != 0) x.push_back(0.25f);
  for (int lanes : {1, 4, 16}) {
    SCOPED_TRACE("lanes " + std::to_string(lanes));
    std::vector<float> y = Apply(Intrinsic::kExp, x, lanes);
    ASSERT_EQ(y.size(), x.size());
    for (size_t k = 0; k < x.size(); ++k) {
      const float want = std::exp(x[k]);
      ASSERT_LE(UlpDistance(y[k], want), 2)
          << "exp(" << x[k] << ") = " << y[k] << ", want " << want;
    }
    EXPECT_EQ(y[0], 1.0f);
    std::vector<float> nan = Apply(Intrinsic::kExp, std::vector<float>(16, std::nanf("")), lanes);
    ASSERT_EQ(nan.size(), 16u);
    EXPECT_TRUE(std::isnan(nan[0]));
  }
}

TEST(CodegenFastMath, TanhAndSigmoidFollowExp) {
  std::vector<float> x;
  for (int k = 0; k < 4096; ++k) x.push_back(-20.0f + 40.0f * static_cast<float>(k) / 4096);
  std::vector<float> t = Apply(Intrinsic::kTanh, x, 16), s = Apply(Intrinsic::kSigmoid, x, 16);
  ASSERT_EQ(t.size(), x.size());
  ASSERT_EQ(s.size(), x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_NEAR(t[k], std::tanh(x[k]), 2e-7) << x[k];
    EXPECT_NEAR(s[k], 1.0f / (1.0f + std::exp(-x[k])), 2e-7) << x[k];
  }
}

}  // namespace
}  // namespace kiln::compiler
