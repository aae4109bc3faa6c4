// ONNX normalizations and losses, imported as reductions plus elementwise
// steps (compiler/ops/generic.h, compiler/ops/elementwise.h): Layer-, Instance-,
// MeanVariance- and LpNormalization, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss.
#include <numeric>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportNormalization(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  // ---- Normalizations, as reductions and elementwise steps
  // (x - mean) / sqrt(var + eps) over `axes`; mean_out / inv_out >= 0 also
  // emit the mean and 1 / sqrt(var + eps) as those node outputs.
  auto normalize = [&](int x, std::vector<int64_t> axes, double eps, int out, int mean_out = -1,
                       int inv_out = -1) -> absl::StatusOr<int> {
    auto mean = ReduceOver(node, x, axes, true, 0);
    if (!mean.ok()) return mean;
    double n = static_cast<double>(V(x).NumElements()) /
               static_cast<double>(std::max<int64_t>(1, V(*mean).NumElements()));
    auto mu = Unary(node, *mean, ElementFn::kScale, {1.0 / n, 0.0}, mean_out);
    if (!mu.ok()) return mu;
    auto d = BinaryOp(node, x, *mu, ElementFn::kSub);
    if (!d.ok()) return d;
    auto sq = ReduceOver(node, *d, axes, true, 0, 2);
    if (!sq.ok()) return sq;
    auto var = Unary(node, *sq, ElementFn::kScale, {1.0 / n, eps});
    if (!var.ok()) return var;
    auto sd = Unary(node, *var, ElementFn::kSqrt);
    if (!sd.ok()) return sd;
    if (inv_out >= 0) {
      auto inv = Unary(node, *sd, ElementFn::kReciprocal, {}, inv_out);
      if (!inv.ok()) return inv;
    }
    return BinaryOp(node, *d, *sd, ElementFn::kDiv, out);
  };
  if (op == "LayerNormalization") {
    auto x = In(node, 0), scale = In(node, 1);
    if (!x.ok() || !scale.ok()) return !x.ok() ? x.status() : scale.status();
    const size_t r = V(*x).shape.size();
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), r);
    if (!axis.ok()) return axis.status();
    std::vector<int64_t> axes;
    for (size_t d = *axis; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    auto has_out = [&](int i) { return i < node.output_size() && !node.output(i).empty(); };
    auto y = normalize(*x, axes, AttrFloat(node, "epsilon", 1e-5f), -1, has_out(1) ? 1 : -1,
                       has_out(2) ? 2 : -1);
    if (!y.ok()) return y.status();
    bool bias = HasIn(node, 2);
    auto s = BinaryOp(node, *y, *scale, ElementFn::kMul, bias ? -1 : 0);
    if (!s.ok() || !bias) return StatusOf(s);
    auto b = In(node, 2);
    if (!b.ok()) return b.status();
    return StatusOf(BinaryOp(node, *s, *b, ElementFn::kAdd, 0));
  }
  if (op == "InstanceNormalization" || op == "MeanVarianceNormalization") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const size_t r = V(*x).shape.size();
    std::vector<int64_t> axes;
    if (op == "MeanVarianceNormalization") {
      axes = AttrInts(node, "axes", {0, 2, 3});
      auto m = ReduceOver(node, *x, axes, true, 0);
      if (!m.ok()) return m.status();
      double n =
          static_cast<double>(V(*x).NumElements()) / static_cast<double>(V(*m).NumElements());
      auto mu = Unary(node, *m, ElementFn::kScale, {1.0 / n, 0.0});
      if (!mu.ok()) return mu.status();
      auto d = BinaryOp(node, *x, *mu, ElementFn::kSub);
      if (!d.ok()) return d.status();
      auto sq = ReduceOver(node, *d, axes, true, 0, 2);
      if (!sq.ok()) return sq.status();
      auto var = Unary(node, *sq, ElementFn::kScale, {1.0 / n, 0.0});
      if (!var.ok()) return var.status();
      auto sd = Unary(node, *var, ElementFn::kSqrt);
      if (!sd.ok()) return sd.status();
      auto sde = Unary(node, *sd, ElementFn::kScale, {1.0, 1e-9});
      if (!sde.ok()) return sde.status();
      return StatusOf(BinaryOp(node, *d, *sde, ElementFn::kDiv, 0));
    }
    for (size_t d = 2; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    auto y = normalize(*x, axes, AttrFloat(node, "epsilon", 1e-5f), -1);
    if (!y.ok()) return y.status();
    Shape cs(r, 1);
    cs[1] = V(*x).shape[1];
    auto scale = In(node, 1), bias = In(node, 2);
    if (!scale.ok() || !bias.ok()) return !scale.ok() ? scale.status() : bias.status();
    auto sc = Reshaped(node, *scale, cs), bi = Reshaped(node, *bias, cs);
    if (!sc.ok() || !bi.ok()) return !sc.ok() ? sc.status() : bi.status();
    auto s = BinaryOp(node, *y, *sc, ElementFn::kMul);
    if (!s.ok()) return s.status();
    return StatusOf(BinaryOp(node, *s, *bi, ElementFn::kAdd, 0));
  }
  if (op == "GroupNormalization") {
    // Normalized per (n, group) over [N, G, C/G * spatial]; scale and bias
    // per channel (opset 21) or per group (opset 18).
    auto x = In(node, 0), scale = In(node, 1), bias = In(node, 2);
    if (!x.ok() || !scale.ok() || !bias.ok()) {
      return !x.ok() ? x.status() : !scale.ok() ? scale.status() : bias.status();
    }
    const Shape xs = V(*x).shape;
    const int64_t G = AttrInt(node, "num_groups", 0);
    if (xs.size() < 2 || G < 1 || xs[1] % G != 0) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': num_groups must divide the channels"));
    }
    auto x3 = Reshaped(node, *x, {xs[0], G, V(*x).NumElements() / std::max<int64_t>(1, xs[0] * G)});
    if (!x3.ok()) return x3.status();
    auto y3 = normalize(*x3, {2}, AttrFloat(node, "epsilon", 1e-5f), -1);
    if (!y3.ok()) return y3.status();
    const bool per_group = opset_ < 21;
    Shape ps = per_group ? Shape{G, 1} : Shape(xs.size(), 1);
    if (!per_group) ps[1] = xs[1];
    auto sc = Reshaped(node, *scale, ps), bi = Reshaped(node, *bias, ps);
    if (!sc.ok() || !bi.ok()) return !sc.ok() ? sc.status() : bi.status();
    int y = *y3;
    if (!per_group) {
      auto back = Reshaped(node, y, xs);
      if (!back.ok()) return back.status();
      y = *back;
    }
    auto m = BinaryOp(node, y, *sc, ElementFn::kMul);
    if (!m.ok()) return m.status();
    auto a = BinaryOp(node, *m, *bi, ElementFn::kAdd, per_group ? -1 : 0);
    if (!a.ok() || !per_group) return StatusOf(a);
    return StatusOf(Reshaped(node, *a, xs, 0));
  }
  if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss") {
    auto x = In(node, 0), t = In(node, 1);
    if (!x.ok() || !t.ok()) return !x.ok() ? x.status() : t.status();
    int input = *x;
    if (V(input).shape.size() < 2) return absl::InvalidArgumentError("loss input rank < 2");
    if (op == "SoftmaxCrossEntropyLoss") {
      // log_softmax over the class axis, then the NLL loss of it.
      const bool want_log = node.output_size() > 1 && !node.output(1).empty();
      auto st = StableExpSum(node, input, {1});
      if (!st.ok()) return st.status();
      auto l = Unary(node, st->sum, ElementFn::kLog);
      if (!l.ok()) return l.status();
      auto lp = BinaryOp(node, st->shifted, *l, ElementFn::kSub, want_log ? 1 : -1);
      if (!lp.ok()) return lp.status();
      input = *lp;
    }
    std::vector<int> ins = {input, *t};
    if (HasIn(node, 2)) {
      auto wt = In(node, 2);
      if (!wt.ok()) return wt.status();
      ins.push_back(*wt);
    }
    std::map<std::string, std::vector<int64_t>> attrs;
    if (Attr(node, "ignore_index")) {
      attrs["has_ignore"] = {1};
      attrs["ignore"] = {AttrInt(node, "ignore_index", 0)};
    }
    const std::string reduction = AttrString(node, "reduction", "mean");
    const DType dt = V(input).dtype;
    const Shape ts = V(*t).shape;
    attrs["part"] = {0};
    auto loss = Generic(node, Op::kNll, ins, ts, dt, attrs, reduction == "none" ? 0 : -1);
    if (!loss.ok() || reduction == "none") return StatusOf(loss);
    std::vector<int64_t> all(ts.size());
    std::iota(all.begin(), all.end(), 0);
    auto total = ReduceOver(node, *loss, all, false, 0, 0, reduction == "sum" ? 0 : -1);
    if (!total.ok() || reduction == "sum") return StatusOf(total);
    if (reduction != "mean") return Unimplemented(node, StrCat("reduction '", reduction, "'"));
    attrs["part"] = {1};
    auto wts = Generic(node, Op::kNll, ins, ts, dt, attrs);
    if (!wts.ok()) return wts.status();
    auto wsum = ReduceOver(node, *wts, all, false, 0);
    if (!wsum.ok()) return wsum.status();
    return StatusOf(BinaryOp(node, *total, *wsum, ElementFn::kDiv, 0));
  }
  if (op == "LpNormalization") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), V(*x).shape.size());
    if (!axis.ok()) return axis.status();
    int64_t p = AttrInt(node, "p", 2);
    auto n = ReduceOver(node, *x, {*axis}, true, 0, p == 1 ? 1 : 2);
    if (!n.ok()) return n.status();
    int nv = *n;
    if (p == 2) {
      auto s = Unary(node, nv, ElementFn::kSqrt);
      if (!s.ok()) return s.status();
      nv = *s;
    }
    return StatusOf(BinaryOp(node, *x, nv, ElementFn::kDiv, 0));
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
