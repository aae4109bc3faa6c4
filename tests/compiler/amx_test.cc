// AMX (codegen/llvm_amx.h): the int8 matmul's and the bf16 dense's tiles as
// AMX tile products (tdpbusd, tdpbf16ps).
// The instructions are in the object code of a Sapphire Rapids kernel on
// any host; the products match the reference exactly where the host has
// AMX-INT8 (skipped, saying so, elsewhere).
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "compiler/kernel.h"
#include "compiler/target.h"
#include "tests/compiler/kernel_check.h"
#include "tests/compiler/object_code.h"

namespace kiln::compiler {
namespace {

using test_util::ExpectMatchesReference;
using test_util::ParseWorkload;

// uint8 A, K a multiple of 64: rows and columns that the 16x16 tiles do not
// divide, three and twelve steps of k, a batch dim of 1, a float epilogue
// (the dequantizing cast and scale).
constexpr const char* kAmxMatMuls[] = {
    "matmul(dtypes=2,3,2,6;in0=37,128;in1=128,70;in2=1;shape=37,70;zp=2)",
    "matmul(dtypes=2,3,2,6;in0=1,16,192;in1=1,192,48;in2=1;shape=1,16,48;zp=2)",
    "matmul(dtypes=2,3,2,1;in0=50,768;in1=768,100;in2=1;shape=50,100;zp=2)|u:cast:1|"
    "u:scale:0.25,1",
};

// K a multiple of 32: rows and columns the tiles do not divide, transposed
// A, a batch of A, a bias, a ReLU.
constexpr const char* kAmxBf16Denses[] = {
    "dense(K=64;M=30;N=96;batch=1;batch_a=0;batch_b=0;bf16=1;bias=0;transA=1;transB=0)|u:relu",
    "dense(K=96;M=20;N=40;batch=2;batch_a=1;batch_b=0;bf16=1;bias=1;bias_shape=1,1,40;transA=0;"
    "transB=1)",
};

// uint8 x, C a multiple of 4, channel blocks out: a padded 3x3 layer in
// blocks, a 1x1 one on 7x7 with a requantizing epilogue (49 pixels: a last
// partial box), a strided 3x3 of 64 channels, an NCHW input of 8 channels
// (its im2col padded to a whole tile step).
constexpr const char* kAmxConvs[] = {
    "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,2,9,10,16;in1=32,32,3,3;in2=1;"
    "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)",
    "conv(dilations=1,1;dtypes=2,3,2,1,1,1,2;group=1;in0=1,2,7,7,16;in1=32,32,1,1;in2=1;"
    "in_block=16;out_block=16;pads=0,0;shape=1,2,7,7,16;strides=1,1;transposed=0;zp=2)"
    "|u:cast:1|mul:1,2,1,1,16|add:1,2,1,1,16|u:round|add:1,1,1,1,1|u:cast:2",
    "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,4,9,9,16;in1=64,64,3,3;in2=1;"
    "in_block=16;out_block=16;pads=1,1;shape=1,4,5,5,16;strides=2,2;transposed=0;zp=2)",
    "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,8,11,11;in1=16,8,3,3;in2=1;"
    "out_block=16;pads=1,1;shape=1,1,6,6,16;strides=2,2;transposed=0;zp=2)",
    // Read in place (amx_direct=1): 64 channels in blocks, padded, rows of
    // 10 pixels (boxes of 16 hold 10); an unpadded NCHW input of 128
    // channels (two tile steps a tap) with a requantizing epilogue.
    "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,4,9,10,16;in1=32,64,3,3;in2=1;"
    "in_block=16;out_block=16;pads=1,1;shape=1,2,9,10,16;strides=1,1;transposed=0;zp=2)",
    "conv(dilations=1,1;dtypes=2,3,2,1,1,1,2;group=1;in0=1,128,8,19;in1=48,128,3,3;in2=1;"
    "out_block=16;pads=0,0;shape=1,3,6,17,16;strides=1,1;transposed=0;zp=2)"
    "|u:cast:1|mul:1,3,1,1,16|add:1,3,1,1,16|u:round|add:1,1,1,1,1|u:cast:2",
};

// bf16 convolutions (--precision bf16): a padded 3x3 in blocks with a bias
// and a ReLU, a strided 1x1, an NCHW input of 6 channels strided 2 with
// padding (its im2col padded to a whole tile step).
constexpr const char* kAmxBf16Convs[] = {
    "conv2d(C=32;H=9;K=32;N=1;OH=9;OW=9;R=3;S=3;W=9;bias=1;bf16=1;dilation=1,1;groups=1;"
    "in_block=16;out_block=16;pad=1,1,1,1;stride=1,1)|relu",
    "conv2d(C=32;H=10;K=64;N=1;OH=5;OW=5;R=1;S=1;W=10;bias=0;bf16=1;dilation=1,1;groups=1;"
    "in_block=16;out_block=16;pad=0,0,0,0;stride=2,2)",
    "conv2d(C=6;H=15;K=16;N=1;OH=8;OW=8;R=3;S=3;W=15;bias=1;bf16=1;dilation=1,1;groups=1;"
    "out_block=16;pad=1,1,1,1;stride=2,2)",
    // Read in place (amx_direct=1): 32 channels in blocks, padded, 20
    // pixels a row (boxes of 16 and 32).
    "conv2d(C=32;H=6;K=32;N=1;OH=6;OW=20;R=3;S=3;W=20;bias=1;bf16=1;dilation=1,1;groups=1;"
    "in_block=16;out_block=16;pad=1,1,1,1;stride=1,1)|relu",
};

// A Sapphire Rapids with its AMX units (named: on a host of that model
// whose VM hides them, the host's features are the target's).
Target SapphireRapids() {
  return *Target::Parse(
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=sapphirerapids "
      "-mattr=+amx-tile,+amx-int8,+amx-bf16");
}

TEST(Amx, Int8MatMulIsTileProductsWhereTheCpuHasThem) {
  const Target spr = SapphireRapids();
  const Target zen4 = *Target::Parse("llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver4");
  Workload w = ParseWorkload(kAmxMatMuls[0]);
  Config c = *DefaultConfig(w, spr);
  EXPECT_EQ(c["amx"], 1) << "AMX is the default where the CPU has it";
  ASSERT_TRUE(ValidateConfig(w, spr, c).ok()) << ValidateConfig(w, spr, c);
  if (!test_util::OnPath("llvm-objdump-19")) GTEST_SKIP() << "llvm-objdump-19 not found";
  auto n = test_util::Mnemonics(w, c, spr, {"tdpbusd", "tileloadd", "ldtilecfg", "tilestored"});
  EXPECT_GT(n["tdpbusd"], 0);
  EXPECT_GT(n["tileloadd"], 0);
  EXPECT_GT(n["ldtilecfg"], 0);
  EXPECT_GT(n["tilestored"], 0);
  Workload dense = ParseWorkload(kAmxBf16Denses[0]);
  EXPECT_EQ(DefaultConfig(dense, spr)->at("amx"), 1);
  EXPECT_GT(
      test_util::Mnemonics(dense, *DefaultConfig(dense, spr), spr, {"tdpbf16ps"})["tdpbf16ps"], 0);
  // A conv of 256 -> 128 channels is tiles by default; one of 32 -> 32 (few
  // products per pixel) stays on VNNI.
  Workload conv = ParseWorkload(
      "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,16,14,14,16;in1=128,256,1,1;in2=1;"
      "in_block=16;out_block=16;pads=0,0;shape=1,8,14,14,16;strides=1,1;transposed=0;zp=2)");
  EXPECT_EQ(DefaultConfig(conv, spr)->at("amx"), 1);
  EXPECT_EQ(DefaultConfig(ParseWorkload(kAmxConvs[0]), spr)->at("amx"), 0);
  EXPECT_GT(test_util::Mnemonics(conv, *DefaultConfig(conv, spr), spr, {"tdpbusd"})["tdpbusd"], 0);
  // No AMX on Zen 4, nor with B packed in pairs (no VNNI), an int8 A (its
  // bytes would need flipping), or K not a multiple of 64: amx=1 is not a
  // choice.
  Target spr_pairs = spr;  // told it has no VNNI: B packed in pairs
  spr_pairs.attrs += ",-avx512vnni,-avxvnni";
  for (const auto& [s, t] : std::vector<std::pair<std::string, Target>>{
           {kAmxMatMuls[0], zen4},
           {kAmxMatMuls[0], spr_pairs},
           {"matmul(dtypes=3,3,3,6;in0=16,64;in1=64,16;in2=1;shape=16,16;zp=2)", spr},
           {"matmul(dtypes=2,3,2,6;in0=16,96;in1=96,16;in2=1;shape=16,16;zp=2)", spr}}) {
    Config amx = *DefaultConfig(ParseWorkload(s), t);
    amx["amx"] = 1;
    EXPECT_FALSE(ValidateConfig(ParseWorkload(s), t, amx).ok()) << s;
  }
  // Tiles of whole 16x16 blocks only; VNNI tiles of at most 12 rows.
  Config odd = c;
  odd["tile_m"] = 12;
  EXPECT_FALSE(ValidateConfig(w, spr, odd).ok());
  Config tall = c;
  tall["amx"] = 0;
  EXPECT_FALSE(ValidateConfig(w, spr, tall).ok());
}

// Every valid config with amx=1 and each box of `rows` x `cols` (the knobs
// `m_knob`, `n_knob`; the vector template's knobs at the values amx=1
// takes, the parallel split varied) checked against the reference for each
// workload; how many, or -1 when the host lacks the AMX `unit` (and in
// `in_place_checked` how many of them read the input in place).
int CheckAmxBoxes(const char* unit, const std::vector<const char*>& workloads, const char* m_knob,
                  const char* n_knob, const std::vector<int64_t>& rows,
                  const std::vector<int64_t>& cols, int* in_place_checked = nullptr) {
  const Target host = Target::Host();
  if (!host.HasFeature(unit)) return -1;
  int checked = 0;
  for (const char* s : workloads) {
    Workload w = ParseWorkload(s);
    for (int64_t tm : rows) {
      for (int64_t tn : cols) {
        Config c = *DefaultConfig(w, host);
        for (const auto& [knob, value] : std::vector<std::pair<const char*, int64_t>>{
                 {"kb", 16}, {"reg_n", 1}, {"unroll_j", 0}, {"pack", 1}, {"tile_k", 1}}) {
          if (c.count(knob)) c[knob] = value;
        }
        c["amx"] = 1;
        c[m_knob] = tm;
        c[n_knob] = tn;
        if (c.count("n_outer")) c["n_outer"] = (tm + tn) / 16 % 2;
        c["parallel"] = (tm / 16 + tn / 16) % (c.count("kb") ? 3 : 2);
        // Convolutions: through an im2col and, where it fits, in place.
        for (int64_t in_place : {0, 1}) {
          if (c.count("amx_direct")) c["amx_direct"] = in_place;
          if (in_place && !c.count("amx_direct")) break;
          if (!ValidateConfig(w, host, c).ok()) continue;
          ExpectMatchesReference(w, c, s, 7 + checked);
          ++checked;
          if (in_place && in_place_checked) ++*in_place_checked;
        }
      }
    }
  }
  return checked;
}

TEST(Amx, Int8MatMulTilesMatchTheReferenceExactly) {
  const int checked = CheckAmxBoxes("amx-int8", {std::begin(kAmxMatMuls), std::end(kAmxMatMuls)},
                                    "tile_m", "tile_n", {16, 32, 64}, {16, 48, 64});
  if (checked < 0) GTEST_SKIP() << "this CPU (" << Target::Host().cpu << ") has no AMX-INT8";
  EXPECT_GE(checked, 15);
}

TEST(Amx, Int8ConvTilesMatchTheReferenceExactly) {
  int in_place = 0;
  const int checked = CheckAmxBoxes("amx-int8", {std::begin(kAmxConvs), std::end(kAmxConvs)},
                                    "amx_m", "amx_n", {16, 32, 64}, {16, 32, 64}, &in_place);
  if (checked < 0) GTEST_SKIP() << "this CPU (" << Target::Host().cpu << ") has no AMX-INT8";
  EXPECT_GE(checked, 15);
  EXPECT_GE(in_place, 8);
}

TEST(Amx, Bf16ConvTilesMatchTheReference) {
  int in_place = 0;
  const int checked =
      CheckAmxBoxes("amx-bf16", {std::begin(kAmxBf16Convs), std::end(kAmxBf16Convs)}, "amx_m",
                    "amx_n", {16, 32, 64}, {16, 32}, &in_place);
  if (checked < 0) GTEST_SKIP() << "this CPU (" << Target::Host().cpu << ") has no AMX-BF16";
  EXPECT_GE(checked, 12);
  EXPECT_GE(in_place, 4);
}

TEST(Amx, Bf16DenseTilesMatchTheReference) {
  const int checked =
      CheckAmxBoxes("amx-bf16", {std::begin(kAmxBf16Denses), std::end(kAmxBf16Denses)}, "tile_m",
                    "tile_n", {16, 32}, {16, 32, 48});
  if (checked < 0) GTEST_SKIP() << "this CPU (" << Target::Host().cpu << ") has no AMX-BF16";
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace kiln::compiler
