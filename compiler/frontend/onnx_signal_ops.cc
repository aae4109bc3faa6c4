// Signal-processing operators whose outputs depend only on scalars known at
// compile time: the window functions (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix, computed at import as constants (in
// double, as ONNX's reference computes them, then converted to the output
// type). A size or parameter known only at run time is refused naming the
// input. DFT of a length known at compile time: the signal axis moved last,
// padded or cut to the length, its real and imaginary parts times constant
// cosine and sine matrices (MatMul: the dense template), stacked again.
// STFT: the signal's frames gathered (constant indices), times the window,
// then that DFT along the frame.
#include <cmath>

#include "base/str.h"
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportSignal(const onnx::NodeProto& node, bool* handled) {
  const std::string& op = node.op_type();
  *handled = true;
  // The largest window or matrix computed here (elements).
  constexpr int64_t kMaxElementsHere = int64_t{1} << 24;
  std::vector<double> values;
  Shape shape;
  if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow") {
    auto size = ConstInts(node, 0);
    if (!size.ok()) return size.status();
    if (size->size() != 1 || (*size)[0] < 0 || (*size)[0] > kMaxElementsHere) {
      return absl::InvalidArgumentError(StrCat(op, ": size must be one integer in 0..2^24"));
    }
    const int64_t n = (*size)[0];
    const double n1 = AttrInt(node, "periodic", 1) != 0 ? double(n) : double(n - 1);
    // w[i] = a0 - a1 cos(2 pi i / N1) + a2 cos(4 pi i / N1).
    double a0 = 0.5, a1 = 0.5, a2 = 0;
    if (op == "HammingWindow") {
      a0 = 25.0 / 46.0;
      a1 = 1 - a0;
    } else if (op == "BlackmanWindow") {
      a0 = 0.42;
      a2 = 0.08;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double x = 2 * M_PI * double(i) / n1;
      values.push_back(a0 - a1 * std::cos(x) + a2 * std::cos(2 * x));
    }
    shape = {n};
  } else if (op == "MelWeightMatrix") {
    std::vector<double> in;
    for (int i = 0; i < 5; ++i) {
      auto v = ConstDoubles(node, i);
      if (!v.ok()) return v.status();
      if (v->size() != 1)
        return absl::InvalidArgumentError(StrCat(op, ": input ", i, " must be a scalar"));
      in.push_back((*v)[0]);
    }
    const int64_t bins = static_cast<int64_t>(in[0]), dft = static_cast<int64_t>(in[1]);
    const double rate = in[2], low = in[3], high = in[4];
    const int64_t spectrogram = dft / 2 + 1;
    if (bins <= 0 || dft <= 0 || rate <= 0 || !(low >= 0) || !(high > low) ||
        spectrogram * bins > kMaxElementsHere) {
      return absl::InvalidArgumentError(StrCat(op, ": num_mel_bins ", bins, ", dft_length ", dft,
                                               ", sample_rate ", rate, ", edges ", low, "..", high,
                                               " out of range"));
    }
    // Triangular filters between mel-spaced points, as ONNX's reference.
    auto mel = [](double hz) { return 2595 * std::log1p(hz / 700) / std::log(10.0); };
    const double lo_mel = mel(low), step = (mel(high) - lo_mel) / double(bins + 2);
    std::vector<int64_t> points(static_cast<size_t>(bins + 2));
    for (int64_t i = 0; i < bins + 2; ++i) {
      const double hz = 700 * std::expm1((double(i) * step + lo_mel) / 2595 * std::log(10.0));
      points[i] = static_cast<int64_t>(std::floor(double(dft + 1) * hz / rate));
    }
    values.assign(static_cast<size_t>(spectrogram * bins), 0.0);
    auto at = [&](int64_t j, int64_t i) -> double* {
      return j >= 0 && j < spectrogram ? &values[static_cast<size_t>(j * bins + i)] : nullptr;
    };
    for (int64_t i = 0; i < bins; ++i) {
      const int64_t left = points[i], center = points[i + 1], right = points[i + 2];
      if (center == left) {
        if (double* p = at(center, i)) *p = 1;
      } else {
        for (int64_t j = left; j <= center; ++j) {
          if (double* p = at(j, i)) *p = double(j - left) / double(center - left);
        }
      }
      for (int64_t j = center; j < right; ++j) {
        if (double* p = at(j, i)) *p = double(right - j) / double(right - center);
      }
    }
    shape = {spectrogram, bins};
  } else if (op == "DFT") {
    return ImportDft(node);
  } else if (op == "STFT") {
    return ImportStft(node);
  } else {
    *handled = false;
    return absl::OkStatus();
  }
  const int64_t dtype = AttrInt(node, "output_datatype", onnx::TensorProto::FLOAT);
  std::vector<float> f(values.begin(), values.end());
  if (dtype == onnx::TensorProto::FLOAT) {
    g_->values[NewValue(node, 0, shape)].SetFloats(f);
    return absl::OkStatus();
  }
  // Another output type: the float values converted (a Cast of a constant
  // folds).
  Value v;
  v.SetFloats(f);
  v.shape = shape;
  const std::string v_name = NamedConstant(Name(node), std::move(v));
  auto c = Emit(Name(node), "Cast", {v_name}, IntAttr("to", dtype), node.output(0));
  return StatusOf(c);
}

