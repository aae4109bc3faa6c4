// conv2d's layouts against the reference: NCHW[x]c (every blocking, folded
// rows, input-channel chunks), 1x1 as GEMM, Winograd, depthwise, and the
// channel-blocked tensors the layout pass gives them; the defaults these
// layouts take on small images and blocked depthwise layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "base/str.h"
#include "compiler/ir/printer.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

using test_util::CheckRandomConfigs;
using test_util::ExpectMatchesReference;
using test_util::ParseWorkload;

// A conv2d workload with an R x R kernel, the same stride, padding and
// dilation on both axes, and a bias.
Workload SquareConv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R,
                    int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t dil, int64_t groups) {
  auto out = [&](int64_t in) { return (in + pad_lo + pad_hi - dil * (R - 1) - 1) / stride + 1; };
  Workload w;
  w.op = Op::kConv2d;
  w.ints = {{"N", {N}},
            {"C", {C}},
            {"H", {H}},
            {"W", {W}},
            {"K", {K}},
            {"R", {R}},
            {"S", {R}},
            {"stride", {stride, stride}},
            {"pad", {pad_lo, pad_lo, pad_hi, pad_hi}},
            {"dilation", {dil, dil}},
            {"groups", {groups}},
            {"bias", {1}},
            {"OH", {out(H)}},
            {"OW", {out(W)}}};
  return w;
}

// Each knob's choices for `w` on `t`, by name.
std::map<std::string, std::vector<int64_t>> ChoicesOf(const Workload& w, const Target& t) {
  std::map<std::string, std::vector<int64_t>> out;
  auto knobs = KnobsOf(w, t);
  EXPECT_TRUE(knobs.ok()) << knobs.status();
  if (knobs.ok()) {
    for (const Knob& k : *knobs) out[k.name] = k.choices;
  }
  return out;
}

// conv2d layout=1 (NCHW[x]c inside the kernel) against the reference: every
// kb, the smallest and largest cb and reg_n and a middle reg_n, on shapes with stride 2,
// dilation, asymmetric padding, 1x1, an odd input-channel count (the RGB
// stem), a partial last pixel tile and a fused residual add + relu.
TEST(OpsNumeric, NchwcConvEveryBlockingMatchesReference) {
  Target host = Target::Host();
  const int lanes = host.NativeVectorLanes();
  struct Case {
    int64_t C, K, H, R, stride, pad_lo, pad_hi, dil;
  };
  for (Case s : {Case{8, 2 * lanes, 9, 3, 1, 1, 1, 1}, Case{3, lanes, 11, 7, 2, 3, 2, 1},
                 Case{16, lanes, 10, 1, 1, 0, 0, 1}, Case{4, 2 * lanes, 12, 3, 2, 0, 1, 2}}) {
    Workload w = SquareConv(1, s.C, s.H, s.H, s.K, s.R, s.stride, s.pad_lo, s.pad_hi, s.dil, 1);
    const int64_t OH = w.Int("OH");
    w.epilogue = {EpilogueOp{EpilogueKind::kAdd, {1, s.K, OH, OH}},
                  EpilogueOp{EpilogueKind::kRelu, {}}};
    const std::string what = w.Canonical();
    Config def = *DefaultConfig(w, host);
    EXPECT_EQ(def.at("layout"), 1) << what;
    ExpectMatchesReference(w, def, what);
    auto choices = ChoicesOf(w, host);
    int built = 0;
    const std::vector<int64_t>& rns = choices["reg_n"];
    for (int64_t kb : choices["kb"]) {
      for (int64_t cb : {choices["cb"].front(), choices["cb"].back()}) {
        for (int64_t rn : {rns.front(), rns[rns.size() / 2], rns.back()}) {
          Config c = def;
          c["kb"] = kb;
          c["cb"] = cb;
          c["reg_n"] = rn;
          c["parallel"] = (kb + rn) % 2;
          // Blocks of one output row and of all; packed input rows and
          // direct reads (unpadded cases only).
          for (int64_t rows : {choices["rows"].front(), choices["rows"].back()}) {
            for (int64_t pd : choices["pack_data"]) {
              c["rows"] = rows;
              c["pack_data"] = pd;
              // In parallel over row blocks where there are two or more.
              c["par_rows"] = c["parallel"] && w.Int("OH") / rows >= 2;
              if (!ValidateConfig(w, host, c).ok()) continue;
              ++built;
              ExpectMatchesReference(w, c, what);
            }
          }
        }
      }
    }
    EXPECT_GT(built, 2) << what;
  }
}

