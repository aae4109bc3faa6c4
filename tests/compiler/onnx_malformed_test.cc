// Malformed models (issue 5, "bad input stays harmless"): one test per class
// of damage, each expecting INVALID_ARGUMENT (or UNIMPLEMENTED) and a message
// that names the node, input, tensor or attribute at fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <functional>

#include "base/str.h"
#include "compiler/frontend/onnx_import.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::OnnxBuilder;

// x [1,3,8,8] -> Conv (w [4,3,3,3], pads 1) -> Relu -> y [1,4,8,8].
OnnxBuilder ConvRelu() {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, std::vector<float>(108, 0.5f));
  auto* conv = b.Node("Conv", {"x", "w"}, {"c"}, "conv");
  OnnxBuilder::Ints(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::Int(conv, "group", 1);
  b.Node("Relu", {"c"}, {"y"}, "relu");
  b.Output("y");
  return b;
}

// The builder's model after `edit`, imported.
absl::StatusOr<std::unique_ptr<Graph>> ImportEdited(
    const OnnxBuilder& b, const std::function<void(onnx::ModelProto&)>& edit) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(b.Bytes()));
  edit(m);
  return ImportOnnx(m.SerializeAsString());
}

onnx::NodeProto& NodeNamed(onnx::ModelProto& m, const std::string& name) {
  for (auto& n : *m.mutable_graph()->mutable_node()) {
    if (n.name() == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return *m.mutable_graph()->mutable_node(0);
}

onnx::AttributeProto& AttrNamed(onnx::NodeProto& n, const std::string& name) {
  for (auto& a : *n.mutable_attribute()) {
    if (a.name() == name) return a;
  }
  auto* a = n.add_attribute();
  a->set_name(name);
  return *a;
}

#define EXPECT_REFUSED(result, want, ...)                                 \
  do {                                                                    \
    auto&& r_ = (result);                                                 \
    ASSERT_FALSE(r_.ok());                                                \
    EXPECT_EQ(r_.status().code(), absl::StatusCode::want) << r_.status(); \
    EXPECT_THAT(std::string(r_.status().message()), AllOf(__VA_ARGS__));  \
  } while (0)

TEST(OnnxMalformed, ValidBaseModelImports) {
  auto g = ImportOnnx(ConvRelu().Bytes());
  ASSERT_TRUE(g.ok()) << g.status();
}

TEST(OnnxMalformed, OpsetOutOfRange) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{999}, int64_t{1} << 40}) {
    EXPECT_REFUSED(
        ImportEdited(ConvRelu(), [&](auto& m) { m.mutable_opset_import(0)->set_version(v); }),
        kInvalidArgument, HasSubstr(StrCat("opset ", v, " ")), HasSubstr("(1..22)"));
  }
  EXPECT_REFUSED(ImportEdited(ConvRelu(), [](auto& m) { m.clear_opset_import(); }),
                 kInvalidArgument, HasSubstr("declares no opset of the default domain"));
}

TEST(OnnxMalformed, NegativeInputDimension) {
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                m.mutable_graph()
                                    ->mutable_input(0)
                                    ->mutable_type()
                                    ->mutable_tensor_type()
                                    ->mutable_shape()
                                    ->mutable_dim(2)
                                    ->set_dim_value(-8);
                              }),
                 kInvalidArgument, HasSubstr("input 'x'"), HasSubstr("negative"));
}

TEST(OnnxMalformed, OverflowingAndAbsurdInputDimensions) {
  auto dims = [](onnx::ModelProto& m) {
    return m.mutable_graph()
        ->mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape();
  };
  // 2^62 in one dimension; 2^31 in each of four (the product overflows); 2^33
  // elements (above the limit, no overflow).
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(),
                   [&](auto& m) { dims(m)->mutable_dim(0)->set_dim_value(int64_t{1} << 62); }),
      kInvalidArgument, HasSubstr("input 'x'"), HasSubstr("too large"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [&](auto& m) {
                                for (auto& d : *dims(m)->mutable_dim())
                                  d.set_dim_value(int64_t{1} << 31);
                              }),
                 kInvalidArgument, HasSubstr("input 'x'"), HasSubstr("too large"));
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(),
                   [&](auto& m) { dims(m)->mutable_dim(0)->set_dim_value(int64_t{1} << 28); }),
      kInvalidArgument, HasSubstr("input 'x'"), HasSubstr("too large"));
}

