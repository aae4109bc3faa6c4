#include "compiler/lower/simplify.h"

#include <cmath>

#include "compiler/ir/functor.h"
#include "compiler/lower/ir_util.h"

namespace kiln::lower {
using namespace ir;

namespace {

std::optional<double> AsConstFloat(const Expr& e) {
  if (const auto* f = e.as<FloatImmNode>()) return f->value;
  return std::nullopt;
}

Expr Bool(bool v) { return IntImm(v ? 1 : 0, DataType::Bool()); }

class Simplifier : public StmtMutator {
 public:
  explicit Simplifier(RangeMap ranges) : ranges_(std::move(ranges)) {}

 protected:
  Expr VisitBinary(const BinaryNode* op, const Expr& self) override {
    Expr a = VisitExpr(op->a), b = VisitExpr(op->b);
    DataType t = a.dtype();
    ExprKind k = op->kind;
    auto ca = AsConstInt(a), cb = AsConstInt(b);
    bool scalar_int = t == DataType::Int64() || (t.is_int() && !t.is_vector());
    // Integer constant folding.
    if (ca && cb && t.is_int()) {
      int64_t x = *ca, y = *cb;
      switch (k) {
        case ExprKind::kAdd:
          return IntImm(x + y, t);
        case ExprKind::kSub:
          return IntImm(x - y, t);
        case ExprKind::kMul:
          return IntImm(x * y, t);
        case ExprKind::kDiv:
          if (y != 0) return IntImm(x / y, t);
          break;
        case ExprKind::kMod:
          if (y != 0) return IntImm(x % y, t);
          break;
        case ExprKind::kFloorDiv:
          if (y != 0) return IntImm(FloorDivInt(x, y), t);
          break;
        case ExprKind::kFloorMod:
          if (y != 0) return IntImm(FloorModInt(x, y), t);
          break;
        case ExprKind::kMin:
          return IntImm(std::min(x, y), t);
        case ExprKind::kMax:
          return IntImm(std::max(x, y), t);
        case ExprKind::kEQ:
          return Bool(x == y);
        case ExprKind::kNE:
          return Bool(x != y);
        case ExprKind::kLT:
          return Bool(x < y);
        case ExprKind::kLE:
          return Bool(x <= y);
        case ExprKind::kGT:
          return Bool(x > y);
        case ExprKind::kGE:
          return Bool(x >= y);
        default:
          break;
      }
    }
    if (t.is_bool() && !t.is_vector()) {
      if (k == ExprKind::kAnd) {
        if (ca) return *ca ? b : Bool(false);
        if (cb) return *cb ? a : Bool(false);
      }
      if (k == ExprKind::kOr) {
        if (ca) return *ca ? Bool(true) : b;
        if (cb) return *cb ? Bool(true) : a;
      }
    }
    // Float folding and identities.
    if (t.is_float() && !t.is_vector()) {
      auto fa = AsConstFloat(a), fb = AsConstFloat(b);
      if (fa && fb) {
        switch (k) {
          case ExprKind::kAdd:
            return FloatImm(*fa + *fb, t);
          case ExprKind::kSub:
            return FloatImm(*fa - *fb, t);
          case ExprKind::kMul:
            return FloatImm(*fa * *fb, t);
          case ExprKind::kDiv:
            return FloatImm(*fa / *fb, t);
          case ExprKind::kMin:
            return FloatImm(std::min(*fa, *fb), t);
          case ExprKind::kMax:
            return FloatImm(std::max(*fa, *fb), t);
          default:
            break;
        }
      }
      if (k == ExprKind::kAdd && fb && *fb == 0.0) return a;
      if (k == ExprKind::kAdd && fa && *fa == 0.0) return b;
      if (k == ExprKind::kSub && fb && *fb == 0.0) return a;
      if (k == ExprKind::kMul && fb && *fb == 1.0) return a;
      if (k == ExprKind::kMul && fa && *fa == 1.0) return b;
      if (k == ExprKind::kDiv && fb && *fb == 1.0) return a;
    }
    if (scalar_int && t == DataType::Int64()) {
      if (k == ExprKind::kAdd || k == ExprKind::kSub || k == ExprKind::kMul) {
        Expr e = MakeBinary(k, a, b);
        return FromLinear(ToLinear(e), t);
      }
      if ((k == ExprKind::kFloorDiv || k == ExprKind::kFloorMod) && cb && *cb > 0) {
        int64_t c = *cb;
        if (c == 1) return k == ExprKind::kFloorDiv ? a : IntImm(0, t);
        LinearForm f = ToLinear(a), div, rem;
        for (const auto& [term, coeff] : f.terms) {
          if (coeff % c == 0) {
            div.AddTerm(term, coeff / c);
          } else {
            rem.AddTerm(term, coeff);
          }
        }
        div.constant = FloorDivInt(f.constant, c);
        rem.constant = FloorModInt(f.constant, c);
        auto rb = ConstBounds(rem, ranges_);
        if (rb && rb->first >= 0 && rb->second < c) {
          return k == ExprKind::kFloorDiv ? FromLinear(div, t) : FromLinear(rem, t);
        }
        if (k == ExprKind::kFloorMod && !div.terms.empty()) {
          return FloorMod(FromLinear(rem, t), b);
        }
        if (k == ExprKind::kFloorDiv && !div.terms.empty()) {
          return FromLinear(div, t) + FloorDiv(FromLinear(rem, t), b);
        }
      }
      if (k == ExprKind::kMin || k == ExprKind::kMax) {
        auto d = ConstBounds(ToLinear(a - b), ranges_);
        if (d) {
          if (d->second <= 0) return k == ExprKind::kMin ? a : b;
          if (d->first >= 0) return k == ExprKind::kMin ? b : a;
        }
      }
      if (k >= ExprKind::kEQ && k <= ExprKind::kGE) {
        auto d = ConstBounds(ToLinear(a - b), ranges_);
        if (d) {
          int64_t lo = d->first, hi = d->second;
          switch (k) {
            case ExprKind::kLT:
              if (hi < 0) return Bool(true);
              if (lo >= 0) return Bool(false);
              break;
            case ExprKind::kLE:
              if (hi <= 0) return Bool(true);
              if (lo > 0) return Bool(false);
              break;
            case ExprKind::kGT:
              if (lo > 0) return Bool(true);
              if (hi <= 0) return Bool(false);
              break;
            case ExprKind::kGE:
              if (lo >= 0) return Bool(true);
              if (hi < 0) return Bool(false);
              break;
            case ExprKind::kEQ:
              if (lo == 0 && hi == 0) return Bool(true);
              if (lo > 0 || hi < 0) return Bool(false);
              break;
            case ExprKind::kNE:
              if (lo == 0 && hi == 0) return Bool(false);
              if (lo > 0 || hi < 0) return Bool(true);
              break;
            default:
              break;
          }
        }
      }
    }
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    return MakeBinary(k, a, b);
  }

