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
#include "compiler/ops/common.h"
#include "compiler/ops/lower_workload.h"
#include "tests/compiler/kernel_check.h"

namespace kiln::compiler {
namespace {

using test_util::ParseWorkload;

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
    Workload w = ParseWorkload(s);
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
  auto knobs = KnobsOf(ParseWorkload(kConvNoPad), Avx2());
  ASSERT_TRUE(knobs.ok());
  EXPECT_GE(knobs->size(), 3u);
  for (const Knob& k : *knobs) {
    if (k.name == "tile_ow") EXPECT_EQ(k.choices, (std::vector<int64_t>{1, 6}));  // OW=6 < 8 lanes
    if (k.name == "tile_k") EXPECT_EQ(k.choices, (std::vector<int64_t>{1, 2, 4, 8}));
  }
}

TEST(OpsKnobs, BadConfigsRejectedWithReason) {
  Workload w = ParseWorkload(kDense);
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
  Workload one = ParseWorkload(
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
  EXPECT_EQ(KnobsOf(ParseWorkload("eltwise(in_shape=2;shape=2)"), Avx2())->size(), 2u);
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
    Workload w = ParseWorkload(s);
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
    Workload w = ParseWorkload(s);
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
  Workload w = ParseWorkload("dense(K=64;M=12;N=32;bias=0;transA=0;transB=0)");
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
    Workload w = ParseWorkload(s);
    ExpectMatchesReference(w, *DefaultConfig(w, host), s);
    EXPECT_GT(CheckRandomConfigs(w, host, rng, 40, 5, s), 0) << s;
  }
}

TEST(OpsNumeric, TailTilesMatchReference) {
  Target host = Target::Host();
  // tile_k=4 over K=5, tile_oh=4 over OH=9, tile_ow=lanes over OW=9: all tails.
  Workload conv = ParseWorkload(kConv);
  Config c = *DefaultConfig(conv, host);
  c["tile_k"] = 4;
  c["tile_oh"] = 4;
  c["tile_ow"] = Pick8(*KnobsOf(conv, host));
  ExpectMatchesReference(conv, c, "conv tails");
  Workload dense = ParseWorkload(kDense);
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
  Workload w = ParseWorkload(kConv);
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

// The int8 conv's input pack (conv_int8.cc) stored as rows whose padding
// conditions PartitionSelects splits off: the interior rows copy without
// selects (LLVM vectorizes them), the border stores the zero point.
TEST(OpsLower, Int8ConvPackInteriorHasNoSelects) {
  Workload w = ParseWorkload(
      "conv(dilations=1,1;dtypes=2,3,2,6;group=1;in0=1,16,14,14;in1=16,16,3,3;in2=1;pads=1,1;"
      "shape=1,16,14,14;strides=1,1;transposed=0;zp=2)");
  auto f = LowerWorkload(w, *DefaultConfig(w, Avx2()), Avx2(), "k", {});
  ASSERT_TRUE(f.ok()) << f.status();
  struct V : ir::StmtVisitor {
    int plain = 0, selected = 0;
    void VisitBufferStore(const ir::BufferStoreNode* op) override {
      if (op->buffer->name == "xpack") {
        struct S : ir::ExprVisitor {
          bool found = false;
          void VisitSelect(const ir::SelectNode* n) override {
            found = true;
            ExprVisitor::VisitSelect(n);
          }
        } sel;
        sel.VisitExpr(op->value);
        ++(sel.found ? selected : plain);
      }
      StmtVisitor::VisitBufferStore(op);
    }
  } v;
  v.VisitStmt(f->body);
  EXPECT_GE(v.plain, 3) << ir::ToText(*f);
  EXPECT_EQ(v.selected, 0) << ir::ToText(*f);
}

// Elementwise kernels over tensors of short rows (ResNet-50's 7x7 residual
// adds) loop over the flattened tensor in whole vectors; a broadcast input
// keeps the output's last axis.
TEST(OpsKnobs, ElementwiseLoopsRunOverTheFlattenedTensor) {
  Workload q = ParseWorkload(
      "qadd(dtypes=2,2,1,2,1,2,1;in0=1,2048,7,7;in1=1,2048,7,7;in2=1;in3=1;in4=1;in5=1;"
      "shape=1,2048,7,7)");
  auto flat = ops::FlatElementwise(q, {"in0", "in1", "in2", "in3", "in4", "in5"});
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->Ints("shape"), (std::vector<int64_t>{28, 3584}));
  EXPECT_EQ(flat->Ints("in2"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(DefaultConfig(q, Avx2())->at("vec"), 8);
  Workload e = ParseWorkload("eltwise(in_shape=1,64,7,7;shape=1,64,7,7)|add:1,64,1,1|relu");
  EXPECT_FALSE(ops::FlatElementwise(e, {"in_shape"}).has_value());  // a per-channel operand
  EXPECT_EQ(DefaultConfig(e, Avx2())->at("vec"), 7);
  Workload r = ParseWorkload("eltwise(in_shape=1,64,7,7;shape=1,64,7,7)|add:1,1,1,1|relu");
  EXPECT_EQ(ops::FlatElementwise(r, {"in_shape"})->Ints("shape"), (std::vector<int64_t>{7, 448}));
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
  Workload dense =
      ParseWorkload("dense(K=75;M=3;N=5;bias=1;bias_shape=1,5;transA=0;transB=1)|relu");
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
  Workload conv = ParseWorkload(kConv);
  Config cc = *DefaultConfig(conv, host);
  cc["parallel"] = 1;
  cc["pad_stage"] = 1;
  cc["tile_k"] = 2;
  ExpectMatchesReference(conv, cc, "conv parallel pad_stage");
  Workload pool = ParseWorkload(kPoolMax);
  Config pc = *DefaultConfig(pool, host);
  pc["parallel"] = 1;
  ExpectMatchesReference(pool, pc, "pool parallel");
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// dense pack_b=1 (B as packed panels, a partial last panel zero-filled) and
// n_outer, over both layouts of B, a bias and tile widths that do and do not
// divide N.
TEST(OpsNumeric, DensePackedPanelsMatchReference) {
  Target host = Target::Host();
  const int64_t lanes = host.NativeVectorLanes();
  for (int64_t tb : {0, 1}) {
    for (int64_t N : {4 * lanes, 3 * lanes + 3}) {
      Workload w;
      w.op = Op::kDense;
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
  Workload w = ParseWorkload(StrCat("eltwise(in_shape=", n, ";shape=", n, ")|u:erf"));
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
