#include "deploy/artifact.h"

#include <string>
#include <vector>

#include "deploy/kiln_runtime.h"
#include "deploy/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/test_util.h"

namespace kiln::deploy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kN = 1000;  // elements of the test module's input and output

std::vector<std::pair<std::string, std::string>> Sections(const std::string& so) {
  return {
      {"manifest", testing::Manifest(kN)}, {"module.so", so}, {"weights", testing::Weights(kN)}};
}

TEST(Container, BadMagic) {
  std::string bytes = testing::PackArtifact(Sections("x"));
  bytes[3] = 'Z';
  absl::StatusOr<Container> c = ParseContainer(bytes);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("bad magic"));
  auto m = Module::LoadBytes("hello world, not an artifact");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("bad magic"));
}

TEST(Container, UnknownVersion) {
  absl::StatusOr<Container> c = ParseContainer(testing::PackArtifact(Sections("x"), 2));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("version 2"));
}

TEST(Container, TruncatedSection) {
  std::string bytes = testing::PackArtifact(Sections(std::string(200, 'x')));
  absl::StatusOr<Container> c = ParseContainer(bytes.substr(0, bytes.size() - 100));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("section 'weights'"));
  EXPECT_THAT(c.status().message(), HasSubstr("runs past the end of the file"));
  // Cut inside the section headers.
  absl::StatusOr<Container> h = ParseContainer(bytes.substr(0, 30));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(h.status().message(), HasSubstr("section header"));
}

TEST(Container, MissingSection) {
  absl::StatusOr<Container> c = ParseContainer(
      testing::PackArtifact({{"manifest", testing::Manifest(kN)}, {"weights", "abcd"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("missing section 'module.so'"));
}

TEST(Container, ParsesSections) {
  absl::StatusOr<Container> c = ParseContainer(testing::PackArtifact(Sections("SO")));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sections.at("module.so"), "SO");
  EXPECT_EQ(c->sections.at("manifest"), testing::Manifest(kN));
  EXPECT_EQ(c->sections.at("weights").size(), kN * 4u);
}

TEST(ManifestText, ParsesEveryField) {
  absl::StatusOr<Manifest> m = ParseManifest(
      "kiln-artifact 1\n"
      "target llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512\n"
      "compiler_version 0.1.0\nmodel_sha256 3f5a\nentry kiln_main\n"
      "workspace_bytes 131072\nweights_bytes 52736\nkernels 5\ntuned_kernels 3\n"
      "some_new_key 42\n"
      "input data float32 1x3x32x32\ninput s float32 scalar\noutput logits float32 1x10\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 1);
  EXPECT_EQ(m->target, "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512");
  EXPECT_EQ(m->compiler_version, "0.1.0");
  EXPECT_EQ(m->model_sha256, "3f5a");
  EXPECT_EQ(m->entry, "kiln_main");
  EXPECT_EQ(m->workspace_bytes, 131072);
  EXPECT_EQ(m->weights_bytes, 52736);
  EXPECT_EQ(m->kernels, 5);
  EXPECT_EQ(m->tuned_kernels, 3);
  ASSERT_EQ(m->inputs.size(), 2u);
  EXPECT_EQ(m->inputs[0].name, "data");
  EXPECT_THAT(m->inputs[0].shape, ElementsAre(1, 3, 32, 32));
  EXPECT_EQ(m->inputs[0].NumElements(), 3072);
  EXPECT_TRUE(m->inputs[1].shape.empty());
  EXPECT_EQ(m->inputs[1].NumElements(), 1);
  ASSERT_EQ(m->outputs.size(), 1u);
  EXPECT_EQ(m->outputs[0].name, "logits");
  EXPECT_EQ(ShapeToString(m->outputs[0].shape), "1x10");
}

TEST(ManifestText, BadLinesAreNamed) {
  auto err = [](const std::string& text) {
    absl::StatusOr<Manifest> m = ParseManifest(text);
    EXPECT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(m.status().message());
  };
  EXPECT_THAT(err("kiln-artifact 1\nentry f\ninput x float32 1xQ\n"), HasSubstr("manifest line 3"));
  EXPECT_THAT(err("kiln-artifact 1\nentry f\ninput x float32 1xQ\n"), HasSubstr("bad shape '1xQ'"));
  EXPECT_THAT(err("kiln-artifact 1\nentry f\nworkspace_bytes lots\n"),
              HasSubstr("manifest line 3"));
  EXPECT_THAT(err("kiln-artifact 1\nentry f\noutput y int8 4\n"), HasSubstr("dtype 'int8'"));
  EXPECT_THAT(err("kiln-artifact 1\nentry f\noutput y float32\n"), HasSubstr("manifest line 3"));
  EXPECT_THAT(err("kiln-artifact 2\n"), HasSubstr("unsupported manifest version 2"));
  EXPECT_THAT(err("hello\n"), HasSubstr("manifest line 1"));
  EXPECT_THAT(err("kiln-artifact 1\noutput y float32 4\n"), HasSubstr("no 'entry'"));
}

class LoadedModule : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir());
    so_ = new std::string(testing::CompileModule(*dir_, kN));
  }
  static void TearDownTestSuite() {
    testing::RemoveDir(*dir_);
    delete dir_;
    delete so_;
  }
  void SetUp() override { ASSERT_FALSE(so_->empty()) << "cc failed to build the test module"; }
  static std::string* dir_;
  static std::string* so_;
};
std::string* LoadedModule::dir_ = nullptr;
std::string* LoadedModule::so_ = nullptr;

