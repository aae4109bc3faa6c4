#include "compiler/lower/loop_nest.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/bound.h"
#include "compiler/lower/ir_util.h"
#include "compiler/lower/simplify.h"

namespace kiln::lower {
using namespace ir;
using te::IterVar;
using te::Stage;

namespace {

const VarNode* VarOf(const Var& v) { return static_cast<const VarNode*>(v.get()); }

// The loads of one buffer in a statement, each index list once.
class LoadsOf : public StmtVisitor {
 public:
  explicit LoadsOf(const Buffer& b) : buffer_(b) {}
  std::vector<const BufferLoadNode*> loads;

 protected:
  void VisitBufferLoad(const BufferLoadNode* op) override {
    StmtVisitor::VisitBufferLoad(op);
    if (!op->buffer.same_as(buffer_)) return;
    for (const BufferLoadNode* l : loads) {
      if (l->indices.size() == op->indices.size() &&
          std::equal(l->indices.begin(), l->indices.end(), op->indices.begin(),
                     [](const Expr& a, const Expr& b) { return StructuralEqual(a, b); })) {
        return;
      }
    }
    loads.push_back(op);
  }

 private:
  Buffer buffer_;
};

// Replaces loads of inlined buffers by their bodies.
class Inliner : public ExprMutator {
 public:
  std::unordered_map<const BufferNode*, std::pair<std::vector<IterRange>, Expr>> bodies;

 protected:
  Expr VisitBufferLoad(const BufferLoadNode* op, const Expr& self) override {
    Expr r = ExprMutator::VisitBufferLoad(op, self);
    const auto* load = r.as<BufferLoadNode>();
    auto it = bodies.find(load->buffer.get());
    if (it == bodies.end()) return r;
    VarMap m;
    for (size_t d = 0; d < it->second.first.size(); ++d)
      m[VarOf(it->second.first[d].var)] = load->indices[d];
    return Substitute(it->second.second, m);
  }
};

// Redirects loads of `from` to `to` with indices shifted by -offset.
class Redirect : public StmtMutator {
 public:
  Redirect(Buffer from, Buffer to, std::vector<Expr> offset)
      : from_(std::move(from)), to_(std::move(to)), offset_(std::move(offset)) {}

 protected:
  Expr VisitBufferLoad(const BufferLoadNode* op, const Expr& self) override {
    Expr r = ExprMutator::VisitBufferLoad(op, self);
    const auto* load = r.as<BufferLoadNode>();
    if (!load->buffer.same_as(from_)) return r;
    std::vector<Expr> idx;
    for (size_t d = 0; d < load->indices.size(); ++d)
      idx.push_back(Simplify(load->indices[d] - offset_[d]));
    return Load(to_, idx);
  }

 private:
  Buffer from_, to_;
  std::vector<Expr> offset_;
};

class NestBuilder {
 public:
  explicit NestBuilder(const te::Schedule& s) : sch_(s) {
    const auto& stages = sch_.stages();
    Inliner inl;
    for (const Stage& st : stages) {
      Expr body = inl.VisitExpr(st.tensor->body);
      bodies_.push_back(body);
      if (st.attach == te::AttachKind::kInline)
        inl.bodies[st.tensor.buffer().get()] = {st.tensor->axes, body};
    }
  }

  absl::StatusOr<Stmt> Build() {
    const auto& stages = sch_.stages();
    std::vector<Stmt> seq;
    std::vector<Buffer> scratch;
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stage& st = stages[i];
      if (st.attach != te::AttachKind::kRoot) continue;
      bool is_output = false;
      for (const te::Tensor& o : sch_.outputs())
        is_output = is_output || o.buffer().same_as(st.tensor.buffer());
      std::vector<Expr> base;
      std::vector<int64_t> ext;
      for (int64_t d : st.tensor->shape) {
        base.push_back(IntImm(0));
        ext.push_back(d);
      }
      auto nest = BuildStage(static_cast<int>(i), base, ext, st.tensor.buffer(), false);
      if (!nest.ok()) return nest.status();
      seq.push_back(*nest);
      if (!is_output) scratch.push_back(st.tensor.buffer());
    }
    Stmt body = Seq(seq);
    for (auto it = scratch.rbegin(); it != scratch.rend(); ++it) body = Allocate(*it, body);
    return body;
  }

