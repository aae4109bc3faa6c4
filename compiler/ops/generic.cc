// The generic operators' compute definitions (their one schedule template
// is generic_template.cc).
#include "compiler/ops/generic.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"
#include "compiler/ops/generic_internal.h"

namespace kiln::compiler::ops {
namespace {

using namespace ir;
using Shape = std::vector<int64_t>;
using Status = absl::Status;
using namespace generic_internal;

// ---------------------------------------------------------------------------
// Reductions

}  // namespace

namespace generic_internal {

// A reduction; with lanes > 1 (the template's rvec knob), its input's
// contiguous last axis, which it must reduce, runs in vector lanes: a
// `rpartial` stage reduces x[..., ko*lanes + l] over ko (and the other
// reduced axes) into `lanes` partial results per output element, and the
// output reduces those (as the dense template's vec_k does).
absl::StatusOr<te::Tensor> ReduceCompute(const Workload& w, const std::vector<te::Tensor>& in,
                                         int64_t lanes) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const Shape& axes = w.Ints("axes");
  const bool keep = w.IntOr("keep", 1) != 0;
  const int64_t kind = w.IntOr("kind", 0), pre = w.IntOr("pre", 0);
  std::vector<bool> reduced(xs.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= static_cast<int64_t>(xs.size()) || reduced[a]) return Bad(w, "bad axes");
    reduced[a] = true;
  }
  Shape out;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(xs[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  if (out.empty()) out = {1};
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match the reduction");
  if (kind < 0 || kind > 3 || pre < 0 || pre > 2) return Bad(w, "bad kind/pre");
  const bool split = lanes > 1;
  const size_t last = xs.size() - 1;
  if (split && (xs.empty() || !reduced[last] || xs[last] < lanes)) {
    return Bad(w, StrCat("rvec=", lanes, " needs the input's last axis reduced and that long"));
  }
  const int64_t chunks = split ? (xs[last] + lanes - 1) / lanes : 0;
  std::vector<IterRange> raxes;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (!reduced[d]) continue;
    raxes.push_back(te::ReduceAxis(split && d == last ? chunks : xs[d], StrCat("r", d)));
  }
  DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  if (ct.is_bool()) ct = DataType::UInt(8);  // max/min/sum of bools as 0/1 bytes
  const Expr identity = kind == 0   ? Const(ct, 0)
                        : kind == 1 ? Lowest(ct)
                        : kind == 2 ? Highest(ct)
                                    : Const(ct, 1);
  auto reduce = [&](Expr v, const std::vector<IterRange>& over) {
    static constexpr ReduceKind kKinds[] = {ReduceKind::kSum, ReduceKind::kMax, ReduceKind::kMin,
                                            ReduceKind::kProd};
    return Reduce(kKinds[kind], v, over, identity);
  };
  // The element at output index o (the lane l when split), pre applied.
  auto element = [&](const std::vector<Var>& o, const Var* l) {
    std::vector<Expr> idx;
    size_t oi = 0, ri = 0;
    Expr in_range;
    for (size_t d = 0; d < xs.size(); ++d) {
      if (!reduced[d]) {
        idx.push_back(Expr(o[oi++]));
        continue;
      }
      Expr r = raxes[ri++].var;
      if (keep) ++oi;
      if (l != nullptr && d == last) {
        r = r * IntImm(lanes) + *l;
        if (xs[last] % lanes != 0) {
          in_range = r < IntImm(xs[last]);
          r = Min(r, IntImm(xs[last] - 1));
        }
      }
      idx.push_back(r);
    }
    Expr v = Promote(x(idx));
    if (v.dtype() != ct) v = Cast(ct, v);
    if (pre == 1) v = *UnaryFn(ElementFn::kAbs, v, {});
    if (pre == 2) v = v * v;
    return in_range.defined() ? Select(in_range, v, identity) : v;
  };
  if (!split) {
    return te::Compute(
        "red", out,
        [&](const std::vector<Var>& o) {
          Expr v = element(o, nullptr);
          return raxes.empty() ? v : reduce(v, raxes);
        },
        ct);
  }
  Shape pshape = out;
  pshape.push_back(lanes);
  te::Tensor partial = te::Compute(
      "rpartial", pshape,
      [&](const std::vector<Var>& p) {
        std::vector<Var> o(p.begin(), p.end() - 1);
        return reduce(element(o, &p.back()), raxes);
      },
      ct);
  IterRange rl = te::ReduceAxis(lanes, "rl");
  return te::Compute(
      "red", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> pi(o.begin(), o.end());
        pi.push_back(rl.var);
        return reduce(partial(pi), {rl});
      },
      ct);
}

