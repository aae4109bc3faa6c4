#pragma once
// Visitor and mutator base classes for the tensor IR. Dispatch is a switch on
// the node kind; each node kind has one virtual hook with a distinct name (no
// overload hiding in subclasses). Visitors walk every child expression and
// statement; buffer shapes are not walked (buffers are referenced, not
// owned, and mutators keep them as they are). Mutators rebuild a node only when a child changed, so
// an unchanged tree comes back as the same nodes (same_as).
//
//   class CountLoads : public ir::StmtVisitor {
//     void VisitBufferLoad(const ir::BufferLoadNode* op) override {
//       ++n;
//       StmtVisitor::VisitBufferLoad(op);
//     }
//    public:
//     int n = 0;
//   };

#include <unordered_map>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::ir {

class ExprVisitor {
 public:
  virtual ~ExprVisitor() = default;
  virtual void VisitExpr(const Expr& e);

 protected:
  virtual void VisitIntImm(const IntImmNode*) {}
  virtual void VisitFloatImm(const FloatImmNode*) {}
  virtual void VisitVar(const VarNode*) {}
  // All arithmetic, comparison and logical binary kinds.
  virtual void VisitBinary(const BinaryNode* op);
  virtual void VisitNot(const NotNode* op);
  virtual void VisitSelect(const SelectNode* op);
  virtual void VisitCast(const CastNode* op);
  virtual void VisitBroadcast(const BroadcastNode* op);
  virtual void VisitRamp(const RampNode* op);
  virtual void VisitBufferLoad(const BufferLoadNode* op);
  virtual void VisitCall(const CallNode* op);
  virtual void VisitReduce(const ReduceNode* op);
  virtual void VisitLet(const LetNode* op);
};

// Visits statements and every expression inside them.
class StmtVisitor : public ExprVisitor {
 public:
  virtual void VisitStmt(const Stmt& s);

 protected:
  virtual void VisitFor(const ForNode* op);
  virtual void VisitBufferStore(const BufferStoreNode* op);
  virtual void VisitSeq(const SeqNode* op);
  virtual void VisitIfThenElse(const IfThenElseNode* op);
  virtual void VisitAllocate(const AllocateNode* op);
  virtual void VisitLetStmt(const LetStmtNode* op);
  virtual void VisitEvaluate(const EvaluateNode* op);
};

class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  virtual Expr VisitExpr(const Expr& e);

 protected:
  // `self` is the handle of `op`; return it to keep the node unchanged.
  virtual Expr VisitIntImm(const IntImmNode*, const Expr& self) { return self; }
  virtual Expr VisitFloatImm(const FloatImmNode*, const Expr& self) { return self; }
  virtual Expr VisitVar(const VarNode*, const Expr& self) { return self; }
  virtual Expr VisitBinary(const BinaryNode* op, const Expr& self);
  virtual Expr VisitNot(const NotNode* op, const Expr& self);
  virtual Expr VisitSelect(const SelectNode* op, const Expr& self);
  virtual Expr VisitCast(const CastNode* op, const Expr& self);
  virtual Expr VisitBroadcast(const BroadcastNode* op, const Expr& self);
  virtual Expr VisitRamp(const RampNode* op, const Expr& self);
  virtual Expr VisitBufferLoad(const BufferLoadNode* op, const Expr& self);
  virtual Expr VisitCall(const CallNode* op, const Expr& self);
  virtual Expr VisitReduce(const ReduceNode* op, const Expr& self);
  virtual Expr VisitLet(const LetNode* op, const Expr& self);

  // Visits each expression; sets *changed when any result differs.
  std::vector<Expr> VisitExprs(const std::vector<Expr>& es, bool* changed);
};

// Mutates statements and every expression inside them.
class StmtMutator : public ExprMutator {
 public:
  virtual Stmt VisitStmt(const Stmt& s);

 protected:
  virtual Stmt VisitFor(const ForNode* op, const Stmt& self);
  virtual Stmt VisitBufferStore(const BufferStoreNode* op, const Stmt& self);
  virtual Stmt VisitSeq(const SeqNode* op, const Stmt& self);
  virtual Stmt VisitIfThenElse(const IfThenElseNode* op, const Stmt& self);
  virtual Stmt VisitAllocate(const AllocateNode* op, const Stmt& self);
  virtual Stmt VisitLetStmt(const LetStmtNode* op, const Stmt& self);
  virtual Stmt VisitEvaluate(const EvaluateNode* op, const Stmt& self);
};

// Every use of a variable of `m` replaced by its expression.
using VarMap = std::unordered_map<const VarNode*, Expr>;
Expr Substitute(const Expr& e, const VarMap& m);
Stmt Substitute(const Stmt& s, const VarMap& m);

}  // namespace kiln::ir