// conv2d NCHWc with folded rows (fold): a 1x1, stride-1, unpadded layer's
// image read as OH / fold rows of OW * fold pixels, its register tiles
// running across the rows; with NCHW and blocked data and output, a
// residual operand (folded with the image) and a per-channel one (not).
TEST(OpsNumeric, NchwcFoldedRowsMatchReference) {
  Target host = Target::Host();
  const int64_t b = kChannelBlock;
  int built = 0;
  for (int64_t H : {7, 14}) {
    for (int64_t ib : {int64_t{0}, b}) {
      for (int64_t ob : {int64_t{0}, b}) {
        Workload w = SquareConv(1, 2 * b, H, H, 2 * b, 1, 1, 0, 0, 1, 1);
        w.ints["in_block"] = {ib};
        w.ints["out_block"] = {ob};
        w.epilogue = {EpilogueOp{EpilogueKind::kAdd, BlockedShape({1, 2 * b, H, H}, ob)},
                      EpilogueOp{EpilogueKind::kMul, BlockedShape({1, 2 * b, 1, 1}, ob)},
                      EpilogueOp{EpilogueKind::kRelu, {}}};
        const std::string what = w.Canonical();
        auto choices = ChoicesOf(w, host);
        const std::vector<int64_t> folds =
            H == 7 ? std::vector<int64_t>{1, 7} : std::vector<int64_t>{1, 2, 7};
        EXPECT_EQ(choices["fold"], folds) << what;
        Config c = *DefaultConfig(w, host);
        c["layout"] = 1;
        for (int64_t fold : choices["fold"]) {
          for (int64_t rn : choices["reg_n"]) {
            for (int64_t rows : {fold, H}) {
              c["fold"] = fold;
              c["reg_n"] = rn;
              c["rows"] = rows;
              c["parallel"] = 1;
              c["par_rows"] = H / rows >= 2;
              if (!ValidateConfig(w, host, c).ok()) continue;
              ++built;
              ExpectMatchesReference(w, c, what + " " + CanonicalConfig(c));
            }
          }
        }
        // Rows that are not whole folds.
        c["fold"] = 7;
        c["rows"] = 2;
        c["par_rows"] = 0;
        EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << what;
      }
    }
  }
  EXPECT_GT(built, 8);
  // Nothing to fold: a 3x3 layer, a strided one, a padded one, and an
  // operand broadcast along the rows (it would need a per-row index).
  Workload three = SquareConv(1, b, 7, 7, b, 3, 1, 1, 1, 1, 1);
  Workload strided = SquareConv(1, b, 14, 14, b, 1, 2, 0, 0, 1, 1);
  Workload padded = SquareConv(1, b, 7, 7, b, 1, 1, 1, 1, 1, 1);
  Workload per_row = SquareConv(1, b, 7, 7, b, 1, 1, 0, 0, 1, 1);
  per_row.epilogue = {EpilogueOp{EpilogueKind::kAdd, {1, b, 7, 1}}};
  for (const Workload& w : {three, strided, padded, per_row}) {
    EXPECT_EQ(ChoicesOf(w, host)["fold"], std::vector<int64_t>{1}) << w.Canonical();
    Config c = *DefaultConfig(w, host);
    EXPECT_EQ(c.at("fold"), 1) << w.Canonical();
    c["layout"] = 1;
    c["fold"] = 7;
    c["rows"] = w.Int("OH");
    EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << w.Canonical();
  }
}

