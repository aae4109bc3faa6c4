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

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  return OutputLoopKnobs(w.Ints("shape"), t, true);
}

Config Default(const Workload& w, const Target& t) {
  return OutputLoopDefault(w.Ints("shape"), t, true);
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
  auto built = Computes(w, shape);
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
  if (c.at("parallel") && rank > 1) {
    te::IterVar outer = s.Axis(out, 0);
    for (size_t d = 1; d + 1 < rank; ++d)
      outer = s.Fuse(out, outer, s.Axis(out, static_cast<int>(d)));
    s.Parallel(out, outer);
  }
  return b;
}

int64_t Elements(const Workload& w) {
  int64_t n = 1;
  for (int64_t d : w.Ints("shape")) n *= d;
  return n;
}

std::vector<Knob> GpuKnobs(const Workload& w, const Target&) {
  return {{"threads", UpTo({32, 64, 128, 256, 512}, Elements(w))}};
}

Config GpuDefault(const Workload& w, const Target& t) {
  return {{"threads", Pick(GpuKnobs(w, t)[0].choices, 256)}};
}

absl::StatusOr<Built> GpuBuild(const Workload& w, const Target&, const Config& c) {
  std::vector<int64_t> shape;
  auto built = Computes(w, shape);
  if (!built.ok()) return built.status();
  Built b = *std::move(built);
  te::Schedule& s = *b.schedule;
  const te::Tensor out = b.args.back();
  te::IterVar all = s.Axis(out, 0);
  for (size_t d = 1; d < shape.size(); ++d)
    all = s.Fuse(out, all, s.Axis(out, static_cast<int>(d)));
  auto [block, thread] = s.Split(out, all, c.at("threads"));
  if (absl::Status st = s.Bind(out, block, "blockIdx.x"); !st.ok()) return st;
  if (absl::Status st = s.Bind(out, thread, "threadIdx.x"); !st.ok()) return st;
  return b;
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
