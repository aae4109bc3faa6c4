// The operator registry (compiler/ops/registry.h): every op registered once
// with its pattern, compute and templates; the fusion pass deciding by the
// patterns; op names converted only where a workload's text is read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "compiler/model.h"
#include "compiler/ops/common.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/onnx_test_util.h"

namespace kiln::compiler {
namespace {

using ::testing::HasSubstr;
using testing::OnnxBuilder;

TEST(OpRegistry, EveryOpIsRegisteredOnceUnderItsName) {
  const auto ops = ValuesOf<Op>();
  ASSERT_EQ(ops::Registry().size(), ops.size());
  std::set<std::string_view> names;
  for (Op op : ops) {
    EXPECT_EQ(ops::Registered(op).op, op) << op;
    EXPECT_EQ(ParseName<Op>(NameOf(op)), op) << op;
    EXPECT_TRUE(names.insert(NameOf(op)).second) << op;
    EXPECT_NE(ops::Registered(op).cpu, nullptr) << op;
    EXPECT_NE(ops::Registered(op).gpu, nullptr) << op;
  }
}

// The patterns of TVM's classes: the heavy anchors out-fusable, reductions
// and windows combining, data movement injective; generic ops carry their
// compute, the classic anchors and eltwise their own templates' computes.
TEST(OpRegistry, PatternsAndComputesFollowTheOpsKinds) {
  using ops::OpPattern;
  for (Op op : {Op::kConv2d, Op::kDense, Op::kPool2d, Op::kPool3d, Op::kMatMul, Op::kConv}) {
    EXPECT_EQ(ops::Registered(op).pattern, OpPattern::kOutEWiseFusable) << op;
  }
  for (Op op : {Op::kReduce, Op::kArgReduce, Op::kTopK, Op::kWindow}) {
    EXPECT_EQ(ops::Registered(op).pattern, OpPattern::kCommReduce) << op;
  }
  for (Op op : {Op::kTranspose, Op::kSlice, Op::kGather, Op::kPad, Op::kResize}) {
    EXPECT_EQ(ops::Registered(op).pattern, OpPattern::kInjective) << op;
  }
  for (Op op : {Op::kConv2d, Op::kDense, Op::kPool2d, Op::kPool3d, Op::kEltwise}) {
    EXPECT_FALSE(ops::IsGeneric(op)) << op;
  }
  for (Op op : {Op::kReduce, Op::kTranspose, Op::kMatMul, Op::kConv, Op::kQAdd}) {
    EXPECT_TRUE(ops::IsGeneric(op)) << op;
  }
  // An eltwise is elementwise on its own shape, broadcast onto a larger one.
  auto same = Workload::Parse("eltwise(in_shape=2,3;shape=2,3)|relu");
  auto bcast = Workload::Parse("eltwise(in_shape=1,3;shape=2,3)|relu");
  ASSERT_TRUE(same.ok() && bcast.ok());
  EXPECT_EQ(ops::PatternOf(*same), OpPattern::kElemWise);
  EXPECT_EQ(ops::PatternOf(*bcast), OpPattern::kBroadcast);
}

// A float matmul of no zero points takes the generic template; the integer
// one of A's zero point its dot-product template: the registration chooses
// by the workload.
TEST(OpRegistry, TheTemplateIsChosenPerWorkload) {
  const Target host = Target::Host();
  auto f = Workload::Parse("matmul(in0=4,8;in1=8,5;shape=4,5)");
  auto q = Workload::Parse("matmul(dtypes=2,3,2,6;in0=37,128;in1=128,70;in2=1;shape=37,70;zp=2)");
  ASSERT_TRUE(f.ok() && q.ok()) << f.status() << q.status();
  auto ft = ops::TemplateFor(*f, host);
  auto qt = ops::TemplateFor(*q, host);
  ASSERT_TRUE(ft.ok() && qt.ok());
  EXPECT_EQ(*ft, ops::GenericTemplate());
  EXPECT_EQ(*qt, ops::Int8MatMulTemplate());
  Workload bad = *f;
  bad.ints.erase("shape");
  auto missing = ops::TemplateFor(bad, host);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("lacks attribute shape"));
}

TEST(OpRegistry, AnUnknownOpNameIsRefusedNamingTheKnownOnes) {
  auto w = Workload::Parse("relu(in_shape=4;shape=4)");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("unknown workload op 'relu'"));
  EXPECT_THAT(w.status().message(), HasSubstr("conv2d, dense"));
}

// Epilogue functions are a vocabulary too: every one survives a workload's
// text (its key) both ways, and text naming none, or a binary one as unary,
// is refused where it is read.
TEST(ElementFns, EveryFunctionRoundTripsThroughAWorkloadsText) {
  for (ElementFn fn : ValuesOf<ElementFn>()) {
    EXPECT_EQ(ParseName<ElementFn>(NameOf(fn)), fn) << fn;
    Workload w;
    w.op = Op::kEltwise;
    w.ints = {{"in_shape", {2, 3}}, {"shape", {2, 3}}};
    EpilogueOp e;
    e.kind = IsUnary(fn) ? EpilogueKind::kUnary : EpilogueKind::kBinary;
    e.fn = fn;
    if (!IsUnary(fn)) e.operand_shape = {1, 3};
    w.epilogue = {e};
    auto back = Workload::Parse(w.Canonical());
    ASSERT_TRUE(back.ok()) << fn << ": " << back.status();
    EXPECT_EQ(*back, w) << w.Canonical();
  }
}

