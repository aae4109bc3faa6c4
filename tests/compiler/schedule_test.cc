#include "compiler/te/schedule.h"

#include <gtest/gtest.h>

#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/loop_nest.h"
#include "compiler/lower/lower.h"

namespace kiln::te {
namespace {
using namespace ir;

// Loop names and extents from the outside in, along the first path.
std::vector<std::pair<std::string, int64_t>> Loops(const Stmt& s) {
  std::vector<std::pair<std::string, int64_t>> out;
  struct V : StmtVisitor {
    std::vector<std::pair<std::string, int64_t>>* out;
    void VisitFor(const ForNode* op) override {
      out->emplace_back(op->loop_var.name(), AsConstInt(op->extent).value_or(-1));
      StmtVisitor::VisitFor(op);
    }
  } v;
  v.out = &out;
  v.VisitStmt(s);
  return out;
}

using L = std::vector<std::pair<std::string, int64_t>>;

struct Add {
  Tensor A = Placeholder("A", {16, 12});
  Tensor B = Compute("B", {16, 12}, [&](const std::vector<Var>& i) {
    return A({i[0], i[1]}) + FloatImm(1.0);
  });
};

TEST(Schedule, SplitReorderFuse) {
  Add a;
  Schedule s({a.B});
  auto [io, ii] = s.Split(a.B, s.Axis(a.B, 0), 4);
  s.Reorder(a.B, {io, s.Axis(a.B, 1), ii});
  auto nest = lower::BuildLoopNest(s);
  ASSERT_TRUE(nest.ok());
  EXPECT_EQ(Loops(*nest), (L{{"i.o", 4}, {"j", 12}, {"i.i", 4}}));
  Schedule f({a.B});
  IterVar fused = f.Fuse(a.B, f.Axis(a.B, 0), f.Axis(a.B, 1));
  EXPECT_EQ(fused->name, "i.j.f");
  EXPECT_EQ(Loops(*lower::BuildLoopNest(f)), (L{{"i.j.f", 192}}));
}

TEST(Schedule, TileAndNonDividingSplitGuard) {
  Add a;
  Schedule s({a.B});
  s.Tile(a.B, s.Axis(a.B, 0), s.Axis(a.B, 1), 8, 5);
  auto nest = lower::BuildLoopNest(s);
  ASSERT_TRUE(nest.ok());
  EXPECT_EQ(Loops(*nest), (L{{"i.o", 2}, {"j.o", 3}, {"i.i", 8}, {"j.i", 5}}));
  std::string text = ToText(*nest);
  EXPECT_NE(text.find("likely"), std::string::npos) << text;  // 12 % 5 != 0
}

TEST(Schedule, LoopKindsFollowThePrimitives) {
  Add a;
  Schedule s({a.B});
  auto [io, ii] = s.Split(a.B, s.Axis(a.B, 0), 4);
  auto [jo, ji] = s.Split(a.B, s.Axis(a.B, 1), 4);
  s.Reorder(a.B, {io, jo, ii, ji});
  s.Vectorize(a.B, ji);
  s.Parallel(a.B, io);
  s.Unroll(a.B, ii);
  auto f = lower::Lower(s, {a.A, a.B}, "f");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ToText(*f);
  EXPECT_NE(text.find("for (i.o, 0, 4) parallel"), std::string::npos) << text;
  EXPECT_NE(text.find("for (j.o, 0, 3) {"), std::string::npos) << text;
  // i.i unrolled into four statements, j.i one 4-lane vector each.
  EXPECT_EQ(text.find("for (i.i"), std::string::npos) << text;
  EXPECT_EQ(text.find("for (j.i"), std::string::npos) << text;
  EXPECT_NE(text.find("B[ramp(i.o*48 + j.o*4 + 36, 1, 4)]"), std::string::npos) << text;
}

TEST(Schedule, ComputeAtWithCacheWriteAllocatesTile) {
  Tensor A = Placeholder("A", {8, 16});
  IterRange k = ReduceAxis(16, "k");
  Tensor S = Compute("S", {8}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}), {k});
  });
  Schedule s({S});
  Tensor local = s.CacheWrite(S);
  EXPECT_EQ(local->name, "S.local");
  auto [o, in] = s.Split(S, s.Axis(S, 0), 4);
  s.ComputeAt(local, S, o);
  auto f = lower::Lower(s, {A, S}, "f");
  ASSERT_TRUE(f.ok()) << f.status();
  std::string text = ToText(*f);
  struct Alloc : StmtVisitor {
    std::vector<int64_t> sizes;
    void VisitAllocate(const AllocateNode* op) override {
      sizes.push_back(*AsConstInt(op->buffer->shape[0]));
      StmtVisitor::VisitAllocate(op);
    }
  } al;
  al.VisitStmt(f->body);
  EXPECT_EQ(al.sizes, (std::vector<int64_t>{4})) << text;
}

