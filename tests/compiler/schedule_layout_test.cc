// cache_read and transform_layout: the lowered IR equals a hand-written
// compute definition of the same copy or packing, the packed kernel computes
// the same numbers, the trace replays, and misuse is a typed error.
#include <gtest/gtest.h>

#include <random>

#include "compiler/codegen/jit.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/lower.h"
#include "compiler/lower/simplify.h"
#include "compiler/ops/interpret.h"
#include "compiler/target.h"
#include "compiler/te/layout.h"
#include "compiler/te/schedule.h"

namespace kiln::te {
namespace {
using namespace ir;

std::vector<int64_t> Eval(const std::vector<Expr>& es) {
  std::vector<int64_t> out;
  for (const Expr& e : es) out.push_back(AsConstInt(lower::Simplify(e)).value_or(-1));
  return out;
}

std::vector<Expr> Imms(const std::vector<int64_t>& v) {
  std::vector<Expr> out;
  for (int64_t x : v) out.push_back(IntImm(x));
  return out;
}

TEST(LayoutMap, BlocksAndReordersDimensions) {
  auto m = LayoutMap::Make("OIHW", "OIHW4i16o", {32, 8, 3, 3});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dst_shape(), (std::vector<int64_t>{2, 2, 3, 3, 4, 16}));
  // o=21, i=6, h=1, w=2 -> O=1, I=1, h, w, i%4=2, o%16=5.
  EXPECT_EQ(Eval(m->ToDst(Imms({21, 6, 1, 2}))), (std::vector<int64_t>{1, 1, 1, 2, 2, 5}));
  EXPECT_EQ(Eval(m->ToSrc(Imms({1, 1, 1, 2, 2, 5}))), (std::vector<int64_t>{21, 6, 1, 2}));
  // A block of 1: an inner dimension of extent 1.
  auto one = LayoutMap::Make("OIHW", "OIHW1i16o", {32, 8, 3, 3});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->dst_shape(), (std::vector<int64_t>{2, 8, 3, 3, 1, 16}));
  EXPECT_EQ(Eval(one->ToDst(Imms({21, 6, 1, 2}))), (std::vector<int64_t>{1, 6, 1, 2, 0, 5}));
  EXPECT_EQ(Eval(one->ToSrc(Imms({1, 6, 1, 2, 0, 5}))), (std::vector<int64_t>{21, 6, 1, 2}));
  auto t = LayoutMap::Make("KN", "NK", {3, 5});  // a plain transpose
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dst_shape(), (std::vector<int64_t>{5, 3}));
}

TEST(LayoutMap, MalformedLayoutsAreInvalidArguments) {
  const std::vector<int64_t> shape{1, 24, 8, 8};
  for (auto [dst, why] :
       std::vector<std::pair<std::string, std::string>>{{"NCH", "'W' is missing"},
                                                        {"NCHWW", "'W' appears twice"},
                                                        {"NCHW8x", "'x' is not in the source"},
                                                        {"NCHW0c", "below 1"},
                                                        {"NCHWc", "has no factor"},
                                                        {"N8CHW", "a factor before upper-case"},
                                                        {"NCHW8", "ends in a number"}}) {
    auto m = LayoutMap::Make("NCHW", dst, shape);
    ASSERT_FALSE(m.ok()) << dst;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << dst;
    EXPECT_NE(std::string(m.status().message()).find(why), std::string::npos) << m.status();
  }
  EXPECT_TRUE(LayoutMap::Make("NCHW", "NCHW16c", shape).ok());  // padded, below
  EXPECT_FALSE(LayoutMap::Make("NCH", "NCH", shape).ok());      // rank
  EXPECT_FALSE(LayoutMap::Make("NCHC", "NCHC", shape).ok());    // repeated source letter
}

TEST(LayoutMap, PadsABlockedDimensionWithZerosAndDropsUnitDimensions) {
  // OIHW 20x3x1x1 -> OI8o: O padded to 24, H and W (extent 1) left out.
  Tensor w = Placeholder("w", {20, 3, 1, 1});
  auto m = LayoutMap::Make("OIHW", "OI8o", w->shape);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->padded());
  EXPECT_EQ(m->dst_shape(), (std::vector<int64_t>{3, 3, 8}));
  EXPECT_FALSE(LayoutMap::Make("OIHW", "OI8o", {20, 3, 3, 3}).ok());  // H is 3: not droppable
  auto packed = TransformLayoutOf(w, "OIHW", "OI8o", "wpack");
  ASSERT_TRUE(packed.ok()) << packed.status();
  std::vector<float> in(60), out(72, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);
  const void* ins[] = {in.data()};
  ASSERT_TRUE(compiler::ops::Interpret({w, *packed}, ins, out.data()).ok());
  for (int64_t o = 0; o < 24; ++o) {
    for (int64_t i = 0; i < 3; ++i) {
      const float want = o < 20 ? in[o * 3 + i] : 0.0f;
      EXPECT_EQ(out[(o / 8) * 24 + i * 8 + o % 8], want) << o << "," << i;
    }
  }
}

struct Matmul {
  static constexpr int64_t M = 8, K = 32, N = 64;
  Tensor A = Placeholder("A", {M, K});
  Tensor W = Placeholder("W", {K, N});
  IterRange k = ReduceAxis(K, "k");
  Tensor C = Compute("C", {M, N}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}) * W({k.var, i[1]}), {k});
  });
};

