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
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using ::testing::ElementsAre;
using testing::OnnxBuilder;

std::vector<float> Ramp(int n, float scale, float offset) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale) + offset;
  return v;
}

// The first output of `fused` on `inputs` is that of the unfused graph.
void ExpectSameOutput(const Graph& unfused, const Graph& fused,
                      const std::vector<std::vector<float>>& inputs) {
  auto want = testing::EvaluateGraph(unfused, inputs).at(unfused.outputs[0]);
  auto have = testing::EvaluateGraph(fused, inputs).at(fused.outputs[0]);
  ASSERT_EQ(want.size(), have.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(want[i], have[i], 1e-4) << i;
}

// A fused group's canonical string parses back to the same workload.
void ExpectParsesBack(const Workload& w) {
  auto parsed = Workload::Parse(w.Canonical());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, w);
}

const char* kConv =
    "conv2d(C=3;H=8;K=4;N=1;OH=8;OW=8;R=3;S=3;W=8;bias=1;dilation=1,1;groups=1;"
    "pad=1,1,1,1;stride=1,1)";

void AddConv(OnnxBuilder& b, const std::string& in, const std::string& out, const std::string& w) {
  auto* c = b.Node("Conv", {in, w, w + "_b"}, {out});
  OnnxBuilder::Ints(c, "pads", {1, 1, 1, 1});
}

TEST(Fusion, ConvBiasReluIsOneTask) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0.1f, 0.2f, -0.3f, 0.4f});
  AddConv(b, "x", "c", "w");
  b.Node("Relu", {"c"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->Tasks().size(), 1u);
  EXPECT_EQ(m->Tasks()[0].workload.Canonical(), std::string(kConv) + "|relu");
  EXPECT_EQ(m->graph().nodes.size(), 1u);
}

TEST(Fusion, ResidualAddAndReluJoinTheSecondConv) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0.1f, 0.2f, -0.3f, 0.4f});
  b.Init("v", {4, 4, 3, 3}, Ramp(144, 0.7f, 0));
  b.Init("v_b", {4}, {0, 0, 0, 0});
  b.Init("shift", {4, 1, 1}, {1, 2, 3, 4});
  AddConv(b, "x", "c1", "w");
  b.Node("Relu", {"c1"}, {"r1"});
  auto* c2 = b.Node("Conv", {"r1", "v", "v_b"}, {"c2"});
  OnnxBuilder::Ints(c2, "pads", {1, 1, 1, 1});
  b.Node("Add", {"r1", "c2"}, {"sum"});  // the anchor output is the second operand
  b.Node("Add", {"sum", "shift"}, {"s2"});
  b.Node("Relu", {"s2"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  std::vector<float> x = Ramp(192, 0.11f, 0.2f);

  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].workload.Canonical(),
            "conv2d(C=4;H=8;K=4;N=1;OH=8;OW=8;R=3;S=3;W=8;bias=1;dilation=1,1;groups=1;"
            "pad=1,1,1,1;stride=1,1)|add:1,4,8,8|add:1,4,1,1|relu");
  EXPECT_EQ(g.values[g.nodes[1].inputs[3]].name, "r1");
  ExpectSameOutput(**raw, g, {x});
}

// x [1, 4, 6, 6] quantized and dequantized (xd), then a QDQ Conv of it by
// int8 weights [K, 4, 3, 3] with per-channel scales `ws` (c, float).
void AddQdqConv(OnnxBuilder& b, const std::vector<float>& ws, int64_t mult) {
  const auto K = static_cast<int64_t>(ws.size());
  b.Input("x", {1, 4, 6, 6});
  b.Init("sx", {}, {0.05f});
  b.InitInts("zx", {}, onnx::TensorProto::UINT8, {128});
  std::vector<int32_t> w(static_cast<size_t>(K) * 4 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int32_t>((i * mult) % 255) - 127;
  b.InitInts("w", {K, 4, 3, 3}, onnx::TensorProto::INT8, w);
  b.Init("ws", {K}, ws);
  b.InitInts("wz", {K}, onnx::TensorProto::INT8, std::vector<int32_t>(w.size() / 36, 0));
  b.Init("wd_b", {K}, Ramp(static_cast<int>(K), 0.9f, 0.1f));
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"q"});
  b.Node("DequantizeLinear", {"q", "sx", "zx"}, {"xd"});
  OnnxBuilder::Int(b.Node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}), "axis", 0);
  AddConv(b, "xd", "c", "wd");
}