absl::Status Importer::ImportDft(const onnx::NodeProto& node) {
  const std::string base = Name(node);
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = V(*x).shape;
  const int64_t r = static_cast<int64_t>(xs.size());
  if (r < 3 || (xs.back() != 1 && xs.back() != 2)) {
    return absl::InvalidArgumentError(
        StrCat("DFT: input [", StrJoin(xs, ","), "] must be [batch, signal..., 1 or 2]"));
  }
  int64_t axis = opset_ >= 20 ? -2 : AttrInt(node, "axis", 1);
  if (opset_ >= 20 && HasIn(node, 2)) {
    auto a = ConstInts(node, 2);
    if (!a.ok()) return a.status();
    if (a->size() != 1) return absl::InvalidArgumentError("DFT: axis must be a scalar");
    axis = (*a)[0];
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) {
    return absl::InvalidArgumentError(StrCat("DFT: axis out of range for rank ", r));
  }
  int64_t L = xs[axis];
  if (HasIn(node, 1)) {
    auto l = ConstInts(node, 1);
    if (!l.ok()) return l.status();
    if (l->size() != 1 || (*l)[0] <= 0) {
      return absl::InvalidArgumentError("DFT: dft_length must be a positive scalar");
    }
    L = (*l)[0];
  }
  const bool inverse = AttrInt(node, "inverse", 0) != 0,
             onesided = AttrInt(node, "onesided", 0) != 0;
  const bool complex = xs.back() == 2;
  if (onesided && (inverse || complex)) {
    return Unimplemented(node, "a one-sided transform of a complex or inverse DFT");
  }
  const int64_t K = onesided ? L / 2 + 1 : L;
  if (L * K > (int64_t{1} << 24)) return TooManyElements("the DFT's matrices");
  // The signal axis next to last: perm, and its inverse for the output.
  std::vector<int64_t> perm, back(static_cast<size_t>(r));
  for (int64_t d = 0; d < r - 1; ++d) {
    if (d != axis) perm.push_back(d);
  }
  perm.push_back(axis);
  perm.push_back(r - 1);
  for (int64_t d = 0; d < r; ++d) back[perm[d]] = d;
  auto t = Emit(base, "Transpose", {node.input(0)}, IntsAttr("perm", perm));
  if (!t.ok()) return t.status();
  std::string v = *t;
  if (L != xs[axis]) {
    std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
    pads[r + r - 2] = L - xs[axis];
    auto p = L > xs[axis] ? EmitInt64s(base, pads) : EmitInt64s(base, {L});
    if (!p.ok()) return p.status();
    absl::StatusOr<std::string> cut;
    if (L > xs[axis]) {
      cut = Emit(base, "Pad", {v, *p});
    } else {
      auto zero = EmitInt64s(base, {0}), ax = EmitInt64s(base, {r - 2});
      if (!zero.ok() || !ax.ok()) return !zero.ok() ? zero.status() : ax.status();
      cut = Emit(base, "Slice", {v, *zero, *p, *ax});
    }
    if (!cut.ok()) return cut.status();
    v = *cut;
  }
  // e^{-i 2 pi jk / L} (e^{+...} / L inverse): Re = xr C + xi S', Im = xi C - xr S'.
  const double sign = inverse ? -1.0 : 1.0, scale = inverse ? 1.0 / double(L) : 1.0;
  std::vector<float> c, sn, nsn;
  for (int64_t j = 0; j < L; ++j) {
    for (int64_t k = 0; k < K; ++k) {
      const double a = 2 * M_PI * double((j * k) % L) / double(L);
      c.push_back(static_cast<float>(std::cos(a) * scale));
      sn.push_back(static_cast<float>(sign * std::sin(a) * scale));
      nsn.push_back(-sn.back());
    }
  }
  auto matrix = [&](const std::vector<float>& m) {
    Value val;
    val.SetFloats(m);
    val.shape = {L, K};
    return NamedConstant(base, std::move(val));
  };
  const std::string cm = matrix(c), sm = matrix(sn), nsm = matrix(nsn);
  auto part = [&](int64_t k) -> absl::StatusOr<std::string> {
    auto i = EmitInt64s(base, {k}, true);
    if (!i.ok()) return i;
    return Emit(base, "Gather", {v, *i}, IntAttr("axis", r - 1));
  };
  auto xr = part(0);
  if (!xr.ok()) return xr.status();
  auto re = Emit(base, "MatMul", {*xr, cm});
  auto im = re.ok() ? Emit(base, "MatMul", {*xr, nsm}) : re;
  if (complex && im.ok()) {
    auto xi = part(1);
    auto a = xi.ok() ? Emit(base, "MatMul", {*xi, sm}) : xi;
    auto b = a.ok() ? Emit(base, "MatMul", {*xi, cm}) : a;
    re = b.ok() ? Emit(base, "Add", {*re, *a}) : b;
    im = re.ok() ? Emit(base, "Add", {*im, *b}) : re;
  }
  if (!im.ok()) return im.status();
  auto last = EmitInt64s(base, {r - 1});
  if (!last.ok()) return last.status();
  auto ur = Emit(base, "Unsqueeze", {*re, *last});
  auto ui = ur.ok() ? Emit(base, "Unsqueeze", {*im, *last}) : ur;
  auto both = ui.ok() ? Emit(base, "Concat", {*ur, *ui}, IntAttr("axis", r - 1)) : ui;
  if (!both.ok()) return both.status();
  auto out = Emit(base, "Transpose", {*both}, IntsAttr("perm", back), node.output(0));
  return StatusOf(out);
}

