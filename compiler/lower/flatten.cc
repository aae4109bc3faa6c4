#include "compiler/lower/flatten.h"

#include <unordered_map>

#include "compiler/ir/functor.h"
#include "compiler/lower/simplify.h"

namespace kiln::lower {
using namespace ir;

namespace {

class Flattener : public StmtMutator {
 public:
  explicit Flattener(bool simplify) : simplify_(simplify) {}
  Buffer Flat(const Buffer& b) {
    auto it = map_.find(b.get());
    if (it != map_.end()) return it->second;
    Buffer flat(b->name, b->dtype, {Simplified(b.NumElements())});
    map_[b.get()] = flat;
    originals_[b.get()] = b;
    return flat;
  }

 protected:
  std::vector<Expr> Index(const Buffer& b, const std::vector<Expr>& idx) {
    if (idx.size() == 1 && b->shape.size() <= 1) return idx;
    KILN_CHECK(idx.size() == b->shape.size()) << "access of " << b->name << " with " << idx.size()
                                              << " indices, rank " << b->shape.size();
    Expr flat;
    for (size_t d = 0; d < idx.size(); ++d) {
      flat = flat.defined() ? flat * b->shape[d] + idx[d] : idx[d];
    }
    return {Simplified(flat)};
  }
  Expr Simplified(const Expr& e) const { return simplify_ ? Simplify(e) : e; }

  Expr VisitBufferLoad(const BufferLoadNode* op, const Expr& self) override {
    bool changed = false;
    std::vector<Expr> idx = VisitExprs(op->indices, &changed);
    return Load(Flat(op->buffer), Index(op->buffer, idx));
  }
  Stmt VisitBufferStore(const BufferStoreNode* op, const Stmt& self) override {
    bool changed = false;
    std::vector<Expr> idx = VisitExprs(op->indices, &changed);
    Expr v = VisitExpr(op->value);
    return Store(Flat(op->buffer), v, Index(op->buffer, idx));
  }
  Stmt VisitAllocate(const AllocateNode* op, const Stmt& self) override {
    Buffer flat = Flat(op->buffer);
    return Allocate(flat, VisitStmt(op->body), op->scope);
  }

 private:
  std::unordered_map<const BufferNode*, Buffer> map_;
  std::unordered_map<const BufferNode*, Buffer> originals_;
  bool simplify_ = true;
};

}  // namespace

PrimFunc FlattenStorage(const PrimFunc& f, bool simplify) {
  Flattener fl(simplify);
  PrimFunc out;
  out.name = f.name;
  for (const Buffer& b : f.params) out.params.push_back(fl.Flat(b));
  out.body = fl.VisitStmt(f.body);
  return out;
}

}  // namespace kiln::lower
