// Operator templates: knobs, default/validated configs, lowered IR shape, and
// numeric correctness of JIT-built kernels against RunReference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "base/str.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

Workload Parse(const std::string& s) {
  auto w = Workload::Parse(s);
  EXPECT_TRUE(w.ok()) << w.status();
  return *w;
}

Target Avx2() {
  Target t;
  t.triple = "x86_64-pc-linux-gnu";
  t.cpu = "haswell";
  return t;
}

int64_t Pick8(const std::vector<Knob>& knobs) {
  for (const Knob& k : knobs) {
    if (k.name == "tile_ow") return k.choices.size() > 1 ? k.choices[1] : k.choices[0];
  }
  return 1;
}

const char* kConv =
    "conv2d(C=3;H=9;K=5;N=2;OH=9;OW=9;R=3;S=3;W=9;bias=1;dilation=1,1;groups=1;pad=1,1,1,1;stride="
    "1,1)|relu";
const char* kConvNoPad =
    "conv2d(C=4;H=8;K=8;N=1;OH=6;OW=6;R=3;S=3;W=8;bias=0;dilation=1,1;groups=1;pad=0,0,0,0;stride="
    "1,1)";
const char* kConvGroups =
    "conv2d(C=4;H=7;K=6;N=1;OH=4;OW=3;R=2;S=3;W=8;bias=1;dilation=2,1;groups=2;pad=1,0,0,1;stride="
    "2,3)|add:1,6,4,3";
const char* kDense =
    "dense(K=19;M=7;N=13;bias=1;bias_shape=1,13;transA=0;transB=1;alpha=f1.5;beta=f0.5)|relu";
const char* kDenseBatch =
    "dense(K=8;M=5;N=20;batch=3;batch_a=1;batch_b=0;bias=0;transA=1;transB=0)|mul:3,5,1";
const char* kPoolMax =
    "pool2d(C=3;H=9;N=2;OH=5;OW=5;W=9;dilation=1,1;kernel=3,3;kind=0;pad=1,1,1,1;stride=2,2)";
const char* kPoolAvg =
    "pool2d(C=2;H=8;N=1;OH=8;OW=8;W=8;count_include_pad=0;dilation=1,1;kernel=3,3;kind=1;pad=1,1,1,"
    "1;stride=1,1)|relu";
// Ceil mode with an inclusive average: the last windows run past the input.
const char* kPoolAvgCeil =
    "pool2d(C=3;H=5;N=1;OH=3;OW=3;W=5;count_include_pad=1;dilation=1,1;kernel=2,2;kind=1;pad=0,0,0,"
    "0;stride=2,2)";
// ... and with padding: the padded taps count, the overhang past them not.
const char* kPoolAvgCeilPad =
    "pool2d(C=2;H=5;N=1;OH=3;OW=3;W=4;count_include_pad=1;dilation=1,1;kernel=3,3;kind=1;pad=1,1,0,"
    "1;stride=2,2)";
const char* kElt = "eltwise(in_shape=1,4,1,11;shape=2,4,3,11)|add:2,1,3,11|relu";

std::vector<const char*> AllWorkloads() {
  return {kConv,    kConvNoPad, kConvGroups,  kDense,          kDenseBatch,
          kPoolMax, kPoolAvg,   kPoolAvgCeil, kPoolAvgCeilPad, kElt};
}

TEST(OpsKnobs, EveryOpHasKnobsAndAValidDefault) {
  for (const char* s : AllWorkloads()) {
    Workload w = Parse(s);
    auto knobs = KnobsOf(w, Avx2());
    ASSERT_TRUE(knobs.ok()) << s;
    EXPECT_FALSE(knobs->empty()) << s;
    for (const Knob& k : *knobs) EXPECT_FALSE(k.choices.empty()) << s << " " << k.name;
    auto c = DefaultConfig(w, Avx2());
    ASSERT_TRUE(c.ok()) << s;
    EXPECT_TRUE(ValidateConfig(w, Avx2(), *c).ok()) << s << " " << CanonicalConfig(*c);
  }
}