// conv2d NCHWc with input-channel cache blocking (cin): the accumulators of
// a block of rows computed cin input channels at a time, every tile in
// turn; with and without padding, blocked or NCHW data, partial tiles.
TEST(OpsNumeric, NchwcInputChannelChunksMatchReference) {
  Target host = Target::Host();
  const int64_t lanes = host.NativeVectorLanes();
  // A tile of a whole row where the accumulators fit it (7 x 2 vectors with
  // AVX-512's 32 registers), a partial one where they do not (6 with 16).
  const int64_t wide = host.NumVectorRegisters() >= 32 ? 7 : 6;
  int built = 0;
  for (int64_t R : {1, 3}) {
    for (int64_t ib : {int64_t{0}, kChannelBlock}) {
      Workload w = SquareConv(1, 64, 7, 7, 2 * lanes, R, 1, R / 2, R / 2, 1, 1);
      w.ints["in_block"] = {ib};
      const std::string what = w.Canonical();
      Config c = *DefaultConfig(w, host);
      c["layout"] = 1;
      c["fold"] = 1;  // rows of 7 pixels
      auto choices = ChoicesOf(w, host);
      ASSERT_EQ(choices["cin"], (std::vector<int64_t>{0, 32})) << what;
      for (int64_t rn : {int64_t{4}, wide}) {
        c["cin"] = 32;
        c["reg_n"] = rn;
        // In parallel over blocks of one row (one output-channel block).
        c["parallel"] = rn == wide;
        c["par_rows"] = rn == wide;
        c["rows"] = rn == wide ? 1 : 7;
        ASSERT_TRUE(ValidateConfig(w, host, c).ok()) << what << " " << ValidateConfig(w, host, c);
        ++built;
        ExpectMatchesReference(w, c, what);
      }
      // The next chunk's weights prefetched: the same sums.
      ASSERT_EQ(choices["prefetch"], (std::vector<int64_t>{0, 1})) << what;
      c["prefetch"] = 1;
      ASSERT_TRUE(ValidateConfig(w, host, c).ok()) << what << " " << ValidateConfig(w, host, c);
      ++built;
      ExpectMatchesReference(w, c, what);
      c["cin"] = 0;
      EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << what;  // prefetch needs cin
      c["prefetch"] = 0;
      c["cb"] = 16;
      c["cin"] = 32;
      EXPECT_TRUE(ValidateConfig(w, host, c).ok()) << what;
      c["layout"] = 4;
      EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << what;  // cin is NCHWc's
    }
  }
  EXPECT_EQ(built, 12);
}

// conv2d layout=3 (1x1 as GEMM on the NCHW tensors): the default of a 1x1
// layer; every register tile, a batch, output channels not a multiple of the
// tile, epilogues over the whole image and per channel.
TEST(OpsNumeric, GemmConvEveryTileMatchesReference) {
  Target host = Target::Host();
  const int lanes = host.NativeVectorLanes();
  for (int64_t N : {1, 2}) {
    Workload w = SquareConv(N, 24, 2 * lanes, 3, 20, 1, 1, 0, 0, 1, 1);
    w.epilogue = {EpilogueOp{EpilogueKind::kAdd, {N, 20, 2 * lanes, 3}},
                  EpilogueOp{EpilogueKind::kMul, {1, 20, 1, 1}},
                  EpilogueOp{EpilogueKind::kRelu, {}}};
    const std::string what = w.Canonical();
    Config def = *DefaultConfig(w, host);
    EXPECT_EQ(def.at("layout"), 3) << what;
    ExpectMatchesReference(w, def, what);
    auto choices = ChoicesOf(w, host);
    int built = 0;
    for (int64_t gv : choices["gv"]) {
      for (int64_t gm : choices["gm"]) {
        Config c = def;
        c["gv"] = gv;
        c["gm"] = gm;
        c["parallel"] = (gm + gv) % 2;
        if (!ValidateConfig(w, host, c).ok()) continue;
        ++built;
        ExpectMatchesReference(w, c, what);
      }
    }
    EXPECT_GT(built, 8) << what;
  }
  // Not offered where the pixels are not a multiple of the vector width, or
  // for a strided or padded 1x1.
  Config c = *DefaultConfig(SquareConv(1, 8, 5, 5, 16, 1, 1, 0, 0, 1, 1), host);
  EXPECT_NE(c.at("layout"), 3);
  c = *DefaultConfig(SquareConv(1, 8, 4 * lanes, 2, 16, 1, 2, 0, 0, 1, 1), host);
  EXPECT_NE(c.at("layout"), 3);
}

