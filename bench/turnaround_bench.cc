// Tuning turnaround on the kernel shapes of issue 6: how long one candidate
// takes from config to result.
//
//   build ms: lowering plus JIT of one candidate (compiler::BuildJit), the
//     issue's target is a median of at most 25 ms;
//   measure s: the agent's whole per-candidate work (MeasureCandidate: build,
//     verify against the reference, time with the farm's default policy),
//     summed over the candidates, without and with the early stop the
//     tracker asks for once a task has a best cost (stop_above_s = 3x the
//     default config's cost, the baseline of this table).
//
// Usage: turnaround_bench [--candidates N] [--only SUBSTR] [--build-only] [--nchw]
// N random valid configs per shape (default 16) plus the default config.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "base/str.h"
#include "bench/shapes.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "device_agent/measure.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::compiler::Config;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

kiln::v1::Config ToProto(const Config& c) {
  kiln::v1::Config out;
  out.set_canonical(kiln::compiler::CanonicalConfig(c));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int candidates = 16;
  std::string only;
  bool build_only = false;
  bool nchw = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int64_t v = 0;
    if (a == "--candidates" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v > 0) {
      candidates = static_cast<int>(v);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--build-only") {
      build_only = true;
    } else if (a == "--nchw") {
      nchw = true;
    } else {
      std::fprintf(stderr, "usage: %s [--candidates N] [--only SUBSTR] [--build-only] [--nchw]\n",
                   argv[0]);
      return 2;
    }
  }
  const kiln::compiler::Target target = kiln::compiler::Target::Host();
  std::printf("# turnaround_bench\n\nhost: %s; target: %s\n",
              kiln::compiler::DescribeHostHardware().c_str(), target.Spec().c_str());
  std::printf(
      "%d random valid configs per shape plus the default; measure = build + verify + time "
      "(repeat 3, min_repeat_ms 10); early stop at 3x the default's cost\n\n",
      candidates);
  std::printf(
      "| shape | build median ms | build p90 ms | build max ms | measure s | with early stop s | "
      "cut short |\n|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> all_builds;
  double total_full = 0, total_stop = 0;
  for (const kiln::bench::Shape& s : kiln::bench::kShapes) {
    if (!only.empty() && s.name.find(only) == std::string::npos) continue;
    kiln::compiler::Workload w = kiln::bench::KilnWorkload(s, /*blocked=*/!nchw);
    auto def = kiln::compiler::DefaultConfig(w, target);
    auto knobs = kiln::compiler::KnobsOf(w, target);
    if (!def.ok() || !knobs.ok()) continue;
    std::vector<Config> configs = {*def};
    std::mt19937 rng(5);
    for (int attempt = 0; static_cast<int>(configs.size()) <= candidates && attempt < 1000;
         ++attempt) {
      Config c = kiln::bench::RandomConfig(*knobs, rng);
      if (kiln::compiler::ValidateConfig(w, target, c).ok()) configs.push_back(c);
    }
    std::vector<double> builds;
    for (const Config& c : configs) {
      Clock::time_point t0 = Clock::now();
      auto k = kiln::compiler::BuildJit(w, c, target);
      if (k.ok()) builds.push_back(Seconds(t0));
    }
    if (builds.empty()) continue;
    all_builds.insert(all_builds.end(), builds.begin(), builds.end());
    if (build_only) {
      std::printf("| %s | %.1f | %.1f | %.1f | | | |\n", s.name.c_str(),
                  Percentile(builds, 0.5) * 1e3, Percentile(builds, 0.9) * 1e3,
                  Percentile(builds, 1.0) * 1e3);
      continue;
    }

    const std::string canonical = w.Canonical();
    kiln::v1::TimingPolicy policy;  // the agent's defaults
    // The default config's cost: the bound the tracker would send.
    kiln::v1::MeasureResult first =
        kiln::agent::MeasureCandidate(canonical, ToProto(*def), policy, target);
    double best = first.costs_s_size() > 0 ? first.costs_s(0) : 0;
    for (double c : first.costs_s()) best = std::min(best, c);
    double full = 0, stopped = 0;
    int cut = 0;
    for (size_t i = 1; i < configs.size(); ++i) {
      Clock::time_point t0 = Clock::now();
      kiln::agent::MeasureCandidate(canonical, ToProto(configs[i]), policy, target);
      full += Seconds(t0);
      kiln::v1::TimingPolicy stop = policy;
      stop.set_stop_above_s(3 * best);
      t0 = Clock::now();
      kiln::v1::MeasureResult r =
          kiln::agent::MeasureCandidate(canonical, ToProto(configs[i]), stop, target);
      stopped += Seconds(t0);
      cut += r.cut_short();
    }
    total_full += full;
    total_stop += stopped;
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f | %d/%zu |\n", s.name.c_str(),
                Percentile(builds, 0.5) * 1e3, Percentile(builds, 0.9) * 1e3,
                Percentile(builds, 1.0) * 1e3, full, stopped, cut, configs.size() - 1);
    std::fflush(stdout);
  }
  if (all_builds.empty()) return 1;
  std::printf(
      "\nbuild (lowering + JIT) over %zu candidates: median %.1f ms, p90 %.1f ms (target: median "
      "<= 25 ms); measuring: %.1f s, with early stop %.1f s (%.2fx)\n",
      all_builds.size(), Percentile(all_builds, 0.5) * 1e3, Percentile(all_builds, 0.9) * 1e3,
      total_full, total_stop, total_stop > 0 ? total_full / total_stop : 0);
  return 0;
}
