// pool2d / pool3d (max / average with or without counting padding; NCHW or
// NCDHW) + epilogue: one template for both, parameterized by the number of
// spatial dimensions (2 or 3, from the workload op).
// Knobs: tile_ow (vectorized output width), parallel (the first of the batch,
// channel and, for pool3d, output-depth loops with more than one iteration;
// never a fused loop, whose index would hide the channel/depth from bound
// inference so that every iteration would compute the pooling tile of all
// channels), unroll_r (unrolled h/w window loops when the h*w window is small).
// Only the dimensions whose windows can leave the input get bounds guards
// (clamped loads + Select); the others read directly.
#include <array>
#include <limits>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

constexpr int kMaxRank = 3;

// Spatial rank of the op: 2 (pool2d) or 3 (pool3d).
int Rank(const Workload& w) { return w.op == Op::kPool3d ? 3 : 2; }

// The channel block of pool2d's data (in_block) or output (out_block); 0
// for NCHW.
int64_t Block(const Workload& w, bool out) {
  return Rank(w) == 2 ? w.IntOr(out ? "out_block" : "in_block", 0) : 0;
}

// The data (out=false) or output shape: N, C, then [D,] H, W (or [OD,] OH,
// OW); N, C/b, H, W, b in channel blocks of b.
std::vector<int64_t> Shape(const Workload& w, bool out) {
  std::vector<int64_t> shape = {w.Int("N"), w.Int("C")};
  if (Rank(w) == 3) shape.push_back(w.Int(out ? "OD" : "D"));
  shape.push_back(w.Int(out ? "OH" : "H"));
  shape.push_back(w.Int(out ? "OW" : "W"));
  return Rank(w) == 2 ? BlockedShape(shape, Block(w, out)) : shape;
}

// The loop `parallel=1` marks: the first of N, C and (pool3d) OD with more
// than one iteration; -1 when there is none.
int ParallelAxis(const Workload& w) {
  auto shape = Shape(w, true);
  for (int a = 0; a < Rank(w); ++a) {
    if (shape[a] > 1) return a;
  }
  return -1;
}