// conv2d layout=4 and 5 (Winograd F(4x4, 3x3) and F(2x2, 3x3)): images that
// are not a multiple of the tile, no padding and asymmetric padding, a batch,
// an odd channel count, an epilogue, every register tile, block of tile rows
// and way of running in parallel, within the same tolerance as the direct
// templates. Not offered for strided, dilated, grouped or 5x5 layers.
TEST(OpsNumeric, WinogradConvEveryTileMatchesReference) {
  Target host = Target::Host();
  const int lanes = host.NativeVectorLanes();
  struct Case {
    int64_t N, C, H, W, pad_lo, pad_hi;
  };
  for (int64_t layout : {4, 5}) {
    for (Case s : {Case{1, 5, 10, 13, 1, 1}, Case{2, 8, 9, 8, 0, 1}, Case{1, 3, 6, 6, 0, 0},
                   Case{1, 16, 7, 7, 1, 1}}) {
      Workload w = SquareConv(s.N, s.C, s.H, s.W, 2 * lanes, 3, 1, s.pad_lo, s.pad_hi, 1, 1);
      w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
      const std::string what = StrCat("layout=", layout, " ", w.Canonical());
      auto choices = ChoicesOf(w, host);
      ASSERT_NE(std::find(choices["layout"].begin(), choices["layout"].end(), layout),
                choices["layout"].end())
          << what;
      Config def = *DefaultConfig(w, host);
      def["layout"] = layout;
      def["par_rows"] = 0;
      def["cin"] = 0;
      def["fold"] = 1;
      int built = 0;
      for (int64_t kb : choices["wg_kb"]) {
        for (int64_t tw : choices["wg_tw"]) {
          for (int64_t rows : choices["wg_rows"]) {
            Config c = def;
            c["wg_kb"] = kb;
            c["wg_tw"] = tw;
            c["wg_rows"] = rows;
            c["parallel"] = (kb / lanes + tw + rows) % 2;
            c["wg_par"] = (tw + rows) % 3 == 0;
            if (!ValidateConfig(w, host, c).ok()) continue;
            ++built;
            ExpectMatchesReference(w, c, what);
          }
        }
      }
      // F(4x4, 3x3) computes a 6x6 output as one tile.
      EXPECT_GT(built, s.H > 6 || layout == 5 ? 3 : 0) << what;
    }
  }
  // A tile size's blocks of rows are checked against its own rows of tiles:
  // 7 rows are 2 rows of 4x4 tiles and 4 of 2x2 tiles.
  Workload w7 = SquareConv(1, 16, 7, 7, 2 * lanes, 3, 1, 1, 1, 1, 1);
  Config c = *DefaultConfig(w7, host);
  c["layout"] = 5;
  c["par_rows"] = 0;
  c["cin"] = 0;
  c["fold"] = 1;
  c["parallel"] = 0;
  c["wg_kb"] = lanes;
  c["wg_tw"] = 1;
  c["wg_rows"] = 4;
  EXPECT_TRUE(ValidateConfig(w7, host, c).ok()) << ValidateConfig(w7, host, c);
  c["layout"] = 4;
  EXPECT_FALSE(ValidateConfig(w7, host, c).ok());
  for (Workload w : {SquareConv(1, 8, 12, 12, 2 * lanes, 3, 2, 1, 1, 1, 1),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 3, 1, 2, 2, 2, 1),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 3, 1, 1, 1, 1, 2),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 5, 1, 2, 2, 1, 1)}) {
    auto layouts = ChoicesOf(w, host)["layout"];
    EXPECT_EQ(std::find(layouts.begin(), layouts.end(), 4), layouts.end()) << w.Canonical();
    EXPECT_EQ(std::find(layouts.begin(), layouts.end(), 5), layouts.end()) << w.Canonical();
  }
}
// The configs the tuner measures before it searches (VariantConfigs): the
// default first, then one per other layout the layer offers, each valid,
// with its own layout, computing the right answer.
TEST(OpsNumeric, VariantsAreTheDefaultThenEveryOtherLayout) {
  Target host = Target::Host();
  const int lanes = host.NativeVectorLanes();
  for (Workload w : {SquareConv(1, 16, 7, 7, 2 * lanes, 3, 1, 1, 1, 1, 1),
                     SquareConv(1, 2 * lanes, 6, 6, 2 * lanes, 1, 1, 0, 0, 1, 1),
                     SquareConv(1, 2 * lanes, 9, 9, 2 * lanes, 3, 1, 1, 1, 1, 2 * lanes)}) {
    const std::string what = w.Canonical();
    auto variants = VariantConfigs(w, host);
    ASSERT_TRUE(variants.ok()) << variants.status();
    ASSERT_FALSE(variants->empty());
    EXPECT_EQ(variants->front(), *DefaultConfig(w, host)) << what;
    std::set<int64_t> layouts;
    for (const Config& c : *variants) {
      EXPECT_TRUE(ValidateConfig(w, host, c).ok()) << what << " " << ValidateConfig(w, host, c);
      EXPECT_TRUE(layouts.insert(c.at("layout")).second) << what << ": layout " << c.at("layout");
      ExpectMatchesReference(w, c, StrCat(what, " layout=", c.at("layout")));
    }
    auto offered = ChoicesOf(w, host)["layout"];
    EXPECT_EQ(layouts, std::set<int64_t>(offered.begin(), offered.end())) << what;
  }
  // The 3x3 layer on 7x7 offers both Winograd tile sizes.
  auto v7 = VariantConfigs(SquareConv(1, 16, 7, 7, 2 * lanes, 3, 1, 1, 1, 1, 1), host);
  std::set<int64_t> l7;
  for (const Config& c : *v7) l7.insert(c.at("layout"));
  EXPECT_TRUE(l7.count(4) && l7.count(5));
}

