// Generic operators addressed by index tensors: gather_nd, scatter (elements
// and ND, with reductions) and topk. Compute definitions only; generic_template.cc
// schedules them. Scatters are written as gathers over the updates (each
// output element looks for the updates aimed at it), so every kernel writes
// each output element once, in parallel, without atomics.
#include "compiler/ops/elementwise.h"
#include "compiler/ops/generic_internal.h"

namespace kiln::compiler::ops::generic_internal {
using namespace ir;

// gather_nd: in0 data, in1 indices [..., k]; batch (batch_dims).
absl::StatusOr<te::Tensor> GatherNdOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor &x = in.at(0), &ind = in.at(1);
  const Shape& xs = x->shape;
  const Shape& is = ind->shape;
  const int64_t b = w.IntOr("batch", 0);
  const int64_t q = static_cast<int64_t>(is.size()), r = static_cast<int64_t>(xs.size());
  if (q < 1 || b < 0 || b >= std::min(q, r)) return Bad(w, "bad batch_dims for the ranks");
  const int64_t k = is[q - 1];
  if (k < 1 || b + k > r) return Bad(w, "indices' last dim does not fit the data");
  for (int64_t d = 0; d < b; ++d) {
    if (is[d] != xs[d]) return Bad(w, "batch dims differ");
  }
  if (!ind.buffer()->dtype.is_integer()) return Bad(w, "indices must be integers");
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), xs.begin() + b + k, xs.end());
  if (out.empty()) out = {1};
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match");
  return te::Compute(
      "gather_nd", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx;
        for (int64_t d = 0; d < b; ++d) idx.push_back(o[d]);
        for (int64_t t = 0; t < k; ++t) {
          std::vector<Expr> ii;
          for (int64_t d = 0; d < q - 1; ++d) ii.push_back(o[d]);
          ii.push_back(IntImm(t));
          idx.push_back(IndexInto(ind(ii), xs[b + t]));
        }
        for (int64_t d = b + k; d < r; ++d) idx.push_back(o[q - 1 + d - b - k]);
        return x(idx);
      },
      x.buffer()->dtype);
}

