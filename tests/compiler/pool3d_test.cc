// pool3d: the reference against hand-computed values, JIT-built kernels
// (default and random configs) against the reference, and the ONNX importer's
// mapping of rank-5 pooling (plus epilogue fusion after it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "compiler/frontend/onnx_import.h"
#include "compiler/graph/passes.h"
#include "compiler/kernel.h"
#include "compiler/ops/lower_workload.h"
#include "tests/compiler/kernel_check.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using test_util::ParseWorkload;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::OnnxBuilder;
using testing::ShapeOf;

std::vector<float> Iota(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

std::vector<float> Ref(const Workload& w, const std::vector<float>& x) {
  auto sig = w.Signature();
  EXPECT_TRUE(sig.ok()) << sig.status();
  std::vector<float> out(static_cast<size_t>(sig->output.NumElements()), -999.f);
  const void* in[] = {x.data()};
  auto s = RunReference(w, in, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(Pool3dWorkload, SignatureFlopsAndParse) {
  Workload w = ParseWorkload(
      "pool3d(C=3;D=4;H=5;N=2;OD=3;OH=4;OW=5;W=6;count_include_pad=0;dilation=1,1,1;kernel=2,2,3;"
      "kind=1;pad=0,0,1,0,0,1;stride=1,1,1)|relu");
  auto sig = w.Signature();
  ASSERT_TRUE(sig.ok()) << sig.status();
  ASSERT_EQ(sig->inputs.size(), 1u);
  EXPECT_THAT(sig->inputs[0].shape, ElementsAre(2, 3, 4, 5, 6));
  EXPECT_THAT(sig->output.shape, ElementsAre(2, 3, 3, 4, 5));
  EXPECT_DOUBLE_EQ(w.Flops(), 2.0 * 3 * 3 * 4 * 5 * (12 + 1));
  EXPECT_EQ(ParseWorkload(w.Canonical()), w);
  auto bad = Workload::Parse(
      "pool3d(C=1;D=2;H=2;N=1;OD=1;OH=1;OW=1;W=2;dilation=1,1;kernel=2,2,2;kind=0;pad=0,0,0,0,0,0;"
      "stride=1,1,1)");
  EXPECT_FALSE(bad.ok());
}

TEST(Pool3dReference, HandComputed) {
  // x[d][h][w] = 9d + 3h + w over 2x3x3; 2x2x2 windows at stride 1.
  std::vector<float> x = Iota(18, 0.f);
  std::string shape =
      "C=1;D=2;H=3;N=1;OD=1;OH=2;OW=2;W=3;dilation=1,1,1;kernel=2,2,2;pad=0,0,0,0,0,0;stride=1,1,1";
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + shape + ";kind=0)"), x), ElementsAre(13, 14, 16, 17));
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + shape + ";kind=1)"), x),
              ElementsAre(6.5, 7.5, 9.5, 10.5));

  // 2x2x2 input 1..8, 2x2x2 windows at stride 2 with one element of padding
  // everywhere: every window holds exactly one input element.
  std::vector<float> y = Iota(8, 1.f);
  std::string padded =
      "C=1;D=2;H=2;N=1;OD=2;OH=2;OW=2;W=2;dilation=1,1,1;kernel=2,2,2;pad=1,1,1,1,1,1;stride=2,2,2";
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + padded + ";kind=0)"), y),
              ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + padded + ";count_include_pad=0;kind=1)"), y),
              ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + padded + ";count_include_pad=1;kind=1)"), y),
              ElementsAre(0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1));

  // Ceil mode: 3x3x3 input, 2-windows at stride 2 -> 2 outputs per dim; the
  // last window holds one element per dim. count_include_pad=1 counts the
  // taps inside the padded input (no padding here: as the exclusive average),
  // as ONNX's reference, onnxruntime and PyTorch do.
  std::vector<float> z = Iota(27, 0.f);
  std::string ceil =
      "C=1;D=3;H=3;N=1;OD=2;OH=2;OW=2;W=3;dilation=1,1,1;kernel=2,2,2;pad=0,0,0,0,0,0;stride=2,2,2";
  auto zmax = Ref(ParseWorkload("pool3d(" + ceil + ";kind=0)"), z);
  EXPECT_THAT(zmax, ElementsAre(13, 14, 16, 17, 22, 23, 25, 26));
  auto zex = Ref(ParseWorkload("pool3d(" + ceil + ";count_include_pad=0;kind=1)"), z);
  EXPECT_FLOAT_EQ(zex[0], 6.5f);
  EXPECT_FLOAT_EQ(zex[1], (2 + 5 + 11 + 14) / 4.f);
  EXPECT_FLOAT_EQ(zex[7], 26.f);
  auto zin = Ref(ParseWorkload("pool3d(" + ceil + ";count_include_pad=1;kind=1)"), z);
  EXPECT_FLOAT_EQ(zin[0], 6.5f);
  EXPECT_FLOAT_EQ(zin[1], (2 + 5 + 11 + 14) / 4.f);
  EXPECT_FLOAT_EQ(zin[7], 26.f);

  // Dilation 2 over 4x4x4 (the ONNX maxpool_3d_dilations layout: every depth
  // slice is 1..16): windows {0,2}^3 and {1,3}^3.
  std::vector<float> d(64);
  for (int i = 0; i < 64; ++i) d[i] = static_cast<float>(i % 16 + 1);
  std::string dil =
      "C=1;D=4;H=4;N=1;OD=2;OH=2;OW=2;W=4;dilation=2,2,2;kernel=2,2,2;pad=0,0,0,0,0,0;stride=1,1,1";
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + dil + ";kind=0)"), d),
              ElementsAre(11, 12, 15, 16, 11, 12, 15, 16));
  EXPECT_THAT(Ref(ParseWorkload("pool3d(" + dil + ";count_include_pad=0;kind=1)"), d),
              ElementsAre(6, 7, 10, 11, 6, 7, 10, 11));
}

