#pragma once
// The FMA peak of a CPU core, measured: independent vector FMA chains (more
// than FMA latency x FMA ports) at the host's widest vector; and its int8
// dot-product peak (Int8Macs) alike. A measuring
// probe, not a kernel: the agent reports its board's peak (x its threads)
// so that `kiln job` can show a task's GFLOP/s against it, and
// bench/model_profile_bench draws its roofline with it.

#include <time.h>

#include <cstdint>
#include <numeric>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#endif

namespace kiln::fma_peak {

inline constexpr int kChains = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline float Chains512(int64_t iters) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) inline float Chains256(int64_t iters) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  }
  float out[8];
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  _mm256_storeu_ps(out, s);
  return std::accumulate(out, out + 8, 0.0f);
}
// The int8 dot-product peak: independent vpdpbusd chains (4 u8 x s8
// products added to each int32 lane per instruction).
__attribute__((target("avx512f,avx512vnni"))) inline float DotChains512(int64_t iters) {
  __m512i acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_epi32(j);
  const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x01010101);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  }
  __m512i s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_epi32(s, acc[j]);
  return static_cast<float>(_mm512_reduce_add_epi32(s));
}
__attribute__((target("avx2,avxvnni"))) inline float DotChains256(int64_t iters) {
  __m256i acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_epi32(j);
  const __m256i a = _mm256_set1_epi32(0x01020304), b = _mm256_set1_epi32(0x01010101);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_dpbusd_avx_epi32(acc[j], a, b);
  }
  int out[8];
  __m256i s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_epi32(s, acc[j]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), s);
  return static_cast<float>(std::accumulate(out, out + 8, 0));
}
#elif defined(__aarch64__)
// NEON: 128-bit fused multiply-adds, which every AArch64 core has.
inline float ChainsNeon(int64_t iters) {
  float32x4_t acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = vdupq_n_f32(static_cast<float>(j));
  const float32x4_t m = vdupq_n_f32(0.999999f), a = vdupq_n_f32(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = vfmaq_f32(a, acc[j], m);
  }
  float32x4_t s = acc[0];
  for (int j = 1; j < kChains; ++j) s = vaddq_f32(s, acc[j]);
  return vaddvq_f32(s);
}
// The dot-product extension (sdot: 4 s8 x s8 products added to each int32
// lane), where the CPU has it (HWCAP_ASIMDDP).
__attribute__((target("+dotprod"))) inline float DotChainsNeon(int64_t iters) {
  int32x4_t acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = vdupq_n_s32(j);
  const int8x16_t a = vdupq_n_s8(3), b = vdupq_n_s8(1);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) acc[j] = vdotq_s32(acc[j], a, b);
  }
  int32x4_t s = acc[0];
  for (int j = 1; j < kChains; ++j) s = vaddq_s32(s, acc[j]);
  return static_cast<float>(vaddvq_s32(s));
}
inline bool HasDotProd() {
#ifdef HWCAP_ASIMDDP
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}
#endif

// 8-bit multiply-adds of one run of `iters` iterations of the host's widest
// integer dot product (AVX512-VNNI, AVX-VNNI, AArch64's sdot; 0 when the host has none this
// probe knows: the int8 kernels then compute with widening multiplies, at
// the FMA peak's rate or below).
inline double Int8Macs(int64_t iters, float* sink) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512vnni")) {
    *sink += DotChains512(iters);
    return 64.0 * kChains * static_cast<double>(iters);
  }
  if (__builtin_cpu_supports("avxvnni")) {
    *sink += DotChains256(iters);
    return 32.0 * kChains * static_cast<double>(iters);
  }
#elif defined(__aarch64__)
  if (HasDotProd()) {
    *sink += DotChainsNeon(iters);
    return 16.0 * kChains * static_cast<double>(iters);
  }
#endif
  (void)iters;
  (void)sink;
  return 0;
}

// FLOPs of one run of `iters` iterations at the host's widest vector (0
// when the host has no FMA this probe knows); the result goes to *sink so
// that the loop is not optimized away.
inline double Flops(int64_t iters, float* sink) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    *sink += Chains512(iters);
    return 2.0 * 16 * kChains * static_cast<double>(iters);
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    *sink += Chains256(iters);
    return 2.0 * 8 * kChains * static_cast<double>(iters);
  }
#elif defined(__aarch64__)
  *sink += ChainsNeon(iters);
  return 2.0 * 4 * kChains * static_cast<double>(iters);
#endif
  (void)iters;
  (void)sink;
  return 0;
}

// The probe's rate on the calling thread, in GFLOP/s of the thread's own CPU
// time (0 when the host has no FMA this probe knows). CPU time, not wall
// time: a thread the OS preempts for another process does not count the
// wait, while two threads sharing one core's FMA units (SMT siblings) each
// see half of it, which is what the core can do.
inline double GflopsOnThisThread(int64_t iters, float* sink) {
  timespec a{}, b{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  const double flops = Flops(iters, sink);
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  const double s =
      static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
  return s > 0 ? flops / s * 1e-9 : 0;
}

}  // namespace kiln::fma_peak