// scatter: in0 data, in1 indices, in2 updates; mode 0 ScatterElements (axis),
// 1 ScatterND; reduction 0 none (the last update aimed at an element wins),
// 1 add, 2 mul, 3 max, 4 min.
absl::StatusOr<te::Tensor> ScatterOp(const Workload& w, const std::vector<te::Tensor>& in) {
  if (in.size() != 3) return Bad(w, "needs data, indices, updates");
  const te::Tensor &x = in[0], &ind = in[1], &upd = in[2];
  const Shape &xs = x->shape, &is = ind->shape, &us = upd->shape;
  const int64_t mode = w.IntOr("mode", 0), red = w.IntOr("reduction", 0);
  const int64_t r = static_cast<int64_t>(xs.size());
  if (xs != w.Ints("shape") || red < 0 || red > 4) return Bad(w, "bad shape or reduction");
  if (!ind.buffer()->dtype.is_integer()) return Bad(w, "indices must be integers");
  if (upd.buffer()->dtype != x.buffer()->dtype) return Bad(w, "updates differ in dtype");
  // The update positions searched per output element: reduce axes, and how
  // an output index o and those axes give the match condition and the
  // update's index.
  int64_t axis = 0, k = 0;
  Shape search;  // extents of the searched update dims
  if (mode == 0) {
    auto a = AxisOf(w, "axis", xs.size());
    if (!a.ok()) return a.status();
    axis = *a;
    if (is != us || static_cast<int64_t>(is.size()) != r) return Bad(w, "indices/updates shape");
    search = {us[axis]};
  } else {
    const int64_t q = static_cast<int64_t>(is.size());
    k = q ? is[q - 1] : 0;
    if (q < 1 || k < 1 || k > r) return Bad(w, "indices' last dim does not fit the data");
    Shape want(is.begin(), is.end() - 1);
    want.insert(want.end(), xs.begin() + k, xs.end());
    if (want.empty()) want = {1};
    if (us != want) return Bad(w, "updates shape must be indices.shape[:-1] + data.shape[k:]");
    search.assign(is.begin(), is.end() - 1);
    if (search.empty()) search = {1};
  }
  const DataType t = x.buffer()->dtype;
  const DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  // For output index o and search position u: whether u's update lands on
  // o, and the update's index.
  auto locate = [&](const std::vector<Var>& o, const std::vector<Expr>& u, Expr* match) {
    std::vector<Expr> ui;
    if (mode == 0) {
      Expr ok = IntImm(1, DataType::Bool());
      for (int64_t d = 0; d < r; ++d) {
        if (d == axis) {
          ui.push_back(u[0]);
        } else {
          ok = ok && (o[d] < IntImm(us[d]));
          ui.push_back(Clamp(o[d], 0, us[d] - 1));
        }
      }
      *match = ok && Eq(IndexInto(ind(ui), xs[axis]), Expr(o[axis]));
      return ui;
    }
    Expr ok = IntImm(1, DataType::Bool());
    std::vector<Expr> base(u.begin(), u.begin() + (is.size() - 1));
    for (int64_t s = 0; s < k; ++s) {
      std::vector<Expr> ii = base;
      ii.push_back(IntImm(s));
      ok = ok && Eq(IndexInto(ind(ii), xs[s]), Expr(o[s]));
    }
    *match = ok;
    ui = base;
    for (int64_t d = k; d < r; ++d) ui.push_back(o[d]);
    if (ui.empty()) ui = {IntImm(0)};
    return ui;
  };
  auto axes = [&](const char* prefix) {
    std::vector<IterRange> v;
    for (size_t d = 0; d < search.size(); ++d)
      v.push_back(te::ReduceAxis(search[d], StrCat(prefix, d)));
    return v;
  };
  auto vars = [](const std::vector<IterRange>& v) {
    std::vector<Expr> e;
    for (const auto& a : v) e.push_back(a.var);
    return e;
  };
  if (red == 0) {
    // The flat search position of the last update aimed at o (-1: none).
    te::Tensor hit = te::Compute(
        "hit", xs,
        [&](const std::vector<Var>& o) {
          auto ra = axes("u");
          Expr match;
          locate(o, vars(ra), &match);
          Expr flat = IntImm(0);
          for (size_t d = 0; d < search.size(); ++d) flat = flat * IntImm(search[d]) + ra[d].var;
          return Reduce(ReduceKind::kMax, Select(match, flat, IntImm(-1)), ra, IntImm(-1));
        },
        DataType::Int64());
    return te::Compute(
        "scatter", xs,
        [&](const std::vector<Var>& o) {
          Expr h = hit(AsExprs(o));
          std::vector<Expr> u(search.size());
          Expr rest = Max(h, IntImm(0));
          for (size_t d = search.size(); d-- > 0;) {
            u[d] = FloorMod(rest, IntImm(search[d]));
            rest = FloorDiv(rest, IntImm(search[d]));
          }
          Expr match;
          std::vector<Expr> ui = locate(o, u, &match);
          return Select(h >= IntImm(0), upd(ui), x(AsExprs(o)));
        },
        t);
  }
  te::Tensor acc = te::Compute(
      "scatter_acc", xs,
      [&](const std::vector<Var>& o) {
        auto ra = axes("u");
        Expr match;
        Expr v = Promote(upd(locate(o, vars(ra), &match)));
        switch (red) {
          case 1:
            return Reduce(ReduceKind::kSum, Select(match, v, Const(ct, 0)), ra, Const(ct, 0));
          case 2:
            return Reduce(ReduceKind::kProd, Select(match, v, Const(ct, 1)), ra, Const(ct, 1));
          case 3:
            return Reduce(ReduceKind::kMax, Select(match, v, Lowest(ct)), ra, Lowest(ct));
          default:
            return Reduce(ReduceKind::kMin, Select(match, v, Highest(ct)), ra, Highest(ct));
        }
      },
      ct);
  return te::Compute(
      "scatter", xs,
      [&](const std::vector<Var>& o) {
        Expr d = Promote(x(AsExprs(o))), a = acc(AsExprs(o));
        Expr v = red == 1 ? d + a : red == 2 ? d * a : red == 3 ? Max(d, a) : Min(d, a);
        return To(t, v);
      },
      t);
}

// topk: in0 x; axis, largest, part (0 values, 1 int64 indices); the output's
// dim on the axis is k. Sorted (ties: the lower index first), by ranking
// every element: rank[i] = #elements that come before it.
absl::StatusOr<te::Tensor> TopKOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  auto axis = AxisOf(w, "axis", xs.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis, n = xs[a];
  const bool largest = w.IntOr("largest", 1) != 0, values = w.IntOr("part", 0) == 0;
  const Shape& out = w.Ints("shape");
  if (out.size() != xs.size() || out[a] > n) return Bad(w, "bad output shape");
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) != a && out[d] != xs[d]) return Bad(w, "bad output shape");
  }
  te::Tensor rank = te::Compute(
      "rank", xs,
      [&](const std::vector<Var>& o) {
        IterRange j = te::ReduceAxis(n, "j");
        std::vector<Expr> jo = AsExprs(o);
        jo[a] = j.var;
        Expr xi = Promote(x(AsExprs(o))), xj = Promote(x(jo));
        Expr before = (largest ? xj > xi : xj < xi) || (Eq(xj, xi) && j.var < o[a]);
        return Reduce(ReduceKind::kSum, Select(before, IntImm(1), IntImm(0)), {j}, IntImm(0));
      },
      DataType::Int64());
  te::Tensor index = te::Compute(
      "index", out,
      [&](const std::vector<Var>& o) {
        IterRange i = te::ReduceAxis(n, "i");
        std::vector<Expr> io = AsExprs(o);
        io[a] = i.var;
        return Reduce(ReduceKind::kSum, Select(Eq(rank(io), Expr(o[a])), Expr(i.var), IntImm(0)),
                      {i}, IntImm(0));
      },
      DataType::Int64());
  if (!values) return index;
  return te::Compute(
      "topk", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx = AsExprs(o);
        idx[a] = Clamp(index(AsExprs(o)), 0, n - 1);
        return x(idx);
      },
      x.buffer()->dtype);
}

}  // namespace kiln::compiler::ops::generic_internal
