// ImportOptions: input shapes that specialize symbolic dimensions, and
// tensors kept in ONNX external data files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "compiler/frontend/onnx_import.h"
#include "compiler/model.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OnnxBuilder;

// x: [batch, 3, H?, 8] (dim 2 has neither value nor name) -> Relu -> y.
std::string SymbolicModel() {
  OnnxBuilder b;
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y");
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(b.Bytes()));
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(3);
  tt->mutable_shape()->add_dim();
  tt->mutable_shape()->add_dim()->set_dim_value(8);
  return m.SerializeAsString();
}

ImportOptions Shapes(std::map<std::string, std::vector<int64_t>> shapes) {
  ImportOptions o;
  o.input_shapes = std::move(shapes);
  return o;
}

TEST(InputShapes, SpecializeSymbolicAndUnknownDimensions) {
  auto g = ImportOnnx(SymbolicModel(), Shapes({{"x", {2, 3, 5, 8}}}));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ((*g)->inputs.size(), 1u);
  EXPECT_THAT((*g)->values[(*g)->inputs[0]].shape, ElementsAre(2, 3, 5, 8));
  EXPECT_THAT((*g)->values[(*g)->FindValue("y")].shape, ElementsAre(2, 3, 5, 8));
}

// The shape error comes before any weight is read: an initializer whose
// data is shorter than its shape is never reached.
TEST(InputShapes, ShapeErrorsComeBeforeWeights) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(SymbolicModel()));
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1000);
  w->set_raw_data(std::string(8, '\0'));  // 2 of 1000 floats
  auto g = ImportOnnx(m.SerializeAsString());
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("dimension 0 ('batch') is unknown"));
}

TEST(InputShapes, MissingDimensionNamesInputAndIndex) {
  auto g = ImportOnnx(SymbolicModel());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "input 'x' [batch,3,?,8]: dimension 0 ('batch') is unknown; give the input's shape "
            "with --input-shape x=DIMS");
}

