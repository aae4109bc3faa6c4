#include "tuner/search.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kiln::tuner {
namespace {

ConfigSpace Space() { return ConfigSpace({{"a", {1, 2, 3, 4, 5}}, {"b", {1, 2, 3, 4}}}); }

std::set<std::string> Canonicals(const std::vector<compiler::Config>& configs) {
  std::set<std::string> out;
  for (const auto& c : configs) out.insert(compiler::CanonicalConfig(c));
  return out;
}

TEST(RandomSearchTest, NeverRepeatsAndExcludesMeasured) {
  RandomSearch search(Space(), 42);
  std::set<std::string> measured = {"a=1;b=1", "a=5;b=4", "a=3;b=2"};
  std::set<std::string> all;
  int total = 0;
  for (int round = 0; round < 10; ++round) {
    auto batch = search.Propose(3, measured);
    for (const auto& c : batch) {
      std::string canonical = compiler::CanonicalConfig(c);
      EXPECT_EQ(measured.count(canonical), 0u) << canonical;
      EXPECT_TRUE(all.insert(canonical).second) << "proposed twice: " << canonical;
      EXPECT_TRUE(Space().IndexOf(c).ok());
    }
    total += static_cast<int>(batch.size());
  }
  // 20 configs minus 3 measured: the space runs out at 17.
  EXPECT_EQ(total, 17);
  EXPECT_TRUE(search.Propose(5, measured).empty());
}

TEST(RandomSearchTest, ReturnsFewerWhenExhausted) {
  RandomSearch search(Space(), 1);
  auto batch = search.Propose(100, {});
  EXPECT_EQ(batch.size(), 20u);
  EXPECT_EQ(Canonicals(batch).size(), 20u);
}

TEST(RandomSearchTest, SameSeedSameProposals) {
  RandomSearch a(Space(), 9), b(Space(), 9), c(Space(), 10);
  auto pa = a.Propose(6, {});
  EXPECT_EQ(pa, b.Propose(6, {}));
  EXPECT_NE(pa, c.Propose(6, {}));
}

TEST(RandomSearchTest, HugeSpaceStillProposes) {
  std::vector<compiler::Knob> knobs;
  for (int i = 0; i < 30; ++i) knobs.push_back({"k" + std::to_string(i), {1, 2, 4, 8}});
  RandomSearch search(ConfigSpace(knobs), 3);
  auto batch = search.Propose(64, {});
  EXPECT_EQ(batch.size(), 64u);
  EXPECT_EQ(Canonicals(batch).size(), 64u);
}

TEST(GridSearchTest, IndexOrderSkippingMeasured) {
  GridSearch search(Space());
  auto first = search.Propose(3, {"a=2;b=1"});
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(compiler::CanonicalConfig(first[0]), "a=1;b=1");
  EXPECT_EQ(compiler::CanonicalConfig(first[1]), "a=3;b=1");
  EXPECT_EQ(compiler::CanonicalConfig(first[2]), "a=4;b=1");
  auto rest = search.Propose(100, {});
  EXPECT_EQ(rest.size(), 16u);
  EXPECT_EQ(compiler::CanonicalConfig(rest.back()), "a=5;b=4");
  EXPECT_TRUE(search.Propose(1, {}).empty());
}

TEST(MakeSearchTest, KnownAndUnknownNames) {
  auto random = MakeSearch(*ParseSearch("random"), Space(), {{}, {}, 1, {}});
  ASSERT_TRUE(random.ok());
  EXPECT_EQ((*random)->Propose(4, {}).size(), 4u);
  auto grid = MakeSearch(*ParseSearch("grid"), Space(), {{}, {}, 1, {}});
  ASSERT_TRUE(grid.ok());
  EXPECT_EQ(compiler::CanonicalConfig((*grid)->Propose(1, {})[0]), "a=1;b=1");
  EXPECT_EQ(ParseSearch("ga").value(), SearchKind::kGa);
  EXPECT_EQ(ParseSearch("xgb").value(), SearchKind::kXgb);
  auto bad = ParseSearch("annealing-ish");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("annealing-ish"), std::string::npos);
  EXPECT_NE(bad.status().message().find("random, grid, ga, xgb"), std::string::npos);
  // A value outside the enum (a cast from a stray number) makes no strategy.
  auto stray = MakeSearch(static_cast<SearchKind>(9), Space(), {{}, {}, 1, {}});
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
TEST(ConfigSetTest, RemembersCanonicalConfigs) {
  ConfigSet set{"a=1;b=2"};
  EXPECT_TRUE(set.contains("a=1;b=2"));
  EXPECT_FALSE(set.contains("a=2;b=1"));
  EXPECT_TRUE(set.insert("a=2;b=1"));
  EXPECT_FALSE(set.insert("a=2;b=1"));  // already there
  EXPECT_EQ(set.size(), 2u);
  ConfigSet from(std::set<std::string>{"x=1", "x=2", "x=3"});
  EXPECT_EQ(from.size(), 3u);
  EXPECT_EQ(from.count("x=2"), 1u);
}

}  // namespace kiln::tuner