absl::Status Importer::ImportStft(const onnx::NodeProto& node) {
  const std::string base = Name(node);
  auto x = InF(node, 0);
  if (!x.ok()) return x.status();
  const Shape xs = V(*x).shape;
  if (xs.size() != 3 || (xs[2] != 1 && xs[2] != 2)) {
    return absl::InvalidArgumentError(
        StrCat("STFT: signal [", StrJoin(xs, ","), "] must be [batch, length, 1 or 2]"));
  }
  auto step = ConstInts(node, 1);
  if (!step.ok()) return step.status();
  int64_t length = -1;
  if (HasIn(node, 3)) {
    auto l = ConstInts(node, 3);
    if (!l.ok()) return l.status();
    if (l->size() != 1) return absl::InvalidArgumentError("STFT: frame_length must be a scalar");
    length = (*l)[0];
  }
  if (HasIn(node, 2)) {
    auto w = In(node, 2);
    if (!w.ok()) return w.status();
    if (V(*w).shape.size() != 1 || (length >= 0 && V(*w).shape[0] != length)) {
      return absl::InvalidArgumentError("STFT: the window must be [frame_length]");
    }
    length = V(*w).shape[0];
  }
  if (step->size() != 1 || (*step)[0] <= 0 || length <= 0 || length > xs[1]) {
    return absl::InvalidArgumentError(
        "STFT: frame_step must be positive and frame_length (or the window's length) in "
        "1..the signal's length");
  }
  const int64_t hop = (*step)[0], frames = (xs[1] - length) / hop + 1;
  if (frames * length > (int64_t{1} << 24)) return TooManyElements("STFT's frame indices");
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t j = 0; j < length; ++j) idx.push_back(f * hop + j);
  }
  Value iv;
  iv.SetInt64s(idx);
  iv.shape = {frames, length};
  const std::string iname = NamedConstant(base, std::move(iv));
  auto fr = Emit(base, "Gather", {node.input(0), iname}, IntAttr("axis", 1));  // [B, F, L, c]
  if (!fr.ok()) return fr.status();
  std::string v = *fr;
  if (HasIn(node, 2)) {
    auto shape = EmitInt64s(base, {1, 1, length, 1});
    auto w = shape.ok() ? Emit(base, "Reshape", {node.input(2), *shape}) : shape;
    auto m = w.ok() ? Emit(base, "Mul", {v, *w}) : w;
    if (!m.ok()) return m.status();
    v = *m;
  }
  auto axis = EmitInt64s(base, {2}, true);
  if (!axis.ok()) return axis.status();
  auto out = Emit(base, "DFT", {v, "", *axis}, IntAttr("onesided", AttrInt(node, "onesided", 1)),
                  node.output(0));
  return StatusOf(out);
}

}  // namespace kiln::compiler::onnx_internal
