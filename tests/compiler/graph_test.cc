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
    EXPECT_NE(n.workload.op, Op::kDense) << n.workload.Canonical();
    matmuls += n.workload.op == Op::kMatMul;
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
    if (n.workload.op != Op::kConv) continue;
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
  for (const Node& n : (*raw)->nodes) qadd = qadd || n.workload.op == Op::kQAdd;
  ASSERT_TRUE(qadd);  // imported as an integer add of the two byte tensors
  auto m = Model::FromOnnx(bytes);
  ASSERT_TRUE(m.ok()) << m.status();
  int convs = 0;
  for (const Node& n : m->graph().nodes) {
    EXPECT_NE(n.workload.op, Op::kQAdd) << n.workload.Canonical();
    convs += n.workload.op == Op::kConv ? 1 : 0;
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
    EXPECT_EQ(w.op, Op::kDense);
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
  EXPECT_EQ(w.op, Op::kReduce);
  ASSERT_EQ(w.prologue.size(), 1u);
  EXPECT_EQ(w.prologue[0].op.op, Op::kTranspose);
  ASSERT_EQ(w.prologue[0].op.prologue.size(), 1u);
  EXPECT_EQ(w.prologue[0].op.prologue[0].op.op, Op::kEltwise);
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

}  // namespace
}  // namespace kiln::compiler
