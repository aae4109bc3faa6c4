#include "deploy/artifact.h"

#include <optional>
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
  absl::StatusOr<Container> c = ParseContainer(testing::PackArtifact(Sections("x"), 3));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("version 3"));
}

// Version 1 had no digests: refused, saying to recompile.
TEST(Container, VersionOneIsRefusedWithAdvice) {
  absl::StatusOr<Container> c =
      ParseContainer(testing::PackArtifact(Sections("x"), 1, /*digests=*/false));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("version 1 carries no digests"));
  EXPECT_THAT(c.status().message(), HasSubstr("recompile"));
}

TEST(Container, TruncatedSection) {
  std::string bytes = testing::PackArtifact(Sections(std::string(200, 'x')));
  absl::StatusOr<Container> c = ParseContainer(bytes.substr(0, bytes.size() - 100));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("section 'weights'"));
  EXPECT_THAT(c.status().message(), HasSubstr("runs past the end of the file"));
  // Cut inside the section headers.
  absl::StatusOr<Container> h = ParseContainer(bytes.substr(0, 170));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(h.status().message(), HasSubstr("section header"));
}

TEST(Container, MissingSection) {
  absl::StatusOr<Container> c = ParseContainer(
      testing::PackArtifact({{"manifest", testing::Manifest(kN)}, {"weights", "abcd"}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), HasSubstr("missing section 'module.so'"));
}

TEST(Container, ParsesSections) {
  absl::StatusOr<Container> c = ParseContainer(testing::PackArtifact(Sections("SO")));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sections.at("module.so"), "SO");
  EXPECT_EQ(c->sections.at("manifest").substr(0, testing::Manifest(kN).size()),
            testing::Manifest(kN));
  EXPECT_EQ(c->manifest_sha256, testing::Sha256(c->sections.at("manifest")));
  EXPECT_EQ(c->scheme, SignatureScheme::kNone);
  EXPECT_EQ(c->sections.at("weights").size(), kN * 4u);
}

TEST(ManifestText, ParsesEveryField) {
  absl::StatusOr<Manifest> m = ParseManifest(
      "kiln-artifact 2\n"
      "target llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512\n"
      "compiler_version 0.1.0\nmodel_sha256 3f5a\nentry kiln_main\n"
      "workspace_bytes 131072\nweights_bytes 52736\nkernels 5\ntuned_kernels 3\n"
      "some_new_key 42\n"
      "input data float32 1x3x32x32\ninput s float32 scalar\ninput ids int64 2x7\n"
      "output logits float32 1x10\noutput mask bool 1x10\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format_version, 2);
  EXPECT_EQ(m->target, "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512");
  EXPECT_EQ(m->compiler_version, "0.1.0");
  EXPECT_EQ(m->model_sha256, "3f5a");
  EXPECT_EQ(m->entry, "kiln_main");
  EXPECT_EQ(m->workspace_bytes, 131072);
  EXPECT_EQ(m->weights_bytes, 52736);
  EXPECT_EQ(m->kernels, 5);
  EXPECT_EQ(m->tuned_kernels, 3);
  ASSERT_EQ(m->inputs.size(), 3u);
  EXPECT_EQ(m->inputs[0].name, "data");
  EXPECT_EQ(m->inputs[0].dtype, DType::kFloat32);
  EXPECT_THAT(m->inputs[0].shape, ElementsAre(1, 3, 32, 32));
  EXPECT_EQ(m->inputs[0].NumElements(), 3072);
  EXPECT_EQ(m->inputs[0].ByteSize(), 3072 * 4);
  EXPECT_TRUE(m->inputs[1].shape.empty());
  EXPECT_EQ(m->inputs[1].NumElements(), 1);
  EXPECT_EQ(m->inputs[2].dtype, DType::kInt64);
  EXPECT_EQ(m->inputs[2].ByteSize(), 14 * 8);
  ASSERT_EQ(m->outputs.size(), 2u);
  EXPECT_EQ(m->outputs[0].name, "logits");
  EXPECT_EQ(ShapeToString(m->outputs[0].shape), "1x10");
  EXPECT_EQ(m->outputs[1].dtype, DType::kBool);
  EXPECT_EQ(m->outputs[1].ByteSize(), 10);  // one byte per bool
}

TEST(ManifestText, EveryDTypeNameIsAccepted) {
  for (int code = 0; code < 32; ++code) {
    std::optional<DType> d = DTypeFromOnnx(code);
    if (!d) continue;
    std::string name = DTypeName(*d);
    absl::StatusOr<Manifest> m = ParseManifest("kiln-artifact 2\nentry f\ninput x " + name +
                                               " 2x3\noutput y " + name + " 3\n");
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->inputs[0].dtype, *d) << name;
    EXPECT_EQ(m->outputs[0].dtype, *d) << name;
    EXPECT_EQ(m->inputs[0].ByteSize(), 6 * DTypeBytes(*d)) << name;
  }
}

