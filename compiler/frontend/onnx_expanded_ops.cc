// Operators imported as the nodes of their definition (Emit), with what
// must be known at compile time computed here:
// - AffineGrid: the base grid of the (constant) size, a constant
//   [spatial, rank + 1] of normalized coordinates, times theta transposed:
//   grid[n, ..., :] = theta[n] @ (x, y[, z], 1).
// - ReverseSequence: a GatherElements whose constant indices reverse the
//   first sequence_lens[b] steps of each batch entry (lengths known at
//   compile time).
// - MaxUnpool: the values scattered (ScatterElements) to their flat indices
//   in zeros of the inferred shape, then padded to output_shape.
#include <algorithm>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportExpanded(const onnx::NodeProto& node, bool* handled) {
  const std::string& op = node.op_type();
  const std::string base = Name(node);
  *handled = true;
  auto done = [](const absl::StatusOr<std::string>& r) {
    return r.ok() ? absl::OkStatus() : r.status();
  };
  auto constant = [&](Value v) { return NamedConstant(base, std::move(v)); };

  if (op == "AffineGrid") {
    auto theta = InF(node, 0);
    if (!theta.ok()) return theta.status();
    auto size = ConstInts(node, 1);
    if (!size.ok()) return size.status();
    const Shape& ts = V(*theta).shape;
    const size_t rank = size->size() - 2;  // spatial dims: 2 or 3
    if ((size->size() != 4 && size->size() != 5) || ts.size() != 3 || ts[0] != (*size)[0] ||
        ts[1] != static_cast<int64_t>(rank) || ts[2] != static_cast<int64_t>(rank) + 1) {
      return absl::InvalidArgumentError(StrCat("AffineGrid: theta [", StrJoin(ts, ","),
                                               "] does not fit size [", StrJoin(*size, ","), "]"));
    }
    const bool corners = AttrInt(node, "align_corners", 0) != 0;
    // Spatial sizes, outermost first (D, H, W); coordinates innermost first.
    Shape sp(size->begin() + 2, size->end());
    int64_t points = 1;
    for (int64_t d : sp) {
      if (d <= 0) return absl::InvalidArgumentError("AffineGrid: a size of 0");
      points *= d;
      if (points > (int64_t{1} << 24)) return TooManyElements("AffineGrid's base grid");
    }
    auto coord = [&](int64_t i, int64_t n) {
      if (corners) return n == 1 ? 0.0 : -1.0 + 2.0 * double(i) / double(n - 1);
      return (2.0 * double(i) + 1.0) / double(n) - 1.0;
    };
    std::vector<float> grid;
    grid.reserve(static_cast<size_t>(points) * (rank + 1));
    for (int64_t p = 0; p < points; ++p) {
      std::vector<int64_t> idx(rank);
      int64_t rest = p;
      for (size_t d = rank; d-- > 0;) {
        idx[d] = rest % sp[d];
        rest /= sp[d];
      }
      for (size_t d = rank; d-- > 0;) grid.push_back(static_cast<float>(coord(idx[d], sp[d])));
      grid.push_back(1.0f);
    }
    Value g;
    g.shape = {points, static_cast<int64_t>(rank) + 1};
    g.SetFloats(grid);
    const std::string gname = constant(std::move(g));
    auto tt = Emit(base, "Transpose", {node.input(0)}, IntsAttr("perm", {0, 2, 1}));
    if (!tt.ok()) return tt.status();
    auto mm = Emit(base, "MatMul", {gname, *tt});  // [N, points, rank]
    if (!mm.ok()) return mm.status();
    Shape out = {(*size)[0]};
    out.insert(out.end(), sp.begin(), sp.end());
    out.push_back(static_cast<int64_t>(rank));
    auto shape = EmitInt64s(base, out);
    if (!shape.ok()) return shape.status();
    return done(Emit(base, "Reshape", {*mm, *shape}, nullptr, node.output(0)));
  }

  if (op == "ReverseSequence") {
    auto x = In(node, 0);
    if (!x.ok()) return x.status();
    auto lens = ConstInts(node, 1);
    if (!lens.ok()) return lens.status();
    const Shape xs = V(*x).shape;
    const int64_t batch_axis = AttrInt(node, "batch_axis", 1),
                  time_axis = AttrInt(node, "time_axis", 0);
    if (xs.size() < 2 || batch_axis + time_axis != 1 || (batch_axis != 0 && batch_axis != 1) ||
        static_cast<int64_t>(lens->size()) != xs[batch_axis]) {
      return absl::InvalidArgumentError(
          StrCat("ReverseSequence: batch_axis ", batch_axis, " and time_axis ", time_axis,
                 " (0 and 1 in some order), sequence_lens of the batch's length"));
    }
    int64_t n = 1;
    for (int64_t d : xs) n *= d;
    if (n > (int64_t{1} << 24)) return TooManyElements("ReverseSequence's indices");
    const int64_t inner = n / (xs[0] * xs[1]);
    std::vector<int64_t> idx(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a0 = i / (xs[1] * inner), a1 = (i / inner) % xs[1];
      const int64_t t = time_axis == 0 ? a0 : a1, b = time_axis == 0 ? a1 : a0;
      const int64_t len = std::clamp<int64_t>((*lens)[b], 0, xs[time_axis]);
      idx[i] = t < len ? len - 1 - t : t;
    }
    Value iv;
    iv.SetInt64s(idx);
    iv.shape = xs;
    const std::string iname = constant(std::move(iv));
    return done(Emit(base, "GatherElements", {node.input(0), iname}, IntAttr("axis", time_axis),
                     node.output(0)));
  }

  if (op == "MaxUnpool") {
    auto x = InF(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const auto kernel = AttrInts(node, "kernel_shape", {});
    const size_t r = kernel.size();
    if (r == 0 || xs.size() != r + 2) {
      return absl::InvalidArgumentError("MaxUnpool: kernel_shape must match X's spatial rank");
    }
    const auto strides = AttrInts(node, "strides", std::vector<int64_t>(r, 1));
    const auto pads = AttrInts(node, "pads", std::vector<int64_t>(2 * r, 0));
    if (strides.size() != r || pads.size() != 2 * r) {
      return absl::InvalidArgumentError("MaxUnpool: strides and pads must match kernel_shape");
    }
    Shape inferred = {xs[0], xs[1]};
    for (size_t d = 0; d < r; ++d) {
      inferred.push_back((xs[d + 2] - 1) * strides[d] - pads[d] - pads[r + d] + kernel[d]);
      if (inferred.back() <= 0) return absl::InvalidArgumentError("MaxUnpool: an empty output");
    }
    Shape out = inferred;
    if (HasIn(node, 2)) {
      auto os = ConstInts(node, 2);
      if (!os.ok()) return os.status();
      if (os->size() != inferred.size()) {
        return absl::InvalidArgumentError("MaxUnpool: output_shape of the wrong rank");
      }
      for (size_t d = 0; d < out.size(); ++d) {
        if ((*os)[d] < inferred[d]) {
          return absl::InvalidArgumentError("MaxUnpool: output_shape below the inferred shape");
        }
        out[d] = (*os)[d];
      }
    }
    int64_t total = 1;
    for (int64_t d : inferred) total *= d;
    if (total > max_elements_) return TooManyElements("MaxUnpool's output");
    Value z;
    z.SetFloats(std::vector<float>(static_cast<size_t>(total), 0.0f));
    z.shape = {total};
    const std::string zeros = constant(std::move(z));
    auto flat = EmitInt64s(base, {-1});
    if (!flat.ok()) return flat.status();
    auto xf = Emit(base, "Reshape", {node.input(0), *flat});
    auto jf = xf.ok() ? Emit(base, "Reshape", {node.input(1), *flat}) : xf;
    auto y = jf.ok() ? Emit(base, "ScatterElements", {zeros, *jf, *xf}, IntAttr("axis", 0)) : jf;
    auto ishape = y.ok() ? EmitInt64s(base, inferred) : y;
    if (!ishape.ok()) return ishape.status();
    if (out == inferred) return done(Emit(base, "Reshape", {*y, *ishape}, nullptr, node.output(0)));
    auto shaped = Emit(base, "Reshape", {*y, *ishape});
    if (!shaped.ok()) return shaped.status();
    std::vector<int64_t> pad(out.size(), 0);
    for (size_t d = 0; d < out.size(); ++d) pad.push_back(out[d] - inferred[d]);
    auto p = EmitInt64s(base, pad);
    if (!p.ok()) return p.status();
    return done(Emit(base, "Pad", {*shaped, *p}, nullptr, node.output(0)));
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
