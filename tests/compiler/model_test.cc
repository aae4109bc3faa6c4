#include "compiler/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/str.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/passes.h"
#include "compiler/target.h"
#include "deploy/artifact.h"
#include "deploy/runtime.h"
#include "tests/compiler/graph_eval.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

const std::string kSmallCnn = std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx";

std::vector<float> SmallCnnInput() {
  std::vector<float> x(3 * 32 * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.01f);
  return x;
}

// onnxruntime 1.31's output for SmallCnnInput() (see models/README.md).
const float kOrtLogits[10] = {4.428879f,  1.966671f, 2.773747f, 3.308437f,  -4.055731f,
                              -0.023411f, 0.887098f, 1.553743f, -0.773245f, 1.392855f};

TEST(Model, SmallCnnTasks) {
  auto m = Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->source_sha256(), "bb3ef0f1ad5e79d8170c678ab285525cddaa00f3f07ec70dfa8011e931bc3188");
  const auto& tasks = m->Tasks();
  ASSERT_EQ(tasks.size(), 6u);
  std::vector<std::string> ops;
  for (const Task& t : tasks) ops.push_back(std::string(NameOf(t.workload.op)));
  EXPECT_THAT(ops,
              ::testing::ElementsAre("conv2d", "pool2d", "conv2d", "pool2d", "conv2d", "dense"));
  // The layout plan: the first conv writes 16-channel blocks for the pool
  // after it; the last one writes NCHW for the classifier's Flatten.
  EXPECT_EQ(tasks[0].workload.Canonical(),
            "conv2d(C=3;H=32;K=16;N=1;OH=32;OW=32;R=3;S=3;W=32;bias=1;dilation=1,1;groups=1;"
            "out_block=16;pad=1,1,1,1;stride=1,1)|relu");
  EXPECT_EQ(tasks[1].workload.IntOr("in_block", 0), 16);
  EXPECT_EQ(tasks[1].workload.IntOr("out_block", 0), 16);
  EXPECT_EQ(tasks[4].workload.Canonical(),
            "conv2d(C=32;H=8;K=32;N=1;OH=8;OW=8;R=3;S=3;W=8;bias=1;dilation=1,1;groups=1;"
            "pad=1,1,1,1;stride=1,1)|add:1,32,8,8|relu");
  EXPECT_EQ(tasks[5].workload.Canonical(),
            "dense(K=2048;M=1;N=10;batch=1;batch_a=0;batch_b=0;bias=1;bias_shape=1,10;transA=0;"
            "transB=1)");
  for (const Task& t : tasks) EXPECT_EQ(t.occurrences, 1);
}