// conv2d layout=2 (depthwise rows): strides 1 and 2, dilation, asymmetric
// padding, a batch, every dw_ow, serial and parallel.
TEST(OpsNumeric, DepthwiseConvEveryTileMatchesReference) {
  Target host = Target::Host();
  struct Case {
    int64_t N, C, H, W, R, stride, pad_lo, pad_hi, dil;
  };
  for (Case s : {Case{1, 6, 13, 17, 3, 1, 1, 1, 1}, Case{2, 4, 12, 19, 3, 2, 1, 0, 1},
                 Case{1, 3, 11, 9, 5, 2, 2, 2, 1}, Case{1, 5, 10, 14, 3, 1, 2, 2, 2}}) {
    Workload w = SquareConv(s.N, s.C, s.H, s.W, s.C, s.R, s.stride, s.pad_lo, s.pad_hi, s.dil, s.C);
    w.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, ElementFn::kClip, {0.0, 6.0}}};
    const std::string what = w.Canonical();
    Config def = *DefaultConfig(w, host);
    EXPECT_EQ(def.at("layout"), 2) << what;
    ExpectMatchesReference(w, def, what);
    auto knobs = KnobsOf(w, host);
    ASSERT_TRUE(knobs.ok()) << knobs.status();
    for (const Knob& k : *knobs) {
      if (k.name != "dw_ow") continue;
      for (int64_t ow : k.choices) {
        for (int64_t par : {0, 1}) {
          Config c = def;
          c["dw_ow"] = ow;
          c["parallel"] = par;
          ASSERT_TRUE(ValidateConfig(w, host, c).ok()) << what;
          ExpectMatchesReference(w, c, what);
        }
      }
    }
  }
}

// NCHWc's default blocks input channels by 32 (cin) on images 14 pixels
// wide or less whose weights reach 512 KiB (ResNet-50's 14x14 and 7x7
// layers), so that each pixel tile reads a chunk's weights from L1; not on
// small weights (MobileNetV2's 14x14 1x1 layers) nor wider images. With it,
// the defaults match the reference.
TEST(OpsNumeric, SmallImagesWithLargeWeightsBlockInputChannels) {
  Target host = Target::Host();
  struct Case {
    const char* workload;
    int64_t cin;
  };
  for (Case c :
       {Case{"conv2d(C=512;H=7;K=512;N=1;OH=7;OW=7;R=3;S=3;W=7;bias=1;dilation=1,1;groups=1;"
             "in_block=16;out_block=16;pad=1,1,1,1;stride=1,1)|relu",
             32},
        Case{"conv2d(C=1024;H=14;K=256;N=1;OH=14;OW=14;R=1;S=1;W=14;bias=1;dilation=1,1;"
             "groups=1;in_block=16;out_block=16;pad=0,0,0,0;stride=1,1)|relu",
             32},
        Case{"conv2d(C=64;H=14;K=384;N=1;OH=14;OW=14;R=1;S=1;W=14;bias=1;dilation=1,1;groups=1;"
             "in_block=16;out_block=16;pad=0,0,0,0;stride=1,1)|u:clip:0,6",
             0},
        Case{"conv2d(C=128;H=28;K=512;N=1;OH=28;OW=28;R=1;S=1;W=28;bias=1;dilation=1,1;"
             "groups=1;in_block=16;out_block=16;pad=0,0,0,0;stride=1,1)",
             0}}) {
    Workload w = ParseWorkload(c.workload);
    Config def = *DefaultConfig(w, host);
    ASSERT_EQ(def.at("layout"), 1) << c.workload;
    EXPECT_EQ(def.at("cin"), c.cin) << c.workload << " " << CanonicalConfig(def);
    ASSERT_TRUE(ValidateConfig(w, host, def).ok()) << c.workload;
    ExpectMatchesReference(w, def, c.workload);
  }
}

