// ONNX Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) onto the
// generic "resize" operator (compiler/ops/generic.h). Scales, sizes and roi
// must be known at compile time.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportResize(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  auto x = In(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = V(*x).shape;
  const DType dtype = V(*x).dtype;
  const size_t r = xs.size();
  if (r == 0) return Unimplemented(node, "a scalar input");
  const bool legacy = op == "Upsample" || opset_ < 11;  // Upsample / Resize-10 semantics

  std::string mode = AttrString(node, "mode", "nearest");
  int64_t m = mode == "nearest"                        ? 0
              : mode == "linear" || mode == "bilinear" ? 1
              : mode == "cubic" && !legacy             ? 2
                                                       : -1;
  if (m < 0) return Unimplemented(node, StrCat("mode '", mode, "'"));
  if (m != 0 && !IsFloat(dtype)) {
    return Unimplemented(
        node, StrCat(mode, " interpolation of ", DTypeName(dtype), " input (only float inputs)"));
  }

  // The axes the scales/sizes/roi refer to (opset 18+).
  std::vector<int64_t> axes;
  for (int64_t a : AttrInts(node, "axes", {})) {
    auto n = NormAxis(node, a, r);
    if (!n.ok()) return n.status();
    for (int64_t b : axes) {
      if (b == *n) return absl::InvalidArgumentError(StrCat(Name(node), ": repeated axis"));
    }
    axes.push_back(*n);
  }
  const bool have_axes = !axes.empty();
  if (!have_axes) {
    for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  const size_t na = axes.size();

  // Scales or sizes.
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (legacy) {
    if (const auto* a = Attr(node, "scales")) {
      scales.assign(a->floats().begin(), a->floats().end());
    } else {
      auto s = ConstDoubles(node, 1);
      if (!s.ok()) return s.status();
      scales = *s;
    }
  } else {
    if (HasIn(node, 2)) {
      auto s = ConstDoubles(node, 2);
      if (!s.ok()) return s.status();
      scales = *s;
    }
    if (HasIn(node, 3)) {
      auto s = ConstInts(node, 3);
      if (!s.ok()) return s.status();
      sizes = *s;
    }
    if (!scales.empty() && !sizes.empty()) {
      return absl::InvalidArgumentError(StrCat(Name(node), ": both scales and sizes given"));
    }
  }
  if (scales.empty() && sizes.empty()) {
    return absl::InvalidArgumentError(StrCat(Name(node), ": needs scales or sizes"));
  }
  if ((!scales.empty() && scales.size() != na) || (!sizes.empty() && sizes.size() != na)) {
    return absl::InvalidArgumentError(
        StrCat(Name(node), ": scales/sizes need one value per resized axis (", na, ")"));
  }

  std::vector<double> scale(r, 1.0);
  Shape out = xs;
  std::vector<bool> given(r, false);  // scale<d> passed explicitly
  if (!scales.empty()) {
    for (size_t k = 0; k < na; ++k) {
      const double s = scales[k];
      if (!(s > 0) || !std::isfinite(s)) {
        return absl::InvalidArgumentError(StrCat(Name(node), ": scales must be positive"));
      }
      const double o = std::floor(s * static_cast<double>(xs[axes[k]]));
      if (o > static_cast<double>(kMaxElements)) {
        return absl::InvalidArgumentError(StrCat(Name(node), ": output too large"));
      }
      scale[axes[k]] = s;
      given[axes[k]] = true;
      out[axes[k]] = static_cast<int64_t>(o);
    }
  } else {
    for (size_t k = 0; k < na; ++k) {
      if (sizes[k] < 0 || sizes[k] > kMaxElements) {
        return absl::InvalidArgumentError(StrCat(Name(node), ": bad sizes"));
      }
      if (xs[axes[k]] == 0) return Unimplemented(node, "sizes for an empty axis");
    }
    std::string policy = AttrString(node, "keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < na; ++k) {
        out[axes[k]] = sizes[k];
        scale[axes[k]] = static_cast<double>(sizes[k]) / static_cast<double>(xs[axes[k]]);
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = 0;
      for (size_t k = 0; k < na; ++k) {
        double q = static_cast<double>(sizes[k]) / static_cast<double>(xs[axes[k]]);
        s = k == 0 ? q : policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      if (!(s > 0)) return absl::InvalidArgumentError(StrCat(Name(node), ": zero sizes"));
      for (size_t k = 0; k < na; ++k) {
        scale[axes[k]] = s;
        given[axes[k]] = true;
        out[axes[k]] = static_cast<int64_t>(s * static_cast<double>(xs[axes[k]]) + 0.5);
      }
    } else {
      return Unimplemented(node, StrCat("keep_aspect_ratio_policy '", policy, "'"));
    }
  }
  double total = 1;
  for (int64_t d : out) total *= static_cast<double>(d);
  if (total > static_cast<double>(kMaxElements)) {
    return absl::InvalidArgumentError(StrCat(Name(node), ": output too large"));
  }

  // Coordinate transformation and nearest rounding.
  int64_t coord = 4;  // asymmetric
  std::vector<int64_t> nearest(r, 2);
  if (legacy) {
    // Upsample / Resize-10: asymmetric; nearest floors when enlarging and
    // rounds up when shrinking (as onnxruntime).
    for (size_t d = 0; d < r; ++d) nearest[d] = scale[d] < 1.0 ? 3 : 2;
  } else {
    const std::string ct = AttrString(node, "coordinate_transformation_mode", "half_pixel");
    static const char* kCoord[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                   "align_corners", "asymmetric",           "tf_crop_and_resize"};
    coord = -1;
    for (int64_t i = 0; i < 6; ++i) {
      if (ct == kCoord[i]) coord = i;
    }
    if (coord < 0) return Unimplemented(node, StrCat("coordinate_transformation_mode '", ct, "'"));
    if (coord == 1 && opset_ < 18) {
      return Unimplemented(node, "half_pixel_symmetric needs opset 18");
    }
    const std::string nm = AttrString(node, "nearest_mode", "round_prefer_floor");
    static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int64_t n = -1;
    for (int64_t i = 0; i < 4; ++i) {
      if (nm == kNearest[i]) n = i;
    }
    if (n < 0) return Unimplemented(node, StrCat("nearest_mode '", nm, "'"));
    nearest.assign(r, n);
  }

  std::map<std::string, double> floats;
  for (size_t d = 0; d < r; ++d) {
    if (given[d]) floats[StrCat("scale", d)] = scale[d];
  }
  if (coord == 5) {
    if (!HasIn(node, 1)) return absl::InvalidArgumentError(StrCat(Name(node), ": needs roi"));
    auto roi = ConstDoubles(node, 1);
    if (!roi.ok()) return roi.status();
    if (roi->size() != 2 * na) {
      return absl::InvalidArgumentError(
          StrCat(Name(node), ": roi needs ", 2 * na, " values, has ", roi->size()));
    }
    for (size_t k = 0; k < na; ++k) {
      floats[StrCat("roi_lo", axes[k])] = (*roi)[k];
      floats[StrCat("roi_hi", axes[k])] = (*roi)[k + na];
    }
    floats["extrapolation"] = AttrFloat(node, "extrapolation_value", 0.0f);
  }
  if (m == 2) floats["cubic_a"] = AttrFloat(node, "cubic_coeff_a", -0.75f);
  std::map<std::string, std::vector<int64_t>> attrs = {
      {"mode", {m}},
      {"coord", {coord}},
      {"nearest", nearest},
      {"exclude", {AttrInt(node, "exclude_outside", 0) != 0 ? 1 : 0}}};
  // Antialiasing widens linear/cubic filters when downsampling (opset 18).
  if (m != 0 && AttrInt(node, "antialias", 0) != 0) attrs["antialias"] = {1};
  auto v = Generic(node, Op::kResize, {*x}, out, dtype, std::move(attrs), 0, std::move(floats));
  return StatusOf(v);
}

absl::Status Importer::ImportGridSample(const onnx::NodeProto& node) {
  auto x = InF(node, 0), grid = InF(node, 1);
  if (!x.ok() || !grid.ok()) return !x.ok() ? x.status() : grid.status();
  const Shape xs = V(*x).shape, gs = V(*grid).shape;
  if (xs.size() < 3 || gs.size() != xs.size() || gs[0] != xs[0] ||
      gs.back() != static_cast<int64_t>(xs.size()) - 2) {
    return absl::InvalidArgumentError(StrCat("grid [", StrJoin(gs, ","), "] must be [N, ",
                                             "spatial..., ", xs.size() - 2, "] for X [",
                                             StrJoin(xs, ","), "]"));
  }
  // Opset 16's names and opset 20's.
  const std::string mode = AttrString(node, "mode", opset_ >= 20 ? "linear" : "bilinear");
  const std::string padding = AttrString(node, "padding_mode", "zeros");
  int64_t m = -1, p = -1;
  if (mode == "linear" || mode == "bilinear") m = 0;
  if (mode == "nearest") m = 1;
  if (mode == "cubic" || mode == "bicubic") m = 2;
  if (padding == "zeros") p = 0;
  if (padding == "border") p = 1;
  if (padding == "reflection") p = 2;
  if (m < 0 || p < 0) {
    return absl::InvalidArgumentError(
        StrCat("mode '", mode, "' or padding_mode '", padding, "' is not GridSample's"));
  }
  Shape out = {xs[0], xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  auto v = Generic(node, Op::kGridSample, {*x, *grid}, out, DType::kFloat32,
                   {{"mode", {m}},
                    {"padding", {p}},
                    {"align", {AttrInt(node, "align_corners", 0) != 0 ? 1 : 0}}},
                   0);
  return StatusOf(v);
}

}  // namespace kiln::compiler::onnx_internal
