// The operators the importer computes at import or expands into the nodes
// of their definition (onnx_signal_ops.cc, onnx_expanded_ops.cc): what they
// compute on cases the node tests lack, and what they refuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>

#include "compiler/frontend/onnx_import.h"
#include "tests/compiler/graph_eval.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OnnxBuilder;
using testing::ShapeOf;

// Window functions, MelWeightMatrix, AffineGrid, ReverseSequence and
// MaxUnpool (onnx_signal_ops.cc, onnx_expanded_ops.cc; their numerics: the
// conformance tests): a Hann window of 4 is computed at import, a size
// known only at run time is refused naming it, and a theta that does not
// fit AffineGrid's size is refused.
TEST(OnnxImport, ConstantSignalOpsAndExpandedOps) {
  OnnxBuilder b(17);
  b.Input("x", {1});
  b.InitInt64("four", {}, {4});
  b.Node("HannWindow", {"four"}, {"w"});
  b.Output("w");
  auto g = ImportOnnx(b.Bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  const Value& w = (*g)->values[(*g)->FindValue("w")];
  ASSERT_TRUE(w.IsConstant());
  EXPECT_THAT(w.ToFloats(), ElementsAre(0.0f, 0.5f, 1.0f, 0.5f));  // periodic: N = 4

  OnnxBuilder r(17);
  r.Input("n", {}, onnx::TensorProto::INT64);
  r.Node("HammingWindow", {"n"}, {"w"}, "window");
  r.Output("w");
  auto runtime = ImportOnnx(r.Bytes());
  EXPECT_EQ(runtime.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(runtime.status().message(), HasSubstr("('n') must be known at compile time"));

  OnnxBuilder a(20);
  a.Input("theta", {2, 2, 3});
  a.InitInt64("size", {4}, {3, 1, 4, 5});
  a.Node("AffineGrid", {"theta", "size"}, {"grid"}, "grid");
  a.Output("grid");
  auto bad = ImportOnnx(a.Bytes());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("does not fit size [3,1,4,5]"));
}

// Col2Im (onnx_expanded_ops.cc): overlapping blocks sum where they land
// (a 1x3 image from two 1x2 blocks at stride 1: the middle pixel gets both),
// columns that do not match the sizes are refused with the count the sizes
// need, and sizes beyond the importer's index limit are refused.
TEST(OnnxImport, Col2ImSumsOverlappingBlocks) {
  auto model = [](int64_t columns, int64_t side = 3) {
    OnnxBuilder b(18);
    b.Input("x", {1, 2, columns});
    b.InitInt64("image", {2}, {1, side});
    b.InitInt64("block", {2}, {1, 2});
    b.Node("Col2Im", {"x", "image", "block"}, {"y"}, "col2im");
    b.Output("y");
    return b.Bytes();
  };
  auto g = ImportOnnx(model(2));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(ShapeOf(**g, "y"), ElementsAre(1, 1, 1, 3));
  // Rows: block offset 0 then 1; columns: block positions 0 and 1.
  auto vals = testing::EvaluateGraph(**g, {{1, 2, 10, 20}});
  ASSERT_FALSE(vals.empty());
  EXPECT_THAT(vals.at((*g)->FindValue("y")), ElementsAre(1, 12, 20));
  auto bad = ImportOnnx(model(3));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("2 columns for these sizes"));
  // A few bytes asking for an image of 2^40 pixels: refused before any
  // index is made.
  auto huge = ImportOnnx(model(2, int64_t{1} << 40));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("more than 16777216 entries"));
}

