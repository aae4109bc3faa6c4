#include "compiler/ir/structural.h"

#include <bit>
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>

namespace kiln::ir {
namespace {

// ---------------------------------------------------------------------------
// Equality

class EqualChecker {
 public:
  bool Expr_(const Expr& a, const Expr& b) {
    if (a.same_as(b) && !a.defined()) return true;
    if (a.defined() != b.defined()) return false;
    if (a.kind() != b.kind() || !(a.dtype() == b.dtype())) return false;
    if (IsBinary(a.kind())) {
      const auto* x = static_cast<const BinaryNode*>(a.get());
      const auto* y = static_cast<const BinaryNode*>(b.get());
      return Expr_(x->a, y->a) && Expr_(x->b, y->b);
    }
    switch (a.kind()) {
      case ExprKind::kIntImm:
        return a.to<IntImmNode>()->value == b.to<IntImmNode>()->value;
      case ExprKind::kFloatImm: {
        double x = a.to<FloatImmNode>()->value, y = b.to<FloatImmNode>()->value;
        return std::memcmp(&x, &y, sizeof(x)) == 0;
      }
      case ExprKind::kVar:
        return VarUse(a.to<VarNode>(), b.to<VarNode>());
      case ExprKind::kNot:
        return Expr_(a.to<NotNode>()->a, b.to<NotNode>()->a);
      case ExprKind::kSelect: {
        const auto* x = a.to<SelectNode>();
        const auto* y = b.to<SelectNode>();
        return Expr_(x->cond, y->cond) && Expr_(x->true_value, y->true_value) &&
               Expr_(x->false_value, y->false_value);
      }
      case ExprKind::kCast:
        return Expr_(a.to<CastNode>()->value, b.to<CastNode>()->value);
      case ExprKind::kBroadcast: {
        const auto* x = a.to<BroadcastNode>();
        const auto* y = b.to<BroadcastNode>();
        return x->lanes == y->lanes && Expr_(x->value, y->value);
      }
      case ExprKind::kRamp: {
        const auto* x = a.to<RampNode>();
        const auto* y = b.to<RampNode>();
        return x->lanes == y->lanes && Expr_(x->base, y->base) && Expr_(x->stride, y->stride);
      }
      case ExprKind::kBufferLoad: {
        const auto* x = a.to<BufferLoadNode>();
        const auto* y = b.to<BufferLoadNode>();
        return BufferUse(x->buffer, y->buffer) && Exprs(x->indices, y->indices);
      }
      case ExprKind::kCall: {
        const auto* x = a.to<CallNode>();
        const auto* y = b.to<CallNode>();
        return x->op == y->op && Exprs(x->args, y->args);
      }
      case ExprKind::kReduce: {
        const auto* x = a.to<ReduceNode>();
        const auto* y = b.to<ReduceNode>();
        if (x->reduce_kind != y->reduce_kind || x->axes.size() != y->axes.size()) return false;
        for (size_t i = 0; i < x->axes.size(); ++i) {
          if (!Expr_(x->axes[i].min, y->axes[i].min) ||
              !Expr_(x->axes[i].extent, y->axes[i].extent) ||
              !BindVar(x->axes[i].var, y->axes[i].var)) {
            return false;
          }
        }
        return Expr_(x->init, y->init) && Expr_(x->source, y->source);
      }
      case ExprKind::kLet: {
        const auto* x = a.to<LetNode>();
        const auto* y = b.to<LetNode>();
        return Expr_(x->value, y->value) && BindVar(x->var, y->var) && Expr_(x->body, y->body);
      }
      default:
        KILN_CHECK(false) << "unknown expression kind " << static_cast<int>(a.kind());
    }
    return false;
  }

  bool Stmt_(const Stmt& a, const Stmt& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
      case StmtKind::kFor: {
        const auto* x = a.to<ForNode>();
        const auto* y = b.to<ForNode>();
        return x->for_kind == y->for_kind && Expr_(x->min, y->min) && Expr_(x->extent, y->extent) &&
               BindVar(x->loop_var, y->loop_var) && Stmt_(x->body, y->body);
      }
      case StmtKind::kBufferStore: {
        const auto* x = a.to<BufferStoreNode>();
        const auto* y = b.to<BufferStoreNode>();
        return BufferUse(x->buffer, y->buffer) && Exprs(x->indices, y->indices) &&
               Expr_(x->value, y->value);
      }
      case StmtKind::kSeq: {
        const auto* x = a.to<SeqNode>();
        const auto* y = b.to<SeqNode>();
        if (x->seq.size() != y->seq.size()) return false;
        for (size_t i = 0; i < x->seq.size(); ++i) {
          if (!Stmt_(x->seq[i], y->seq[i])) return false;
        }
        return true;
      }
      case StmtKind::kIfThenElse: {
        const auto* x = a.to<IfThenElseNode>();
        const auto* y = b.to<IfThenElseNode>();
        return Expr_(x->cond, y->cond) && Stmt_(x->then_case, y->then_case) &&
               Stmt_(x->else_case, y->else_case);
      }
      case StmtKind::kAllocate: {
        const auto* x = a.to<AllocateNode>();
        const auto* y = b.to<AllocateNode>();
        return x->scope == y->scope && BindBuffer(x->buffer, y->buffer) && Stmt_(x->body, y->body);
      }
      case StmtKind::kLetStmt: {
        const auto* x = a.to<LetStmtNode>();
        const auto* y = b.to<LetStmtNode>();
        return Expr_(x->value, y->value) && BindVar(x->var, y->var) && Stmt_(x->body, y->body);
      }
      case StmtKind::kEvaluate:
        return Expr_(a.to<EvaluateNode>()->value, b.to<EvaluateNode>()->value);
    }
    return false;
  }

