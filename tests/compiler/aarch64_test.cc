// Kiln-generated AArch64 code, run: models are compiled for AArch64 targets
// on this (x86-64) host, and the artifacts run under qemu-user through a
// minimal C loader cross-compiled with the AArch64 libc
// (tests/compiler/aarch64/run_artifact.c). The outputs are checked against
// the reference kernels. Skips, saying why, when the cross tools are missing
// (scripts/install-deps installs them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/module_builder.h"
#include "compiler/frontend/onnx_import.h"
#include "compiler/kernel.h"
#include "compiler/model.h"
#include "compiler/ops/lower_workload.h"
#include "compiler/target.h"
#include "compiler/workload.h"
#include "tests/compiler/graph_eval.h"
#include "tests/compiler/object_code.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using absl::StrCat;
using test_util::Mnemonics;
using test_util::OnPath;

constexpr char kSysroot[] = "/usr/aarch64-linux-gnu";

// qemu-aarch64's library prefix: where Debian's multiarch arm64 libc is
// installed (scripts/install-deps installs it for the AArch64 kiln-board),
// its own loader and libc from the host's root, else the cross sysroot's.
// Mixing the two (the sysroot's loader finding the multiarch libc first)
// hangs a process at its first pthread_create.
std::string QemuPrefix() { return fs::exists("/lib/ld-linux-aarch64.so.1") ? "/" : kSysroot; }

// A fresh directory under the test's temporary directory.
fs::path TempDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / StrCat("kiln-aarch64-", getpid(), "-", name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Why the tests cannot run here, or "" once the loader is built.
const std::string& Unavailable(fs::path* loader) {
  static fs::path built;
  static const std::string why = [] {
    for (const char* tool : {"aarch64-linux-gnu-gcc", "qemu-aarch64", "ld.lld"}) {
      if (!OnPath(tool)) return StrCat(tool, " not found (scripts/install-deps installs it)");
    }
    if (!fs::exists(kSysroot)) return StrCat(kSysroot, " missing (libc6-dev-arm64-cross)");
    built = TempDir("loader") / "run_artifact";
    std::string cmd =
        StrCat("aarch64-linux-gnu-gcc -O2 -rdynamic -o ", built.string(), " ", KILN_SOURCE_DIR,
               "/tests/compiler/aarch64/run_artifact.c -Wl,--no-as-needed -lm -ldl -lpthread");
    if (std::system(cmd.c_str()) != 0) return StrCat("cannot build the loader: ", cmd);
    return std::string();
  }();
  *loader = built;
  return why;
}

void WriteBytes(const fs::path& p, const void* data, size_t n) {
  std::ofstream(p, std::ios::binary).write(static_cast<const char*>(data), n);
}

std::vector<float> ReadFloats(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

// Compiles `model` for `target` and runs it under qemu-aarch64: its outputs.
std::vector<std::vector<float>> RunOnAarch64(const Model& model, const Target& target,
                                             const std::vector<std::vector<float>>& inputs,
                                             const fs::path& loader) {
  auto art = CompileModel(model, target, nullptr, {});
  EXPECT_TRUE(art.ok()) << art.status();
  if (!art.ok()) return {};
  fs::path dir = TempDir(StrCat(target.cpu, "-", std::hash<std::string>{}(*art)));
  WriteBytes(dir / "model.kiln", art->data(), art->size());
  std::string cmd = StrCat("qemu-aarch64 -L ", QemuPrefix(), " ", loader.string(), " ",
                           (dir / "model.kiln").string(), " ", dir.string());
  for (size_t i = 0; i < inputs.size(); ++i) {
    fs::path p = dir / StrCat("input_", i, ".bin");
    WriteBytes(p, inputs[i].data(), inputs[i].size() * sizeof(float));
    absl::StrAppend(&cmd, " ", p.string());
  }
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<std::vector<float>> outs;
  for (size_t i = 0; i < model.graph().outputs.size(); ++i) {
    outs.push_back(ReadFloats(dir / StrCat("output_", i, ".bin")));
  }
  fs::remove_all(dir);
  return outs;
}

std::vector<float> Wave(int64_t n, float freq) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * freq);
  return v;
}

void ExpectMatchesReference(const Model& m, const std::vector<std::vector<float>>& inputs,
                            const std::vector<std::vector<float>>& got) {
  auto want = testing::EvaluateGraph(m.graph(), inputs);
  ASSERT_FALSE(want.empty());
  const auto& outs = m.graph().outputs;
  ASSERT_EQ(got.size(), outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    const std::vector<float>& w = want.at(outs[o]);
    ASSERT_EQ(got[o].size(), w.size()) << "output " << o;
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_NEAR(got[o][i], w[i], 1e-4 * (1 + std::fabs(w[i])))
          << "output " << o << " [" << i << "]";
    }
  }
}

