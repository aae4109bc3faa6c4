#include "compiler/lower/vectorize.h"

#include <optional>

#include "compiler/ir/functor.h"
#include "compiler/lower/ir_util.h"
#include "compiler/lower/simplify.h"

namespace kiln::lower {
using namespace ir;

namespace {

class LoopVectorizer {
 public:
  LoopVectorizer(const VarNode* v, Expr min, int lanes)
      : v_(v), min_(std::move(min)), lanes_(lanes) {}

  std::optional<Stmt> VecStmt(const Stmt& s) {
    if (const auto* seq = s.as<SeqNode>()) {
      std::vector<Stmt> out;
      for (const Stmt& x : seq->seq) {
        auto r = VecStmt(x);
        if (!r) return std::nullopt;
        out.push_back(*r);
      }
      return Seq(out);
    }
    if (const auto* st = s.as<BufferStoreNode>()) {
      if (st->indices.size() != 1) return std::nullopt;
      auto idx = Vec(st->indices[0]);
      auto val = Vec(st->value);
      if (!idx || !val) return std::nullopt;
      if (!IsUnitRamp(*idx)) return std::nullopt;
      return Store(st->buffer, ToVector(*val), {*idx});
    }
    return std::nullopt;
  }

 private:
  bool IsUnitRamp(const Expr& e) {
    const auto* r = e.as<RampNode>();
    if (!r) return false;
    auto s = AsConstInt(Simplify(r->stride));
    return s && *s == 1;
  }

  Expr ToVector(const Expr& e) {
    if (e.dtype().lanes == lanes_) return e;
    return Broadcast(e, lanes_);
  }

  std::optional<Expr> Vec(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return e;
      case ExprKind::kVar:
        if (e.get() == v_) return Ramp(min_, IntImm(1, min_.dtype()), lanes_);
        return e;
      case ExprKind::kBroadcast:
      case ExprKind::kRamp:
      case ExprKind::kReduce:
      case ExprKind::kLet:
        return std::nullopt;
      case ExprKind::kNot: {
        auto a = Vec(e.to<NotNode>()->a);
        if (!a) return std::nullopt;
        return !*a;
      }
      case ExprKind::kCast: {
        const auto* c = e.to<CastNode>();
        auto a = Vec(c->value);
        if (!a) return std::nullopt;
        return Cast(c->dtype.WithLanes(a->dtype().lanes), *a);
      }
      case ExprKind::kSelect: {
        const auto* s = e.to<SelectNode>();
        auto c = Vec(s->cond), t = Vec(s->true_value), f = Vec(s->false_value);
        if (!c || !t || !f) return std::nullopt;
        if (!c->dtype().is_vector() && !t->dtype().is_vector() && !f->dtype().is_vector()) {
          return Select(*c, *t, *f);
        }
        return Select(ToVector(*c), ToVector(*t), ToVector(*f));
      }
      case ExprKind::kBufferLoad: {
        const auto* l = e.to<BufferLoadNode>();
        if (l->indices.size() != 1) return std::nullopt;
        auto idx = Vec(l->indices[0]);
        if (!idx) return std::nullopt;
        // Scalar index: invariant load; unit Ramp: vector load; any other
        // vector index: a gather (codegen emits masked.gather).
        return Load(l->buffer, {*idx});
      }
      case ExprKind::kCall: {
        const auto* c = e.to<CallNode>();
        std::vector<Expr> args;
        bool vec = false;
        for (const Expr& a : c->args) {
          auto r = Vec(a);
          if (!r) return std::nullopt;
          vec = vec || r->dtype().is_vector();
          args.push_back(*r);
        }
        if (!vec) return Call(c->dtype, c->op, args);
        for (Expr& a : args) a = ToVector(a);
        return Call(c->dtype.WithLanes(lanes_), c->op, args);
      }
      default:
        break;
    }
    const auto* b = static_cast<const BinaryNode*>(e.get());
    auto a = Vec(b->a), c = Vec(b->b);
    if (!a || !c) return std::nullopt;
    bool va = a->dtype().is_vector(), vc = c->dtype().is_vector();
    if (!va && !vc) return MakeBinary(e.kind(), *a, *c);
    // Keep index arithmetic in Ramp form.
    const auto* ra = a->as<RampNode>();
    const auto* rc = c->as<RampNode>();
    if (e.kind() == ExprKind::kAdd || e.kind() == ExprKind::kSub) {
      if ((ra || !va) && (rc || !vc)) {
        Expr base_a = ra ? ra->base : *a, base_c = rc ? rc->base : *c;
        Expr st_a = ra ? ra->stride : IntImm(0, a->dtype().Element());
        Expr st_c = rc ? rc->stride : IntImm(0, c->dtype().Element());
        Expr base = Simplify(MakeBinary(e.kind(), base_a, base_c));
        Expr stride = Simplify(MakeBinary(e.kind(), st_a, st_c));
        return Ramp(base, stride, lanes_);
      }
    }
    if (e.kind() == ExprKind::kMul) {
      if (ra && !vc) return Ramp(Simplify(ra->base * *c), Simplify(ra->stride * *c), lanes_);
      if (rc && !va) return Ramp(Simplify(rc->base * *a), Simplify(rc->stride * *a), lanes_);
    }
    return MakeBinary(e.kind(), ToVector(*a), ToVector(*c));
  }

  const VarNode* v_;
  Expr min_;
  int lanes_;
};

bool HasLoop(const Stmt& s) {
  struct F : StmtVisitor {
    bool found = false;
    void VisitFor(const ForNode*) override { found = true; }
    void VisitIfThenElse(const IfThenElseNode*) override { found = true; }
    void VisitAllocate(const AllocateNode*) override { found = true; }
  } f;
  f.VisitStmt(s);
  return f.found;
}

class Vectorizer : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode* op, const Stmt& self) override {
    Stmt body = VisitStmt(op->body);
    if (op->for_kind == ForKind::kVectorized) {
      auto ext = AsConstInt(op->extent);
      if (ext && *ext > 1 && *ext <= 64 && !HasLoop(body)) {
        LoopVectorizer lv(static_cast<const VarNode*>(op->loop_var.get()), op->min,
                          static_cast<int>(*ext));
        if (auto r = lv.VecStmt(body)) return *r;
      }
      return For(op->loop_var, op->min, op->extent, ForKind::kSerial, body);
    }
    if (body.same_as(op->body)) return self;
    return For(op->loop_var, op->min, op->extent, op->for_kind, body);
  }
};

}  // namespace

Stmt VectorizeLoops(const Stmt& s) { return Vectorizer().VisitStmt(s); }

}  // namespace kiln::lower
