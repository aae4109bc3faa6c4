// The graph passes beyond fusion: shared tasks, layouts (channel blocks,
// int8 bytes in blocks), bf16 products, views, constant and batch-norm
// folding, the memory plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/memory_plan.h"
#include "compiler/graph/passes.h"
#include "compiler/model.h"
#include "deploy/runtime.h"
#include "tests/compiler/graph_eval.h"
#include "tests/compiler/graph_test_util.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using ::testing::ElementsAre;
using testing::OnnxBuilder;

TEST(Tasks, IdenticalGroupsShareOneTask) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Input("z", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0, 0, 0, 0});
  AddConv(b, "x", "c1", "w");
  AddConv(b, "z", "c2", "w");
  b.Node("Relu", {"c1"}, {"r1"});
  b.Node("Relu", {"c2"}, {"r2"});
  b.Output("r1");
  b.Output("r2");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->Tasks().size(), 1u);
  EXPECT_EQ(m->Tasks()[0].occurrences, 2);
}

// A node's (in_block, out_block).
std::pair<int64_t, int64_t> BlocksOf(const Workload& w) {
  return {w.IntOr("in_block", 0), w.IntOr("out_block", 0)};
}

// PlanLayouts keeps NCHW where a consumer cannot read blocks: a conv whose
// 24 output channels no NCHWc template covers reads its input as NCHW, so
// its producer writes NCHW; the other conv's blocks stay.
TEST(Layouts, AConsumerWithoutBlocksKeepsItsInputNchw) {
  OnnxBuilder b;
  b.Input("x", {1, 16, 8, 8});
  b.Init("wa", {32, 16, 1, 1}, Ramp(512, 0.3f, 0));
  b.Init("wb", {24, 32, 1, 1}, Ramp(768, 0.2f, 0));
  b.Init("wd", {16, 16, 1, 1}, Ramp(256, 0.4f, 0));
  b.Node("Conv", {"x", "wa"}, {"a"});
  b.Node("Conv", {"a", "wb"}, {"y1"});
  b.Node("Conv", {"x", "wd"}, {"d"});
  b.Node("Conv", {"d", "wd"}, {"y2"});
  b.Output("y1");
  b.Output("y2");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(g.nodes.size(), 4u);
  auto blocks = [&](int i) { return BlocksOf(g.nodes[i].workload); };
  EXPECT_EQ(blocks(0), std::make_pair(int64_t{0}, int64_t{0}));  // a: read by the K=24 conv
  EXPECT_EQ(blocks(1), std::make_pair(int64_t{0}, int64_t{0}));  // y1: a graph output
  EXPECT_EQ(blocks(2), std::make_pair(int64_t{0}, int64_t{16}));
  EXPECT_EQ(blocks(3), std::make_pair(int64_t{16}, int64_t{0}));
  EXPECT_EQ(g.values[g.nodes[0].output].shape, (std::vector<int64_t>{1, 32, 8, 8}));
  EXPECT_EQ(g.values[g.nodes[2].output].shape, (std::vector<int64_t>{1, 1, 8, 8, 16}));
}