// NEON only (Cortex-A72) and a core with SVE (Neoverse V1): kiln emits
// fixed-width vectors either way, and LLVM picks the instructions.
class Aarch64 : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (Target::Host().triple.rfind("aarch64", 0) == 0) GTEST_SKIP() << "host is AArch64";
    const std::string& why = Unavailable(&loader_);
    if (!why.empty()) GTEST_SKIP() << why;
    auto t = Target::Parse(StrCat("llvm -mtriple=aarch64-linux-gnu -mcpu=", GetParam()));
    ASSERT_TRUE(t.ok()) << t.status();
    target_ = *t;
  }
  fs::path loader_;
  Target target_;
};

// The bundled CNN gives onnxruntime's logits (the x86-64 test's figures).
TEST_P(Aarch64, SmallCnnMatchesOnnxRuntime) {
  auto m = Model::FromOnnxFile(std::string(KILN_SOURCE_DIR) + "/models/small_cnn.onnx");
  ASSERT_TRUE(m.ok()) << m.status();
  auto out = RunOnAarch64(*m, target_, {Wave(3 * 32 * 32, 0.01f)}, loader_);
  const float kOrtLogits[10] = {4.428879f,  1.966671f, 2.773747f, 3.308437f,  -4.055731f,
                                -0.023411f, 0.887098f, 1.553743f, -0.773245f, 1.392855f};
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(out[0][i], kOrtLogits[i], 1e-4) << i;
}

