#include "compiler/te/schedule.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ir/functor.h"
#include "compiler/te/layout.h"

namespace kiln::te {
using namespace ir;

namespace {

IterVar MakeIv(const std::string& name, int64_t extent, bool reduce) {
  auto iv = std::make_shared<IterVarNode>();
  iv->name = name;
  iv->var = Var(name);
  iv->extent = extent;
  iv->reduce = reduce;
  return iv;
}

Stage MakeStage(const Tensor& t) {
  Stage s;
  s.tensor = t;
  for (const IterRange& r : t->axes)
    s.root.push_back(MakeIv(r.var.name(), *AsConstInt(r.extent), false));
  for (const IterRange& r : t->reduce_axes)
    s.root.push_back(MakeIv(r.var.name(), *AsConstInt(r.extent), true));
  s.leaf = s.root;
  return s;
}

}  // namespace

Schedule::Schedule(std::vector<Tensor> outputs) : outputs_(std::move(outputs)) {
  std::set<const OperationNode*> seen;
  std::function<void(const std::shared_ptr<const OperationNode>&)> visit =
      [&](const std::shared_ptr<const OperationNode>& op) {
        if (op->kind != OpKind::kCompute || !seen.insert(op.get()).second) return;
        for (const auto& in : op->inputs) visit(in);
        stages_.push_back(MakeStage(Tensor(op)));
      };
  for (const Tensor& t : outputs_) visit(t.op());
}

int Schedule::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].name() == name) return static_cast<int>(i);
  }
  return -1;
}

Stage& Schedule::operator[](const Tensor& t) {
  for (Stage& s : stages_) {
    if (s.tensor.buffer().same_as(t.buffer())) return s;
  }
  KILN_CHECK(false) << "no stage for tensor " << t->name;
  return stages_[0];
}

Stage& Schedule::StageByName(const std::string& name) {
  int i = IndexOf(name);
  KILN_CHECK(i >= 0) << "no stage " << name;
  return stages_[i];
}

IterVar Schedule::Axis(const Tensor& t, int i) {
  Stage& s = (*this)[t];
  KILN_CHECK(i >= 0 && i < static_cast<int>(s.tensor->axes.size()))
      << "axis " << i << " of " << s.name();
  return s.root[i];
}

IterVar Schedule::ReduceAxisOf(const Tensor& t, int i) {
  Stage& s = (*this)[t];
  size_t n = s.tensor->axes.size();
  KILN_CHECK(i >= 0 && n + i < s.root.size()) << "reduce axis " << i << " of " << s.name();
  return s.root[n + i];
}

namespace {
size_t LeafPos(const Stage& s, const IterVar& iv) {
  auto it = std::find(s.leaf.begin(), s.leaf.end(), iv);
  KILN_CHECK(it != s.leaf.end()) << (iv ? iv->name : "null") << " is not a leaf of stage "
                                 << s.name();
  return static_cast<size_t>(it - s.leaf.begin());
}
}  // namespace

std::pair<IterVar, IterVar> Schedule::Split(const Tensor& t, const IterVar& iv, int64_t factor) {
  Stage& s = (*this)[t];
  KILN_CHECK(factor >= 1) << "split factor " << factor;
  size_t pos = LeafPos(s, iv);
  IterVar outer = MakeIv(iv->name + ".o", (iv->extent + factor - 1) / factor, iv->reduce);
  IterVar inner = MakeIv(iv->name + ".i", factor, iv->reduce);
  Relation r;
  r.kind = Relation::Kind::kSplit;
  r.parent = iv;
  r.outer = outer;
  r.inner = inner;
  r.factor = factor;
  s.relations.push_back(r);
  s.leaf[pos] = outer;
  s.leaf.insert(s.leaf.begin() + static_cast<long>(pos) + 1, inner);
  return {outer, inner};
}

