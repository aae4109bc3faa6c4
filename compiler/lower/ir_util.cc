#include "compiler/lower/ir_util.h"

#include <algorithm>

#include "compiler/ir/functor.h"
#include "compiler/ir/structural.h"

namespace kiln::lower {
using namespace ir;

namespace {

class VarUse : public StmtVisitor {
 public:
  explicit VarUse(const VarNode* v) : v_(v) {}
  bool found = false;

 protected:
  void VisitVar(const VarNode* op) override { found = found || op == v_; }

 private:
  const VarNode* v_;
};

}  // namespace

int64_t WrapInt(int64_t v, DataType t) {
  if (t.is_bool()) return v != 0 ? 1 : 0;
  if (!t.is_integer() || t.bits >= 64 || t.bits <= 0) return v;
  uint64_t mask = (uint64_t{1} << t.bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t.is_int() && (u >> (t.bits - 1)) != 0) u |= ~mask;  // sign-extend
  return static_cast<int64_t>(u);
}

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorModInt(int64_t a, int64_t b) { return a - FloorDivInt(a, b) * b; }

void LinearForm::AddTerm(const Expr& t, int64_t coeff) {
  if (coeff == 0) return;
  for (auto& [e, c] : terms) {
    // The same term rebuilt (a simplified copy of floordiv(v, 4), say)
    // is the same term: bounds of it subtract to a constant.
    if (e.same_as(t) ||
        (e.kind() == t.kind() && e.kind() != ExprKind::kVar && StructuralEqual(e, t))) {
      c += coeff;
      return;
    }
  }
  terms.emplace_back(t, coeff);
}

int64_t LinearForm::CoeffOf(const VarNode* v) const {
  for (const auto& [e, c] : terms) {
    if (e.get() == v) return c;
  }
  return 0;
}

namespace {
void Accumulate(const Expr& e, int64_t scale, LinearForm* f) {
  if (auto c = AsConstInt(e)) {
    f->constant += scale * *c;
    return;
  }
  if (e.dtype() == DataType::Int64()) {
    if (const auto* a = e.as<AddNode>()) {
      Accumulate(a->a, scale, f);
      Accumulate(a->b, scale, f);
      return;
    }
    if (const auto* s = e.as<SubNode>()) {
      Accumulate(s->a, scale, f);
      Accumulate(s->b, -scale, f);
      return;
    }
    if (const auto* m = e.as<MulNode>()) {
      if (auto c = AsConstInt(m->b)) {
        Accumulate(m->a, scale * *c, f);
        return;
      }
      if (auto c = AsConstInt(m->a)) {
        Accumulate(m->b, scale * *c, f);
        return;
      }
    }
  }
  f->AddTerm(e, scale);
}
}  // namespace

namespace {
// m * c * floordiv(x, m) + c * floormod(x, m) is c * x: the indices of a
// fused loop (fused / extent, fused % extent) flattened back into a row-major
// address are the fused variable again, a contiguous run that vectorizes.
bool FoldDivModPair(LinearForm* f) {
  for (size_t i = 0; i < f->terms.size(); ++i) {
    const auto* d = f->terms[i].first.as<FloorDivNode>();
    auto m = d ? AsConstInt(d->b) : std::nullopt;
    if (!m || *m <= 0) continue;
    for (size_t j = 0; j < f->terms.size(); ++j) {
      const auto* r = f->terms[j].first.as<FloorModNode>();
      const int64_t c = f->terms[j].second;
      if (!r || f->terms[i].second != c * *m || AsConstInt(r->b) != m ||
          !StructuralEqual(r->a, d->a)) {
        continue;
      }
      const Expr x = d->a;
      f->terms.erase(f->terms.begin() + static_cast<ptrdiff_t>(std::max(i, j)));
      f->terms.erase(f->terms.begin() + static_cast<ptrdiff_t>(std::min(i, j)));
      Accumulate(x, c, f);
      return true;
    }
  }
  return false;
}
}  // namespace

LinearForm ToLinear(const Expr& e) {
  LinearForm f;
  Accumulate(e, 1, &f);
  while (FoldDivModPair(&f)) {
  }
  return f;
}

Expr FromLinear(const LinearForm& f, DataType t) {
  Expr out;
  for (const auto& [term, c] : f.terms) {
    if (c == 0) continue;
    if (!out.defined()) {
      if (c == 1) {
        out = term;
      } else {
        out = term * IntImm(c, t);
      }
    } else if (c == 1) {
      out = out + term;
    } else if (c == -1) {
      out = out - term;
    } else if (c < 0) {
      out = out - term * IntImm(-c, t);
    } else {
      out = out + term * IntImm(c, t);
    }
  }
  if (!out.defined()) return IntImm(f.constant, t);
  if (f.constant > 0) return out + IntImm(f.constant, t);
  if (f.constant < 0) return out - IntImm(-f.constant, t);
  return out;
}

namespace {
std::optional<std::pair<int64_t, int64_t>> TermBounds(const Expr& t, const RangeMap& ranges) {
  if (const auto* v = t.as<VarNode>()) {
    auto it = ranges.find(v);
    if (it == ranges.end()) return std::nullopt;
    return it->second;
  }
  if (const auto* m = t.as<FloorModNode>()) {
    if (auto c = AsConstInt(m->b); c && *c > 0) {
      auto inner = ConstBounds(m->a, ranges);
      if (inner && inner->first >= 0 && inner->second < *c) return inner;
      return std::make_pair<int64_t, int64_t>(0, *c - 1);
    }
  }
  if (const auto* d = t.as<FloorDivNode>()) {
    if (auto c = AsConstInt(d->b); c && *c > 0) {
      auto inner = ConstBounds(d->a, ranges);
      if (inner)
        return std::make_pair(FloorDivInt(inner->first, *c), FloorDivInt(inner->second, *c));
    }
  }
  if (const auto* m = t.as<MinNode>()) {
    auto a = ConstBounds(m->a, ranges), b = ConstBounds(m->b, ranges);
    if (a && b) return std::make_pair(std::min(a->first, b->first), std::min(a->second, b->second));
  }
  if (const auto* m = t.as<MaxNode>()) {
    auto a = ConstBounds(m->a, ranges), b = ConstBounds(m->b, ranges);
    if (a && b) return std::make_pair(std::max(a->first, b->first), std::max(a->second, b->second));
  }
  return std::nullopt;
}
}  // namespace

std::optional<std::pair<int64_t, int64_t>> ConstBounds(const LinearForm& f,
                                                       const RangeMap& ranges) {
  int64_t lo = f.constant, hi = f.constant;
  for (const auto& [t, c] : f.terms) {
    if (c == 0) continue;
    auto b = TermBounds(t, ranges);
    if (!b) return std::nullopt;
    if (c >= 0) {
      lo += c * b->first;
      hi += c * b->second;
    } else {
      lo += c * b->second;
      hi += c * b->first;
    }
  }
  return std::make_pair(lo, hi);
}

std::optional<std::pair<int64_t, int64_t>> ConstBounds(const Expr& e, const RangeMap& ranges) {
  if (e.dtype() != DataType::Int64()) return std::nullopt;
  return ConstBounds(ToLinear(e), ranges);
}

std::optional<std::pair<Expr, Expr>> SymbolicBounds(const Expr& e, const RangeMap& ranges) {
  LinearForm f = ToLinear(e);
  LinearForm lo, hi;
  lo.constant = hi.constant = f.constant;
  for (const auto& [t, c] : f.terms) {
    if (c == 0) continue;
    // A term of no varying variable is one value (floordiv(f, 16) of a
    // fused loop outside, say), however wide the range of values it can
    // take: the bounds keep it, so that they subtract to a constant.
    bool varies = false;
    for (const auto& [v, r] : ranges) varies = varies || UsesVar(t, v);
    if (!varies) {
      lo.AddTerm(t, c);
      hi.AddTerm(t, c);
      continue;
    }
    auto b = TermBounds(t, ranges);
    if (!b) return std::nullopt;
    lo.constant += c >= 0 ? c * b->first : c * b->second;
    hi.constant += c >= 0 ? c * b->second : c * b->first;
  }
  return std::make_pair(FromLinear(lo, e.dtype()), FromLinear(hi, e.dtype()));
}

bool IsNoOp(const Stmt& s) {
  if (!s.defined()) return true;
  if (const auto* seq = s.as<SeqNode>()) {
    return std::all_of(seq->seq.begin(), seq->seq.end(), [](const Stmt& x) { return IsNoOp(x); });
  }
  if (const auto* ev = s.as<EvaluateNode>()) return ev->value.as<IntImmNode>() != nullptr;
  return false;
}

Stmt NoOp() { return Seq({}); }

Expr Likely(const Expr& cond) { return Call(DataType::Bool(), Intrinsic::kLikely, {cond}); }

bool IsLikely(const Expr& e) {
  const auto* c = e.as<CallNode>();
  return c && c->op == Intrinsic::kLikely && c->args.size() == 1;
}

bool UsesVar(const Expr& e, const VarNode* v) {
  VarUse u(v);
  u.VisitExpr(e);
  return u.found;
}

bool UsesVar(const Stmt& s, const VarNode* v) {
  VarUse u(v);
  u.VisitStmt(s);
  return u.found;
}

}  // namespace kiln::lower