// A blocked depthwise layer of 28 rows or more shares out its output rows
// among the threads (the loop run in parallel is the rows', 56 here); a
// smaller one, or NCHW data, its channels (2 blocks, 32 channels). Both
// match the reference, into blocks and into NCHW.
TEST(OpsNumeric, BlockedDepthwiseSharesOutRowsFrom28) {
  Target host = Target::Host();
  const int64_t b = kChannelBlock;
  auto parallel_extent = [&](const Workload& w, const Config& c) -> std::string {
    auto f = LowerWorkload(w, c, host, "k", {});
    if (!f.ok()) return f.status().ToString();
    const std::string text = ToText(*f);
    const size_t at = text.find(") parallel");
    if (at == std::string::npos) return "serial";
    return text.substr(text.rfind(", ", at) + 2, at - text.rfind(", ", at) - 2);
  };
  for (int64_t ob : {b, int64_t{0}}) {
    for (int64_t stride : {1, 2}) {
      for (int64_t h : {112, 14}) {
        Workload w = SquareConv(1, 2 * b, h, h, 2 * b, 3, stride, 1, 1, 1, 2 * b);
        w.ints["in_block"] = {b};
        w.ints["out_block"] = {ob};
        w.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, ElementFn::kClip, {0.0, 6.0}}};
        const std::string what = w.Canonical();
        Config c = *DefaultConfig(w, host);
        ASSERT_EQ(c.at("layout"), 2) << what;
        c["parallel"] = 1;
        EXPECT_EQ(parallel_extent(w, c), w.Int("OH") >= 28 ? std::to_string(w.Int("OH")) : "2")
            << what;
        ExpectMatchesReference(w, c, what);
      }
    }
  }
  Workload nchw = SquareConv(1, 2 * b, 56, 56, 2 * b, 3, 1, 1, 1, 1, 2 * b);
  Config c = *DefaultConfig(nchw, host);
  ASSERT_EQ(c.at("layout"), 2);
  c["parallel"] = 1;
  EXPECT_EQ(parallel_extent(nchw, c), "32");
}

