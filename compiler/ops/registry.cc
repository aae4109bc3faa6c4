#include "compiler/ops/registry.h"

#include "base/check.h"
#include "base/str.h"
#include "compiler/ops/generic_internal.h"

namespace kiln::compiler::ops {
namespace {

using namespace generic_internal;

// The templates of each op, by workload.
const OpTemplate* Conv2dCpu(const Workload& w) {
  return Bf16Conv(w) ? Bf16ConvTemplate() : Conv2dTemplate();
}
const OpTemplate* DenseCpu(const Workload& w) {
  return Bf16Dense(w) ? Bf16DenseTemplate() : DenseTemplate();
}
const OpTemplate* PoolCpu(const Workload&) { return PoolTemplate(); }
const OpTemplate* EltwiseCpu(const Workload&) { return EltwiseTemplate(); }
const OpTemplate* GenericCpu(const Workload&) { return GenericTemplate(); }
// The integer matmul and conv by dot products where they fit, else the
// generic template (any dtype, zero points, groups, N-D).
const OpTemplate* MatMulCpu(const Workload& w) {
  return Int8MatMul(w) ? Int8MatMulTemplate() : GenericTemplate();
}
const OpTemplate* ConvCpu(const Workload& w) {
  if (Int8Conv(w)) {
    return w.IntOr("out_block", 0) > 0 ? Int8BlockedConvTemplate() : Int8ConvTemplate();
  }
  return Int8DepthwiseConv(w) ? Int8DepthwiseConvTemplate() : GenericTemplate();
}

const OpTemplate* Conv2dGpu(const Workload&) { return GpuConv2dTemplate(); }
const OpTemplate* DenseGpu(const Workload&) { return GpuDenseTemplate(); }
const OpTemplate* PoolGpu(const Workload&) { return GpuPoolTemplate(); }
const OpTemplate* EltwiseGpu(const Workload&) { return GpuEltwiseTemplate(); }
const OpTemplate* GenericGpu(const Workload&) { return GpuGenericTemplate(); }

constexpr OpPattern kElemWise = OpPattern::kElemWise, kBroadcast = OpPattern::kBroadcast,
                    kInjective = OpPattern::kInjective, kCommReduce = OpPattern::kCommReduce,
                    kOutEWiseFusable = OpPattern::kOutEWiseFusable;

std::vector<OpDef> MakeRegistry() {
  using C = absl::StatusOr<te::Tensor> (*)(const Workload&, const std::vector<te::Tensor>&);
  auto generic = [](Op op, OpPattern pattern, C compute, bool elementwise = false) {
    return OpDef{op, pattern, compute, GenericCpu, GenericGpu, elementwise};
  };
  std::vector<OpDef> r = {
      {Op::kConv2d, kOutEWiseFusable, nullptr, Conv2dCpu, Conv2dGpu},
      {Op::kDense, kOutEWiseFusable, nullptr, DenseCpu, DenseGpu},
      {Op::kPool2d, kOutEWiseFusable, nullptr, PoolCpu, PoolGpu},
      {Op::kPool3d, kOutEWiseFusable, nullptr, PoolCpu, PoolGpu},
      // Broadcast in general; PatternOf says kElemWise for the same shapes.
      {Op::kEltwise, kBroadcast, nullptr, EltwiseCpu, EltwiseGpu},
      generic(Op::kNll, kInjective, NllOp),
      generic(Op::kReduce, kCommReduce, ReduceOp),
      generic(Op::kArgReduce, kCommReduce, ArgReduceOp),
      generic(Op::kCumSum, kCommReduce, CumSumOp),
      generic(Op::kTranspose, kInjective, TransposeOp),
      generic(Op::kConcat, kInjective, ConcatOp),
      generic(Op::kSlice, kInjective, SliceOp),
      generic(Op::kGather, kInjective, GatherOp),
      generic(Op::kGatherElements, kInjective, GatherElementsOp),
      generic(Op::kPad, kInjective, PadOp),
      generic(Op::kWhere, kInjective, WhereOp),
      generic(Op::kTile, kInjective, TileOp),
      generic(Op::kTrilu, kInjective, TriluOp),
      generic(Op::kOneHot, kInjective, OneHotOp),
      generic(Op::kEyeLike, kInjective, EyeLikeOp),
      generic(Op::kResize, kInjective, ResizeOp),
      generic(Op::kGridSample, kInjective, GridSampleOp),
      generic(Op::kGatherNd, kInjective, GatherNdOp),
      generic(Op::kScatter, kCommReduce, ScatterOp),
      generic(Op::kTopK, kCommReduce, TopKOp),
      {Op::kMatMul, kOutEWiseFusable, MatMulOp, MatMulCpu, GenericGpu},
      {Op::kConv, kOutEWiseFusable, ConvOp, ConvCpu, GenericGpu},
      generic(Op::kWindow, kCommReduce, WindowOp),
      generic(Op::kEinsum, kCommReduce, EinsumOp),
      generic(Op::kLrn, kCommReduce, LrnOp),
      generic(Op::kQuantize, kInjective, QuantizeOp),
      generic(Op::kDequantize, kInjective, DequantizeOp),
      generic(Op::kQAdd, kElemWise, QAddOp, /*elementwise=*/true),
  };
  // One registration per op, in Op's order: Registered indexes by value.
  constexpr auto ops = ValuesOf<Op>();
  KILN_CHECK(r.size() == ops.size()) << "ops registered: " << r.size() << " of " << ops.size();
  for (size_t i = 0; i < r.size(); ++i) {
    KILN_CHECK(r[i].op == ops[i] && static_cast<size_t>(ops[i]) == i)
        << "registration " << i << " is " << r[i].op;
  }
  return r;
}

}  // namespace

const std::vector<OpDef>& Registry() {
  static const std::vector<OpDef> registry = MakeRegistry();
  return registry;
}

const OpDef& Registered(Op op) {
  const std::vector<OpDef>& r = Registry();
  const auto i = static_cast<size_t>(op);
  KILN_CHECK(i < r.size()) << "unregistered op " << i;
  return r[i];
}

OpPattern PatternOf(const Workload& w) {
  if (w.op == Op::kEltwise) {
    return w.Ints("in_shape") == w.Ints("shape") ? kElemWise : kBroadcast;
  }
  return Registered(w.op).pattern;
}

bool IsGeneric(Op op) { return Registered(op).compute != nullptr; }

bool HasOwnComputeType(const Workload& w) {
  return w.op == Op::kQAdd || ((w.op == Op::kMatMul || w.op == Op::kConv) && w.IntOr("zp", 0) != 0);
}

absl::StatusOr<const OpTemplate*> TemplateFor(const Workload& w, const Target& t) {
  if (auto sig = w.Signature(); !sig.ok()) return sig.status();
  const OpDef& def = Registered(w.op);
  return t.is_gpu() ? def.gpu(w) : def.cpu(w);
}

}  // namespace kiln::compiler::ops