absl::StatusOr<te::Tensor> ReduceOp(const Workload& w, const std::vector<te::Tensor>& in) {
  return ReduceCompute(w, in, 1);
}

absl::StatusOr<te::Tensor> ArgReduceOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  auto axis = AxisOf(w, "axis", xs.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis, n = xs[a];
  const bool keep = w.IntOr("keep", 1) != 0, is_max = w.IntOr("kind", 0) == 0,
             last = w.IntOr("last", 0) != 0;
  Shape out;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (static_cast<int64_t>(d) != a) {
      out.push_back(xs[d]);
    } else if (keep) {
      out.push_back(1);
    }
  }
  if (out.empty()) out = {1};
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match");
  auto in_index = [&](const std::vector<Var>& o, Expr k) {
    std::vector<Expr> idx;
    size_t oi = 0;
    for (size_t d = 0; d < xs.size(); ++d) {
      if (static_cast<int64_t>(d) == a) {
        idx.push_back(k);
        if (keep) ++oi;
      } else {
        idx.push_back(o[oi++]);
      }
    }
    return idx;
  };
  DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  double inf = std::numeric_limits<double>::infinity();
  te::Tensor best = te::Compute(
      "best", out,
      [&](const std::vector<Var>& o) {
        IterRange r = te::ReduceAxis(n, "r");
        Expr v = Promote(x(in_index(o, r.var)));
        if (!ct.is_float()) v = Cast(DataType::Float64(), v);
        DataType vt = v.dtype();
        return Reduce(is_max ? ReduceKind::kMax : ReduceKind::kMin, v, {r},
                      Const(vt, is_max ? -inf : inf));
      },
      ct.is_float() ? ct : DataType::Float64());
  return te::Compute(
      "arg", out,
      [&](const std::vector<Var>& o) {
        IterRange r = te::ReduceAxis(n, "k");
        Expr v = Promote(x(in_index(o, r.var)));
        if (!ct.is_float()) v = Cast(DataType::Float64(), v);
        Expr hit = Eq(v, best(AsExprs(o)));
        if (last)
          return Reduce(ReduceKind::kMax, Select(hit, Expr(r.var), IntImm(-1)), {r}, IntImm(-1));
        return Reduce(ReduceKind::kMin, Select(hit, Expr(r.var), IntImm(n)), {r}, IntImm(n));
      },
      DataType::Int64());
}

absl::StatusOr<te::Tensor> CumSumOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  auto axis = AxisOf(w, "axis", x->shape.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis, n = x->shape[a];
  const bool excl = w.IntOr("exclusive", 0) != 0, rev = w.IntOr("reverse", 0) != 0;
  DataType ct = Promote(x(std::vector<Expr>(x->shape.size(), IntImm(0)))).dtype();
  return te::Compute(
      "cumsum", x->shape,
      [&](const std::vector<Var>& o) {
        IterRange r = te::ReduceAxis(n, "k");
        std::vector<Expr> idx = AsExprs(o);
        idx[a] = r.var;
        Expr k = r.var, i = o[a];
        Expr take = rev ? (excl ? k > i : k >= i) : (excl ? k < i : k <= i);
        return Reduce(ReduceKind::kSum, Select(take, Promote(x(idx)), Const(ct, 0)), {r},
                      Const(ct, 0));
      },
      ct);
}

// ---------------------------------------------------------------------------
// Data movement

absl::StatusOr<te::Tensor> TransposeOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& perm = w.Ints("perm");
  const Shape& xs = x->shape;
  if (perm.size() != xs.size()) return Bad(w, "perm does not match the input rank");
  Shape out;
  std::vector<bool> seen(xs.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(xs.size()) || seen[p]) return Bad(w, "bad perm");
    seen[p] = true;
    out.push_back(xs[p]);
  }
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match perm");
  return te::Compute(
      "transpose", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx(xs.size());
        for (size_t d = 0; d < perm.size(); ++d) idx[perm[d]] = o[d];
        return x(idx);
      },
      x.buffer()->dtype);
}

