#include "compiler/ir/ir.h"

#include <gtest/gtest.h>

#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/structural.h"

namespace kiln::ir {
namespace {

// C[i, j] = A[i*16 + j] + B[j] over a 4x16 parallel/serial nest.
PrimFunc MakeAdd(int64_t constant = 16) {
  Buffer a("A", DataType::Float32(), {IntImm(64)});
  Buffer b("B", DataType::Float32(), {IntImm(16)});
  Buffer c("C", DataType::Float32(), {IntImm(64)});
  Var i("i"), j("j");
  Stmt store = Store(c, Load(a, {i * IntImm(constant) + j}) + Load(b, {j}), {i * IntImm(16) + j});
  Stmt body = For(i, 0, 4, ForKind::kParallel, For(j, 0, 16, ForKind::kSerial, store));
  return PrimFunc{"add", {a, b, c}, body};
}

TEST(IrPrinter, LoopNest) {
  EXPECT_EQ(ToText(MakeAdd()),
            "func add(A: float32[64], B: float32[16], C: float32[64]) {\n"
            "  for (i, 0, 4) parallel {\n"
            "    for (j, 0, 16) {\n"
            "      C[i*16 + j] = A[i*16 + j] + B[j]\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(IrPrinter, ExpressionForms) {
  Var x("x"), y("y");
  Buffer a("A", DataType::Float32(), {IntImm(64)});
  EXPECT_EQ(ToText((x - (y - IntImm(1))) * IntImm(2)), "(x - (y - 1))*2");
  EXPECT_EQ(ToText(FloorMod(x, IntImm(3)) + Min(x, y)), "floormod(x, 3) + min(x, y)");
  EXPECT_EQ(ToText(Load(a, {Ramp(x * IntImm(8), IntImm(1), 8)}) + Broadcast(FloatImm(1.5), 8)),
            "A[ramp(x*8, 1, 8)] + broadcast(1.5f, 8)");
  EXPECT_EQ(ToText(Select(x < y, FloatImm(0.0),
                          Call(DataType::Float32(), Intrinsic::kExp, {FloatImm(2.0)}))),
            "select(x < y, 0.0f, exp(2.0f))");
  EXPECT_EQ(ToText(Cast(DataType::Float32(), x)), "float32(x)");
  // Two distinct variables with the same name are told apart.
  Var x2("x");
  EXPECT_EQ(ToText(x + x2), "x + x_1");
}

TEST(IrPrinter, AllocateLetIf) {
  Buffer t("T", DataType::Float32(), {IntImm(8)});
  Var v("v");
  Stmt s = Allocate(t, LetStmt(v, IntImm(3),
                               IfThenElse(v > IntImm(2), Store(t, FloatImm(1.0), {v}),
                                          Store(t, FloatImm(2.0), {v}))));
  EXPECT_EQ(ToText(s),
            "allocate T: float32[8] {\n"
            "  let v = 3\n"
            "  if (v > 2) {\n"
            "    T[v] = 1.0f\n"
            "  } else {\n"
            "    T[v] = 2.0f\n"
            "  }\n"
            "}\n");
}

TEST(IrStructural, AlphaRenamedLoopsAreEqual) {
  PrimFunc f = MakeAdd();
  PrimFunc g = MakeAdd();  // fresh vars and buffers everywhere
  EXPECT_TRUE(StructuralEqual(f, g));
  EXPECT_EQ(StructuralHash(f), StructuralHash(g));
  EXPECT_TRUE(StructuralEqual(f.body, f.body));
}

TEST(IrStructural, ChangedConstantDiffers) {
  PrimFunc f = MakeAdd(16);
  PrimFunc g = MakeAdd(15);
  EXPECT_FALSE(StructuralEqual(f, g));
  EXPECT_NE(StructuralHash(f), StructuralHash(g));
}

TEST(IrStructural, FreeVarsCompareByIdentity) {
  Var x("x"), y("x");
  EXPECT_TRUE(StructuralEqual(x + IntImm(1), x + IntImm(1)));
  EXPECT_FALSE(StructuralEqual(x + IntImm(1), y + IntImm(1)));
  // Bound vs free: a loop over its own var is not equal to one using a free var.
  Buffer b("B", DataType::Float32(), {IntImm(4)});
  Var i("i"), k("k");
  Stmt s1 = For(i, 0, 4, ForKind::kSerial, Store(b, FloatImm(0.0), {i}));
  Stmt s2 = For(k, 0, 4, ForKind::kSerial, Store(b, FloatImm(0.0), {k}));
  Stmt s3 = For(k, 0, 4, ForKind::kSerial, Store(b, FloatImm(0.0), {x}));
  EXPECT_TRUE(StructuralEqual(s1, s2));
  EXPECT_EQ(StructuralHash(s1), StructuralHash(s2));
  EXPECT_FALSE(StructuralEqual(s1, s3));
  // Loop kind matters.
  Stmt s4 = For(k, 0, 4, ForKind::kParallel, Store(b, FloatImm(0.0), {k}));
  EXPECT_FALSE(StructuralEqual(s1, s4));
}

TEST(IrStructural, LetBindings) {
  Var a("a"), b("b"), free("f");
  EXPECT_TRUE(StructuralEqual(Let(a, free, a * IntImm(2)), Let(b, free, b * IntImm(2))));
  EXPECT_FALSE(StructuralEqual(Let(a, free, a * IntImm(2)), Let(b, free, free * IntImm(2))));
}

class RenameLoads : public StmtMutator {
 protected:
  Expr VisitIntImm(const IntImmNode* op, const Expr& self) override {
    return op->value == 16 ? IntImm(32) : self;
  }
};

class CountLoads : public StmtVisitor {
 public:
  int loads = 0;

 protected:
  void VisitBufferLoad(const BufferLoadNode* op) override {
    ++loads;
    StmtVisitor::VisitBufferLoad(op);
  }
};

TEST(IrFunctor, VisitorAndMutator) {
  PrimFunc f = MakeAdd();
  CountLoads c;
  c.VisitStmt(f.body);
  EXPECT_EQ(c.loads, 2);

  RenameLoads m;
  Stmt s = m.VisitStmt(f.body);
  EXPECT_FALSE(s.same_as(f.body));
  EXPECT_EQ(ToText(s),
            "for (i, 0, 4) parallel {\n"
            "  for (j, 0, 32) {\n"
            "    C[i*32 + j] = A[i*32 + j] + B[j]\n"
            "  }\n"
            "}\n");
  // No change -> the very same node.
  StmtMutator identity;
  EXPECT_TRUE(identity.VisitStmt(f.body).same_as(f.body));
}

}  // namespace
}  // namespace kiln::ir