// TfIdfVectorizer (onnx_expanded_ops.cc) against onnxruntime on cases the
// node tests lack: n-grams moved to permuted output indices, weights (by
// pool n-gram, as the specification says) in TFIDF and IDF, a skip
// distance of 2 finding bigrams, unigrams counted once; a string pool and a
// pool that ngram_indexes does not cover are refused, saying why.
TEST(OnnxImport, TfIdfVectorizerCountsIntegerNgrams) {
  auto model = [](const std::vector<int64_t>& shape, const std::string& mode,
                  const std::vector<float>& weights, const std::vector<int64_t>& indexes) {
    OnnxBuilder b(9);
    b.Input("x", shape, onnx::TensorProto::INT32);
    auto* n = b.Node("TfIdfVectorizer", {"x"}, {"y"}, "tfidf");
    OnnxBuilder::String(n, "mode", mode);
    OnnxBuilder::Int(n, "min_gram_length", 1);
    OnnxBuilder::Int(n, "max_gram_length", 2);
    OnnxBuilder::Int(n, "max_skip_count", 1);
    OnnxBuilder::Ints(n, "ngram_counts", {0, 2});
    OnnxBuilder::Ints(n, "ngram_indexes", indexes);
    OnnxBuilder::Ints(n, "pool_int64s", {5, 7, 5, 6, 6, 7});  // 5, 7, (5, 6), (6, 7)
    if (!weights.empty()) {
      auto* a = n->add_attribute();
      a->set_name("weights");
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float w : weights) a->add_floats(w);
    }
    b.Output("y");
    return b.Bytes();
  };
  auto ints = [](const std::vector<int32_t>& v) {
    std::vector<float> f;
    for (int32_t i : v) f.push_back(std::bit_cast<float>(i));
    return f;
  };
  auto run = [&](const std::string& bytes, const std::vector<int32_t>& x) {
    auto g = ImportOnnx(bytes);
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok()) return std::vector<float>{};
    auto vals = testing::EvaluateGraph(**g, {ints(x)});
    EXPECT_FALSE(vals.empty());
    return vals.empty() ? std::vector<float>{} : vals.at((*g)->FindValue("y"));
  };
  const std::vector<int32_t> x = {5, 6, 7, 7, 5, 8, 6, 5, 5};
  const std::vector<int64_t> permuted = {3, 0, 1, 2};
  EXPECT_THAT(run(model({9}, "TF", {}, permuted), x), ElementsAre(2, 2, 2, 4));
  EXPECT_THAT(run(model({9}, "TFIDF", {0.5f, 1, 2, 4}, permuted), x), ElementsAre(2, 4, 8, 2));
  EXPECT_THAT(run(model({9}, "IDF", {0.5f, 1, 2, 4}, permuted), x), ElementsAre(1, 2, 4, 0.5));
  EXPECT_THAT(run(model({2, 4}, "TF", {}, permuted), {5, 6, 7, 5, 8, 6, 8, 7}),
              ElementsAre(1, 1, 1, 2, 1, 0, 1, 0));

  OnnxBuilder s(9);
  s.Input("x", {4}, onnx::TensorProto::INT32);
  auto* n = s.Node("TfIdfVectorizer", {"x"}, {"y"}, "tfidf");
  auto* pool = n->add_attribute();
  pool->set_name("pool_strings");
  pool->set_type(onnx::AttributeProto::STRINGS);
  pool->add_strings("a");
  s.Output("y");
  auto strings = ImportOnnx(s.Bytes());
  EXPECT_EQ(strings.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(strings.status().message(), HasSubstr("string n-grams"));
  auto uncovered = ImportOnnx(model({9}, "TF", {}, {0, 1, 2}));
  EXPECT_EQ(uncovered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(uncovered.status().message(),
              HasSubstr("ngram_indexes has 3 entries for the pool's 4"));
}

// Det (onnx_expanded_ops.cc, Leibniz's sum): 3x3 in a batch and 4x4 (the
// node tests have 2x2 only, where a sign error in the longer permutations
// would not show); 5x5 is refused, naming the limit.
TEST(OnnxImport, DetUpTo4x4) {
  auto model = [](std::vector<int64_t> shape) {
    OnnxBuilder b(22);
    b.Input("x", shape);
    b.Node("Det", {"x"}, {"y"}, "det");
    b.Output("y");
    return b.Bytes();
  };
  auto g3 = ImportOnnx(model({2, 3, 3}));
  ASSERT_TRUE(g3.ok()) << g3.status();
  EXPECT_THAT(ShapeOf(**g3, "y"), ElementsAre(2));
  auto v3 = testing::EvaluateGraph(**g3, {{2, 0, 1, 1, 3, 2, 1, 1, 2, 1, 0, 0, 0, 1, 0, 0, 0, 1}});
  ASSERT_FALSE(v3.empty());
  EXPECT_THAT(v3.at((*g3)->FindValue("y")), ElementsAre(6, 1));
  auto g4 = ImportOnnx(model({4, 4}));
  ASSERT_TRUE(g4.ok()) << g4.status();
  auto v4 = testing::EvaluateGraph(**g4, {{0, 2, 0, 0, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 4}});
  ASSERT_FALSE(v4.empty());
  EXPECT_THAT(v4.at((*g4)->FindValue("y")), ElementsAre(-24));
  auto g5 = ImportOnnx(model({5, 5}));
  EXPECT_EQ(g5.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(g5.status().message(), HasSubstr("up to 4x4"));
}

}  // namespace
}  // namespace kiln::compiler
