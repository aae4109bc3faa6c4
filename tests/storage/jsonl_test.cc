#include "storage/jsonl.h"

#include <gtest/gtest.h>

namespace kiln::storage {
namespace {

TEST(JsonTest, ParsesNestedValues) {
  auto v = ParseJson(
      R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "d\"\\\n\u00e9\ud83d\ude00"}} )");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, JsonKind::kObject);
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 5u);
  EXPECT_EQ(a->array[0].number, 1);
  EXPECT_EQ(a->array[1].number, -2500);
  EXPECT_TRUE(a->array[2].boolean);
  EXPECT_EQ(a->array[4].kind, JsonKind::kNull);
  EXPECT_EQ(v->Find("b")->Find("c")->string, "d\"\\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v->Find("zz"), nullptr);
}

TEST(JsonTest, RejectsMalformed) {
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "1.", "\"abc", "\"\\x\"",
                          "tru", "{} x", "\"\\ud800\""}) {
    EXPECT_FALSE(ParseJson(bad).ok()) << bad;
  }
}

TEST(JsonTest, WriterRoundTrips) {
  JsonWriter w;
  w.BeginObject()
      .Key("s")
      .String("tab\there \"q\" \x01")
      .Key("n")
      .Number(0.1)
      .Key("i")
      .Int(-1700000000123)
      .Key("arr")
      .BeginArray()
      .Number(1.0 / 3.0)
      .Bool(true)
      .Null()
      .EndArray()
      .Key("o")
      .BeginObject()
      .EndObject()
      .EndObject();
  EXPECT_EQ(w.str(),
            "{\"s\":\"tab\\there \\\"q\\\" \\u0001\",\"n\":0.1,\"i\":-1700000000123,"
            "\"arr\":[0.3333333333333333,true,null],\"o\":{}}");
  auto v = ParseJson(w.str());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Find("s")->string, "tab\there \"q\" \x01");
  EXPECT_EQ(v->Find("arr")->array[0].number, 1.0 / 3.0);
  EXPECT_EQ(*JsonGetInt64(*v, "i"), -1700000000123);
  EXPECT_FALSE(JsonGetInt64(*v, "n").ok());
  EXPECT_FALSE(JsonGetString(*v, "n").ok());
}

}  // namespace
}  // namespace kiln::storage
