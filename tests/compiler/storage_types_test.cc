// Storage-only types: the IR's bfloat16/float8 decode and encode (an eltwise
// cast kernel through BuildJit, and the interpreter) agree bit for bit with
// base/dtype.h's conversions, which hold the formats' defining values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/workload.h"

namespace kiln::compiler {
namespace {

std::vector<uint8_t> RunCast(DType from, DType to, bool saturate, const std::vector<uint8_t>& in,
                             int64_t n, bool reference) {
  Workload w;
  w.op = Op::kEltwise;
  w.ints = {{"shape", {n}}, {"in_shape", {n}}};
  EpilogueOp e;
  e.kind = EpilogueKind::kUnary;
  e.fn = ElementFn::kCast;
  e.params = {static_cast<double>(OnnxCode(to)), saturate ? 1.0 : 0.0,
              static_cast<double>(OnnxCode(from))};
  w.epilogue = {e};
  w.SetDtypes({from, to});
  std::vector<uint8_t> out(static_cast<size_t>(n * DTypeBytes(to)), 0xA5);
  std::vector<const void*> ins = {in.data()};
  if (reference) {
    EXPECT_TRUE(RunReference(w, ins, out.data()).ok());
    return out;
  }
  Target host = Target::Host();
  auto config = DefaultConfig(w, host);
  EXPECT_TRUE(config.ok()) << config.status();
  auto kernel = BuildJit(w, *config, host);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return out;
  EXPECT_TRUE((*kernel)->packed_inputs().empty());
  std::vector<void*> args = {const_cast<void*>(ins[0]), out.data()};
  EXPECT_EQ((*kernel)->Run(args.data()), 0);
  return out;
}

constexpr DType kStorageFloats[] = {DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ,
                                    DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ};

float DecodeCode(DType t, uint32_t c) {
  return t == DType::kBFloat16 ? BFloat16ToFloat(static_cast<uint16_t>(c))
                               : Float8ToFloat(t, static_cast<uint8_t>(c));
}

TEST(StorageTypes, Float8FormatsHoldTheirDefiningValues) {
  // Largest finite value and smallest subnormal of each format (OCP / ONNX).
  struct Want {
    DType t;
    float max, min_sub;
  };
  for (Want w :
       {Want{DType::kFloat8E4M3FN, 448, 0x1p-9f}, Want{DType::kFloat8E4M3FNUZ, 240, 0x1p-10f},
        Want{DType::kFloat8E5M2, 57344, 0x1p-16f}, Want{DType::kFloat8E5M2FNUZ, 57344, 0x1p-17f}}) {
    float max = 0, min_sub = INFINITY;
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      float v = Float8ToFloat(w.t, static_cast<uint8_t>(c));
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      if (std::isfinite(v)) max = std::max(max, v);
      if (v > 0) min_sub = std::min(min_sub, v);
      // Every code but NaNs round-trips through float32 (infinities only
      // when not saturating).
      EXPECT_EQ(FloatToFloat8(w.t, v, !std::isinf(v)), c) << DTypeName(w.t) << " code " << c;
    }
    EXPECT_EQ(max, w.max) << DTypeName(w.t);
    EXPECT_EQ(min_sub, w.min_sub) << DTypeName(w.t);
    const bool fnuz = w.t == DType::kFloat8E4M3FNUZ || w.t == DType::kFloat8E5M2FNUZ;
    EXPECT_EQ(nans, fnuz ? 1 : w.t == DType::kFloat8E5M2 ? 6 : 2) << DTypeName(w.t);
  }
  // Ties go to the even code; past the largest value: saturate, inf or NaN.
  EXPECT_EQ(Float8ToFloat(DType::kFloat8E4M3FN, FloatToFloat8(DType::kFloat8E4M3FN, 1.0625f, true)),
            1.0f);
  EXPECT_EQ(Float8ToFloat(DType::kFloat8E4M3FN, FloatToFloat8(DType::kFloat8E4M3FN, 1.1875f, true)),
            1.25f);
  EXPECT_EQ(FloatToFloat8(DType::kFloat8E4M3FN, 1e6f, true), 0x7e);
  EXPECT_EQ(FloatToFloat8(DType::kFloat8E4M3FN, -1e6f, false), 0xff);
  EXPECT_EQ(FloatToFloat8(DType::kFloat8E5M2, 1e6f, false), 0x7c);
  EXPECT_EQ(FloatToFloat8(DType::kFloat8E5M2FNUZ, -INFINITY, false), 0x80);
  EXPECT_EQ(FloatToFloat8(DType::kFloat8E4M3FNUZ, -1e-9f, true), 0);  // no negative zero
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3f80);                 // tie to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
}

TEST(StorageTypes, GeneratedDecodeMatchesEveryCode) {
  for (DType t : kStorageFloats) {
    const int64_t n = t == DType::kBFloat16 ? 65536 : 256;
    std::vector<uint8_t> codes(static_cast<size_t>(n * DTypeBytes(t)));
    for (int64_t c = 0; c < n; ++c) std::memcpy(&codes[c * DTypeBytes(t)], &c, DTypeBytes(t));
    for (bool reference : {false, true}) {
      std::vector<uint8_t> out = RunCast(t, DType::kFloat32, true, codes, n, reference);
      for (int64_t c = 0; c < n; ++c) {
        float got, want = DecodeCode(t, static_cast<uint32_t>(c));
        std::memcpy(&got, &out[c * 4], 4);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << DTypeName(t) << " code " << c;
        } else {
          EXPECT_EQ(FloatToBits(got), FloatToBits(want))
              << DTypeName(t) << " code " << c << (reference ? " (interpreter)" : " (jit)");
        }
      }
    }
  }
}

TEST(StorageTypes, GeneratedEncodeMatchesOnEveryBoundary) {
  for (DType t : kStorageFloats) {
    // Every value, the midpoints between neighbours (ties) and a float32 ulp
    // either side, both signs; and the specials.
    std::vector<float> xs = {0.0f,   -0.0f, INFINITY, -INFINITY, NAN,    1e-7f,
                             -1e-7f, 1e6f,  -1e6f,    1e-40f,    3.4e38f};
    std::vector<float> finite;
    for (uint32_t c = 0; c < (t == DType::kBFloat16 ? 0x7f80u : 0x80u); ++c) {
      float v = DecodeCode(t, c);
      if (std::isfinite(v)) finite.push_back(v);
    }
    std::sort(finite.begin(), finite.end());
    for (size_t k = 0; k < finite.size(); ++k) {
      float v = finite[k];
      float mid = k + 1 < finite.size() ? (v + finite[k + 1]) / 2 : v * 1.0625f;
      for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
    }
    const int64_t n = static_cast<int64_t>(xs.size());
    std::vector<uint8_t> in(xs.size() * 4);
    std::memcpy(in.data(), xs.data(), in.size());
    for (bool saturate : {true, false}) {
      for (bool reference : {false, true}) {
        std::vector<uint8_t> out = RunCast(DType::kFloat32, t, saturate, in, n, reference);
        for (int64_t k = 0; k < n; ++k) {
          uint32_t got = 0, want = t == DType::kBFloat16 ? FloatToBFloat16(xs[k])
                                                         : FloatToFloat8(t, xs[k], saturate);
          std::memcpy(&got, &out[k * DTypeBytes(t)], DTypeBytes(t));
          ASSERT_EQ(got, want) << DTypeName(t) << " of " << xs[k] << " saturate " << saturate
                               << (reference ? " (interpreter)" : " (jit)");
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