// The first output of `fused` on `x` is that of `unfused` within one output
// step (`step`) everywhere, and off by it on at most `most` elements.
void ExpectWithinOneStep(const Graph& unfused, const Graph& fused, const std::vector<float>& x,
                         float step, int most) {
  auto want = testing::EvaluateGraph(unfused, {x}).at(unfused.outputs[0]);
  auto have = testing::EvaluateGraph(fused, {x}).at(fused.outputs[0]);
  ASSERT_EQ(want.size(), have.size());
  int steps = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(want[i], have[i], step * 1.001f) << i;
    steps += std::fabs(want[i] - have[i]) > 1e-6 ? 1 : 0;
  }
  EXPECT_LE(steps, most);
}

// A QDQ Gemm as onnxruntime's quantizer writes a classifier (uint8 x, int8
// weights [N, K] per output channel, transB=1, a float bias), and a QDQ
// MatMul of a 3-D x by weights [K, N] (a statically quantized
// transformer's projection): an integer matmul of the bytes (its weights
// stay int8), scaled (and biased) in float, equal to the float product of
// the dequantized values.
// x (shape xs, its last dim K) quantized and dequantized (xd: scale 0.02,
// zero point 120) and int8 weights dequantized with per-column scales `ws`
// (wd: [N, K] along axis 0 for a Gemm's transB, else [K, N] along axis 1);
// the weights' values returned, as laid out.
std::vector<int32_t> AddQdqOperands(OnnxBuilder& b, const std::vector<int64_t>& xs,
                                    const std::vector<float>& ws, bool trans_b) {
  const int64_t K = xs.back(), N = static_cast<int64_t>(ws.size());
  b.Input("x", xs);
  b.Init("sx", {}, {0.02f});
  b.InitInts("zx", {}, onnx::TensorProto::UINT8, {120});
  std::vector<int32_t> w(N * K);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int32_t>((i * 37) % 255) - 127;
  b.InitInts("w", trans_b ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
             onnx::TensorProto::INT8, w);
  b.Init("ws", {N}, ws);
  b.InitInts("wz", {N}, onnx::TensorProto::INT8, std::vector<int32_t>(N, 0));
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"q"});
  b.Node("DequantizeLinear", {"q", "sx", "zx"}, {"xd"});
  OnnxBuilder::Int(b.Node("DequantizeLinear", {"w", "ws", "wz"}, {"wd"}), "axis", trans_b ? 0 : 1);
  return w;
}

void ExpectQdqProductIsAnIntegerMatMul(bool gemm) {
  constexpr int64_t M = 2, K = 64, N = 5;
  const float sx = 0.02f;
  const std::vector<float> ws = {0.01f, 0.02f, 0.005f, 0.03f, 0.015f};
  const std::vector<float> bias = Ramp(N, 0.7f, 0.2f);
  OnnxBuilder b;
  const std::vector<int32_t> w = AddQdqOperands(
      b, gemm ? std::vector<int64_t>{M, K} : std::vector<int64_t>{1, M, K}, ws, gemm);
  if (gemm) {
    b.Init("bias", {N}, bias);
    OnnxBuilder::Int(b.Node("Gemm", {"xd", "wd", "bias"}, {"y"}), "transB", 1);
  } else {
    b.Node("MatMul", {"xd", "wd"}, {"y"});
  }
  b.Output("y");
  auto g = ImportOnnx(b.Bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  int matmuls = 0;
  for (const Node& n : (*g)->nodes) {
    EXPECT_NE(n.workload.op, "dense") << n.workload.Canonical();
    matmuls += n.workload.op == "matmul";
  }
  EXPECT_EQ(matmuls, 1);
  const std::vector<float> x = Ramp(M * K, 0.37f, 0.5f);
  auto y = testing::EvaluateGraph(**g, {x}).at((*g)->outputs[0]);
  ASSERT_EQ(y.size(), static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double want = gemm ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double q =
            std::clamp(std::nearbyint(double(x[m * K + k]) / double(sx)) + 120, 0.0, 255.0);
        want += (q - 120) * sx * w[gemm ? n * K + k : k * N + n] * ws[n];
      }
      EXPECT_NEAR(y[m * N + n], want, 1e-4 * (1 + std::fabs(want))) << m << "," << n;
    }
  }
}

