#include "device_agent/model_measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "base/str.h"
#include "compiler/model.h"
#include "deploy/profile.h"
#include "deploy/runtime.h"
#include "device_agent/measure.h"

namespace kiln::agent {
namespace {

using kiln::v1::MeasureErrorKind;
using kiln::v1::MeasureResult;
using Clock = std::chrono::steady_clock;

MeasureResult Error(MeasureErrorKind kind, std::string message) {
  MeasureResult r;
  r.set_error_kind(kind);
  r.set_error_message(std::move(message));
  return r;
}

// One variant, loaded, with its output buffers.
struct Variant {
  std::unique_ptr<deploy::Module> module;
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<void*> output_ptrs;
  MeasureResult result;  // its error, once it has one
  bool ok() const { return result.error_kind() == kiln::v1::MEASURE_ERROR_KIND_NONE; }
};

// Inputs for the model's runs: uniform in [-1, 1) for float32, zeros
// elsewhere (an index or a mask of zeros is valid for every model).
std::vector<std::vector<uint8_t>> MakeInputs(const deploy::Manifest& m) {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::vector<uint8_t>> inputs;
  for (const deploy::TensorInfo& t : m.inputs) {
    std::vector<uint8_t> bytes(static_cast<size_t>(t.ByteSize()), 0);
    if (t.dtype == DType::kFloat32) {
      auto* f = reinterpret_cast<float*>(bytes.data());
      for (int64_t i = 0; i < t.NumElements(); ++i) f[i] = dist(rng);
    }
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

// "" when `got` computes what `want` does: float32 within 1e-3 of the
// output's largest magnitude (tilings sum in other orders), other types
// within one unit (a requantized value may round the other way).
std::string Compare(const deploy::TensorInfo& t, const std::vector<uint8_t>& want,
                    const std::vector<uint8_t>& got) {
  if (t.dtype == DType::kFloat32) {
    const auto* a = reinterpret_cast<const float*>(want.data());
    const auto* b = reinterpret_cast<const float*>(got.data());
    const int64_t n = t.NumElements();
    double scale = 0;
    for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(double{a[i]}));
    const double tol = 1e-3 * std::max(1.0, scale);
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::fabs(double{a[i]} - double{b[i]});
      if (!(d <= tol)) {
        return StrCat("output '", t.name, "' differs from the first variant's at element ", i, " (",
                      b[i], " against ", a[i], ")");
      }
    }
    return "";
  }
  if (t.dtype == DType::kInt8 || t.dtype == DType::kUInt8) {
    for (size_t i = 0; i < want.size(); ++i) {
      const int d = t.dtype == DType::kInt8
                        ? static_cast<int8_t>(want[i]) - static_cast<int8_t>(got[i])
                        : want[i] - got[i];
      if (d > 1 || d < -1) {
        return StrCat("output '", t.name, "' differs from the first variant's at element ", i);
      }
    }
    return "";
  }
  if (want != got) return StrCat("output '", t.name, "' differs from the first variant's");
  return "";
}

}  // namespace

std::vector<MeasureResult> MeasureModelVariants(const kiln::v1::MeasureBatch& batch,
                                                const std::string& files_dir,
                                                const compiler::Target& target) {
  const int n = batch.candidates_size();
  auto all = [&](MeasureErrorKind kind, const std::string& message) {
    std::vector<MeasureResult> results(static_cast<size_t>(n), Error(kind, message));
    for (int v = 0; v < n; ++v) {
      results[static_cast<size_t>(v)].set_candidate_id(batch.candidates(v).candidate_id());
    }
    return results;
  };
  const kiln::v1::ModelSpec& spec = batch.model();
  compiler::ImportOptions import;
  int64_t model_bytes = 0;
  auto file_of = [&](const std::string& sha) { return StrCat(files_dir, "/", sha); };
  auto size_of = [&](const std::string& sha) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file_of(sha), ec);
    return ec ? int64_t{0} : static_cast<int64_t>(size);
  };
  model_bytes += size_of(spec.model_sha256());
  for (const kiln::v1::ExternalFile& f : spec.external_data()) {
    import.external_files[f.location()] = file_of(f.sha256());
    model_bytes += size_of(f.sha256());
  }
  for (const kiln::v1::ModelInputShape& s : spec.input_shapes()) {
    import.input_shapes[s.name()] = {s.dims().begin(), s.dims().end()};
  }
  import.SetTarget(target);
  if (!spec.precision().empty()) {
    absl::StatusOr<compiler::Precision> precision = compiler::ParsePrecision(spec.precision());
    if (!precision.ok()) {
      return all(kiln::v1::MEASURE_ERROR_KIND_COMPILE, std::string(precision.status().message()));
    }
    import.precision = *precision;
  }
  import.max_folded_bytes = compiler::FoldedBytesBudget(model_bytes);
  absl::StatusOr<compiler::Model> model =
      compiler::Model::FromOnnxFile(file_of(spec.model_sha256()), import);
  if (!model.ok()) {
    return all(kiln::v1::MEASURE_ERROR_KIND_COMPILE,
               StrCat("importing the model: ", model.status().message()));
  }

  // Build and load every variant.
  std::vector<Variant> variants(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    Variant& var = variants[static_cast<size_t>(v)];
    var.result.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_NONE);
    const Clock::time_point start = Clock::now();
    std::map<std::string, compiler::Config> configs;
    for (const kiln::v1::TaskConfig& tc : batch.candidates(v).task_configs()) {
      absl::StatusOr<compiler::Config> c = ConfigFromProto(tc.config());
      if (!c.ok()) {
        var.result = Error(kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG,
                           StrCat("task ", tc.workload_key(), ": ", c.status().message()));
        break;
      }
      configs[tc.workload_key()] = *std::move(c);
    }
    if (!var.ok()) continue;
    compiler::ConfigLookup lookup =
        [&configs](const compiler::Workload& w) -> std::optional<compiler::Config> {
      auto it = configs.find(w.Key());
      if (it == configs.end()) return std::nullopt;
      return it->second;
    };
    absl::StatusOr<std::string> bytes = compiler::CompileModel(*model, target, lookup);
    if (!bytes.ok()) {
      var.result =
          Error(kiln::v1::MEASURE_ERROR_KIND_COMPILE, std::string(bytes.status().message()));
      continue;
    }
    absl::StatusOr<std::unique_ptr<deploy::Module>> loaded = deploy::Module::LoadBytes(*bytes);
    if (!loaded.ok()) {
      var.result = Error(kiln::v1::MEASURE_ERROR_KIND_RUNTIME,
                         StrCat("loading the module: ", loaded.status().message()));
      continue;
    }
    var.module = *std::move(loaded);
    for (const deploy::TensorInfo& t : var.module->manifest().outputs) {
      var.outputs.emplace_back(static_cast<size_t>(std::max<int64_t>(t.ByteSize(), 1)));
      var.output_ptrs.push_back(var.outputs.back().data());
    }
    var.result.set_build_s(std::chrono::duration<double>(Clock::now() - start).count());
  }

  // One run of each, checked against the first variant's outputs.
  const Variant* reference = nullptr;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<const void*> input_ptrs;
  for (Variant& var : variants) {
    if (!var.ok()) continue;
    if (inputs.empty() && !var.module->manifest().inputs.empty()) {
      inputs = MakeInputs(var.module->manifest());
      for (const auto& in : inputs) input_ptrs.push_back(in.data());
    }
    if (absl::Status s = var.module->Run(input_ptrs, var.output_ptrs); !s.ok()) {
      var.result = Error(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(s.message()));
      continue;
    }
    if (reference == nullptr) {
      reference = &var;
      continue;
    }
    const auto& outs = var.module->manifest().outputs;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string diff = Compare(outs[i], reference->outputs[i], var.outputs[i]);
      if (!diff.empty()) {
        var.result = Error(kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT, diff);
        break;
      }
    }
  }

  // The block size: runs of the slowest variant that last min_repeat_ms.
  const ResolvedTiming timing = ResolveTiming(batch.timing());
  double slowest_s = 0;
  for (Variant& var : variants) {
    if (!var.ok()) continue;
    const Clock::time_point t0 = Clock::now();
    (void)var.module->Run(input_ptrs, var.output_ptrs);
    slowest_s = std::max(slowest_s, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  int number = timing.number;
  if (number <= 0) {
    number = std::max(
        1, static_cast<int>(std::ceil(timing.min_repeat_ms / 1000.0 / std::max(slowest_s, 1e-6))));
  }
  auto block = [&](Variant& var) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < number; ++i) {
      if (absl::Status s = var.module->Run(input_ptrs, var.output_ptrs); !s.ok()) {
        var.result = Error(kiln::v1::MEASURE_ERROR_KIND_RUNTIME, std::string(s.message()));
        return;
      }
    }
    var.result.add_costs_s(std::chrono::duration<double>(Clock::now() - t0).count() / number);
  };
  for (int round = 0; round < timing.repeat; ++round) {
    for (int k = 0; k < n; ++k) {
      Variant& var = variants[static_cast<size_t>((round + k) % n)];
      if (var.ok()) block(var);
    }
  }
  // The kernel profile: a few blocks of each, rotating too.
  std::vector<std::map<std::string, double>> kernel_s(static_cast<size_t>(n));
  std::vector<int64_t> profiled_runs(static_cast<size_t>(n), 0);
  const int profile_rounds = std::max(2, timing.repeat / 3);
  for (int round = 0; round < profile_rounds; ++round) {
    for (int k = 0; k < n; ++k) {
      const size_t v = static_cast<size_t>((round + k) % n);
      Variant& var = variants[v];
      if (!var.ok()) continue;
      deploy::StartKernelProfile();
      for (int i = 0; i < number; ++i) (void)var.module->Run(input_ptrs, var.output_ptrs);
      for (const deploy::KernelTime& kt : deploy::StopKernelProfile()) {
        // Labels are "KERNEL WORKLOAD_KEY" (compiler/module_writer.cc).
        const size_t space = kt.label.rfind(' ');
        const std::string key = space == std::string::npos ? kt.label : kt.label.substr(space + 1);
        kernel_s[v][key] += kt.total_ms / 1000.0;
      }
      profiled_runs[v] += number;
    }
  }

  std::vector<MeasureResult> results;
  for (int v = 0; v < n; ++v) {
    Variant& var = variants[static_cast<size_t>(v)];
    if (var.ok()) {
      for (const auto& [key, seconds] : kernel_s[static_cast<size_t>(v)]) {
        kiln::v1::KernelCost* kc = var.result.add_kernel_costs();
        kc->set_workload_key(key);
        kc->set_cost_s(seconds / static_cast<double>(std::max<int64_t>(profiled_runs[v], 1)));
      }
    } else {
      var.result.clear_costs_s();
    }
    var.result.set_candidate_id(batch.candidates(v).candidate_id());
    results.push_back(std::move(var.result));
  }
  return results;
}

}  // namespace kiln::agent