// Channel blocks (in_block / out_block, the layout pass's NCHW[16]c): the
// NCHWc, Winograd and depthwise templates and pool2d, with every pairing of
// blocked and NCHW data and output, a residual operand in the output's
// layout, the default and random valid configs; the NCHW-only layouts
// (direct, GEMM) are neither offered nor accepted.
TEST(OpsNumeric, BlockedLayoutsMatchReference) {
  Target host = Target::Host();
  const int64_t b = kChannelBlock;
  std::mt19937 rng(7);
  std::vector<Workload> cases;
  for (int64_t ib : {int64_t{0}, b}) {
    for (int64_t ob : {int64_t{0}, b}) {
      if (ib == 0 && ob == 0) continue;
      // 3x3 padded (NCHWc or Winograd), 1x1 unpadded, 3x3 stride 2.
      for (Workload w : {SquareConv(1, 2 * b, 10, 10, 2 * b, 3, 1, 1, 1, 1, 1),
                         SquareConv(1, b, 7, 7, 2 * b, 1, 1, 0, 0, 1, 1),
                         SquareConv(1, b, 9, 9, b, 3, 2, 1, 1, 1, 1)}) {
        w.ints["in_block"] = {ib};
        w.ints["out_block"] = {ob};
        const int64_t OH = w.Int("OH"), K = w.Int("K");
        w.epilogue = {EpilogueOp{EpilogueKind::kAdd, BlockedShape({1, K, OH, OH}, ob)},
                      EpilogueOp{EpilogueKind::kRelu, {}}};
        cases.push_back(w);
      }
      Workload pool = ParseWorkload(
          "pool2d(C=32;H=9;N=1;OH=5;OW=5;W=9;dilation=1,1;kernel=3,3;kind=0;pad=1,1,1,1;"
          "stride=2,2)");
      pool.ints["in_block"] = {ib};
      pool.ints["out_block"] = {ob};
      cases.push_back(pool);
      Workload gap = ParseWorkload(
          "pool2d(C=32;H=7;N=1;OH=1;OW=1;W=7;count_include_pad=0;dilation=1,1;kernel=7,7;kind=1;"
          "pad=0,0,0,0;stride=1,1)");
      gap.ints["in_block"] = {ib};
      gap.ints["out_block"] = {ob};
      cases.push_back(gap);
    }
  }
  // Depthwise from blocks into blocks, and into NCHW (for a consumer that
  // reads NCHW) with a residual operand in NCHW.
  for (int64_t stride : {1, 2}) {
    for (int64_t ob : {b, int64_t{0}}) {
      Workload dw = SquareConv(1, 2 * b, 11, 11, 2 * b, 3, stride, 1, 1, 1, 2 * b);
      dw.ints["in_block"] = {b};
      dw.ints["out_block"] = {ob};
      dw.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, ElementFn::kClip, {0.0, 6.0}}};
      if (ob == 0) {
        const int64_t OH = dw.Int("OH");
        dw.epilogue.push_back(EpilogueOp{EpilogueKind::kAdd, {1, 2 * b, OH, OH}});
      }
      cases.push_back(dw);
    }
  }
  std::map<int64_t, int> layouts;
  for (const Workload& w : cases) {
    const std::string what = w.Canonical();
    Config def = *DefaultConfig(w, host);
    ExpectMatchesReference(w, def, what);
    auto choices = ChoicesOf(w, host);
    if (w.op == Op::kConv2d) {
      ++layouts[def.at("layout")];
      for (int64_t nchw_only : {0, 3}) {
        EXPECT_EQ(std::count(choices["layout"].begin(), choices["layout"].end(), nchw_only), 0)
            << what;
        Config c = def;
        c["layout"] = nchw_only;
        EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << what;
      }
    }
    EXPECT_GT(CheckRandomConfigs(w, host, rng, 200, 6, what), 0) << what;
  }
  EXPECT_GT(layouts[1], 0);  // NCHWc
  EXPECT_GT(layouts[2], 0);  // depthwise
  // Blocks no template reads or writes are refused with the workload, not
  // left to the templates: another block size, a block that does not divide
  // the channels, a grouped layer, K not a multiple of the block, a
  // depthwise layer writing blocks from NCHW data.
  for (const char* bad :
       {"conv2d(C=32;H=8;K=32;N=1;OH=8;OW=8;R=1;S=1;W=8;bias=0;dilation=1,1;groups=1;in_block=8;"
        "pad=0,0,0,0;stride=1,1)",
        "conv2d(C=24;H=8;K=32;N=1;OH=8;OW=8;R=1;S=1;W=8;bias=0;dilation=1,1;groups=1;in_block=16;"
        "pad=0,0,0,0;stride=1,1)",
        "conv2d(C=32;H=8;K=32;N=1;OH=8;OW=8;R=1;S=1;W=8;bias=0;dilation=1,1;groups=2;in_block=16;"
        "pad=0,0,0,0;stride=1,1)",
        "conv2d(C=32;H=8;K=24;N=1;OH=8;OW=8;R=1;S=1;W=8;bias=0;dilation=1,1;groups=1;in_block=16;"
        "pad=0,0,0,0;stride=1,1)",
        "conv2d(C=32;H=8;K=32;N=1;OH=8;OW=8;R=3;S=3;W=8;bias=0;dilation=1,1;groups=32;"
        "out_block=16;pad=1,1,1,1;stride=1,1)",
        "pool2d(C=24;H=9;N=1;OH=5;OW=5;W=9;dilation=1,1;kernel=3,3;kind=0;out_block=16;pad=1,1,1,"
        "1;stride=2,2)"}) {
    auto w = Workload::Parse(bad);
    EXPECT_TRUE(!w.ok() || !w->Signature().ok()) << bad;
    if (w.ok()) EXPECT_EQ(w->Signature().status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace kiln::compiler
