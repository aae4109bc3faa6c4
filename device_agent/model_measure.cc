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
#include "board/variants.h"
#include "compiler/model.h"
#include "deploy/runtime.h"
#include "device_agent/measure.h"

namespace kiln::agent {
namespace {

using kiln::v1::MeasureErrorKind;
using kiln::v1::MeasureResult;
using Clock = std::chrono::steady_clock;

}  // namespace

BuiltVariants BuildModelVariants(const kiln::v1::MeasureBatch& batch, const std::string& files_dir,
                                 const compiler::Target& target) {
  const int n = batch.candidates_size();
  BuiltVariants built;
  built.results.resize(static_cast<size_t>(n));
  built.artifacts.resize(static_cast<size_t>(n));
  for (int v = 0; v < n; ++v) {
    built.results[static_cast<size_t>(v)].set_candidate_id(batch.candidates(v).candidate_id());
    built.results[static_cast<size_t>(v)].set_error_kind(kiln::v1::MEASURE_ERROR_KIND_NONE);
  }
  auto all = [&](MeasureErrorKind kind, const std::string& message) {
    for (MeasureResult& r : built.results) {
      r.set_error_kind(kind);
      r.set_error_message(message);
    }
    return std::move(built);
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
  for (int v = 0; v < n; ++v) {
    MeasureResult& result = built.results[static_cast<size_t>(v)];
    const Clock::time_point start = Clock::now();
    std::map<std::string, compiler::Config> configs;
    bool configs_ok = true;
    for (const kiln::v1::TaskConfig& tc : batch.candidates(v).task_configs()) {
      absl::StatusOr<compiler::Config> c = ConfigFromProto(tc.config());
      if (!c.ok()) {
        result = ErrorResult(kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG,
                             StrCat("task ", tc.workload_key(), ": ", c.status().message()));
        configs_ok = false;
        break;
      }
      configs[tc.workload_key()] = *std::move(c);
    }
    if (!configs_ok) continue;
    compiler::ConfigLookup lookup =
        [&configs](const compiler::Workload& w) -> std::optional<compiler::Config> {
      auto it = configs.find(w.Key());
      if (it == configs.end()) return std::nullopt;
      return it->second;
    };
    absl::StatusOr<std::string> bytes = compiler::CompileModel(*model, target, lookup);
    if (!bytes.ok()) {
      result =
          ErrorResult(kiln::v1::MEASURE_ERROR_KIND_COMPILE, std::string(bytes.status().message()));
      continue;
    }
    built.artifacts[static_cast<size_t>(v)] = *std::move(bytes);
    result.set_build_s(std::chrono::duration<double>(Clock::now() - start).count());
  }
  for (int v = 0; v < n; ++v) {
    built.results[static_cast<size_t>(v)].set_candidate_id(batch.candidates(v).candidate_id());
  }
  return built;
}

void MergeVariantTimes(const std::vector<board::VariantTimes>& times, BuiltVariants* built) {
  for (size_t v = 0; v < built->results.size() && v < times.size(); ++v) {
    MeasureResult& r = built->results[v];
    if (r.error_kind() != kiln::v1::MEASURE_ERROR_KIND_NONE) continue;  // the build's error
    const board::VariantTimes& t = times[v];
    switch (t.error) {
      case board::VariantError::kNone:
        break;
      case board::VariantError::kLoad:
        r.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
        r.set_error_message(StrCat("loading the module: ", t.message));
        continue;
      case board::VariantError::kRuntime:
        r.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
        r.set_error_message(t.message);
        continue;
      case board::VariantError::kWrongResult:
        r.set_error_kind(kiln::v1::MEASURE_ERROR_KIND_WRONG_RESULT);
        r.set_error_message(t.message);
        continue;
    }
    for (double c : t.costs_s) r.add_costs_s(c);
    for (const auto& [key, seconds] : t.kernel_s) {
      kiln::v1::KernelCost* kc = r.add_kernel_costs();
      kc->set_workload_key(key);
      kc->set_cost_s(seconds);
    }
  }
}

std::vector<MeasureResult> MeasureModelVariants(const kiln::v1::MeasureBatch& batch,
                                                const std::string& files_dir,
                                                const compiler::Target& target) {
  BuiltVariants built = BuildModelVariants(batch, files_dir, target);
  std::vector<std::unique_ptr<deploy::Module>> modules(built.artifacts.size());
  std::vector<deploy::Module*> loaded(built.artifacts.size(), nullptr);
  for (size_t v = 0; v < built.artifacts.size(); ++v) {
    if (built.artifacts[v].empty()) continue;
    absl::StatusOr<std::unique_ptr<deploy::Module>> m =
        deploy::Module::LoadBytes(built.artifacts[v]);
    if (!m.ok()) {
      built.results[v].set_error_kind(kiln::v1::MEASURE_ERROR_KIND_RUNTIME);
      built.results[v].set_error_message(StrCat("loading the module: ", m.status().message()));
      continue;
    }
    modules[v] = *std::move(m);
    loaded[v] = modules[v].get();
  }
  const ResolvedTiming timing = ResolveTiming(batch.timing());
  MergeVariantTimes(
      board::TimeVariants(loaded, {timing.number, timing.repeat, timing.min_repeat_ms}), &built);
  return std::move(built.results);
}

}  // namespace kiln::agent
