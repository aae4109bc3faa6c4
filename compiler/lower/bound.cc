#include "compiler/lower/bound.h"

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ir/functor.h"
#include "compiler/lower/ir_util.h"
#include "compiler/lower/simplify.h"

namespace kiln::lower {
using namespace ir;

namespace {

class RegionCollector : public StmtVisitor {
 public:
  RegionCollector(const Buffer& b, const RangeMap& relaxed) : buffer_(b), ranges_(relaxed) {}
  absl::Status status;
  std::vector<Expr> lo, hi;
  bool any = false;

 protected:
  void VisitFor(const ForNode* op) override {
    auto mn = AsConstInt(Simplify(op->min)), ext = AsConstInt(Simplify(op->extent));
    const auto* v = static_cast<const VarNode*>(op->loop_var.get());
    if (mn && ext && *ext > 0) ranges_[v] = {*mn, *mn + *ext - 1};
    StmtVisitor::VisitFor(op);
    ranges_.erase(v);
  }
  void VisitBufferLoad(const BufferLoadNode* op) override {
    StmtVisitor::VisitBufferLoad(op);
    Add(op, {});
  }
  // An intrinsic's memory operand reads the box of its footprint (AddressOf).
  void VisitCall(const CallNode* op) override {
    const auto* load = op->op == Intrinsic::kAddressOf && op->args.size() > 1
                           ? op->args[0].as<BufferLoadNode>()
                           : nullptr;
    if (load == nullptr) return StmtVisitor::VisitCall(op);
    for (const Expr& idx : load->indices) VisitExpr(idx);
    std::vector<int64_t> footprint;
    for (size_t d = 1; d < op->args.size(); ++d) footprint.push_back(*AsConstInt(op->args[d]));
    Add(load, footprint);
  }

 private:
  void Add(const BufferLoadNode* op, const std::vector<int64_t>& footprint) {
    if (!op->buffer.same_as(buffer_) || !status.ok()) return;
    std::vector<Expr> l, h;
    for (size_t d = 0; d < op->indices.size(); ++d) {
      auto b = SymbolicBounds(Simplify(op->indices[d]), ranges_);
      if (!b) {
        status = absl::InvalidArgumentError(
            StrCat("bound inference: cannot bound an index of ", buffer_->name));
        return;
      }
      l.push_back(Simplify(b->first));
      h.push_back(Simplify(footprint.empty() ? b->second : b->second + IntImm(footprint[d] - 1)));
    }
    if (!any) {
      lo = l;
      hi = h;
      any = true;
      return;
    }
    for (size_t d = 0; d < l.size(); ++d) {
      lo[d] = Simplify(Min(lo[d], l[d]));
      hi[d] = Simplify(Max(hi[d], h[d]));
    }
  }

  const Buffer& buffer_;
  RangeMap ranges_;
};

}  // namespace

absl::StatusOr<Region> InferBound(const Buffer& buffer, const Stmt& scope,
                                  const RangeMap& relaxed) {
  RegionCollector rc(buffer, relaxed);
  rc.VisitStmt(scope);
  if (!rc.status.ok()) return rc.status;
  Region r;
  if (!rc.any) {
    // Not read here: a 1-element region at 0 in every dim.
    for (size_t d = 0; d < buffer->shape.size(); ++d) {
      r.min.push_back(IntImm(0));
      r.extent.push_back(1);
    }
    return r;
  }
  for (size_t d = 0; d < rc.lo.size(); ++d) {
    Expr ext = Simplify(rc.hi[d] - rc.lo[d] + IntImm(1));
    auto c = AsConstInt(ext);
    if (!c) {
      return absl::InvalidArgumentError(StrCat("bound inference: region of ", buffer->name, " dim ",
                                               d, " has no constant extent"));
    }
    r.min.push_back(rc.lo[d]);
    r.extent.push_back(*c);
  }
  return r;
}

}  // namespace kiln::lower
