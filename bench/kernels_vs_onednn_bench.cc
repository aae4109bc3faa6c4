// Kernel speed against oneDNN, in the same run: the MatMul and conv2d shapes
// of issue 6 (ResNet-50's layers, BERT's projections), kiln's kernel with its
// default config (and, with --trials N, the best of N random valid configs,
// a stand-in for tuning) beside oneDNN's primitive for the same problem.
// oneDNN picks its own layouts (format "any"), weights are reordered once
// outside the timed loop, and only the primitive's execution is timed, as a
// framework that keeps oneDNN's blocked layouts end to end would run it.
// Ratios are oneDNN time / kiln time (higher is better for kiln; 1.0 ties).
// Where Debian's OpenBLAS is installed (libopenblas-dev), the MatMul shapes
// are also timed against its cblas_sgemm (cblas_sgemv for one row), on as
// many threads as oneDNN; it prints the core OpenBLAS detected, which
// OPENBLAS_CORETYPE overrides (Debian's build mis-detects some CPUs).
//
// kiln's convolutions run as the layout pass runs them inside a network:
// data and output in NCHW[16]c wherever the channels allow (the stem reads
// NCHW), the counterpart of oneDNN's own blocked layouts; --nchw times them
// on NCHW tensors instead (every kernel then packs and unpacks).
//
// --int8 times the convolution shapes in 8-bit integers instead (issue 40):
// uint8 data with a zero point, int8 weights, int32 output, against oneDNN's
// u8s8s32 primitive with the same runtime source zero point; kiln's the
// generic conv of a quantized model (conv_int8_blocked.cc, conv_int8.cc,
// conv_int8_depthwise.cc) in the layouts the model runs it in (--nchw:
// NCHW).
//
// Usage: kernels_vs_onednn_bench [--trials N] [--repeat R] [--only SUBSTR] [--dump-ir]
//                                [--set KNOB=V;...] [--nchw] [--int8]
// --set overrides knobs of the default config (experiments on one shape).
// Threads: oneDNN follows OMP_NUM_THREADS, kiln KILN_NUM_THREADS; set both
// (bench/kernels.sh runs 1 and 2 threads).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <random>
#include <string>
#include <vector>

#include "base/str.h"
#include "bench/bench_util.h"
#include "bench/shapes.h"
#include "compiler/config.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "deploy/parallel.h"