// Tensorize: the loops from the tensorized one inward are what the emitter
// returns for their box (start and extent per data axis, in the tensor and
// in the stage's scratch), with no init nest; a reduce loop outside it, a
// stage computed inside it, and replaying it are errors.
TEST(Schedule, TensorizeHandsTheBoxToTheEmitter) {
  Tensor A = Placeholder("A", {10, 16});
  IterRange k = ReduceAxis(16, "k");
  Tensor S = Compute("S", {10, 6}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}) * Cast(DataType::Float32(), i[1]), {k});
  });
  Tensor T = Compute("T", {10, 6}, [&](const std::vector<Var>& i) {
    return S({i[0], i[1]}) + FloatImm(1.0);
  });
  std::vector<TensorizeRegion> boxes;
  auto emit = [&](const TensorizeRegion& r) {
    boxes.push_back(r);
    return Evaluate(
        Call(DataType::Int32(), Intrinsic::kPrefetch, {AddressOf(Load(r.out, r.out_index))}));
  };
  Schedule s({T});
  auto [to, ti] = s.Split(T, s.Axis(T, 0), 4);
  s.ComputeAt(S, T, to);
  s.Tensorize(S, s.Axis(S, 0), "box", emit);
  auto f = lower::Lower(s, {A, T}, "f");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(boxes.size(), 1u);
  const TensorizeRegion& b = boxes[0];
  EXPECT_EQ(b.extent, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(ToText(b.start[0]), "i.o*4");
  EXPECT_EQ(ToText(b.start[1]), "0");
  EXPECT_EQ(ToText(b.out_index[0]), "0");  // S's scratch holds the box
  const std::string text = ToText(*f);
  EXPECT_NE(text.find("prefetch(kiln.address_of(S["), std::string::npos) << text;
  EXPECT_EQ(text.find("for k"), std::string::npos) << text;  // no loops, no init

  // The sum's loop outside the tensorized one.
  Schedule outside({T});
  outside.Reorder(S, {outside.ReduceAxisOf(S, 0), outside.Axis(S, 0), outside.Axis(S, 1)});
  outside.Tensorize(S, outside.Axis(S, 0), "box", emit);
  auto bad = lower::Lower(outside, {A, T}, "f");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("reduce loop"), std::string::npos)
      << bad.status();
}

