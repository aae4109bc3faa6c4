#include "compiler/lower/simplify.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

// Folds `x kind y` for canonical (WrapInt) constants of integer type `t`,
// wrapping like the generated code. Division by zero and INT_MIN / -1 are
// left to the code generator.
std::optional<Expr> FoldInt(ExprKind k, int64_t x, int64_t y, DataType t) {
  auto imm = [&](uint64_t v) { return IntImm(WrapInt(static_cast<int64_t>(v), t), t); };
  const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (k) {
    case ExprKind::kAdd:
      return imm(ux + uy);
    case ExprKind::kSub:
      return imm(ux - uy);
    case ExprKind::kMul:
      return imm(ux * uy);
    case ExprKind::kEQ:
      return Bool(x == y);
    case ExprKind::kNE:
      return Bool(x != y);
    default:
      break;
  }
  if (t.is_uint()) {
    switch (k) {
      case ExprKind::kDiv:
      case ExprKind::kFloorDiv:
        if (uy != 0) return imm(ux / uy);
        break;
      case ExprKind::kMod:
      case ExprKind::kFloorMod:
        if (uy != 0) return imm(ux % uy);
        break;
      case ExprKind::kMin:
        return imm(std::min(ux, uy));
      case ExprKind::kMax:
        return imm(std::max(ux, uy));
      case ExprKind::kLT:
        return Bool(ux < uy);
      case ExprKind::kLE:
        return Bool(ux <= uy);
      case ExprKind::kGT:
        return Bool(ux > uy);
      case ExprKind::kGE:
        return Bool(ux >= uy);
      default:
        break;
    }
    return std::nullopt;
  }
  bool divisible = y != 0 && !(y == -1 && x == std::numeric_limits<int64_t>::min());
  switch (k) {
    case ExprKind::kDiv:
      if (divisible) return imm(static_cast<uint64_t>(x / y));
      break;
    case ExprKind::kMod:
      if (divisible) return imm(static_cast<uint64_t>(x % y));
      break;
    case ExprKind::kFloorDiv:
      if (divisible) return imm(static_cast<uint64_t>(FloorDivInt(x, y)));
      break;
    case ExprKind::kFloorMod:
      if (divisible) return imm(static_cast<uint64_t>(FloorModInt(x, y)));
      break;
    case ExprKind::kMin:
      return imm(static_cast<uint64_t>(std::min(x, y)));
    case ExprKind::kMax:
      return imm(static_cast<uint64_t>(std::max(x, y)));
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
  return std::nullopt;
}

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
    // Integer constant folding, in the type's own width and signedness.
    if (ca && cb && (t.is_int() || t.is_uint()) && !t.is_vector()) {
      if (auto r = FoldInt(k, WrapInt(*ca, t), WrapInt(*cb, t), t)) return *r;
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
    if (c && c->op == Intrinsic::kLikely && c->args.size() == 1 && AsConstInt(c->args[0]))
      return c->args[0];
    return r;
  }

  Expr VisitCast(const CastNode* op, const Expr& self) override {
    Expr v = VisitExpr(op->value);
    DataType from = v.dtype(), to = op->dtype;
    if (auto c = AsConstInt(v); c && !to.is_vector() && (from.is_integer() || from.is_bool())) {
      int64_t x = WrapInt(*c, from);
      if (to.is_float()) {
        double d =
            from.is_uint() ? static_cast<double>(static_cast<uint64_t>(x)) : static_cast<double>(x);
        return FloatImm(d, to);
      }
      // Integer and bool results: sign- or zero-extension and truncation
      // are both what WrapInt does to the canonical value.
      if (to.is_integer() || to.is_bool()) return IntImm(WrapInt(x, to), to);
    }
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