absl::StatusOr<te::Tensor> ConcatOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const Shape& out = w.Ints("shape");
  auto axis = AxisOf(w, "axis", out.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis;
  int64_t total = 0;
  for (const te::Tensor& t : in) {
    if (t->shape.size() != out.size()) return Bad(w, "inputs differ in rank");
    for (size_t d = 0; d < out.size(); ++d) {
      if (static_cast<int64_t>(d) != a && t->shape[d] != out[d]) {
        return Bad(w, "inputs differ off the axis");
      }
    }
    if (t.buffer()->dtype != in[0].buffer()->dtype) return Bad(w, "inputs differ in dtype");
    total += t->shape[a];
  }
  if (total != out[a]) return Bad(w, "output shape does not match");
  return te::Compute(
      "concat", out,
      [&](const std::vector<Var>& o) {
        // From the last input back: each branch reads in bounds (clamped),
        // so evaluating both sides of a select is safe.
        Expr v;
        int64_t off = total;
        for (size_t k = in.size(); k-- > 0;) {
          const int64_t n = in[k]->shape[a];
          off -= n;
          if (n == 0) continue;
          std::vector<Expr> idx = AsExprs(o);
          idx[a] = Clamp(o[a] - IntImm(off), 0, n - 1);
          Expr load = in[k](idx);
          v = v.defined() ? Select(o[a] < IntImm(off + n), load, v) : load;
        }
        return v;
      },
      in[0].buffer()->dtype);
}

absl::StatusOr<te::Tensor> SliceOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const Shape& starts = w.Ints("starts");
  const Shape& steps = w.Ints("steps");
  const Shape& out = w.Ints("shape");
  if (starts.size() != xs.size() || steps.size() != xs.size() || out.size() != xs.size()) {
    return Bad(w, "starts/steps/shape must have one value per input dim");
  }
  for (size_t d = 0; d < xs.size(); ++d) {
    if (out[d] == 0) continue;
    int64_t last = starts[d] + (out[d] - 1) * steps[d];
    if (steps[d] == 0 || starts[d] < 0 || starts[d] >= xs[d] || last < 0 || last >= xs[d]) {
      return Bad(w, StrCat("slice of dim ", d, " reads outside the input"));
    }
  }
  return te::Compute(
      "slice", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < xs.size(); ++d)
          idx.push_back(IntImm(starts[d]) + o[d] * IntImm(steps[d]));
        return x(idx);
      },
      x.buffer()->dtype);
}

absl::StatusOr<te::Tensor> GatherOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const te::Tensor& ind = in.at(1);
  auto axis = AxisOf(w, "axis", x->shape.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis;
  const Shape& xs = x->shape;
  const Shape& is = ind->shape;
  if (!ind.buffer()->dtype.is_integer()) return Bad(w, "indices must be integers");
  // A scalar index (stored as shape [1]) drops the axis.
  const bool scalar_ind = w.IntOr("scalar_indices", 0) != 0;
  Shape out(xs.begin(), xs.begin() + a);
  if (!scalar_ind) out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), xs.begin() + a + 1, xs.end());
  if (out.empty()) out = {1};
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match");
  if (xs[a] == 0) return Bad(w, "gather from an empty axis");
  return te::Compute(
      "gather", out,
      [&](const std::vector<Var>& o) {
        // (A scalar index's output has no axis for it: on the last axis
        // o[a] does not exist, and reading it crashed.)
        std::vector<Expr> iidx(is.size(), IntImm(0));
        if (!scalar_ind) {
          for (size_t d = 0; d < is.size(); ++d) iidx[d] = o[a + d];
        }
        std::vector<Expr> idx;
        for (int64_t d = 0; d < a; ++d) idx.push_back(o[d]);
        idx.push_back(IndexInto(ind(iidx), xs[a]));
        size_t rest = a + (scalar_ind ? 0 : is.size());
        for (size_t d = a + 1; d < xs.size(); ++d) idx.push_back(o[rest++]);
        return x(idx);
      },
      x.buffer()->dtype);
}

absl::StatusOr<te::Tensor> GatherElementsOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const te::Tensor& ind = in.at(1);
  auto axis = AxisOf(w, "axis", x->shape.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis;
  if (ind->shape.size() != x->shape.size() || ind->shape != w.Ints("shape")) {
    return Bad(w, "indices must have the input's rank and the output's shape");
  }
  for (size_t d = 0; d < x->shape.size(); ++d) {
    if (static_cast<int64_t>(d) != a && ind->shape[d] > x->shape[d]) {
      return Bad(w, "indices larger than the input off the axis");
    }
  }
  return te::Compute(
      "gather_elements", ind->shape,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx = AsExprs(o);
        idx[a] = IndexInto(ind(AsExprs(o)), x->shape[a]);
        return x(idx);
      },
      x.buffer()->dtype);
}