 private:
  // Lowers stage `si` over the root region base + [0, ext) writing `out`
  // at region-relative indices (out covers exactly the region when
  // `attached`, else the whole tensor with base 0).
  absl::StatusOr<Stmt> BuildStage(int si, const std::vector<Expr>& base,
                                  const std::vector<int64_t>& ext, const Buffer& out,
                                  bool attached) {
    const Stage& st = sch_.stages()[si];
    const te::OperationNode& op = *st.tensor.op();
    size_t ndata = op.axes.size();
    std::unordered_map<const te::IterVarNode*, int64_t> extent;
    for (size_t d = 0; d < st.root.size(); ++d) {
      extent[st.root[d].get()] = d < ndata ? ext[d] : *AsConstInt(op.reduce_axes[d - ndata].extent);
    }
    for (const te::Relation& r : st.relations) {
      if (r.kind == te::Relation::Kind::kSplit) {
        int64_t p = extent.at(r.parent.get());
        extent[r.outer.get()] = (p + r.factor - 1) / r.factor;
        extent[r.inner.get()] = r.factor;
      } else {
        extent[r.fused.get()] = extent.at(r.outer.get()) * extent.at(r.inner.get());
      }
    }
    // Values of every iv in terms of the leaf loop variables.
    std::unordered_map<const te::IterVarNode*, Expr> value;
    for (const IterVar& iv : st.leaf) value[iv.get()] = iv->var;
    std::vector<std::pair<Expr, bool>> guards;  // condition, is a reduce guard
    for (auto it = st.relations.rbegin(); it != st.relations.rend(); ++it) {
      const te::Relation& r = *it;
      if (r.kind == te::Relation::Kind::kSplit) {
        Expr v = value.at(r.outer.get()) * IntImm(r.factor) + value.at(r.inner.get());
        value[r.parent.get()] = v;
        int64_t p = extent.at(r.parent.get());
        if (p % r.factor != 0) guards.emplace_back(v < IntImm(p), r.parent->reduce);
      } else {
        int64_t in = extent.at(r.inner.get());
        Expr f = value.at(r.fused.get());
        value[r.outer.get()] = FloorDiv(f, IntImm(in));
        value[r.inner.get()] = FloorMod(f, IntImm(in));
      }
    }
    VarMap m;
    std::vector<Expr> local_idx;
    for (size_t d = 0; d < st.root.size(); ++d) {
      Expr v = value.at(st.root[d].get());
      if (d < ndata) {
        m[VarOf(op.axes[d].var)] = Simplify(base[d] + v);
        local_idx.push_back(attached ? v : Simplify(base[d] + v));
        if (attached) {
          guards.emplace_back(base[d] + v < IntImm(op.shape[d]), false);
        }
      } else {
        m[VarOf(op.reduce_axes[d - ndata].var)] = v;
      }
    }
    for (auto& g : guards) g.first = Simplify(g.first);
    Expr body = bodies_[si];
    auto wrap = [&](Stmt s, bool include_reduce) {
      for (auto it = guards.rbegin(); it != guards.rend(); ++it) {
        if (it->second && !include_reduce) continue;
        if (auto c = AsConstInt(it->first); c && *c) continue;
        s = IfThenElse(Likely(it->first), s);
      }
      return s;
    };
    Stmt main;
    Stmt init;
    if (const auto* red = body.as<ReduceNode>()) {
      Expr src = Substitute(red->source, m);
      Expr cur = Load(out, local_idx);
      Expr upd = red->reduce_kind == ReduceKind::kSum    ? cur + src
                 : red->reduce_kind == ReduceKind::kProd ? cur * src
                 : red->reduce_kind == ReduceKind::kMax  ? Max(cur, src)
                                                         : Min(cur, src);
      main = wrap(Store(out, upd, local_idx), true);
      init = wrap(Store(out, Substitute(red->init, m), local_idx), false);
    } else {
      main = wrap(Store(out, Substitute(body, m), local_idx), true);
    }
    int first_reduce = -1;
    for (size_t j = 0; j < st.leaf.size(); ++j) {
      if (st.leaf[j]->reduce) {
        first_reduce = static_cast<int>(j);
        break;
      }
    }
    if (init.defined() && first_reduce < 0) {
      // Reduction over nothing: init then update.
      main = Seq({init, main});
    }
    // Tensorized: the loops from leaf `tz` inward are one emitted statement.
    int tz = -1;
    if (st.tensorize) {
      auto it = std::find(st.leaf.begin(), st.leaf.end(), st.tensorize_iv);
      if (it == st.leaf.end()) {
        return absl::InvalidArgumentError(
            StrCat("tensorize(", st.name(), "): ", st.tensorize_iv->name, " is not a loop"));
      }
      tz = static_cast<int>(it - st.leaf.begin());
      if (init.defined() && first_reduce < tz) {
        return absl::InvalidArgumentError(StrCat("tensorize(", st.name(), ", ",
                                                 st.tensorize_iv->name,
                                                 "): a reduce loop lies outside it"));
      }
      auto region = TensorizedBox(st, tz, value, extent, base, attached, out);
      if (!region.ok()) return region.status();
      main = st.tensorize(*region);
    }
    auto prefetches = Prefetches(st, main, extent, tz);
    if (!prefetches.ok()) return prefetches.status();
    Stmt cur = main;
    for (int j = static_cast<int>(st.leaf.size()) - 1; j >= 0; --j) {
      const IterVar& iv = st.leaf[j];
      if (tz >= 0 && j >= tz) {
        for (const Stage& p : sch_.stages()) {
          if (p.attach == te::AttachKind::kAt && p.attach_iv == iv) {
            return absl::InvalidArgumentError(StrCat("tensorize(", st.name(), "): ", p.name(),
                                                     " is computed at ", iv->name,
                                                     ", inside the tensorized loops"));
          }
        }
        continue;
      }
      // Producers computed at this loop go at the top of its body.
      const auto& stages = sch_.stages();
      for (int pi = static_cast<int>(stages.size()) - 1; pi >= 0; --pi) {
        const Stage& p = stages[pi];
        if (p.attach != te::AttachKind::kAt || p.attach_stage != si || p.attach_iv != iv) continue;
        // The thread indices around this loop's body: a shared producer
        // holds what every thread of the block reads.
        RangeMap threads = enclosing_threads_;
        for (int k = 0; k <= j; ++k) {
          const IterVar& l = st.leaf[k];
          if (l->kind >= ForKind::kThreadX && l->kind <= ForKind::kThreadZ) {
            threads[VarOf(l->var)] = {0, extent.at(l.get()) - 1};
          }
        }
        const bool shared = p.scope == ir::StorageScope::kShared;
        if (shared && threads.empty()) {
          return absl::InvalidArgumentError(
              StrCat("set_scope(", p.name(), ", shared): it is computed at ", iv->name,
                     ", which is not inside a GPU block's threads (bind threadIdx first)"));
        }
        auto region = InferBound(p.tensor.buffer(), cur, shared ? threads : RangeMap{});
        if (!region.ok()) return region.status();
        std::vector<Expr> shape;
        int64_t bytes = p.tensor.buffer()->dtype.bytes();
        for (int64_t e : region->extent) {
          shape.push_back(IntImm(e));
          bytes *= e;
        }
        if (bytes > te::kMaxScratchBytes) {
          return absl::InvalidArgumentError(StrCat("compute_at: scratch for ", p.name(), " needs ",
                                                   bytes, " bytes (limit ", te::kMaxScratchBytes,
                                                   ")"));
        }
        Buffer local(p.name(), p.tensor.buffer()->dtype, shape);
        std::swap(enclosing_threads_, threads);
        auto pnest = BuildStage(pi, region->min, region->extent, local, true);
        std::swap(enclosing_threads_, threads);
        if (!pnest.ok()) return pnest.status();
        cur = Redirect(p.tensor.buffer(), local, region->min).VisitStmt(cur);
        // Shared: filled by the block's threads together, after every thread
        // is done with the last fill and before any reads this one; fills of
        // several shared buffers at one loop share their two barriers.
        if (shared) {
          Stmt joined = JoinFill(cur, *pnest);
          cur =
              Allocate(local, joined.defined() ? joined : Seq({Barrier(), *pnest, Barrier(), cur}),
                       ir::StorageScope::kShared);
        } else {
          cur = Allocate(local, Seq({*pnest, cur}));
        }
      }
      if (auto pf = prefetches->find(iv.get()); pf != prefetches->end()) {
        cur = Seq({pf->second, cur});
      }
      cur = For(iv->var, IntImm(0), IntImm(extent.at(iv.get())), iv->kind, cur);
      if (j == first_reduce && init.defined() && tz < 0) {
        Stmt in = init;
        for (int k = static_cast<int>(st.leaf.size()) - 1; k > j; --k) {
          const IterVar& d = st.leaf[k];
          if (d->reduce) continue;
          in = For(d->var, IntImm(0), IntImm(extent.at(d.get())), d->kind, in);
        }
        cur = Seq({in, cur});
      }
    }
    return cur;
  }

