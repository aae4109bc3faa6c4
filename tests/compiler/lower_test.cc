#include <gtest/gtest.h>

#include <limits>
#include <optional>

#include "compiler/ir/printer.h"
#include "compiler/lower/flatten.h"
#include "compiler/lower/partition.h"
#include "compiler/lower/simplify.h"
#include "compiler/lower/unroll.h"
#include "compiler/lower/vectorize.h"

namespace kiln::lower {
namespace {
using namespace ir;

TEST(Simplify, Rules) {
  Var x("x"), y("y");
  EXPECT_EQ(ToText(Simplify(x + IntImm(0))), "x");
  EXPECT_EQ(ToText(Simplify(x * IntImm(1))), "x");
  EXPECT_EQ(ToText(Simplify(x * IntImm(0) + y)), "y");
  EXPECT_EQ(ToText(Simplify((x + IntImm(3)) + IntImm(4))), "x + 7");
  EXPECT_EQ(ToText(Simplify((x * IntImm(4) + IntImm(3)) - x * IntImm(4))), "3");
  EXPECT_EQ(ToText(Simplify(IntImm(2) * IntImm(3) + IntImm(1))), "7");
  EXPECT_EQ(ToText(Simplify(FloorDiv(x * IntImm(8) + IntImm(4), IntImm(4)))), "x*2 + 1");
  EXPECT_EQ(ToText(Simplify(FloorMod(x * IntImm(8) + IntImm(5), IntImm(4)))), "1");
  EXPECT_EQ(ToText(Simplify(FloorDiv(IntImm(-7), IntImm(2)))), "-4");
  EXPECT_EQ(ToText(Simplify(Min(IntImm(3), IntImm(5)))), "3");
  EXPECT_EQ(ToText(Simplify(Max(x + IntImm(1), x))), "x + 1");
  EXPECT_EQ(ToText(Simplify(FloatImm(1.5) * FloatImm(2.0))), "3.0f");
  // Ranges decide comparisons and divisions.
  RangeMap r{{static_cast<const VarNode*>(x.get()), {0, 3}}};
  EXPECT_EQ(ToText(Simplify(x < IntImm(4), r)), ToText(IntImm(1, DataType::Bool())));
  EXPECT_EQ(ToText(Simplify(FloorDiv(y * IntImm(4) + x, IntImm(4)), r)), "y");
  EXPECT_EQ(ToText(Simplify(FloorMod(y * IntImm(4) + x, IntImm(4)), r)), "x");
  // A fused loop's indices flattened back: m * (f / m) + f % m is f, also
  // scaled and beside other terms; other pairs are left alone.
  Expr f = x + y * IntImm(16);
  EXPECT_EQ(ToText(Simplify(FloorDiv(f, IntImm(56)) * IntImm(56) + FloorMod(f, IntImm(56)))),
            ToText(Simplify(f)));
  EXPECT_EQ(ToText(Simplify(IntImm(7) + FloorDiv(x, IntImm(14)) * IntImm(28) +
                            FloorMod(x, IntImm(14)) * IntImm(2))),
            "x*2 + 7");
  EXPECT_NE(ToText(Simplify(FloorDiv(x, IntImm(14)) * IntImm(13) + FloorMod(x, IntImm(14)))), "x");
}

TEST(Simplify, LoopsOfExtentOneAndZero) {
  Buffer b("b", DataType::Float32(), {IntImm(8)});
  Var i("i");
  Stmt one =
      For(i, IntImm(3), IntImm(1), ForKind::kSerial, Store(b, FloatImm(1.0), {i + IntImm(1)}));
  EXPECT_EQ(ToText(Simplify(one)), "b[4] = 1.0f\n");
  Stmt zero = For(i, IntImm(0), IntImm(0), ForKind::kSerial, Store(b, FloatImm(1.0), {i}));
  EXPECT_TRUE(IsNoOp(Simplify(zero)));
}

TEST(Simplify, FoldsIntegersInTheirOwnWidthAndSignedness) {
  DataType i8 = DataType::Int(8), u8 = DataType::UInt(8), i32 = DataType::Int32(),
           u32 = DataType::UInt(32), u64 = DataType::UInt(64);
  auto folded = [](const Expr& e) -> std::optional<int64_t> { return AsConstInt(Simplify(e)); };
  // Wrapping arithmetic.
  EXPECT_EQ(folded(IntImm(100, i8) + IntImm(100, i8)), -56);
  EXPECT_EQ(folded(IntImm(-128, i8) - IntImm(1, i8)), 127);
  EXPECT_EQ(folded(IntImm(200, u8) + IntImm(100, u8)), 44);
  EXPECT_EQ(folded(IntImm(0, u8) - IntImm(1, u8)), 255);
  EXPECT_EQ(folded(IntImm(1 << 20, i32) * IntImm(1 << 12, i32)), 0);
  // Unsigned division, remainder, min/max and comparisons; constants are
  // taken modulo 2^bits (-1 as uint32 is 4294967295).
  EXPECT_EQ(folded(IntImm(200, u8) / IntImm(7, u8)), 28);
  EXPECT_EQ(folded(FloorMod(IntImm(200, u8), IntImm(7, u8))), 4);
  EXPECT_EQ(folded(IntImm(-2, u64) / IntImm(2, u64)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(folded(Max(IntImm(-1, u32), IntImm(1, u32))), 4294967295LL);
  EXPECT_EQ(folded(Min(IntImm(-1, i32), IntImm(1, i32))), -1);
  EXPECT_EQ(folded(IntImm(-1, u32) > IntImm(1, u32)), 1);
  EXPECT_EQ(folded(IntImm(-1, i32) > IntImm(1, i32)), 0);
  EXPECT_EQ(folded(IntImm(-1, u64) < IntImm(1, u64)), 0);
  EXPECT_EQ(folded(FloorDiv(IntImm(-7, i8), IntImm(2, i8))), -4);
  // Division by zero and INT_MIN / -1 are left to the code generator.
  EXPECT_FALSE(folded(IntImm(5, i32) / IntImm(0, i32)));
  EXPECT_FALSE(folded(IntImm(5, u8) % IntImm(0, u8)));
  EXPECT_FALSE(folded(IntImm(std::numeric_limits<int64_t>::min()) / IntImm(-1)));
  // Result types are kept.
  EXPECT_EQ(Simplify(IntImm(3, u8) * IntImm(5, u8)).dtype(), u8);
}

TEST(Simplify, FoldsCastsOfConstants) {
  DataType u8 = DataType::UInt(8), i8 = DataType::Int(8), u64 = DataType::UInt(64);
  auto folded = [](const Expr& e) -> std::optional<int64_t> { return AsConstInt(Simplify(e)); };
  EXPECT_EQ(folded(Cast(u8, IntImm(-1))), 255);
  EXPECT_EQ(folded(Cast(i8, IntImm(200, u8))), -56);
  EXPECT_EQ(folded(Cast(DataType::Int64(), IntImm(-1, u8))), 255);  // zero-extends
  EXPECT_EQ(folded(Cast(DataType::Int64(), IntImm(-1, i8))), -1);   // sign-extends
  EXPECT_EQ(folded(Cast(DataType::Bool(), IntImm(256, DataType::Int32()))), 1);
  EXPECT_EQ(folded(Cast(DataType::Int32(), IntImm(1, DataType::Bool()))), 1);
  Expr f = Simplify(Cast(DataType::Float64(), IntImm(-1, u64)));
  ASSERT_NE(f.as<FloatImmNode>(), nullptr) << ToText(f);
  EXPECT_EQ(f.as<FloatImmNode>()->value, 18446744073709551615.0);
  Expr g = Simplify(Cast(DataType::Float32(), IntImm(-3, i8)));
  ASSERT_NE(g.as<FloatImmNode>(), nullptr) << ToText(g);
  EXPECT_EQ(g.as<FloatImmNode>()->value, -3.0);
}

TEST(Flatten, MultiDimToRowMajor) {
  Buffer b("b", DataType::Float32(), {IntImm(4), IntImm(5), IntImm(6)});
  Var i("i"), j("j"), k("k");
  PrimFunc f{"f", {b}, Store(b, Load(b, {k, j, i}), {i, j, k})};
  PrimFunc g = FlattenStorage(f);
  ASSERT_EQ(g.params.size(), 1u);
  EXPECT_EQ(*AsConstInt(g.params[0]->shape[0]), 120);
  const auto* st = g.body.as<BufferStoreNode>();
  ASSERT_NE(st, nullptr);
  ASSERT_EQ(st->indices.size(), 1u);
  EXPECT_EQ(ToText(st->indices[0]), "i*30 + j*6 + k");
  EXPECT_EQ(ToText(st->value.as<BufferLoadNode>()->indices[0]), "k*30 + j*6 + i");
}

TEST(Vectorize, LinearLoadsBecomeRampsInvariantsBroadcast) {
  Buffer a("a", DataType::Float32(), {IntImm(64)}), c("c", DataType::Float32(), {IntImm(64)}),
      s("s", DataType::Float32(), {IntImm(1)});
  Var i("i"), o("o");
  Stmt body = Store(c, Load(a, {o * IntImm(8) + i}) * Load(s, {IntImm(0)}), {o * IntImm(8) + i});
  Stmt loop = For(o, IntImm(0), IntImm(8), ForKind::kSerial,
                  For(i, IntImm(0), IntImm(8), ForKind::kVectorized, body));
  Stmt v = VectorizeLoops(loop);
  std::string text = ToText(v);
  EXPECT_NE(text.find("ramp(o*8, 1, 8)"), std::string::npos) << text;
  EXPECT_NE(text.find("broadcast(s[0], 8)"), std::string::npos) << text;
  const auto* f = v.as<ForNode>();
  ASSERT_NE(f, nullptr);
  const auto* st = f->body.as<BufferStoreNode>();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->value.dtype(), DataType::Float32().WithLanes(8));
  EXPECT_NE(st->indices[0].as<RampNode>(), nullptr);
}

TEST(Vectorize, IntegerAndBoolLoops) {
  // Out[i] = select(A[i] < B[i], A[i], B[i] + 1) and Lt[i] = A[i] < B[i] over
  // uint8 / bool buffers become 16-lane vector accesses.
  DataType u8 = DataType::UInt(8);
  Buffer a("a", u8, {IntImm(64)}), b("b", u8, {IntImm(64)}), out("out", u8, {IntImm(64)});
  Buffer lt("lt", DataType::Bool(), {IntImm(64)});
  Var i("i"), o("o");
  Expr idx = o * IntImm(16) + i;
  Expr la = Load(a, {idx}), lb = Load(b, {idx});
  Stmt body = Seq(
      {Store(out, Select(la < lb, la, lb + IntImm(1, u8)), {idx}), Store(lt, !(la >= lb), {idx})});
  Stmt v = VectorizeLoops(For(o, IntImm(0), IntImm(4), ForKind::kSerial,
                              For(i, IntImm(0), IntImm(16), ForKind::kVectorized, body)));
  std::string text = ToText(v);
  const auto* f = v.as<ForNode>();
  ASSERT_NE(f, nullptr) << text;
  const auto* seq = f->body.as<SeqNode>();
  ASSERT_NE(seq, nullptr) << text;
  ASSERT_EQ(seq->seq.size(), 2u);
  const auto* s0 = seq->seq[0].as<BufferStoreNode>();
  const auto* s1 = seq->seq[1].as<BufferStoreNode>();
  ASSERT_TRUE(s0 && s1) << text;
  EXPECT_EQ(s0->value.dtype(), u8.WithLanes(16)) << text;
  EXPECT_EQ(s1->value.dtype(), DataType::Bool().WithLanes(16)) << text;
  const auto* sel = s0->value.as<SelectNode>();
  ASSERT_NE(sel, nullptr) << text;
  EXPECT_EQ(sel->cond.dtype(), DataType::Bool().WithLanes(16));
  EXPECT_NE(text.find("broadcast(uint8(1), 16)"), std::string::npos) << text;
}

TEST(Vectorize, NonVectorizableFallsBackToSerial) {
  Buffer a("a", DataType::Float32(), {IntImm(64)}), acc("acc", DataType::Float32(), {IntImm(1)});
  Var i("i");
  // A reduction into one scalar cannot be a vector store.
  Stmt loop = For(i, IntImm(0), IntImm(8), ForKind::kVectorized,
                  Store(acc, Load(acc, {IntImm(0)}) + Load(a, {i}), {IntImm(0)}));
  Stmt v = VectorizeLoops(loop);
  const auto* f = v.as<ForNode>();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->for_kind, ForKind::kSerial);
}

TEST(Unroll, ReplicatesBody) {
  Buffer b("b", DataType::Float32(), {IntImm(4)});
  Var i("i");
  Stmt u =
      UnrollLoops(For(i, IntImm(0), IntImm(3), ForKind::kUnrolled, Store(b, FloatImm(0.0), {i})));
  EXPECT_EQ(ToText(u), "b[0] = 0.0f\nb[1] = 0.0f\nb[2] = 0.0f\n");
}

TEST(Partition, TailGuardRemovedFromMainLoop) {
  Buffer b("b", DataType::Float32(), {IntImm(10)});
  Var o("o"), i("i");
  Expr idx = o * IntImm(4) + i;
  Stmt loop = For(o, IntImm(0), IntImm(3), ForKind::kSerial,
                  For(i, IntImm(0), IntImm(4), ForKind::kSerial,
                      IfThenElse(Likely(idx < IntImm(10)), Store(b, FloatImm(1.0), {idx}))));
  Stmt p = StripLikely(PartitionLoops(loop));
  const auto* seq = p.as<SeqNode>();
  ASSERT_NE(seq, nullptr) << ToText(p);
  ASSERT_EQ(seq->seq.size(), 2u);
  const auto* main = seq->seq[0].as<ForNode>();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(*AsConstInt(main->extent), 2);
  EXPECT_EQ(ToText(seq->seq[0]).find("if"), std::string::npos) << ToText(p);
  // The tail (o = 2) keeps only i < 2.
  EXPECT_EQ(ToText(seq->seq[1]), "for (i, 0, 2) {\n  b[i + 8] = 1.0f\n}\n") << ToText(p);
}

// A zero-padded copy: out[y][x] = select(inside, in[clamp(y-1)][clamp(x-1)],
// 0) over a 6 x 7 padded extent of a 4 x 5 input, with the column split by
// phase as the depthwise template does (x = xs*2 + p).
TEST(Partition, PaddingSelectsLeaveTheInterior) {
  Buffer in("in", DataType::Float32(), {IntImm(20)});
  Buffer out("out", DataType::Float32(), {IntImm(6 * 8)});
  Var y("y"), p("p"), xs("xs");
  Expr h = y - IntImm(1), x = xs * IntImm(2) + p - IntImm(1);
  Expr ok = h >= IntImm(0) && h < IntImm(4) && x >= IntImm(0) && x < IntImm(5);
  Expr hc = Min(Max(h, IntImm(0)), IntImm(3)), xc = Min(Max(x, IntImm(0)), IntImm(4));
  Expr val = Select(ok, Load(in, {hc * IntImm(5) + xc}), FloatImm(0.0));
  Stmt loop = For(y, IntImm(0), IntImm(6), ForKind::kSerial,
                  For(p, IntImm(0), IntImm(2), ForKind::kSerial,
                      For(xs, IntImm(0), IntImm(4), ForKind::kSerial,
                          Store(out, val, {y * IntImm(8) + p * IntImm(4) + xs}))));
  Stmt s = PartitionSelects(loop);
  const std::string text = ToText(s);
  // Rows: the top padding row, the 4 input rows, the bottom one; no select or
  // clamp is left around the interior columns' loads.
  const auto* seq = s.as<SeqNode>();
  ASSERT_NE(seq, nullptr) << text;
  ASSERT_EQ(seq->seq.size(), 3u) << text;
  EXPECT_EQ(text.find("min("), std::string::npos) << text;
  EXPECT_NE(text.find("out[y*8 + p*4 + xs] = in[y*5 + xs*2 + p - 6]"), std::string::npos) << text;
  // (The values are checked end to end by the depthwise and NCHWc template
  // tests, whose padded stages go through this pass.)
}

// An unrolled phase loop inside the column loop (the stride-2 depthwise copy):
// the column loop is cut where any phase's condition changes, and its
// interior keeps no select.
TEST(Partition, UnrolledPhasesInsideTheColumnLoop) {
  Buffer in("in", DataType::Float32(), {IntImm(8)});
  Buffer out("out", DataType::Float32(), {IntImm(10)});
  Var xs("xs"), p("p");
  Expr x = xs * IntImm(2) + p - IntImm(1);
  Expr ok = x >= IntImm(0) && x < IntImm(8);
  Expr xc = Min(Max(x, IntImm(0)), IntImm(7));
  Stmt loop = For(xs, IntImm(0), IntImm(5), ForKind::kSerial,
                  For(p, IntImm(0), IntImm(2), ForKind::kUnrolled,
                      Store(out, Select(ok, Load(in, {xc}), FloatImm(0.0)), {xs * IntImm(2) + p})));
  Stmt s = PartitionSelects(loop);
  const std::string text = ToText(s);
  const auto* seq = s.as<SeqNode>();
  ASSERT_NE(seq, nullptr) << text;
  EXPECT_EQ(seq->seq.size(), 3u) << text;  // xs = 0, 1..3, 4
  EXPECT_NE(text.find("for (xs, 1, 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("out[xs*2 + p] = in[xs*2 + p - 1]"), std::string::npos) << text;
}

// A padded row copied in vectors (xo tiles of an 8-lane vectorized xi): the
// tile loop is cut where a tile holds a padding column, and the vectorized
// loop inside such a tile is cut around that column; every piece stays
// vectorized and the interior loads keep no select.
TEST(Partition, VectorizedColumnsAroundThePadding) {
  Buffer in("in", DataType::Float32(), {IntImm(40)});
  Buffer out("out", DataType::Float32(), {IntImm(24)});
  Var xo("xo"), xi("xi");
  Expr x = (xo * IntImm(8) + xi) * IntImm(2) - IntImm(1);
  Expr ok = x >= IntImm(0) && x < IntImm(40);
  Expr xc = Min(Max(x, IntImm(0)), IntImm(39));
  Stmt loop =
      For(xo, IntImm(0), IntImm(3), ForKind::kSerial,
          For(xi, IntImm(0), IntImm(8), ForKind::kVectorized,
              Store(out, Select(ok, Load(in, {xc}), FloatImm(0.0)), {xo * IntImm(8) + xi})));
  Stmt s = PartitionSelects(loop);
  const std::string text = ToText(s);
  EXPECT_EQ(text.find("select("), std::string::npos) << text;
  EXPECT_EQ(text.find("min("), std::string::npos) << text;
  // Tile 0: column 0 is padding, 1..7 read in[2*xi - 1].
  EXPECT_NE(text.find("for (xi, 1, 7) vectorized"), std::string::npos) << text;
  EXPECT_NE(text.find("out[xi] = in[xi*2 - 1]"), std::string::npos) << text;
  // Tile 2: columns 16..20 read x = 31..39, columns 21..23 are past the end.
  EXPECT_NE(text.find("for (xi, 0, 5) vectorized"), std::string::npos) << text;
  EXPECT_NE(text.find("for (xi, 5, 3) vectorized"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::lower