IterVar Schedule::Fuse(const Tensor& t, const IterVar& outer, const IterVar& inner) {
  Stage& s = (*this)[t];
  size_t po = LeafPos(s, outer), pi = LeafPos(s, inner);
  KILN_CHECK(pi == po + 1) << "fuse needs adjacent leaves " << outer->name << ", " << inner->name;
  KILN_CHECK(outer->reduce == inner->reduce) << "cannot fuse a data and a reduce axis";
  IterVar fused =
      MakeIv(outer->name + "." + inner->name + ".f", outer->extent * inner->extent, outer->reduce);
  Relation r;
  r.kind = Relation::Kind::kFuse;
  r.outer = outer;
  r.inner = inner;
  r.fused = fused;
  s.relations.push_back(r);
  s.leaf[po] = fused;
  s.leaf.erase(s.leaf.begin() + static_cast<long>(pi));
  return fused;
}

void Schedule::Reorder(const Tensor& t, const std::vector<IterVar>& order) {
  Stage& s = (*this)[t];
  std::vector<size_t> pos;
  for (const IterVar& iv : order) pos.push_back(LeafPos(s, iv));
  std::vector<size_t> sorted = pos;
  std::sort(sorted.begin(), sorted.end());
  KILN_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
      << "reorder repeats an axis";
  for (size_t i = 0; i < order.size(); ++i) s.leaf[sorted[i]] = order[i];
}

std::vector<IterVar> Schedule::Tile(const Tensor& t, const IterVar& x, const IterVar& y, int64_t fx,
                                    int64_t fy) {
  auto [xo, xi] = Split(t, x, fx);
  auto [yo, yi] = Split(t, y, fy);
  Reorder(t, {xo, yo, xi, yi});
  return {xo, yo, xi, yi};
}

void Schedule::SetKind(const Tensor& t, const IterVar& iv, ForKind kind) {
  Stage& s = (*this)[t];
  LeafPos(s, iv);
  iv->kind = kind;
}

void Schedule::Vectorize(const Tensor& t, const IterVar& iv) {
  SetKind(t, iv, ForKind::kVectorized);
}
void Schedule::Unroll(const Tensor& t, const IterVar& iv) { SetKind(t, iv, ForKind::kUnrolled); }
void Schedule::Parallel(const Tensor& t, const IterVar& iv) {
  KILN_CHECK(!iv->reduce) << "cannot parallelize reduce axis " << iv->name;
  SetKind(t, iv, ForKind::kParallel);
}

void Schedule::Tensorize(const Tensor& t, const IterVar& iv, const std::string& name,
                         TensorizeFn fn) {
  Stage& s = (*this)[t];
  LeafPos(s, iv);
  KILN_CHECK(fn) << "tensorize " << name << " without an emitter";
  s.tensorize_iv = iv;
  s.tensorize = std::move(fn);
}

void Schedule::Prefetch(const Tensor& t, const IterVar& at, const Tensor& tensor,
                        const IterVar& ahead, int64_t distance, const IterVar& spread) {
  // The loops' order is checked where it is lowered (a later reorder may
  // change it).
  Stage& s = (*this)[t];
  LeafPos(s, at);
  LeafPos(s, ahead);
  KILN_CHECK(distance >= 1) << "prefetch: distance " << distance;
  if (spread) LeafPos(s, spread);
  s.prefetches.push_back({tensor, at, ahead, distance, spread});
}

absl::Status Schedule::Bind(const Tensor& t, const IterVar& iv, ForKind thread) {
  if (!IsThreadBinding(thread)) {
    return absl::InvalidArgumentError("bind: not a thread index (blockIdx.x/y/z, threadIdx.x/y/z)");
  }
  if (iv->reduce) {
    return absl::InvalidArgumentError(StrCat("bind: ", iv->name, " is a reduce axis"));
  }
  Stage& s = (*this)[t];
  LeafPos(s, iv);
  iv->kind = thread;
  return absl::OkStatus();
}