absl::StatusOr<te::Tensor> PadOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  const Shape& pads = w.Ints("pads");
  const int64_t mode = w.IntOr("mode", 0);
  const size_t r = xs.size();
  if (pads.size() != 2 * r) return Bad(w, "pads must have 2 values per dim");
  Shape out;
  for (size_t d = 0; d < r; ++d) {
    out.push_back(xs[d] + pads[d] + pads[d + r]);
    if (out.back() < 0) return Bad(w, "negative output size");
    if (mode != 0 && xs[d] == 0 && out.back() > 0) return Bad(w, "cannot pad an empty dim");
    if (mode == 1 && (pads[d] >= xs[d] || pads[d + r] >= xs[d]) &&
        (pads[d] > 0 || pads[d + r] > 0)) {
      return Bad(w, "reflect padding must be smaller than the dim");
    }
  }
  if (out != w.Ints("shape")) return Bad(w, "output shape does not match");
  DataType t = x.buffer()->dtype;
  const double value = w.FloatOr("value", 0.0);
  return te::Compute(
      "pad", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx;
        Expr inside;
        for (size_t d = 0; d < r; ++d) {
          Expr i = o[d] - IntImm(pads[d]);
          const int64_t n = xs[d];
          if (mode == 1 && n > 1) {
            // Reflect: fold i into [0, n) without repeating the edge.
            Expr p = FloorMod(i, IntImm(2 * (n - 1)));
            i = Select(p < IntImm(n), p, IntImm(2 * (n - 1)) - p);
          } else if (mode == 3 && n > 0) {
            i = FloorMod(i, IntImm(n));  // wrap
          } else if (mode != 0) {
            i = Clamp(i, 0, std::max<int64_t>(n - 1, 0));
          } else {
            Expr ok = (i >= IntImm(0)) && (i < IntImm(n));
            inside = inside.defined() ? (inside && ok) : ok;
            i = Clamp(i, 0, std::max<int64_t>(n - 1, 0));
          }
          idx.push_back(i);
        }
        Expr v = x(idx);
        if (inside.defined()) v = Select(inside, v, Const(t, value));
        return v;
      },
      t);
}

absl::StatusOr<te::Tensor> WhereOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const Shape& out = w.Ints("shape");
  if (in.size() != 3 || !in[0].buffer()->dtype.is_bool()) return Bad(w, "needs bool, x, y");
  if (in[1].buffer()->dtype != in[2].buffer()->dtype) return Bad(w, "x and y differ in dtype");
  for (const auto& t : in) {
    if (t->shape.size() != out.size()) return Bad(w, "inputs must be padded to the output rank");
  }
  return te::Compute(
      "where", out,
      [&](const std::vector<Var>& o) {
        auto at = [&](const te::Tensor& t) { return t(BroadcastIndex(t->shape, o)); };
        return Select(at(in[0]), at(in[1]), at(in[2]));
      },
      in[1].buffer()->dtype);
}

absl::StatusOr<te::Tensor> TileOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& out = w.Ints("shape");
  if (out.size() != x->shape.size()) return Bad(w, "rank mismatch");
  for (size_t d = 0; d < out.size(); ++d) {
    if (x->shape[d] == 0 ? out[d] != 0 : out[d] % x->shape[d] != 0) {
      return Bad(w, "output is not a whole number of tiles");
    }
  }
  return te::Compute(
      "tile", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < out.size(); ++d) {
          idx.push_back(x->shape[d] == out[d] ? Expr(o[d]) : FloorMod(o[d], IntImm(x->shape[d])));
        }
        return x(idx);
      },
      x.buffer()->dtype);
}

absl::StatusOr<te::Tensor> TriluOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& x = in.at(0);
  const Shape& xs = x->shape;
  if (xs.size() < 2 || xs != w.Ints("shape")) return Bad(w, "needs rank >= 2, same shape");
  const bool upper = w.IntOr("upper", 1) != 0;
  const int64_t k = w.IntOr("k", 0);
  DataType t = x.buffer()->dtype;
  return te::Compute(
      "trilu", xs,
      [&](const std::vector<Var>& o) {
        Expr i = o[xs.size() - 2], j = o[xs.size() - 1];
        Expr keep = upper ? (j - i >= IntImm(k)) : (j - i <= IntImm(k));
        return Select(keep, x(AsExprs(o)), Const(t, 0));
      },
      t);
}

