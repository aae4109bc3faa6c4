#include "tuner/features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "compiler/kernel.h"
#include "tuner/config_space.h"
#include "tuner/feature_cache.h"

namespace kiln::tuner {
namespace {

using namespace ir;

float L(double x) { return static_cast<float>(std::log2(1.0 + x)); }

// C[i*64 + j] += A[i*32 + k] * B[k*64 + j] under
//   parallel i < 16, serial k < 32, vectorized j < 64.
PrimFunc Matmul() {
  Buffer a("A", DataType::Float32(), {IntImm(16 * 32)});
  Buffer b("B", DataType::Float32(), {IntImm(32 * 64)});
  Buffer c("C", DataType::Float32(), {IntImm(16 * 64)});
  Var i("i"), k("k"), j("j");
  Expr ci = i * IntImm(64) + j;
  Stmt store =
      Store(c, Load(c, {ci}) + Load(a, {i * IntImm(32) + k}) * Load(b, {k * IntImm(64) + j}), {ci});
  Stmt nest = For(i, IntImm(0), IntImm(16), ForKind::kParallel,
                  For(k, IntImm(0), IntImm(32), ForKind::kSerial,
                      For(j, IntImm(0), IntImm(64), ForKind::kVectorized, store)));
  return PrimFunc{"mm", {a, b, c}, nest};
}

TEST(FeaturesTest, KnownLoopNest) {
  std::vector<float> f = FeaturesOf(Matmul(), {{"tile", 8}, {"unroll", 0}});
  ASSERT_EQ(f.size(), static_cast<size_t>(kNumFeatures));
  const double iters = 16 * 32 * 64;
  EXPECT_FLOAT_EQ(f[0], L(2 * iters));      // an add and a multiply per iteration
  EXPECT_FLOAT_EQ(f[1], L(4 * iters * 3));  // C, A, B: 4 bytes each per iteration
  EXPECT_FLOAT_EQ(f[2], L(2.0 / 12.0));     // ops per byte
  EXPECT_FLOAT_EQ(f[3], L(16));             // the parallel extent
  EXPECT_FLOAT_EQ(f[4], 0.0f);              // no scratch
  EXPECT_FLOAT_EQ(f[5], 1.0f);              // one store
  EXPECT_FLOAT_EQ(f[6], L(64));             // vector width
  EXPECT_FLOAT_EQ(f[7], 0.0f);              // nothing unrolled
  // Loops fill the innermost three slots: i (parallel), k, j (vectorized).
  auto loop = [&](int slot, int field) { return f[kLoopOffset + slot * kLoopFeatures + field]; };
  for (int s = 0; s < kLoopLevels - 3; ++s) {
    for (int x = 0; x < kLoopFeatures; ++x) EXPECT_EQ(loop(s, x), 0.0f) << s << "," << x;
  }
  EXPECT_FLOAT_EQ(loop(5, 0), L(16));
  EXPECT_EQ(loop(5, 2), 1.0f);
  EXPECT_FLOAT_EQ(loop(6, 0), L(32));
  EXPECT_EQ(loop(6, 1), 1.0f);
  EXPECT_FLOAT_EQ(loop(7, 0), L(64));
  EXPECT_EQ(loop(7, 3), 1.0f);
  // Accesses: C (the store), then A and B in order of appearance.
  auto acc = [&](int a, int field) { return f[kAccessOffset + a * kAccessFeatures + field]; };
  auto bytes = [&](int a, int level) { return acc(a, 2 + level); };
  auto reuse = [&](int a, int level) { return acc(a, 2 + kLoopLevels + level); };
  // Strides along j (innermost and vectorized): C 1, A 0, B 1.
  EXPECT_FLOAT_EQ(acc(0, 0), L(1));
  EXPECT_FLOAT_EQ(acc(0, 1), L(1));
  EXPECT_FLOAT_EQ(acc(1, 0), 0.0f);
  EXPECT_FLOAT_EQ(acc(2, 0), L(1));
  // C inside j: 64 elements; inside k: still 64 (reused 32 times); inside i: 1024.
  EXPECT_FLOAT_EQ(bytes(0, 7), L(64 * 4));
  EXPECT_FLOAT_EQ(reuse(0, 7), L(1));
  EXPECT_FLOAT_EQ(bytes(0, 6), L(64 * 4));
  EXPECT_FLOAT_EQ(reuse(0, 6), L(32));
  EXPECT_FLOAT_EQ(bytes(0, 5), L(1024 * 4));
  EXPECT_FLOAT_EQ(reuse(0, 5), L(32));
  // A inside j: one element, reused 64 times; inside k: 32 elements.
  EXPECT_FLOAT_EQ(bytes(1, 7), L(4));
  EXPECT_FLOAT_EQ(reuse(1, 7), L(64));
  EXPECT_FLOAT_EQ(bytes(1, 6), L(32 * 4));
  // B inside i: all 2048 elements, each read 16 times.
  EXPECT_FLOAT_EQ(bytes(2, 5), L(2048 * 4));
  EXPECT_FLOAT_EQ(reuse(2, 5), L(16));
  // The fourth access slot is empty; unused levels stay zero.
  for (int x = 0; x < kAccessFeatures; ++x) EXPECT_EQ(acc(3, x), 0.0f);
  EXPECT_EQ(bytes(0, 4), 0.0f);
  // Knobs in name order.
  EXPECT_FLOAT_EQ(f[kKnobOffset], L(8));
  EXPECT_FLOAT_EQ(f[kKnobOffset + 1], 0.0f);
}

compiler::Workload Conv() {
  compiler::Workload w;
  w.op = compiler::Op::kConv2d;
  w.ints = {{"N", {1}},           {"C", {64}},        {"H", {28}},
            {"W", {28}},          {"K", {64}},        {"R", {3}},
            {"S", {3}},           {"stride", {1, 1}}, {"pad", {1, 1, 1, 1}},
            {"dilation", {1, 1}}, {"groups", {1}},    {"bias", {1}},
            {"OH", {28}},         {"OW", {28}}};
  return w;
}

TEST(FeaturesTest, ConfigsOfOneTemplateGiveDifferentFeatures) {
  compiler::Target t = compiler::Target::Host();
  compiler::Workload w = Conv();
  auto d = compiler::DefaultConfig(w, t);
  ASSERT_TRUE(d.ok()) << d.status();
  (*d)["layout"] = 1;  // NCHWc (the default, Winograd, does fewer flops)
  ASSERT_TRUE(compiler::ValidateConfig(w, t, *d).ok());
  auto f1 = ExtractFeatures(w, t, *d);
  ASSERT_TRUE(f1.ok()) << f1.status();
  EXPECT_GT((*f1)[0], L(2.0 * 64 * 64 * 9 * 28 * 28) - 0.5f);  // at least the conv's flops
  compiler::Config c = *d;
  c["reg_n"] = c["reg_n"] == 4 ? 7 : 4;
  auto f2 = ExtractFeatures(w, t, c);
  ASSERT_TRUE(f2.ok()) << f2.status();
  EXPECT_NE(*f1, *f2);
}

// An int8 matmul (integer dot products, 4 byte multiply-adds a lane) counts
// its multiply-adds as the float kernels count theirs, and its byte-wide
// loads by their width.
TEST(FeaturesTest, Int8MatMulCountsItsDotProducts) {
  compiler::Target t = compiler::Target::Host();
  auto w = compiler::Workload::Parse(
      "matmul(dtypes=2,3,2,6;in0=64,256;in1=256,128;in2=1;shape=64,128;zp=2)");
  ASSERT_TRUE(w.ok()) << w.status();
  auto f = ExtractFeatures(*w, t, *compiler::DefaultConfig(*w, t));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_GT((*f)[0], L(2.0 * 64 * 128 * 256) - 0.5f);
  // Without VNNI (AVX2 code, a Zen 2 EPYC: pairs of 16-bit halves, dot2) the
  // same count, on any host (an AVX2 host's own kernels counted none).
  auto avx2 = compiler::Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver2");
  ASSERT_TRUE(avx2.ok());
  auto h = ExtractFeatures(*w, *avx2, *compiler::DefaultConfig(*w, *avx2));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_GT((*h)[0], L(2.0 * 64 * 128 * 256) - 0.5f);
  // As AMX tiles (a Sapphire Rapids target, on any host): the tensorized
  // boxes count their products too.
  auto spr = compiler::Target::Parse(
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=sapphirerapids -mattr=+amx-tile,+amx-int8");
  ASSERT_TRUE(spr.ok());
  compiler::Config amx = *compiler::DefaultConfig(*w, *spr);
  ASSERT_EQ(amx.at("amx"), 1);
  auto g = ExtractFeatures(*w, *spr, amx);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_NEAR((*g)[0], L(2.0 * 64 * 128 * 256), 0.5f);
}

TEST(FeaturesTest, InvalidConfigIsAnError) {
  compiler::Target t = compiler::Target::Host();
  compiler::Workload w = Conv();
  auto d = compiler::DefaultConfig(w, t);
  ASSERT_TRUE(d.ok());
  compiler::Config c = *d;
  c["reg_n"] = 1000;
  auto f = ExtractFeatures(w, t, c);
  EXPECT_FALSE(f.ok());
}

TEST(FeaturesTest, GetManyOnThreadsGivesWhatGetGivesAlone) {
  compiler::Target t = compiler::Target::Host();
  compiler::Workload w = Conv();
  ConfigSpace space(*compiler::KnobsOf(w, t));
  std::mt19937_64 rng(3);
  std::vector<compiler::Config> configs;
  for (int i = 0; i < 64; ++i) configs.push_back(space.Sample(rng));
  configs.push_back(configs.front());  // a duplicate
  FeatureCache serial(w, t), parallel(w, t);
  const auto many = parallel.GetMany(configs, 4);
  ASSERT_EQ(many.size(), configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    const auto& a = serial.Get(c);
    const auto& b = *many[i];
    ASSERT_EQ(a.has_value(), b.has_value()) << compiler::CanonicalConfig(c);
    if (!a) continue;
    EXPECT_EQ(a->features, b->features);
    EXPECT_EQ(a->kernel_hash, b->kernel_hash);
  }
}

TEST(FeaturesTest, KnobsTheLayoutDoesNotReadGiveTheSameKernel) {
  compiler::Target t = compiler::Target::Host();
  compiler::Workload w = Conv();
  auto knobs = compiler::KnobsOf(w, t);
  ASSERT_TRUE(knobs.ok());
  auto d = compiler::DefaultConfig(w, t);
  ASSERT_TRUE(d.ok());
  compiler::Config nchwc = *d;
  nchwc["layout"] = 1;
  ASSERT_TRUE(compiler::ValidateConfig(w, t, nchwc).ok());
  // A direct-layout knob under NCHWc is not read: normalized away, one
  // kernel; an NCHWc knob is read: kept.
  compiler::Config other = nchwc;
  auto tile_ow = std::find_if(knobs->begin(), knobs->end(),
                              [](const compiler::Knob& k) { return k.name == "tile_ow"; });
  ASSERT_NE(tile_ow, knobs->end());
  ASSERT_GT(tile_ow->choices.size(), 1u);
  other["tile_ow"] =
      other["tile_ow"] == tile_ow->choices[0] ? tile_ow->choices[1] : tile_ow->choices[0];
  ASSERT_TRUE(compiler::ValidateConfig(w, t, other).ok());
  EXPECT_EQ(compiler::NormalizeConfig(nchwc, *knobs), compiler::NormalizeConfig(other, *knobs));
  EXPECT_EQ(compiler::NormalizeConfig(other, *knobs).at("tile_ow"), tile_ow->choices[0]);
  EXPECT_EQ(compiler::NormalizeConfig(other, *knobs).at("reg_n"), nchwc.at("reg_n"));
  FeatureCache cache(w, t);
  const auto& a = cache.Get(nchwc);
  const auto& b = cache.Get(other);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->kernel_hash, b->kernel_hash);
  EXPECT_EQ(a->features, b->features);
  // A config the template rejects stays rejected, whatever its unread knobs.
  compiler::Config bad = nchwc;
  bad["layout"] = 4;
  bad["par_rows"] = 1;  // an NCHWc knob that other layouts require at 0
  ASSERT_FALSE(compiler::ValidateConfig(w, t, bad).ok());
  EXPECT_FALSE(cache.Get(bad).has_value());
}

}  // namespace
}  // namespace kiln::tuner