  bool Func(const PrimFunc& a, const PrimFunc& b) {
    if (a.params.size() != b.params.size()) return false;
    for (size_t i = 0; i < a.params.size(); ++i) {
      if (!BindBuffer(a.params[i], b.params[i])) return false;
    }
    return Stmt_(a.body, b.body);
  }

 private:
  bool Exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Expr_(a[i], b[i])) return false;
    }
    return true;
  }

  bool BindVarNodes(const VarNode* a, const VarNode* b) {
    if (!(a->dtype == b->dtype)) return false;
    fwd_[a] = b;
    bwd_[b] = a;
    return true;
  }
  bool BindVar(const Var& a, const Var& b) { return BindVarNodes(a.operator->(), b.operator->()); }

  bool VarUse(const VarNode* a, const VarNode* b) {
    auto fa = fwd_.find(a);
    auto fb = bwd_.find(b);
    if (fa == fwd_.end() && fb == bwd_.end()) return a == b;  // both free
    return fa != fwd_.end() && fb != bwd_.end() && fa->second == b && fb->second == a;
  }

  bool BindBuffer(const Buffer& a, const Buffer& b) {
    if (!(a->dtype == b->dtype) || !Exprs(a->shape, b->shape)) return false;
    bfwd_[a.get()] = b.get();
    bbwd_[b.get()] = a.get();
    return BindVar(a->data, b->data);
  }

  bool BufferUse(const Buffer& a, const Buffer& b) {
    auto fa = bfwd_.find(a.get());
    auto fb = bbwd_.find(b.get());
    if (fa == bfwd_.end() && fb == bbwd_.end()) return a.same_as(b);
    return fa != bfwd_.end() && fb != bbwd_.end() && fa->second == b.get() && fb->second == a.get();
  }

  std::unordered_map<const VarNode*, const VarNode*> fwd_, bwd_;
  std::unordered_map<const BufferNode*, const BufferNode*> bfwd_, bbwd_;
};

// ---------------------------------------------------------------------------
// Hashing

class Hasher {
 public:
  uint64_t h = 0x84222325cbf29ce4ull;

  void Mix(uint64_t v) {
    // splitmix64-style combine
    v += 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    h ^= v ^ (v >> 31);
  }
  void MixString(std::string_view s) {
    uint64_t f = 0xcbf29ce484222325ull;
    for (unsigned char c : s) f = (f ^ c) * 0x100000001b3ull;
    Mix(f);
  }
  void MixType(DataType t) {
    Mix((static_cast<uint64_t>(t.code) << 40) ^ (uint64_t(t.bits) << 20) ^ uint64_t(t.lanes));
  }

  void Expr_(const Expr& e) {
    if (!e.defined()) {
      Mix(0xdead);
      return;
    }
    Mix(static_cast<uint64_t>(e.kind()) + 1);
    MixType(e.dtype());
    if (IsBinary(e.kind())) {
      const auto* n = static_cast<const BinaryNode*>(e.get());
      Expr_(n->a);
      Expr_(n->b);
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm:
        Mix(static_cast<uint64_t>(e.to<IntImmNode>()->value));
        return;
      case ExprKind::kFloatImm:
        Mix(std::bit_cast<uint64_t>(e.to<FloatImmNode>()->value));
        return;
      case ExprKind::kVar:
        VarUse(e.to<VarNode>());
        return;
      case ExprKind::kNot:
        Expr_(e.to<NotNode>()->a);
        return;
      case ExprKind::kSelect: {
        const auto* n = e.to<SelectNode>();
        Expr_(n->cond);
        Expr_(n->true_value);
        Expr_(n->false_value);
        return;
      }
      case ExprKind::kCast:
        Expr_(e.to<CastNode>()->value);
        return;
      case ExprKind::kBroadcast:
        Mix(e.to<BroadcastNode>()->lanes);
        Expr_(e.to<BroadcastNode>()->value);
        return;
      case ExprKind::kRamp: {
        const auto* n = e.to<RampNode>();
        Mix(n->lanes);
        Expr_(n->base);
        Expr_(n->stride);
        return;
      }
      case ExprKind::kBufferLoad: {
        const auto* n = e.to<BufferLoadNode>();
        BufferUse(n->buffer);
        for (const Expr& i : n->indices) Expr_(i);
        return;
      }
      case ExprKind::kCall: {
        const auto* n = e.to<CallNode>();
        MixString(NameOf(n->op));
        for (const Expr& a : n->args) Expr_(a);
        return;
      }
      case ExprKind::kReduce: {
        const auto* n = e.to<ReduceNode>();
        Mix(static_cast<uint64_t>(n->reduce_kind));
        for (const IterRange& r : n->axes) {
          Expr_(r.min);
          Expr_(r.extent);
          BindVar(r.var.operator->());
        }
        Expr_(n->init);
        Expr_(n->source);
        return;
      }
      case ExprKind::kLet: {
        const auto* n = e.to<LetNode>();
        Expr_(n->value);
        BindVar(n->var.operator->());
        Expr_(n->body);
        return;
      }
      default:
        KILN_CHECK(false) << "unknown expression kind " << static_cast<int>(e.kind());
    }
  }

