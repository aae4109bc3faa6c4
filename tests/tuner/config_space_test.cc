#include "tuner/config_space.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

namespace kiln::tuner {
namespace {

ConfigSpace SmallSpace() {
  return ConfigSpace({{"tile_x", {1, 2, 4, 8}}, {"tile_y", {1, 16, 32}}, {"unroll", {0, 1}}});
}

TEST(ConfigSpaceTest, SizeIsProductOfChoices) {
  EXPECT_EQ(SmallSpace().Size(), 24u);
  EXPECT_EQ(ConfigSpace({}).Size(), 1u);
  EXPECT_TRUE(ConfigSpace({}).ConfigAt(0).empty());
}

TEST(ConfigSpaceTest, MixedRadixFirstKnobFastest) {
  ConfigSpace space = SmallSpace();
  EXPECT_EQ(space.ConfigAt(0), (compiler::Config{{"tile_x", 1}, {"tile_y", 1}, {"unroll", 0}}));
  EXPECT_EQ(space.ConfigAt(1), (compiler::Config{{"tile_x", 2}, {"tile_y", 1}, {"unroll", 0}}));
  EXPECT_EQ(space.ConfigAt(4), (compiler::Config{{"tile_x", 1}, {"tile_y", 16}, {"unroll", 0}}));
  EXPECT_EQ(space.ConfigAt(23), (compiler::Config{{"tile_x", 8}, {"tile_y", 32}, {"unroll", 1}}));
}

TEST(ConfigSpaceTest, IndexRoundTrip) {
  ConfigSpace space = SmallSpace();
  std::set<std::string> seen;
  for (uint64_t i = 0; i < space.Size(); ++i) {
    compiler::Config c = space.ConfigAt(i);
    auto index = space.IndexOf(c);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(*index, i);
    seen.insert(compiler::CanonicalConfig(c));
  }
  EXPECT_EQ(seen.size(), 24u);
}

TEST(ConfigSpaceTest, IndexOfRejectsForeignConfigs) {
  ConfigSpace space = SmallSpace();
  auto bad_value = space.IndexOf({{"tile_x", 3}, {"tile_y", 1}, {"unroll", 0}});
  EXPECT_EQ(bad_value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_value.status().message().find("tile_x"), std::string::npos);
  auto missing = space.IndexOf({{"tile_x", 1}, {"unroll", 0}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  auto extra = space.IndexOf({{"tile_x", 1}, {"tile_y", 1}, {"unroll", 0}, {"zz", 1}});
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigSpaceTest, SizeSaturates) {
  std::vector<compiler::Knob> knobs;
  for (int i = 0; i < 21; ++i)
    knobs.push_back({"k" + std::to_string(i), {1, 2, 3, 4, 5, 6, 7, 8, 9}});
  ConfigSpace space(knobs);
  EXPECT_EQ(space.Size(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(space.Saturated());
  // Indexing still round-trips for reachable configs.
  compiler::Config c = space.ConfigAt(123456789012345ull);
  EXPECT_EQ(*space.IndexOf(c), 123456789012345ull);
  // The last knob's biggest choice lies beyond 2^64.
  c["k20"] = 9;
  EXPECT_FALSE(space.IndexOf(c).ok());
}

TEST(ConfigSpaceTest, SampleIsValidAndSeeded) {
  ConfigSpace space = SmallSpace();
  std::mt19937_64 a(7), b(7);
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    compiler::Config ca = space.Sample(a);
    EXPECT_EQ(ca, space.Sample(b));
    EXPECT_TRUE(space.IndexOf(ca).ok());
    seen.insert(compiler::CanonicalConfig(ca));
  }
  // 200 uniform draws from 24 configs miss one with negligible probability.
  EXPECT_EQ(seen.size(), 24u);
}

}  // namespace
}  // namespace kiln::tuner