// ---- JIT kernels against the reference

using test_util::ExpectMatchesReference;

const char* kMaxPad =
    "pool3d(C=3;D=5;H=6;N=2;OD=3;OH=3;OW=4;W=7;dilation=1,1,1;kernel=3,3,3;kind=0;pad=1,1,1,1,1,1;"
    "stride=2,2,2)";
const char* kAvgPadExclusive =
    "pool3d(C=2;D=4;H=5;N=1;OD=4;OH=5;OW=11;W=11;count_include_pad=0;dilation=1,1,1;kernel=3,3,3;"
    "kind=1;"
    "pad=1,1,1,1,1,1;stride=1,1,1)|relu";
const char* kAvgPadInclusive =
    "pool3d(C=2;D=4;H=5;N=1;OD=4;OH=5;OW=11;W=11;count_include_pad=1;dilation=1,1,1;kernel=3,3,3;"
    "kind=1;"
    "pad=1,1,1,1,1,1;stride=1,1,1)|add:1,2,1,1,1";
// Ceil-mode shapes (no padding, the last windows run past the input), dilated.
const char* kAvgCeilInclusive =
    "pool3d(C=1;D=12;H=12;N=1;OD=3;OH=3;OW=3;W=12;count_include_pad=1;dilation=2,2,2;kernel=3,3,3;"
    "kind=1;"
    "pad=0,0,0,0,0,0;stride=4,4,4)";
const char* kAvgCeilExclusive =
    "pool3d(C=1;D=12;H=12;N=1;OD=3;OH=3;OW=3;W=12;count_include_pad=0;dilation=2,2,2;kernel=3,3,3;"
    "kind=1;"
    "pad=0,0,0,0,0,0;stride=4,4,4)";
// Every window inside the input (fewer outputs than fit): no guards at all.
const char* kMaxInBounds =
    "pool3d(C=1;D=11;H=11;N=1;OD=9;OH=9;OW=9;W=11;dilation=1,1,1;kernel=2,2,2;kind=0;pad=0,0,0,0,0,"
    "0;"
    "stride=1,1,1)|mul:1,1,9,1,1";
// Only the width needs guards (asymmetric padding in w only).
const char* kMaxWidthPad =
    "pool3d(C=4;D=3;H=4;N=1;OD=2;OH=3;OW=17;W=16;dilation=1,1,1;kernel=2,2,3;kind=0;pad=0,0,1,0,0,"
    "2;"
    "stride=1,1,1)";
