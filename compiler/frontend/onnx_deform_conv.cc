// DeformConv (2-D) as the nodes of its definition: for each offset group,
// every tap's sampling points (the output pixel's window position plus the
// tap's learned offset, (dy, dx) pairs) as one GridSample grid (bilinear,
// zeros outside, align_corners 0: normalized (2p + 1) / size - 1), the
// samples times the mask, then per convolution group the weights' matrix
// times the samples' columns, plus the bias.
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportDeformConv(const onnx::NodeProto& node) {
  const std::string base = Name(node);
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  auto w = InF(node, 1);
  if (!w.ok()) return w.status();
  auto off = InF(node, 2);
  if (!off.ok()) return off.status();
  const Shape xs = V(*x).shape, ws = V(*w).shape, os = V(*off).shape;
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(StrCat("node '", base, "' (DeformConv): ", why));
  };
  if (xs.size() != 4 || ws.size() != 4 || os.size() != 4) {
    return absl::UnimplementedError(
        StrCat("node '", base, "' (DeformConv): only 2-D (4-D X, W and offset)"));
  }
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t oC = ws[0], kH = ws[2], kW = ws[3], K = kH * kW;
  const int64_t group = AttrInt(node, "group", 1), G = AttrInt(node, "offset_group", 1);
  const Shape strides = AttrInts(node, "strides", {1, 1});
  const Shape dil = AttrInts(node, "dilations", {1, 1});
  const Shape pads = AttrInts(node, "pads", {0, 0, 0, 0});
  if (group <= 0 || G <= 0 || C % group != 0 || oC % group != 0 || C % G != 0 ||
      ws[1] != C / group || strides.size() != 2 || dil.size() != 2 || pads.size() != 4 ||
      strides[0] <= 0 || strides[1] <= 0 || dil[0] <= 0 || dil[1] <= 0 || H <= 0 || W <= 0) {
    return bad("the attributes do not fit the shapes of X and W");
  }
  const int64_t oH = (H + pads[0] + pads[2] - dil[0] * (kH - 1) - 1) / strides[0] + 1;
  const int64_t oW = (W + pads[1] + pads[3] - dil[1] * (kW - 1) - 1) / strides[1] + 1;
  if (oH <= 0 || oW <= 0 || os[0] != N || os[1] != G * K * 2 || os[2] != oH || os[3] != oW) {
    return bad(StrCat("offset must be [", N, ", ", G * K * 2, ", ", oH, ", ", oW, "]"));
  }
  if (HasIn(node, 4)) {
    auto m = InF(node, 4);
    if (!m.ok()) return m.status();
    if (V(*m).shape != Shape{N, G * K, oH, oW}) {
      return bad(StrCat("mask must be [", N, ", ", G * K, ", ", oH, ", ", oW, "]"));
    }
  }
  auto ints = [&](const std::vector<int64_t>& v) { return EmitInt64s(base, v); };
  // The taps' window positions, normalized: [1, K, oH, oW] for y and x.
  std::vector<float> ny(static_cast<size_t>(K * oH * oW)), nx(ny.size());
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t h = 0; h < oH; ++h) {
      for (int64_t c = 0; c < oW; ++c) {
        const size_t at = static_cast<size_t>((k * oH + h) * oW + c);
        const double py = static_cast<double>(h * strides[0] - pads[0] + (k / kW) * dil[0]);
        const double px = static_cast<double>(c * strides[1] - pads[1] + (k % kW) * dil[1]);
        ny[at] = static_cast<float>((2 * py + 1) / static_cast<double>(H) - 1);
        nx[at] = static_cast<float>((2 * px + 1) / static_cast<double>(W) - 1);
      }
    }
  }
  auto grid_base = [&](const std::vector<float>& v) {
    Value c;
    c.SetFloats(v);
    c.shape = {1, K, oH, oW};
    return NamedConstant(base, std::move(c));
  };
  const std::string by = grid_base(ny), bx = grid_base(nx);
  const std::string sy = NamedScalar(base, 2.0f / static_cast<float>(H));
  const std::string sx = NamedScalar(base, 2.0f / static_cast<float>(W));
  KILN_EMIT_OR_RETURN(shape6, ints({N, G, K, 2, oH, oW}));
  KILN_EMIT_OR_RETURN(offsets, Emit(base, "Reshape", {node.input(2), shape6}));
  KILN_EMIT_OR_RETURN(last, ints({-1}));
  KILN_EMIT_OR_RETURN(grid_shape, ints({N, K * oH, oW, 2}));
  KILN_EMIT_OR_RETURN(sample_shape, ints({N, C / G, K, oH * oW}));
  KILN_EMIT_OR_RETURN(axis1, ints({1}));
  std::string mask;
  if (HasIn(node, 4)) {
    KILN_EMIT_OR_RETURN(mask_shape, ints({N, G, K, oH * oW}));
    KILN_EMIT_OR_RETURN(m, Emit(base, "Reshape", {node.input(4), mask_shape}));
    mask = m;
  }
  KILN_EMIT_OR_RETURN(i0, EmitInt64s(base, {0}, true));
  KILN_EMIT_OR_RETURN(i1, EmitInt64s(base, {1}, true));
  std::vector<std::string> samples;
  for (int64_t g = 0; g < G; ++g) {
    KILN_EMIT_OR_RETURN(gi, EmitInt64s(base, {g}, true));
    KILN_EMIT_OR_RETURN(
        og, Emit(base, "Gather", {offsets, gi}, IntAttr("axis", 1)));  // [N, K, 2, oH, oW]
    KILN_EMIT_OR_RETURN(dy, Emit(base, "Gather", {og, i0}, IntAttr("axis", 2)));  // [N, K, oH, oW]
    KILN_EMIT_OR_RETURN(dx, Emit(base, "Gather", {og, i1}, IntAttr("axis", 2)));
    KILN_EMIT_OR_RETURN(sdy, Emit(base, "Mul", {dy, sy}));
    KILN_EMIT_OR_RETURN(sdx, Emit(base, "Mul", {dx, sx}));
    KILN_EMIT_OR_RETURN(gy, Emit(base, "Add", {sdy, by}));
    KILN_EMIT_OR_RETURN(gx, Emit(base, "Add", {sdx, bx}));
    KILN_EMIT_OR_RETURN(uy, Emit(base, "Unsqueeze", {gy, last}));
    KILN_EMIT_OR_RETURN(ux, Emit(base, "Unsqueeze", {gx, last}));
    KILN_EMIT_OR_RETURN(grid5, Emit(base, "Concat", {ux, uy}, IntAttr("axis", -1)));
    KILN_EMIT_OR_RETURN(grid, Emit(base, "Reshape", {grid5, grid_shape}));
    KILN_EMIT_OR_RETURN(lo, ints({g * (C / G)}));
    KILN_EMIT_OR_RETURN(hi, ints({(g + 1) * (C / G)}));
    KILN_EMIT_OR_RETURN(xg, Emit(base, "Slice", {node.input(0), lo, hi, axis1}));
    KILN_EMIT_OR_RETURN(sampled, Emit(base, "GridSample", {xg, grid}));  // [N, C/G, K oH, oW]
    KILN_EMIT_OR_RETURN(s, Emit(base, "Reshape", {sampled, sample_shape}));
    std::string part = s;
    if (!mask.empty()) {
      KILN_EMIT_OR_RETURN(mg, Emit(base, "Gather", {mask, gi}, IntAttr("axis", 1)));  // [N, K, P]
      KILN_EMIT_OR_RETURN(mu, Emit(base, "Unsqueeze", {mg, axis1}));  // [N, 1, K, P]
      KILN_EMIT_OR_RETURN(masked, Emit(base, "Mul", {s, mu}));
      part = masked;
    }
    samples.push_back(part);
  }
  std::string cols = samples[0];
  if (samples.size() > 1) {
    KILN_EMIT_OR_RETURN(all, Emit(base, "Concat", samples, IntAttr("axis", 1)));
    cols = all;
  }
  KILN_EMIT_OR_RETURN(cols_shape, ints({N, group, C / group * K, oH * oW}));
  KILN_EMIT_OR_RETURN(cols4, Emit(base, "Reshape", {cols, cols_shape}));
  KILN_EMIT_OR_RETURN(w_shape, ints({group, oC / group, C / group * K}));
  KILN_EMIT_OR_RETURN(wr, Emit(base, "Reshape", {node.input(1), w_shape}));
  KILN_EMIT_OR_RETURN(prod, Emit(base, "MatMul", {wr, cols4}));  // [N, group, oC/group, P]
  KILN_EMIT_OR_RETURN(out_shape, ints({N, oC, oH, oW}));
  const bool bias = HasIn(node, 3);
  KILN_EMIT_OR_RETURN(
      y, Emit(base, "Reshape", {prod, out_shape}, nullptr, bias ? "" : node.output(0)));
  if (bias) {
    KILN_EMIT_OR_RETURN(b_shape, ints({1, oC, 1, 1}));
    KILN_EMIT_OR_RETURN(b, Emit(base, "Reshape", {node.input(3), b_shape}));
    KILN_EMIT_OR_RETURN(sum, Emit(base, "Add", {y, b}, nullptr, node.output(0)));
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