TEST(Fusion, QdqGemmIsAnIntegerMatMul) { ExpectQdqProductIsAnIntegerMatMul(/*gemm=*/true); }
TEST(Fusion, QdqMatMulIsAnIntegerMatMul) { ExpectQdqProductIsAnIntegerMatMul(/*gemm=*/false); }

// A QDQ Conv + Relu + QuantizeLinear: the requantization's division by the
// output scale folds into the per-channel scale and the bias
// (FoldRequantScales), within one output step of the graph as imported.
TEST(Fusion, RequantizationIsOneMultiply) {
  OnnxBuilder b;
  AddQdqConv(b, {0.01f, 0.02f, 0.015f, 0.03f, 0.01f, 0.005f, 0.02f, 0.025f}, 37);
  b.Init("sy", {}, {0.1f});
  b.InitInts("zy", {}, onnx::TensorProto::UINT8, {0});
  b.Node("Relu", {"c"}, {"r"});
  b.Node("QuantizeLinear", {"r", "sy", "zy"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  bool conv = false;
  for (const Node& n : m->graph().nodes) {
    if (n.workload.op != "conv") continue;
    conv = true;
    const std::string c = n.workload.Canonical();
    EXPECT_EQ(c.find("div"), std::string::npos) << c;
    EXPECT_NE(c.find("relu"), std::string::npos) << c;
  }
  EXPECT_TRUE(conv);
  ExpectWithinOneStep(**raw, m->graph(), Ramp(144, 0.37f, 0.3f), 0.1f, 2);
}

// A quantized residual block: QDQ Conv, QuantizeLinear, then the Add of its
// dequantized bytes and the block input's, quantized again. The add joins
// the conv's epilogue (FuseQuantizedAdds): one task, no qadd, within one
// output step of the graph as imported.
TEST(Fusion, QuantizedResidualAddJoinsTheConv) {
  OnnxBuilder b;
  AddQdqConv(b, {0.01f, 0.02f, 0.015f, 0.005f}, 53);
  b.Init("sc", {}, {0.07f});
  b.InitInts("zc", {}, onnx::TensorProto::UINT8, {120});
  b.Init("sy", {}, {0.09f});
  b.InitInts("zy", {}, onnx::TensorProto::UINT8, {100});
  b.Node("QuantizeLinear", {"c", "sc", "zc"}, {"cq"});
  b.Node("DequantizeLinear", {"cq", "sc", "zc"}, {"cd"});
  b.Node("Add", {"cd", "xd"}, {"s"});
  b.Node("QuantizeLinear", {"s", "sy", "zy"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  bool qadd = false;
  for (const Node& n : (*raw)->nodes) qadd = qadd || n.workload.op == "qadd";
  ASSERT_TRUE(qadd);  // imported as an integer add of the two byte tensors
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  int convs = 0;
  for (const Node& n : m->graph().nodes) {
    EXPECT_NE(n.workload.op, "qadd") << n.workload.Canonical();
    convs += n.workload.op == "conv" ? 1 : 0;
  }
  EXPECT_EQ(convs, 1);
  ExpectWithinOneStep(**raw, m->graph(), Ramp(144, 0.29f, 0.2f), 0.09f, 3);
}

TEST(Fusion, NoFusionIntoAGraphOutputOrSharedTensor) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 8, 8});
  b.Init("w", {4, 3, 3, 3}, Ramp(108, 0.3f, 0));
  b.Init("w_b", {4}, {0, 0, 0, 0});
  AddConv(b, "x", "c", "w");
  b.Node("Relu", {"c"}, {"y"});
  b.Output("c");
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->Tasks().size(), 2u);
  EXPECT_EQ(m->Tasks()[0].workload.Canonical(), kConv);
  EXPECT_EQ(m->Tasks()[1].workload.Canonical(), "eltwise(in_shape=1,4,8,8;shape=1,4,8,8)|relu");
}