TEST(InputShapes, ContradictionRankAndUnknownNameAreErrors) {
  auto g = ImportOnnx(SymbolicModel(), Shapes({{"x", {2, 4, 5, 8}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "input shape x=2x4x5x8 contradicts the model: dimension 1 of input 'x' "
            "[batch,3,?,8] is 3, not 4");

  g = ImportOnnx(SymbolicModel(), Shapes({{"x", {2, 3, 5}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("has rank 3, but input 'x' is [batch,3,?,8]"));

  g = ImportOnnx(SymbolicModel(), Shapes({{"x", {1, 3, 5, 8}}, {"data", {1, 3}}}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "input shape data=1x3 names no input of the model; its inputs are 'x'");
}

TEST(InputShapes, StaticModelsAcceptAMatchingShapeAndRejectOthers) {
  OnnxBuilder b;
  b.Input("x", {1, 4});
  b.Init("w", {4}, {1, 2, 3, 4});
  b.Node("Add", {"x", "w"}, {"y"});
  b.Output("y");
  EXPECT_TRUE(ImportOnnx(b.Bytes(), Shapes({{"x", {1, 4}}})).ok());
  auto g = ImportOnnx(b.Bytes(), Shapes({{"x", {2, 4}}}));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  g = ImportOnnx(b.Bytes(), Shapes({{"w", {4}}}));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("(it is an initializer)"));
}

TEST(InputShapes, UnknownRankTakesTheGivenShape) {
  OnnxBuilder b;
  b.Node("Relu", {"x"}, {"y"});
  b.Output("y");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(b.Bytes()));
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto g = ImportOnnx(m.SerializeAsString());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("input 'x' has an unknown shape"));
  g = ImportOnnx(m.SerializeAsString(), Shapes({{"x", {6}}}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT((*g)->values[(*g)->inputs[0]].shape, ElementsAre(6));
}

TEST(InputShapes, ParseFlagValues) {
  std::map<std::string, std::vector<int64_t>> shapes;
  ASSERT_TRUE(ParseInputShape("data=1x3x224x224", &shapes).ok());
  ASSERT_TRUE(ParseInputShape("a=b=7", &shapes).ok());
  EXPECT_THAT(shapes["data"], ElementsAre(1, 3, 224, 224));
  EXPECT_THAT(shapes["a=b"], ElementsAre(7));
  for (const char* bad : {"data", "=1x2", "x=", "x=1x0", "x=1xx2", "x=-1", "x=1x3.5"}) {
    EXPECT_EQ(ParseInputShape(bad, &shapes).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// ---- External data ----

class ExternalData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kiln-extdata-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // y = x + w, w ([4] float32) at `offset` of `location`.
  std::string Model(const std::string& location, int64_t offset, int64_t length = 16) {
    OnnxBuilder b;
    b.Input("x", {4});
    b.Node("Add", {"x", "w"}, {"y"});
    b.Output("y");
    onnx::ModelProto m;
    EXPECT_TRUE(m.ParseFromString(b.Bytes()));
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const std::string& k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    kv("offset", std::to_string(offset));
    if (length >= 0) kv("length", std::to_string(length));
    return m.SerializeAsString();
  }
  // 8 bytes of padding, then 1 2 3 4 as float32.
  void WriteData(const fs::path& path) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write("padding!", 8);
    for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) out.write(reinterpret_cast<const char*>(&v), 4);
  }
  ImportOptions InDir() {
    ImportOptions o;
    o.external_data_dir = (dir_ / "model").string();
    return o;
  }
  static std::vector<float> Floats(const Graph& g, const std::string& name) {
    int id = g.FindValue(name);
    EXPECT_GE(id, 0);
    return id < 0 ? std::vector<float>{} : g.values[id].ToFloats();
  }

  fs::path dir_;
};

TEST_F(ExternalData, ReadsRelativeToTheModelsFolder) {
  WriteData(dir_ / "model" / "weights" / "w.bin");
  auto g = ImportOnnx(Model("weights/w.bin", 8), InDir());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Floats(**g, "w"), ElementsAre(1, 2, 3, 4));
  // Without a length, the tensor's size is read.
  g = ImportOnnx(Model("weights/w.bin", 8, -1), InDir());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Floats(**g, "w"), ElementsAre(1, 2, 3, 4));
}

TEST_F(ExternalData, FilesMapIsTheOnlySourceWithoutAFolder) {
  WriteData(dir_ / "stored-blob");
  ImportOptions o;
  o.external_files["w.bin"] = (dir_ / "stored-blob").string();
  auto g = ImportOnnx(Model("w.bin", 8), o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Floats(**g, "w"), ElementsAre(1, 2, 3, 4));
  // A location that was not provided is not looked for anywhere.
  WriteData(fs::current_path() / "kiln-not-provided.bin");
  g = ImportOnnx(Model("kiln-not-provided.bin", 8), o);
  fs::remove(fs::current_path() / "kiln-not-provided.bin");
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "tensor 'w' keeps its data in external file 'kiln-not-provided.bin', which was not "
            "provided");
}

TEST_F(ExternalData, RejectsLocationsThatLeaveTheFolder) {
  WriteData(dir_ / "outside.bin");
  const std::string abs = (dir_ / "outside.bin").string();
  for (const std::string& loc :
       {std::string("../outside.bin"), std::string("a/../../outside.bin"), abs}) {
    auto g = ImportOnnx(Model(loc, 8), InDir());
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << loc;
    EXPECT_THAT(g.status().message(), HasSubstr("leaves the model's folder")) << loc;
  }
  fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "link.bin");
  auto g = ImportOnnx(Model("link.bin", 8), InDir());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("leaves the model's folder"));
}

TEST_F(ExternalData, ChecksOffsetsAndLengthsAgainstTheFile) {
  WriteData(dir_ / "model" / "w.bin");  // 24 bytes
  auto g = ImportOnnx(Model("w.bin", 12), InDir());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            "tensor 'w': external data 'w.bin' is 24 bytes, shorter than offset 12 + length 16");
  g = ImportOnnx(Model("w.bin", 0, 8), InDir());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(), "tensor 'w' has 8 bytes of external data, expected 16");
  g = ImportOnnx(Model("w.bin", int64_t{1} << 62), InDir());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  g = ImportOnnx(Model("missing.bin", 0), InDir());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(g.status().message(), HasSubstr("cannot open external data 'missing.bin'"));
}

TEST_F(ExternalData, ModelFromFileHashesTheOnnxFile) {
  WriteData(dir_ / "model" / "w.bin");
  const std::string bytes = Model("w.bin", 8);
  const fs::path path = dir_ / "model" / "m.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  auto m = Model::FromOnnxFile(path.string(), InDir());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->source_sha256(), Model::FromOnnx(bytes, InDir())->source_sha256());
  EXPECT_EQ(m->Tasks().size(), 1u);
  // Without the folder, nothing is read from beside the model.
  EXPECT_EQ(Model::FromOnnxFile(path.string()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::compiler
