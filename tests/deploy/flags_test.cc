#include "base/flags.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(Flags, ParsesValueAndBoolFlags) {
  absl::StatusOr<ParsedFlags> a =
      ParseFlags({"model.onnx", "--tracker", "h:1", "--key=cpu", "--wait"}, {"--tracker", "--key"},
                 {"--wait"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->positional, std::vector<std::string>{"model.onnx"});
  EXPECT_EQ(a->Get("--tracker"), "h:1");
  EXPECT_EQ(a->Get("--key"), "cpu");
  EXPECT_EQ(a->Get("--missing", "fallback"), "fallback");
  EXPECT_TRUE(a->Has("--wait"));
  EXPECT_FALSE(a->Has("--missing"));
}

TEST(Flags, RepeatedValueFlagsKeepEveryValue) {
  absl::StatusOr<ParsedFlags> a =
      ParseFlags({"--input", "a=1.npy", "--input=b=2.pb", "--", "--not-a-flag"}, {"--input"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->All("--input"), (std::vector<std::string>{"a=1.npy", "b=2.pb"}));
  EXPECT_EQ(a->Get("--input"), "b=2.pb");
  EXPECT_EQ(a->positional, std::vector<std::string>{"--not-a-flag"});
  EXPECT_TRUE(a->All("--other").empty());
}

TEST(Flags, RejectsUnknownFlagMissingValueAndValuedBool) {
  EXPECT_EQ(ParseFlags({"--bogus"}, {"--tracker"}).status().message(), "unknown flag --bogus");
  EXPECT_EQ(ParseFlags({"--tracker"}, {"--tracker"}).status().message(), "--tracker needs a value");
  EXPECT_EQ(ParseFlags({"--wait=1"}, {}, {"--wait"}).status().message(), "--wait takes no value");
}

}  // namespace
}  // namespace kiln
