// eltwise: output = epilogue(broadcast(input)). CPU knobs: vec (vector
// width of the last axis), parallel (outer axes fused and run in parallel).
// GPU (GpuEltwiseTemplate): every axis fused, `threads` per block.
#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

// The CPU loops: over rows of the flattened tensor where the input is not
// broadcast (FlatElementwise).
Workload Loops(const Workload& w) {
  auto flat = FlatElementwise(w, {"in_shape"});
  return flat ? *std::move(flat) : w;
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  return OutputLoopKnobs(Loops(w).Ints("shape"), t, true);
}

Config Default(const Workload& w, const Target& t) {
  return OutputLoopDefault(Loops(w).Ints("shape"), t, true);
}

absl::Status Check(const Workload&, const Target&, const Config&) { return absl::OkStatus(); }

// The computes; b.schedule over them (unscheduled), b.args set.
absl::StatusOr<Built> Computes(const Workload& w, std::vector<int64_t>& shape) {
  shape = w.Ints("shape");
  std::vector<int64_t> in_shape = w.Ints("in_shape");
  if (shape.empty()) {
    shape = {1};
    in_shape = {1};
  }
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  te::Tensor in = te::Placeholder("in", in_shape, IrType(sig->inputs[0].dtype));
  auto eps = EpilogueOperands(w);
  absl::Status error;
  te::Tensor out = te::Compute(
      "out", shape,
      [&](const std::vector<Var>& idx) {
        return ApplyEpilogue(w, Promote(in(BroadcastIndex(in_shape, idx))), idx, eps, &error);
      },
      IrType(sig->output.dtype));
  if (!error.ok()) return error;
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  b.SetArgs({in}, eps, out);
  return b;
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& c) {
  std::vector<int64_t> shape;
  auto built = Computes(Loops(w), shape);
  if (!built.ok()) return built.status();
  Built b = *std::move(built);
  te::Schedule& s = *b.schedule;
  const te::Tensor out = b.args.back();
  size_t rank = shape.size();
  te::IterVar last = s.Axis(out, static_cast<int>(rank) - 1);
  int64_t vec = c.at("vec");
  if (vec > 1) {
    auto [o, i] = s.Split(out, last, vec);
    s.Vectorize(out, i);
  }
  if (c.at("parallel") && rank > 1) ParallelOverAxes(s, out, static_cast<int>(rank) - 1);
  return b;
}

std::vector<Knob> GpuKnobs(const Workload& w, const Target&) {
  return GpuThreadKnobs(w.Ints("shape"));
}

Config GpuDefault(const Workload& w, const Target&) { return GpuThreadDefault(w.Ints("shape")); }

absl::StatusOr<Built> GpuBuild(const Workload& w, const Target&, const Config& c) {
  std::vector<int64_t> shape;
  return GpuPerElement(Computes(w, shape), c);
}
}  // namespace

const OpTemplate* EltwiseTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

const OpTemplate* GpuEltwiseTemplate() {
  static const OpTemplate t{GpuKnobs, GpuDefault, Check, GpuBuild};
  return &t;
}

}  // namespace kiln::compiler::ops
