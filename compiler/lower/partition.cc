#include "compiler/lower/partition.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "compiler/ir/functor.h"
#include "compiler/lower/ir_util.h"
#include "compiler/lower/simplify.h"

namespace kiln::lower {
using namespace ir;

namespace {

// f without its term in v.
LinearForm WithoutVar(const LinearForm& f, const VarNode* v) {
  LinearForm rest;
  rest.constant = f.constant;
  for (const auto& [t, c] : f.terms) {
    if (t.get() != v) rest.AddTerm(t, c);
  }
  return rest;
}

// [min, max] of a loop with constant bounds.
std::optional<std::pair<int64_t, int64_t>> ConstRange(const ForNode* op) {
  auto mn = AsConstInt(op->min), ext = AsConstInt(op->extent);
  if (!mn || !ext) return std::nullopt;
  return std::make_pair(*mn, *mn + *ext - 1);
}

// Finds guards of a loop variable whose other variables are all inner loops.
class GuardFinder : public StmtVisitor {
 public:
  explicit GuardFinder(const VarNode* v) : v_(v) {}
  std::vector<const IfThenElseNode*> guards;
  int64_t bound = INT64_MAX;  // guards hold for v < bound

 protected:
  void VisitFor(const ForNode* op) override {
    const auto* lv = static_cast<const VarNode*>(op->loop_var.get());
    if (auto r = ConstRange(op)) ranges_[lv] = *r;
    StmtVisitor::VisitFor(op);
    ranges_.erase(lv);
  }
  void VisitIfThenElse(const IfThenElseNode* op) override {
    StmtVisitor::VisitIfThenElse(op);
    if (!IsLikely(op->cond) || op->else_case.defined()) return;
    const auto* lt = op->cond.as<CallNode>()->args[0].as<LTNode>();
    if (!lt || lt->a.dtype() != DataType::Int64()) return;
    LinearForm f = ToLinear(Simplify(lt->a - lt->b));  // guard: f < 0
    int64_t cv = f.CoeffOf(v_);
    if (cv <= 0) return;
    auto rb = ConstBounds(WithoutVar(f, v_), ranges_);
    if (!rb) return;
    // cv*v + rhi < 0  <=>  v <= floor((-rhi - 1) / cv)
    int64_t end = FloorDivInt(-rb->second - 1, cv) + 1;
    bound = std::min(bound, end);
    guards.push_back(op);
  }

 private:
  const VarNode* v_;
  RangeMap ranges_;
};

class GuardRemover : public StmtMutator {
 public:
  explicit GuardRemover(std::unordered_set<const IfThenElseNode*> g) : g_(std::move(g)) {}

 protected:
  Stmt VisitIfThenElse(const IfThenElseNode* op, const Stmt& self) override {
    if (g_.count(op)) return VisitStmt(op->then_case);
    return StmtMutator::VisitIfThenElse(op, self);
  }

 private:
  std::unordered_set<const IfThenElseNode*> g_;
};

class Partitioner : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode* op, const Stmt& self) override {
    auto mn = AsConstInt(op->min), ext = AsConstInt(op->extent);
    const auto* v = static_cast<const VarNode*>(op->loop_var.get());
    // A thread-bound loop is one launch: its guards stay (cutting it would
    // run the tail after the main part in the same threads).
    if (mn && ext && !IsThreadBinding(op->for_kind)) {
      GuardFinder gf(v);
      gf.VisitStmt(op->body);
      if (!gf.guards.empty()) {
        int64_t lo = *mn, hi = *mn + *ext;
        int64_t split = std::clamp(gf.bound, lo, hi);
        std::unordered_set<const IfThenElseNode*> g(gf.guards.begin(), gf.guards.end());
        std::vector<Stmt> parts;
        if (split > lo) {
          Stmt main = GuardRemover(g).VisitStmt(op->body);
          parts.push_back(
              Simplify(For(op->loop_var, IntImm(lo), IntImm(split - lo), op->for_kind, main)));
        }
        if (hi > split) {
          Stmt tail = For(op->loop_var, IntImm(split), IntImm(hi - split), op->for_kind, op->body);
          parts.push_back(Simplify(tail));
        }
        if (split > lo) {
          std::vector<Stmt> out;
          for (const Stmt& p : parts) out.push_back(VisitStmt(p));
          return Seq(out);
        }
        // Guards never hold fully: nothing to gain at this loop.
      }
    }
    return StmtMutator::VisitFor(op, self);
  }
};

// Values of v where a select condition in the body comparing c*v + rest
// with 0 changes, rest being constant or made of enclosing loops' variables
// (`ranges`) or inner unrolled or vectorized loops': for those, the cuts of
// rest's two extremes.
class SelectCutFinder : public StmtVisitor {
 public:
  SelectCutFinder(const VarNode* v, const RangeMap& ranges) : v_(v), ranges_(ranges) {}
  std::vector<int64_t> cuts;