TEST(OnnxMalformed, InitializerDataShorterThanItsShape) {
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(),
                   [](auto& m) {
                     m.mutable_graph()->mutable_initializer(0)->mutable_float_data()->RemoveLast();
                   }),
      kInvalidArgument, HasSubstr("tensor 'w'"), HasSubstr("107 values for 108"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto* t = m.mutable_graph()->mutable_initializer(0);
                                t->clear_float_data();
                                t->set_raw_data(std::string(100, '\0'));
                              }),
                 kInvalidArgument, HasSubstr("tensor 'w'"),
                 HasSubstr("100 raw bytes, expected 432"));
}

TEST(OnnxMalformed, InitializerWithNegativeOrOverflowingDims) {
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(),
                   [](auto& m) { m.mutable_graph()->mutable_initializer(0)->set_dims(0, -4); }),
      kInvalidArgument, HasSubstr("tensor 'w'"), HasSubstr("negative"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto* t = m.mutable_graph()->mutable_initializer(0);
                                for (int i = 0; i < 4; ++i) t->set_dims(i, int64_t{1} << 31);
                              }),
                 kInvalidArgument, HasSubstr("tensor 'w'"), HasSubstr("too large"));
}

TEST(OnnxMalformed, AttributeOfTheWrongType) {
  // group declared FLOAT: AttrInt must not read it as 0.
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto& a = AttrNamed(NodeNamed(m, "conv"), "group");
                                a.clear_i();
                                a.set_type(onnx::AttributeProto::FLOAT);
                                a.set_f(1.0f);
                              }),
                 kInvalidArgument, HasSubstr("node 'conv' (Conv)"),
                 HasSubstr("attribute 'group' is FLOAT, expected INT"));
  // pads given as one INT instead of INTS.
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto& a = AttrNamed(NodeNamed(m, "conv"), "pads");
                                a.clear_ints();
                                a.set_type(onnx::AttributeProto::INT);
                                a.set_i(1);
                              }),
                 kInvalidArgument, HasSubstr("node 'conv'"),
                 HasSubstr("attribute 'pads' is INT, expected INTS"));
}

TEST(OnnxMalformed, AttributeTypeContradictsItsContent) {
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto& a = AttrNamed(NodeNamed(m, "conv"), "group");
                                a.set_f(2.0f);  // declared INT, also holds a FLOAT
                              }),
                 kInvalidArgument, HasSubstr("node 'conv'"),
                 HasSubstr("'group' is declared INT but holds FLOAT"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                auto& a = AttrNamed(NodeNamed(m, "conv"), "group");
                                a.set_type(onnx::AttributeProto::UNDEFINED);
                                a.add_floats(1.0f);  // no type, two kinds of content
                              }),
                 kInvalidArgument, HasSubstr("node 'conv'"), HasSubstr("has no type and holds"));
}

TEST(OnnxMalformed, UndefinedInput) {
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "relu").set_input(0, "ghost"); }),
      kInvalidArgument, HasSubstr("node 'relu' (Relu) reads 'ghost'"));
  // An input no importer would read (Conv's bias slot) is checked too.
  EXPECT_REFUSED(
      ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "conv").add_input("ghost_bias"); }),
      kInvalidArgument, HasSubstr("node 'conv' (Conv) reads 'ghost_bias'"));
}

TEST(OnnxMalformed, DuplicateOutputs) {
  EXPECT_REFUSED(ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "relu").set_output(0, "c"); }),
                 kInvalidArgument, HasSubstr("node 'relu' (Relu) writes 'c'"),
                 HasSubstr("node 'conv'"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "conv").set_output(0, "x"); }),
                 kInvalidArgument, HasSubstr("node 'conv' (Conv) writes 'x'"),
                 HasSubstr("graph input"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(),
                              [](auto& m) {
                                *m.mutable_graph()->add_initializer() = m.graph().initializer(0);
                              }),
                 kInvalidArgument, HasSubstr("initializer 'w' is defined twice"));
}

TEST(OnnxMalformed, Cycles) {
  EXPECT_REFUSED(ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "conv").set_input(0, "y"); }),
                 kInvalidArgument, HasSubstr("cycle"), HasSubstr("'conv'"), HasSubstr("'relu'"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), [](auto& m) { NodeNamed(m, "relu").set_input(0, "y"); }),
                 kInvalidArgument, HasSubstr("cycle: node 'relu' -> 'relu'"));
}

