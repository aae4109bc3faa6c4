#include "board/variants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "base/str.h"
#include "deploy/profile.h"

namespace kiln::board {
namespace {

using Clock = std::chrono::steady_clock;

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

// "" when `got` computes what `want` does (see the header).
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

std::vector<VariantTimes> TimeVariants(const std::vector<deploy::Module*>& modules,
                                       const VariantPolicy& policy) {
  const size_t n = modules.size();
  std::vector<VariantTimes> times(n);
  std::vector<std::vector<std::vector<uint8_t>>> outputs(n);
  std::vector<std::vector<void*>> output_ptrs(n);
  auto ok = [&](size_t v) {
    return modules[v] != nullptr && times[v].error == VariantError::kNone;
  };
  auto fail = [&](size_t v, VariantError e, std::string message) {
    times[v].error = e;
    times[v].message = std::move(message);
    times[v].costs_s.clear();
  };
  for (size_t v = 0; v < n; ++v) {
    if (modules[v] == nullptr) {
      times[v].error = VariantError::kLoad;
      continue;
    }
    for (const deploy::TensorInfo& t : modules[v]->manifest().outputs) {
      outputs[v].emplace_back(static_cast<size_t>(std::max<int64_t>(t.ByteSize(), 1)));
      output_ptrs[v].push_back(outputs[v].back().data());
    }
  }
  auto run = [&](size_t v, const std::vector<const void*>& in) {
    return modules[v]->Run(in, output_ptrs[v]);
  };

  // One run of each, checked against the first runnable variant's outputs.
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<const void*> input_ptrs;
  int reference = -1;
  for (size_t v = 0; v < n; ++v) {
    if (!ok(v)) continue;
    if (inputs.empty() && !modules[v]->manifest().inputs.empty()) {
      inputs = MakeInputs(modules[v]->manifest());
      for (const auto& in : inputs) input_ptrs.push_back(in.data());
    }
    if (absl::Status s = run(v, input_ptrs); !s.ok()) {
      fail(v, VariantError::kRuntime, std::string(s.message()));
      continue;
    }
    if (reference < 0) {
      reference = static_cast<int>(v);
      continue;
    }
    const auto& outs = modules[v]->manifest().outputs;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string diff =
          Compare(outs[i], outputs[static_cast<size_t>(reference)][i], outputs[v][i]);
      if (!diff.empty()) {
        fail(v, VariantError::kWrongResult, diff);
        break;
      }
    }
  }

  // The block size: runs of the slowest variant that last min_repeat_ms.
  double slowest_s = 0;
  for (size_t v = 0; v < n; ++v) {
    if (!ok(v)) continue;
    const Clock::time_point t0 = Clock::now();
    (void)run(v, input_ptrs);
    slowest_s = std::max(slowest_s, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  int number = policy.number;
  if (number <= 0) {
    number = std::max(
        1, static_cast<int>(std::ceil(policy.min_repeat_ms / 1000.0 / std::max(slowest_s, 1e-6))));
  }
  auto block = [&](size_t v) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < number; ++i) {
      if (absl::Status s = run(v, input_ptrs); !s.ok()) {
        fail(v, VariantError::kRuntime, std::string(s.message()));
        return;
      }
    }
    times[v].costs_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / number);
  };
  for (int round = 0; round < policy.repeat; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t v = (static_cast<size_t>(round) + k) % n;
      if (ok(v)) block(v);
    }
  }
  // The kernel profile: a few blocks of each, rotating too.
  std::vector<int64_t> profiled_runs(n, 0);
  const int profile_rounds = std::max(2, policy.repeat / 3);
  for (int round = 0; round < profile_rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t v = (static_cast<size_t>(round) + k) % n;
      if (!ok(v)) continue;
      deploy::StartKernelProfile();
      for (int i = 0; i < number; ++i) (void)run(v, input_ptrs);
      for (const deploy::KernelTime& kt : deploy::StopKernelProfile()) {
        // Labels are "KERNEL WORKLOAD_KEY" (compiler/module_writer.cc).
        const size_t space = kt.label.rfind(' ');
        const std::string key = space == std::string::npos ? kt.label : kt.label.substr(space + 1);
        times[v].kernel_s[key] += kt.total_ms / 1000.0;
      }
      profiled_runs[v] += number;
    }
  }
  for (size_t v = 0; v < n; ++v) {
    for (auto& [key, seconds] : times[v].kernel_s) {
      seconds /= static_cast<double>(std::max<int64_t>(profiled_runs[v], 1));
    }
  }
  return times;
}

}  // namespace kiln::board