 protected:
  void VisitFor(const ForNode* op) override {
    const auto* lv = static_cast<const VarNode*>(op->loop_var.get());
    // An inner unrolled or vectorized loop's variable ranges over its
    // bounds (its copies or lanes see the piece whole): a cut of the outer
    // loop then separates the iterations whose phases or vector hold a
    // boundary (the first and last vector of a padded row) from those that
    // hold none. Inner serial loops are cut on their own instead (taking
    // their ranges here cut a direct depthwise convolution into pieces that
    // ran 3x slower).
    auto r = ConstRange(op);
    const bool whole =
        r && (op->for_kind == ForKind::kUnrolled || op->for_kind == ForKind::kVectorized);
    if (whole) ranges_[lv] = *r;
    StmtVisitor::VisitFor(op);
    if (whole) ranges_.erase(lv);
  }
  void VisitSelect(const SelectNode* op) override {
    Conditions(op->cond);
    StmtVisitor::VisitSelect(op);
  }

 private:
  void Conditions(const Expr& c) {
    if (c->kind == ExprKind::kAnd || c->kind == ExprKind::kOr) {
      const auto* b = static_cast<const BinaryNode*>(c.get());
      Conditions(b->a);
      Conditions(b->b);
      return;
    }
    int64_t t = 0;  // the condition is f < t, f <= t - 1, or their negation
    switch (c->kind) {
      case ExprKind::kLT:
      case ExprKind::kGE:
        t = 0;
        break;
      case ExprKind::kLE:
      case ExprKind::kGT:
        t = 1;
        break;
      default:
        return;
    }
    const auto* b = static_cast<const BinaryNode*>(c.get());
    if (b->a.dtype() != DataType::Int64()) return;
    LinearForm f = ToLinear(Simplify(b->a - b->b));
    const int64_t cv = f.CoeffOf(v_);
    if (cv == 0) return;
    auto rb = ConstBounds(WithoutVar(f, v_), ranges_);
    if (!rb) return;
    // c*v + k < t: for c > 0 holds below ceil((t - k) / c), for c < 0 from
    // floor((t - k) / c) + 1 on.
    for (int64_t k : {rb->first, rb->second}) {
      cuts.push_back(cv > 0 ? -FloorDivInt(k - t, cv) : FloorDivInt(t - k, cv) + 1);
    }
  }

  const VarNode* v_;
  RangeMap ranges_;
};

class SelectPartitioner : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode* op, const Stmt& self) override {
    auto mn = AsConstInt(op->min), ext = AsConstInt(op->extent);
    const auto* v = static_cast<const VarNode*>(op->loop_var.get());
    if (!mn || !ext) return StmtMutator::VisitFor(op, self);
    const int64_t lo = *mn, hi = *mn + *ext;
    ranges_[v] = {lo, hi - 1};
    Stmt out = Partition(op, self, lo, hi);
    ranges_.erase(v);
    return out;
  }

 private:
  Stmt Partition(const ForNode* op, const Stmt& self, int64_t lo, int64_t hi) {
    // A vectorized loop's pieces stay vectorized (narrower vectors).
    if (op->for_kind != ForKind::kSerial && op->for_kind != ForKind::kVectorized)
      return StmtMutator::VisitFor(op, self);
    SelectCutFinder f(static_cast<const VarNode*>(op->loop_var.get()), ranges_);
    f.VisitStmt(op->body);
    std::vector<int64_t> cuts = {lo};
    std::sort(f.cuts.begin(), f.cuts.end());
    for (int64_t c : f.cuts) {
      if (c > cuts.back() && c < hi) cuts.push_back(c);
    }
    // A few pieces at most (padding: before, inside, after).
    if (cuts.size() < 2 || cuts.size() > 5) return StmtMutator::VisitFor(op, self);
    cuts.push_back(hi);
    std::vector<Stmt> parts;
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      Stmt piece = Simplify(For(op->loop_var, IntImm(cuts[i]), IntImm(cuts[i + 1] - cuts[i]),
                                op->for_kind, op->body));
      parts.push_back(VisitStmt(piece));
    }
    return Seq(parts);
  }

  RangeMap ranges_;  // enclosing loops
};

class LikelyStripper : public StmtMutator {
 protected:
  Expr VisitCall(const CallNode* op, const Expr& self) override {
    if (op->op == Intrinsic::kLikely && op->args.size() == 1) return VisitExpr(op->args[0]);
    return ExprMutator::VisitCall(op, self);
  }
};

}  // namespace

Stmt PartitionLoops(const Stmt& s) { return Simplify(Partitioner().VisitStmt(Simplify(s))); }
Stmt PartitionSelects(const Stmt& s) { return Simplify(SelectPartitioner().VisitStmt(s)); }
Stmt StripLikely(const Stmt& s) { return LikelyStripper().VisitStmt(s); }

}  // namespace kiln::lower