namespace {

using kiln::bench::KilnWorkload;
using kiln::bench::kShapes;
using kiln::bench::Shape;
using kiln::compiler::Config;
using kiln::compiler::KernelBuffers;
using kiln::compiler::Target;
using kiln::compiler::Workload;

// `src` in the layout `want` (a reorder where they differ).
dnnl::memory Reordered(dnnl::memory src, const dnnl::memory::desc& want, const dnnl::engine& eng,
                       dnnl::stream& strm) {
  if (src.get_desc() == want) return src;
  dnnl::memory dst(want, eng);
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  return dst;
}

// A convolution shape's data, output and weight dims (grouped: goihw).
struct ConvDims {
  dnnl::memory::dims src, dst, wts;
};
ConvDims DimsOf(const Shape& s) {
  const int64_t oh = (s.c + 2 * s.f - s.d) / s.e + 1;
  return {{1, s.a, s.c, s.c},
          {1, s.b, oh, oh},
          s.g == 1 ? dnnl::memory::dims{s.b, s.a, s.d, s.d}
                   : dnnl::memory::dims{s.g, s.b / s.g, s.a / s.g, s.d, s.d}};
}

// A timed call: what it needs is held by the function.
using Runner = std::function<void()>;

// oneDNN's call for the shape: the primitive alone, on its preferred layouts.
Runner OneDnn(const Shape& s) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  using tag = memory::format_tag;
  using dt = memory::data_type;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto filled = [&](const memory::desc& md, tag t) {
    memory m(memory::desc(md.dims(), dt::f32, t), eng);
    float* p = static_cast<float*>(m.get_data_handle());
    for (size_t i = 0; i < md.get_size() / 4; ++i) p[i] = u(rng);
    return m;
  };
  auto as = [&](memory src, const memory::desc& want) { return Reordered(src, want, eng, strm); };
  if (!s.conv) {
    memory::desc a({s.a, s.c}, dt::f32, tag::ab), b_any({s.c, s.b}, dt::f32, tag::any),
        c({s.a, s.b}, dt::f32, tag::ab);
    matmul::primitive_desc pd(matmul::desc(a, b_any, c), eng);  // oneDNN 2.x API
    memory A = filled(a, tag::ab), B = as(filled(b_any, tag::ab), pd.weights_desc()),
           C(pd.dst_desc(), eng);
    matmul prim(pd);
    return [=]() mutable {
      prim.execute(strm, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
      strm.wait();
    };
  }
  const auto [src, dst, wts] = DimsOf(s);
  memory::dims bias{s.b};
  memory::desc src_any(src, dt::f32, tag::any), w_any(wts, dt::f32, tag::any),
      dst_any(dst, dt::f32, tag::any), b_md(bias, dt::f32, tag::a);
  convolution_forward::primitive_desc pd(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                src_any, w_any, b_md, dst_any, {s.e, s.e}, {s.f, s.f}, {s.f, s.f}),
      eng);
  memory S = as(filled(memory::desc(src, dt::f32, tag::nchw), tag::nchw), pd.src_desc());
  memory W = as(filled(memory::desc(wts, dt::f32, s.g == 1 ? tag::oihw : tag::goihw),
                       s.g == 1 ? tag::oihw : tag::goihw),
                pd.weights_desc());
  memory B = filled(b_md, tag::a), D(pd.dst_desc(), eng);
  convolution_forward prim(pd);
  return [=]() mutable {
    prim.execute(strm,
                 {{DNNL_ARG_SRC, S}, {DNNL_ARG_WEIGHTS, W}, {DNNL_ARG_BIAS, B}, {DNNL_ARG_DST, D}});
    strm.wait();
  };
}

// oneDNN's call for a convolution shape in int8: u8 data (zero point 3, a
// runtime argument), s8 weights, s32 output, on its preferred layouts.
Runner OneDnnInt8Conv(const Shape& s) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  using tag = memory::format_tag;
  using dt = memory::data_type;
  std::mt19937 rng(7);
  auto filled = [&](const memory::dims& dims, dt type, tag t) {
    memory m(memory::desc(dims, type, t), eng);
    auto* p = static_cast<uint8_t*>(m.get_data_handle());
    for (size_t i = 0; i < m.get_desc().get_size(); ++i) p[i] = static_cast<uint8_t>(rng());
    return m;
  };
  auto as = [&](memory src, const memory::desc& want) { return Reordered(src, want, eng, strm); };
  const auto [src, dst, wts] = DimsOf(s);
  primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  convolution_forward::primitive_desc pd(
      convolution_forward::desc(
          prop_kind::forward_inference, algorithm::convolution_direct,
          memory::desc(src, dt::u8, tag::any), memory::desc(wts, dt::s8, tag::any),
          memory::desc(dst, dt::s32, tag::any), {s.e, s.e}, {s.f, s.f}, {s.f, s.f}),
      attr, eng);
  memory S = as(filled(src, dt::u8, tag::nchw), pd.src_desc());
  memory W = as(filled(wts, dt::s8, s.g == 1 ? tag::oihw : tag::goihw), pd.weights_desc());
  memory D(pd.dst_desc(), eng);
  memory Z({{1}, dt::s32, tag::x}, eng);
  *static_cast<int32_t*>(Z.get_data_handle()) = 3;
  convolution_forward prim(pd);
  return [=]() mutable {
    prim.execute(strm, {{DNNL_ARG_SRC, S},
                        {DNNL_ARG_WEIGHTS, W},
                        {DNNL_ARG_DST, D},
                        {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, Z}});
    strm.wait();
  };
}