// Every convolution template: Winograd 3x3 (padded), 1x1 as GEMM (packed
// weights from constants and from an input), NCHWc (the 1x1 on 7x7),
// depthwise stride 2; pooling and the fused epilogues.
TEST_P(Aarch64, ConvolutionTemplatesMatchTheReference) {
  testing::OnnxBuilder b;
  b.Input("x", {1, 16, 14, 14});
  b.Input("w", {16, 16, 1, 1});
  b.Init("w3", {32, 16, 3, 3}, Wave(32 * 16 * 9, 0.37f));
  b.Init("b3", {32}, Wave(32, 0.5f));
  b.Init("wd", {32, 1, 3, 3}, Wave(32 * 9, 0.23f));
  b.Init("w1", {16, 32, 1, 1}, Wave(16 * 32, 0.19f));
  testing::OnnxBuilder::Ints(b.Node("Conv", {"x", "w3", "b3"}, {"c3"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c3"}, {"r3"});
  auto* dw = b.Node("Conv", {"r3", "wd"}, {"d"});
  testing::OnnxBuilder::Int(dw, "group", 32);
  testing::OnnxBuilder::Ints(dw, "pads", {1, 1, 1, 1});
  testing::OnnxBuilder::Ints(dw, "strides", {2, 2});
  b.Node("Conv", {"d", "w1"}, {"p"});
  b.Node("Conv", {"x", "w"}, {"q"});
  b.Node("Add", {"q", "x"}, {"qx"});
  auto* mp = b.Node("MaxPool", {"qx"}, {"pool"});
  testing::OnnxBuilder::Ints(mp, "kernel_shape", {3, 3});
  testing::OnnxBuilder::Ints(mp, "strides", {2, 2});
  b.Node("GlobalAveragePool", {"p"}, {"gap"});
  b.Output("pool");
  b.Output("gap");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  std::set<int64_t> layouts;
  for (const Node& n : m->graph().nodes) {
    if (n.kind == NodeKind::kCompute && n.workload.op == Op::kConv2d) {
      layouts.insert(DefaultConfig(n.workload, target_)->at("layout"));
    }
  }
  // NCHWc, depthwise, 1x1 GEMM, Winograd
  EXPECT_EQ(layouts, (std::set<int64_t>{1, 2, 3, 4}));
  std::vector<std::vector<float>> in = {Wave(16 * 14 * 14, 0.05f), Wave(16 * 16, 0.11f)};
  ExpectMatchesReference(*m, in, RunOnAarch64(*m, target_, in, loader_));
}

// The transformer kernels: MatMul with packed constant panels, batched
// MatMul (attention), softmax, layer normalization, GELU (erf).
TEST_P(Aarch64, TransformerKernelsMatchTheReference) {
  testing::OnnxBuilder b(17);
  b.Input("x", {2, 24, 32});
  b.Init("wq", {32, 40}, Wave(32 * 40, 0.13f));
  b.Init("gamma", {40}, Wave(40, 0.3f));
  b.Init("beta", {40}, Wave(40, 0.7f));
  b.Init("half", {}, {0.5f});
  b.Init("one", {}, {1.f});
  b.Init("rsqrt2", {}, {0.70710678f});
  b.Node("MatMul", {"x", "wq"}, {"q"});
  testing::OnnxBuilder::Ints(b.Node("Transpose", {"q"}, {"qt"}), "perm", {0, 2, 1});
  b.Node("MatMul", {"q", "qt"}, {"s"});
  testing::OnnxBuilder::Int(b.Node("Softmax", {"s"}, {"a"}), "axis", -1);
  b.Node("MatMul", {"a", "q"}, {"ctx"});
  testing::OnnxBuilder::Int(b.Node("LayerNormalization", {"ctx", "gamma", "beta"}, {"ln"}), "axis",
                            -1);
  b.Node("Mul", {"ln", "rsqrt2"}, {"ls"});
  b.Node("Erf", {"ls"}, {"e"});
  b.Node("Add", {"e", "one"}, {"e1"});
  b.Node("Mul", {"ln", "e1"}, {"g0"});
  b.Node("Mul", {"g0", "half"}, {"gelu"});
  b.Output("gelu");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  int packed = 0;
  for (const Node& n : m->graph().nodes) {
    if (n.kind == NodeKind::kCompute && n.workload.op == Op::kDense) {
      packed += DefaultConfig(n.workload, target_)->at("pack_b");
    }
  }
  EXPECT_GE(packed, 1);  // the constant weights as panels
  std::vector<std::vector<float>> in = {Wave(2 * 24 * 32, 0.07f)};
  ExpectMatchesReference(*m, in, RunOnAarch64(*m, target_, in, loader_));
}

// The int8 templates: ConvInteger (3x3, padded, uint8 input quantized from
// float, constant int8 weights: conv_int8.cc) and DynamicQuantizeLinear +
// MatMulInteger (matmul_int8.cc), their int32 results cast to float; dot4
// by widening multiplies on AArch64. Integer outputs, exactly onnxruntime's
// (1.32 on this model: some elements and the sums of each output and of its
// magnitudes; the float reference evaluator cannot hold bytes).
TEST_P(Aarch64, Int8TemplatesMatchTheReference) {
  testing::OnnxBuilder b(13);
  b.Input("x", {1, 8, 10, 10});
  b.Input("y", {12, 40});
  auto ints = [](int64_t n, float f) {
    std::vector<float> v = Wave(n, f);
    for (float& e : v) e = std::round(e * 100.f);
    return v;
  };
  b.Init("xs", {}, {0.05f});
  b.Init("f128", {}, {128.f});
  b.Init("f0", {}, {0.f});
  b.Init("wf", {16, 8, 3, 3}, ints(16 * 8 * 9, 0.41f));
  b.Init("bf", {40, 24}, ints(40 * 24, 0.29f));
  testing::OnnxBuilder::Int(b.Node("Cast", {"f128"}, {"xz"}), "to", onnx::TensorProto::UINT8);
  testing::OnnxBuilder::Int(b.Node("Cast", {"f0"}, {"wz"}), "to", onnx::TensorProto::INT8);
  testing::OnnxBuilder::Int(b.Node("Cast", {"wf"}, {"w8"}), "to", onnx::TensorProto::INT8);
  testing::OnnxBuilder::Int(b.Node("Cast", {"bf"}, {"b8"}), "to", onnx::TensorProto::INT8);
  b.Node("QuantizeLinear", {"x", "xs", "xz"}, {"qx"});
  testing::OnnxBuilder::Ints(b.Node("ConvInteger", {"qx", "w8", "xz", "wz"}, {"ci"}), "pads",
                             {1, 1, 1, 1});
  testing::OnnxBuilder::Int(b.Node("Cast", {"ci"}, {"c"}), "to", onnx::TensorProto::FLOAT);
  b.Node("DynamicQuantizeLinear", {"y"}, {"qy", "ys", "yz"});
  b.Node("MatMulInteger", {"qy", "b8", "yz", "wz"}, {"mi"});
  testing::OnnxBuilder::Int(b.Node("Cast", {"mi"}, {"m"}), "to", onnx::TensorProto::FLOAT);
  b.Output("c");
  b.Output("m");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  int int8 = 0;
  for (const Node& n : m->graph().nodes) {
    if (n.kind == NodeKind::kCompute) int8 += n.workload.IntOr("zp", 0) == 2;
  }
  EXPECT_EQ(int8, 2);  // both on the int8 templates
  std::vector<std::vector<float>> in = {Wave(8 * 10 * 10, 0.05f), Wave(12 * 40, 0.09f)};
  auto out = RunOnAarch64(*m, target_, in, loader_);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].size(), 1600u);
  ASSERT_EQ(out[1].size(), 288u);
  const std::vector<std::pair<size_t, float>> conv = {
      {0, 3931}, {1, 6394}, {2, 6738}, {799, 5521}, {1599, -3942}};
  const std::vector<std::pair<size_t, float>> mm = {
      {0, -2266}, {1, -5453}, {2, -7657}, {287, 14320}};
  for (const auto& [i, v] : conv) EXPECT_EQ(out[0][i], v) << "conv [" << i << "]";
  for (const auto& [i, v] : mm) EXPECT_EQ(out[1][i], v) << "matmul [" << i << "]";
  auto sums = [](const std::vector<float>& v) {
    double s = 0, a = 0;
    for (float e : v) {
      s += e;
      a += std::fabs(e);
    }
    return std::make_pair(s, a);
  };
  EXPECT_EQ(sums(out[0]), std::make_pair(-95989.0, 9232725.0));
  EXPECT_EQ(sums(out[1]), std::make_pair(12049.0, 3165761.0));
}

// A statically quantized CNN (QDQ, per-channel int8 weights, uint8
// activations, as onnxruntime's quantize_static writes it): a 3x3 conv with
// bias and Relu, a depthwise 3x3 and a 1x1 conv, whose bytes pass between
// them in channel blocks (conv_int8_blocked.cc, conv_int8_depthwise.cc), run
// under qemu: within one output step of the reference evaluator on the
// compiled graph (rounding ties of the float requantization), on each core's
// dot products.
TEST_P(Aarch64, QuantizedCnnMatchesTheReference) {
  testing::OnnxBuilder b(13);
  b.Input("x", {1, 16, 8, 8});
  auto bytes = [](int64_t n, int64_t mult) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * mult) % 255) - 127;
    return v;
  };
  // Tensor `name` quantized with scale s and zero point z, then dequantized.
  auto qdq = [&](const std::string& in, const std::string& out, float s, int32_t z) {
    b.Init(out + "_s", {}, {s});
    b.InitInts(out + "_z", {}, onnx::TensorProto::UINT8, {z});
    b.Node("QuantizeLinear", {in, out + "_s", out + "_z"}, {out + "_q"});
    b.Node("DequantizeLinear", {out + "_q", out + "_s", out + "_z"}, {out});
  };
  // A conv of `in` by int8 weights [K, C/group, R, R] (per-channel scales).
  auto conv = [&](const std::string& in, const std::string& out, int64_t K, int64_t C, int64_t R,
                  int64_t group, int64_t mult) {
    const int64_t n = K * (C / group) * R * R;
    b.InitInts(out + "_w", {K, C / group, R, R}, onnx::TensorProto::INT8, bytes(n, mult));
    std::vector<float> ws(static_cast<size_t>(K));
    for (size_t k = 0; k < ws.size(); ++k) ws[k] = 0.002f + 0.0003f * static_cast<float>(k % 7);
    b.Init(out + "_ws", {K}, ws);
    b.InitInts(out + "_wz", {K}, onnx::TensorProto::INT8, std::vector<int32_t>(ws.size(), 0));
    testing::OnnxBuilder::Int(
        b.Node("DequantizeLinear", {out + "_w", out + "_ws", out + "_wz"}, {out + "_wd"}), "axis",
        0);
    b.Init(out + "_b", {K}, Wave(K, 0.3f));
    auto* node = b.Node("Conv", {in, out + "_wd", out + "_b"}, {out});
    testing::OnnxBuilder::Ints(node, "pads", std::vector<int64_t>(4, R / 2));
    testing::OnnxBuilder::Int(node, "group", group);
  };
  qdq("x", "xd", 0.02f, 128);
  conv("xd", "a", 32, 16, 3, 1, 37);
  b.Node("Relu", {"a"}, {"ar"});
  qdq("ar", "ad", 0.05f, 0);
  conv("ad", "d", 32, 32, 3, 32, 29);
  qdq("d", "dd", 0.04f, 120);
  conv("dd", "p", 16, 32, 1, 1, 53);
  qdq("p", "y", 0.03f, 110);
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  int blocked = 0;
  for (const Node& n : m->graph().nodes) {
    if (n.workload.op == Op::kConv) blocked += n.workload.IntOr("out_block", 0) == 16;
  }
  EXPECT_EQ(blocked, 2);  // the 3x3 and the depthwise conv write blocks
  std::vector<std::vector<float>> in = {Wave(16 * 8 * 8, 0.13f)};
  auto got = RunOnAarch64(*m, target_, in, loader_);
  auto want = testing::EvaluateGraph(m->graph(), in).at(m->graph().outputs[0]);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), want.size());
  int steps = 0, nonzero = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[0][i], want[i], 0.03f * 1.001f) << i;
    steps += std::fabs(got[0][i] - want[i]) > 1e-6f;
    nonzero += want[i] != 0;
  }
  EXPECT_LE(steps, 8);
  EXPECT_GT(nonzero, 512);  // not a saturated or zero output
}

