// Where a model's time goes: every kernel of the compiled model (the log
// database's best config for the host target, else the default config),
// timed alone on its own buffers, against this machine's roofline measured
// in the same run: the FMA peak (independent vector FMA chains on every
// thread), the int8 dot-product peak (independent vpdpbusd chains, where
// the host has VNNI) and the memory bandwidth (a streaming read of 512 MiB
// on every thread). A kernel's bound is the larger of its operations at its
// peak (the integer convolutions and matrix products of a quantized model:
// their multiply-adds at the dot-product peak; every other kernel: its FLOPs
// at the FMA peak) and its compulsory bytes (inputs and output, once) at
// that bandwidth; "of roofline" is that bound over the measured time (1.0 =
// at the roofline).
//
// Usage: model_profile_bench MODEL.onnx [--db LOG.db] [--repeat N]
// (threads: KILN_NUM_THREADS, as in kiln-run)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/fma_peak.h"
#include "base/str.h"
#include "bench/bench_util.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "compiler/model.h"
#include "compiler/ops/common.h"
#include "compiler/target.h"
#include "deploy/parallel.h"
#include "storage/tuning_db.h"
#include "tuner/history.h"

namespace {

using kiln::compiler::Config;
using kiln::compiler::Workload;

volatile float g_sink = 0;  // keeps the measured loops' results alive

// Runs body(i) for i in [0, n) on the kernels' thread pool.
template <typename F>
void ParallelFor(int64_t n, F& body) {
  kiln_parallel_for(
      n, [](int64_t i, void* ctx) { (*static_cast<F*>(ctx))(i); }, &body);
}

struct Roofline {
  double flops_per_s = 0;      // FMA peak, all threads
  double int8_macs_per_s = 0;  // dot-product peak, all threads (0: none)
  double bytes_per_s = 0;      // streaming read, all threads
};

Roofline MeasureRoofline() {
  const int threads = kiln_num_threads();
  Roofline r;
  std::vector<float> sinks(static_cast<size_t>(threads), 0.0f);
  double flops = 0;
  auto fma = [&](int64_t i) {
    double f = kiln::fma_peak::Flops(int64_t{1} << 22, &sinks[static_cast<size_t>(i)]);
    if (i == 0) flops = f * threads;
  };
  double s = kiln::bench::MedianSeconds([&] { ParallelFor(threads, fma); }, 5, 0);
  r.flops_per_s = flops / s;
  double macs = 0;
  auto dot = [&](int64_t i) {
    double m = kiln::fma_peak::Int8Macs(int64_t{1} << 22, &sinks[static_cast<size_t>(i)]);
    if (i == 0) macs = m * threads;
  };
  s = kiln::bench::MedianSeconds([&] { ParallelFor(threads, dot); }, 5, 0);
  r.int8_macs_per_s = macs / s;

  const int64_t n = (int64_t{512} << 20) / 4;
  std::unique_ptr<float[]> buf(new float[static_cast<size_t>(n)]);
  std::fill(buf.get(), buf.get() + n, 1.0f);
  const int64_t chunk = n / threads;
  std::vector<float> sums(static_cast<size_t>(threads), 0.0f);
  auto read = [&](int64_t t) {
    // Eight partial sums: a vectorizable reduction that is not latency bound.
    float p[8] = {};
    const float* x = buf.get() + t * chunk;
    for (int64_t i = 0; i + 8 <= chunk; i += 8) {
      for (int k = 0; k < 8; ++k) p[k] += x[i + k];
    }
    sums[static_cast<size_t>(t)] += std::accumulate(p, p + 8, 0.0f);
  };
  s = kiln::bench::MedianSeconds([&] { ParallelFor(threads, read); }, 5, 0);
  r.bytes_per_s = static_cast<double>(chunk * threads * 4) / s;
  g_sink = std::accumulate(sums.begin(), sums.end(), 0.0f) +
           std::accumulate(sinks.begin(), sinks.end(), 0.0f);
  return r;
}

struct Row {
  int task = 0;
  std::string op, key, canonical, config;
  bool tuned = false;
  int occurrences = 1;
  double seconds = 0, flops = 0, bytes = 0;
  bool int8 = false;  // multiply-adds of 8-bit integers (at the dot-product peak)
  std::string error;
};

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s MODEL.onnx [--db LOG.db] [--repeat N]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage(argv[0]);
  std::string path = argv[1], db_path;
  int repeat = 20;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    int64_t v = 0;
    if (a == "--db" && i + 1 < argc) {
      db_path = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) && v >= 1) {
      repeat = static_cast<int>(v);
    } else {
      return Usage(argv[0]);
    }
  }
  auto model = kiln::compiler::Model::FromOnnxFile(path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(model.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<kiln::storage::TuningDb> db;
  if (!db_path.empty()) {
    if (!std::filesystem::exists(db_path)) {
      std::fprintf(stderr, "%s: no such log database\n", db_path.c_str());
      return 1;
    }
    auto opened = kiln::storage::TuningDb::Open(db_path);
    if (!opened.ok()) {
      std::fprintf(stderr, "%s: %s\n", db_path.c_str(),
                   std::string(opened.status().message()).c_str());
      return 1;
    }
    db = std::move(*opened);
  }
  const kiln::compiler::Target target = kiln::compiler::Target::Host();
  const Roofline roof = MeasureRoofline();
  std::printf("# model_profile_bench %s\n\n", path.c_str());
  std::printf("host: %s; target: %s; threads: %d; configs: %s\n",
              kiln::compiler::DescribeHostHardware().c_str(), target.Spec().c_str(),
              kiln_num_threads(), db ? ("best records of " + db_path).c_str() : "defaults");
  std::printf(
      "baseline: this machine's roofline, measured now: FMA peak %.1f GFLOP/s, int8 dot-product "
      "peak %.1f GMAC/s (%s), memory bandwidth %.1f GB/s (streaming read)\n\n",
      roof.flops_per_s * 1e-9, roof.int8_macs_per_s * 1e-9,
      roof.int8_macs_per_s > 0 ? "vpdpbusd" : "no VNNI: int8 kernels against the FMA peak",
      roof.bytes_per_s * 1e-9);

  std::vector<Row> rows;
  int index = 0;
  for (const auto& task : model->Tasks()) {
    const Workload& w = task.workload;
    Row row;
    row.task = index++;
    row.op = kiln::NameOf(w.op);
    row.key = w.Key();
    row.canonical = w.Canonical();
    row.occurrences = task.occurrences;
    row.flops = w.Flops();
    row.int8 = roof.int8_macs_per_s > 0 &&
               (kiln::compiler::ops::Int8Conv(w) || kiln::compiler::ops::Int8MatMul(w));
    absl::StatusOr<Config> config = kiln::compiler::DefaultConfig(w, target);
    if (db) {
      auto best = kiln::tuner::BestValidConfig(*db, w, target);
      if (best.ok() && best->has_value()) {
        config = **best;
        row.tuned = true;
      }
    }
    auto sig = w.Signature();
    if (!sig.ok() || !config.ok()) {
      row.error = std::string((sig.ok() ? config.status() : sig.status()).message());
      rows.push_back(row);
      continue;
    }
    row.config = kiln::compiler::CanonicalConfig(*config);
    kiln::compiler::KernelBuffers b = kiln::compiler::MakeKernelBuffers(*sig, 7);
    for (const auto& in : b.inputs) row.bytes += static_cast<double>(in.size());
    row.bytes += static_cast<double>(b.output.size());
    auto kernel = kiln::compiler::BuildJit(w, *config, target);
    absl::Status packed =
        kernel.ok() ? kiln::compiler::PackKernelInputs(**kernel, b) : kernel.status();
    if (!packed.ok()) {
      row.error = std::string(packed.message());
      rows.push_back(row);
      continue;
    }
    row.seconds = kiln::bench::MedianSeconds([&] { (*kernel)->Run(b.args.data()); }, repeat, 1e-3);
    rows.push_back(row);
  }

  double total = 0;
  for (const Row& r : rows) total += r.seconds * r.occurrences;
  std::vector<const Row*> order;
  for (const Row& r : rows) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const Row* a, const Row* b) {
    return a->seconds * a->occurrences > b->seconds * b->occurrences;
  });
  std::printf(
      "| task | op | x | config | us each | share | GOP/s | of peak | GB/s | bound by | "
      "of roofline |\n|---:|---|---:|---|---:|---:|---:|---:|---:|---|---:|\n");
  double bound_total = 0;
  for (const Row* r : order) {
    if (!r->error.empty()) {
      std::printf("| %d | %s | %d | (error: %s) |\n", r->task, r->op.c_str(), r->occurrences,
                  r->error.c_str());
      continue;
    }
    // An int8 kernel's FLOPs are 2 per multiply-add.
    const double t_flops =
        r->int8 ? r->flops / 2 / roof.int8_macs_per_s : r->flops / roof.flops_per_s;
    const double t_bytes = r->bytes / roof.bytes_per_s;
    const double bound = std::max(t_flops, t_bytes);
    bound_total += bound * r->occurrences;
    std::printf("| %d | %s | %d | %s%s | %.1f | %.1f%% | %.1f | %.2f | %.1f | %s | %.2f |\n",
                r->task, r->op.c_str(), r->occurrences, r->tuned ? "tuned " : "", r->config.c_str(),
                r->seconds * 1e6, 100.0 * r->seconds * r->occurrences / total,
                r->flops / r->seconds * 1e-9, t_flops / r->seconds, r->bytes / r->seconds * 1e-9,
                t_flops < t_bytes ? "memory"
                : r->int8         ? "VNNI"
                                  : "FMA",
                bound / r->seconds);
  }
  std::printf(
      "\nsum of kernels: %.3f ms; at the roofline: %.3f ms (%.2f of roofline overall)\n\n"
      "workloads:\n",
      total * 1e3, bound_total * 1e3, total > 0 ? bound_total / total : 0.0);
  for (const Row& r : rows)
    std::printf("  %d: %s %s\n", r.task, r.key.c_str(), r.canonical.c_str());
  int failed = 0;
  for (const Row& r : rows) failed += r.error.empty() ? 0 : 1;
  return failed > 0 ? 1 : 0;
}