TEST(ElementFns, AnUnknownOrMisplacedFunctionIsRefused) {
  for (const char* text :
       {"eltwise(in_shape=4;shape=4)|u:frobnicate", "eltwise(in_shape=4;shape=4)|u:add",
        "eltwise(in_shape=4;shape=4)|b:relu:4"}) {
    auto w = Workload::Parse(text);
    ASSERT_FALSE(w.ok()) << text;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(w.status().message(), HasSubstr("elementwise function")) << text;
  }
  auto ok = Workload::Parse("eltwise(in_shape=4;shape=4)|b:add:4");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// Each op declares its attributes once, typed (a list of integers or a
// float, AttributesOf); Signature refuses a workload with any other.
TEST(OpAttributes, EveryOpDeclaresItsOwnOnce) {
  for (Op op : ValuesOf<Op>()) {
    std::set<std::string_view> names;
    for (const AttrSpec& a : AttributesOf(op)) {
      EXPECT_TRUE(names.insert(a.name).second) << op << " declares " << a.name << " twice";
    }
    EXPECT_TRUE(names.count("dtypes")) << op;
  }
}

TEST(OpAttributes, AWorkloadWithAnAttributeItsOpLacksIsRefused) {
  // Parse checks the signature of what it reads.
  auto status = [](const std::string& text) {
    auto w = Workload::Parse(text);
    return w.ok() ? w->Signature().status() : w.status();
  };
  const std::string conv =
      "conv2d(C=64;H=14;K=64;N=1;OH=14;OW=14;R=3;S=3;W=14;bias=1;dilation=1,1;groups=1;"
      "pad=1,1,1,1;stride=1,1";
  EXPECT_TRUE(status(conv + ")").ok()) << status(conv + ")");
  const absl::Status undeclared = status(conv + ";axis=1)");
  EXPECT_EQ(undeclared.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(undeclared.message(),
              HasSubstr("conv2d has no attribute 'axis' (its attributes: dtypes, N, C"));
  const absl::Status mistyped = status(conv + ";pad=1,1,1,1;stride=f2)");
  EXPECT_EQ(mistyped.code(), absl::StatusCode::kInvalidArgument);
  // Indexed attributes: in0, in1, ... and scale0, ...; nothing else.
  const std::string pad = "pad(in0=1,1,4,4;mode=0;pads=0,0,0,0,0,0,1,1;shape=1,1,5,5;value=f0";
  EXPECT_TRUE(status(pad + ")").ok()) << status(pad + ")");
  EXPECT_THAT(status(pad + ";inx=1)").message(), HasSubstr("no attribute 'inx'"));
  EXPECT_THAT(status(pad + ";value0=f1)").message(), HasSubstr("no attribute 'value0'"));
  EXPECT_THAT(status(pad + ";mode=f1)").message(),
              HasSubstr("'mode' is a list of integers, not a float"));
}

// FuseOps by the patterns: a transpose (injective) joins a reduction that
// reads it (Fusion.InjectiveProducersJoinTheirReductionConsumer), but not a
// 3-D convolution (the generic conv, out-fusable: it takes no producer into
// its inputs), which stays a task of its own beside the transpose; the ReLU
// after the convolution fuses into its epilogue.
TEST(OpRegistry, OutFusableOpsTakeEpiloguesButNoProducers) {
  OnnxBuilder b;
  b.Input("x", {1, 4, 4, 4, 2});
  OnnxBuilder::Ints(b.Node("Transpose", {"x"}, {"t"}), "perm", {0, 4, 1, 2, 3});
  b.Init("w", {3, 2, 2, 2, 2}, std::vector<float>(48, 0.5f));
  b.Node("Conv", {"t", "w"}, {"c"});
  b.Node("Relu", {"c"}, {"y"});
  b.Output("y");
  auto m = Model::FromOnnx(b.Bytes());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->Tasks().size(), 2u);
  std::multiset<Op> ops;
  for (const Task& t : m->Tasks()) {
    ops.insert(t.workload.op);
    EXPECT_TRUE(t.workload.prologue.empty()) << t.workload.Canonical();
    if (t.workload.op == Op::kConv) {
      ASSERT_EQ(t.workload.epilogue.size(), 1u) << t.workload.Canonical();
      EXPECT_EQ(t.workload.epilogue[0].kind, EpilogueKind::kRelu);
    }
  }
  EXPECT_EQ(ops, (std::multiset<Op>{Op::kTranspose, Op::kConv}));
}

}  // namespace
}  // namespace kiln::compiler