TEST(Model, SmallCnnMatchesOnnxRuntimeWithReferenceKernels) {
  auto m = Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  auto vals = testing::EvaluateGraph(g, {SmallCnnInput()});
  ASSERT_FALSE(vals.empty());
  const auto& y = vals.at(g.outputs[0]);
  ASSERT_EQ(y.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(y[i], kOrtLogits[i], 1e-4) << i;
}

TEST(Model, MissingFileIsNotFound) {
  auto m = Model::FromOnnxFile("/nonexistent/model.onnx");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

// ---- CompileModel: container, manifest, memory plan, and a real run. ----

std::string ManifestOf(const std::string& artifact) {
  auto c = deploy::ParseContainer(artifact);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::string(c->sections.at("manifest")) : std::string();
}

TEST(CompileModel, SmallCnnArtifactRunsAndMatchesOnnxRuntime) {
  auto m = Model::FromOnnxFile(kSmallCnn);
  ASSERT_TRUE(m.ok()) << m.status();
  CompileReport report;
  Target host = Target::Host();
  auto art = CompileModel(*m, host, nullptr, {}, &report);
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(report.kernels, 6);
  EXPECT_EQ(report.tuned_kernels, 0);
  ASSERT_GE(art->size(), 64u);
  EXPECT_EQ(art->substr(0, 8), "KILNART1");
  auto c = deploy::ParseContainer(*art);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const auto& [name, data] : c->sections) {
    EXPECT_EQ((data.data() - art->data()) % 64, 0) << name;
  }
  auto manifest = deploy::ParseManifest(c->sections.at("manifest"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->entry, "kiln_main");
  EXPECT_EQ(manifest->target, host.Spec());
  EXPECT_EQ(manifest->model_sha256, m->source_sha256());
  EXPECT_EQ(manifest->kernels, 6);
  // Intermediates r1 64 KiB, p1 16 KiB, r2 32 KiB, p2 8 KiB, r3 8 KiB: the
  // planner reuses r1's region for r2 and r3, and p1's for p2.
  EXPECT_EQ(manifest->workspace_bytes, 81920);
  // Weights: 4 conv/fc weight tensors and 4 biases, each 64-byte aligned.
  // The 3x3 layers on 32x32 and 16x16 run Winograd F(4x4, 3x3) (layout=4),
  // their weights stored transformed: 6x6 instead of 3x3 per channel pair.
  EXPECT_EQ(manifest->weights_bytes, 4 * 1728 + 64 + 4 * 18432 + 128 + 36864 + 128 + 81920 + 64);
  ASSERT_EQ(manifest->inputs.size(), 1u);
  EXPECT_EQ(manifest->inputs[0].name, "data");
  EXPECT_EQ(manifest->inputs[0].shape, (std::vector<int64_t>{1, 3, 32, 32}));
  ASSERT_EQ(manifest->outputs.size(), 1u);
  EXPECT_EQ(manifest->outputs[0].name, "logits");

  auto module = deploy::Module::LoadBytes(*art);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<float> x = SmallCnnInput(), y(10, -1.0f);
  ASSERT_TRUE((*module)->Run({x.data()}, {y.data()}).ok());
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(y[i], kOrtLogits[i], 1e-3) << i;
}

TEST(CompileModel, TunedLookupIsCountedAndIdentityOutputIsCopied) {
  testing::OnnxBuilder b;
  b.Input("x", {2, 3});
  b.Node("Identity", {"x"}, {"y"});
  b.Node("Relu", {"x"}, {"z"});
  b.Output("y");
  b.Output("z");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  Target host = Target::Host();
  ConfigLookup lookup = [&](const Workload& w) -> std::optional<Config> {
    if (w.epilogue.empty()) return std::nullopt;  // the copy: default config
    auto d = DefaultConfig(w, host);
    return d.ok() ? std::optional<Config>(*d) : std::nullopt;
  };
  CompileReport report;
  auto art = CompileModel(*m, host, lookup, {}, &report);
  ASSERT_TRUE(art.ok()) << art.status();
  EXPECT_EQ(report.kernels, 2);  // relu, and the copy of x into y
  EXPECT_EQ(report.tuned_kernels, 1);
  auto module = deploy::Module::LoadBytes(*art);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<float> x = {1, -2, 3, -4, 5, -6}, y(6), z(6);
  ASSERT_TRUE((*module)->Run({x.data()}, {y.data(), z.data()}).ok());
  EXPECT_THAT(y, ::testing::ElementsAre(1, -2, 3, -4, 5, -6));
  EXPECT_THAT(z, ::testing::ElementsAre(1, 0, 3, 0, 5, 0));
}

// Packed inputs (PackedInput): a convolution whose weights are a constant
// reads them packed at compile time; one whose weights are a model input
// (or computed) has them packed by a kernel just before it, into the
// workspace. Two convolutions of each kind, sharing and not sharing weights.
// PlanLayouts: a chain of convolutions and pools passes NCHW[16]c tensors,
// each kernel reading and writing the blocks its workload names (Winograd
// from NCHW into blocks and from blocks into blocks with a residual operand
// in blocks, depthwise, max pool, a 1x1 NCHWc conv, a global pool from
// blocks into NCHW for Flatten), and the compiled module computes what the
// unplanned graph does.
TEST(CompileModel, PlannedLayoutsRunAndMatchTheReference) {
  testing::OnnxBuilder b;
  auto ramp = [](int64_t n, float scale) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = 0.2f * std::sin(static_cast<float>(i) * scale);
    return v;
  };
  b.Input("x", {1, 16, 12, 12});
  b.Init("wa", {32, 16, 3, 3}, ramp(32 * 16 * 9, 0.31f));
  b.Init("wb", {32, 32, 3, 3}, ramp(32 * 32 * 9, 0.17f));
  b.Init("wd", {32, 1, 3, 3}, ramp(32 * 9, 0.7f));
  b.Init("wc", {16, 32, 1, 1}, ramp(16 * 32, 0.23f));
  b.Init("bias", {32}, ramp(32, 0.5f));
  auto conv = [&](const char* in, const char* w, const char* out, bool bias, int64_t pad) {
    std::vector<std::string> ins = {in, w};
    if (bias) ins.push_back("bias");
    auto* n = b.Node("Conv", ins, {out});
    testing::OnnxBuilder::Ints(n, "pads", {pad, pad, pad, pad});
    return n;
  };
  conv("x", "wa", "ca", true, 1);
  b.Node("Relu", {"ca"}, {"a"});
  conv("a", "wb", "cb", false, 1);
  b.Node("Add", {"cb", "a"}, {"sb"});
  b.Node("Relu", {"sb"}, {"s"});
  testing::OnnxBuilder::Int(conv("s", "wd", "cd", true, 1), "group", 32);
  b.Node("Relu", {"cd"}, {"d"});
  auto* mp = b.Node("MaxPool", {"d"}, {"p"});
  testing::OnnxBuilder::Ints(mp, "kernel_shape", {2, 2});
  testing::OnnxBuilder::Ints(mp, "strides", {2, 2});
  conv("p", "wc", "c", false, 0);
  b.Node("GlobalAveragePool", {"c"}, {"g"});
  b.Node("Flatten", {"g"}, {"y"});
  b.Output("y");
  const std::string bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  std::vector<float> x(16 * 144);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i) * 0.013f);
  auto want = testing::EvaluateGraph(**raw, {x});
  ASSERT_FALSE(want.empty());

  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  std::vector<std::string> blocks;
  for (const Node& n : g.nodes) {
    if (n.kind != NodeKind::kCompute) continue;
    blocks.push_back(StrCat(n.workload.op, ":", n.workload.IntOr("in_block", 0), ">",
                            n.workload.IntOr("out_block", 0)));
  }
  EXPECT_THAT(blocks, ::testing::ElementsAre("conv2d:0>16", "conv2d:16>16", "conv2d:16>16",
                                             "pool2d:16>16", "conv2d:16>16", "pool2d:16>0"));
  // The residual operand is read in the output's blocks.
  EXPECT_EQ(g.nodes[1].workload.epilogue[0].operand_shape,
            (std::vector<int64_t>{1, 2, 12, 12, 16}));
  EXPECT_EQ(g.values[g.nodes[0].output].shape, (std::vector<int64_t>{1, 2, 12, 12, 16}));
  Target host = Target::Host();
  auto layout = [&](int i) { return DefaultConfig(g.nodes[i].workload, host)->at("layout"); };
  EXPECT_EQ(layout(0), 4);
  EXPECT_EQ(layout(1), 4);
  EXPECT_EQ(layout(2), 2);
  EXPECT_EQ(layout(4), 1);
  auto art = CompileModel(*m, host, nullptr);
  ASSERT_TRUE(art.ok()) << art.status();
  auto module = deploy::Module::LoadBytes(*art);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<float> y(16, -1.f);
  ASSERT_TRUE((*module)->Run({x.data()}, {y.data()}).ok());
  const auto& wy = want.at((*raw)->outputs[0]);
  ASSERT_EQ(wy.size(), y.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], wy[i], 1e-4) << i;
}

