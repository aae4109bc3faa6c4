#include "compiler/lower/unroll.h"

#include "compiler/ir/functor.h"
#include "compiler/lower/ir_util.h"

namespace kiln::lower {
using namespace ir;

namespace {

class Unroller : public StmtMutator {
 protected:
  Stmt VisitFor(const ForNode* op, const Stmt& self) override {
    Stmt body = VisitStmt(op->body);
    if (op->for_kind == ForKind::kUnrolled) {
      auto mn = AsConstInt(op->min), ext = AsConstInt(op->extent);
      if (mn && ext && *ext <= 256) {
        std::vector<Stmt> seq;
        const auto* v = static_cast<const VarNode*>(op->loop_var.get());
        for (int64_t i = 0; i < *ext; ++i)
          seq.push_back(Substitute(body, VarMap{{v, IntImm(*mn + i)}}));
        return Seq(seq);
      }
      return For(op->loop_var, op->min, op->extent, ForKind::kSerial, body);
    }
    if (body.same_as(op->body)) return self;
    return For(op->loop_var, op->min, op->extent, op->for_kind, body);
  }
};

}  // namespace

Stmt UnrollLoops(const Stmt& s) { return Unroller().VisitStmt(s); }

}  // namespace kiln::lower
