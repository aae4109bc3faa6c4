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
// - Col2Im: each image pixel the sum of the columns' entries that land on
//   it: the input as [N, C, blocks x columns] with one zero appended, a
//   Gather by constant indices [pixels, most entries on a pixel] (the zero
//   where a pixel has fewer), a ReduceSum over the entries (image_shape and
//   block_shape known at compile time).
// - Det: Leibniz's sum over the permutations of the matrix's entries (each
//   a Gather of the flattened matrix), for matrices up to 4x4.
#include <algorithm>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

namespace {
// The most entries of the index and grid constants computed here (a few
// bytes of ONNX may ask for any sizes).
constexpr int64_t kMaxIndexEntries = int64_t{1} << 24;

absl::Status TooManyEntries(const std::string& what) {
  return absl::InvalidArgumentError(
      StrCat(what, " would have more than ", kMaxIndexEntries, " entries"));
}
}  // namespace

absl::Status Importer::ImportExpanded(const onnx::NodeProto& node, bool* handled) {
  const std::string& op = node.op_type();
  const std::string base = Name(node);
  *handled = true;
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
      if (points > kMaxIndexEntries) return TooManyEntries("AffineGrid's base grid");
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
    return StatusOf(Emit(base, "Reshape", {*mm, *shape}, nullptr, node.output(0)));
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
    if (n > kMaxIndexEntries) return TooManyEntries("ReverseSequence's indices");
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
    return StatusOf(Emit(base, "GatherElements", {node.input(0), iname}, IntAttr("axis", time_axis),
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
    if (out == inferred)
      return StatusOf(Emit(base, "Reshape", {*y, *ishape}, nullptr, node.output(0)));
    auto shaped = Emit(base, "Reshape", {*y, *ishape});
    if (!shaped.ok()) return shaped.status();
    std::vector<int64_t> pad(out.size(), 0);
    for (size_t d = 0; d < out.size(); ++d) pad.push_back(out[d] - inferred[d]);
    auto p = EmitInt64s(base, pad);
    if (!p.ok()) return p.status();
    return StatusOf(Emit(base, "Pad", {*shaped, *p}, nullptr, node.output(0)));
  }
  if (op == "Col2Im") {
    auto x = InF(node, 0);
    if (!x.ok()) return x.status();
    auto image = ConstInts(node, 1);
    if (!image.ok()) return image.status();
    auto block = ConstInts(node, 2);
    if (!block.ok()) return block.status();
    const Shape xs = V(*x).shape;
    const size_t r = image->size();
    const auto dil = AttrInts(node, "dilations", std::vector<int64_t>(r, 1));
    const auto pads = AttrInts(node, "pads", std::vector<int64_t>(2 * r, 0));
    const auto strides = AttrInts(node, "strides", std::vector<int64_t>(r, 1));
    if (r == 0 || block->size() != r || dil.size() != r || strides.size() != r ||
        pads.size() != 2 * r || xs.size() != 3) {
      return absl::InvalidArgumentError(
          StrCat("Col2Im: input [", StrJoin(xs, ","),
                 "] must be [N, C x blocks, L], and block_shape, "
                 "dilations, strides (and pads, twice) one per image dimension"));
    }
    // Blocks per image dimension (L's factors) and the block's size.
    Shape per(r);
    int64_t K = 1, L = 1, P = 1;
    for (size_t d = 0; d < r; ++d) {
      for (int64_t v : {(*image)[d], (*block)[d], dil[d], strides[d], pads[d], pads[r + d]}) {
        if (v > kMaxIndexEntries) return TooManyEntries("Col2Im's indices");
      }
      if ((*image)[d] <= 0 || (*block)[d] <= 0 || dil[d] <= 0 || strides[d] <= 0 || pads[d] < 0 ||
          pads[r + d] < 0) {
        return absl::InvalidArgumentError(
            "Col2Im: sizes, dilations and strides must be positive, pads not negative");
      }
      const int64_t span = dil[d] * ((*block)[d] - 1) + 1;
      const int64_t room = (*image)[d] + pads[d] + pads[r + d] - span;
      if (room < 0) return absl::InvalidArgumentError("Col2Im: a block larger than the image");
      per[d] = room / strides[d] + 1;
      K *= (*block)[d];
      L *= per[d];
      P *= (*image)[d];
      if (K * L > kMaxIndexEntries || P > kMaxIndexEntries) {
        return TooManyEntries("Col2Im's indices");
      }
    }
    if (xs[1] % K != 0 || xs[2] != L) {
      return absl::InvalidArgumentError(StrCat("Col2Im: input [", StrJoin(xs, ","),
                                               "] needs a multiple of ", K, " channels and ", L,
                                               " columns for these sizes"));
    }
    // Every (block offset, column) to the pixel it lands on.
    std::vector<std::vector<int64_t>> on(static_cast<size_t>(P));
    for (int64_t b = 0; b < K; ++b) {
      for (int64_t l = 0; l < L; ++l) {
        int64_t pixel = 0, rb = b, rl = l;
        std::vector<int64_t> kb(r), lo(r);
        for (size_t d = r; d-- > 0;) {
          kb[d] = rb % (*block)[d];
          rb /= (*block)[d];
          lo[d] = rl % per[d];
          rl /= per[d];
        }
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
          const int64_t at = lo[d] * strides[d] - pads[d] + kb[d] * dil[d];
          inside = inside && at >= 0 && at < (*image)[d];
          pixel = pixel * (*image)[d] + at;
        }
        if (inside) on[static_cast<size_t>(pixel)].push_back(b * L + l);
      }
    }
    size_t most = 1;
    for (const auto& v : on) most = std::max(most, v.size());
    if (static_cast<int64_t>(most) * P > kMaxIndexEntries) {
      return TooManyEntries("Col2Im's indices");
    }
    std::vector<int64_t> idx;
    idx.reserve(most * static_cast<size_t>(P));
    for (const auto& v : on) {
      idx.insert(idx.end(), v.begin(), v.end());
      idx.insert(idx.end(), most - v.size(), K * L);  // the appended zero
    }
    Value iv;
    iv.SetInt64s(idx);
    iv.shape = {P, static_cast<int64_t>(most)};
    const std::string iname = constant(std::move(iv));
    const int64_t C = xs[1] / K;
    auto flat = EmitInt64s(base, {xs[0], C, K * L});
    auto xf = flat.ok() ? Emit(base, "Reshape", {node.input(0), *flat}) : flat;
    auto zpad = xf.ok() ? EmitInt64s(base, {0, 0, 0, 0, 0, 1}) : xf;
    auto xz = zpad.ok() ? Emit(base, "Pad", {*xf, *zpad}) : zpad;
    auto g = xz.ok() ? Emit(base, "Gather", {*xz, iname}, IntAttr("axis", 2)) : xz;
    auto last = g.ok() ? EmitInt64s(base, {3}) : g;
    auto sum = last.ok() ? Emit(base, "ReduceSum", {*g, *last}, IntAttr("keepdims", 0)) : last;
    Shape out = {xs[0], C};
    out.insert(out.end(), image->begin(), image->end());
    auto shape = sum.ok() ? EmitInt64s(base, out) : sum;
    if (!shape.ok()) return shape.status();
    return StatusOf(Emit(base, "Reshape", {*sum, *shape}, nullptr, node.output(0)));
  }
  if (op == "Det") {
    auto x = InF(node, 0);
    if (!x.ok()) return x.status();
    const Shape xs = V(*x).shape;
    const size_t r = xs.size();
    if (r < 2 || xs[r - 1] != xs[r - 2] || xs[r - 1] < 1) {
      return absl::InvalidArgumentError(
          StrCat("Det: input [", StrJoin(xs, ","), "] must be [..., M, M] square matrices"));
    }
    const int64_t n = xs[r - 1];
    if (n > 4) {
      return absl::UnimplementedError(
          StrCat("Det: ", n, "x", n, " matrices (kiln computes determinants up to 4x4)"));
    }
    Shape flat_shape(xs.begin(), xs.end() - 2);
    flat_shape.push_back(n * n);
    auto flat = EmitInt64s(base, flat_shape);
    auto xf = flat.ok() ? Emit(base, "Reshape", {node.input(0), *flat}) : flat;
    if (!xf.ok()) return xf.status();
    // The entries, each of the batch's shape.
    std::vector<std::string> entry;
    for (int64_t k = 0; k < n * n; ++k) {
      auto i = EmitInt64s(base, {k}, true);
      auto g = i.ok() ? Emit(base, "Gather", {*xf, *i}, IntAttr("axis", -1)) : i;
      if (!g.ok()) return g.status();
      entry.push_back(*g);
    }
    std::vector<int64_t> perm(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    std::string sum;
    while (true) {
      // The permutation's sign: its inversions' parity.
      int inversions = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = i + 1; j < n; ++j) inversions += perm[i] > perm[j];
      }
      std::string term = entry[static_cast<size_t>(perm[0])];
      for (int64_t i = 1; i < n; ++i) {
        auto m = Emit(base, "Mul", {term, entry[static_cast<size_t>(i * n + perm[i])]});
        if (!m.ok()) return m.status();
        term = *m;
      }
      const bool last = !std::next_permutation(perm.begin(), perm.end());
      const std::string out_name = last ? node.output(0) : "";
      absl::StatusOr<std::string> next;
      if (sum.empty()) {
        next = inversions % 2 ? Emit(base, "Neg", {term}, nullptr, out_name)
                              : Emit(base, "Identity", {term}, nullptr, out_name);
      } else {
        next = Emit(base, inversions % 2 ? "Sub" : "Add", {sum, term}, nullptr, out_name);
      }
      if (!next.ok()) return next.status();
      sum = *next;
      if (last) return absl::OkStatus();
    }
  }
  *handled = false;
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
