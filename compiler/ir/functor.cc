#include "compiler/ir/functor.h"

namespace kiln::ir {

// ---------------------------------------------------------------------------
// ExprVisitor

void ExprVisitor::VisitExpr(const Expr& e) {
  KILN_CHECK(e.defined()) << "visiting an undefined expression";
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return VisitIntImm(e.to<IntImmNode>());
    case ExprKind::kFloatImm:
      return VisitFloatImm(e.to<FloatImmNode>());
    case ExprKind::kVar:
      return VisitVar(e.to<VarNode>());
    case ExprKind::kNot:
      return VisitNot(e.to<NotNode>());
    case ExprKind::kSelect:
      return VisitSelect(e.to<SelectNode>());
    case ExprKind::kCast:
      return VisitCast(e.to<CastNode>());
    case ExprKind::kBroadcast:
      return VisitBroadcast(e.to<BroadcastNode>());
    case ExprKind::kRamp:
      return VisitRamp(e.to<RampNode>());
    case ExprKind::kBufferLoad:
      return VisitBufferLoad(e.to<BufferLoadNode>());
    case ExprKind::kCall:
      return VisitCall(e.to<CallNode>());
    case ExprKind::kReduce:
      return VisitReduce(e.to<ReduceNode>());
    case ExprKind::kLet:
      return VisitLet(e.to<LetNode>());
    default:
      KILN_CHECK(IsBinary(e.kind())) << "unknown expression kind " << static_cast<int>(e.kind());
      return VisitBinary(static_cast<const BinaryNode*>(e.get()));
  }
}

void ExprVisitor::VisitBinary(const BinaryNode* op) {
  VisitExpr(op->a);
  VisitExpr(op->b);
}
void ExprVisitor::VisitNot(const NotNode* op) { VisitExpr(op->a); }
void ExprVisitor::VisitSelect(const SelectNode* op) {
  VisitExpr(op->cond);
  VisitExpr(op->true_value);
  VisitExpr(op->false_value);
}
void ExprVisitor::VisitCast(const CastNode* op) { VisitExpr(op->value); }
void ExprVisitor::VisitBroadcast(const BroadcastNode* op) { VisitExpr(op->value); }
void ExprVisitor::VisitRamp(const RampNode* op) {
  VisitExpr(op->base);
  VisitExpr(op->stride);
}
void ExprVisitor::VisitBufferLoad(const BufferLoadNode* op) {
  for (const Expr& i : op->indices) VisitExpr(i);
}
void ExprVisitor::VisitCall(const CallNode* op) {
  for (const Expr& a : op->args) VisitExpr(a);
}
void ExprVisitor::VisitReduce(const ReduceNode* op) {
  for (const IterRange& r : op->axes) {
    VisitExpr(r.min);
    VisitExpr(r.extent);
  }
  VisitExpr(op->source);
  VisitExpr(op->init);
}
void ExprVisitor::VisitLet(const LetNode* op) {
  VisitExpr(op->value);
  VisitExpr(op->body);
}

// ---------------------------------------------------------------------------
// StmtVisitor

void StmtVisitor::VisitStmt(const Stmt& s) {
  KILN_CHECK(s.defined()) << "visiting an undefined statement";
  switch (s.kind()) {
    case StmtKind::kFor:
      return VisitFor(s.to<ForNode>());
    case StmtKind::kBufferStore:
      return VisitBufferStore(s.to<BufferStoreNode>());
    case StmtKind::kSeq:
      return VisitSeq(s.to<SeqNode>());
    case StmtKind::kIfThenElse:
      return VisitIfThenElse(s.to<IfThenElseNode>());
    case StmtKind::kAllocate:
      return VisitAllocate(s.to<AllocateNode>());
    case StmtKind::kLetStmt:
      return VisitLetStmt(s.to<LetStmtNode>());
    case StmtKind::kEvaluate:
      return VisitEvaluate(s.to<EvaluateNode>());
  }
  KILN_CHECK(false) << "unknown statement kind " << static_cast<int>(s.kind());
}