absl::StatusOr<te::Tensor> OneHotOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const te::Tensor& ind = in.at(0);
  const te::Tensor& vals = in.at(1);
  const Shape& out = w.Ints("shape");
  auto axis = AxisOf(w, "axis", out.size());
  if (!axis.ok()) return axis.status();
  const int64_t a = *axis, depth = out[a];
  if (vals->shape != Shape{2} || ind->shape.size() + 1 != out.size()) {
    return Bad(w, "values must be [2] and output rank = indices rank + 1");
  }
  return te::Compute(
      "onehot", out,
      [&](const std::vector<Var>& o) {
        std::vector<Expr> iidx;
        for (size_t d = 0; d < out.size(); ++d) {
          if (static_cast<int64_t>(d) != a) iidx.push_back(o[d]);
        }
        Expr v = ind(iidx);
        v = v.dtype().is_float() ? Cast(DataType::Int64(), Call(v.dtype(), Intrinsic::kTrunc, {v}))
                                 : Cast(DataType::Int64(), v);
        v = Select(v < IntImm(0), v + IntImm(depth), v);
        return Select(Eq(v, Expr(o[a])), vals({IntImm(1)}), vals({IntImm(0)}));
      },
      vals.buffer()->dtype);
}

absl::StatusOr<te::Tensor> EyeLikeOp(const Workload& w, const std::vector<te::Tensor>& in) {
  const Shape& out = w.Ints("shape");
  if (out.size() != 2) return Bad(w, "needs a 2-D output");
  const int64_t k = w.IntOr("k", 0);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  (void)in;
  DataType t = IrType(sig->output.dtype);
  return te::Compute(
      "eye", out,
      [&](const std::vector<Var>& o) {
        return Select(Eq(o[1] - o[0], IntImm(k)), Const(t, 1), Const(t, 0));
      },
      t);
}

// NegativeLogLikelihoodLoss, elementwise: in0 x [N, C, d...], in1 target
// [N, d...], optional in2 weight [C]. part 0: -x[n, t, d...] * w[t]; part 1:
// w[t] (1 without weights); both 0 where t == ignore (when has_ignore).
absl::StatusOr<te::Tensor> NllOp(const Workload& w, const std::vector<te::Tensor>& in) {
  if (in.size() < 2) return Bad(w, "needs input and target");
  const te::Tensor& x = in[0];
  const te::Tensor& t = in[1];
  const Shape& xs = x->shape;
  if (xs.size() < 2 || t->shape.size() + 1 != xs.size()) return Bad(w, "bad ranks");
  const int64_t C = xs[1];
  const bool has_weight = in.size() > 2, has_ignore = w.IntOr("has_ignore", 0) != 0;
  const int64_t ignore = w.IntOr("ignore", 0), part = w.IntOr("part", 0);
  if (!t.buffer()->dtype.is_integer()) return Bad(w, "target must be integers");
  DataType ct = Promote(x(std::vector<Expr>(xs.size(), IntImm(0)))).dtype();
  return te::Compute(
      "nll", t->shape,
      [&](const std::vector<Var>& o) {
        Expr tv = Cast(DataType::Int64(), t(AsExprs(o)));
        Expr tc = Clamp(tv, 0, C - 1);
        Expr wt = has_weight ? Promote(in[2]({tc})) : Const(ct, 1);
        Expr v = wt;
        if (part == 0) {
          std::vector<Expr> idx = {o[0], tc};
          for (size_t d = 1; d < o.size(); ++d) idx.push_back(o[d]);
          v = Const(ct, 0) - Promote(x(idx)) * wt;
        }
        return has_ignore ? Select(Eq(tv, IntImm(ignore)), Const(ct, 0), v) : v;
      },
      ct);
}

Expr Lowest(DataType t) {
  if (t.is_float()) return FloatImm(-std::numeric_limits<double>::infinity(), t);
  if (t.is_uint() || t.is_bool()) return IntImm(0, t);
  return IntImm(t.bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits - 1)),
                t);
}

Expr Highest(DataType t) {
  if (t.is_float()) return FloatImm(std::numeric_limits<double>::infinity(), t);
  if (t.is_bool()) return IntImm(1, t);
  if (t.bits == 64) return IntImm(t.is_uint() ? -1 : std::numeric_limits<int64_t>::max(), t);
  return IntImm(t.is_uint() ? (int64_t{1} << t.bits) - 1 : (int64_t{1} << (t.bits - 1)) - 1, t);
}

}  // namespace generic_internal

}  // namespace kiln::compiler::ops
