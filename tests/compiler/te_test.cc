#include <gtest/gtest.h>

#include <cmath>

#include "compiler/te/tensor.h"

namespace kiln::te {
namespace {
using namespace ir;

TEST(Te, ComputeRecordsAxesInputsAndReduction) {
  Tensor A = Placeholder("A", {4, 8});
  IterRange k = ReduceAxis(8, "k");
  Tensor S = Compute("S", {4}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}), {k});
  });
  EXPECT_EQ(S->shape, (std::vector<int64_t>{4}));
  ASSERT_EQ(S->axes.size(), 1u);
  ASSERT_EQ(S->reduce_axes.size(), 1u);
  EXPECT_TRUE(S->reduce_axes[0].var.same_as(k.var));
  ASSERT_EQ(S->inputs.size(), 1u);
  EXPECT_EQ(S->inputs[0].get(), A.op().get());
  const auto* r = S->body.as<ReduceNode>();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reduce_kind, ReduceKind::kSum);
  EXPECT_EQ(OpOfBuffer(S.buffer()).get(), S.op().get());
  Tensor M = Compute("M", {4}, [&](const std::vector<Var>& i) {
    return MaxOf(A({i[0], k.var}), {k});
  });
  EXPECT_EQ(M->body.as<ReduceNode>()->reduce_kind, ReduceKind::kMax);
  EXPECT_TRUE(std::isinf(M->body.as<ReduceNode>()->init.as<FloatImmNode>()->value));
}

TEST(Te, TensorCallIsLoadOfItsBuffer) {
  Tensor A = Placeholder("A", {2, 3});
  Expr e = A({IntImm(1), IntImm(2)});
  const auto* l = e.as<BufferLoadNode>();
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->buffer.same_as(A.buffer()));
  EXPECT_EQ(l->indices.size(), 2u);
}

}  // namespace
}  // namespace kiln::te
