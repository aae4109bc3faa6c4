// In-process measurement of real workloads through the JIT.
#include "device_agent/measure.h"

#include <csignal>

#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::agent {
namespace {

using ::testing::HasSubstr;

compiler::Workload Relu() {
  compiler::Workload w;
  w.op = compiler::Op::kEltwise;
  w.ints["shape"] = {1, 8, 16, 16};
  w.ints["in_shape"] = {1, 8, 16, 16};
  w.epilogue.push_back({compiler::EpilogueKind::kRelu, {}});
  return w;
}

compiler::Workload Conv() {
  compiler::Workload w;
  w.op = compiler::Op::kConv2d;
  w.ints = {{"N", {1}},           {"C", {4}},         {"H", {10}},
            {"W", {10}},          {"K", {8}},         {"R", {3}},
            {"S", {3}},           {"stride", {1, 1}}, {"pad", {1, 1, 1, 1}},
            {"dilation", {1, 1}}, {"groups", {1}},    {"bias", {0}},
            {"OH", {10}},         {"OW", {10}}};
  w.epilogue.push_back({compiler::EpilogueKind::kRelu, {}});
  return w;
}

kiln::v1::Config DefaultConfigProto(const compiler::Workload& w) {
  absl::StatusOr<compiler::Config> c = compiler::DefaultConfig(w, compiler::Target::Host());
  EXPECT_TRUE(c.ok()) << c.status();
  kiln::v1::Config out;
  if (c.ok()) out.set_canonical(compiler::CanonicalConfig(*c));
  return out;
}

kiln::v1::TimingPolicy Quick(int repeat = 0) {
  kiln::v1::TimingPolicy p;
  p.set_repeat(repeat);
  p.set_min_repeat_ms(1);
  return p;
}

TEST(ResolveTiming, DefaultsForZeroFields) {
  ResolvedTiming t = ResolveTiming({});
  EXPECT_EQ(t.number, 0);
  EXPECT_EQ(t.repeat, 3);
  // The farm's defaults (compiler/measure.h), the tracker's as well.
  EXPECT_EQ(t.min_repeat_ms, 5);
  EXPECT_EQ(t.timeout_ms, 20000);
  EXPECT_EQ(t.timeout_ms, compiler::kDefaultCandidateTimeoutMs);
  kiln::v1::TimingPolicy p;
  p.set_number(5);
  p.set_repeat(2);
  p.set_timeout_ms(300);
  t = ResolveTiming(p);
  EXPECT_EQ(t.number, 5);
  EXPECT_EQ(t.repeat, 2);
  EXPECT_EQ(t.min_repeat_ms, 0);  // an explicit number is used as is
  EXPECT_EQ(t.timeout_ms, 300);
}

TEST(SignalName, NamesTheSignal) {
  EXPECT_EQ(SignalName(SIGSEGV), "SIGSEGV (Segmentation fault)");
  EXPECT_EQ(SignalName(SIGABRT), "SIGABRT (Aborted)");
}

TEST(Measure, EltwiseReluSucceedsWithPositiveCosts) {
  compiler::Workload w = Relu();
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), Quick(), compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  ASSERT_EQ(r.costs_s_size(), 3);
  for (double c : r.costs_s()) EXPECT_GT(c, 0);
  EXPECT_GT(r.build_s(), 0);
}

TEST(Measure, Conv2dSucceeds) {
  compiler::Workload w = Conv();
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), Quick(), compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  ASSERT_EQ(r.costs_s_size(), 3);
  for (double c : r.costs_s()) EXPECT_GT(c, 0);
}

TEST(Measure, RepeatFourGivesFourCosts) {
  compiler::Workload w = Relu();
  kiln::v1::TimingPolicy p;
  p.set_number(3);
  p.set_repeat(4);
  p.set_cooldown_ms(1);
  p.set_flush_cache(true);
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), p, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  EXPECT_EQ(r.costs_s_size(), 4);
  for (double c : r.costs_s()) EXPECT_GT(c, 0);
}

// Timed with the caches as the model leaves them, the conv's input is
// rewritten in place before every run and its weights and output evicted:
// the values stay what they were, so the output still matches the reference
// the hot measurement before it cached (from the same seeded inputs).
TEST(Measure, InTheModelsCachesTheInputsAreLeftAsTheyWere) {
  compiler::Workload w = Conv();
  kiln::v1::TimingPolicy hot = Quick();
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), hot, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  kiln::v1::TimingPolicy in_model = Quick();
  in_model.set_flush_cache(true);
  r = MeasureCandidate(w.Canonical(), DefaultConfigProto(w), in_model, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  EXPECT_EQ(r.costs_s_size(), 3);
  for (double c : r.costs_s()) EXPECT_GT(c, 0);
}

// A model that fits the last-level cache (as the agent reads its caches
// from sysfs) starts each run with the weights read back into it: the
// values stay as they were too.
TEST(Measure, WithAModelThatFitsTheLastLevelTheWeightsAreReadBack) {
  const compiler::CacheSizes& caches = compiler::HostCaches();
  if (caches.core_bytes <= 0 || caches.last_level_bytes <= caches.core_bytes * 2) {
    GTEST_SKIP() << "this host's caches are not in sysfs";
  }
  compiler::Workload w = Conv();
  kiln::v1::TimingPolicy p = Quick();
  p.set_flush_cache(true);
  p.set_model_bytes(caches.core_bytes * 2);
  ResolvedTiming t = ResolveTiming(p);
  EXPECT_EQ(t.model_bytes, caches.core_bytes * 2);
  EXPECT_EQ(compiler::CacheStateFor(t, caches), compiler::CacheState::kLastLevel);
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), p, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  EXPECT_EQ(r.costs_s_size(), 3);
}