// Two QDQ int8 convs (AddQdqConv's, then 16 -> 16 channels 3x3), the first
// one's output quantized and dequantized, then `between` (which reads "cd"
// and writes its output's name) before the second: the ONNX bytes.
std::string TwoQdqConvs(const std::function<std::string(OnnxBuilder&)>& between) {
  OnnxBuilder b;
  std::vector<float> ws(16);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = 0.004f + 0.001f * static_cast<float>(i);
  AddQdqConv(b, ws, 37);
  b.Init("sc", {}, {0.07f});
  b.InitInts("zc", {}, onnx::TensorProto::UINT8, {120});
  b.Node("QuantizeLinear", {"c", "sc", "zc"}, {"cq"});
  b.Node("DequantizeLinear", {"cq", "sc", "zc"}, {"cd"});
  const std::string in2 = between(b);
  std::vector<int32_t> w2(16 * 16 * 9);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<int32_t>((i * 29) % 255) - 127;
  b.InitInts("w2", {16, 16, 3, 3}, onnx::TensorProto::INT8, w2);
  b.Init("ws2", {16}, ws);
  b.InitInts("wz2", {16}, onnx::TensorProto::INT8, std::vector<int32_t>(16, 0));
  b.Init("w2d_b", {16}, Ramp(16, 0.7f, -0.2f));
  OnnxBuilder::Int(b.Node("DequantizeLinear", {"w2", "ws2", "wz2"}, {"w2d"}), "axis", 0);
  AddConv(b, in2, "c2", "w2d");
  b.Init("sy", {}, {0.11f});
  b.InitInts("zy", {}, onnx::TensorProto::UINT8, {90});
  b.Node("QuantizeLinear", {"c2", "sy", "zy"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  b.Output("y");
  return b.Bytes();
}

// Two QDQ convs in a row: the first writes its bytes in channel blocks
// (NCHW[16]c, its requantizing scales per block), the second reads them and
// writes NCHW for the DequantizeLinear behind it; the graph computes what
// it computed as imported, within one output step (FoldRequantScales'
// rounding ties).
TEST(Layouts, Int8ConvsPassChannelBlocksOfBytes) {
  auto bytes = TwoQdqConvs([](OnnxBuilder&) { return std::string("cd"); });
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  std::vector<const Node*> convs;
  for (const Node& n : g.nodes) {
    if (n.workload.op == Op::kConv) convs.push_back(&n);
  }
  ASSERT_EQ(convs.size(), 2u);
  EXPECT_EQ(BlocksOf(convs[0]->workload), std::make_pair(int64_t{0}, int64_t{16}));
  EXPECT_EQ(BlocksOf(convs[1]->workload), std::make_pair(int64_t{16}, int64_t{0}));
  EXPECT_EQ(g.values[convs[0]->output].shape, (std::vector<int64_t>{1, 1, 6, 6, 16}));
  EXPECT_EQ(g.values[convs[0]->output].dtype, DType::kUInt8);
  EXPECT_EQ(convs[1]->workload.Ints("in0"), (std::vector<int64_t>{1, 1, 6, 6, 16}));
  ExpectWithinOneStep(**raw, g, Ramp(144, 0.31f, 0.2f), 0.11f, 4);
}

// QDQ's MaxPool between two int8 convs (ResNet's stem: Conv, Q, DQ,
// MaxPool, Q, DQ, Conv) is a pool of the first conv's dequantized output
// whose epilogue quantizes it: it reads the first conv's blocks and writes
// blocks of bytes that the second conv reads, so the stem conv writes
// blocks (as NCHW for the pool, it ran 6x slower on a Zen 3 EPYC), and
// the graph computes what the unfused one does, within one output step.
TEST(Layouts, AQuantizingPoolPassesBlocksBetweenInt8Convs) {
  auto bytes = TwoQdqConvs([](OnnxBuilder& b) {
    auto* pool = b.Node("MaxPool", {"cd"}, {"p"});
    OnnxBuilder::Ints(pool, "kernel_shape", {3, 3});
    OnnxBuilder::Ints(pool, "strides", {2, 2});
    OnnxBuilder::Ints(pool, "pads", {1, 1, 1, 1});
    b.Node("QuantizeLinear", {"p", "sc", "zc"}, {"pq"});
    b.Node("DequantizeLinear", {"pq", "sc", "zc"}, {"pd"});
    return std::string("pd");
  });
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  std::vector<const Node*> convs, pools;
  for (const Node& n : g.nodes) {
    if (n.workload.op == Op::kConv) convs.push_back(&n);
    if (n.workload.op == Op::kPool2d) pools.push_back(&n);
  }
  ASSERT_EQ(convs.size(), 2u);
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(BlocksOf(convs[0]->workload), std::make_pair(int64_t{0}, int64_t{16}));
  EXPECT_EQ(BlocksOf(pools[0]->workload), std::make_pair(int64_t{16}, int64_t{16}));
  EXPECT_EQ(BlocksOf(convs[1]->workload), std::make_pair(int64_t{16}, int64_t{0}));
  EXPECT_EQ(g.values[pools[0]->output].shape, (std::vector<int64_t>{1, 1, 3, 3, 16}));
  EXPECT_EQ(g.values[pools[0]->output].dtype, DType::kUInt8);
  ExpectWithinOneStep(**raw, g, Ramp(144, 0.31f, 0.2f), 0.11f, 4);
}

// A depthwise conv reads its producer's blocks whatever its consumer reads:
// before a conv with 24 output channels (MobileNetV2's projections) it
// writes NCHW from blocks, so the expanding conv before it writes blocks.
// --precision bf16 (UseBf16Products): a MatMul by a constant (a Gemm, a
// Linear layer) computes its products in bfloat16; a MatMul of two
// activations (attention's) stays float32, as does the whole graph at fp32;
// a convolution that writes channel blocks is marked too, but for a CPU
// with AMX-BF16.
// The precision names parse, fp16 with a clear error.
TEST(Precision, Bf16MarksProductsByConstantWeights) {
  OnnxBuilder b;
  b.Input("x", {4, 8});
  b.Input("y", {6, 4});
  b.Init("w", {8, 6}, Ramp(48, 0.1f, -1.f));
  b.Node("MatMul", {"x", "w"}, {"h"});
  b.Node("MatMul", {"h", "y"}, {"z"});
  b.Output("z");
  for (Precision p : {Precision::kFloat32, Precision::kBfloat16}) {
    ImportOptions options;
    options.precision = p;
    auto m = Model::FromOnnx(b.Bytes(), options);
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<int64_t> marks;
    for (const Node& n : m->graph().nodes) {
      if (n.workload.op == Op::kDense) marks.push_back(n.workload.IntOr("bf16", 0));
    }
    EXPECT_EQ(marks, (p == Precision::kBfloat16 ? std::vector<int64_t>{1, 0}
                                                : std::vector<int64_t>{0, 0}));
  }
  // Convolutions: the one writing channel blocks is marked; the last, which
  // writes the graph's NCHW output, stays float32 (conv2d_bf16.cc writes
  // blocks only).
  OnnxBuilder c;
  c.Input("x", {1, 16, 8, 8});
  c.Init("w1", {32, 16, 3, 3}, Ramp(32 * 16 * 9, 0.01f, -1.f));
  c.Init("w2", {16, 32, 1, 1}, Ramp(16 * 32, 0.02f, -1.f));
  OnnxBuilder::Ints(c.Node("Conv", {"x", "w1"}, {"a"}), "pads", {1, 1, 1, 1});
  c.Node("Conv", {"a", "w2"}, {"y"});
  c.Output("y");
  ImportOptions bf16;
  bf16.precision = Precision::kBfloat16;
  auto cm = Model::FromOnnx(c.Bytes(), bf16);
  ASSERT_TRUE(cm.ok()) << cm.status();
  ASSERT_EQ(cm->graph().nodes.size(), 2u);
  EXPECT_EQ(cm->graph().nodes[0].workload.IntOr("bf16", 0), 1);
  EXPECT_EQ(cm->graph().nodes[1].workload.IntOr("bf16", 0), 0);
  // For a CPU with AMX-BF16 (Sapphire Rapids) the conv stays float32 (its
  // vdpbf16ps only matches float32 FMAs); for Zen 4 it is bfloat16.
  // (AMX named: on a host of that model whose VM hides it, the host's
  // features are the target's.)
  for (const char* cpu : {"sapphirerapids -mattr=+amx-tile,+amx-bf16", "znver4"}) {
    ImportOptions o = bf16;
    o.SetTarget(*Target::Parse(std::string("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=") + cpu));
    auto tm = Model::FromOnnx(c.Bytes(), o);
    ASSERT_TRUE(tm.ok()) << tm.status();
    EXPECT_EQ(tm->graph().nodes[0].workload.IntOr("bf16", 0), std::string(cpu) == "znver4") << cpu;
  }
  // Left in float32 though they write blocks: a 3x3 stride-1 layer of 20x20
  // (Winograd's), a 1x1 layer of 16 output channels (too few products per
  // input value to pay for its pack).
  OnnxBuilder d;
  d.Input("x", {1, 16, 20, 20});
  d.Init("w1", {32, 16, 3, 3}, Ramp(32 * 16 * 9, 0.01f, -1.f));
  d.Init("w2", {16, 32, 1, 1}, Ramp(16 * 32, 0.02f, -1.f));
  d.Init("w3", {32, 16, 1, 1}, Ramp(32 * 16, 0.02f, -1.f));
  OnnxBuilder::Ints(d.Node("Conv", {"x", "w1"}, {"a"}), "pads", {1, 1, 1, 1});
  d.Node("Conv", {"a", "w2"}, {"b"});
  d.Node("Conv", {"b", "w3"}, {"y"});
  d.Output("y");
  auto dm = Model::FromOnnx(d.Bytes(), bf16);
  ASSERT_TRUE(dm.ok()) << dm.status();
  ASSERT_EQ(dm->graph().nodes.size(), 3u);
  for (const Node& n : dm->graph().nodes) {
    EXPECT_EQ(n.workload.IntOr("bf16", 0), 0) << n.workload.Canonical();
  }
  EXPECT_EQ(dm->graph().nodes[0].workload.IntOr("out_block", 0), 16);
  EXPECT_EQ(dm->graph().nodes[1].workload.IntOr("out_block", 0), 16);
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBfloat16);
  EXPECT_EQ(*ParsePrecision("fp32"), Precision::kFloat32);
  EXPECT_THAT(std::string(ParsePrecision("fp16").status().message()),
              ::testing::HasSubstr("not supported yet"));
  EXPECT_FALSE(ParsePrecision("int4").ok());
  EXPECT_STREQ(PrecisionName(Precision::kBfloat16), "bf16");
}

TEST(Layouts, ADepthwiseConvWritesNchwFromBlocks) {
  OnnxBuilder b;
  b.Input("x", {1, 16, 8, 8});
  b.Init("we", {32, 16, 1, 1}, Ramp(512, 0.3f, 0));
  b.Init("wd", {32, 1, 3, 3}, Ramp(288, 0.2f, 0));
  b.Init("wp", {24, 32, 1, 1}, Ramp(768, 0.4f, 0));
  b.Node("Conv", {"x", "we"}, {"e"});
  auto* dw = b.Node("Conv", {"e", "wd"}, {"d"});
  OnnxBuilder::Int(dw, "group", 32);
  OnnxBuilder::Ints(dw, "pads", {1, 1, 1, 1});
  b.Node("Conv", {"d", "wp"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(g.nodes.size(), 3u);
  auto blocks = [&](int i) { return BlocksOf(g.nodes[i].workload); };
  EXPECT_EQ(blocks(0), std::make_pair(int64_t{0}, int64_t{16}));
  EXPECT_EQ(blocks(1), std::make_pair(int64_t{16}, int64_t{0}));
  EXPECT_EQ(blocks(2), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(g.values[g.nodes[1].output].shape, (std::vector<int64_t>{1, 32, 8, 8}));
}

TEST(Views, ReshapeAliasesItsProducer) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0, 0, 0, 0});
  b.InitInt64("s", {2}, {1, -1});
  AddConv(b, "x", "c", "w");
  b.Node("Reshape", {"c", "s"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  int y = g.FindValue("y");
  EXPECT_THAT(g.values[y].shape, ElementsAre(1, 256));
  EXPECT_EQ(AliasRoot(g, y), g.FindValue("c"));
  EXPECT_EQ(m->Tasks().size(), 1u);
}

TEST(ConstantFolding, FoldsConstantSubgraphs) {
  OnnxBuilder b;
  b.Input("x", {2, 2});
  b.Init("a", {2, 2}, {1, 2, 3, 4});
  b.Init("c", {2}, {10, 20});
  b.Node("Add", {"a", "c"}, {"ac"});
  b.Node("Relu", {"ac"}, {"r"});
  b.Node("Add", {"x", "r"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(g.nodes.size(), 1u);
  const Value& folded = g.values[g.nodes[0].inputs[1]];
  ASSERT_TRUE(folded.IsConstant());
  EXPECT_THAT(folded.ToFloats(), ElementsAre(11, 22, 13, 24));
}

TEST(BatchNorm, FoldsIntoPrecedingConv) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0.5f, 0, 0, 0});
  b.Init("scale", {4}, {1, 2, 3, 4});
  b.Init("bias", {4}, {0, 1, 0, -1});
  b.Init("mean", {4}, {0.5f, 0, 1, 0});
  b.Init("var", {4}, {1, 4, 0.25f, 1});
  AddConv(b, "x", "c", "w");
  b.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].workload.op, Op::kConv2d);
  // channel 0: scale 1/sqrt(1+eps); bias' = (0.5 - 0.5) * s + 0 = 0.
  const Value& bias = g.values[g.nodes[0].inputs[2]];
  EXPECT_NEAR(bias.ToFloats()[0], 0.0f, 1e-5);
  EXPECT_NEAR(bias.ToFloats()[1], 1.0f, 1e-5);   // 0*1 + 1 - 0
  EXPECT_NEAR(bias.ToFloats()[2], -6.0f, 1e-3);  // 0 - 1*3/0.5
  // Numerically equal to the unfolded graph (BN lowered to mul+add).
  OnnxBuilder u;
  u.Input("c", {1, 4, 8, 8});
  u.Init("scale", {4}, {1, 2, 3, 4});
  u.Init("bias", {4}, {0, 1, 0, -1});
  u.Init("mean", {4}, {0.5f, 0, 1, 0});
  u.Init("var", {4}, {1, 4, 0.25f, 1});
  u.Node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"});
  u.Output("y");
  auto bn = Model::FromOnnx(u.Bytes());
  ASSERT_TRUE(bn.ok()) << bn.status();
  ASSERT_EQ(bn->Tasks().size(), 1u);
  EXPECT_EQ(bn->Tasks()[0].workload.Canonical(),
            "eltwise(in_shape=1,4,8,8;shape=1,4,8,8)|mul:1,4,1,1|add:1,4,1,1");
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok());
  // Evaluate conv alone on the raw graph, then BN via the lowered model.
  std::vector<float> x = Ramp(192, 0.21f, 0.1f);
  (*raw)->nodes.pop_back();
  (*raw)->outputs = {(*raw)->FindValue("c")};
  auto conv_out = testing::EvaluateGraph(**raw, {x}).at((*raw)->outputs[0]);
  auto want = testing::EvaluateGraph(bn->graph(), {conv_out}).at(bn->graph().outputs[0]);
  auto have = testing::EvaluateGraph(g, {x}).at(g.outputs[0]);
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], have[i], 1e-4) << i;
}