TEST(ManifestText, BadLinesAreNamed) {
  auto err = [](const std::string& text) {
    absl::StatusOr<Manifest> m = ParseManifest(text);
    EXPECT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(m.status().message());
  };
  EXPECT_THAT(err("kiln-artifact 2\nentry f\ninput x float32 1xQ\n"), HasSubstr("manifest line 3"));
  EXPECT_THAT(err("kiln-artifact 2\nentry f\ninput x float32 1xQ\n"), HasSubstr("bad shape '1xQ'"));
  EXPECT_THAT(err("kiln-artifact 2\nentry f\nworkspace_bytes lots\n"),
              HasSubstr("manifest line 3"));
  for (std::string dtype : {"int9", "float8e8m0", "string", "float", "FLOAT32", "f4"}) {
    std::string e = err("kiln-artifact 2\nentry f\noutput y " + dtype + " 4\n");
    EXPECT_THAT(e, HasSubstr("manifest line 3"));
    EXPECT_THAT(e, HasSubstr("unknown dtype '" + dtype + "'"));
    EXPECT_THAT(e, HasSubstr("expected one of float32, uint8, int8,"));
    EXPECT_THAT(e, HasSubstr("bool"));
  }
  EXPECT_THAT(err("kiln-artifact 2\nentry f\ninput x int64 4611686018427387904\n"),
              HasSubstr("bad shape"));  // 2^62 elements: more bytes than an int64 holds
  EXPECT_THAT(err("kiln-artifact 2\nentry f\noutput y float32\n"), HasSubstr("manifest line 3"));
  EXPECT_THAT(err("kiln-artifact 1\n"), HasSubstr("unsupported manifest version 1"));
  EXPECT_THAT(err("kiln-artifact 2\nentry f\nsection weights sha256 abc\n"),
              HasSubstr("64 lowercase hex digits"));
  EXPECT_THAT(
      err("kiln-artifact 2\nentry f\nsection manifest sha256 " + std::string(64, 'a') + "\n"),
      HasSubstr("the manifest's digest is in the header"));
  EXPECT_THAT(err("kiln-artifact 2\nentry f\nsection w sha256 " + std::string(64, 'a') +
                  "\nsection w sha256 " + std::string(64, 'b') + "\n"),
              HasSubstr("listed twice"));
  EXPECT_THAT(err("hello\n"), HasSubstr("manifest line 1"));
  EXPECT_THAT(err("kiln-artifact 2\noutput y float32 4\n"), HasSubstr("no 'entry'"));
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
  ASSERT_TRUE(
      (*m)->RunChecked({{in.data(), DType::kFloat32, kN}}, {{out.data(), DType::kFloat32, kN}})
          .ok());
  for (int i = 0; i < kN; ++i) ASSERT_FLOAT_EQ(out[i], in[i] * 2 + 0.5f * i) << i;
}

