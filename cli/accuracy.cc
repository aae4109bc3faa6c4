// kiln compile --precision bf16 --accuracy-input ...: the reduced-precision
// artifact and the model's float32 build run on the user's inputs, output by
// output compared (cli/common.h, CompareWithFloat32).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/str.h"
#include "cli/common.h"
#include "deploy/artifact.h"
#include "deploy/runtime.h"
#include "deploy/tensor_io.h"

namespace kiln::cli {
namespace {

// Runs the artifact once on `specs` (kiln-run's --input arguments).
absl::StatusOr<std::vector<deploy::Tensor>> RunOnce(std::string_view artifact,
                                                    const std::vector<std::string>& specs) {
  absl::StatusOr<std::unique_ptr<deploy::Module>> m = deploy::Module::LoadBytes(artifact);
  if (!m.ok()) return m.status();
  const deploy::Manifest& manifest = (*m)->manifest();
  absl::StatusOr<std::vector<deploy::Tensor>> inputs =
      deploy::ReadInputFiles(manifest.inputs, specs);
  if (!inputs.ok()) return inputs.status();
  std::vector<deploy::InputBuffer> in;
  for (const deploy::Tensor& t : *inputs) in.push_back({t.bytes.data(), t.dtype, t.NumElements()});
  std::vector<deploy::Tensor> outs;
  std::vector<deploy::OutputBuffer> out;
  for (const deploy::TensorInfo& info : manifest.outputs) {
    outs.push_back({info.name, info.shape, info.dtype,
                    std::vector<uint8_t>(static_cast<size_t>(info.ByteSize()))});
  }
  for (deploy::Tensor& t : outs) out.push_back({t.bytes.data(), t.dtype, t.NumElements()});
  if (absl::Status s = (*m)->RunChecked(in, out); !s.ok()) return s;
  return outs;
}

// `v` to `digits` significant digits.
std::string Sig(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
  return buf;
}

}  // namespace

absl::StatusOr<std::string> CompareWithFloat32(std::string_view reduced, std::string_view fp32,
                                               const std::string& precision,
                                               const std::vector<std::string>& specs) {
  absl::StatusOr<std::vector<deploy::Tensor>> got = RunOnce(reduced, specs);
  if (!got.ok()) return got.status();
  absl::StatusOr<std::vector<deploy::Tensor>> want = RunOnce(fp32, specs);
  if (!want.ok()) return want.status();
  std::string text = StrCat("accuracy of ", precision, " against float32 on the given inputs:\n");
  for (size_t o = 0; o < got->size() && o < want->size(); ++o) {
    const deploy::Tensor& g = (*got)[o];
    const deploy::Tensor& w = (*want)[o];
    text += StrCat("  output '", g.name, "' ", deploy::ShapeToString(g.shape), ": ");
    if (g.dtype != DType::kFloat32) {
      text += StrCat(g.bytes == w.bytes ? "identical" : "differs", " (", DTypeName(g.dtype), ")\n");
      continue;
    }
    const std::vector<float> a = deploy::ToFloatVector(g), b = deploy::ToFloatVector(w);
    double max_abs = 0, sum_abs = 0, largest = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
      max_abs = std::isnan(e) ? INFINITY : std::max(max_abs, e);
      sum_abs += e;
      largest = std::max(largest, std::fabs(static_cast<double>(b[i])));
    }
    text += StrCat("max abs error ", Sig(max_abs, 4), " (",
                   Sig(largest > 0 ? 100 * max_abs / largest : 0, 3),
                   " % of its largest magnitude, ", Sig(largest, 4), "), mean abs error ",
                   Sig(a.empty() ? 0 : sum_abs / static_cast<double>(a.size()), 4));
    // Top-1 agreement: the argmax of each row of the last axis.
    const int64_t n = g.shape.empty() ? 1 : g.shape.back();
    if (n > 1 && !a.empty()) {
      const int64_t rows = static_cast<int64_t>(a.size()) / n;
      int64_t agree = 0;
      for (int64_t r = 0; r < rows; ++r) {
        auto row = [&](const std::vector<float>& v) {
          return std::max_element(v.begin() + r * n, v.begin() + (r + 1) * n) - v.begin();
        };
        agree += row(a) == row(b);
      }
      text += StrCat("; top-1 (argmax of the last axis) agrees in ", agree, " of ", rows, " row",
                     rows == 1 ? "" : "s");
    }
    text += StrCat("\n");
  }
  return text;
}

}  // namespace kiln::cli
