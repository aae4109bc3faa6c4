// Tuning turnaround on the kernel shapes of issue 6: how long one candidate
// takes from config to result.
//
//   build ms: lowering plus JIT of one candidate (compiler::BuildJit), the
//     issue's target is a median of at most 25 ms;
//   --phases: where the build time goes, per phase (medians over every
//     candidate): kiln's lowering (kernel and weight packs), LLVM IR
//     emission, LLVM's middle end (OptimizeModule), and instruction
//     selection to register allocation (an object file, as the JIT does), with
//     the instruction counts before and after the middle end;
//   measure s: the agent's whole per-candidate work (MeasureCandidate: build,
//     verify against the reference, time with the farm's default policy),
//     summed over the candidates, without and with the early stop the
//     tracker asks for once a task has a best cost (stop_above_s = 3x the
//     default config's cost, the baseline of this table).
//
//   --dump-ir DIR: with --phases, each candidate's emitted (unoptimized) LLVM
//     IR goes to DIR/<shape>.<n>.ll, for opt/llc -time-passes.
//
//   --each: with --phases, one line per candidate (its config and phases);
//     with --db, one line per record (its build time, workload and config).
//
//   --db LOG.db: instead of random configs of the shapes above, the
//     candidates a tuning run built: N records of the log database (this
//     host's target, every k-th so that they span the run), each workload
//     and config as it was measured, built and timed the same way; a table
//     per operator. Random valid configs include many that the cost model
//     never proposes (the largest unrolls); these are the ones it did.
//
//   --builds R: each candidate is built R times and its fastest build (each
//     phase's fastest with --phases) counts: this VM's neighbours add tens
//     of milliseconds to a build now and then.
//
// Usage: turnaround_bench [--candidates N] [--builds R] [--only SUBSTR] [--build-only]
//                         [--phases] [--each] [--nchw] [--dump-ir DIR] [--db LOG.db]
// N random valid configs per shape (default 16) plus the default config.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/cpus.h"
#include "base/str.h"
#include "bench/shapes.h"
#include "compiler/codegen/jit.h"
#include "compiler/codegen/llvm_codegen.h"
#include "compiler/kernel.h"
#include "compiler/measure.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "device_agent/measure.h"
#include "llvm/IR/PassTimingInfo.h"
#include "llvm/Support/raw_ostream.h"
#include "storage/tuning_db.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::compiler::Config;
using Phases = kiln::compiler::codegen::BuildTimes;

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

// One candidate's build (BuildJit), phase by phase; nullopt when it fails.
// With `dump_path`, the candidate's emitted LLVM IR is written there.
std::optional<kiln::compiler::codegen::BuildTimes> TimePhases(const kiln::compiler::Workload& w,
                                                              const Config& c,
                                                              const kiln::compiler::Target& target,
                                                              const std::string& dump_path) {
  kiln::compiler::codegen::BuildTimes times;
  if (!kiln::compiler::BuildJit(w, c, target, {}, &times).ok()) return std::nullopt;
  if (!dump_path.empty()) {
    auto funcs = kiln::compiler::LowerKernel(w, c, target, "kiln_kernel");
    if (!funcs.ok()) return std::nullopt;
    auto text = kiln::compiler::codegen::EmitLlvmIrText(*funcs, target, /*optimize=*/false);
    if (!text.ok()) return std::nullopt;
    std::ofstream(dump_path) << *text;
  }
  return times;
}

// The median of one field over `all`.
template <typename T>
double Median(const std::vector<Phases>& all, T Phases::*field) {
  std::vector<double> v;
  for (const Phases& p : all) v.push_back(static_cast<double>(p.*field));
  return Percentile(v, 0.5);
}

// The median of the whole builds (the phases summed per candidate).
double MedianTotal(const std::vector<Phases>& all) {
  std::vector<double> v;
  for (const Phases& p : all) v.push_back(p.lower + p.emit + p.middle + p.codegen + p.link);
  return Percentile(v, 0.5);
}

