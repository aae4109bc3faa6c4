#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/kernel.h"
#include "compiler/ops/common.h"
#include "compiler/ops/interpret.h"

namespace kiln::compiler {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;

std::vector<float> Iota(int n, float start = 1) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

Workload Conv(int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride, int64_t pad, int64_t dil,
              int64_t groups, int64_t bias) {
  Workload w;
  w.op = Op::kConv2d;
  int64_t OH = (H + 2 * pad - ((R - 1) * dil + 1)) / stride + 1;
  w.ints = {{"N", {1}},
            {"C", {C}},
            {"H", {H}},
            {"W", {H}},
            {"K", {K}},
            {"R", {R}},
            {"S", {R}},
            {"stride", {stride, stride}},
            {"pad", {pad, pad, pad, pad}},
            {"dilation", {dil, dil}},
            {"groups", {groups}},
            {"bias", {bias}},
            {"OH", {OH}},
            {"OW", {OH}}};
  return w;
}

std::vector<float> RunRef(const Workload& w, const std::vector<std::vector<float>>& inputs) {
  auto sig = w.Signature();
  EXPECT_TRUE(sig.ok()) << sig.status();
  std::vector<const void*> ptrs;
  for (const auto& in : inputs) ptrs.push_back(in.data());
  std::vector<float> out(sig->output.NumElements(), -999.0f);
  auto s = RunReference(w, ptrs, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(ReferenceConv, NoPadding) {
  EXPECT_THAT(RunRef(Conv(1, 3, 1, 2, 1, 0, 1, 1, 0), {Iota(9), std::vector<float>(4, 1.0f)}),
              ElementsAre(12, 16, 24, 28));
}

TEST(ReferenceConv, PaddingAndStride) {
  EXPECT_THAT(RunRef(Conv(1, 3, 1, 2, 2, 1, 1, 1, 0), {Iota(9), std::vector<float>(4, 1.0f)}),
              ElementsAre(1, 5, 11, 28));
}

TEST(ReferenceConv, Dilation) {
  EXPECT_THAT(RunRef(Conv(1, 3, 1, 2, 1, 0, 2, 1, 0), {Iota(9), std::vector<float>(4, 1.0f)}),
              ElementsAre(20));
}

TEST(ReferenceConv, GroupsAndBias) {
  // Depthwise: channel 0 scaled by 2, channel 1 by 3, plus bias 10 / 20.
  EXPECT_THAT(RunRef(Conv(2, 1, 2, 1, 1, 0, 1, 2, 1), {{5, 7}, {2, 3}, {10, 20}}),
              ElementsAre(20, 41));
}

TEST(ReferenceConv, BiasReluEpilogue) {
  Workload w = Conv(1, 3, 1, 2, 1, 0, 1, 1, 1);
  w.epilogue = {{EpilogueKind::kRelu, {}}};
  EXPECT_THAT(RunRef(w, {Iota(9), std::vector<float>(4, 1.0f), {-15}}), ElementsAre(0, 1, 9, 13));
}

TEST(ReferenceConv, AddEpilogueBroadcastsPerChannel) {
  Workload w = Conv(1, 2, 2, 1, 1, 0, 1, 1, 0);  // 1x1 conv, 2 output channels
  w.epilogue = {{EpilogueKind::kAdd, {1, 2, 1, 1}}, {EpilogueKind::kMul, {1, 1, 1, 2}}};
  // out[k] = x * w[k]; +[100,200] per channel; * [1,-1] per column.
  EXPECT_THAT(RunRef(w, {{1, 2, 3, 4}, {1, 2}, {100, 200}, {1, -1}}),
              ElementsAre(101, -102, 103, -104, 202, -204, 206, -208));
}

Workload Dense(int64_t M, int64_t N, int64_t K, int64_t ta, int64_t tb) {
  Workload w;
  w.op = Op::kDense;
  w.ints = {{"M", {M}},    {"N", {N}},     {"K", {K}},       {"transA", {ta}}, {"transB", {tb}},
            {"bias", {0}}, {"batch", {1}}, {"batch_a", {0}}, {"batch_b", {0}}};
  return w;
}

TEST(ReferenceDense, Plain) {
  EXPECT_THAT(RunRef(Dense(2, 2, 3, 0, 0), {Iota(6), Iota(6)}), ElementsAre(22, 28, 49, 64));
}

TEST(ReferenceDense, Transposed) {
  // A^T given as [K,M] = [[1,4],[2,5],[3,6]]; B^T as [N,K] = [[1,3,5],[2,4,6]].
  EXPECT_THAT(RunRef(Dense(2, 2, 3, 1, 1), {{1, 4, 2, 5, 3, 6}, {1, 3, 5, 2, 4, 6}}),
              ElementsAre(22, 28, 49, 64));
}

TEST(ReferenceDense, GemmAlphaBetaBias) {
  Workload w = Dense(2, 2, 3, 0, 0);
  w.ints["bias"] = {1};
  w.ints["bias_shape"] = {1, 2};
  w.floats["alpha"] = 2.0;
  w.floats["beta"] = 0.5;
  EXPECT_THAT(RunRef(w, {Iota(6), Iota(6), {1, 2}}), ElementsAre(44.5, 57, 98.5, 129));
}

TEST(ReferenceDense, BatchedWithSharedB) {
  Workload w = Dense(1, 2, 2, 0, 0);
  w.ints["batch"] = {2};
  w.ints["batch_a"] = {1};
  // A: [[1,2]], [[3,4]]; B = [[1,0],[0,1]] shared.
  EXPECT_THAT(RunRef(w, {{1, 2, 3, 4}, {1, 0, 0, 1}}), ElementsAre(1, 2, 3, 4));
  w.ints["batch_b"] = {1};
  EXPECT_THAT(RunRef(w, {{1, 2, 3, 4}, {1, 0, 0, 1, 2, 0, 0, 2}}), ElementsAre(1, 2, 6, 8));
}

// Big enough to be verified by rows across threads: every layout against
// the plain triple loop, element for element.
TEST(ReferenceDense, LargeInRowsMatchesThePlainLoop) {
  const int64_t M = 37, N = 301, K = 1603, batch = 2;
  std::vector<float> a(batch * M * K), b(batch * K * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7919) % 23) - 11;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 104729) % 19) - 9;
  for (int64_t ta : {0, 1}) {
    for (int64_t tb : {0, 1}) {
      Workload w = Dense(M, N, K, ta, tb);
      w.ints["batch"] = {batch};
      w.ints["batch_a"] = {1};
      w.ints["batch_b"] = {1};
      std::vector<float> got = RunRef(w, {a, b});
      ASSERT_EQ(got.size(), static_cast<size_t>(batch * M * N));
      for (int64_t bi = 0; bi < batch; ++bi) {
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t n = 0; n < N; ++n) {
            double want = 0;
            for (int64_t k = 0; k < K; ++k) {
              want += static_cast<double>(a[bi * M * K + (ta ? k * M + m : m * K + k)]) *
                      b[bi * K * N + (tb ? n * K + k : k * N + n)];
            }
            ASSERT_EQ(got[(bi * M + m) * N + n], static_cast<float>(want))
                << "ta " << ta << " tb " << tb << " at " << bi << "," << m << "," << n;
          }
        }
      }
    }
  }
}