// Where the weights start: hot without flush_cache or for a model within a
// core's cache, in the last level within 3/4 of it, else (or with the size
// or the caches unknown) from memory.
TEST(Measure, TheModelsBytesAgainstTheCachesSayWhereTheWeightsStart) {
  using compiler::CacheState;
  const compiler::CacheSizes caches{.core_bytes = 1 << 20, .last_level_bytes = 32 << 20};
  compiler::MeasurePolicy p;
  p.model_bytes = 14 << 20;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kHot);
  p.flush_cache = true;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kLastLevel);
  p.model_bytes = 24 << 20;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kLastLevel);
  p.model_bytes = (24 << 20) + 1;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kMemory);
  p.model_bytes = 1 << 20;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kHot);
  p.model_bytes = 0;
  EXPECT_EQ(compiler::CacheStateFor(p, caches), CacheState::kMemory);
  p.model_bytes = 14 << 20;
  EXPECT_EQ(compiler::CacheStateFor(p, compiler::CacheSizes{}), CacheState::kMemory);
}

TEST(Measure, ACandidateSlowerThanTheBoundIsTimedOnce) {
  compiler::Workload w = Conv();
  kiln::v1::TimingPolicy p = Quick();
  p.set_stop_above_s(1e-12);  // every run is slower
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), DefaultConfigProto(w), p, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  EXPECT_TRUE(r.cut_short());
  ASSERT_EQ(r.costs_s_size(), 1);
  EXPECT_GT(r.costs_s(0), 1e-12);
  p.set_stop_above_s(10);  // no run is
  r = MeasureCandidate(w.Canonical(), DefaultConfigProto(w), p, compiler::Target::Host());
  ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
  EXPECT_FALSE(r.cut_short());
  EXPECT_EQ(r.costs_s_size(), 3);
}

// The reference output is cached per workload: alternating workloads are
// each verified against their own.
TEST(Measure, AlternatingWorkloadsAreVerifiedAgainstTheirOwnReference) {
  for (const compiler::Workload& w : {Conv(), Relu(), Conv(), Relu()}) {
    kiln::v1::MeasureResult r =
        MeasureCandidate(w.Canonical(), DefaultConfigProto(w), Quick(1), compiler::Target::Host());
    EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << w.op << r.error_message();
  }
}

// Kernels built ahead (on every core) measure as the ones built in place;
// a config that does not parse is left to MeasureCandidate to report.
TEST(Measure, PrebuiltCandidatesMeasureLikeTheOthers) {
  compiler::Workload w = Conv();
  kiln::v1::Config bad;
  bad.set_canonical("not a config");
  std::vector<kiln::v1::Config> configs = {DefaultConfigProto(w), bad, DefaultConfigProto(w)};
  std::vector<compiler::Prebuilt> built =
      PrebuildCandidates(w.Canonical(), configs, compiler::Target::Host());
  ASSERT_EQ(built.size(), 3u);
  EXPECT_NE(built[0].kernel, nullptr);
  EXPECT_EQ(built[1].kernel, nullptr);
  EXPECT_GT(built[2].build_s, 0);
  for (int i : {0, 2}) {
    kiln::v1::MeasureResult r = MeasureCandidate(w.Canonical(), configs[i], Quick(),
                                                 compiler::Target::Host(), 42, &built[i]);
    ASSERT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_NONE) << r.error_message();
    EXPECT_EQ(r.costs_s_size(), 3);
    EXPECT_GE(r.build_s(), built[i].build_s);
    EXPECT_EQ(built[i].kernel, nullptr);  // taken by the measurement
  }
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), bad, Quick(), compiler::Target::Host(), 42, &built[1]);
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG);
}

TEST(Measure, InvalidConfig) {
  compiler::Workload w = Relu();
  kiln::v1::Config config;
  config.mutable_knobs()->insert({"no_such_knob", 3});
  kiln::v1::MeasureResult r =
      MeasureCandidate(w.Canonical(), config, Quick(), compiler::Target::Host());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG);
  EXPECT_FALSE(r.error_message().empty());
  EXPECT_EQ(r.costs_s_size(), 0);
}

TEST(Measure, UnparsableConfigIsInvalid) {
  kiln::v1::Config config;
  config.set_canonical("tile=;;=");
  kiln::v1::MeasureResult r =
      MeasureCandidate(Relu().Canonical(), config, Quick(), compiler::Target::Host());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_INVALID_CONFIG);
}

TEST(Measure, BadWorkloadIsACompileError) {
  kiln::v1::MeasureResult r =
      MeasureCandidate("nonsense((", kiln::v1::Config(), Quick(), compiler::Target::Host());
  EXPECT_EQ(r.error_kind(), kiln::v1::MEASURE_ERROR_KIND_COMPILE);
  EXPECT_THAT(r.error_message(), HasSubstr("bad workload"));
}

}  // namespace
}  // namespace kiln::agent
