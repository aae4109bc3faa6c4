// ONNX operators addressed by index tensors onto the generic gather_nd,
// scatter and topk ops (compiler/ops/generic_index.cc): GatherND,
// ScatterElements, Scatter, ScatterND, TopK; and Compress and CenterCropPad
// onto gather and pad.
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportIndexing(const onnx::NodeProto& node, bool* handled) {
  *handled = true;
  const std::string& op = node.op_type();
  if (op == "GatherND") {
    auto x = In(node, 0), ind = In(node, 1);
    if (!x.ok() || !ind.ok()) return !x.ok() ? x.status() : ind.status();
    const Shape &xs = V(*x).shape, &is = V(*ind).shape;
    const int64_t b = AttrInt(node, "batch_dims", 0);
    if (is.empty() || b < 0 || b >= static_cast<int64_t>(std::min(is.size(), xs.size())) ||
        is.back() < 1 || b + is.back() > static_cast<int64_t>(xs.size())) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': indices do not fit the data"));
    }
    Shape out(is.begin(), is.end() - 1);
    out.insert(out.end(), xs.begin() + b + is.back(), xs.end());
    return StatusOf(
        Generic(node, Op::kGatherNd, {*x, *ind}, out, V(*x).dtype, {{"batch", {b}}}, 0));
  }
  if (op == "ScatterElements" || op == "Scatter" || op == "ScatterND") {
    auto x = In(node, 0), ind = In(node, 1), upd = In(node, 2);
    if (!x.ok() || !ind.ok() || !upd.ok()) {
      return !x.ok() ? x.status() : !ind.ok() ? ind.status() : upd.status();
    }
    const std::string red = AttrString(node, "reduction", "none");
    static const char* kReductions[] = {"none", "add", "mul", "max", "min"};
    int64_t r = -1;
    for (int64_t i = 0; i < 5; ++i) {
      if (red == kReductions[i]) r = i;
    }
    if (r < 0) return Unimplemented(node, StrCat("reduction '", red, "'"));
    std::map<std::string, std::vector<int64_t>> attrs = {{"reduction", {r}},
                                                         {"mode", {op == "ScatterND" ? 1 : 0}}};
    if (op != "ScatterND") {
      auto axis = NormAxis(node, AttrInt(node, "axis", 0), V(*x).shape.size());
      if (!axis.ok()) return axis.status();
      attrs["axis"] = {*axis};
    }
    return StatusOf(
        Generic(node, Op::kScatter, {*x, *ind, *upd}, V(*x).shape, V(*x).dtype, attrs, 0));
  }
  if (op == "TopK") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    int64_t k = AttrInt(node, "k", -1);
    if (opset_ >= 10) {
      auto kv = ConstInts(node, 1);
      if (!kv.ok()) return kv.status();
      if (kv->size() != 1) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': k must be one value"));
      }
      k = (*kv)[0];
    }
    auto axis = NormAxis(node, AttrInt(node, "axis", -1), xs.size());
    if (!axis.ok()) return axis.status();
    if (k < 0 || k > xs[*axis]) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': k ", k, " is outside [0, ", xs[*axis], "]"));
    }
    Shape out = xs;
    out[*axis] = k;
    std::map<std::string, std::vector<int64_t>> attrs = {
        {"axis", {*axis}}, {"largest", {AttrInt(node, "largest", 1)}}, {"part", {0}}};
    auto values = Generic(node, Op::kTopK, {*x}, out, V(*x).dtype, attrs, 0);
    if (!values.ok() || node.output_size() < 2 || node.output(1).empty()) return StatusOf(values);
    attrs["part"] = {1};
    return StatusOf(Generic(node, Op::kTopK, {*x}, out, DType::kInt64, attrs, 1));
  }
  if (op == "Compress") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto cond = ConstInts(node, 1);
    if (!cond.ok()) return cond.status();
    int src = *x;
    int64_t axis = 0;
    if (const auto* a = Attr(node, "axis")) {
      auto n = NormAxis(node, a->i(), V(*x).shape.size());
      if (!n.ok()) return n.status();
      axis = *n;
    } else {
      auto flat = Reshaped(node, *x, {V(*x).NumElements()});
      if (!flat.ok()) return flat.status();
      src = *flat;
    }
    const Shape xs = V(src).shape;
    if (static_cast<int64_t>(cond->size()) > xs[axis]) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': condition longer than the axis"));
    }
    std::vector<int64_t> keep;
    for (size_t i = 0; i < cond->size(); ++i) {
      if ((*cond)[i] != 0) keep.push_back(static_cast<int64_t>(i));
    }
    if (keep.empty()) return Unimplemented(node, "an empty result");
    Shape out = xs;
    out[axis] = static_cast<int64_t>(keep.size());
    int ind = ConstInt64s(Name(node), {static_cast<int64_t>(keep.size())}, keep);
    return StatusOf(
        Generic(node, Op::kGather, {src, ind}, out, V(src).dtype, {{"axis", {axis}}}, 0));
  }
  if (op == "CenterCropPad") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto target = ConstInts(node, 1);
    if (!target.ok()) return target.status();
    const Shape xs = V(*x).shape;
    const size_t r = xs.size();
    std::vector<int64_t> axes = AttrInts(node, "axes", {});
    if (axes.empty()) {
      for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    }
    if (axes.size() != target->size()) {
      return absl::InvalidArgumentError(
          StrCat("node '", Name(node), "': shape needs one value per axis"));
    }
    Shape pads(2 * r, 0), out = xs;
    for (size_t i = 0; i < axes.size(); ++i) {
      auto a = NormAxis(node, axes[i], r);
      if (!a.ok()) return a.status();
      const int64_t in = xs[*a], t = (*target)[i];
      if (t < 0 || t > kMaxElements) {
        return absl::InvalidArgumentError(StrCat("node '", Name(node), "': bad target size"));
      }
      const int64_t begin = t < in ? -((in - t) / 2) : (t - in) / 2;
      pads[*a] = begin;
      pads[*a + r] = t - in - begin;
      out[*a] = t;
    }
    return StatusOf(
        Generic(node, Op::kPad, {*x}, out, V(*x).dtype, {{"pads", pads}, {"mode", {0}}}, 0));
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