Workload Pool(int64_t H, int64_t k, int64_t stride, int64_t pad, int64_t kind, int64_t cip,
              int64_t OH) {
  Workload w;
  w.op = Op::kPool2d;
  w.ints = {{"N", {1}},
            {"C", {1}},
            {"H", {H}},
            {"W", {H}},
            {"kernel", {k, k}},
            {"stride", {stride, stride}},
            {"pad", {pad, pad, pad, pad}},
            {"dilation", {1, 1}},
            {"OH", {OH}},
            {"OW", {OH}},
            {"kind", {kind}},
            {"count_include_pad", {cip}}};
  return w;
}

TEST(ReferencePool, Max) {
  EXPECT_THAT(RunRef(Pool(4, 2, 2, 0, 0, 0, 2), {Iota(16)}), ElementsAre(6, 8, 14, 16));
}

TEST(ReferencePool, AverageWithPadding) {
  auto out = RunRef(Pool(3, 3, 1, 1, 1, 0, 3), {Iota(9)});
  EXPECT_FLOAT_EQ(out[0], 3.0f);  // (1+2+4+5)/4
  EXPECT_FLOAT_EQ(out[4], 5.0f);  // all nine
  auto incl = RunRef(Pool(3, 3, 1, 1, 1, 1, 3), {Iota(9)});
  EXPECT_FLOAT_EQ(incl[0], 12.0f / 9.0f);
}