// An emitter's memory operand names the box it reads (AddressOf's
// footprint): a producer computed around the tensorized stage holds that
// box, not the one element whose address is taken.
TEST(Schedule, TensorizedOperandsSizeTheirProducers) {
  Tensor A = Placeholder("A", {10, 16});
  Tensor P = Compute("P", {10, 16}, [&](const std::vector<Var>& i) {
    return A({i[0], i[1]}) * FloatImm(2.0);
  });
  IterRange k = ReduceAxis(16, "k");
  Tensor S = Compute("S", {10, 6}, [&](const std::vector<Var>& i) {
    return Sum(P({i[0], k.var}) * Cast(DataType::Float32(), i[1]), {k});
  });
  Tensor T = Compute("T", {10, 6}, [&](const std::vector<Var>& i) {
    return S({i[0], i[1]}) + FloatImm(1.0);
  });
  for (bool footprint : {true, false}) {
    auto emit = [&](const TensorizeRegion& r) {
      Expr rows = AddressOf(P({r.start[0], IntImm(0)}),
                            footprint ? std::vector<int64_t>{4, 16} : std::vector<int64_t>{});
      return Evaluate(Call(DataType::Int32(), Intrinsic::kPrefetch,
                           {AddressOf(Load(r.out, r.out_index)), rows}));
    };
    Schedule s({T});
    auto [to, ti] = s.Split(T, s.Axis(T, 0), 4);
    s.ComputeAt(S, T, to);
    s.ComputeAt(P, T, to);
    s.Tensorize(S, s.Axis(S, 0), "box", emit);
    auto f = lower::Lower(s, {A, T}, "f");
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string text = ToText(*f);
    EXPECT_NE(text.find(footprint ? "allocate P: float32[64] " : "allocate P: float32[1] "),
              std::string::npos)
        << text;
  }
}

// prefetch(C, at=k.i, ahead=k.o, spread=i): at the top of k.i's body, the
// lines of B that the loops inside it read at the next k.o (the last one
// past the end), issued by row i only for its share of the steps between
// i and k.i; the trace replays to the same IR, and a misplaced loop or a
// tensor the stage does not read is an error, not a crash.
TEST(Schedule, PrefetchFetchesTheNextChunkAShareARow) {
  Tensor A = Placeholder("A", {4, 64});
  Tensor B = Placeholder("B", {64, 32});
  IterRange k = ReduceAxis(64, "k");
  Tensor C = Compute("C", {4, 32}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}) * B({k.var, i[1]}), {k});
  });
  auto make = [&](Schedule& s) {
    auto [ko, ki] = s.Split(C, s.ReduceAxisOf(C, 0), 8);
    auto [k1, k2] = s.Split(C, ki, 2);
    s.Reorder(C, {ko, s.Axis(C, 0), k1, k2, s.Axis(C, 1)});
    s.Prefetch(C, k2, B, ko, 1, s.Axis(C, 0));
  };
  Schedule s({C});
  make(s);
  auto f = lower::Lower(s, {A, B, C}, "f");
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string text = ToText(*f);
  // k.i.i's body reads B[k, 0..31]: 128 bytes, two lines, of chunk k.o + 1.
  // (k.i.o counts 4 steps, the rows 4: floormod(k.i.o, 4) is k.i.o.)
  EXPECT_NE(text.find("if (k.i.o == i) {"), std::string::npos) << text;
  const std::string next = "B[min(k.o + 1, 7)*256 + k.i.o*64 + k.i.i*32";
  EXPECT_NE(text.find("prefetch(kiln.address_of(" + next + "]))"), std::string::npos) << text;
  EXPECT_NE(text.find("prefetch(kiln.address_of(" + next + " + 16]))"), std::string::npos) << text;
  EXPECT_EQ(text.find(next + " + 32]"), std::string::npos) << text;

  Schedule bad({C});
  auto [ko, ki] = bad.Split(C, bad.ReduceAxisOf(C, 0), 8);
  bad.Prefetch(C, ko, B, ki, 1);  // ahead inside at
  EXPECT_EQ(lower::Lower(bad, {A, B, C}, "f").status().code(), absl::StatusCode::kInvalidArgument);
  Tensor D = Placeholder("D", {64});
  Schedule other({C});
  auto [oo, oi] = other.Split(C, other.ReduceAxisOf(C, 0), 8);
  other.Prefetch(C, oi, D, oo, 1);
  auto unread = lower::Lower(other, {A, B, C}, "f");
  ASSERT_FALSE(unread.ok());
  EXPECT_NE(unread.status().message().find("does not read"), std::string::npos) << unread.status();
}