// A MatMul of [1,4,8] x [8,6] is a [4,6] dense whose output a view reshapes
// to [1,4,6]: the bias and residual Adds after the view join the dense on its
// own shape, the view then gives the fused output its ONNX shape, and the
// fused graph computes what the unfused one does.
TEST(Fusion, MatMulEpilogueJoinsThroughItsView) {
  OnnxBuilder b;
  b.Input("x", {1, 4, 8});
  b.Input("r", {1, 4, 6});
  b.Init("w", {8, 6}, Ramp(48, 0.37f, 0));
  b.Init("bias", {6}, {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f});
  b.Node("MatMul", {"x", "w"}, {"m"});
  b.Node("Add", {"m", "bias"}, {"a"});
  b.Node("Add", {"a", "r"}, {"s"});
  b.Node("Relu", {"s"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  std::vector<float> x = Ramp(32, 0.13f, 0.1f), r = Ramp(24, 0.29f, -0.2f);

  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = m->graph();
  ASSERT_EQ(m->Tasks().size(), 1u);
  EXPECT_EQ(m->Tasks()[0].workload.Canonical(),
            "dense(K=8;M=4;N=6;batch=1;batch_a=0;batch_b=0;bias=0;transA=0;transB=0)"
            "|add:1,6|add:4,6|relu");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[1].kind, NodeKind::kView);
  EXPECT_EQ(g.nodes[1].inputs[0], g.nodes[0].output);
  EXPECT_THAT(g.values[g.nodes[0].output].shape, ElementsAre(4, 6));
  EXPECT_EQ(g.nodes[1].output, g.outputs[0]);
  EXPECT_THAT(g.values[g.outputs[0]].shape, ElementsAre(1, 4, 6));
  ExpectSameOutput(**raw, g, {x, r});
}

// GELU after a MatMul and its bias, as BERT's feed-forward layer has it:
// x * (1 + erf(x / sqrt 2)) * 0.5 reads x twice. The erf chain joins the dense,
// and the Mul's second read of x becomes a tap of the chain (`mul:@1`, the
// value after the bias) instead of an operand, so the whole GELU runs in the
// dense's epilogue; with the Mul's operands either way round. The fused
// kernel, compiled and run, computes what the unfused graph does.
// The compiled module of `m` computes the raw graph's first output on x,
// within `tol`.
void ExpectModuleComputes(const Graph& raw, const Model& m, const std::vector<float>& x,
                          float tol) {
  auto want = testing::EvaluateGraph(raw, {x}).at(raw.outputs[0]);
  auto module = testing::CompileAndLoad(m);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<float> y(want.size(), -1.0f);
  ASSERT_TRUE((*module)->Run({x.data()}, {y.data()}).ok());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], tol) << i;
}

// GELU's cdf of `x` as exporters write it, into "cdf": 1 + erf(x / sqrt2).
void AddGeluCdf(OnnxBuilder& b, const std::string& x) {
  b.Init("sqrt2", {}, {1.4142135f});
  b.Init("one", {}, {1.0f});
  b.Node("Div", {x, "sqrt2"}, {"d"});
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"e", "one"}, {"cdf"});
}

// GELU on a quantized and dequantized MatMul output (what quantize_static
// writes for a transformer's FFN): the requantization folds into one
// multiply (its division removed from the chain) while GELU's x * cdf taps
// the value after it; the tap must move with the ops it points past.
TEST(Fusion, RequantFoldKeepsGelusTap) {
  OnnxBuilder b;
  AddQdqOperands(b, {4, 64}, std::vector<float>(6, 0.002f), /*trans_b=*/false);
  b.Init("s", {}, {0.05f});
  b.InitInts("z", {}, onnx::TensorProto::UINT8, {120});
  b.Node("MatMul", {"xd", "wd"}, {"h"});
  b.Node("QuantizeLinear", {"h", "s", "z"}, {"hq"});
  b.Node("DequantizeLinear", {"hq", "s", "z"}, {"hd"});
  AddGeluCdf(b, "hd");
  b.Node("Mul", {"hd", "cdf"}, {"y"});
  b.Output("y");
  auto bytes = b.Bytes();
  auto raw = ImportOnnx(bytes);
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::vector<float> x = Ramp(256, 0.13f, 0.1f);
  // A rounding tie may land a step away where the fold reorders a multiply.
  ExpectWithinOneStep(**raw, m->graph(), x, 0.05f * 2.5f, 1);
  ExpectModuleComputes(**raw, *m, x, 0.05f * 2.5f);
}