void StmtVisitor::VisitFor(const ForNode* op) {
  VisitExpr(op->min);
  VisitExpr(op->extent);
  VisitStmt(op->body);
}
void StmtVisitor::VisitBufferStore(const BufferStoreNode* op) {
  VisitExpr(op->value);
  for (const Expr& i : op->indices) VisitExpr(i);
}
void StmtVisitor::VisitSeq(const SeqNode* op) {
  for (const Stmt& s : op->seq) VisitStmt(s);
}
void StmtVisitor::VisitIfThenElse(const IfThenElseNode* op) {
  VisitExpr(op->cond);
  VisitStmt(op->then_case);
  if (op->else_case.defined()) VisitStmt(op->else_case);
}
void StmtVisitor::VisitAllocate(const AllocateNode* op) { VisitStmt(op->body); }
void StmtVisitor::VisitLetStmt(const LetStmtNode* op) {
  VisitExpr(op->value);
  VisitStmt(op->body);
}
void StmtVisitor::VisitEvaluate(const EvaluateNode* op) { VisitExpr(op->value); }

// ---------------------------------------------------------------------------
// ExprMutator

Expr ExprMutator::VisitExpr(const Expr& e) {
  KILN_CHECK(e.defined()) << "mutating an undefined expression";
  switch (e.kind()) {
    case ExprKind::kIntImm:
      return VisitIntImm(e.to<IntImmNode>(), e);
    case ExprKind::kFloatImm:
      return VisitFloatImm(e.to<FloatImmNode>(), e);
    case ExprKind::kVar:
      return VisitVar(e.to<VarNode>(), e);
    case ExprKind::kNot:
      return VisitNot(e.to<NotNode>(), e);
    case ExprKind::kSelect:
      return VisitSelect(e.to<SelectNode>(), e);
    case ExprKind::kCast:
      return VisitCast(e.to<CastNode>(), e);
    case ExprKind::kBroadcast:
      return VisitBroadcast(e.to<BroadcastNode>(), e);
    case ExprKind::kRamp:
      return VisitRamp(e.to<RampNode>(), e);
    case ExprKind::kBufferLoad:
      return VisitBufferLoad(e.to<BufferLoadNode>(), e);
    case ExprKind::kCall:
      return VisitCall(e.to<CallNode>(), e);
    case ExprKind::kReduce:
      return VisitReduce(e.to<ReduceNode>(), e);
    case ExprKind::kLet:
      return VisitLet(e.to<LetNode>(), e);
    default:
      KILN_CHECK(IsBinary(e.kind())) << "unknown expression kind " << static_cast<int>(e.kind());
      return VisitBinary(static_cast<const BinaryNode*>(e.get()), e);
  }
}

std::vector<Expr> ExprMutator::VisitExprs(const std::vector<Expr>& es, bool* changed) {
  std::vector<Expr> out;
  out.reserve(es.size());
  for (const Expr& e : es) {
    out.push_back(VisitExpr(e));
    if (!out.back().same_as(e)) *changed = true;
  }
  return out;
}