TEST(OnnxMalformed, UnsortedGraphIsSortedNotRefused) {
  auto g = ImportEdited(ConvRelu(), [](auto& m) {
    auto* nodes = m.mutable_graph()->mutable_node();
    nodes->SwapElements(0, 1);
  });
  ASSERT_TRUE(g.ok()) << g.status();
}

TEST(OnnxMalformed, SpatialAttributesOutOfRange) {
  auto set = [](const char* name, std::vector<int64_t> v) {
    return [=](onnx::ModelProto& m) {
      auto& a = AttrNamed(NodeNamed(m, "conv"), name);
      a.set_type(onnx::AttributeProto::INTS);
      a.clear_ints();
      for (int64_t x : v) a.add_ints(x);
    };
  };
  const int64_t big = int64_t{1} << 40, huge = int64_t{1} << 62;
  EXPECT_REFUSED(ImportEdited(ConvRelu(), set("pads", {-1, -1, -1, -1})), kInvalidArgument,
                 HasSubstr("node 'conv'"), HasSubstr("pads"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), set("pads", {big, big, big, big})), kInvalidArgument,
                 HasSubstr("node 'conv'"), HasSubstr("pads"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), set("strides", {huge, huge})), kInvalidArgument,
                 HasSubstr("node 'conv'"), HasSubstr("too large"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), set("dilations", {huge, 1})), kInvalidArgument,
                 HasSubstr("node 'conv'"), HasSubstr("too large"));
  EXPECT_REFUSED(ImportEdited(ConvRelu(), set("strides", {0, 1})), kInvalidArgument,
                 HasSubstr("node 'conv'"));
}

TEST(OnnxMalformed, NodeOutputAboveTheElementLimit) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.InitInt64("reps", {2}, {int64_t{1} << 20, int64_t{1} << 20});
  b.Node("Tile", {"x", "reps"}, {"y"}, "tile");
  b.Output("y");
  EXPECT_REFUSED(ImportOnnx(b.Bytes()), kInvalidArgument, HasSubstr("node 'tile' (Tile)"),
                 HasSubstr("4294967296 elements"));
  OnnxBuilder o;
  o.Input("x", {2, 3});
  o.InitInt64("reps", {2}, {int64_t{1} << 62, 4});
  o.Node("Tile", {"x", "reps"}, {"y"}, "tile");
  o.Output("y");
  EXPECT_REFUSED(ImportOnnx(o.Bytes()), kInvalidArgument, HasSubstr("node 'tile'"),
                 HasSubstr("too large"));
}

TEST(OnnxMalformed, ElementLimitIsConfigurable) {
  // x has 192 elements, the convolution's output 256.
  ImportOptions options;
  options.max_elements = 200;
  EXPECT_REFUSED(ImportOnnx(ConvRelu().Bytes(), options), kInvalidArgument,
                 HasSubstr("node 'conv' (Conv)"), HasSubstr("more than 200 elements"));
  options.max_elements = 100;
  EXPECT_REFUSED(ImportOnnx(ConvRelu().Bytes(), options), kInvalidArgument,
                 HasSubstr("input 'x' is too large"));
  options.max_elements = 256;
  EXPECT_TRUE(ImportOnnx(ConvRelu().Bytes(), options).ok());
}

// Two ConstantOfShape nodes of float64 `dims` (each value 1.0), added: a
// few hundred bytes of ONNX whose import computes three constants.
OnnxBuilder FoldedConstants(const std::vector<int64_t>& dims) {
  OnnxBuilder b;
  b.Input("x", {1});
  b.InitInt64("shape", {static_cast<int64_t>(dims.size())}, dims);
  for (const char* name : {"c1", "c2"}) {
    auto* n = b.Node("ConstantOfShape", {"shape"}, {name}, name);
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::DOUBLE);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_double_data(1.0);
  }
  b.Node("Add", {"c1", "c2"}, {"y"}, "add");
  b.Output("y");
  return b;
}

