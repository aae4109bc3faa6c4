// pool3d (max / average with or without counting padding, NCDHW) + epilogue.
// Knobs: tile_ow (vectorized output width), parallel (the first of the batch,
// channel and output-depth loops with more than one iteration; never a fused
// loop, whose index would hide the channel/depth from bound inference),
// unroll_r (unrolled h/w window loops when the 2-D window is small).
// Only the dimensions whose windows can leave the input get bounds guards
// (clamped loads + Select); the others read directly.
#include <array>
#include <limits>

#include "absl/status/status.h"
#include "compiler/ops/common.h"
#include "deploy/str.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

// The loop `parallel=1` marks: 0 (N), 1 (C) or 2 (OD); -1 when all are 1.
int ParallelAxis(const Workload& w) {
  if (w.Int("N") > 1) return 0;
  if (w.Int("C") > 1) return 1;
  if (w.Int("OD") > 1) return 2;
  return -1;
}

int64_t ParallelExtent(const Workload& w) {
  switch (ParallelAxis(w)) {
    case 0: return w.Int("N");
    case 1: return w.Int("C");
    case 2: return w.Int("OD");
    default: return 1;
  }
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  std::vector<Knob> k;
  k.push_back({"tile_ow", VectorChoices(w.Int("OW"), t.NativeVectorLanes())});
  k.push_back({"parallel", {0}});
  if (ParallelExtent(w) > 1) k.back().choices.push_back(1);
  const auto& ks = w.Ints("kernel");
  k.push_back({"unroll_r", ks.size() == 3 && ks[1] * ks[2] <= 16 ? std::vector<int64_t>{0, 1}
                                                                  : std::vector<int64_t>{0}});
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  if (c.at("parallel") && ParallelExtent(w) < 2) {
    return absl::InvalidArgumentError("pool3d: parallel=1 but the parallel loop has a single iteration");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  Config c;
  // Strided windows make vector loads gathers: vectorize only unit stride.
  c["tile_ow"] = w.Ints("stride")[2] == 1 ? Pick(k[0].choices, t.NativeVectorLanes()) : 1;
  c["unroll_r"] = k[2].choices.back();
  const auto& ks = w.Ints("kernel");
  int64_t work = w.Int("N") * w.Int("C") * w.Int("OD") * w.Int("OH") * w.Int("OW") * ks[0] * ks[1] * ks[2];
  c["parallel"] = k[1].choices.size() > 1 && ParallelExtent(w) >= 4 && work >= (int64_t{1} << 18);
  return c;
}

// Number of r in [0, k) with 0 <= base + r*d < limit.
Expr ValidCount(Expr base, int64_t k, int64_t d, int64_t limit) {
  Expr lo = Max(FloorDiv(IntImm(0) - base + IntImm(d - 1), IntImm(d)), IntImm(0));
  Expr hi = Min(FloorDiv(IntImm(limit - 1) - base, IntImm(d)), IntImm(k - 1));
  return Max(hi - lo + IntImm(1), IntImm(0));
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& cfg) {
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  int64_t N = w.Int("N"), C = w.Int("C");
  const std::array<int64_t, 3> in = {w.Int("D"), w.Int("H"), w.Int("W")};
  const std::array<int64_t, 3> outs = {w.Int("OD"), w.Int("OH"), w.Int("OW")};
  const auto& ks = w.Ints("kernel");
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  const auto& dil = w.Ints("dilation");
  bool is_max = w.Int("kind") == 0;
  bool include_pad = w.IntOr("count_include_pad", 0) != 0;
  // guard[i]: some window of dimension i reaches outside the input.
  std::array<bool, 3> guard;
  for (int i = 0; i < 3; ++i) {
    guard[i] = pad[i] > 0 || (outs[i] - 1) * st[i] - pad[i] + (ks[i] - 1) * dil[i] >= in[i];
  }
  te::Tensor data = te::Placeholder("data", {N, C, in[0], in[1], in[2]});
  auto eps = EpilogueOperands(w);
  std::array<IterRange, 3> r = {te::ReduceAxis(ks[0], "rd"), te::ReduceAxis(ks[1], "ry"),
                                te::ReduceAxis(ks[2], "rx")};
  te::Tensor pool = te::Compute("pool", {N, C, outs[0], outs[1], outs[2]}, [&](const std::vector<Var>& i) {
    std::vector<Expr> idx = {i[0], i[1]};
    Expr ok;
    for (int d = 0; d < 3; ++d) {
      Expr p = i[d + 2] * IntImm(st[d]) - IntImm(pad[d]) + r[d].var * IntImm(dil[d]);
      if (!guard[d]) {
        idx.push_back(p);
        continue;
      }
      Expr inside = p >= IntImm(0) && p < IntImm(in[d]);
      ok = ok.defined() ? (ok && inside) : inside;
      idx.push_back(Min(Max(p, IntImm(0)), IntImm(in[d] - 1)));
    }
    Expr v = data(idx);
    std::vector<IterRange> axes = {r[0], r[1], r[2]};
    if (is_max) {
      if (ok.defined()) v = Select(ok, v, FloatImm(-std::numeric_limits<float>::infinity()));
      return te::MaxOf(v, axes);
    }
    if (ok.defined()) v = Select(ok, v, FloatImm(0.0));
    return te::Sum(v, axes);
  });
  te::Tensor out = te::Compute("out", {N, C, outs[0], outs[1], outs[2]}, [&](const std::vector<Var>& i) {
    Expr y = pool({i[0], i[1], i[2], i[3], i[4]});
    if (!is_max) {
      Expr cnt;
      bool any_guard = guard[0] || guard[1] || guard[2];
      if (include_pad || !any_guard) {
        // ONNX (test data for ceil_mode windows past the padded input too):
        // the whole window counts.
        cnt = FloatImm(static_cast<double>(ks[0] * ks[1] * ks[2]));
      } else {
        Expr n = IntImm(1);
        for (int d = 0; d < 3; ++d) {
          n = n * (guard[d] ? ValidCount(i[d + 2] * IntImm(st[d]) - IntImm(pad[d]), ks[d], dil[d], in[d])
                            : IntImm(ks[d]));
        }
        cnt = Cast(DataType::Float32(), Max(n, IntImm(1)));
      }
      y = y / cnt;
    }
    return ApplyEpilogue(w, y, i, eps);
  });
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  int64_t tow = cfg.at("tile_ow");
  auto [owo, owi] = s.Split(out, s.Axis(out, 4), tow);
  if (tow > 1) s.Vectorize(out, owi);
  if (cfg.at("parallel")) s.Parallel(out, s.Axis(out, ParallelAxis(w)));
  s.ComputeAt(pool, out, owo);
  te::IterVar ow = s.Axis(pool, 4);
  s.Reorder(pool, {s.ReduceAxisOf(pool, 0), s.ReduceAxisOf(pool, 1), s.ReduceAxisOf(pool, 2), ow});
  if (tow > 1) s.Vectorize(pool, ow);
  if (cfg.at("unroll_r")) {
    s.Unroll(pool, s.ReduceAxisOf(pool, 1));
    s.Unroll(pool, s.ReduceAxisOf(pool, 2));
  }
  b.args = {data};
  for (const auto& e : eps) b.args.push_back(e);
  b.args.push_back(out);
  return b;
}

}  // namespace

const OpTemplate* Pool3dTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