TEST(Schedule, ComputeInlineSubstitutesBody) {
  Tensor A = Placeholder("A", {8});
  Tensor B =
      Compute("B", {8}, [&](const std::vector<Var>& i) { return A({i[0]}) * FloatImm(2.0); });
  Tensor C =
      Compute("C", {8}, [&](const std::vector<Var>& i) { return B({i[0]}) + FloatImm(1.0); });
  Schedule s({C});
  s.ComputeInline(B);
  auto f = lower::Lower(s, {A, C}, "f");
  ASSERT_TRUE(f.ok());
  std::string text = ToText(f->body);
  EXPECT_EQ(text.find("B["), std::string::npos) << text;
  EXPECT_NE(text.find("A[i]*2.0f + 1.0f"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln::te

namespace kiln::te {
namespace {
using namespace ir;

// A matrix product whose k steps read A through a shared copy filled by a
// block's 4x8 threads: set_scope is in the trace and replays; the shared
// copy holds the block's rows (not one thread's), between two barriers.
TEST(Schedule, SharedScopeHoldsTheBlocksRegionBetweenBarriers) {
  auto make = [](Schedule& s, const Tensor& A, const Tensor& C) -> absl::Status {
    auto [io, ii] = s.Split(C, s.Axis(C, 0), 4);
    auto [jo, ji] = s.Split(C, s.Axis(C, 1), 8);
    s.Reorder(C, {io, jo, ii, ji});
    for (auto st : {s.Bind(C, io, ir::ForKind::kBlockY), s.Bind(C, jo, ir::ForKind::kBlockX),
                    s.Bind(C, ii, ir::ForKind::kThreadY), s.Bind(C, ji, ir::ForKind::kThreadX)}) {
      if (!st.ok()) return st;
    }
    auto [ko, ki] = s.Split(C, s.ReduceAxisOf(C, 0), 5);
    auto AA = s.CacheRead(A, {C});
    if (!AA.ok()) return AA.status();
    s.SetScope(*AA, ir::StorageScope::kShared);
    s.ComputeAt(*AA, C, ko);
    auto [y, x] = s.Split(*AA, s.Axis(*AA, 1), 5);
    (void)y;
    return s.Bind(*AA, s.Axis(*AA, 0), ir::ForKind::kThreadY);
  };
  Tensor A = Placeholder("A", {16, 20});
  Tensor B = Placeholder("B", {20, 24});
  IterRange k = ReduceAxis(20, "k");
  Tensor C = Compute("C", {16, 24}, [&](const std::vector<Var>& i) {
    return Sum(A({i[0], k.var}) * B({k.var, i[1]}), {k});
  });
  Schedule s1({C});
  ASSERT_TRUE(make(s1, A, C).ok());
  auto f1 = lower::Lower(s1, {A, B, C}, "f");
  ASSERT_TRUE(f1.ok()) << f1.status();
  const std::string text = ToText(*f1);
  // The block's 4 rows x the k step's 5 columns, not one thread's row.
  EXPECT_NE(text.find("float32[20] shared"), std::string::npos) << text;
  size_t barriers = 0;
  for (size_t at = text.find("kiln.barrier"); at != std::string::npos;
       at = text.find("kiln.barrier", at + 1)) {
    ++barriers;
  }
  EXPECT_EQ(barriers, 2u) << text;
  Schedule bad({C});
  auto AA = bad.CacheRead(A, {C});
  ASSERT_TRUE(AA.ok());
  // Shared without the threads of a block around it: refused when lowered.
  bad.SetScope(*AA, ir::StorageScope::kShared);
  bad.ComputeAt(*AA, C, bad.ReduceAxisOf(C, 0));
  auto f3 = lower::Lower(bad, {A, B, C}, "f");
  ASSERT_FALSE(f3.ok());
  EXPECT_NE(f3.status().message().find("not inside a GPU block's threads"), std::string::npos)
      << f3.status();
}

}  // namespace
}  // namespace kiln::te
