// Per-task kernel latency of the untuned (DefaultConfig) kernels of a model,
// against a named baseline in the same run: the naive reference
// implementation (compiler::RunReference) on the same inputs, timed the same
// way. Outputs are checked against the reference (max abs error).
//
// Usage: task_latency_bench MODEL.onnx [--repeat N] [--random K] [--task I [--config CONFIG]]
// [--flush] [--dump-ir]
//   --repeat N  timed samples per kernel (default 50); the median is reported
//   --random K  also time K random valid configs per task and report the best
//               one (a cheap stand-in for tuning; default 0)
//   --task I    only task I; with --config, time CONFIG ("k=v;k=v") instead of
//               the default config
//   --flush     time each run with the kernel's buffers flushed from the caches
//               first, as `kiln tune --flush-cache` does (a kernel's cost in a
//               model whose weights outgrow the caches)
//   --dump-ir   print the IR after every lowering pass to stderr
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/str.h"
#include "bench/bench_util.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "compiler/measure.h"
#include "compiler/model.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"

namespace {

using kiln::compiler::Config;
using kiln::compiler::KernelBuffers;
using kiln::compiler::KernelSignature;
using kiln::compiler::MakeKernelBuffers;
using kiln::compiler::Workload;

bool g_dump_ir = false;
bool g_flush = false;

// Median seconds of the kernel built with `config`; negative on failure.
double TimeConfig(const Workload& w, const Config& config, const kiln::compiler::Target& target,
                  KernelBuffers& b, int repeat, std::string* error) {
  auto kernel = kiln::compiler::BuildJit(w, config, target, {.dump_ir = g_dump_ir});
  if (!kernel.ok()) {
    *error = std::string(kernel.status().message());
    return -1;
  }
  if (g_flush) {
    kiln::compiler::Prebuilt prebuilt;
    prebuilt.kernel = *std::move(kernel);
    kiln::compiler::MeasurePolicy policy{.repeat = repeat, .flush_cache = true};
    kiln::compiler::Measurement m =
        kiln::compiler::Measure(w, config, policy, target, 42, &prebuilt);
    if (m.error != kiln::compiler::MeasureError::kNone || m.costs_s.empty()) {
      *error = m.message;
      return -1;
    }
    std::sort(m.costs_s.begin(), m.costs_s.end());
    return m.costs_s[m.costs_s.size() / 2];
  }
  const kiln::compiler::JitKernel& k = **kernel;
  if (auto s = kiln::compiler::PackKernelInputs(k, b); !s.ok()) {
    *error = std::string(s.message());
    return -1;
  }
  return kiln::bench::MedianSeconds([&] { k.Run(b.args.data()); }, repeat, 20e-6);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [--repeat N] [--random K]\n", argv[0]);
    return 2;
  }
  std::string path = argv[1];
  int repeat = 50, random_trials = 0, only = -1;
  std::string config_text;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--task" && i + 1 < argc) {
      int64_t v = 0;
      if (!kiln::ParseInt64(argv[++i], &v)) return 2;
      only = static_cast<int>(v);
    } else if (a == "--dump-ir") {
      g_dump_ir = true;
    } else if (a == "--flush") {
      g_flush = true;
    } else if (a == "--config" && i + 1 < argc) {
      config_text = argv[++i];
    } else if ((a == "--repeat" || a == "--random") && i + 1 < argc) {
      int64_t v = 0;
      if (!kiln::ParseInt64(argv[++i], &v) || v < (a == "--repeat" ? 1 : 0)) {
        std::fprintf(stderr, "bad value for %s\n", a.c_str());
        return 2;
      }
      (a == "--repeat" ? repeat : random_trials) = static_cast<int>(v);
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  auto model = kiln::compiler::Model::FromOnnxFile(path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(model.status().message()).c_str());
    return 1;
  }
  kiln::compiler::Target target = kiln::compiler::Target::Host();
  std::printf("# task_latency_bench %s\n\n", path.c_str());
  std::printf("host: %s; target: %s; threads: %d; %d samples per kernel (median)\n\n",
              kiln::compiler::DescribeHostHardware().c_str(), target.Spec().c_str(),
              kiln_num_threads(), repeat);
  std::printf(
      "baseline: naive reference (compiler::RunReference) on the same inputs, timed the same "
      "way\n\n");
  std::printf(
      "| task | workload key | op | default config | default us | GFLOPS | reference us | speed vs "
      "reference | max abs err |");
  if (random_trials > 0) std::printf(" best of %d random us | best random config |", random_trials);
  std::printf("\n|---|---|---|---|---|---|---|---|---|");
  if (random_trials > 0) std::printf("---|---|");
  std::printf("\n");

  int failures = 0;
  double total_default = 0, total_ref = 0, total_random = 0;
  std::vector<std::string> canon;
  int index = 0;
  for (const auto& task : model->Tasks()) {
    const Workload& w = task.workload;
    canon.push_back(w.Canonical());
    auto sig = w.Signature();
    if (only >= 0 && index != only) {
      ++index;
      continue;
    }
    auto config = config_text.empty() ? kiln::compiler::DefaultConfig(w, target)
                                      : kiln::compiler::ParseConfig(config_text);
    if (!sig.ok() || !config.ok()) {
      std::printf("| %d | %s | %s | (error: %s) |\n", index++, w.Key().c_str(),
                  std::string(kiln::NameOf(w.op)).c_str(),
                  std::string((sig.ok() ? config.status() : sig.status()).message()).c_str());
      ++failures;
      continue;
    }
    KernelBuffers b = MakeKernelBuffers(*sig, 1234 + static_cast<uint64_t>(index));
    std::string error;
    double t = TimeConfig(w, *config, target, b, repeat, &error);
    if (t < 0) {
      std::printf("| %d | %s | %s | %s | (build failed: %s) |\n", index++, w.Key().c_str(),
                  std::string(kiln::NameOf(w.op)).c_str(),
                  kiln::compiler::CanonicalConfig(*config).c_str(), error.c_str());
      ++failures;
      continue;
    }
    std::vector<uint8_t> want(b.output.size());
    double t_ref = kiln::bench::MedianSeconds(
        [&] { (void)kiln::compiler::RunReference(w, b.input_ptrs, want.data()); },
        std::max(3, repeat / 5), 20e-6);
    double err = 0;
    for (int64_t i = 0; i < b.OutputSize(); ++i) {
      err = std::max(
          err, std::fabs(b.OutputAt(i) - kiln::ElementToDouble(b.output_dtype, want.data(), i)));
    }
    if (!(err <= 1e-3)) ++failures;
    double flops = w.Flops();
    std::printf("| %d | %s | %s | %s | %.2f | %.2f | %.2f | %.1fx | %.2g |", index, w.Key().c_str(),
                std::string(kiln::NameOf(w.op)).c_str(),
                kiln::compiler::CanonicalConfig(*config).c_str(), t * 1e6, flops / t * 1e-9,
                t_ref * 1e6, t_ref / t, err);
    total_default += t;
    total_ref += t_ref;
    if (random_trials > 0) {
      auto knobs = kiln::compiler::KnobsOf(w, target);
      std::mt19937 rng(99 + static_cast<uint32_t>(index));
      double best = t;
      Config best_c = *config;
      for (int tried = 0, attempt = 0;
           knobs.ok() && tried < random_trials && attempt < 50 * random_trials; ++attempt) {
        Config c;
        for (const auto& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
        if (!kiln::compiler::ValidateConfig(w, target, c).ok()) continue;
        ++tried;
        double tc = TimeConfig(w, c, target, b, std::max(5, repeat / 5), &error);
        if (tc > 0 && tc < best) {
          best = tc;
          best_c = c;
        }
      }
      total_random += best;
      std::printf(" %.2f | %s |", best * 1e6, kiln::compiler::CanonicalConfig(best_c).c_str());
    }
    std::printf("\n");
    ++index;
  }
  std::printf("| all | | | | %.2f | | %.2f | %.1fx | |", total_default * 1e6, total_ref * 1e6,
              total_default > 0 ? total_ref / total_default : 0.0);
  if (random_trials > 0) std::printf(" %.2f | |", total_random * 1e6);
  std::printf("\n\nworkloads:\n");
  for (size_t i = 0; i < canon.size(); ++i) std::printf("  %zu: %s\n", i, canon[i].c_str());
  if (failures > 0) std::printf("\n%d task(s) failed or mismatched the reference\n", failures);
  return failures > 0 ? 1 : 0;
}