// The security review's 319-byte model took a gigabyte of the tracker: the
// import's computed constants have a total budget, checked before each is
// allocated.
TEST(OnnxMalformed, ComputedConstantsHaveABudget) {
  ImportOptions options;
  options.max_folded_bytes = 20 << 10;
  // 8 KiB each: the third constant (the Add, folded) passes the budget.
  EXPECT_REFUSED(ImportOnnx(FoldedConstants({1024}).Bytes(), options), kInvalidArgument,
                 HasSubstr("node 'add' (Add)"), HasSubstr("would come to 24576 bytes"),
                 HasSubstr("more than the 20480"));
  options.max_folded_bytes = 24 << 10;
  EXPECT_TRUE(ImportOnnx(FoldedConstants({1024}).Bytes(), options).ok());

  // 2^26 float64 elements (512 MiB) each: refused before any is allocated.
  const std::string tiny = FoldedConstants({8192, 8192}).Bytes();
  EXPECT_LT(tiny.size(), 400u);
  options.max_folded_bytes = 64 << 20;
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  EXPECT_REFUSED(ImportOnnx(tiny, options), kInvalidArgument, HasSubstr("node 'c1'"),
                 HasSubstr("would come to 536870912 bytes"));
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 << 10) << "KiB of peak memory grown";
}

// onnxruntime's quantized com.microsoft operators are imported (the model
// tests qoperator_ops, resnet18_int8_qop check their numbers against
// onnxruntime); its other operators, and quantized ones written wrong, are
// refused with the operator named.
TEST(OnnxImport, MicrosoftOperatorsImportedOrNamed) {
  OnnxBuilder b;
  b.Input("x", {1, 10});
  b.Node("QAttention", {"x"}, {"y"}, "attn")->set_domain("com.microsoft");
  b.Output("y");
  auto g = ImportOnnx(b.Bytes());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr("unsupported operator 'com.microsoft.QAttention' (node 'attn')"));

  // QLinearConcat with its inputs not in threes after Y_scale, Y_zero_point.
  OnnxBuilder c;
  c.Input("x", {1, 10});
  c.Node("QLinearConcat", {"x", "x", "x", "x"}, {"y"}, "cat")->set_domain("com.microsoft");
  c.Output("y");
  auto gc = ImportOnnx(c.Bytes());
  EXPECT_EQ(gc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(gc.status().message()), HasSubstr("(X, X_scale, X_zero_point)"));

  // QLinearAdd without its output scale: named, not a crash.
  OnnxBuilder a;
  a.Input("x", {1, 10});
  a.Node("QLinearAdd", {"x", "x", "", "x", "x"}, {"y"}, "add")->set_domain("com.microsoft");
  a.Output("y");
  auto ga = ImportOnnx(a.Bytes());
  EXPECT_EQ(ga.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ga.status().message()),
              HasSubstr("node 'add' (com.microsoft.QLinearAdd): input 6 is required"));
}

// A node an expansion imports (here com.microsoft.DequantizeLinear's
// DequantizeLinear) is checked inside its parent's check: the constant it
// folds counts once, not once for each (the BERT layer's operator form was
// refused by the tracker's budget, its folded weights counted twice).
TEST(OnnxMalformed, AnExpansionsConstantsCountOnce) {
  OnnxBuilder b;
  b.Input("x", {1024});
  b.InitInts("q", {1024}, onnx::TensorProto::INT8, std::vector<int32_t>(1024, 3));
  b.Init("s", {}, {0.5f});
  b.Node("DequantizeLinear", {"q", "s"}, {"w"}, "dq")->set_domain("com.microsoft");
  b.Node("Add", {"x", "w"}, {"y"}, "add");
  b.Output("y");
  ImportOptions options;
  // w folds as two float constants of 4096 bytes (the cast, the scaling):
  // 8192 bytes once, 16384 counted twice.
  options.max_folded_bytes = 12000;
  auto g = ImportOnnx(b.Bytes(), options);
  ASSERT_TRUE(g.ok()) << g.status();
  options.max_folded_bytes = 8000;
  EXPECT_REFUSED(ImportOnnx(b.Bytes(), options), kInvalidArgument, HasSubstr("node 'dq'"),
                 HasSubstr("would come to 8192 bytes"));
}