TEST(OpsKnobs, ConvHasAtLeastThreeKnobsAndShapeDependentChoices) {
  auto knobs = KnobsOf(Parse(kConvNoPad), Avx2());
  ASSERT_TRUE(knobs.ok());
  EXPECT_GE(knobs->size(), 3u);
  for (const Knob& k : *knobs) {
    if (k.name == "tile_ow") EXPECT_EQ(k.choices, (std::vector<int64_t>{1, 6}));  // OW=6 < 8 lanes
    if (k.name == "tile_k") EXPECT_EQ(k.choices, (std::vector<int64_t>{1, 2, 4, 8}));
  }
}

TEST(OpsKnobs, BadConfigsRejectedWithReason) {
  Workload w = Parse(kDense);
  Config c = *DefaultConfig(w, Avx2());
  Config bad = c;
  bad["tile_n"] = 3;
  auto s = ValidateConfig(w, Avx2(), bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("tile_n"), std::string::npos) << s;
  bad = c;
  bad["tile_k"] = 16;
  bad["unroll_k"] = 1;
  EXPECT_TRUE(ValidateConfig(w, Avx2(), bad).ok());
  bad.erase("parallel");
  EXPECT_FALSE(ValidateConfig(w, Avx2(), bad).ok());

  // Illegal combination: a single outer iteration cannot be parallel.
  Workload one = Parse(
      "conv2d(C=2;H=4;K=4;N=1;OH=4;OW=4;R=1;S=1;W=4;bias=0;dilation=1,1;groups=1;pad=0,0,0,0;"
      "stride=1,1)");
  Config cc = *DefaultConfig(one, Avx2());
  cc["tile_k"] = 4;
  cc["parallel"] = 1;
  s = ValidateConfig(one, Avx2(), cc);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("parallel"), std::string::npos) << s;
  EXPECT_EQ(LowerWorkload(one, cc, Avx2(), "f", {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KnobsOf(Parse("eltwise(in_shape=2;shape=2)"), Avx2())->size(), 2u);
}

class Counter : public ir::StmtVisitor {
 public:
  int ramps = 0, reduces = 0, multi_index = 0, vec_loops = 0, allocs = 0;

 protected:
  void VisitRamp(const ir::RampNode* op) override {
    ++ramps;
    StmtVisitor::VisitRamp(op);
  }
  void VisitReduce(const ir::ReduceNode* op) override {
    ++reduces;
    StmtVisitor::VisitReduce(op);
  }
  void VisitBufferLoad(const ir::BufferLoadNode* op) override {
    if (op->indices.size() != 1) ++multi_index;
    StmtVisitor::VisitBufferLoad(op);
  }
  void VisitBufferStore(const ir::BufferStoreNode* op) override {
    if (op->indices.size() != 1) ++multi_index;
    StmtVisitor::VisitBufferStore(op);
  }
  void VisitFor(const ir::ForNode* op) override {
    if (op->for_kind == ir::ForKind::kVectorized || op->for_kind == ir::ForKind::kUnrolled)
      ++vec_loops;
    StmtVisitor::VisitFor(op);
  }
  void VisitAllocate(const ir::AllocateNode* op) override {
    ++allocs;
    StmtVisitor::VisitAllocate(op);
  }
};

TEST(OpsLower, FullyLoweredShape) {
  for (const char* s : AllWorkloads()) {
    Workload w = Parse(s);
    auto f = LowerWorkload(w, *DefaultConfig(w, Avx2()), Avx2(), "k", {});
    ASSERT_TRUE(f.ok()) << s << ": " << f.status();
    auto sig = w.Signature();
    ASSERT_EQ(f->params.size(), sig->inputs.size() + 1) << s;
    EXPECT_EQ(f->params.back()->name, "out");
    Counter c;
    c.VisitStmt(f->body);
    EXPECT_EQ(c.reduces, 0) << s;
    EXPECT_EQ(c.multi_index, 0) << s;
    EXPECT_EQ(c.vec_loops, 0) << s;
  }
}

// ResNet-50's stride-2 3x3 layers in the blocks the layout pass gives them:
// the default config validates and lowers on AVX2 and AVX-512. (On AVX2 the
// 256->256 28x28 layer's default tile of 6 pixels reads 18 columns of the
// 14-wide output: its packed rows outgrew the scratch limit at lowering
// while the check, counting the padded width only, let the config pass.)
TEST(OpsLower, BlockedStridedConvDefaultsLowerOnEveryVectorWidth) {
  Target avx512 = Avx2();
  avx512.cpu = "skylake-avx512";
  for (const char* s :
       {"conv2d(C=256;H=28;K=256;N=1;OH=14;OW=14;R=3;S=3;W=28;bias=1;dilation=1,1;groups=1;"
        "in_block=16;out_block=16;pad=1,1,1,1;stride=2,2)|relu",
        "conv2d(C=128;H=56;K=128;N=1;OH=28;OW=28;R=3;S=3;W=56;bias=1;dilation=1,1;groups=1;"
        "in_block=16;out_block=16;pad=1,1,1,1;stride=2,2)|relu",
        "conv2d(C=512;H=14;K=512;N=1;OH=7;OW=7;R=3;S=3;W=14;bias=1;dilation=1,1;groups=1;"
        "in_block=16;out_block=16;pad=1,1,1,1;stride=2,2)|relu"}) {
    Workload w = Parse(s);
    for (const Target& t : {Avx2(), avx512}) {
      auto c = DefaultConfig(w, t);
      ASSERT_TRUE(c.ok()) << s;
      EXPECT_TRUE(ValidateConfig(w, t, *c).ok()) << t.cpu << " " << s;
      auto f = LowerWorkload(w, *c, t, "k", {});
      EXPECT_TRUE(f.ok()) << t.cpu << " " << s << " " << CanonicalConfig(*c) << ": " << f.status();
    }
  }
}

TEST(OpsLower, DenseDefaultIsVectorizedWithLocalAccumulator) {
  Workload w = Parse("dense(K=64;M=12;N=32;bias=0;transA=0;transB=0)");
  Config c = *DefaultConfig(w, Avx2());
  auto f = LowerWorkload(w, c, Avx2(), "k", {});
  ASSERT_TRUE(f.ok()) << f.status();
  Counter cnt;
  cnt.VisitStmt(f->body);
  EXPECT_GT(cnt.ramps, 0);
  EXPECT_EQ(cnt.allocs, 1);
}

// ---- numeric checks against the reference

using test_util::CheckRandomConfigs;
using test_util::ExpectMatchesReference;

TEST(OpsNumeric, DefaultAndRandomConfigsMatchReference) {
  Target host = Target::Host();
  std::mt19937 rng(42);
  for (const char* s : AllWorkloads()) {
    Workload w = Parse(s);
    ExpectMatchesReference(w, *DefaultConfig(w, host), s);
    EXPECT_GT(CheckRandomConfigs(w, host, rng, 40, 5, s), 0) << s;
  }
}

TEST(OpsNumeric, TailTilesMatchReference) {
  Target host = Target::Host();
  // tile_k=4 over K=5, tile_oh=4 over OH=9, tile_ow=lanes over OW=9: all tails.
  Workload conv = Parse(kConv);
  Config c = *DefaultConfig(conv, host);
  c["tile_k"] = 4;
  c["tile_oh"] = 4;
  c["tile_ow"] = Pick8(*KnobsOf(conv, host));
  ExpectMatchesReference(conv, c, "conv tails");
  Workload dense = Parse(kDense);
  Config d = *DefaultConfig(dense, host);
  d["tile_m"] = 4;  // 7 % 4
  d["tile_k"] = 8;  // 19 % 8
  ExpectMatchesReference(dense, d, "dense tails");
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

TEST(OpsLower, PaddedConvInnerLoopIsVectorized) {
  Workload w = Parse(kConv);
  Config c = *DefaultConfig(w, Avx2());
  c["tile_ow"] = 8;
  auto f = LowerWorkload(w, c, Avx2(), "k", {});
  ASSERT_TRUE(f.ok()) << f.status();
  struct V : ir::StmtVisitor {
    int vector_stores = 0;
    void VisitBufferStore(const ir::BufferStoreNode* op) override {
      if (op->value.dtype().lanes == 8) ++vector_stores;
      StmtVisitor::VisitBufferStore(op);
    }
  } v;
  v.VisitStmt(f->body);
  EXPECT_GE(v.vector_stores, 3) << ir::ToText(*f);  // init, update, output
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// The dot-product variant of dense (vec_k) for every vector width, with a K
// tail, and the parallel conv/pool loops (not fused with the batch) with a
// materialized padded input: all match the reference.
TEST(OpsNumeric, DenseVecKAndParallelChannelLoopsMatchReference) {
  Target host = Target::Host();
  Workload dense = Parse("dense(K=75;M=3;N=5;bias=1;bias_shape=1,5;transA=0;transB=1)|relu");
  auto knobs = *KnobsOf(dense, host);
  std::vector<int64_t> vec_k;
  for (const Knob& k : knobs) {
    if (k.name == "vec_k") vec_k = k.choices;
  }
  ASSERT_GE(vec_k.size(), 2u);
  EXPECT_GT(DefaultConfig(dense, host)->at("vec_k"), 0);
  for (int64_t v : vec_k) {
    for (int64_t tk : {1, 4}) {
      Config c = *DefaultConfig(dense, host);
      c["vec_k"] = v;
      c["tile_k"] = tk;
      c["unroll_k"] = tk > 1;
      c["tile_m"] = 2;
      ExpectMatchesReference(dense, c, "dense vec_k");
    }
  }
  Workload conv = Parse(kConv);
  Config cc = *DefaultConfig(conv, host);
  cc["parallel"] = 1;
  cc["pad_stage"] = 1;
  cc["tile_k"] = 2;
  ExpectMatchesReference(conv, cc, "conv parallel pad_stage");
  Workload pool = Parse(kPoolMax);
  Config pc = *DefaultConfig(pool, host);
  pc["parallel"] = 1;
  ExpectMatchesReference(pool, pc, "pool parallel");
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// conv2d layout=1 (NCHW[x]c inside the kernel) against the reference: every
// kb, the smallest and largest cb and reg_n and a middle reg_n, on shapes with stride 2,
// dilation, asymmetric padding, 1x1, an odd input-channel count (the RGB
// stem), a partial last pixel tile and a fused residual add + relu.
// A conv2d workload with an R x R kernel, the same stride, padding and
// dilation on both axes, and a bias.
Workload SquareConv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R,
                    int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t dil, int64_t groups) {
  auto out = [&](int64_t in) { return (in + pad_lo + pad_hi - dil * (R - 1) - 1) / stride + 1; };
  Workload w;
  w.op = "conv2d";
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
      c["cb"] = 16;
      c["cin"] = 32;
      EXPECT_TRUE(ValidateConfig(w, host, c).ok()) << what;
      c["layout"] = 4;
      EXPECT_FALSE(ValidateConfig(w, host, c).ok()) << what;  // cin is NCHWc's
    }
  }
  EXPECT_EQ(built, 8);
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

// conv2d layout=4 (Winograd F(4x4, 3x3)): images that are not a multiple of
// the 4x4 tile, no padding and asymmetric padding, a batch, an odd channel
// count, an epilogue, every register tile, block of tile rows and way of
// running in parallel, within the same tolerance as the direct templates.
// Not offered for strided, dilated, grouped or 5x5 layers.
TEST(OpsNumeric, WinogradConvEveryTileMatchesReference) {
  Target host = Target::Host();
  const int lanes = host.NativeVectorLanes();
  struct Case {
    int64_t N, C, H, W, pad_lo, pad_hi;
  };
  for (Case s : {Case{1, 5, 10, 13, 1, 1}, Case{2, 8, 9, 8, 0, 1}, Case{1, 3, 6, 6, 0, 0}}) {
    Workload w = SquareConv(s.N, s.C, s.H, s.W, 2 * lanes, 3, 1, s.pad_lo, s.pad_hi, 1, 1);
    w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
    const std::string what = w.Canonical();
    auto choices = ChoicesOf(w, host);
    ASSERT_NE(std::find(choices["layout"].begin(), choices["layout"].end(), 4),
              choices["layout"].end())
        << what;
    Config def = *DefaultConfig(w, host);
    def["layout"] = 4;
    def["par_rows"] = 0;
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
    EXPECT_GT(built, s.H > 6 ? 3 : 0) << what;  // the last case is one tile
  }
  for (Workload w : {SquareConv(1, 8, 12, 12, 2 * lanes, 3, 2, 1, 1, 1, 1),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 3, 1, 2, 2, 2, 1),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 3, 1, 1, 1, 1, 2),
                     SquareConv(1, 8, 12, 12, 2 * lanes, 5, 1, 2, 2, 1, 1)}) {
    auto layouts = ChoicesOf(w, host)["layout"];
    EXPECT_EQ(std::find(layouts.begin(), layouts.end(), 4), layouts.end()) << w.Canonical();
  }
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
    w.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, "clip", {0.0, 6.0}}};
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
    Workload w = Parse(c.workload);
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
        w.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, "clip", {0.0, 6.0}}};
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
      Workload pool = Parse(
          "pool2d(C=32;H=9;N=1;OH=5;OW=5;W=9;dilation=1,1;kernel=3,3;kind=0;pad=1,1,1,1;"
          "stride=2,2)");
      pool.ints["in_block"] = {ib};
      pool.ints["out_block"] = {ob};
      cases.push_back(pool);
      Workload gap = Parse(
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
      dw.epilogue = {EpilogueOp{EpilogueKind::kUnary, {}, "clip", {0.0, 6.0}}};
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
    if (w.op == "conv2d") {
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

// dense pack_b=1 (B as packed panels, a partial last panel zero-filled) and
// n_outer, over both layouts of B, a bias and tile widths that do and do not
// divide N.
TEST(OpsNumeric, DensePackedPanelsMatchReference) {
  Target host = Target::Host();
  const int64_t lanes = host.NativeVectorLanes();
  for (int64_t tb : {0, 1}) {
    for (int64_t N : {4 * lanes, 3 * lanes + 3}) {
      Workload w;
      w.op = "dense";
      w.ints = {{"M", {21}},           {"N", {N}},       {"K", {37}},
                {"transA", {0}},       {"transB", {tb}}, {"batch", {1}},
                {"batch_a", {0}},      {"batch_b", {0}}, {"bias", {1}},
                {"bias_shape", {1, N}}};
      w.epilogue = {EpilogueOp{EpilogueKind::kRelu, {}}};
      const std::string what = w.Canonical();
      Config def = *DefaultConfig(w, host);
      EXPECT_EQ(def.at("pack_b"), 1) << what;
      for (int64_t tn : {lanes, 2 * lanes}) {
        for (int64_t n_outer : {0, 1}) {
          Config c = def;
          c["tile_n"] = tn;
          c["n_outer"] = n_outer;
          c["parallel"] = n_outer;
          ASSERT_TRUE(ValidateConfig(w, host, c).ok()) << what << " " << CanonicalConfig(c);
          ExpectMatchesReference(w, c, what);
        }
      }
    }
  }
}

// float32 erf is a vectorizable rational approximation, not libm's erff:
// within 1e-6 of std::erf over [-6, 6] (beyond the clamp too), NaN kept.
TEST(OpsNumeric, Float32ErfIsWithinAMillionthOfLibm) {
  const int64_t n = 24001;
  Workload w = Parse(StrCat("eltwise(in_shape=", n, ";shape=", n, ")|u:erf"));
  Target host = Target::Host();
  auto kernel = BuildJit(w, *DefaultConfig(w, host), host);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -6.0f + 12.0f * static_cast<float>(i) / (n - 1);
  x[7] = std::nanf("");
  std::vector<void*> args = {x.data(), y.data()};
  ASSERT_EQ((*kernel)->Run(args.data()), 0);
  EXPECT_TRUE(std::isnan(y[7]));
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i != 7) worst = std::max(worst, std::fabs(y[i] - std::erf(static_cast<double>(x[i]))));
  }
  EXPECT_LT(worst, 1e-6);
}

}  // namespace
}  // namespace kiln::compiler