  // The prefetch statements of the stage's Schedule::Prefetch steps, by the
  // loop whose body they open.
  static absl::StatusOr<std::unordered_map<const te::IterVarNode*, Stmt>> Prefetches(
      const Stage& st, const Stmt& main,
      const std::unordered_map<const te::IterVarNode*, int64_t>& extent, int tz) {
    std::unordered_map<const te::IterVarNode*, Stmt> out;
    auto pos = [&](const IterVar& iv) {
      auto it = std::find(st.leaf.begin(), st.leaf.end(), iv);
      return it == st.leaf.end() ? -1 : static_cast<int>(it - st.leaf.begin());
    };
    for (const te::PrefetchSpec& p : st.prefetches) {
      const int pa = pos(p.at), ph = pos(p.ahead), ps = p.spread ? pos(p.spread) : -1;
      const std::string what = StrCat("prefetch(", st.name(), ", ", p.tensor->name, ")");
      if (pa < 0 || ph < 0 || ph >= pa || (p.spread && (ps <= ph || ps >= pa))) {
        return absl::InvalidArgumentError(
            StrCat(what, ": needs loops ahead, spread and at, outermost first (", p.ahead->name,
                   ", ", p.spread ? p.spread->name : "-", ", ", p.at->name, ")"));
      }
      if (tz >= 0 && pa >= tz) {
        return absl::InvalidArgumentError(StrCat(what, ": ", p.at->name, " is tensorized"));
      }
      LoadsOf reads(p.tensor.buffer());
      reads.VisitStmt(main);
      if (reads.loads.empty()) {
        return absl::InvalidArgumentError(StrCat(what, ": the stage does not read it"));
      }
      // Iteration ahead + distance (at most the last), the loops inside `at`
      // at their first (start) and last (end) iterations.
      VarMap start, end;
      const int64_t n_ahead = extent.at(p.ahead.get());
      Expr next = Min(p.ahead->var + IntImm(p.distance), IntImm(n_ahead - 1));
      start[VarOf(p.ahead->var)] = next;
      end[VarOf(p.ahead->var)] = next;
      for (size_t k = pa + 1; k < st.leaf.size(); ++k) {
        start[VarOf(st.leaf[k]->var)] = IntImm(0);
        end[VarOf(st.leaf[k]->var)] = IntImm(extent.at(st.leaf[k].get()) - 1);
      }
      std::vector<Stmt> lines;
      for (const BufferLoadNode* l : reads.loads) {
        std::vector<Expr> idx;
        for (const Expr& e : l->indices) idx.push_back(Simplify(Substitute(e, start)));
        // The elements the inner loops read, from the first to the last in
        // the buffer's row-major order, a line (64 bytes) at a time: offsets
        // along the last index, which flattening adds to the others.
        int64_t span = 0, stride = 1;
        for (size_t d = l->indices.size(); d-- > 0;) {
          const auto e = AsConstInt(Simplify(Substitute(l->indices[d], end) - idx[d]));
          const auto n = AsConstInt(l->buffer->shape[d]);
          if (!e || !n) {
            return absl::InvalidArgumentError(
                StrCat(what, ": the footprint inside ", p.at->name, " is not constant"));
          }
          span += *e * stride;
          stride *= *n;
        }
        const int64_t bytes = l->buffer->dtype.bytes();
        for (int64_t b = 0; b < (span + 1) * bytes; b += 64) {
          std::vector<Expr> at = idx;
          at.back() = Simplify(idx.back() + IntImm(b / bytes));
          lines.push_back(Evaluate(
              Call(DataType::Int32(), Intrinsic::kPrefetch, {AddressOf(Load(l->buffer, at))})));
        }
      }
      Stmt pf = Seq(std::move(lines));
      if (p.spread) {
        Expr linear = IntImm(0);
        for (int k = ps + 1; k < pa; ++k) {
          linear = linear * IntImm(extent.at(st.leaf[k].get())) + st.leaf[k]->var;
        }
        const int64_t e = extent.at(p.spread.get());
        pf = IfThenElse(Simplify(Eq(FloorMod(linear, IntImm(e)), p.spread->var)), pf);
      }
      Stmt& slot = out[p.at.get()];
      slot = slot.defined() ? Seq({slot, pf}) : pf;
    }
    return out;
  }