Expr ExprMutator::VisitBinary(const BinaryNode* op, const Expr& self) {
  Expr a = VisitExpr(op->a);
  Expr b = VisitExpr(op->b);
  if (a.same_as(op->a) && b.same_as(op->b)) return self;
  return MakeBinary(op->kind, a, b);
}
Expr ExprMutator::VisitNot(const NotNode* op, const Expr& self) {
  Expr a = VisitExpr(op->a);
  return a.same_as(op->a) ? self : !a;
}
Expr ExprMutator::VisitSelect(const SelectNode* op, const Expr& self) {
  Expr c = VisitExpr(op->cond);
  Expr t = VisitExpr(op->true_value);
  Expr f = VisitExpr(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return Select(c, t, f);
}
Expr ExprMutator::VisitCast(const CastNode* op, const Expr& self) {
  Expr v = VisitExpr(op->value);
  return v.same_as(op->value) ? self : Cast(op->dtype, v);
}
Expr ExprMutator::VisitBroadcast(const BroadcastNode* op, const Expr& self) {
  Expr v = VisitExpr(op->value);
  return v.same_as(op->value) ? self : Broadcast(v, op->lanes);
}
Expr ExprMutator::VisitRamp(const RampNode* op, const Expr& self) {
  Expr b = VisitExpr(op->base);
  Expr s = VisitExpr(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return self;
  return Ramp(b, s, op->lanes);
}
Expr ExprMutator::VisitBufferLoad(const BufferLoadNode* op, const Expr& self) {
  bool changed = false;
  std::vector<Expr> idx = VisitExprs(op->indices, &changed);
  return changed ? Load(op->buffer, std::move(idx)) : self;
}
Expr ExprMutator::VisitCall(const CallNode* op, const Expr& self) {
  bool changed = false;
  std::vector<Expr> args = VisitExprs(op->args, &changed);
  return changed ? Call(op->dtype, op->op, std::move(args)) : self;
}
Expr ExprMutator::VisitReduce(const ReduceNode* op, const Expr& self) {
  bool changed = false;
  std::vector<IterRange> axes;
  for (const IterRange& r : op->axes) {
    IterRange n{r.var, VisitExpr(r.min), VisitExpr(r.extent)};
    if (!n.min.same_as(r.min) || !n.extent.same_as(r.extent)) changed = true;
    axes.push_back(std::move(n));
  }
  Expr src = VisitExpr(op->source);
  Expr init = VisitExpr(op->init);
  if (!changed && src.same_as(op->source) && init.same_as(op->init)) return self;
  return Reduce(op->reduce_kind, src, std::move(axes), init);
}
Expr ExprMutator::VisitLet(const LetNode* op, const Expr& self) {
  Expr v = VisitExpr(op->value);
  Expr b = VisitExpr(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return Let(op->var, v, b);
}

// ---------------------------------------------------------------------------
// StmtMutator

Stmt StmtMutator::VisitStmt(const Stmt& s) {
  KILN_CHECK(s.defined()) << "mutating an undefined statement";
  switch (s.kind()) {
    case StmtKind::kFor:
      return VisitFor(s.to<ForNode>(), s);
    case StmtKind::kBufferStore:
      return VisitBufferStore(s.to<BufferStoreNode>(), s);
    case StmtKind::kSeq:
      return VisitSeq(s.to<SeqNode>(), s);
    case StmtKind::kIfThenElse:
      return VisitIfThenElse(s.to<IfThenElseNode>(), s);
    case StmtKind::kAllocate:
      return VisitAllocate(s.to<AllocateNode>(), s);
    case StmtKind::kLetStmt:
      return VisitLetStmt(s.to<LetStmtNode>(), s);
    case StmtKind::kEvaluate:
      return VisitEvaluate(s.to<EvaluateNode>(), s);
  }
  KILN_CHECK(false) << "unknown statement kind " << static_cast<int>(s.kind());
  return Stmt();
}

Stmt StmtMutator::VisitFor(const ForNode* op, const Stmt& self) {
  Expr mn = VisitExpr(op->min);
  Expr ext = VisitExpr(op->extent);
  Stmt body = VisitStmt(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
  return For(op->loop_var, mn, ext, op->for_kind, body);
}
Stmt StmtMutator::VisitBufferStore(const BufferStoreNode* op, const Stmt& self) {
  Expr v = VisitExpr(op->value);
  bool changed = !v.same_as(op->value);
  std::vector<Expr> idx = VisitExprs(op->indices, &changed);
  return changed ? Store(op->buffer, v, std::move(idx)) : self;
}
Stmt StmtMutator::VisitSeq(const SeqNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> seq;
  seq.reserve(op->seq.size());
  for (const Stmt& s : op->seq) {
    seq.push_back(VisitStmt(s));
    if (!seq.back().same_as(s)) changed = true;
  }
  return changed ? Seq(std::move(seq)) : self;
}
Stmt StmtMutator::VisitIfThenElse(const IfThenElseNode* op, const Stmt& self) {
  Expr c = VisitExpr(op->cond);
  Stmt t = VisitStmt(op->then_case);
  Stmt e = op->else_case.defined() ? VisitStmt(op->else_case) : Stmt();
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return IfThenElse(c, t, e);
}
Stmt StmtMutator::VisitAllocate(const AllocateNode* op, const Stmt& self) {
  Stmt b = VisitStmt(op->body);
  return b.same_as(op->body) ? self : Allocate(op->buffer, b, op->scope);
}
Stmt StmtMutator::VisitLetStmt(const LetStmtNode* op, const Stmt& self) {
  Expr v = VisitExpr(op->value);
  Stmt b = VisitStmt(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return LetStmt(op->var, v, b);
}
Stmt StmtMutator::VisitEvaluate(const EvaluateNode* op, const Stmt& self) {
  Expr v = VisitExpr(op->value);
  return v.same_as(op->value) ? self : Evaluate(v);
}

namespace {

class Substituter : public StmtMutator {
 public:
  explicit Substituter(const VarMap& m) : m_(m) {}

 protected:
  Expr VisitVar(const VarNode* op, const Expr& self) override {
    auto it = m_.find(op);
    return it == m_.end() ? self : it->second;
  }

 private:
  const VarMap& m_;
};

}  // namespace

Expr Substitute(const Expr& e, const VarMap& m) {
  return m.empty() ? e : Substituter(m).VisitExpr(e);
}
Stmt Substitute(const Stmt& s, const VarMap& m) {
  return m.empty() ? s : Substituter(m).VisitStmt(s);
}

}  // namespace kiln::ir