// kiln's workload for a convolution shape in int8: the generic conv of a
// QDQ graph (uint8 x, int8 weights, x's zero point, int32 output), its
// data and output in channel blocks where the layout pass puts them
// (`blocked`: a conv writes blocks with K a multiple of 16 and reads them
// with C one; a depthwise one both or neither), else NCHW.
Workload KilnInt8Conv(const Shape& s, bool blocked) {
  const int64_t oh = (s.c + 2 * s.f - s.d) / s.e + 1, b = kiln::compiler::kChannelBlock;
  const bool dw = s.g > 1;
  const bool out_b = blocked && s.b % b == 0 && (!dw || s.a % b == 0);
  const bool in_b = blocked && s.a % b == 0 && (!dw || out_b);
  auto shape = [&](int64_t ch, int64_t hw, bool blocks) {
    return blocks ? kiln::StrCat("1,", ch / b, ",", hw, ",", hw, ",", b)
                  : kiln::StrCat("1,", ch, ",", hw, ",", hw);
  };
  auto parsed = Workload::Parse(kiln::StrCat(
      "conv(dilations=1,1;dtypes=2,3,2,6;group=", s.g, ";in0=", shape(s.a, s.c, in_b), ";in1=", s.b,
      ",", s.a / s.g, ",", s.d, ",", s.d, ";in2=1;", in_b ? "in_block=16;" : "",
      out_b ? "out_block=16;" : "", "pads=", s.f, ",", s.f, ";shape=", shape(s.b, oh, out_b),
      ";strides=", s.e, ",", s.e, ";transposed=0;zp=2)"));
  return parsed.ok() ? *parsed : Workload{};
}

#ifdef KILN_HAVE_OPENBLAS
// OpenBLAS's time for a MatMul shape (M x K times K x N, row-major): one
// cblas_sgemm call, or cblas_sgemv for a single row, as a framework calls it.
double OpenBlasSeconds(const Shape& s, int repeat) {
  const int M = static_cast<int>(s.a), N = static_cast<int>(s.b), K = static_cast<int>(s.c);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(K) * N),
      c(static_cast<size_t>(M) * N);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  return kiln::bench::MedianSeconds(
      [&] {
        if (M == 1) {
          cblas_sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, b.data(), N, a.data(), 1, 0.0f,
                      c.data(), 1);
        } else {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a.data(), K,
                      b.data(), N, 0.0f, c.data(), N);
        }
      },
      repeat, 2e-3);
}
#endif

// kiln's kernel call with `c`; empty when it does not build. With `err`,
// the first run's largest difference from the reference.
bool g_dump_ir = false;

Runner Kiln(const Workload& w, const Config& c, const Target& t, KernelBuffers& b, double* err) {
  auto k = kiln::compiler::BuildJit(w, c, t, {.dump_ir = g_dump_ir && err != nullptr});
  if (!k.ok() || !kiln::compiler::PackKernelInputs(**k, b).ok()) return {};
  if (err != nullptr) {
    (*k)->Run(b.args.data());
    std::vector<uint8_t> want(b.output.size());
    if (!kiln::compiler::RunReference(w, b.input_ptrs, want.data()).ok()) return {};
    *err = 0;
    for (int64_t i = 0; i < b.OutputSize(); ++i) {
      *err = std::max(
          *err, std::fabs(b.OutputAt(i) - kiln::ElementToDouble(b.output_dtype, want.data(), i)));
    }
  }
  std::shared_ptr<kiln::compiler::JitKernel> kernel = std::move(*k);
  return [kernel, &b] { kernel->Run(b.args.data()); };
}

