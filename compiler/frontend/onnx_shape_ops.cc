// ONNX shape arithmetic and data movement onto the generic operators
// (compiler/ops/generic.h): Shape, Size, ConstantOfShape, Range, Squeeze,
// Unsqueeze, Expand, Tile, Transpose, Concat, Split, Slice, Gather(Elements),
// Pad, DepthToSpace/SpaceToDepth, Trilu, CumSum, OneHot, EyeLike. Constant
// inputs fold at import.
#include <numeric>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportDataMovement(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  if (op == "Shape") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape& xs = V(*x).shape;
    int64_t r = static_cast<int64_t>(xs.size());
    int64_t start = AttrInt(node, "start", 0), end = AttrInt(node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    Shape dims(xs.begin() + start, xs.begin() + end);
    int v = NewValue(node, 0, {static_cast<int64_t>(dims.size())}, DType::kInt64);
    g_->values[v].SetInt64s(dims);
    return absl::OkStatus();
  }
  if (op == "Size") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    int v = NewValue(node, 0, {}, DType::kInt64);
    g_->values[v].SetInt64s({V(*x).NumElements()});
    return absl::OkStatus();
  }
  if (op == "ConstantOfShape") {
    auto shape = ConstInts(node, 0);
    if (!shape.ok()) return shape.status();
    int64_t n = 1;
    for (int64_t d : *shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(StrCat(
            "node '", Name(node), "': negative dimension in shape [", StrJoin(*shape, ","), "]"));
      }
      if (d > 0 && n > max_elements_ / d) {
        return TooManyElements(StrCat("its output of shape [", StrJoin(*shape, ","), "]"));
      }
      n *= d;
    }
    DType dtype = DType::kFloat32;
    std::vector<uint8_t> one(4, 0);
    if (const auto* a = Attr(node, "value")) {
      auto d = DTypeFromOnnx(a->t().data_type());
      if (!d) return Unimplemented(node, "unsupported value dtype");
      auto b = TensorBytes(a->t(), *d, 1);
      if (!b.ok()) return b.status();
      dtype = *d;
      one = *b;
    }
    if (auto s = CheckFoldBudget(n * DTypeBytes(dtype)); !s.ok()) return s;
    int v = NewValue(node, 0, *shape, dtype);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * DTypeBytes(dtype)));
    for (int64_t i = 0; i < n; ++i)
      std::copy(one.begin(), one.end(), bytes.begin() + i * DTypeBytes(dtype));
    g_->values[v].bytes = std::move(bytes);
    return absl::OkStatus();
  }
  if (op == "Range") {
    auto s = ConstDoubles(node, 0), l = ConstDoubles(node, 1), d = ConstDoubles(node, 2);
    if (!s.ok() || !l.ok() || !d.ok())
      return !s.ok() ? s.status() : !l.ok() ? l.status() : d.status();
    DType dtype = V(*In(node, 0)).dtype;
    double start = s->at(0), limit = l->at(0), delta = d->at(0);
    if (delta == 0) return absl::InvalidArgumentError(StrCat("node '", Name(node), "': delta 0"));
    double cnt = std::max(0.0, std::ceil((limit - start) / delta));
    if (cnt > static_cast<double>(max_elements_)) {
      return TooManyElements(StrCat("a range of ", cnt, " values"));
    }
    int64_t n = static_cast<int64_t>(cnt);
    if (auto s = CheckFoldBudget(n * DTypeBytes(dtype)); !s.ok()) return s;
    int v = NewValue(node, 0, {n}, dtype);
    std::vector<uint8_t> bytes(static_cast<size_t>(n * DTypeBytes(dtype)));
    for (int64_t i = 0; i < n; ++i) {
      if (IsFloat(dtype)) {
        DoubleToElement(dtype, start + static_cast<double>(i) * delta, bytes.data(), i);
      } else {
        Int64ToElement(dtype, static_cast<int64_t>(start) + i * static_cast<int64_t>(delta),
                       bytes.data(), i);
      }
    }
    g_->values[v].bytes = std::move(bytes);
    return absl::OkStatus();
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    std::vector<int64_t> axes = AttrInts(node, "axes", {});
    if (opset_ >= 13 && HasIn(node, 1)) {
      auto a = ConstInts(node, 1);
      if (!a.ok()) return a.status();
      axes = *a;
    }
    Shape xs = V(*x).shape, out;
    if (op == "Squeeze") {
      std::vector<bool> drop(xs.size(), false);
      for (int64_t a : axes) {
        auto n = NormAxis(node, a, xs.size());
        if (!n.ok()) return n.status();
        if (xs[*n] != 1) {
          return absl::InvalidArgumentError(StrCat(
              "node '", Name(node), "': cannot squeeze dimension ", *n, " of size ", xs[*n]));
        }
        drop[*n] = true;
      }
      for (size_t d = 0; d < xs.size(); ++d) {
        if (axes.empty() ? xs[d] != 1 : !drop[d]) out.push_back(xs[d]);
      }
    } else {
      const size_t rank = xs.size() + axes.size();
      std::vector<bool> ins(rank, false);
      for (int64_t a : axes) {
        auto n = NormAxis(node, a, rank);
        if (!n.ok()) return n.status();
        if (ins[*n])
          return absl::InvalidArgumentError(StrCat("node '", Name(node), "': repeated axis"));
        ins[*n] = true;
      }
      size_t k = 0;
      for (size_t d = 0; d < rank; ++d) out.push_back(ins[d] ? 1 : xs[k++]);
    }
    return StatusOf(Reshaped(node, *x, out, 0));
  }
  if (op == "Expand") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto shape = ConstInts(node, 1);
    if (!shape.ok()) return shape.status();
    auto s = Broadcast(V(*x).shape, *shape, StrCat("node '", Name(node), "'"));
    if (!s.ok()) return s.status();
    return StatusOf(Expand(node, *x, *s, 0));
  }
  if (op == "Tile") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto reps = ConstInts(node, 1);
    if (!reps.ok()) return reps.status();
    Shape xs = V(*x).shape, out;
    if (reps->size() != xs.size())
      return absl::InvalidArgumentError("Tile: repeats must match the rank");
    for (size_t d = 0; d < xs.size(); ++d) {
      if ((*reps)[d] < 0) return absl::InvalidArgumentError("Tile: negative repeat");
      if ((*reps)[d] > 0 && xs[d] > kMaxElements / (*reps)[d]) {
        return absl::InvalidArgumentError("Tile: output too large");
      }
      out.push_back(xs[d] * (*reps)[d]);
    }
    return StatusOf(Generic(node, Op::kTile, {*x}, out, V(*x).dtype, {}, 0));
  }
  if (op == "Transpose") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    return StatusOf(Transposed(node, *x, AttrInts(node, "perm", {}), 0));
  }
  if (op == "Concat") {
    std::vector<int> ins;
    for (int i = 0; i < node.input_size(); ++i) {
      auto v = In(node, i);
      if (!v.ok()) return v.status();
      ins.push_back(*v);
    }
    if (ins.empty()) return absl::InvalidArgumentError("Concat needs inputs");
    auto axis = NormAxis(node, AttrInt(node, "axis", opset_ < 4 ? 1 : 0), V(ins[0]).shape.size());
    if (!axis.ok()) return axis.status();
    Shape out = V(ins[0]).shape;
    out[*axis] = 0;
    for (int v : ins) {
      if (V(v).shape.size() != out.size()) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': inputs differ in rank"));
      }
      out[*axis] += V(v).shape[*axis];
    }
    return StatusOf(Generic(node, Op::kConcat, ins, out, V(ins[0]).dtype, {{"axis", {*axis}}}, 0));
  }
  if (op == "Split") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", 0), xs.size());
    if (!axis.ok()) return axis.status();
    std::vector<int64_t> split = AttrInts(node, "split", {});
    if (opset_ >= 13 && HasIn(node, 1)) {
      auto s = ConstInts(node, 1);
      if (!s.ok()) return s.status();
      split = *s;
    }
    const int64_t n = xs[*axis];
    if (split.empty()) {
      int64_t parts = AttrInt(node, "num_outputs", node.output_size());
      if (parts <= 0) return absl::InvalidArgumentError("Split: no outputs");
      int64_t each = (n + parts - 1) / parts;
      for (int64_t i = 0, left = n; i < parts; ++i, left -= each)
        split.push_back(std::min(each, std::max<int64_t>(left, 0)));
    }
    if (static_cast<int>(split.size()) != node.output_size() ||
        std::accumulate(split.begin(), split.end(), int64_t{0}) != n) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': split sizes do not match"));
    }
    int64_t start = 0;
    for (int i = 0; i < node.output_size(); ++i) {
      Shape out = xs, starts(xs.size(), 0), steps(xs.size(), 1);
      out[*axis] = split[i];
      starts[*axis] = start;
      start += split[i];
      if (node.output(i).empty()) continue;
      if (split[i] == 0) {
        int v = NewValue(node, i, out, V(*x).dtype);
        g_->values[v].bytes.emplace();
        continue;
      }
      auto r = Generic(node, Op::kSlice, {*x}, out, V(*x).dtype,
                       {{"starts", starts}, {"steps", steps}}, i);
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  }
  if (op == "Slice") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = AttrInts(node, "starts", {});
      ends = AttrInts(node, "ends", {});
      axes = AttrInts(node, "axes", {});
    } else {
      auto s = ConstInts(node, 1), e = ConstInts(node, 2);
      if (!s.ok() || !e.ok()) return !s.ok() ? s.status() : e.status();
      starts = *s;
      ends = *e;
      if (HasIn(node, 3)) {
        auto a = ConstInts(node, 3);
        if (!a.ok()) return a.status();
        axes = *a;
      }
      if (HasIn(node, 4)) {
        auto st = ConstInts(node, 4);
        if (!st.ok()) return st.status();
        steps = *st;
      }
    }
    if (axes.empty()) {
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (starts.size() != ends.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': starts/ends/axes/steps differ in length"));
    }
    Shape out = xs, st(xs.size(), 0), sp(xs.size(), 1);
    for (size_t k = 0; k < axes.size(); ++k) {
      auto a = NormAxis(node, axes[k], xs.size());
      if (!a.ok()) return a.status();
      const int64_t dim = xs[*a], step = steps[k];
      if (step == 0) return absl::InvalidArgumentError(StrCat("node '", Name(node), "': step 0"));
      int64_t b = starts[k], e = ends[k];
      if (b < 0) b += dim;
      if (e < 0) e += dim;
      if (step > 0) {
        b = std::clamp<int64_t>(b, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        out[*a] = e > b ? (e - b + step - 1) / step : 0;
      } else {
        b = std::clamp<int64_t>(b, -1, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        out[*a] = b > e ? (b - e + (-step) - 1) / (-step) : 0;
      }
      st[*a] = out[*a] == 0 ? 0 : b;
      sp[*a] = step;
    }
    if (Product(out) == 0) {
      int v = NewValue(node, 0, out, V(*x).dtype);
      g_->values[v].bytes.emplace();
      return absl::OkStatus();
    }
    return StatusOf(
        Generic(node, Op::kSlice, {*x}, out, V(*x).dtype, {{"starts", st}, {"steps", sp}}, 0));
  }
  if (op == "Gather" || op == "GatherElements") {
    auto x = In(node, 0), ind = In(node, 1);
    if (!x.ok() || !ind.ok()) return !x.ok() ? x.status() : ind.status();
    const Shape xs = V(*x).shape, is = V(*ind).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", 0), xs.size());
    if (!axis.ok()) return axis.status();
    if (IsFloat(V(*ind).dtype) || V(*ind).dtype == DType::kBool) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': indices must be integers"));
    }
    if (V(*ind).IsConstant()) {
      for (int64_t i : V(*ind).ToInt64s()) {
        if (i < -xs[*axis] || i >= xs[*axis]) {
          return absl::InvalidArgumentError(StrCat("node '", Name(node), "': index ", i,
                                                   " out of range for dimension of size ",
                                                   xs[*axis]));
        }
      }
    }
    if (op == "GatherElements") {
      return StatusOf(
          Generic(node, Op::kGatherElements, {*x, *ind}, is, V(*x).dtype, {{"axis", {*axis}}}, 0));
    }
    Shape out(xs.begin(), xs.begin() + *axis);
    out.insert(out.end(), is.begin(), is.end());
    out.insert(out.end(), xs.begin() + *axis + 1, xs.end());
    std::map<std::string, std::vector<int64_t>> attrs = {{"axis", {*axis}}};
    if (is.empty()) attrs["scalar_indices"] = {1};
    return StatusOf(Generic(node, Op::kGather, {*x, *ind}, out, V(*x).dtype, attrs, 0));
  }
  if (op == "Pad") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const size_t r = xs.size();
    std::vector<int64_t> pads;
    double value = 0;
    std::string mode = AttrString(node, "mode", "constant");
    if (opset_ < 11) {
      pads = AttrInts(node, opset_ < 2 ? "paddings" : "pads", {});
      value = AttrFloat(node, "value", 0.0f);
    } else {
      auto p = ConstInts(node, 1);
      if (!p.ok()) return p.status();
      pads = *p;
      if (HasIn(node, 2)) {
        auto v = ConstDoubles(node, 2);
        if (!v.ok()) return v.status();
        if (!v->empty()) value = (*v)[0];
      }
      if (HasIn(node, 3)) {
        auto a = ConstInts(node, 3);
        if (!a.ok()) return a.status();
        if (pads.size() != 2 * a->size())
          return absl::InvalidArgumentError("Pad: pads must be twice the axes");
        std::vector<int64_t> full(2 * r, 0);
        for (size_t k = 0; k < a->size(); ++k) {
          auto ax = NormAxis(node, (*a)[k], r);
          if (!ax.ok()) return ax.status();
          full[*ax] = pads[k];
          full[*ax + r] = pads[k + a->size()];
        }
        pads = full;
      }
    }
    if (pads.size() != 2 * r) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': pads needs ", 2 * r, " values"));
    }
    Shape out;
    for (size_t d = 0; d < r; ++d) {
      if (pads[d] < -kMaxElements || pads[d] > kMaxElements || pads[d + r] < -kMaxElements ||
          pads[d + r] > kMaxElements) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': pads too large"));
      }
      out.push_back(xs[d] + pads[d] + pads[d + r]);
      if (out.back() < 0)
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': negative output size"));
    }
    int64_t m = mode == "constant"  ? 0
                : mode == "reflect" ? 1
                : mode == "edge"    ? 2
                : mode == "wrap"    ? 3
                                    : -1;
    if (m < 0) return Unimplemented(node, StrCat("mode '", mode, "'"));
    return StatusOf(Generic(node, Op::kPad, {*x}, out, V(*x).dtype, {{"pads", pads}, {"mode", {m}}},
                            0, {{"value", value}}));
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const int64_t b = AttrInt(node, "blocksize", 0);
    if (xs.size() != 4 || b <= 0)
      return absl::InvalidArgumentError("needs NCHW input and blocksize > 0");
    const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
    absl::StatusOr<int> r, t;
    if (op == "DepthToSpace") {
      if (C % (b * b)) return absl::InvalidArgumentError("channels not divisible by blocksize^2");
      bool crd = AttrString(node, "mode", "DCR") == "CRD";
      r = crd ? Reshaped(node, *x, {N, C / (b * b), b, b, H, W})
              : Reshaped(node, *x, {N, b, b, C / (b * b), H, W});
      if (!r.ok()) return r.status();
      t = crd ? Transposed(node, *r, {0, 1, 4, 2, 5, 3}) : Transposed(node, *r, {0, 3, 4, 1, 5, 2});
      if (!t.ok()) return t.status();
      return StatusOf(Reshaped(node, *t, {N, C / (b * b), H * b, W * b}, 0));
    }
    if (H % b || W % b)
      return absl::InvalidArgumentError("spatial dims not divisible by blocksize");
    r = Reshaped(node, *x, {N, C, H / b, b, W / b, b});
    if (!r.ok()) return r.status();
    t = Transposed(node, *r, {0, 3, 5, 1, 2, 4});
    if (!t.ok()) return t.status();
    return StatusOf(Reshaped(node, *t, {N, C * b * b, H / b, W / b}, 0));
  }
  if (op == "Trilu") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    int64_t k = 0;
    if (HasIn(node, 1)) {
      auto kv = ConstInts(node, 1);
      if (!kv.ok()) return kv.status();
      k = kv->at(0);
    }
    if (V(*x).NumElements() == 0) return StatusOf(Reshaped(node, *x, V(*x).shape, 0));
    return StatusOf(Generic(node, Op::kTrilu, {*x}, V(*x).shape, V(*x).dtype,
                            {{"upper", {AttrInt(node, "upper", 1)}}, {"k", {k}}}, 0));
  }
  if (op == "CumSum") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto a = ConstInts(node, 1);
    if (!a.ok()) return a.status();
    auto axis = NormAxis(node, a->at(0), V(*x).shape.size());
    if (!axis.ok()) return axis.status();
    return StatusOf(Generic(node, Op::kCumSum, {*x}, V(*x).shape, V(*x).dtype,
                            {{"axis", {*axis}},
                             {"exclusive", {AttrInt(node, "exclusive", 0)}},
                             {"reverse", {AttrInt(node, "reverse", 0)}}},
                            0));
  }
  if (op == "OneHot") {
    auto ind = In(node, 0), vals = In(node, 2);
    if (!ind.ok() || !vals.ok()) return !ind.ok() ? ind.status() : vals.status();
    auto depth = ConstDoubles(node, 1);
    if (!depth.ok()) return depth.status();
    const int64_t d = static_cast<int64_t>(depth->at(0));
    Shape is = V(*ind).shape;
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), is.size() + 1);
    if (!axis.ok()) return axis.status();
    if (d <= 0) return absl::InvalidArgumentError(StrCat("OneHot: depth ", d, " is not positive"));
    if (d > max_elements_) return TooManyElements(StrCat("a depth of ", d));
    Shape out = is;
    out.insert(out.begin() + *axis, d);
    return StatusOf(
        Generic(node, Op::kOneHot, {*ind, *vals}, out, V(*vals).dtype, {{"axis", {*axis}}}, 0));
  }
  if (op == "EyeLike") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    DType dtype = V(*x).dtype;
    if (const auto* a = Attr(node, "dtype")) {
      auto d = DTypeFromOnnx(a->i());
      if (!d) return Unimplemented(node, "unsupported dtype");
      dtype = *d;
    }
    return StatusOf(
        Generic(node, Op::kEyeLike, {*x}, V(*x).shape, dtype, {{"k", {AttrInt(node, "k", 0)}}}, 0));
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