  Expr VisitNot(const NotNode* op, const Expr& self) override {
    Expr a = VisitExpr(op->a);
    if (auto c = AsConstInt(a)) return Bool(*c == 0);
    return a.same_as(op->a) ? self : !a;
  }

  Expr VisitSelect(const SelectNode* op, const Expr& self) override {
    Expr c = VisitExpr(op->cond);
    if (auto v = AsConstInt(c)) return VisitExpr(*v ? op->true_value : op->false_value);
    Expr t = VisitExpr(op->true_value), f = VisitExpr(op->false_value);
    if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
    return Select(c, t, f);
  }

  Expr VisitCall(const CallNode* op, const Expr& self) override {
    Expr r = ExprMutator::VisitCall(op, self);
    const auto* c = r.as<CallNode>();
    if (c && c->name == "likely" && c->args.size() == 1 && AsConstInt(c->args[0]))
      return c->args[0];
    return r;
  }

  Expr VisitCast(const CastNode* op, const Expr& self) override {
    Expr v = VisitExpr(op->value);
    if (auto c = AsConstInt(v); c && op->dtype.is_float() && !op->dtype.is_vector()) {
      return FloatImm(static_cast<double>(*c), op->dtype);
    }
    if (auto c = AsConstInt(v); c && op->dtype.is_int() && !op->dtype.is_vector())
      return IntImm(*c, op->dtype);
    return v.same_as(op->value) ? self : Cast(op->dtype, v);
  }

  Stmt VisitFor(const ForNode* op, const Stmt& self) override {
    Expr mn = VisitExpr(op->min), ext = VisitExpr(op->extent);
    auto cm = AsConstInt(mn), ce = AsConstInt(ext);
    if (ce && *ce <= 0) return NoOp();
    const auto* v = static_cast<const VarNode*>(op->loop_var.get());
    if (ce && *ce == 1) return VisitStmt(Substitute(op->body, VarMap{{v, mn}}));
    bool ranged = cm && ce;
    if (ranged) ranges_[v] = {*cm, *cm + *ce - 1};
    Stmt body = VisitStmt(op->body);
    if (ranged) ranges_.erase(v);
    if (IsNoOp(body)) return NoOp();
    if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
    return For(op->loop_var, mn, ext, op->for_kind, body);
  }

  Stmt VisitIfThenElse(const IfThenElseNode* op, const Stmt& self) override {
    Expr c = VisitExpr(op->cond);
    Expr bare = IsLikely(c) ? c.as<CallNode>()->args[0] : c;
    if (auto v = AsConstInt(bare)) {
      if (*v) return VisitStmt(op->then_case);
      return op->else_case.defined() ? VisitStmt(op->else_case) : NoOp();
    }
    Stmt t = VisitStmt(op->then_case);
    Stmt e = op->else_case.defined() ? VisitStmt(op->else_case) : Stmt();
    if (IsNoOp(t) && (!e.defined() || IsNoOp(e))) return NoOp();
    if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
    return IfThenElse(c, t, e);
  }

  Stmt VisitSeq(const SeqNode* op, const Stmt& self) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt& s : op->seq) {
      Stmt n = VisitStmt(s);
      changed = changed || !n.same_as(s);
      if (IsNoOp(n)) {
        changed = true;
        continue;
      }
      out.push_back(n);
    }
    if (!changed) return self;
    return Seq(std::move(out));
  }

 private:
  RangeMap ranges_;
};

}  // namespace

Expr Simplify(const Expr& e, const RangeMap& ranges) { return Simplifier(ranges).VisitExpr(e); }
Stmt Simplify(const Stmt& s) { return Simplifier({}).VisitStmt(s); }

}  // namespace kiln::lower