TEST(CompileModel, PackedWeightsFromConstantsAndFromInputsMatchTheReference) {
  const int64_t K = 2 * Target::Host().NativeVectorLanes();
  std::vector<float> wc(K * 8 * 9);
  for (size_t i = 0; i < wc.size(); ++i) wc[i] = std::cos(static_cast<float>(i) * 0.37f);
  testing::OnnxBuilder b;
  b.Input("x", {1, 8, 10, 10});
  b.Input("w", {K, 8, 3, 3});
  b.Init("wc", {K, 8, 3, 3}, wc);
  for (const char* y : {"y1", "y2", "y3"}) {
    auto* n = b.Node("Conv", {"x", y == std::string("y3") ? "wc" : "w"}, {y});
    testing::OnnxBuilder::Ints(n, "pads", {1, 1, 1, 1});
  }
  auto* n = b.Node("Conv", {"x", "wc"}, {"y4"});
  testing::OnnxBuilder::Ints(n, "strides", {2, 2});
  b.Node("Sum", {"y1", "y2", "y3"}, {"y"});
  b.Output("y");
  b.Output("y4");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  Target host = Target::Host();
  CompileReport report;
  auto art = CompileModel(*m, host, nullptr, {}, &report);
  ASSERT_TRUE(art.ok()) << art.status();
  // The convolutions (NCHWc, or Winograd for the stride-1 ones: both take
  // packed weights) and a pack kernel for each one that reads `w`.
  int packs = 0, convs = 0;
  for (const Node& node : m->graph().nodes) {
    if (node.kind != NodeKind::kCompute || node.workload.op != Op::kConv2d) continue;
    ++convs;
    ASSERT_EQ(DefaultConfig(node.workload, host)->at("layout"),
              node.workload.Ints("stride")[0] == 1 ? 4 : 1);
    if (!m->graph().values[AliasRoot(m->graph(), node.inputs[1])].IsConstant()) ++packs;
  }
  EXPECT_EQ(convs, 4);
  EXPECT_EQ(packs, 2);
  EXPECT_EQ(report.kernels, static_cast<int>(m->graph().nodes.size()) + packs);

  std::vector<float> x(8 * 100), w(wc.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i) * 0.05f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i) * 0.11f);
  auto want = testing::EvaluateGraph(m->graph(), {x, w});
  ASSERT_FALSE(want.empty());
  auto module = deploy::Module::LoadBytes(*art);
  ASSERT_TRUE(module.ok()) << module.status();
  const auto& g = m->graph();
  std::vector<float> y(g.values[g.outputs[0]].NumElements(), -1.f);
  std::vector<float> y4(g.values[g.outputs[1]].NumElements(), -1.f);
  ASSERT_TRUE((*module)->Run({x.data(), w.data()}, {y.data(), y4.data()}).ok());
  const auto& wy = want.at(g.outputs[0]);
  const auto& wy4 = want.at(g.outputs[1]);
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], wy[i], 1e-4 * (1 + std::fabs(wy[i]))) << i;
  for (size_t i = 0; i < y4.size(); ++i) {
    ASSERT_NEAR(y4[i], wy4[i], 1e-4 * (1 + std::fabs(wy4[i]))) << i;
  }
}

}  // namespace
}  // namespace kiln::compiler