TEST(Fusion, GeluJoinsTheMatMulByTappingItsOwnValue) {
  for (bool x_first : {true, false}) {
    SCOPED_TRACE(x_first ? "Mul(x, cdf)" : "Mul(cdf, x)");
    OnnxBuilder b;
    b.Input("x", {1, 4, 8});
    b.Init("w", {8, 6}, Ramp(48, 0.37f, 0));
    b.Init("bias", {6}, {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f});
    b.Init("half", {}, {0.5f});
    b.Node("MatMul", {"x", "w"}, {"m"});
    b.Node("Add", {"m", "bias"}, {"h"});
    AddGeluCdf(b, "h");
    b.Node("Mul",
           x_first ? std::vector<std::string>{"h", "cdf"} : std::vector<std::string>{"cdf", "h"},
           {"g"});
    b.Node("Mul", {"g", "half"}, {"y"});
    b.Output("y");
    auto bytes = b.Bytes();
    auto raw = ImportOnnx(bytes);
    ASSERT_TRUE(raw.ok()) << raw.status();
    auto m = Model::FromOnnx(bytes);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->Tasks().size(), 1u);
    const Workload& w = m->Tasks()[0].workload;
    EXPECT_EQ(w.op, "dense");
    EXPECT_THAT(w.Canonical(), ::testing::HasSubstr("|mul:@1|"));
    ExpectParsesBack(w);
    auto sig = w.Signature();
    ASSERT_TRUE(sig.ok()) << sig.status();
    EXPECT_EQ(sig->inputs.size(), 6u);  // A, B, and bias, sqrt2, one, half: x is not read again
    std::vector<float> x = Ramp(32, 0.13f, 0.1f);
    ExpectSameOutput(**raw, m->graph(), {x});
    ExpectModuleComputes(**raw, *m, x, 1e-5f);
  }
}

// FuseInjective: an elementwise Exp feeding a Transpose feeding a ReduceSum
// run inside the reduction's kernel (the Exp as the Transpose's prologue);
// the group's key covers the producers, and the fused kernel computes what
// the unfused graph does.
TEST(Fusion, InjectiveProducersJoinTheirReductionConsumer) {
  OnnxBuilder b;
  b.Input("x", {2, 3, 4});
  b.Node("Exp", {"x"}, {"e"});
  OnnxBuilder::Ints(b.Node("Transpose", {"e"}, {"t"}), "perm", {0, 2, 1});
  b.InitInt64("axes", {1}, {2});
  b.Node("ReduceSum", {"t", "axes"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->Tasks().size(), 1u);
  const Workload& w = m->Tasks()[0].workload;
  EXPECT_EQ(w.op, "reduce");
  ASSERT_EQ(w.prologue.size(), 1u);
  EXPECT_EQ(w.prologue[0].op.op, "transpose");
  ASSERT_EQ(w.prologue[0].op.prologue.size(), 1u);
  EXPECT_EQ(w.prologue[0].op.prologue[0].op.op, "eltwise");
  EXPECT_THAT(w.Canonical(), ::testing::HasSubstr("|<0:transpose("));
  ExpectParsesBack(w);
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_EQ(sig->inputs.size(), 1u);  // the transpose's input, x
  EXPECT_EQ(sig->inputs[0].shape, (std::vector<int64_t>{2, 3, 4}));
  // The fused kernel against the reference of the unfused graph.
  auto plain = ImportOnnx(b.Bytes());
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::vector<float> x = Ramp(24, 0.37f, 0);
  auto want = testing::EvaluateGraph(**plain, {x});
  ASSERT_FALSE(want.empty());
  const std::vector<float>& y_want = want.at((*plain)->FindValue("y"));
  auto module = testing::CompileAndLoad(*m);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<float> y(y_want.size(), -1.0f);
  ASSERT_TRUE((*module)->Run({x.data()}, {y.data()}).ok());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], y_want[i], 1e-4f * y_want[i]) << i;
}

// A producer read by two consumers, or a graph output, stays its own kernel.
TEST(Fusion, SharedInjectiveProducerIsNotFused) {
  OnnxBuilder b;
  b.Input("x", {2, 3});
  OnnxBuilder::Ints(b.Node("Transpose", {"x"}, {"t"}), "perm", {1, 0});
  b.InitInt64("axes", {1}, {1});
  b.Node("ReduceSum", {"t", "axes"}, {"y"});
  b.Node("ReduceMax", {"t", "axes"}, {"z"});
  b.Output("y");
  b.Output("z");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->graph().nodes.size(), 3u);
  for (const Node& n : m->graph().nodes) EXPECT_TRUE(n.workload.prologue.empty()) << n.name;
}

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
    if (n.workload.op == "conv") convs.push_back(&n);
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
    if (n.workload.op == "conv") convs.push_back(&n);
    if (n.workload.op == "pool2d") pools.push_back(&n);
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
      if (n.workload.op == "dense") marks.push_back(n.workload.IntOr("bf16", 0));
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
  EXPECT_EQ(g.nodes[0].workload.op, "conv2d");
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