const char* kGlobalAvg =
    "pool3d(C=5;D=3;H=4;N=1;OD=1;OH=1;OW=1;W=5;count_include_pad=0;dilation=1,1,1;kernel=3,4,5;"
    "kind=1;"
    "pad=0,0,0,0,0,0;stride=1,1,1)";

TEST(Pool3dNumeric, DefaultAndRandomConfigsMatchReference) {
  Target host = Target::Host();
  std::mt19937 rng(5);
  for (const char* s : {kMaxPad, kAvgPadExclusive, kAvgPadInclusive, kAvgCeilInclusive,
                        kAvgCeilExclusive, kMaxInBounds, kMaxWidthPad, kGlobalAvg}) {
    Workload w = ParseWorkload(s);
    auto def = DefaultConfig(w, host);
    ASSERT_TRUE(def.ok()) << s << ": " << def.status();
    ASSERT_TRUE(ValidateConfig(w, host, *def).ok()) << s;
    ExpectMatchesReference(w, *def, s);
    auto knobs = KnobsOf(w, host);
    ASSERT_TRUE(knobs.ok()) << s;
    int tried = 0;
    for (int attempt = 0; attempt < 40 && tried < 4; ++attempt) {
      Config c;
      for (const Knob& k : *knobs) c[k.name] = k.choices[rng() % k.choices.size()];
      if (!ValidateConfig(w, host, c).ok()) continue;
      ++tried;
      ExpectMatchesReference(w, c, s);
    }
    EXPECT_GT(tried, 0) << s;
    // Every tile_ow choice, with the parallel loop where there is one.
    for (const Knob& k : *knobs) {
      if (k.name != "tile_ow") continue;
      for (int64_t t : k.choices) {
        Config c = *def;
        c["tile_ow"] = t;
        c["parallel"] = KnobsOf(w, host)->at(1).choices.back();
        ExpectMatchesReference(w, c, s);
      }
    }
  }
}

TEST(Pool3dKnobs, ParallelLoopAndValidation) {
  Target host = Target::Host();
  // N=1, C=1: the parallel loop is the output depth.
  Workload w = ParseWorkload(kMaxInBounds);
  auto knobs = *KnobsOf(w, host);
  ASSERT_EQ(knobs[1].name, "parallel");
  EXPECT_THAT(knobs[1].choices, ElementsAre(0, 1));
  Config c = *DefaultConfig(w, host);
  c["parallel"] = 1;
  ExpectMatchesReference(w, c, "pool3d parallel over OD");
  // Nothing to parallelize.
  Workload one = ParseWorkload(
      "pool3d(C=1;D=2;H=2;N=1;OD=1;OH=1;OW=1;W=2;dilation=1,1,1;kernel=2,2,2;kind=0;pad=0,0,0,0,0,"
      "0;"
      "stride=1,1,1)");
  EXPECT_THAT(KnobsOf(one, host)->at(1).choices, ElementsAre(0));
  Config bad = *DefaultConfig(one, host);
  bad["parallel"] = 1;
  EXPECT_FALSE(ValidateConfig(one, host, bad).ok());
}

// ---- the importer

