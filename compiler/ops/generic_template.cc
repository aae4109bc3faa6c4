// The generic operators' one schedule template (their compute definitions
// are generic.cc and its siblings). Knobs: vec (vector width of the output's
// last axis, for ops whose output stage has no reduction), parallel (outer
// output axes fused and run in parallel), rvec (a reduction along the
// contiguous last axis in vector lanes), tr_tile (a transpose of the last
// axis in contiguous tiles).
#include <algorithm>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"
#include "compiler/ops/generic.h"
#include "compiler/ops/generic_internal.h"
#include "compiler/ops/registry.h"

namespace kiln::compiler::ops {
namespace {

using namespace ir;
using Shape = std::vector<int64_t>;
using namespace generic_internal;

size_t NumOpInputs(const Workload& w) {
  size_t n = 0;
  while (w.ints.count(StrCat("in", n))) ++n;
  return n;
}

// A generic op of an elementwise or injective pattern: its output's last
// axis runs in vector lanes.
bool Vectorizable(const Workload& w) {
  return IsGeneric(w.op) && PatternOf(w) <= OpPattern::kInjective;
}

// The length of a float32 reduce's contiguous last input axis when it
// reduces that axis (0 otherwise): what its rvec knob runs in vector lanes.
int64_t ReducedLastAxis(const Workload& w) {
  if (w.op != Op::kReduce || !w.ints.count("in0") || w.ints.count("dtypes")) return 0;
  const Shape& xs = w.Ints("in0");
  const Shape& axes = w.Ints("axes");
  const auto last = static_cast<int64_t>(xs.size()) - 1;
  return !xs.empty() && std::count(axes.begin(), axes.end(), last) ? xs.back() : 0;
}

// The output axis to which a transpose moves its input's contiguous last
// axis, when that is not the output's last axis (-1 otherwise): the axis
// tr_tile tiles.
int MovedLastAxis(const Workload& w) {
  if (w.op != Op::kTranspose || !w.ints.count("perm")) return -1;
  const Shape& perm = w.Ints("perm");
  const auto last = static_cast<int64_t>(perm.size()) - 1;
  for (size_t d = 0; d + 1 < perm.size(); ++d) {
    if (perm[d] == last) return static_cast<int>(d);
  }
  return -1;
}

// The CPU loops of an elementwise op: over rows of the flattened tensors
// (FlatElementwise).
Workload Loops(const Workload& w) {
  if (!Registered(w.op).elementwise) return w;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < NumOpInputs(w); ++i) inputs.push_back(StrCat("in", i));
  auto flat = FlatElementwise(w, inputs);
  return flat ? *std::move(flat) : w;
}

std::vector<Knob> Knobs(const Workload& wl, const Target& t) {
  const Workload w = Loops(wl);
  std::vector<Knob> k = OutputLoopKnobs(w.Ints("shape"), t, Vectorizable(w));
  // tr_tile: a transpose that moves the input's last axis copies tiles of
  // that many of its elements (contiguous reads) for each element of the
  // output's last axis, innermost (0: along the output's last axis).
  if (int p = MovedLastAxis(w); p >= 0 && w.Ints("shape")[p] >= 8) {
    k.push_back({"tr_tile", {0}});
    for (int64_t tile : {8, 16, 32}) {
      if (tile <= w.Ints("shape")[p]) k.back().choices.push_back(tile);
    }
  }
  // rvec: a reduction along the contiguous last axis in that many lanes
  // (1: one element at a time).
  const int64_t n = ReducedLastAxis(w), lanes = t.NativeVectorLanes();
  if (lanes > 1 && n >= lanes) {
    k.push_back({"rvec", {1}});
    for (int64_t m = 1; m <= 4 && lanes * m <= n; m *= 2) k.back().choices.push_back(lanes * m);
  }
  return k;
}

Config Default(const Workload& wl, const Target& t) {
  const Workload w = Loops(wl);
  Config c = OutputLoopDefault(w.Ints("shape"), t, Vectorizable(w));
  const std::vector<Knob> k = Knobs(w, t);
  if (k.back().name == "rvec") {
    // Two vectors of partial results: two independent chains of adds (or
    // maxes) per element. The BERT layer's softmax and layer norm row
    // reductions, one element at a time and serial: 90-142 us each at one
    // thread; in lanes and parallel: 8-42 us (task_latency_bench).
    c["rvec"] = Pick(k.back().choices, 2 * t.NativeVectorLanes());
  }
  if (k.back().name == "tr_tile") {
    // The BERT layer's K transpose, [128 x 768] -> [768 x 128], took
    // 143-158 us along the output's rows (reads 3 KB apart, which share few
    // L1 sets) and 49-54 us in tiles of 8 (16: 37-62, 32: 39-63;
    // task_latency_bench, one thread, three rounds).
    c["tr_tile"] = Pick(k.back().choices, 8);
    c["vec"] = 1;
  }
  if (w.op == Op::kReduce && k[1].choices.size() > 1) {
    // In parallel when the work is large, not the output: a row reduction
    // writes one value per row.
    int64_t work = 1;
    for (int64_t d : w.Ints("in0")) work *= d;
    if (work >= 65536) c["parallel"] = 1;
  }
  return c;
}

absl::Status Check(const Workload&, const Target&, const Config& c) {
  if (c.count("tr_tile") && c.at("tr_tile") > 0 && c.at("vec") > 1) {
    return absl::InvalidArgumentError("transpose: tr_tile > 0 copies along another axis than vec");
  }
  return absl::OkStatus();
}

// The output of workload `w` (a generic op, or eltwise when `w` is a
// prologue) computed from its kernel arguments `args` (every input, output
// excluded): prologues first, computed in place of their op inputs, then the
// op, then its epilogue and the cast to the output dtype.
absl::StatusOr<te::Tensor> OpTensor(const Workload& w, const std::vector<te::Tensor>& args,
                                    int64_t reduce_lanes = 1) {
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const bool eltwise = w.op == Op::kEltwise;
  const OpDef& op = Registered(w.op);
  if (!eltwise && !op.compute) return Bad(w, "not a generic operator");
  const size_t n_op = eltwise ? 1 : NumOpInputs(w);
  std::vector<te::Tensor> op_in;
  size_t next = 0, pro = 0;
  for (size_t i = 0; i < n_op; ++i) {
    if (pro < w.prologue.size() && w.prologue[pro].input == static_cast<int64_t>(i)) {
      const Workload& pw = w.prologue[pro++].op;
      auto psig = pw.Signature();
      if (!psig.ok()) return psig.status();
      std::vector<te::Tensor> pargs(args.begin() + next, args.begin() + next + psig->inputs.size());
      next += psig->inputs.size();
      te::NameScope scope(StrCat("p", i, "_"));
      auto t = OpTensor(pw, pargs);
      if (!t.ok()) return t.status();
      op_in.push_back(*t);
    } else {
      op_in.push_back(args.at(next++));
    }
  }
  std::vector<te::Tensor> eps(args.begin() + next, args.end());
  te::Tensor core;
  if (eltwise) {
    const te::Tensor& x = op_in[0];
    core = te::Compute(
        "bcast", sig->output.shape,
        [&](const std::vector<Var>& o) { return x(BroadcastIndex(x->shape, o)); },
        x.buffer()->dtype);
  } else {
    auto c = w.op == Op::kReduce && reduce_lanes > 1 ? ReduceCompute(w, op_in, reduce_lanes)
                                                     : op.compute(w, op_in);
    if (!c.ok()) return c.status();
    core = *c;
  }
  const Shape& shape = sig->output.shape;
  if (core->shape != shape) return Bad(w, "the compute's shape differs from the output's");
  if (w.epilogue.empty() && core.buffer()->dtype == IrType(sig->output.dtype)) return core;
  absl::Status error;
  te::Tensor out = te::Compute(
      "out", shape,
      [&](const std::vector<Var>& idx) {
        return ApplyEpilogue(w, Promote(core(AsExprs(idx))), idx, eps, &error);
      },
      IrType(sig->output.dtype));
  if (!error.ok()) return error;
  return out;
}

// The op's computes over its kernel arguments, unscheduled (b.args set).
absl::StatusOr<Built> Computes(const Workload& w, int64_t reduce_lanes = 1) {
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  std::vector<te::Tensor> args;
  for (size_t i = 0; i < sig->inputs.size(); ++i)
    args.push_back(TypedPlaceholder(w, i, sig->inputs[i].name));
  auto made = OpTensor(w, args, reduce_lanes);
  if (!made.ok()) return made.status();
  te::Tensor out = *made;
  size_t n_eps = 0;
  for (const EpilogueOp& e : w.epilogue) n_eps += e.HasOperand() ? 1 : 0;
  std::vector<te::Tensor> inputs(args.begin(), args.end() - static_cast<ptrdiff_t>(n_eps));
  std::vector<te::Tensor> eps(args.end() - static_cast<ptrdiff_t>(n_eps), args.end());
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  b.SetArgs(inputs, eps, out);
  return b;
}

absl::StatusOr<Built> Build(const Workload& wl, const Target&, const Config& c) {
  const Workload w = Loops(wl);
  auto built = Computes(w, c.count("rvec") ? c.at("rvec") : 1);
  if (!built.ok()) return built.status();
  Built b = *std::move(built);
  const te::Tensor out = b.args.back();
  te::Schedule& s = *b.schedule;
  const int rank = static_cast<int>(out->shape.size());
  // Intermediate stages: injective ones inline, reductions computed per
  // output element (compute_at the innermost output axis).
  bool attached = false;
  for (const te::Stage& st : std::vector<te::Stage>(s.stages())) {
    if (st.tensor.same_as(out)) continue;
    if (st.tensor->reduce_axes.empty()) {
      s.ComputeInline(st.tensor);
    } else {
      s.ComputeAt(st.tensor, out, s.Axis(out, rank - 1));
      attached = true;
    }
  }
  // rvec: the partial results' lanes innermost, one vector per step of the
  // reduction.
  for (const te::Stage& st : std::vector<te::Stage>(s.stages())) {
    if (st.name() != "rpartial") continue;
    std::vector<te::IterVar> order;
    for (size_t r = 0; r < st.tensor->reduce_axes.size(); ++r) {
      order.push_back(s.ReduceAxisOf(st.tensor, static_cast<int>(r)));
    }
    order.push_back(s.Axis(st.tensor, static_cast<int>(st.tensor->shape.size()) - 1));
    s.Reorder(st.tensor, order);
    s.Vectorize(st.tensor, order.back());
  }
  if (const int64_t tile = c.count("tr_tile") ? c.at("tr_tile") : 0; tile > 0) {
    // [.., po, pi, .., last] -> [.., po, .., last, pi]: each element of the
    // output's last axis copies `tile` contiguous input elements; in
    // parallel over the axes before po (or po itself).
    const int p = MovedLastAxis(w);
    te::IterVar last = s.Axis(out, rank - 1);
    auto [po, pi] = s.Split(out, s.Axis(out, p), tile);
    s.Reorder(out, {last, pi});
    if (c.at("parallel")) {
      if (p > 0) {
        ParallelOverAxes(s, out, p);
      } else {
        s.Parallel(out, po);
      }
    }
    return b;
  }
  int64_t vec = c.at("vec");
  if (vec > 1 && !attached && out->reduce_axes.empty()) {
    auto [o, i] = s.Split(out, s.Axis(out, rank - 1), vec);
    s.Vectorize(out, i);
  }
  if (c.at("parallel") && rank > 1) ParallelOverAxes(s, out, rank - 1);
  return b;
}

std::vector<Knob> GpuKnobs(const Workload& w, const Target&) {
  return GpuThreadKnobs(w.Ints("shape"));
}

Config GpuDefault(const Workload& w, const Target&) { return GpuThreadDefault(w.Ints("shape")); }

absl::StatusOr<Built> GpuBuild(const Workload& w, const Target&, const Config& c) {
  return GpuPerElement(Computes(w), c);
}

}  // namespace

const OpTemplate* GpuGenericTemplate() {
  static const OpTemplate t{GpuKnobs, GpuDefault, Check, GpuBuild};
  return &t;
}

const OpTemplate* GenericTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
