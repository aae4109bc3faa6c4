// pool2d (max / average with or without counting padding) + epilogue.
// Knobs: tile_ow (vectorized output width), parallel (the batch loop when
// N > 1, else the channel loop; not the fused N*C loop, whose index hides the
// channel from bound inference so that every iteration would compute the
// pooling tile of all channels), unroll_r (unrolled window loops).
#include <limits>

#include "absl/status/status.h"
#include "compiler/ops/common.h"
#include "deploy/str.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

int64_t ParallelExtent(const Workload& w) { return w.Int("N") > 1 ? w.Int("N") : w.Int("C"); }

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  std::vector<Knob> k;
  k.push_back({"tile_ow", VectorChoices(w.Int("OW"), t.NativeVectorLanes())});
  k.push_back({"parallel", {0}});
  if (ParallelExtent(w) > 1) k.back().choices.push_back(1);
  const auto& ks = w.Ints("kernel");
  k.push_back({"unroll_r", ks.size() == 2 && ks[0] * ks[1] <= 16 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}});
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  if (c.at("parallel") && ParallelExtent(w) < 2) {
    return absl::InvalidArgumentError("pool2d: parallel=1 but the parallel loop has a single iteration");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  Config c;
  // Strided windows make vector loads gathers: vectorize only unit stride.
  c["tile_ow"] = w.Ints("stride")[1] == 1 ? Pick(k[0].choices, t.NativeVectorLanes()) : 1;
  c["unroll_r"] = k[2].choices.back();
  c["parallel"] = k[1].choices.size() > 1 && ParallelExtent(w) >= 4 &&
                  w.Int("N") * w.Int("C") * w.Int("OH") * w.Int("OW") >= 65536;
  return c;
}

// Number of r in [0, k) with 0 <= base + r*d < limit.
Expr ValidCount(Expr base, int64_t k, int64_t d, int64_t limit) {
  // lo: smallest r with base + r*d >= 0 -> ceil(-base / d); hi: largest r
  // with base + r*d <= limit - 1 -> floor((limit - 1 - base) / d).
  Expr lo = Max(FloorDiv(IntImm(0) - base + IntImm(d - 1), IntImm(d)), IntImm(0));
  Expr hi = Min(FloorDiv(IntImm(limit - 1) - base, IntImm(d)), IntImm(k - 1));
  return Max(hi - lo + IntImm(1), IntImm(0));
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& cfg) {
  int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W"), OH = w.Int("OH"), OW = w.Int("OW");
  const auto& ks = w.Ints("kernel");
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  const auto& dil = w.Ints("dilation");
  if (ks.size() != 2 || st.size() != 2 || pad.size() != 4 || dil.size() != 2) {
    return absl::InvalidArgumentError("pool2d: kernel/stride/dilation need 2 values, pad 4");
  }
  bool is_max = w.Int("kind") == 0;
  bool include_pad = w.IntOr("count_include_pad", 0) != 0;
  te::Tensor data = te::Placeholder("data", {N, C, H, W});
  auto eps = EpilogueOperands(w);
  bool in_bounds = pad[0] == 0 && pad[1] == 0 && (OH - 1) * st[0] + (ks[0] - 1) * dil[0] < H &&
                   (OW - 1) * st[1] + (ks[1] - 1) * dil[1] < W;
  IterRange ry = te::ReduceAxis(ks[0], "ry"), rx = te::ReduceAxis(ks[1], "rx");
  te::Tensor pool = te::Compute("pool", {N, C, OH, OW}, [&](const std::vector<Var>& i) {
    Expr h = i[2] * IntImm(st[0]) - IntImm(pad[0]) + ry.var * IntImm(dil[0]);
    Expr x = i[3] * IntImm(st[1]) - IntImm(pad[1]) + rx.var * IntImm(dil[1]);
    if (in_bounds) {
      // Every window lies inside the input: no guards.
      Expr v = data({i[0], i[1], h, x});
      if (is_max) return te::MaxOf(v, {ry, rx});
      return te::Sum(v, {ry, rx});
    }
    Expr ok = h >= IntImm(0) && h < IntImm(H) && x >= IntImm(0) && x < IntImm(W);
    Expr hc = Min(Max(h, IntImm(0)), IntImm(H - 1)), xc = Min(Max(x, IntImm(0)), IntImm(W - 1));
    Expr v = data({i[0], i[1], hc, xc});
    if (is_max) return te::MaxOf(Select(ok, v, FloatImm(-std::numeric_limits<float>::infinity())), {ry, rx});
    return te::Sum(Select(ok, v, FloatImm(0.0)), {ry, rx});
  });
  te::Tensor out = te::Compute("out", {N, C, OH, OW}, [&](const std::vector<Var>& i) {
    Expr y = pool({i[0], i[1], i[2], i[3]});
    if (!is_max) {
      Expr cnt;
      if (include_pad) {
        cnt = FloatImm(static_cast<double>(ks[0] * ks[1]));
      } else {
        Expr ch = ValidCount(i[2] * IntImm(st[0]) - IntImm(pad[0]), ks[0], dil[0], H);
        Expr cw = ValidCount(i[3] * IntImm(st[1]) - IntImm(pad[1]), ks[1], dil[1], W);
        cnt = Cast(DataType::Float32(), Max(ch * cw, IntImm(1)));
      }
      y = y / cnt;
    }
    return ApplyEpilogue(w, y, i, eps);
  });
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  int64_t tow = cfg.at("tile_ow");
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), tow);
  if (tow > 1) s.Vectorize(out, owi);
  if (cfg.at("parallel")) s.Parallel(out, s.Axis(out, N > 1 ? 0 : 1));
  s.ComputeAt(pool, out, owo);
  te::IterVar ow = s.Axis(pool, 3);
  s.Reorder(pool, {s.ReduceAxisOf(pool, 0), s.ReduceAxisOf(pool, 1), ow});
  if (tow > 1) s.Vectorize(pool, ow);
  if (cfg.at("unroll_r")) {
    s.Unroll(pool, s.ReduceAxisOf(pool, 0));
    s.Unroll(pool, s.ReduceAxisOf(pool, 1));
  }
  b.args = {data};
  for (const auto& e : eps) b.args.push_back(e);
  b.args.push_back(out);
  return b;
}

}  // namespace

const OpTemplate* Pool2dTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