int64_t ParallelExtent(const Workload& w) {
  int a = ParallelAxis(w);
  return a < 0 ? 1 : Shape(w, true)[a];
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const int rank = Rank(w);
  std::vector<Knob> k;
  // In channel blocks the vectors run along the block instead.
  const bool blocked = Block(w, false) > 0 || Block(w, true) > 0;
  k.push_back({"tile_ow", blocked ? std::vector<int64_t>{1}
                                  : VectorChoices(w.Int("OW"), t.NativeVectorLanes())});
  k.push_back({"parallel", {0}});
  if (ParallelExtent(w) > 1) k.back().choices.push_back(1);
  const auto& ks = w.Ints("kernel");
  bool small = static_cast<int>(ks.size()) == rank && ks[rank - 2] * ks[rank - 1] <= 16;
  k.push_back({"unroll_r", small ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}});
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  if (c.at("parallel") && ParallelExtent(w) < 2) {
    return absl::InvalidArgumentError(
        StrCat(w.op, ": parallel=1 but the parallel loop has a single iteration"));
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const int rank = Rank(w);
  auto k = Knobs(w, t);
  const auto& st = w.Ints("stride");
  Config c;
  // Vectorized along the output row up to stride 4: a strided window's
  // loads are one wide load and a shuffle (codegen's StridedLoad); the int8
  // ResNet-50's stem pool (stride 2) 0.38 -> 0.13 ms.
  c["tile_ow"] = st.size() == static_cast<size_t>(rank) && st[rank - 1] <= 4
                     ? Pick(k[0].choices, t.NativeVectorLanes())
                     : 1;
  c["unroll_r"] = k[2].choices.back();
  // Enough work to pay for the threads: the output size for pool2d, the
  // output size times the window for pool3d (the thresholds of the tuning
  // records made so far; keep them).
  int64_t outputs = 1;
  for (int64_t e : Shape(w, true)) outputs *= e;
  bool enough = outputs >= 65536;
  if (rank == 3) {
    const auto& ks = w.Ints("kernel");
    enough = outputs * ks[0] * ks[1] * ks[2] >= (int64_t{1} << 18);
  }
  c["parallel"] = k[1].choices.size() > 1 && ParallelExtent(w) >= 4 && enough;
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

// The pooling (stage `pool`, *pool) and output computes, unscheduled.
absl::StatusOr<Built> Computes(const Workload& w, te::Tensor* pool_out) {
  const int rank = Rank(w);
  const size_t r_n = static_cast<size_t>(rank);
  const auto& ks = w.Ints("kernel");
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  const auto& dil = w.Ints("dilation");
  if (ks.size() != r_n || st.size() != r_n || pad.size() != 2 * r_n || dil.size() != r_n) {
    return absl::InvalidArgumentError(
        StrCat(w.op, ": kernel/stride/dilation need ", rank, " values, pad ", 2 * rank));
  }
  const std::vector<int64_t> in_shape = Shape(w, false), out_shape = Shape(w, true);
  // Spatial extents: in[d], outs[d] for d < rank.
  const int64_t* in = in_shape.data() + 2;
  const int64_t* outs = out_shape.data() + 2;
  const bool is_max = w.Int("kind") == 0;
  const bool include_pad = w.IntOr("count_include_pad", 0) != 0;
  // guard[d]: some window of spatial dimension d reaches outside the input.
  std::array<bool, kMaxRank> guard{};
  bool any_guard = false;
  for (int d = 0; d < rank; ++d) {
    guard[d] = pad[d] > 0 || (outs[d] - 1) * st[d] - pad[d] + (ks[d] - 1) * dil[d] >= in[d];
    any_guard = any_guard || guard[d];
  }
  te::Tensor data = te::Placeholder("data", in_shape);
  auto eps = EpilogueOperands(w);
  static const char* const kReduceNames[kMaxRank] = {"rd", "ry", "rx"};
  std::vector<IterRange> r;
  for (int d = 0; d < rank; ++d) {
    r.push_back(te::ReduceAxis(ks[d], kReduceNames[kMaxRank - rank + d]));
  }
  // Blocks: the output's channel i[1] (NCHW) or i[1]*ob + i[last]; the
  // data's block and lane of it.
  const int64_t ib = Block(w, false), ob = Block(w, true);
  te::Tensor pool = te::Compute("pool", out_shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> idx = {i[0]};
    Expr lane;
    if (ib == ob) {
      idx.push_back(i[1]);
      if (ib > 0) lane = i[r_n + 2];
    } else {
      Expr c = ob > 0 ? i[1] * IntImm(ob) + i[r_n + 2] : Expr(i[1]);
      idx.push_back(ib > 0 ? FloorDiv(c, IntImm(ib)) : c);
      if (ib > 0) lane = FloorMod(c, IntImm(ib));
    }
    Expr ok;
    for (int d = 0; d < rank; ++d) {
      Expr p = i[d + 2] * IntImm(st[d]) - IntImm(pad[d]) + r[d].var * IntImm(dil[d]);
      if (!guard[d]) {
        idx.push_back(p);
        continue;
      }
      ok = ok.defined() ? (ok && p >= IntImm(0)) : (p >= IntImm(0));
      ok = ok && p < IntImm(in[d]);
      idx.push_back(Min(Max(p, IntImm(0)), IntImm(in[d] - 1)));
    }
    if (lane.defined()) idx.push_back(lane);
    Expr v = data(idx);
    if (is_max) {
      if (ok.defined()) v = Select(ok, v, FloatImm(-std::numeric_limits<float>::infinity()));
      return te::MaxOf(v, r);
    }
    if (ok.defined()) v = Select(ok, v, FloatImm(0.0));
    return te::Sum(v, r);
  });
  te::Tensor out = te::Compute(
      "out", out_shape,
      [&](const std::vector<Var>& i) {
        Expr y = pool(std::vector<Expr>(i.begin(), i.end()));
        if (!is_max) {
          Expr cnt;
          if (include_pad) {
            // The window's taps inside the padded input: the whole window, except
            // for ceil-mode windows that run past the end padding (ONNX's
            // reference, onnxruntime and PyTorch; ONNX 1.17's test data for
            // averagepool_3d_*_ceil_mode_is_True still divides by the whole window).
            Expr n;
            for (int d = 0; d < rank; ++d) {
              const int64_t padded = in[d] + pad[d] + pad[r_n + d];
              Expr nd = (outs[d] - 1) * st[d] + (ks[d] - 1) * dil[d] >= padded
                            ? ValidCount(i[d + 2] * IntImm(st[d]), ks[d], dil[d], padded)
                            : IntImm(ks[d]);
              n = n.defined() ? n * nd : nd;
            }
            cnt = Cast(DataType::Float32(), n);
          } else if (!any_guard) {
            int64_t whole = 1;
            for (int d = 0; d < rank; ++d) whole *= ks[d];
            cnt = FloatImm(static_cast<double>(whole));
          } else {
            Expr n;
            for (int d = 0; d < rank; ++d) {
              Expr nd = guard[d] ? ValidCount(i[d + 2] * IntImm(st[d]) - IntImm(pad[d]), ks[d],
                                              dil[d], in[d])
                                 : IntImm(ks[d]);
              n = n.defined() ? n * nd : nd;
            }
            cnt = Cast(DataType::Float32(), Max(n, IntImm(1)));
          }
          y = y / cnt;
        }
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(OutputDType(w)));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  b.SetArgs({data}, eps, out);
  *pool_out = pool;
  return b;
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& cfg) {
  te::Tensor pool;
  auto built = Computes(w, &pool);
  if (!built.ok()) return built.status();
  Built b = *std::move(built);
  const te::Tensor out = b.args.back();
  te::Schedule& s = *b.schedule;
  const int rank = Rank(w);
  const int64_t ib = Block(w, false), ob = Block(w, true);
  const int ow_axis = rank + 1;
  std::vector<te::IterVar> order;
  for (int d = 0; d < rank; ++d) order.push_back(s.ReduceAxisOf(pool, d));
  if (ob > 0) {
    // A vector per output pixel along its block.
    s.Vectorize(out, s.Axis(out, rank + 2));
    if (cfg.at("parallel")) s.Parallel(out, s.Axis(out, ParallelAxis(w)));
    s.ComputeAt(pool, out, s.Axis(out, ow_axis));
    order.push_back(s.Axis(pool, rank + 2));
    s.Reorder(pool, order);
    s.Vectorize(pool, order.back());
  } else if (ib > 0) {
    // NCHW output from blocks (the global pool ahead of a classifier): the
    // channels of a block as one vector, stored a pixel plane apart.
    auto [co, ci] = s.Split(out, s.Axis(out, 1), ib);
    std::vector<te::IterVar> out_order = {s.Axis(out, 0), co};
    for (int d = 0; d < rank; ++d) out_order.push_back(s.Axis(out, 2 + d));
    out_order.push_back(ci);
    s.Reorder(out, out_order);
    s.Vectorize(out, ci);
    const int pa = ParallelAxis(w);
    if (cfg.at("parallel")) s.Parallel(out, pa == 1 ? co : s.Axis(out, pa));
    s.ComputeAt(pool, out, s.Axis(out, ow_axis));
    order.push_back(s.Axis(pool, 1));
    s.Reorder(pool, order);
    s.Vectorize(pool, order.back());
  } else {
    int64_t tow = cfg.at("tile_ow");
    auto [owo, owi] = s.Split(out, s.Axis(out, ow_axis), tow);
    if (tow > 1) s.Vectorize(out, owi);
    if (cfg.at("parallel")) s.Parallel(out, s.Axis(out, ParallelAxis(w)));
    s.ComputeAt(pool, out, owo);
    order.push_back(s.Axis(pool, ow_axis));
    s.Reorder(pool, order);
    if (tow > 1) s.Vectorize(pool, order.back());
  }
  if (cfg.at("unroll_r")) {
    // The h and w window loops (not the depth one of pool3d).
    s.Unroll(pool, s.ReduceAxisOf(pool, rank - 2));
    s.Unroll(pool, s.ReduceAxisOf(pool, rank - 1));
  }
  return b;
}

std::vector<Knob> GpuKnobs(const Workload& w, const Target&) {
  return GpuThreadKnobs(Shape(w, true));
}

absl::Status GpuCheck(const Workload&, const Target&, const Config&) { return absl::OkStatus(); }

Config GpuDefault(const Workload& w, const Target&) { return GpuThreadDefault(Shape(w, true)); }

absl::StatusOr<Built> GpuBuild(const Workload& w, const Target&, const Config& c) {
  te::Tensor pool;
  return GpuPerElement(Computes(w, &pool), c);
}

}  // namespace

const OpTemplate* GpuPoolTemplate() {
  static const OpTemplate t{GpuKnobs, GpuDefault, GpuCheck, GpuBuild};
  return &t;
}

const OpTemplate* PoolTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