void Schedule::SetScope(const Tensor& t, ir::StorageScope scope) { (*this)[t].scope = scope; }

void Schedule::ComputeAt(const Tensor& producer, const Tensor& consumer, const IterVar& iv) {
  Stage& c = (*this)[consumer];
  LeafPos(c, iv);
  int ci = IndexOf(c.name());
  Stage& p = (*this)[producer];
  KILN_CHECK(IndexOf(p.name()) < ci)
      << "compute_at: " << p.name() << " is not a producer of " << c.name();
  p.attach = AttachKind::kAt;
  p.attach_stage = ci;
  p.attach_iv = iv;
}

void Schedule::ComputeInline(const Tensor& producer) {
  Stage& p = (*this)[producer];
  KILN_CHECK(p.tensor->reduce_axes.empty()) << "cannot inline reduction " << p.name();
  p.attach = AttachKind::kInline;
}

Tensor Schedule::CacheWrite(const Tensor& t) {
  int idx = IndexOf((*this)[t].name());
  Stage& s = stages_[idx];
  KILN_CHECK(s.relations.empty() && s.leaf == s.root && s.attach == AttachKind::kRoot)
      << "cache_write must come before other primitives on " << s.name();
  const OperationNode& op = *s.tensor.op();
  // The cache computes the original body over fresh axes.
  std::vector<IterRange> axes;
  VarMap m;
  for (const IterRange& r : op.axes) {
    Var v(r.var.name());
    axes.push_back({v, r.min, r.extent});
    m[r.var.get() ? static_cast<const VarNode*>(r.var.get()) : nullptr] = v;
  }
  Tensor cache = ComputeFromParts(op.name + ".local", op.shape, axes, Substitute(op.body, m));
  // The original stage becomes a copy out of the cache (same buffer, so its
  // consumers still read it).
  auto copy = std::make_shared<OperationNode>();
  copy->kind = OpKind::kCompute;
  copy->name = op.name;
  copy->shape = op.shape;
  copy->buffer = op.buffer;
  copy->axes = op.axes;
  std::vector<Expr> idx_exprs;
  for (const IterRange& r : op.axes) idx_exprs.push_back(r.var);
  copy->body = cache(idx_exprs);
  copy->inputs = {cache.op()};
  Stage cache_stage = MakeStage(cache);
  cache_stage.local = true;
  Stage new_stage = MakeStage(Tensor(copy));
  new_stage.attach = s.attach;
  stages_[idx] = new_stage;
  stages_.insert(stages_.begin() + idx, cache_stage);
  for (Stage& st : stages_) {
    if (st.attach == AttachKind::kAt && st.attach_stage >= idx) ++st.attach_stage;
  }
  return cache;
}

namespace {

// Whether `e` loads `buffer`.
bool Reads(const Expr& e, const Buffer& buffer) {
  struct V : ExprVisitor {
    const Buffer* b = nullptr;
    bool found = false;
    void VisitBufferLoad(const BufferLoadNode* op) override {
      found = found || op->buffer.same_as(*b);
      ExprVisitor::VisitBufferLoad(op);
    }
  } v;
  v.b = &buffer;
  v.VisitExpr(e);
  return v.found;
}

// Loads of `from` become loads of `to` at index(indices).
class LoadRedirect : public ExprMutator {
 public:
  LoadRedirect(Buffer from, Buffer to,
               const std::function<std::vector<Expr>(const std::vector<Expr>&)>& index)
      : from_(std::move(from)), to_(std::move(to)), index_(index) {}

 protected:
  Expr VisitBufferLoad(const BufferLoadNode* op, const Expr& self) override {
    Expr r = ExprMutator::VisitBufferLoad(op, self);
    const auto* load = r.as<BufferLoadNode>();
    if (!load->buffer.same_as(from_)) return r;
    return Load(to_, index_(load->indices));
  }