  // The box the leaves from `tz` inward cover: each data axis's value with
  // those loops at 0 (its start) and the span they add (its extent).
  static absl::StatusOr<te::TensorizeRegion> TensorizedBox(
      const Stage& st, int tz, const std::unordered_map<const te::IterVarNode*, Expr>& value,
      const std::unordered_map<const te::IterVarNode*, int64_t>& extent,
      const std::vector<Expr>& base, bool attached, const Buffer& out) {
    VarMap zero;
    RangeMap inner;
    for (size_t k = tz; k < st.leaf.size(); ++k) {
      zero[VarOf(st.leaf[k]->var)] = IntImm(0);
      inner[VarOf(st.leaf[k]->var)] = {0, extent.at(st.leaf[k].get()) - 1};
    }
    te::TensorizeRegion r;
    r.out = out;
    for (size_t d = 0; d < st.tensor.op()->axes.size(); ++d) {
      Expr v = value.at(st.root[d].get());
      Expr v0 = Simplify(Substitute(v, zero));
      auto span = ConstBounds(Simplify(v - v0), inner);
      if (!span || span->first != 0) {
        return absl::InvalidArgumentError(StrCat("tensorize(", st.name(), "): axis ", d,
                                                 " does not cover a box inside the loops"));
      }
      r.out_index.push_back(attached ? v0 : Simplify(base[d] + v0));
      r.start.push_back(Simplify(base[d] + v0));
      r.extent.push_back(span->second + 1);
    }
    return r;
  }

  // `body` with `fill` put after its leading barrier when it starts (inside
  // the Allocates of other shared buffers) with one: the fill of another
  // shared buffer; undefined otherwise.
  static Stmt JoinFill(const Stmt& body, const Stmt& fill) {
    if (const auto* a = body.as<AllocateNode>()) {
      Stmt inner = JoinFill(a->body, fill);
      return inner.defined() ? Allocate(a->buffer, inner, a->scope) : Stmt();
    }
    const auto* seq = body.as<SeqNode>();
    if (seq == nullptr || seq->seq.empty() || !IsBarrier(seq->seq[0])) return Stmt();
    std::vector<Stmt> items = {seq->seq[0], fill};
    items.insert(items.end(), seq->seq.begin() + 1, seq->seq.end());
    return Seq(items);
  }

  const te::Schedule& sch_;
  std::vector<Expr> bodies_;
  // Thread-bound loops (threadIdx) around the stage being built, from the
  // stages it is computed in.
  RangeMap enclosing_threads_;
};

}  // namespace

absl::StatusOr<Stmt> BuildLoopNest(const te::Schedule& schedule) {
  return NestBuilder(schedule).Build();
}

}  // namespace kiln::lower