// --precision bf16 on AArch64: a Linear layer (dense_bf16.cc) and convs
// writing channel blocks (conv2d_bf16.cc), their products one bfdot per 128
// bits on a core with BF16 (Neoverse V1), widened halves elsewhere; the
// outputs match the reference (its operands rounded to bfloat16).
TEST_P(Aarch64, Bf16ProductsMatchTheReference) {
  testing::OnnxBuilder b(13);
  b.Input("x", {1, 16, 8, 8});
  b.Input("v", {5, 48});
  b.Init("w1", {32, 16, 3, 3}, Wave(32 * 16 * 9, 0.37f));
  b.Init("w2", {32, 32, 3, 3}, Wave(32 * 32 * 9, 0.23f));
  b.Init("wl", {48, 40}, Wave(48 * 40, 0.19f));
  testing::OnnxBuilder::Ints(b.Node("Conv", {"x", "w1"}, {"a"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"a"}, {"ar"});
  testing::OnnxBuilder::Ints(b.Node("Conv", {"ar", "w2"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("MatMul", {"v", "wl"}, {"m"});
  b.Output("c");
  b.Output("m");
  ImportOptions options;
  options.precision = Precision::kBfloat16;
  auto m = Model::FromOnnx(b.Bytes(), options);
  ASSERT_TRUE(m.ok()) << m.status();
  int marked = 0;
  for (const Node& n : m->graph().nodes) marked += n.workload.IntOr("bf16", 0);
  EXPECT_EQ(marked, 2);  // the first conv (it writes blocks) and the MatMul
  std::vector<std::vector<float>> in = {Wave(16 * 8 * 8, 0.11f), Wave(5 * 48, 0.07f)};
  ExpectMatchesReference(*m, in, RunOnAarch64(*m, target_, in, loader_));
  // The instruction, where the core has it.
  if (!OnPath("llvm-objdump-19")) return;
  std::map<std::string, int> n =
      Mnemonics("dense(K=48;M=5;N=40;batch=1;batch_a=0;batch_b=0;bf16=1;bias=0;transA=0;transB=0)",
                target_, {"bfdot"});
  EXPECT_EQ(n["bfdot"] > 0, std::string(GetParam()) == "neoverse-v1");
  EXPECT_EQ(target_.HasFeature("bf16"), std::string(GetParam()) == "neoverse-v1");
}

// The int8 templates' byte dot products are the CPU's instructions: usdot
// (u8 x s8) on a core with i8mm (Neoverse V1), sdot with dotprod alone
// (Cortex-A76), neither on a core without them (Cortex-A72), for the int8
// matmul and the int8 conv in channel blocks. Their results are checked
// above and by ConvolutionTemplatesMatchTheReference's int8 layers.
TEST_P(Aarch64, Int8KernelsUseTheCoresDotProducts) {
  if (!OnPath("llvm-objdump-19")) GTEST_SKIP() << "llvm-objdump-19 not found";
  const bool i8mm = target_.HasFeature("i8mm");
  const bool dotprod = target_.HasFeature("dotprod");
  EXPECT_EQ(dotprod, std::string(GetParam()) != "cortex-a72");
  EXPECT_EQ(i8mm, std::string(GetParam()) == "neoverse-v1");
  for (const char* s :
       {"matmul(dtypes=2,3,2,6;in0=7,64;in1=64,48;in2=1;shape=7,48;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,2,9,10,16;in1=32,32,3,3;in2=1;"
        "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)"}) {
    std::map<std::string, int> n = Mnemonics(s, target_, {"usdot", "sdot"});
    EXPECT_EQ(n["usdot"] > 0, i8mm) << s;
    EXPECT_EQ(n["sdot"] > 0, dotprod && !i8mm) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Cores, Aarch64,
                         ::testing::Values("cortex-a72", "cortex-a76", "neoverse-v1"));

}  // namespace
}  // namespace kiln::compiler