// kiln's kernel time with `c` (median of `repeat`); negative when it does
// not build.
double KilnSeconds(const Workload& w, const Config& c, const Target& t, KernelBuffers& b,
                   int repeat) {
  Runner run = Kiln(w, c, t, b, nullptr);
  return run ? kiln::bench::MedianSeconds(run, repeat, 2e-3) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  int trials = 0, repeat = 15;
  std::string only;
  Config overrides;
  bool nchw = false, int8 = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    int64_t v = 0;
    if ((a == "--trials" || a == "--repeat") && i + 1 < argc && kiln::ParseInt64(argv[++i], &v) &&
        v >= 0) {
      (a == "--trials" ? trials : repeat) = static_cast<int>(v);
    } else if (a == "--dump-ir") {
      g_dump_ir = true;
    } else if (a == "--nchw") {
      nchw = true;
    } else if (a == "--int8") {
      int8 = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--set" && i + 1 < argc) {
      auto c = kiln::compiler::ParseConfig(argv[++i]);
      if (!c.ok()) {
        std::fprintf(stderr, "--set: %s\n", std::string(c.status().message()).c_str());
        return 2;
      }
      overrides = *c;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--trials N] [--repeat R] [--only SUBSTR] [--dump-ir] [--set "
                   "K=V;...] [--nchw] [--int8]\n",
                   argv[0]);
      return 2;
    }
  }
  Target target = Target::Host();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("# kernels_vs_onednn_bench\n\nhost: %s; target: %s\n",
              kiln::compiler::DescribeHostHardware().c_str(), target.Spec().c_str());
  std::printf("threads: kiln %d (KILN_NUM_THREADS), oneDNN %s (OMP_NUM_THREADS); oneDNN %d.%d\n",
              kiln_num_threads(), omp ? omp : "default", dnnl_version()->major,
              dnnl_version()->minor);
  std::printf(
      "baseline: oneDNN primitive on its own layouts (format any), weights reordered "
      "once; ratio = oneDNN time / kiln time\n");
#ifdef KILN_HAVE_OPENBLAS
  openblas_set_num_threads(omp != nullptr && std::atoi(omp) > 0 ? std::atoi(omp)
                                                                : kiln_num_threads());
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "MatMul also against OpenBLAS (cblas_sgemm, cblas_sgemv for one row): core %s (%s), %d "
      "threads; ratio = OpenBLAS time / kiln time\n",
      openblas_get_corename(),
      coretype ? "OPENBLAS_CORETYPE" : "detected; OPENBLAS_CORETYPE overrides",
      openblas_get_num_threads());
  constexpr bool kOpenBlas = true;
#else
  constexpr bool kOpenBlas = false;