TEST(Pool3dImport, RankFiveMaxPoolBecomesPool3d) {
  OnnxBuilder b;
  b.Input("x", {1, 2, 32, 32, 32});
  auto* p = b.Node("MaxPool", {"x"}, {"p"});
  OnnxBuilder::Ints(p, "kernel_shape", {5, 5, 5});
  OnnxBuilder::Ints(p, "strides", {3, 3, 3});
  OnnxBuilder::Ints(p, "dilations", {2, 2, 2});
  OnnxBuilder::Int(p, "ceil_mode", 1);
  b.Node("Relu", {"p"}, {"r"});
  b.Output("r");
  auto g = ImportOnnx(b.Bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(ShapeOf(**g, "p"), ElementsAre(1, 2, 9, 9, 9));
  const Node& n = (*g)->nodes[0];
  EXPECT_EQ(n.workload.op, Op::kPool3d);
  EXPECT_EQ(n.workload.Int("kind"), 0);
  EXPECT_THAT(n.workload.Ints("kernel"), ElementsAre(5, 5, 5));
  EXPECT_THAT(n.workload.Ints("stride"), ElementsAre(3, 3, 3));
  EXPECT_THAT(n.workload.Ints("dilation"), ElementsAre(2, 2, 2));
  EXPECT_THAT(n.workload.Ints("pad"), ElementsAre(0, 0, 0, 0, 0, 0));
  EXPECT_EQ(n.workload.Int("OD"), 9);
  EXPECT_EQ(n.workload.Int("OH"), 9);
  EXPECT_EQ(n.workload.Int("OW"), 9);
  // The Relu fuses into the pool3d task.
  FuseEpilogues(**g);
  ASSERT_EQ((*g)->nodes.size(), 1u);
  EXPECT_EQ((*g)->nodes[0].workload.op, Op::kPool3d);
  ASSERT_EQ((*g)->nodes[0].workload.epilogue.size(), 1u);
  EXPECT_EQ((*g)->nodes[0].workload.epilogue[0].kind, EpilogueKind::kRelu);
}

TEST(Pool3dImport, AveragePoolPadsAutoPadAndGlobal) {
  OnnxBuilder b;
  b.Input("x", {1, 3, 5, 6, 7});
  auto* a = b.Node("AveragePool", {"x"}, {"a"});
  OnnxBuilder::Ints(a, "kernel_shape", {3, 2, 3});
  OnnxBuilder::Ints(a, "pads", {1, 0, 1, 1, 1, 2});  // begins d,h,w then ends d,h,w
  OnnxBuilder::Ints(a, "strides", {2, 1, 2});
  OnnxBuilder::Int(a, "count_include_pad", 1);
  auto* s = b.Node("AveragePool", {"x"}, {"s"});
  OnnxBuilder::Ints(s, "kernel_shape", {2, 2, 2});
  OnnxBuilder::Ints(s, "strides", {2, 2, 2});
  OnnxBuilder::String(s, "auto_pad", "SAME_UPPER");
  b.Node("GlobalAveragePool", {"x"}, {"g"});
  b.Output("a");
  b.Output("s");
  b.Output("g");
  auto g = ImportOnnx(b.Bytes());
  ASSERT_TRUE(g.ok()) << g.status();
  // d: (5+2-3)/2+1 = 3; h: (6+1-2)/1+1 = 6; w: (7+3-3)/2+1 = 4.
  EXPECT_THAT(ShapeOf(**g, "a"), ElementsAre(1, 3, 3, 6, 4));
  const Workload& wa = (*g)->nodes[0].workload;
  EXPECT_EQ(wa.op, Op::kPool3d);
  EXPECT_EQ(wa.Int("kind"), 1);
  EXPECT_EQ(wa.Int("count_include_pad"), 1);
  EXPECT_THAT(wa.Ints("pad"), ElementsAre(1, 0, 1, 1, 1, 2));
  // SAME_UPPER: out = ceil(in / 2) = 3, 3, 4; total pad 1, 0, 1 with the odd one at the end.
  EXPECT_THAT(ShapeOf(**g, "s"), ElementsAre(1, 3, 3, 3, 4));
  EXPECT_THAT((*g)->nodes[1].workload.Ints("pad"), ElementsAre(0, 0, 0, 1, 0, 1));
  EXPECT_THAT(ShapeOf(**g, "g"), ElementsAre(1, 3, 1, 1, 1));
  EXPECT_THAT((*g)->nodes[2].workload.Ints("kernel"), ElementsAre(5, 6, 7));

  OnnxBuilder c;
  c.Input("x", {1, 1, 4, 4, 4});
  auto* bad = c.Node("MaxPool", {"x"}, {"y"});
  OnnxBuilder::Ints(bad, "kernel_shape", {2, 2});
  c.Output("y");
  auto gc = ImportOnnx(c.Bytes());
  EXPECT_EQ(gc.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(gc.status().message()), HasSubstr("3 values"));
}

}  // namespace
}  // namespace kiln::compiler