// A constant made by a node may be as large as a weight the model carries
// (two zoo CNNs make one of about 10^8 elements with ConstantOfShape; the
// old fold limit of 2^26 elements refused them as a "bad shape"); past the
// element limit, the error names the limit and how to raise it.
TEST(OnnxMalformed, ComputedConstantsAsLargeAsWeights) {
  auto model = [](int64_t n) {
    OnnxBuilder b;
    b.Input("x", {1});
    b.InitInt64("shape", {1}, {n});
    auto* c = b.Node("ConstantOfShape", {"shape"}, {"y"}, "big");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::UINT8);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->set_raw_data(std::string(1, '\x07'));
    b.Output("y");
    return b.Bytes();
  };
  const int64_t n = 100'000'000;
  auto g = ImportOnnx(model(n));
  ASSERT_TRUE(g.ok()) << g.status();
  const Value& y = (*g)->values[(*g)->FindValue("y")];
  EXPECT_EQ(y.NumElements(), n);
  ASSERT_TRUE(y.IsConstant());
  EXPECT_EQ((*y.bytes)[n - 1], 7);
  ImportOptions options;
  options.max_elements = n - 1;
  EXPECT_REFUSED(ImportOnnx(model(n), options), kInvalidArgument, HasSubstr("node 'big'"),
                 HasSubstr("more than 99999999 elements"), HasSubstr("--max-elements"));
  // The bytes budget stays the bound on memory, and says how to raise it.
  options = {};
  options.max_folded_bytes = n - 1;
  EXPECT_REFUSED(ImportOnnx(model(n), options), kInvalidArgument, HasSubstr("node 'big'"),
                 HasSubstr("max_folded_bytes"), HasSubstr("`kiln compile` allows 4 GiB"));
}

// A few hundred bytes of ONNX may ask a loop to unroll into millions of
// nodes: the expansions have a budget of 2^20 nodes in all, checked before
// a loop of known size is unrolled (refused before any of it is imported).
TEST(OnnxMalformed, UnrolledLoopsHaveANodeBudget) {
  OnnxBuilder b;
  b.Input("x", {1});
  b.InitInt64("m", {}, {4000});
  auto* loop = b.Node("Loop", {"m", "", "x"}, {"y"}, "loop");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* g = a->mutable_g();
  for (const char* in : {"i", "c", "v0"}) g->add_input()->set_name(in);
  for (int k = 0; k < 300; ++k) {
    auto* n = g->add_node();
    n->set_op_type("Identity");
    n->add_input(StrCat("v", k));
    n->add_output(StrCat("v", k + 1));
  }
  g->add_output()->set_name("c");
  g->add_output()->set_name("v300");
  b.Output("y");
  EXPECT_REFUSED(ImportOnnx(b.Bytes()), kInvalidArgument, HasSubstr("node 'loop'"),
                 HasSubstr("more than 1048576 nodes"));
}

// Found by the fuzzer: a scalar where the operator indexes the data's shape
// by its axis read past the end of the shape.
TEST(OnnxMalformed, ScalarDataOfAnAxisOperator) {
  OnnxBuilder b;
  b.Input("x", {});
  b.InitInt64("i", {1}, {0});
  b.Node("Gather", {"x", "i"}, {"y"}, "gather");
  b.Output("y");
  EXPECT_REFUSED(ImportOnnx(b.Bytes()), kInvalidArgument, HasSubstr("node 'gather' (Gather)"),
                 HasSubstr("input 'x' is a scalar"));
}

// Found by the fuzzer: Reshape and Pad arithmetic on shape inputs near
// INT64_MAX overflowed.
TEST(OnnxMalformed, ShapeInputsThatOverflow) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.InitInt64("shape", {3}, {int64_t{1} << 62, 4, -1});
  b.Node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.Output("y");
  EXPECT_REFUSED(ImportOnnx(b.Bytes()), kInvalidArgument, HasSubstr("node 'rs' (Reshape)"),
                 HasSubstr("too large"));
  OnnxBuilder p;
  p.Input("x", {2, 3});
  p.InitInt64("pads", {4}, {INT64_MIN, 0, 0, 0});
  p.Node("Pad", {"x", "pads"}, {"y"}, "pad");
  p.Output("y");
  EXPECT_REFUSED(ImportOnnx(p.Bytes()), kInvalidArgument, HasSubstr("node 'pad'"),
                 HasSubstr("pads too large"));
}