 private:
  Buffer from_, to_;
  const std::function<std::vector<Expr>(const std::vector<Expr>&)>& index_;
};

}  // namespace

std::string Schedule::UniqueName(const std::string& base) const {
  std::string name = base;
  for (int n = 2; IndexOf(name) >= 0; ++n) name = StrCat(base, n);
  return name;
}

absl::Status Schedule::CheckReaders(const Tensor& t, const std::vector<Tensor>& readers) {
  if (readers.empty()) {
    return absl::InvalidArgumentError(
        StrCat("cache_read/transform_layout of ", t->name, ": no readers given"));
  }
  for (const Tensor& r : readers) {
    int ri = -1;
    for (size_t i = 0; i < stages_.size(); ++i) {
      if (stages_[i].tensor.buffer().same_as(r.buffer())) ri = static_cast<int>(i);
    }
    if (ri < 0) return absl::NotFoundError(StrCat("no stage ", r->name, " in the schedule"));
    if (!Reads(stages_[ri].tensor->body, t.buffer())) {
      return absl::FailedPreconditionError(StrCat("stage ", r->name, " does not read ", t->name));
    }
    if (stages_[ri].attach == AttachKind::kInline) {
      return absl::FailedPreconditionError(
          StrCat("stage ", r->name, " is computed inline; redirect its consumer's reads instead"));
    }
  }
  return absl::OkStatus();
}

void Schedule::RedirectReaders(
    const Tensor& t, const Tensor& read, const std::vector<Tensor>& readers,
    const std::function<std::vector<Expr>(const std::vector<Expr>&)>& index) {
  size_t pos = stages_.size();
  LoadRedirect redirect(t.buffer(), read.buffer(), index);
  for (const Tensor& r : readers) {
    Stage& st = (*this)[r];
    pos = std::min(pos, static_cast<size_t>(IndexOf(st.name())));
    auto op = std::make_shared<OperationNode>(*st.tensor.op());
    op->body = redirect.VisitExpr(op->body);
    if (!op->reduce_axes.empty()) {
      // The Reduce node was rebuilt: its axes are the same variables.
      op->reduce_axes = op->body.as<ReduceNode>()->axes;
    }
    std::erase_if(op->inputs, [&](const auto& in) { return in == t.op() || in == read.op(); });
    op->inputs.push_back(read.op());
    st.tensor = Tensor(op);
  }
  for (Stage& st : stages_) {
    if (st.attach == AttachKind::kAt && st.attach_stage >= static_cast<int>(pos)) ++st.attach_stage;
  }
  stages_.insert(stages_.begin() + static_cast<long>(pos), MakeStage(read));
}

absl::StatusOr<Tensor> Schedule::CacheRead(const Tensor& t, const std::vector<Tensor>& readers) {
  if (auto s = CheckReaders(t, readers); !s.ok()) return s;
  Tensor cache = Compute(
      UniqueName(t->name + ".cache"), t->shape,
      [&](const std::vector<Var>& i) { return t(std::vector<Expr>(i.begin(), i.end())); },
      t.buffer()->dtype);
  auto same = [](const std::vector<Expr>& idx) { return idx; };
  RedirectReaders(t, cache, readers, same);
  return cache;
}

absl::StatusOr<Tensor> Schedule::TransformLayout(const Tensor& t, const std::string& src,
                                                 const std::string& dst,
                                                 const std::vector<Tensor>& readers) {
  auto map = LayoutMap::Make(src, dst, t->shape);
  if (!map.ok()) return map.status();
  if (auto s = CheckReaders(t, readers); !s.ok()) return s;
  Tensor packed = TransformLayoutOf(t, *map, UniqueName(StrCat(t->name, ".", dst)));
  auto to_dst = [&](const std::vector<Expr>& idx) { return map->ToDst(idx); };
  RedirectReaders(t, packed, readers, to_dst);
  return packed;
}

}  // namespace kiln::te