// An artifact for another architecture's CPU (a board's) is refused by
// name before its code is loaded.
TEST_F(LoadedModule, AnotherArchitecturesArtifactIsRefusedSayingWhich) {
  std::string manifest = testing::Manifest(kN);
  const std::string ours = "-mtriple=x86_64-pc-linux-gnu";
#if defined(__x86_64__)
  const std::string theirs = "-mtriple=aarch64-linux-gnu -mcpu=cortex-a76";
  const std::string arch = "aarch64";
#else
  const std::string theirs = "-mtriple=x86_64-pc-linux-gnu";
  const std::string arch = "x86_64";
#endif
  manifest.replace(manifest.find(ours), ours.size(), theirs);
  auto m = Module::LoadBytes(testing::PackArtifact(
      {{"manifest", manifest}, {"module.so", *so_}, {"weights", std::string(kN * 4, '\0')}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("this artifact is compiled for " + arch));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("kiln-run built for " + arch));
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
  absl::Status s =
      (*m)->RunChecked({{in.data(), DType::kFloat32, kN - 1}}, {{out.data(), DType::kFloat32, kN}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("input 'data': expected float32 2x500 (1000 elements), given float32 with "
                        "999 elements"));
  std::vector<float> in2(kN);
  s = (*m)->RunChecked({{in2.data(), DType::kFloat32, kN}}, {{out.data(), DType::kFloat32, 5}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("output 'out': expected float32 2x500"));
  s = (*m)->RunChecked({}, {{out.data(), DType::kFloat32, kN}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("takes 1 inputs"));
}

TEST_F(LoadedModule, RunCheckedNamesTheWrongDType) {
  auto m = Module::LoadBytes(testing::PackArtifact(Sections(*so_)));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<int32_t> in(kN);
  std::vector<float> out(kN, -1.f);
  absl::Status s =
      (*m)->RunChecked({{in.data(), DType::kInt32, kN}}, {{out.data(), DType::kFloat32, kN}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("input 'data': expected float32 2x500, given int32 2x500"));
  std::vector<double> out64(kN);
  std::vector<float> in32(kN);
  s = (*m)->RunChecked({{in32.data(), DType::kFloat32, kN}}, {{out64.data(), DType::kFloat64, kN}});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("output 'out': expected float32 2x500, given float64 2x500"));
  EXPECT_EQ(out[0], -1.f);  // nothing ran
}

TEST_F(LoadedModule, RunsAnInt64Module) {
  std::string so = testing::CompileModule(*dir_, kN, "int64_t");
  ASSERT_FALSE(so.empty());
  auto m = Module::LoadBytes(
      testing::PackArtifact({{"manifest", testing::Manifest(kN, "kiln_main", DType::kInt64)},
                             {"module.so", so},
                             {"weights", testing::Weights<int64_t>(kN)}}));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->manifest().inputs[0].dtype, DType::kInt64);
  EXPECT_EQ((*m)->manifest().inputs[0].ByteSize(), kN * 8);
  std::vector<int64_t> in(kN), out(kN, -1);
  for (int i = 0; i < kN; ++i) in[i] = (int64_t{1} << 40) * (i % 3) - i;
  std::vector<float> wrong(kN);
  absl::Status s =
      (*m)->RunChecked({{wrong.data(), DType::kFloat32, kN}}, {{out.data(), DType::kInt64, kN}});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("input 'data': expected int64 2x500, given float32 2x500"));
  ASSERT_TRUE(
      (*m)->RunChecked({{in.data(), DType::kInt64, kN}}, {{out.data(), DType::kInt64, kN}}).ok());
  for (int i = 0; i < kN; ++i) ASSERT_EQ(out[i], in[i] * 2 + i) << i;
}

TEST_F(LoadedModule, NullBuffersOnlyForTensorsWithoutElements) {
  auto m = Module::LoadBytes(testing::PackArtifact(Sections(*so_)));
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<float> in(kN), out(kN);
  absl::Status s = (*m)->Run({nullptr}, {out.data()});
  EXPECT_THAT(std::string(s.message()), HasSubstr("input 'data' is a null buffer"));
  s = (*m)->Run({in.data()}, {nullptr});
  EXPECT_THAT(std::string(s.message()), HasSubstr("output 'out' is a null buffer"));
  // A 2x0 model: empty std::vectors' data() may be null.
  std::string so0 = testing::CompileModule(*dir_, 0, "int32_t");
  ASSERT_FALSE(so0.empty());
  auto empty = Module::LoadBytes(
      testing::PackArtifact({{"manifest", testing::Manifest(0, "kiln_main", DType::kInt32)},
                             {"module.so", so0},
                             {"weights", ""}}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)->manifest().inputs[0].ByteSize(), 0);
  EXPECT_TRUE((*empty)->Run({nullptr}, {nullptr}).ok());
  EXPECT_TRUE(
      (*empty)->RunChecked({{nullptr, DType::kInt32, 0}}, {{nullptr, DType::kInt32, 0}}).ok());
}

// A manifest that asks for buffers no machine has is refused before anything
// is allocated (it used to end in std::bad_alloc).
TEST_F(LoadedModule, AbsurdBufferSizesAreRefused) {
  auto load = [&](const std::string& from, const std::string& to) {
    std::string manifest = testing::Manifest(kN);
    manifest.replace(manifest.find(from), from.size(), to);
    return Module::LoadBytes(testing::PackArtifact(
        {{"manifest", manifest}, {"module.so", *so_}, {"weights", testing::Weights(kN)}}));
  };
  auto ws = load("workspace_bytes 256", "workspace_bytes 1152921504606846976");
  ASSERT_FALSE(ws.ok());
  EXPECT_EQ(ws.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(ws.status().message(), HasSubstr("workspace needs 1152921504606846976 bytes"));
  auto out = load("output out float32 2x", "output out float32 1099511627776x");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("output 'out' needs"));
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
  EXPECT_EQ(kiln_module_input_size(m, 0), kN);
  EXPECT_EQ(kiln_module_input_size(m, 1), -1);
  EXPECT_EQ(kiln_module_output_bytes(m, 0), kN * 4);
  EXPECT_EQ(kiln_module_input_bytes(m, 0), kN * 4);
  EXPECT_EQ(kiln_module_input_bytes(m, -1), -1);
  EXPECT_STREQ(kiln_module_input_dtype(m, 0), "float32");
  EXPECT_STREQ(kiln_module_output_dtype(m, 0), "float32");
  EXPECT_EQ(kiln_module_input_dtype(m, 1), nullptr);
  EXPECT_EQ(kiln_module_output_dtype(nullptr, 0), nullptr);
  std::vector<float> in(kN, 3.f), out(kN);
  const void* ins[] = {in.data()};
  void* outs[] = {out.data()};
  ASSERT_EQ(kiln_module_run(m, ins, outs), 0) << kiln_module_last_error(m);
  EXPECT_FLOAT_EQ(out[4], 6.f + 2.f);
  kiln_module_free(m);

  // A uint8 module through the C API.
  std::string so8 = testing::CompileModule(*dir_, kN, "uint8_t");
  ASSERT_FALSE(so8.empty());
  std::string path8 = *dir_ + "/c_api_u8.kiln";
  testing::WriteFile(
      path8, testing::PackArtifact({{"manifest", testing::Manifest(kN, "kiln_main", DType::kUInt8)},
                                    {"module.so", so8},
                                    {"weights", testing::Weights<uint8_t>(kN)}}));
  ASSERT_EQ(kiln_module_load(path8.c_str(), &m, err, sizeof(err)), 0) << err;
  EXPECT_STREQ(kiln_module_input_dtype(m, 0), "uint8");
  EXPECT_STREQ(kiln_module_output_dtype(m, 0), "uint8");
  EXPECT_EQ(kiln_module_input_size(m, 0), kN);
  EXPECT_EQ(kiln_module_output_bytes(m, 0), kN);
  std::vector<uint8_t> in8(kN, 100), out8(kN);
  const void* ins8[] = {in8.data()};
  void* outs8[] = {out8.data()};
  ASSERT_EQ(kiln_module_run(m, ins8, outs8), 0) << kiln_module_last_error(m);
  EXPECT_EQ(out8[3], 203);
  EXPECT_EQ(out8[100], static_cast<uint8_t>(200 + 100));  // wraps like the C code
  kiln_module_free(m);

  kiln_module* none = nullptr;
  EXPECT_EQ(kiln_module_load("/nonexistent/x.kiln", &none, err, sizeof(err)), -1);
  EXPECT_EQ(none, nullptr);
  EXPECT_THAT(std::string(err), HasSubstr("cannot open artifact"));
}

}  // namespace
}  // namespace kiln::deploy
