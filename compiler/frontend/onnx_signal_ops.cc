// Signal-processing operators whose outputs depend only on scalars known at
// compile time: the window functions (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix, computed at import as constants (in
// double, as ONNX's reference computes them, then converted to the output
// type). A size or parameter known only at run time is refused naming the
// input.
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
  const std::string v_name = StrCat(Name(node), ":values");
  v.name = v_name;
  v.shape = shape;
  v.SetFloats(f);
  by_name_[v.name] = g_->AddValue(std::move(v));
  auto c = Emit(Name(node), "Cast", {v_name}, IntAttr("to", dtype), node.output(0));
  return c.ok() ? absl::OkStatus() : c.status();
}

}  // namespace kiln::compiler::onnx_internal