TEST(MemoryPlan, ReusesFreedRegions) {
  // a: steps 0-1, b: 1-2, c: 2-3 (all 1000 bytes) -> c takes a's place.
  MemoryPlan p = PlanMemory({{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}});
  EXPECT_THAT(p.offsets, ElementsAre(0, 1024, 0));
  EXPECT_EQ(p.total_bytes, 2048);
}

TEST(MemoryPlan, NeverOverlapsLiveBuffersAndAligns) {
  std::vector<BufferLifetime> bufs = {{100, 0, 3}, {4000, 0, 1}, {64, 1, 2}, {3000, 2, 4},
                                      {10, 3, 4},  {5000, 4, 5}, {1, 5, 5}};
  MemoryPlan p = PlanMemory(bufs);
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0);
    EXPECT_LE(p.offsets[i] + bufs[i].bytes, p.total_bytes);
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      bool live_together = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
      bool overlap = p.offsets[i] < p.offsets[j] + bufs[j].bytes &&
                     p.offsets[j] < p.offsets[i] + bufs[i].bytes;
      EXPECT_FALSE(live_together && overlap) << i << " " << j;
    }
  }
  EXPECT_LT(p.total_bytes, 100 + 4000 + 64 + 3000 + 10 + 5000 + 1);
}

}  // namespace
}  // namespace kiln::compiler
