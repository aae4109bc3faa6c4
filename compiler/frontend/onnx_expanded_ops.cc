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
// - TfIdfVectorizer (integer n-grams): per n-gram length n of the pool, the
//   input's items at every n-gram's k-th place (a Gather by constant
//   positions: each start, for each skip distance d from 1 to
//   max_skip_count + 1; unigrams once), compared with the pool's k-th items
//   ([P_n, 1] against [..., 1, L]), And over k, summed over the positions:
//   each pool n-gram's count; a MatMul by a constant 0/1 matrix moves the
//   mode's scores (weights by pool n-gram) to their ngram_indexes.
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
  if (op == "TfIdfVectorizer") return ImportTfIdf(node);
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

absl::Status Importer::ImportTfIdf(const onnx::NodeProto& node) {
  const std::string base = Name(node);
  auto x = In(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = V(*x).shape;
  const DType xt = V(*x).dtype;
  if (Attr(node, "pool_strings") != nullptr) {
    return Unimplemented(node, "string n-grams (kiln has no string tensors)");
  }
  if (xt != DType::kInt32 && xt != DType::kInt64) {
    return absl::InvalidArgumentError(
        StrCat("TfIdfVectorizer: X must be int32 or int64, not ", DTypeName(xt)));
  }
  if (xs.size() != 1 && xs.size() != 2) {
    return absl::InvalidArgumentError(
        StrCat("TfIdfVectorizer: X must be [C] or [N, C], not [", StrJoin(xs, ","), "]"));
  }
  const int64_t min_n = AttrInt(node, "min_gram_length", 0),
                max_n = AttrInt(node, "max_gram_length", 0),
                max_skip = AttrInt(node, "max_skip_count", 0);
  const std::string mode = AttrString(node, "mode", "");
  const std::vector<int64_t> counts = AttrInts(node, "ngram_counts", {}),
                             indexes = AttrInts(node, "ngram_indexes", {}),
                             pool = AttrInts(node, "pool_int64s", {});
  const auto* w_attr = AttrTyped(node, "weights", onnx::AttributeProto::FLOATS);
  const std::vector<float> weights =
      w_attr ? std::vector<float>(w_attr->floats().begin(), w_attr->floats().end())
             : std::vector<float>{};
  if (min_n < 1 || max_n < min_n || max_skip < 0 || max_skip > 1024) {
    return absl::InvalidArgumentError(
        StrCat("TfIdfVectorizer: needs 1 <= min_gram_length <= max_gram_length and 0 <= "
               "max_skip_count <= 1024 (has ",
               min_n, ", ", max_n, ", ", max_skip, ")"));
  }
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") {
    return absl::InvalidArgumentError(
        StrCat("TfIdfVectorizer: mode must be TF, IDF or TFIDF, not '", mode, "'"));
  }
  // The pool's n-grams by length: those of length n + 1 start at counts[n].
  struct Gram {
    int64_t n, ordinal;  // its length, its place among all the pool's n-grams
    std::vector<int64_t> items;
  };
  std::vector<Gram> grams;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t from = counts[i];
    const int64_t to = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    const int64_t n = static_cast<int64_t>(i) + 1;
    if (from < 0 || to < from || to > static_cast<int64_t>(pool.size()) || (to - from) % n != 0) {
      return absl::InvalidArgumentError(StrCat("TfIdfVectorizer: ngram_counts [",
                                               StrJoin(counts, ","), "] does not cut pool_int64s (",
                                               pool.size(), " items) into n-grams"));
    }
    for (int64_t at = from; at < to; at += n) {
      grams.push_back({n, static_cast<int64_t>(grams.size()),
                       std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)});
    }
  }
  if (indexes.size() != grams.size() || indexes.empty()) {
    return absl::InvalidArgumentError(StrCat("TfIdfVectorizer: ngram_indexes has ", indexes.size(),
                                             " entries for the pool's ", grams.size(), " n-grams"));
  }
  int64_t out_size = 0;
  for (int64_t i : indexes) {
    if (i < 0 || i >= kMaxIndexEntries) {
      return absl::InvalidArgumentError(StrCat("TfIdfVectorizer: ngram_indexes entry ", i));
    }
    out_size = std::max(out_size, i + 1);
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < out_size) {
    return absl::InvalidArgumentError(
        StrCat("TfIdfVectorizer: ", weights.size(), " weights for ", out_size, " outputs"));
  }
  const int64_t C = xs.back(), rows = xs.size() == 2 ? xs[0] : 1;
  const int axis = static_cast<int>(xs.size()) - 1;
  Shape out_shape = xs;
  out_shape.back() = out_size;
  auto x64 = xt == DType::kInt64 ? absl::StatusOr<std::string>(node.input(0))
                                 : Emit(base, "Cast", {node.input(0)}, IntAttr("to", 7));
  if (!x64.ok()) return x64.status();
  // Each counted length's counts ([..., P_n]) and the ordinals of its n-grams.
  std::vector<std::string> parts;
  std::vector<int64_t> ordinals;
  for (int64_t n = min_n; n <= max_n; ++n) {
    std::vector<const Gram*> of_n;
    for (const Gram& g : grams) {
      if (g.n == n) of_n.push_back(&g);
    }
    // Every n-gram's first position and skip distance.
    std::vector<int64_t> starts, steps;
    for (int64_t d = 1; d <= (n == 1 ? 1 : max_skip + 1); ++d) {
      for (int64_t i = 0; i + (n - 1) * d < C; ++i) {
        starts.push_back(i);
        steps.push_back(d);
      }
    }
    const int64_t L = static_cast<int64_t>(starts.size()), P = static_cast<int64_t>(of_n.size());
    if (P == 0 || L == 0) continue;
    if (rows * P * L > max_elements_ || L * n > kMaxIndexEntries) {
      return TooManyElements(StrCat("TfIdfVectorizer's comparisons of its ", n, "-grams"));
    }
    if (absl::Status st = CountExpandedNode(4 * n + 3); !st.ok()) return st;
    std::string all;
    for (int64_t k = 0; k < n; ++k) {
      std::vector<int64_t> at(static_cast<size_t>(L)), item(static_cast<size_t>(P));
      for (int64_t j = 0; j < L; ++j) at[j] = starts[j] + k * steps[j];
      for (int64_t p = 0; p < P; ++p) item[p] = of_n[p]->items[k];
      Value iv, gv;
      iv.SetInt64s(at);
      iv.shape = {L};
      gv.SetInt64s(item);
      gv.shape = {P, 1};
      const std::string iname = NamedConstant(base, std::move(iv)),
                        gname = NamedConstant(base, std::move(gv));
      auto picked = Emit(base, "Gather", {*x64, iname}, IntAttr("axis", axis));
      auto where = picked.ok() ? EmitInt64s(base, {axis}) : picked;
      auto lifted = where.ok() ? Emit(base, "Unsqueeze", {*picked, *where}) : where;
      auto eq = lifted.ok() ? Emit(base, "Equal", {*lifted, gname}) : lifted;
      auto both = eq.ok() && !all.empty() ? Emit(base, "And", {all, *eq}) : eq;
      if (!both.ok()) return both.status();
      all = *both;
    }
    auto hits = Emit(base, "Cast", {all}, IntAttr("to", 1));
    auto last = hits.ok() ? EmitInt64s(base, {axis + 1}) : hits;
    auto sum = last.ok() ? Emit(base, "ReduceSum", {*hits, *last}, IntAttr("keepdims", 0)) : last;
    if (!sum.ok()) return sum.status();
    parts.push_back(*sum);
    for (const Gram* g : of_n) ordinals.push_back(g->ordinal);
  }
  if (parts.empty()) {  // no n-gram fits: zeros
    Value z;
    z.SetFloats(std::vector<float>(static_cast<size_t>(rows * out_size), 0.0f));
    z.shape = out_shape;
    return StatusOf(
        Emit(base, "Identity", {NamedConstant(base, std::move(z))}, nullptr, node.output(0)));
  }
  auto counted = parts.size() == 1 ? absl::StatusOr<std::string>(parts[0])
                                   : Emit(base, "Concat", parts, IntAttr("axis", axis));
  if (!counted.ok()) return counted.status();
  // The mode's scores (weights by pool n-gram, as the specification and
  // onnxruntime read them; ONNX's Python reference reads them by output
  // index), then moved to their outputs by a [P counted, out_size] of 0 and 1.
  auto scored = counted;
  if (mode == "IDF") {
    auto seen = Emit(base, "Greater", {*counted, NamedScalar(base, 0.0f)});
    scored = seen.ok() ? Emit(base, "Cast", {*seen}, IntAttr("to", 1)) : seen;
  }
  if (scored.ok() && mode != "TF" && !weights.empty()) {
    std::vector<float> w;
    for (int64_t o : ordinals) w.push_back(weights[static_cast<size_t>(o)]);
    Value wv;
    wv.SetFloats(w);
    wv.shape = {static_cast<int64_t>(w.size())};
    scored = Emit(base, "Mul", {*scored, NamedConstant(base, std::move(wv))});
  }
  if (!scored.ok()) return scored.status();
  std::vector<float> to_out(ordinals.size() * static_cast<size_t>(out_size), 0.0f);
  for (size_t p = 0; p < ordinals.size(); ++p) {
    to_out[p * out_size + indexes[static_cast<size_t>(ordinals[p])]] = 1.0f;
  }
  Value mv;
  mv.SetFloats(to_out);
  mv.shape = {static_cast<int64_t>(ordinals.size()), out_size};
  return StatusOf(
      Emit(base, "MatMul", {*scored, NamedConstant(base, std::move(mv))}, nullptr, node.output(0)));
}

}  // namespace kiln::compiler::onnx_internal