TEST(Schedule, TransformLayoutLowersLikeAHandWrittenPack) {
  Matmul mm;
  Schedule s({mm.C});
  auto packed = s.TransformLayout(mm.W, "KN", "NK16n", {mm.C});
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ((*packed)->name, "W.NK16n");
  EXPECT_EQ((*packed)->shape, (std::vector<int64_t>{4, 32, 16}));
  EXPECT_EQ(s.stages().size(), 2u);  // W.NK16n, C

  // The same packing written by hand, as templates used to.
  Tensor wp = Compute("wp", {4, 32, 16}, [&](const std::vector<Var>& i) {
    return mm.W({i[1], i[0] * IntImm(16) + i[2]});
  });
  IterRange k2 = ReduceAxis(Matmul::K, "k");
  Tensor c2 = Compute("C2", {Matmul::M, Matmul::N}, [&](const std::vector<Var>& i) {
    return Sum(
        mm.A({i[0], k2.var}) * wp({FloorDiv(i[1], IntImm(16)), k2.var, FloorMod(i[1], IntImm(16))}),
        {k2});
  });
  Schedule hand({c2});
  auto f1 = lower::Lower(s, {mm.A, mm.W, mm.C}, "f");
  auto f2 = lower::Lower(hand, {mm.A, mm.W, c2}, "f");
  ASSERT_TRUE(f1.ok() && f2.ok());
  // Parameters and allocations bind by position: names do not matter.
  EXPECT_TRUE(StructuralEqual(*f1, *f2)) << ToText(*f1) << "\nvs\n" << ToText(*f2);
}

TEST(Schedule, PackedAndCachedKernelsComputeTheSameNumbers) {
  Matmul mm;
  Schedule s({mm.C});
  auto packed = s.TransformLayout(mm.W, "KN", "NK16n", {mm.C});
  ASSERT_TRUE(packed.ok());
  auto cached = s.CacheRead(mm.A, {mm.C});
  ASSERT_TRUE(cached.ok()) << cached.status();
  // Pack a 16-column panel of W and cache A's rows per block of columns.
  auto [jo, ji] = s.Split(mm.C, s.Axis(mm.C, 1), 16);
  s.Reorder(mm.C, {jo, s.Axis(mm.C, 0), s.ReduceAxisOf(mm.C, 0), ji});
  s.ComputeAt(*packed, mm.C, jo);
  s.Vectorize(mm.C, ji);
  auto f = lower::Lower(s, {mm.A, mm.W, mm.C}, "packed_mm");
  ASSERT_TRUE(f.ok()) << f.status();
  auto jit = compiler::codegen::JitCompile({*f}, compiler::Target::Host());
  ASSERT_TRUE(jit.ok()) << jit.status();
  auto fn = (*jit)->Lookup("packed_mm");
  ASSERT_TRUE(fn.ok());

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(Matmul::M * Matmul::K), w(Matmul::K * Matmul::N), c(Matmul::M * Matmul::N);
  for (float& x : a) x = u(rng);
  for (float& x : w) x = u(rng);
  void* args[] = {a.data(), w.data(), c.data()};
  ASSERT_EQ((*fn)(args), 0);
  for (int64_t i = 0; i < Matmul::M; ++i) {
    for (int64_t j = 0; j < Matmul::N; ++j) {
      float ref = 0;
      for (int64_t kk = 0; kk < Matmul::K; ++kk)
        ref += a[i * Matmul::K + kk] * w[kk * Matmul::N + j];
      ASSERT_NEAR(c[i * Matmul::N + j], ref, 1e-4) << i << "," << j;
    }
  }
}

TEST(Schedule, CacheReadStagesATile) {
  Tensor A = Placeholder("A", {16, 12});
  Tensor B = Compute("B", {16, 12}, [&](const std::vector<Var>& i) {
    return A({i[0], i[1]}) + FloatImm(1.0);
  });
  auto build = [&](Schedule& s) {
    auto cache = s.CacheRead(A, {B});
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ((*cache)->name, "A.cache");
    auto [io, ii] = s.Split(B, s.Axis(B, 0), 4);
    s.ComputeAt(*cache, B, io);
  };
  Schedule s1({B});
  build(s1);
  auto f1 = lower::Lower(s1, {A, B}, "f");
  ASSERT_TRUE(f1.ok()) << f1.status();
  struct Alloc : StmtVisitor {
    std::vector<std::vector<int64_t>> shapes;
    void VisitAllocate(const AllocateNode* op) override {
      std::vector<int64_t> s;
      for (const Expr& e : op->buffer->shape) s.push_back(*AsConstInt(e));
      shapes.push_back(s);
      StmtVisitor::VisitAllocate(op);
    }
  } al;
  al.VisitStmt(f1->body);
  // A 4 x 12 tile of A, flattened.
  EXPECT_EQ(al.shapes, (std::vector<std::vector<int64_t>>{{48}})) << ToText(*f1);
}

TEST(Schedule, CacheReadAndTransformLayoutMisuseIsATypedError) {
  Matmul mm;
  Tensor other = Placeholder("other", {4});
  Tensor D = Compute("D", {4}, [&](const std::vector<Var>& i) { return other({i[0]}); });
  Schedule s({mm.C});
  auto none = s.CacheRead(mm.A, {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  auto not_reader = s.CacheRead(other, {mm.C});
  EXPECT_EQ(not_reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(not_reader.status().message()).find("C does not read other"),
            std::string::npos)
      << not_reader.status();
  auto foreign = s.CacheRead(other, {D});
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kNotFound);
  auto bad = s.TransformLayout(mm.W, "KN", "NK16x", {mm.C});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("'x' is not in the source"), std::string::npos)
      << bad.status();
  EXPECT_EQ(s.stages().size(), 1u);  // nothing half-applied: C alone
}

}  // namespace
}  // namespace kiln::te