// Ceil mode: 5x5, 2x2 windows, stride 2 -> 3x3; the last window holds one
// input element. count_include_pad=0 averages what is inside; =1 divides by
// the taps inside the padded input (ONNX's reference, onnxruntime, PyTorch);
// kernels agree: see ops tests.
TEST(ReferencePool, CeilModeAverageCountsAsOnnxDoes) {
  auto excl = RunRef(Pool(5, 2, 2, 0, 1, 0, 3), {Iota(25)});
  EXPECT_FLOAT_EQ(excl[8], 25.0f);
  auto incl = RunRef(Pool(5, 2, 2, 0, 1, 1, 3), {Iota(25)});
  EXPECT_FLOAT_EQ(incl[8], 25.0f);
  EXPECT_FLOAT_EQ(incl[2], (5.0f + 10.0f) / 2.0f);
}

// With padding, the padded taps count and only the overhang past the end
// padding does not: 4 wide, pad 1 both sides, kernel 3, stride 2, ceil mode
// -> windows [-1,1], [1,3], [3,5]; the last has taps 3, 4 (pad), 5 (past).
TEST(ReferencePool, CeilModeInclusiveCountsPaddingNotOverhang) {
  Workload w;
  w.op = Op::kPool2d;
  w.ints = {{"N", {1}},           {"C", {1}},         {"H", {1}},
            {"W", {4}},           {"OH", {1}},        {"OW", {3}},
            {"kernel", {1, 3}},   {"stride", {1, 2}}, {"pad", {0, 1, 0, 1}},
            {"dilation", {1, 1}}, {"kind", {1}},      {"count_include_pad", {1}}};
  EXPECT_THAT(RunRef(w, {{1, 2, 3, 4}}), ElementsAre(3.0f / 3, 9.0f / 3, 4.0f / 2));
}

TEST(ReferencePool, MaxWithNegativeValuesIgnoresPadding) {
  auto out = RunRef(Pool(2, 2, 1, 1, 0, 0, 3), {{-1, -2, -3, -4}});
  EXPECT_THAT(out, ElementsAre(-1, -1, -2, -1, -1, -2, -3, -3, -4));
}

TEST(ReferenceEltwise, BroadcastInputAndOperand) {
  Workload w;
  w.op = Op::kEltwise;
  w.ints = {{"shape", {2, 3}}, {"in_shape", {1, 3}}};
  w.epilogue = {{EpilogueKind::kAdd, {2, 1}}, {EpilogueKind::kRelu, {}}};
  EXPECT_THAT(RunRef(w, {{1, -5, 3}, {10, -10}}), ElementsAre(11, 5, 13, 0, 0, 0));
}