  void Stmt_(const Stmt& s) {
    if (!s.defined()) {
      Mix(0xbeef);
      return;
    }
    Mix(static_cast<uint64_t>(s.kind()) + 100);
    switch (s.kind()) {
      case StmtKind::kFor: {
        const auto* n = s.to<ForNode>();
        Mix(static_cast<uint64_t>(n->for_kind));
        Expr_(n->min);
        Expr_(n->extent);
        BindVar(n->loop_var.operator->());
        Stmt_(n->body);
        return;
      }
      case StmtKind::kBufferStore: {
        const auto* n = s.to<BufferStoreNode>();
        BufferUse(n->buffer);
        for (const Expr& i : n->indices) Expr_(i);
        Expr_(n->value);
        return;
      }
      case StmtKind::kSeq:
        Mix(s.to<SeqNode>()->seq.size());
        for (const Stmt& c : s.to<SeqNode>()->seq) Stmt_(c);
        return;
      case StmtKind::kIfThenElse: {
        const auto* n = s.to<IfThenElseNode>();
        Expr_(n->cond);
        Stmt_(n->then_case);
        Stmt_(n->else_case);
        return;
      }
      case StmtKind::kAllocate: {
        const auto* n = s.to<AllocateNode>();
        BindBuffer(n->buffer);
        Stmt_(n->body);
        return;
      }
      case StmtKind::kLetStmt: {
        const auto* n = s.to<LetStmtNode>();
        Expr_(n->value);
        BindVar(n->var.operator->());
        Stmt_(n->body);
        return;
      }
      case StmtKind::kEvaluate:
        Expr_(s.to<EvaluateNode>()->value);
        return;
    }
  }

  void Func(const PrimFunc& f) {
    Mix(f.params.size());
    for (const Buffer& b : f.params) BindBuffer(b);
    Stmt_(f.body);
  }

 private:
  void BindVar(const VarNode* v) {
    MixType(v->dtype);
    vars_[v] = next_++;
  }
  void VarUse(const VarNode* v) {
    auto it = vars_.find(v);
    if (it != vars_.end()) {
      Mix(0x1000 + it->second);
    } else {
      MixString(v->name);
    }
  }
  void BindBuffer(const Buffer& b) {
    MixType(b->dtype);
    Mix(b->shape.size());
    for (const Expr& d : b->shape) Expr_(d);
    bufs_[b.get()] = next_++;
    BindVar(b->data.operator->());
  }
  void BufferUse(const Buffer& b) {
    auto it = bufs_.find(b.get());
    if (it != bufs_.end()) {
      Mix(0x2000 + it->second);
    } else {
      MixString(b->name);
    }
  }

  uint64_t next_ = 0;
  std::unordered_map<const VarNode*, uint64_t> vars_;
  std::unordered_map<const BufferNode*, uint64_t> bufs_;
};

}  // namespace

bool StructuralEqual(const Expr& a, const Expr& b) { return EqualChecker().Expr_(a, b); }
bool StructuralEqual(const Stmt& a, const Stmt& b) { return EqualChecker().Stmt_(a, b); }
bool StructuralEqual(const PrimFunc& a, const PrimFunc& b) { return EqualChecker().Func(a, b); }

uint64_t StructuralHash(const Expr& e) {
  Hasher h;
  h.Expr_(e);
  return h.h;
}
uint64_t StructuralHash(const Stmt& s) {
  Hasher h;
  h.Stmt_(s);
  return h.h;
}
uint64_t StructuralHash(const PrimFunc& f) {
  Hasher h;
  h.Func(f);
  return h.h;
}

}  // namespace kiln::ir