#endif
  std::printf("kiln convolutions: %s\n\n",
              int8   ? (nchw ? "int8 (--int8 --nchw): u8 data with a zero point, s8 weights, s32 "
                               "output, NCHW; oneDNN u8s8s32 with the same runtime zero point"
                             : "int8 (--int8): u8 data with a zero point, s8 weights, s32 output, "
                               "in NCHW[16]c where the layout pass keeps them; oneDNN u8s8s32 "
                               "with the same runtime zero point")
              : nchw ? "NCHW data and output (--nchw)"
                     : "data and output in NCHW[16]c where the layout pass keeps them");
  std::printf("| shape | GFLOP | oneDNN ms | kiln default ms | ratio | max err |");
  if (kOpenBlas) std::printf(" OpenBLAS ms | ratio |");
  if (trials > 0) std::printf(" best of %d ms | ratio | tuning s | best config |", trials);
  std::printf("\n|---|---:|---:|---:|---:|---:|");
  if (kOpenBlas) std::printf("---:|---:|");
  if (trials > 0) std::printf("---:|---:|---:|---|");
  std::printf("\n");
  double log_default = 0, log_best = 0, worst_default = 1e9, worst_best = 1e9;
  int n = 0, n_blas = 0;
  double log_blas = 0, worst_blas = 1e9;
  for (const Shape& s : kShapes) {
    if (!only.empty() && s.name.find(only) == std::string::npos) continue;
    if (int8 && !s.conv) continue;
    Workload w = int8 ? KilnInt8Conv(s, !nchw) : KilnWorkload(s, !nchw);
    auto sig = w.Signature();
    auto def = kiln::compiler::DefaultConfig(w, target);
    if (def.ok()) {
      for (const auto& [k, v] : overrides) (*def)[k] = v;
    }
    if (!sig.ok() || !def.ok()) {
      std::printf("| %s | (error: %s) |\n", s.name.c_str(),
                  std::string((sig.ok() ? def.status() : sig.status()).message()).c_str());
      continue;
    }
    KernelBuffers b = kiln::compiler::MakeKernelBuffers(*sig, 42);
    // oneDNN and kiln's default interleaved: rounds of a few samples each,
    // the ratio the median of the rounds' (this VM's speed moves 2-3x
    // between spells of a second or so).
    double err = -1;
    Runner kiln_def = Kiln(w, *def, target, b, &err);
    if (!kiln_def) {
      std::printf("| %s | (kiln's default does not build) |\n", s.name.c_str());
      continue;
    }
    const auto paired =
        kiln::bench::PairedMedians(int8 ? OneDnnInt8Conv(s) : OneDnn(s), kiln_def, repeat);
    const double t_dnnl = paired.a, t_def = paired.b, r_def = paired.ratio;
    std::printf("| %s | %.3f | %.3f | %.3f | %.2f | %.1g |", s.name.c_str(), w.Flops() * 1e-9,
                t_dnnl * 1e3, t_def * 1e3, r_def, err);
    log_default += std::log(r_def);
    worst_default = std::min(worst_default, r_def);
#ifdef KILN_HAVE_OPENBLAS
    if (s.conv || int8) {
      std::printf(" - | - |");
    } else {
      const double t_blas = OpenBlasSeconds(s, repeat), r_blas = t_blas / t_def;
      std::printf(" %.3f | %.2f |", t_blas * 1e3, r_blas);
      log_blas += std::log(r_blas);
      worst_blas = std::min(worst_blas, r_blas);
      ++n_blas;
    }
#endif
    double best = t_def;
    if (trials > 0) {
      auto knobs = kiln::compiler::KnobsOf(w, target);
      std::mt19937 rng(11);
      Config best_c = *def;
      auto t0 = std::chrono::steady_clock::now();
      for (int tried = 0, attempt = 0; knobs.ok() && tried < trials && attempt < 100 * trials;
           ++attempt) {
        Config c = kiln::bench::RandomConfig(*knobs, rng);
        if (!kiln::compiler::ValidateConfig(w, target, c).ok()) continue;
        ++tried;
        double tc = KilnSeconds(w, c, target, b, 3);
        if (tc > 0 && tc < best) {
          best = tc;
          best_c = c;
        }
      }
      double tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, KilnSeconds(w, best_c, target, b, repeat));
      std::printf(" %.3f | %.2f | %.0f | %s |", best * 1e3, t_dnnl / best, tune_s,
                  kiln::compiler::CanonicalConfig(best_c).c_str());
    }
    log_best += std::log(t_dnnl / best);
    worst_best = std::min(worst_best, t_dnnl / best);
    ++n;
    std::printf("\n");
    std::fflush(stdout);
  }
  if (n == 0) return 1;
  std::printf("\ngeometric mean of oneDNN/kiln: default %.2f (worst %.2f)",
              std::exp(log_default / n), worst_default);
  if (trials > 0)
    std::printf(", best of %d %.2f (worst %.2f)", trials, std::exp(log_best / n), worst_best);
  std::printf(int8 ? "; target (issue 40) >= 1.0 at 1 thread\n"
                   : "; target >= 0.9, none below 0.7\n");
  if (n_blas > 0) {
    std::printf("geometric mean of OpenBLAS/kiln (MatMul, default configs): %.2f (worst %.2f)\n",
                std::exp(log_blas / n_blas), worst_blas);
  }
  return 0;
}