TEST(ReferenceErrors, WrongInputCount) {
  Workload w = Dense(2, 2, 3, 0, 0);
  std::vector<float> a(6);
  std::vector<const void*> ptrs = {a.data()};
  std::vector<float> out(4);
  EXPECT_EQ(RunReference(w, ptrs, out.data()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// The reference of `workloads` (loops for their integer sums, the epilogue
// interpreted) gives exactly what their generic op's compute, interpreted,
// gives; how many were checked.
int CheckLoopsAgainstGenericCompute(const std::vector<const char*>& workloads) {
  const Target host = Target::Host();
  const ops::OpTemplate* generic = ops::GenericTemplate();
  int checked = 0;
  for (const char* s : workloads) {
    auto w = Workload::Parse(s);
    EXPECT_TRUE(w.ok()) << s << ": " << w.status();
    if (!w.ok()) continue;
    EXPECT_TRUE(ops::Int8Conv(*w) || ops::Int8DepthwiseConv(*w) || ops::Int8MatMul(*w)) << s;
    auto sig = w->Signature();
    EXPECT_TRUE(sig.ok());
    if (!sig.ok()) continue;
    KernelBuffers b = MakeKernelBuffers(*sig, 5, 0.f);
    std::vector<uint8_t> got(b.output.size(), 1), want(b.output.size(), 2);
    EXPECT_TRUE(RunReference(*w, b.input_ptrs, got.data()).ok()) << s;
    auto built = generic->build(*w, host, generic->default_config(*w, host));
    EXPECT_TRUE(built.ok()) << built.status();
    if (!built.ok()) continue;
    EXPECT_TRUE(ops::Interpret(built->args, b.input_ptrs, want.data()).ok()) << s;
    EXPECT_EQ(got, want) << s;
    ++checked;
  }
  return checked;
}

// The int8 convolutions: uint8 and int8 x with its zero point in the
// padding, strides, a 7x7 stem, channels in blocks in and out, a depthwise
// layer, a requantizing float epilogue with per-channel operands.
TEST(Reference, Int8ConvLoopsMatchTheGenericCompute) {
  EXPECT_EQ(
      CheckLoopsAgainstGenericCompute(
          {"conv(dilations=1,1;dtypes=2,3,2,1,1,1,1;group=1;in0=1,3,23,23;in1=16,3,7,7;in2=1;"
           "pads=3,3;shape=1,16,12,12;strides=2,2;transposed=0;zp=2)|u:cast:1|mul:1,16,1,1|"
           "add:1,16,1,1|u:round|u:clip:0,255|mul:1,1,1,1",
           "conv(dilations=1,1;dtypes=3,3,3,6;group=1;in0=1,5,9,10;in1=8,5,3,3;in2=1;pads=1,1;"
           "shape=1,8,9,10;strides=1,1;transposed=0;zp=2)",
           "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,2,9,10,16;in1=32,32,3,3;in2=1;"
           "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)",
           "conv(dilations=1,1;dtypes=2,3,2,6;group=16;in0=1,1,7,7,16;in1=16,1,3,3;in2=1;"
           "in_block=16;out_block=16;pads=1,1;shape=1,1,7,7,16;strides=1,1;transposed=0;zp=2)"}),
      4);
}

// The int8 matmul (its reference took 30 s for a BERT-base product
// interpreted, and agents check every candidate): uint8 and int8 A with its
// zero point, a leading 1, a requantizing epilogue.
TEST(Reference, Int8MatMulLoopsMatchTheGenericCompute) {
  EXPECT_EQ(CheckLoopsAgainstGenericCompute(
                {"matmul(dtypes=2,3,2,6;in0=37,128;in1=128,70;in2=1;shape=37,70;zp=2)",
                 "matmul(dtypes=3,3,3,6;in0=1,16,96;in1=1,96,24;in2=1;shape=1,16,24;zp=2)",
                 "matmul(dtypes=2,3,2,1,1;in0=9,64;in1=64,16;in2=1;shape=9,16;zp=2)"
                 "|u:cast:1|mul:1,16"}),
            3);
}

}  // namespace
}  // namespace kiln::compiler
