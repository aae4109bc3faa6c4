// Template variants against the reference: epilogue taps on every template
// that takes an epilogue, and the generic template's reductions in vector
// lanes (rvec) and tiled transposes (tr_tile).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "base/str.h"
#include "compiler/kernel.h"
#include "compiler/measure.h"
#include "compiler/ops/common.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

using test_util::ParseWorkload;

using test_util::CheckRandomConfigs;
using test_util::ExpectMatchesReference;

// Epilogue taps (`mul:@N`: the chain's own value entering op N as the
// operand, as a fused GELU's x * f(x) has it) on every template that takes an
// epilogue: the dense, a 1x1 conv (direct, NCHWc or GEMM by config) and an
// eltwise. Taps read no buffer; malformed taps are refused.
TEST(OpsNumeric, EpilogueTapsMatchReference) {
  Target host = Target::Host();
  std::mt19937 rng(7);
  for (const char* s :
       {"dense(K=19;M=7;N=13;bias=1;bias_shape=1,13;transA=0;transB=1)|add:1,13|u:erf|mul:@1|"
        "mul:@0",
        "conv2d(C=8;H=6;K=16;N=1;OH=6;OW=6;R=1;S=1;W=6;bias=1;dilation=1,1;groups=1;"
        "pad=0,0,0,0;stride=1,1)|relu|mul:@0|b:sub:@1",
        "eltwise(in_shape=2,4,3,11;shape=2,4,3,11)|u:erf|add:2,1,3,11|br:sub:@0"}) {
    Workload w = ParseWorkload(s);
    EXPECT_EQ(w.Canonical(), s);
    auto sig = w.Signature();
    ASSERT_TRUE(sig.ok()) << sig.status();
    for (const TensorSpec& in : sig->inputs) EXPECT_NE(in.name, "ep1") << s;  // one operand at most
    ExpectMatchesReference(w, *DefaultConfig(w, host), s);
    EXPECT_GT(CheckRandomConfigs(w, host, rng, 30, 4, s), 0) << s;
  }
  for (const char* bad :
       {"eltwise(in_shape=4;shape=4)|u:erf|mul:@2", "eltwise(in_shape=4;shape=4)|mul:@-1",
        "eltwise(in_shape=4;shape=4)|mul:@x", "eltwise(in_shape=4;shape=4)|u:erf:@0"}) {
    auto w = Workload::Parse(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// Checks the configs of `w` that take each choice of its last knob, `name`
// (which the default sets to more than 0), alone and in parallel, against the
// reference; how many.
int CheckEveryChoice(const Workload& w, const std::string& name, const std::string& what) {
  Target host = Target::Host();
  auto knobs = *KnobsOf(w, host);
  EXPECT_EQ(knobs.back().name, name) << what;
  if (knobs.back().name != name) return 0;
  EXPECT_GT(DefaultConfig(w, host)->at(name), 0) << what;
  int checked = 0;
  for (int64_t choice : knobs.back().choices) {
    for (int64_t parallel : knobs[1].choices) {
      Config c = *DefaultConfig(w, host);
      c[name] = choice;
      c["parallel"] = parallel;
      ExpectMatchesReference(w, c, what);
      ++checked;
    }
  }
  return checked;
}

// rvec: a reduction along the input's contiguous last axis in vector lanes
// (a partial stage of `rvec` lanes per output element, then the lanes
// reduced), for every kind (sum, max, min, prod) and pre (none, abs,
// square), a last axis that the lanes do not divide, several reduced axes,
// keep=0 and an epilogue; every rvec choice, alone and in parallel, against
// the one-element-at-a-time reference.
TEST(OpsNumeric, ReductionsInVectorLanesMatchReference) {
  Target host = Target::Host();
  int checked = 0;
  for (const std::string shape :
       {"axes=2;in0=2,3,37;keep=1;shape=2,3,1", "axes=1,2;in0=4,5,64;keep=0;shape=4"}) {
    for (int kind = 0; kind < 4; ++kind) {
      for (int pre = 0; pre < 3; ++pre) {
        for (const char* epilogue : {"", "|u:scale:0.5,1"}) {
          const std::string text =
              StrCat("reduce(", shape, ";kind=", kind, ";pre=", pre, ")", epilogue);
          checked += CheckEveryChoice(ParseWorkload(text), "rvec", text);
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
  // Not offered where the last axis is kept.
  auto knobs =
      *KnobsOf(ParseWorkload("reduce(axes=1;in0=4,64,8;keep=1;kind=0;pre=0;shape=4,1,8)"), host);
  for (const Knob& k : knobs) EXPECT_NE(k.name, "rvec");
}

// tr_tile: a transpose that moves its input's last axis copies tiles along
// it, whole and partial (extent 20 in tiles of 8 and 16), in parallel or not,
// with a prologue-free and an epilogue-bearing output, against the reference.
TEST(OpsNumeric, TransposeTilesMatchReference) {
  Target host = Target::Host();
  int checked = 0;
  for (const char* text : {"transpose(in0=3,5,20;perm=0,2,1;shape=3,20,5)",
                           "transpose(in0=2,6,3,20;perm=0,2,3,1;shape=2,3,20,6)|u:exp",
                           "transpose(in0=9,20;perm=1,0;shape=20,9)"}) {
    Workload w = ParseWorkload(text);
    checked += CheckEveryChoice(w, "tr_tile", text);
    auto knobs = *KnobsOf(w, host);
    Config both = *DefaultConfig(w, host);
    both["vec"] = knobs[0].choices.back();
    if (both["vec"] > 1) EXPECT_FALSE(ValidateConfig(w, host, both).ok()) << text;
  }
  EXPECT_GE(checked, 12);
  // Not offered where the last axis stays last.
  auto kept = *KnobsOf(ParseWorkload("transpose(in0=4,6,16;perm=1,0,2;shape=6,4,16)"), host);
  for (const Knob& k : kept) EXPECT_NE(k.name, "tr_tile");
}

// The default config of `w`, then each choice of each knob in `names` on
// it (where valid), against the reference; how many configs beyond the
// default.
int CheckTiles(const Workload& w, const std::vector<std::string>& names, const std::string& what) {
  Target host = Target::Host();
  ExpectMatchesReference(w, *DefaultConfig(w, host), what);
  int checked = 0;
  const std::vector<Knob> knobs = *KnobsOf(w, host);
  for (const Knob& k : knobs) {
    if (std::find(names.begin(), names.end(), k.name) == names.end()) continue;
    for (int64_t v : k.choices) {
      Config c = *DefaultConfig(w, host);
      c[k.name] = v;
      if (!ValidateConfig(w, host, c).ok()) continue;
      ExpectMatchesReference(w, c, what);
      ++checked;
    }
  }
  return checked;
}

// The int8 conv (conv_int8.cc: packed 4-channel groups, dot4 along output
// columns): uint8 and int8 x with a random zero point (the padding's value),
// channels that 4 does not divide, 3x3 padded, stride 2, 1x1 and 7x7, a
// float epilogue; every tile and random configs, exactly against the
// reference, with and without VNNI.
TEST(OpsNumeric, Int8ConvMatchesReferenceExactly) {
  Target host = Target::Host();
  Target plain = host;
  plain.attrs = "-avx512vnni,-avxvnni";
  std::mt19937 rng(13);
  int checked = 0;
  for (const char* s :
       {"conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,5,9,10;in1=8,5,3,3;in2=1;pads=1,1;"
        "shape=1,8,9,10;strides=1,1;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=3,3,3,6;group=1;in0=1,8,11,11;in1=12,8,3,3;in2=1;pads=1,1;"
        "shape=1,12,6,6;strides=2,2;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=2,16,7,7;in1=20,16,1,1;in2=1;pads=0,0;"
        "shape=2,20,7,7;strides=1,1;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,1;group=1;in0=1,3,20,20;in1=16,3,7,7;in2=1;"
        "pads=3,3;shape=1,16,10,10;strides=2,2;transposed=0;zp=2)|u:cast:1|u:scale:0.25,1"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Int8Conv(w)) << s;
    ExpectMatchesReference(w, *DefaultConfig(w, plain), s, 7, plain);
    checked += CheckTiles(w, {"tile_p", "tile_k"}, s);
    checked += CheckRandomConfigs(w, host, rng, 40, 4, s);
  }
  EXPECT_GT(checked, 20);
  // A large image: D computed in blocks of rows (its scratch bounded), the
  // last block partial.
  ExpectMatchesReference(
      ParseWorkload("conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,4,160,160;in1=16,4,3,3;in2=1;"
                    "pads=1,1;shape=1,16,160,160;strides=1,1;transposed=0;zp=2)"),
      {{"tile_k", 8}, {"tile_p", 32}, {"unroll_s", 1}, {"parallel", 1}}, "large image");
  // Their flops (the tuner's GFLOP/s): 2 per multiply-add of the direct form.
  EXPECT_DOUBLE_EQ(ParseWorkload("conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,5,9,10;"
                                 "in1=8,5,3,3;in2=1;pads=1,1;shape=1,8,9,10;strides=1,1;"
                                 "transposed=0;zp=2)")
                       .Flops(),
                   8 * 9 * 10 * 2.0 * 5 * 3 * 3);
  for (const char* s :
       {"conv(dilations=1,1;dtypes=2,3,2,3,6;group=1;in0=1,5,9,10;in1=8,5,3,3;in2=1;in3=1;"
        "pads=1,1;shape=1,8,9,10;strides=1,1;transposed=0;zp=1)",
        "conv(dilations=2,2;dtypes=2,3,2,6;group=1;in0=1,5,9,10;in1=8,5,3,3;in2=1;pads=2,2;"
        "shape=1,8,9,10;strides=1,1;transposed=0;zp=2)"}) {
    EXPECT_FALSE(ops::Int8Conv(ParseWorkload(s))) << s;
  }
}

// The int8 conv in channel blocks (the layout pass's in_block / out_block):
// conv_int8_blocked.cc writing blocks from NCHW (5 channels, int8 x,
// stride 2) and from blocks (3x3 padded; 1x1 read in place at stride 1 and
// 2, with a blocked float epilogue of per-channel and scalar operands), and
// conv_int8.cc reading blocks into NCHW; every tile and random configs,
// exactly against the reference, with and without VNNI.
TEST(OpsNumeric, Int8BlockedConvMatchesReferenceExactly) {
  Target host = Target::Host();
  Target plain = host;
  plain.attrs = "-avx512vnni,-avxvnni";
  // And on an AVX2 board without VNNI (a Zen 2 EPYC), where dot4's pairs of
  // 16-bit products are pmaddwd: x86 hosts run its code.
  const bool x86 = host.triple.rfind("x86_64", 0) == 0;
  Target avx2 = *Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver2");
  std::mt19937 rng(17);
  int checked = 0;
  for (const char* s :
       {"conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,2,9,10,16;in1=32,32,3,3;in2=1;"
        "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=3,3,3,6;group=1;in0=1,5,11,11;in1=16,5,3,3;in2=1;"
        "out_block=16;pads=1,1;shape=1,1,6,6,16;strides=2,2;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,1,1,1,2;group=1;in0=1,2,7,7,16;in1=32,32,1,1;in2=1;"
        "in_block=16;out_block=16;pads=0,0;shape=1,2,7,7,16;strides=1,1;transposed=0;zp=2)"
        "|u:cast:1|mul:1,2,1,1,16|add:1,2,1,1,16|u:round|add:1,1,1,1,1|u:cast:2",
        "conv(dilations=1,1;dtypes=3,3,3,6;group=1;in0=1,1,8,8,16;in1=16,16,1,1;in2=1;"
        "in_block=16;out_block=16;pads=0,0;shape=1,1,4,4,16;strides=2,2;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,1,8,8,16;in1=12,16,3,3;in2=1;"
        "in_block=16;pads=1,1;shape=1,12,8,8;strides=1,1;transposed=0;zp=2)"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Int8Conv(w)) << s;
    ExpectMatchesReference(w, *DefaultConfig(w, plain), s, 7, plain);
    if (x86) ExpectMatchesReference(w, *DefaultConfig(w, avx2), s, 7, avx2);
    checked +=
        CheckTiles(w, {"kb", "reg_n", "pack", "unroll_j", "parallel", "tile_k", "ko_inner"}, s);
    checked += CheckRandomConfigs(w, host, rng, 30, 4, s);
  }
  EXPECT_GT(checked, 40);
  // A 1x1 conv whose input outweighs its weights runs its channel tiles
  // inside each tile of pixels; parallel=1 (over those tiles) is refused so.
  Workload wide = ParseWorkload(
      "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,8,14,14,16;in1=32,128,1,1;in2=1;"
      "in_block=16;out_block=16;pads=0,0;shape=1,2,14,14,16;strides=1,1;transposed=0;zp=2)");
  Config inner = *DefaultConfig(wide, host);
  EXPECT_EQ(inner.at("ko_inner"), 1);
  ExpectMatchesReference(wide, inner, "ko_inner", 7, host);
  inner["parallel"] = 1;
  EXPECT_FALSE(ValidateConfig(wide, host, inner).ok());
  // In place only where no padding is read and the tiles divide the row.
  Workload padded = ParseWorkload(
      "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,2,9,10,16;in1=32,32,3,3;in2=1;"
      "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)");
  Config c = *DefaultConfig(padded, host);
  c["pack"] = 0;
  EXPECT_FALSE(ValidateConfig(padded, host, c).ok());
}

// A QDQ conv's requantized bytes as an agent checks them: the kernel's
// float epilogue contracts y * a + b into one FMA where the reference
// rounds the product first, so a value on a tie of round() may land one
// step apart (ResNet-50's 512->1024 stride-2 layer: every candidate was
// refused for one element in 200,704). One step on a few elements passes
// (RoundingTies); more, or a larger difference, does not.
TEST(OpsNumeric, RequantizedInt8OutputsPassTheAgentsCheck) {
  Workload w = ParseWorkload(
      "conv(dilations=1,1;dtypes=2,3,2,1,1,1,2;group=1;in0=1,512,28,28;in1=1024,512,1,1;in2=1;"
      "pads=0,0;shape=1,1024,14,14;strides=2,2;transposed=0;zp=2)|u:cast:1|mul:1,1024,1,1|"
      "add:1,1024,1,1|u:round|add:1,1,1,1|u:cast:2");
  MeasurePolicy once;
  once.number = 1;
  once.repeat = 1;
  once.min_repeat_ms = 0;
  // Seed 42's inputs put one element on a tie (refused when checked
  // exactly; seeds 7 and 1234 do not).
  Measurement m = Measure(w, *DefaultConfig(w, Target::Host()), once, Target::Host(), 42);
  EXPECT_EQ(m.error, MeasureError::kNone) << m.message;
  EXPECT_EQ(RoundingTies(w, 200704), 20);
  const uint8_t got[4] = {1, 2, 3, 4}, one[4] = {1, 3, 3, 4}, two[4] = {1, 4, 3, 4};
  EXPECT_TRUE(OutputsMatch(DType::kUInt8, got, one, 4, 0, 0, nullptr, 1));
  EXPECT_FALSE(OutputsMatch(DType::kUInt8, got, one, 4, 0, 0, nullptr, 0));
  EXPECT_FALSE(OutputsMatch(DType::kUInt8, got, two, 4, 0, 0, nullptr, 1));
}

// The int8 depthwise conv (conv_int8_depthwise.cc: exact sums in float32
// lanes): uint8 and int8 x with a random zero point (the padding's value),
// 3x3 padded at stride 1 and 2, 5x5, rows narrower than a vector and wider
// ones with a partial last vector, a float epilogue that starts with the
// conversion and an int32 output without one; every config, exactly against
// the reference.
TEST(OpsNumeric, Int8DepthwiseConvMatchesReferenceExactly) {
  std::mt19937 rng(17);
  int checked = 0;
  for (const char* s :
       {"conv(dilations=1,1;dtypes=2,3,2,6;group=6;in0=1,6,9,10;in1=6,1,3,3;in2=1;pads=1,1;"
        "shape=1,6,9,10;strides=1,1;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=3,3,3,6;group=8;in0=2,8,23,21;in1=8,1,3,3;in2=1;pads=1,1;"
        "shape=2,8,12,11;strides=2,2;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=2,3,2,1;group=5;in0=1,5,20,37;in1=5,1,5,5;in2=1;pads=2,2;"
        "shape=1,5,20,37;strides=1,1;transposed=0;zp=2)|u:cast:1|u:scale:0.25,1",
        // Stride 2 along rows read as even and odd half-rows: 5x5 taps
        // (offsets 0-2 into each half), an even width; stride 2 along the
        // row only.
        "conv(dilations=1,1;dtypes=2,3,2,6;group=4;in0=1,4,16,30;in1=4,1,5,5;in2=1;pads=2,2;"
        "shape=1,4,8,15;strides=2,2;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=3,3,3,6;group=3;in0=1,3,9,10;in1=3,1,3,3;in2=1;pads=1,1;"
        "shape=1,3,9,5;strides=1,2;transposed=0;zp=2)",
        // In channel blocks (in_block = out_block): 3x3 at stride 1 and 2
        // (7-pixel rows, a partial last tile), a blocked float epilogue.
        "conv(dilations=1,1;dtypes=2,3,2,6;group=32;in0=1,2,7,7,16;in1=32,1,3,3;in2=1;"
        "in_block=16;out_block=16;pads=1,1;shape=1,2,7,7,16;strides=1,1;transposed=0;zp=2)",
        "conv(dilations=1,1;dtypes=3,3,3,1,2;group=16;in0=1,1,15,15,16;in1=16,1,3,3;in2=1;"
        "in_block=16;out_block=16;pads=1,1;shape=1,1,8,8,16;strides=2,2;transposed=0;zp=2)"
        "|u:cast:1|mul:1,1,1,1,16|u:round|u:cast:2"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Int8DepthwiseConv(w)) << s;
    ASSERT_FALSE(ops::Int8Conv(w)) << s;
    checked += CheckRandomConfigs(w, Target::Host(), rng, 8, 4, s);
    if (w.IntOr("in_block", 0) > 0) checked += CheckTiles(w, {"dw_ow", "parallel"}, s);
  }
  EXPECT_GT(checked, 12);
  // Blocks are read only by a depthwise conv that writes them.
  EXPECT_FALSE(ops::Int8DepthwiseConv(
      ParseWorkload("conv(dilations=1,1;dtypes=2,3,2,6;group=16;in0=1,1,7,7,16;in1=16,1,3,3;"
                    "in2=1;in_block=16;pads=1,1;shape=1,16,7,7;strides=1,1;transposed=0;zp=2)")));
  // A multiplier of 2 (K = 2C) is not depthwise.
  EXPECT_FALSE(ops::Int8DepthwiseConv(
      ParseWorkload("conv(dilations=1,1;dtypes=2,3,2,6;group=4;in0=1,4,9,10;in1=8,1,3,3;in2=1;"
                    "pads=1,1;shape=1,8,9,10;strides=1,1;transposed=0;zp=2)")));
}

// The int8 matmul (matmul_int8.cc: dot4 products of packed bytes, vpdpbusd
// where the host has VNNI): uint8 and int8 A over the whole byte range with
// a random zero point, K and N that the 4-byte groups and the vector panels
// do not divide, a batch dim of 1 and a float epilogue (the dequantizing
// cast and scale it takes in a model), every tile_n and tile_k and random
// configs, exactly against the reference (int32 out).
TEST(OpsNumeric, Int8MatMulMatchesReferenceExactly) {
  Target host = Target::Host();
  std::mt19937 rng(11);
  int checked = 0;
  // dtypes: A, B (int8), A's zero point, out (ONNX codes: 2 uint8, 3 int8,
  // 6 int32, 1 float32).
  for (const char* s :
       {"matmul(dtypes=2,3,2,6;in0=7,37;in1=37,45;in2=1;shape=7,45;zp=2)",
        "matmul(dtypes=3,3,3,6;in0=1,13,64;in1=1,64,16;in2=1;shape=1,13,16;zp=2)",
        "matmul(dtypes=2,3,2,6;in0=1,130;in1=130,70;in2=1;shape=1,70;zp=2)",
        // K a whole number of 16-byte groups: without VNNI, A's pairs packed ahead.
        "matmul(dtypes=2,3,2,6;in0=5,48;in1=48,20;in2=1;shape=5,20;zp=2)",
        "matmul(dtypes=2,3,2,1;in0=9,24;in1=24,33;in2=1;shape=9,33;zp=2)|u:cast:1|u:scale:0.5,0"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Int8MatMul(w)) << s;
    checked += CheckTiles(w, {"tile_n", "tile_k"}, s);
    checked += CheckRandomConfigs(w, host, rng, 40, 6, s);
    // Without VNNI: the same sums in pairs of 16-bit halves (dot2).
    Target plain = host;
    plain.attrs = "-avx512vnni,-avxvnni";
    ExpectMatchesReference(w, *DefaultConfig(w, plain), s, 7, plain);
    // AVX2 code without VNNI (pairs of 16-bit halves, dot2) on x86 hosts.
    if (host.triple.rfind("x86_64", 0) == 0) {
      Target avx2 = *Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver2");
      ExpectMatchesReference(w, *DefaultConfig(w, avx2), s, 7, avx2);
    }
  }
  EXPECT_GT(checked, 20);
  EXPECT_DOUBLE_EQ(
      ParseWorkload("matmul(dtypes=2,3,2,6;in0=7,37;in1=37,45;in2=1;shape=7,45;zp=2)").Flops(),
      7 * 45 * 2.0 * 37);
  // Not taken: both zero points (B not shifted), an int8 B with a batch, a
  // per-row zero point of A.
  for (const char* s : {"matmul(dtypes=2,3,2,3,6;in0=7,37;in1=37,45;in2=1;in3=1;shape=7,45;zp=1)",
                        "matmul(dtypes=2,3,2,6;in0=2,7,37;in1=2,37,45;in2=1;shape=2,7,45;zp=2)",
                        "matmul(dtypes=2,3,2,6;in0=7,37;in1=37,45;in2=7;shape=7,45;zp=2)"}) {
    EXPECT_FALSE(ops::Int8MatMul(ParseWorkload(s))) << s;
  }
}

// The bfloat16 dense (dense_bf16.cc, --precision bf16): B packed in pairs at
// compile time, A's pairs per call, products by vdpbf16ps where the host has
// AVX512_BF16 and by widened halves elsewhere (without it, and as AVX2 code
// on x86 hosts); B as [K,N] and [N,K], transposed A, odd K and N that no
// vector divides, a bias, a batch of A, a ReLU epilogue; every tile and
// random configs against the reference, which rounds A and B to bfloat16
// (and so differs from the float32 product).
TEST(OpsNumeric, Bf16DenseMatchesReference) {
  Target host = Target::Host();
  Target plain = host;
  plain.attrs = "-avx512bf16";
  const bool x86 = host.triple.rfind("x86_64", 0) == 0;
  std::mt19937 rng(19);
  int checked = 0;
  for (const char* s :
       {"dense(K=37;M=13;N=40;batch=1;batch_a=0;batch_b=0;bf16=1;bias=1;bias_shape=1,40;"
        "transA=0;transB=1)",
        "dense(K=64;M=30;N=96;batch=1;batch_a=0;batch_b=0;bf16=1;bias=0;transA=1;transB=0)|u:relu",
        "dense(K=20;M=5;N=33;batch=2;batch_a=1;batch_b=0;bf16=1;bias=0;transA=0;transB=0)"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Bf16Dense(w)) << s;
    checked += CheckTiles(w, {"tile_m", "tile_n", "tile_k", "parallel", "n_outer"}, s);
    checked += CheckRandomConfigs(w, host, rng, 40, 6, s);
    ExpectMatchesReference(w, *DefaultConfig(w, plain), s, 7, plain);
    if (x86) {
      Target avx2 = *Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver2");
      ExpectMatchesReference(w, *DefaultConfig(w, avx2), s, 7, avx2);
    }
    // The reference's rounding is real: float32 products differ.
    Workload fp32 = w;
    fp32.ints.erase("bf16");
    auto sig = w.Signature();
    ASSERT_TRUE(sig.ok());
    KernelBuffers b = MakeKernelBuffers(*sig, 3, 12345.f);
    std::vector<uint8_t> want(b.output.size()), full(b.output.size());
    ASSERT_TRUE(RunReference(w, b.input_ptrs, want.data()).ok());
    ASSERT_TRUE(RunReference(fp32, b.input_ptrs, full.data()).ok());
    EXPECT_FALSE(
        OutputsMatch(b.output_dtype, want.data(), full.data(), b.OutputSize(), 1e-5, 1e-5, nullptr))
        << s;
  }
  EXPECT_GT(checked, 20);
  // Not taken: a batched B (attention's products of activations), an
  // unmarked dense.
  EXPECT_FALSE(ops::Bf16Dense(ParseWorkload(
      "dense(K=4;M=3;N=6;batch=2;batch_a=1;batch_b=1;bf16=1;bias=0;transA=0;transB=0)")));
  EXPECT_FALSE(ops::Bf16Dense(
      ParseWorkload("dense(K=4;M=3;N=6;batch=1;batch_a=0;batch_b=0;bias=0;transA=0;transB=0)")));
  EXPECT_FALSE(Workload::Parse(
                   "dense(K=4;M=3;N=6;batch=1;batch_a=0;batch_b=0;bf16=2;bias=0;transA=0;transB=0)")
                   .ok());
}

// The bfloat16 conv in channel blocks (conv2d_bf16.cc): from blocks (3x3
// padded with bias and ReLU, 1x1 at stride 2, 3x3 dilated) and from NCHW
// with an odd channel count (the RGB stem, 7x7 at stride 2); every tile and
// random configs against the reference (operands rounded to bfloat16), with
// vdpbf16ps where the host has it, without it, and as AVX2 code on x86.
TEST(OpsNumeric, Bf16ConvMatchesReference) {
  Target host = Target::Host();
  Target plain = host;
  plain.attrs = "-avx512bf16";
  const bool x86 = host.triple.rfind("x86_64", 0) == 0;
  std::mt19937 rng(23);
  int checked = 0;
  for (const char* s :
       {"conv2d(C=32;H=9;K=32;N=1;OH=9;OW=9;R=3;S=3;W=9;bias=1;bf16=1;dilation=1,1;groups=1;"
        "in_block=16;out_block=16;pad=1,1,1,1;stride=1,1)|relu",
        "conv2d(C=3;H=15;K=16;N=1;OH=8;OW=8;R=7;S=7;W=15;bias=1;bf16=1;dilation=1,1;groups=1;"
        "out_block=16;pad=3,3,3,3;stride=2,2)",
        "conv2d(C=32;H=10;K=64;N=1;OH=5;OW=5;R=1;S=1;W=10;bias=0;bf16=1;dilation=1,1;groups=1;"
        "in_block=16;out_block=16;pad=0,0,0,0;stride=2,2)",
        "conv2d(C=16;H=9;K=16;N=2;OH=5;OW=5;R=3;S=3;W=9;bias=0;bf16=1;dilation=2,2;groups=1;"
        "in_block=16;out_block=16;pad=0,0,0,0;stride=1,1)"}) {
    Workload w = ParseWorkload(s);
    ASSERT_TRUE(ops::Bf16Conv(w)) << s;
    checked += CheckTiles(w, {"kb", "reg_n", "unroll_j", "parallel"}, s);
    checked += CheckRandomConfigs(w, host, rng, 40, 4, s);
    ExpectMatchesReference(w, *DefaultConfig(w, plain), s, 7, plain);
    if (x86) {
      Target avx2 = *Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver2");
      ExpectMatchesReference(w, *DefaultConfig(w, avx2), s, 7, avx2);
    }
  }
  EXPECT_GT(checked, 30);
  // Not taken: NCHW output, a grouped conv.
  EXPECT_FALSE(ops::Bf16Conv(ParseWorkload(
      "conv2d(C=16;H=9;K=16;N=1;OH=9;OW=9;R=3;S=3;W=9;bias=0;bf16=1;dilation=1,1;groups=1;"
      "pad=1,1,1,1;stride=1,1)")));
  EXPECT_FALSE(ops::Bf16Conv(ParseWorkload(
      "conv2d(C=16;H=9;K=16;N=1;OH=9;OW=9;R=3;S=3;W=9;bias=0;bf16=1;dilation=1,1;groups=16;"
      "in_block=16;out_block=16;pad=1,1,1,1;stride=1,1)")));
}

}  // namespace
}  // namespace kiln::compiler