TEST_F(LoadedModule, LoadFileAndRun) {
  std::string path = *dir_ + "/model.kiln";
  testing::WriteFile(path, testing::PackArtifact(Sections(*so_)));
  absl::StatusOr<std::unique_ptr<Module>> m = Module::LoadFile(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->manifest().entry, "kiln_main");
  std::vector<float> in(kN), out(kN, -1.f);
  for (int i = 0; i < kN; ++i) in[i] = static_cast<float>(i) - 3.f;
  ASSERT_TRUE((*m)->RunChecked({{in.data(), kN}}, {{out.data(), kN}}).ok());
  for (int i = 0; i < kN; ++i) ASSERT_FLOAT_EQ(out[i], in[i] * 2 + 0.5f * i) << i;
}

TEST_F(LoadedModule, TwoModulesLoadedAtOnceStayDistinct) {
  // A second module with other weights: outputs must follow each one's own.
  std::string weights2(kN * 4, '\0');
  auto a = Module::LoadBytes(testing::PackArtifact(Sections(*so_)));
  auto b = Module::LoadBytes(testing::PackArtifact(
      {{"manifest", testing::Manifest(kN)}, {"module.so", *so_}, {"weights", weights2}}));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<float> in(kN, 1.f), oa(kN), ob(kN);
  ASSERT_TRUE((*a)->Run({in.data()}, {oa.data()}).ok());
  ASSERT_TRUE((*b)->Run({in.data()}, {ob.data()}).ok());
  EXPECT_FLOAT_EQ(oa[10], 2.f + 5.f);
  EXPECT_FLOAT_EQ(ob[10], 2.f);
  a->reset();
  // Load again after freeing one: the new module must be the new bytes.
  auto c = Module::LoadBytes(testing::PackArtifact(
      {{"manifest", testing::Manifest(kN)}, {"module.so", *so_}, {"weights", weights2}}));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> oc(kN);
  ASSERT_TRUE((*c)->Run({in.data()}, {oc.data()}).ok());
  EXPECT_FLOAT_EQ(oc[10], 2.f);
}

TEST_F(LoadedModule, RunCheckedNamesTheWrongSizedTensor) {
  auto m = Module::LoadBytes(testing::PackArtifact(Sections(*so_)));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<float> in(kN - 1), out(kN);
  absl::Status s = (*m)->RunChecked({{in.data(), kN - 1}}, {{out.data(), kN}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("input 'data': expected shape 2x500 (1000 elements), given 999 elements"));
  std::vector<float> in2(kN);
  s = (*m)->RunChecked({{in2.data(), kN}}, {{out.data(), 5}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("output 'out'"));
  s = (*m)->RunChecked({}, {{out.data(), kN}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("takes 1 inputs"));
}

TEST_F(LoadedModule, MissingEntryAndBadSharedObject) {
  std::string manifest = testing::Manifest(kN);
  manifest.replace(manifest.find("entry kiln_main"), 15, "entry not_there");
  auto m = Module::LoadBytes(testing::PackArtifact(
      {{"manifest", manifest}, {"module.so", *so_}, {"weights", testing::Weights(kN)}}));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("entry point 'not_there'"));
  auto bad = Module::LoadBytes(testing::PackArtifact(Sections("not an ELF file")));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("cannot load the module.so section"));
  auto short_weights = Module::LoadBytes(testing::PackArtifact(
      {{"manifest", testing::Manifest(kN)}, {"module.so", *so_}, {"weights", "abcd"}}));
  ASSERT_FALSE(short_weights.ok());
  EXPECT_EQ(short_weights.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(short_weights.status().message(), HasSubstr("weights_bytes 4000"));
}

TEST_F(LoadedModule, CApi) {
  std::string path = *dir_ + "/c_api.kiln";
  testing::WriteFile(path, testing::PackArtifact(Sections(*so_)));
  char err[256] = "unset";
  kiln_module* m = nullptr;
  ASSERT_EQ(kiln_module_load(path.c_str(), &m, err, sizeof(err)), 0) << err;
  EXPECT_EQ(kiln_module_num_inputs(m), 1);
  EXPECT_EQ(kiln_module_num_outputs(m), 1);
  EXPECT_STREQ(kiln_module_input_name(m, 0), "data");
  EXPECT_STREQ(kiln_module_output_name(m, 0), "out");
  EXPECT_EQ(kiln_module_input_name(m, 1), nullptr);
  int64_t dims[4] = {0, 0, 0, 0};
  EXPECT_EQ(kiln_module_input_shape(m, 0, dims, 4), 2);
  EXPECT_EQ(dims[0], 2);
  EXPECT_EQ(dims[1], kN / 2);
  EXPECT_EQ(kiln_module_output_ndim(m, 0), 2);
  EXPECT_EQ(kiln_module_output_size(m, 0), kN);
  std::vector<float> in(kN, 3.f), out(kN);
  const float* ins[] = {in.data()};
  float* outs[] = {out.data()};
  ASSERT_EQ(kiln_module_run(m, ins, outs), 0) << kiln_module_last_error(m);
  EXPECT_FLOAT_EQ(out[4], 6.f + 2.f);
  kiln_module_free(m);

  kiln_module* none = nullptr;
  EXPECT_EQ(kiln_module_load("/nonexistent/x.kiln", &none, err, sizeof(err)), -1);
  EXPECT_EQ(none, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("cannot open artifact"));
}

}  // namespace
}  // namespace kiln::deploy