// ai.onnx.preview.training's optimizers: R, T and a fixed number of inputs
// per updated tensor, Momentum's attributes required (no default in ONNX).
TEST(OnnxMalformed, TrainingOptimizersCheckTheirInputsAndAttributes) {
  auto model = [](const char* op, std::vector<std::string> tensors, int outputs, bool attrs) {
    OnnxBuilder b;
    b.Input("R", {});
    b.Input("T", {}, onnx::TensorProto::INT64);
    std::vector<std::string> inputs = {"R", "T"};
    for (const std::string& t : tensors) {
      b.Input(t, {3});
      inputs.push_back(t);
    }
    std::vector<std::string> outs;
    for (int i = 0; i < outputs; ++i) outs.push_back(StrCat("out", i));
    auto* n = b.Node(op, inputs, outs, "opt");
    n->set_domain("ai.onnx.preview.training");
    if (attrs) {
      OnnxBuilder::Float(n, "alpha", 0.9f);
      OnnxBuilder::Float(n, "beta", 1.0f);
      OnnxBuilder::String(n, "mode", "nesterov");
    }
    for (const std::string& o : outs) b.Output(o);
    return b.Bytes();
  };
  EXPECT_TRUE(ImportOnnx(model("Momentum", {"X", "G", "V"}, 2, true)).ok());
  EXPECT_REFUSED(ImportOnnx(model("Momentum", {"X", "G", "V"}, 2, false)), kInvalidArgument,
                 HasSubstr("node 'opt'"), HasSubstr("attribute 'alpha' is required"));
  EXPECT_REFUSED(ImportOnnx(model("Adagrad", {"X", "G"}, 2, false)), kInvalidArgument,
                 HasSubstr("3 inputs per updated tensor"));
  EXPECT_REFUSED(ImportOnnx(model("Adam", {"X", "G", "V", "H"}, 2, false)), kInvalidArgument,
                 HasSubstr("3 outputs per tensor"));
  EXPECT_REFUSED(ImportOnnx(model("Lamb", {"X", "G", "V"}, 2, false)), kUnimplemented,
                 HasSubstr("ai.onnx.preview.training.Lamb"));
}

// DeformConv: an offset (or mask) that does not fit the output's taps is
// refused naming the shape it must have; other ranks than 2-D are refused.
TEST(OnnxMalformed, DeformConvOffsetsMustFitTheTaps) {
  auto model = [](std::vector<int64_t> x, std::vector<int64_t> offset) {
    OnnxBuilder b;
    b.Input("x", x);
    b.Input("off", offset);
    std::vector<int64_t> ws = {2, x[1], 3, 3};
    if (x.size() == 3) ws = {2, x[1], 3};
    int64_t n = 1;
    for (int64_t d : ws) n *= d;
    b.Init("w", ws, std::vector<float>(static_cast<size_t>(n), 0.5f));
    b.Node("DeformConv", {"x", "w", "off"}, {"y"}, "dc");
    b.Output("y");
    return b.Bytes();
  };
  EXPECT_TRUE(ImportOnnx(model({1, 2, 5, 5}, {1, 18, 3, 3})).ok());
  EXPECT_REFUSED(ImportOnnx(model({1, 2, 5, 5}, {1, 18, 4, 3})), kInvalidArgument,
                 HasSubstr("node 'dc' (DeformConv)"), HasSubstr("offset must be [1, 18, 3, 3]"));
  EXPECT_REFUSED(ImportOnnx(model({1, 2, 5}, {1, 6, 3})), kUnimplemented, HasSubstr("only 2-D"));
}

TEST(OnnxMalformed, ErrorsNameTheNode) {
  // Reshape's own message does not name the node; the importer adds it.
  OnnxBuilder b;
  b.Input("x", {2, 3});
  b.InitInt64("shape", {2}, {-5, 6});
  b.Node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.Output("y");
  EXPECT_REFUSED(ImportOnnx(b.Bytes()), kInvalidArgument, HasSubstr("node 'rs' (Reshape)"),
                 HasSubstr("negative dimension"));
  OnnxBuilder t;
  t.Input("x", {2, 3, 4});
  auto* n = t.Node("Transpose", {"x"}, {"y"}, "tr");
  OnnxBuilder::Ints(n, "perm", {0, 0, 1});
  t.Output("y");
  EXPECT_REFUSED(ImportOnnx(t.Bytes()), kInvalidArgument, HasSubstr("node 'tr'"),
                 HasSubstr("perm"));
}

}  // namespace
}  // namespace kiln::compiler