// Seconds of the fastest of `builds` builds (BuildJit) of (w, c): this VM's
// neighbours add tens of milliseconds to a build now and then. nullopt when
// the build fails.
std::optional<double> FastestBuild(const kiln::compiler::Workload& w, const Config& c,
                                   const kiln::compiler::Target& target, int builds) {
  std::optional<double> fastest;
  for (int b = 0; b < builds; ++b) {
    Clock::time_point t0 = Clock::now();
    if (!kiln::compiler::BuildJit(w, c, target).ok()) return std::nullopt;
    const double t = Seconds(t0);
    fastest = fastest ? std::min(*fastest, t) : t;
  }
  return fastest;
}

// --db: builds N of the log database's records for `target`, spread over
// the run, and prints the median build per operator and over all.
int TimeLoggedCandidates(const std::string& db_path, int n, int builds_per,
                         const kiln::compiler::Target& target, bool each) {
  if (!std::filesystem::exists(db_path)) {
    std::fprintf(stderr, "%s: no such log database\n", db_path.c_str());
    return 2;
  }
  auto db = kiln::storage::TuningDb::Open(db_path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s: %s\n", db_path.c_str(), std::string(db.status().message()).c_str());
    return 2;
  }
  auto records = (*db)->QueryRecords("", target.Spec(), 0);
  if (!records.ok() || records->empty()) {
    std::fprintf(stderr, "%s: no records for %s\n", db_path.c_str(), target.Spec().c_str());
    return 1;
  }
  const size_t step = std::max<size_t>(1, records->size() / static_cast<size_t>(n));
  std::printf("%zu of the %zu records of %s (every %zu-th), each built %d time(s)\n\n",
              (records->size() + step - 1) / step, records->size(), db_path.c_str(), step,
              builds_per);
  std::map<std::string, std::vector<double>> by_op;
  std::vector<double> all;
  int failed = 0;
  for (size_t i = 0; i < records->size(); i += step) {
    const kiln::storage::RecordRow& r = (*records)[i];
    auto row = (*db)->GetWorkload(r.workload_key);
    auto config = kiln::compiler::ParseConfig(r.config);
    if (!row.ok() || !*row || !config.ok()) {
      ++failed;
      continue;
    }
    auto w = kiln::compiler::Workload::Parse((*row)->canonical);
    if (!w.ok()) {
      ++failed;
      continue;
    }
    std::optional<double> fastest = FastestBuild(*w, *config, target, builds_per);
    if (!fastest) {
      ++failed;  // a record of a failed measurement, or of another compiler version
      continue;
    }
    by_op[std::string(kiln::NameOf(w->op))].push_back(*fastest);
    all.push_back(*fastest);
    if (each) {
      std::printf("%.1f ms  %s  %s\n", *fastest * 1e3, (*row)->canonical.c_str(),
                  kiln::compiler::CanonicalConfig(*config).c_str());
    }
  }
  if (all.empty()) return 1;
  std::printf(
      "| operator | candidates | build median ms | build p90 ms | build max ms |\n"
      "|---|---:|---:|---:|---:|\n");
  for (const auto& [op, v] : by_op) {
    std::printf("| %s | %zu | %.1f | %.1f | %.1f |\n", op.c_str(), v.size(),
                Percentile(v, 0.5) * 1e3, Percentile(v, 0.9) * 1e3, Percentile(v, 1.0) * 1e3);
  }
  std::printf(
      "\nbuild (lowering + JIT) over %zu logged candidates: median %.1f ms, p90 %.1f ms "
      "(target: median <= 25 ms); %d record(s) not built\n",
      all.size(), Percentile(all, 0.5) * 1e3, Percentile(all, 0.9) * 1e3, failed);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int candidates = 16;
  std::string only;
  bool build_only = false;
  bool phases = false;
  bool nchw = false;
  bool each = false;
  std::string dump_dir;
  std::string db_path;
  int builds_per = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int64_t v = 0;
    if (a == "--candidates" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v > 0) {
      candidates = static_cast<int>(v);
    } else if (a == "--builds" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v > 0) {
      builds_per = static_cast<int>(v);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--build-only") {
      build_only = true;
    } else if (a == "--phases") {
      phases = build_only = true;
    } else if (a == "--each") {
      each = phases = build_only = true;
    } else if (a == "--db" && i + 1 < argc) {
      db_path = argv[++i];
    } else if (a == "--nchw") {
      nchw = true;
    } else if (a == "--dump-ir" && i + 1 < argc) {
      dump_dir = argv[++i];
      phases = build_only = true;
      std::error_code ec;
      std::filesystem::create_directories(dump_dir, ec);
      if (ec) {
        std::fprintf(stderr, "--dump-ir %s: %s\n", dump_dir.c_str(), ec.message().c_str());
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--candidates N] [--builds R] [--only SUBSTR] [--build-only] [--phases] "
          "[--each] [--nchw] [--dump-ir DIR] [--db LOG.db]\n",
          argv[0]);
      return 2;
    }
  }
  const kiln::compiler::Target target = kiln::compiler::Target::Host();
  std::printf("# turnaround_bench\n\nhost: %s; target: %s\n",
              kiln::compiler::DescribeHostHardware().c_str(), target.Spec().c_str());
  if (!db_path.empty()) return TimeLoggedCandidates(db_path, candidates, builds_per, target, each);
  std::printf(
      "%d random valid configs per shape plus the default, each built %d time(s) (the fastest "
      "counts); measure = build + verify + time (repeat 3, min_repeat_ms 10); early stop at 3x "
      "the default's cost\n\n",
      candidates, builds_per);
  if (phases) {
    std::printf(
        "| shape | lower ms | emit ms | middle end ms | codegen ms | link ms | build ms | "
        "instructions emitted | after middle end "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    std::printf(
        "| shape | build median ms | build p90 ms | build max ms | batch build ms per candidate "
        "| measure s | with early stop s | cut short "
        "|\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  std::vector<double> all_builds;
  std::vector<Phases> all_phases;
  double batch_total_s = 0, serial_total_s = 0;
  size_t batch_candidates = 0;
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
    if (phases) {
      std::vector<Phases> shape_phases;
      for (size_t i = 0; i < configs.size(); ++i) {
        std::string dump;
        if (!dump_dir.empty()) {
          std::string name = s.name;
          for (char& ch : name) {
            if (std::isalnum(static_cast<unsigned char>(ch)) == 0) ch = '_';
          }
          dump = dump_dir + "/" + name + "." + std::to_string(i) + ".ll";
        }
        std::optional<Phases> fastest;
        for (int r = 0; r < builds_per; ++r) {
          std::optional<Phases> p = TimePhases(w, configs[i], target, dump);
          if (!p) break;
          if (!fastest) {
            fastest = p;
            continue;
          }
          for (double Phases::*f :
               {&Phases::lower, &Phases::emit, &Phases::middle, &Phases::codegen, &Phases::link}) {
            (*fastest).*f = std::min((*fastest).*f, (*p).*f);
          }
        }
        if (!fastest) continue;
        shape_phases.push_back(*fastest);
        if (each) {
          const Phases& p = *fastest;
          std::printf("|   %zu %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f |\n", i,
                      kiln::compiler::CanonicalConfig(configs[i]).c_str(), p.lower * 1e3,
                      p.emit * 1e3, p.middle * 1e3, p.codegen * 1e3, p.link * 1e3,
                      (p.lower + p.emit + p.middle + p.codegen + p.link) * 1e3,
                      static_cast<double>(p.emitted), static_cast<double>(p.optimized));
        }
      }
      if (shape_phases.empty()) continue;
      all_phases.insert(all_phases.end(), shape_phases.begin(), shape_phases.end());
      std::printf(
          "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f |\n", s.name.c_str(),
          Median(shape_phases, &Phases::lower) * 1e3, Median(shape_phases, &Phases::emit) * 1e3,
          Median(shape_phases, &Phases::middle) * 1e3, Median(shape_phases, &Phases::codegen) * 1e3,
          Median(shape_phases, &Phases::link) * 1e3, MedianTotal(shape_phases) * 1e3,
          Median(shape_phases, &Phases::emitted), Median(shape_phases, &Phases::optimized));
      std::fflush(stdout);
      continue;
    }
    std::vector<double> builds;
    for (const Config& c : configs) {
      if (std::optional<double> t = FastestBuild(w, c, target, builds_per)) builds.push_back(*t);
    }
    if (builds.empty()) continue;
    all_builds.insert(all_builds.end(), builds.begin(), builds.end());
    // The same candidates built as the measurers build a batch: on every
    // core at once (PrebuildJit), then timed one at a time.
    Clock::time_point batch_start = Clock::now();
    kiln::compiler::PrebuildJit(w, configs, target);
    const double batch_s = Seconds(batch_start);
    batch_total_s += batch_s;
    serial_total_s += std::accumulate(builds.begin(), builds.end(), 0.0);
    batch_candidates += configs.size();
    const double per_candidate_ms = batch_s / static_cast<double>(configs.size()) * 1e3;
    if (build_only) {
      std::printf("| %s | %.1f | %.1f | %.1f | %.1f | | | |\n", s.name.c_str(),
                  Percentile(builds, 0.5) * 1e3, Percentile(builds, 0.9) * 1e3,
                  Percentile(builds, 1.0) * 1e3, per_candidate_ms);
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
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %d/%zu |\n", s.name.c_str(),
                Percentile(builds, 0.5) * 1e3, Percentile(builds, 0.9) * 1e3,
                Percentile(builds, 1.0) * 1e3, per_candidate_ms, full, stopped, cut,
                configs.size() - 1);
    std::fflush(stdout);
  }
  // KILN_LLVM_OPTIONS=-time-passes: the code generator's passes, summed
  // over every candidate built.
  llvm::reportAndResetTimings(&llvm::errs());
  if (phases) {
    if (all_phases.empty()) return 1;
    std::printf(
        "\nmedians over %zu candidates: lowering %.1f ms, emission %.1f ms, middle end %.1f ms, "
        "code generation %.1f ms, linking %.1f ms, whole build %.1f ms; %.0f instructions "
        "emitted, %.0f after the middle end\n",
        all_phases.size(), Median(all_phases, &Phases::lower) * 1e3,
        Median(all_phases, &Phases::emit) * 1e3, Median(all_phases, &Phases::middle) * 1e3,
        Median(all_phases, &Phases::codegen) * 1e3, Median(all_phases, &Phases::link) * 1e3,
        MedianTotal(all_phases) * 1e3, Median(all_phases, &Phases::emitted),
        Median(all_phases, &Phases::optimized));
    return 0;
  }
  if (all_builds.empty()) return 1;
  std::printf(
      "\nbuild (lowering + JIT) over %zu candidates: median %.1f ms, p90 %.1f ms (target: median "
      "<= 25 ms); measuring: %.1f s, with early stop %.1f s (%.2fx)\n",
      all_builds.size(), Percentile(all_builds, 0.5) * 1e3, Percentile(all_builds, 0.9) * 1e3,
      total_full, total_stop, total_stop > 0 ? total_full / total_stop : 0);
  std::printf(
      "builds per candidate, all shapes (total wall / candidates): %.1f ms one at a time, %.1f ms "
      "as a batch on %d threads (PrebuildJit, as the measurers build)\n",
      serial_total_s / static_cast<double>(batch_candidates) * 1e3,
      batch_total_s / static_cast<double>(batch_candidates) * 1e3, kiln::UsableCpus());
  return 0;
}
