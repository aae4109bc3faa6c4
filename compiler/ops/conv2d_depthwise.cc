// Depthwise conv2d (groups = C = K; layout=2 of the conv2d template): each
// channel's padded input is copied once into a row-major scratch whose
// columns are split by phase (x mod stride), so that every kernel tap of an
// output row reads contiguous columns, also at stride 2. The output is
// vectorized along its width: a tile of dw_ow pixels accumulates R x S
// (unrolled) broadcast-weight multiply-adds of unaligned vector loads.
//
//   prow[n][c][h][p][xs]  = padded data[n][c][h][xs*sw + p]
//   conv[n][c][oh][ow]    = sum_{r,s} prow[n][c][oh*sh + r*dh][(s*dw) % sw][ow + (s*dw) / sw]
//                                     * weight[c][0][r][s]
//   out[n][c][oh][ow]     = epilogue(conv[..] + bias[c])
//
// With in_block (the layout pass's NCHW[16]c tensors) the vectors run
// along the channel block instead: the padded input rows of an output row
// are copied once per row (prow5), and a tile of dw_ow pixels accumulates
// R x S (unrolled) multiply-adds of whole-block vectors, also at stride 2
// (no shuffles, no lanes wasted on narrow images). The output is written in
// the same blocks (out_block) or, for a consumer that reads NCHW, as NCHW:
// the tile's dw_ow x 16 accumulators unrolled, their stores of a channel's
// dw_ow pixels made vectors by SLP (as NCHWc writes NCHW).
//
//   prow5[n][cb][h][x][v] = padded data[n][cb][h][x][v]
//   conv[n][cb][oh][ow][v] = sum_{r,s} prow5[n][cb][oh*sh + r*dh][ow*sw + s*dw][v]
//                                      * wpack[cb][0][r][s][v]
//   out[n][cb][oh][ow][v]  = epilogue(conv[n][cb][oh][ow][v] + bias[cb*16 + v])
//   out[n][c][oh][ow]      = epilogue(conv[n][c/16][oh][ow][c%16] + bias[c])   (NCHW)
#include <algorithm>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"

namespace kiln::compiler::ops {

using namespace ir;

namespace {

// The padded input of one channel, columns split by phase.
int64_t PhaseColumns(const Workload& w) {
  const int64_t sw = w.Ints("stride")[1];
  return (PaddedExtent(w).second + sw - 1) / sw;
}
int64_t ChannelScratchBytes(const Workload& w) {
  return 4 * PaddedExtent(w).first * w.Ints("stride")[1] * PhaseColumns(w);
}

}  // namespace

bool DepthwiseEligible(const Workload& w) {
  const int64_t ib = w.IntOr("in_block", 0), ob = w.IntOr("out_block", 0);
  return IsDepthwiseConv(w) && w.Int("R") * w.Int("S") <= 64 && (ib == ob || ob == 0);
}

std::vector<Knob> DepthwiseKnobs(const Workload& w, const Target& t) {
  if (!DepthwiseEligible(w)) return {{"dw_ow", {0}}};
  const int lanes = t.NativeVectorLanes();
  Knob k{"dw_ow", {}};
  if (w.IntOr("in_block", 0) > 0) {
    // Blocked: pixels per register tile.
    for (int64_t d = 1; d <= std::min<int64_t>(w.Int("OW"), 14); ++d) {
      if (w.Int("OW") % d == 0 || d == 4 || d == 8) k.choices.push_back(d);
    }
    return {k};
  }
  for (int64_t v = 1; v <= 4; ++v) {
    if (v == 1 || (v - 1) * lanes < w.Int("OW")) k.choices.push_back(v * lanes);
  }
  return {k};
}

bool DepthwiseSplitsRows(const Workload& w) {
  return DepthwiseEligible(w) && w.IntOr("in_block", 0) > 0 && w.Int("OH") >= kDepthwiseSplitRows;
}

absl::Status DepthwiseCheck(const Workload& w, const Config& c) {
  if (!DepthwiseEligible(w)) {
    return absl::InvalidArgumentError("conv2d: layout=2 (depthwise) needs groups = C = K");
  }
  if (w.IntOr("in_block", 0) == 0 && ChannelScratchBytes(w) > kMaxScratchBytes) {
    return absl::InvalidArgumentError(StrCat("conv2d depthwise: one padded channel (",
                                             ChannelScratchBytes(w), " bytes) exceeds ",
                                             kMaxScratchBytes, " bytes of scratch"));
  }
  if (c.at("parallel") && w.Int("C") < 2) {
    return absl::InvalidArgumentError("conv2d depthwise: parallel=1 with one channel");
  }
  return absl::OkStatus();
}

Config DepthwiseDefault(const Workload& w, const Target& t) {
  Config c;
  auto k = DepthwiseKnobs(w, t);
  // One vector of output width: its R x S multiply-adds chain on one
  // accumulator, but the row's tiles are independent and the loads, not the
  // adds, are the limit (measured faster than two vectors at 112 and 28
  // pixels, bench/kernels_vs_onednn_bench --only dwconv).
  c["dw_ow"] = Pick(k[0].choices, t.NativeVectorLanes());
  // Blocked: the widest tile up to 8 pixels that divides the row, else 8
  // (measured on MobileNetV2's layers: 7 and 8 within 3% of each other).
  // Written as NCHW, 4 pixels: the SLP vectorizer turns each channel's 4
  // stores into one (MobileNetV2's 144-channel 56x56 layer: 236 us at 4, 398
  // at 8, 795 at 14).
  if (DepthwiseEligible(w) && w.IntOr("in_block", 0) > 0) {
    const int64_t widest = w.IntOr("out_block", 0) > 0 ? 8 : 4;
    c["dw_ow"] = Pick(k[0].choices, widest);
    for (int64_t d : k[0].choices) {
      if (d <= widest && w.Int("OW") % d == 0) c["dw_ow"] = d;
    }
  }
  return c;
}

namespace {

absl::StatusOr<Built> BuildDepthwiseBlocked(const Workload& w, const Config& cfg) {
  const int64_t b = w.Int("in_block");
  const int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W");
  const int64_t R = w.Int("R"), S = w.Int("S"), OH = w.Int("OH"), OW = w.Int("OW");
  const auto& st = w.Ints("stride");
  const auto& dil = w.Ints("dilation");
  const auto [PH, PW] = PaddedExtent(w);
  const int64_t Cb = C / b;
  te::Tensor data = te::Placeholder("data", {N, Cb, H, W, b});
  te::Tensor weight = te::Placeholder("weight", {C, 1, R, S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {C});
  auto eps = EpilogueOperands(w);
  auto wpack_of = te::TransformLayoutOf(weight, "OIHW", StrCat("OIHW", b, "o"), "wpack");
  if (!wpack_of.ok()) return wpack_of.status();
  te::Tensor wpack = te::Placeholder("weight_packed", {Cb, 1, R, S, b});
  te::Tensor prow = te::Compute("prow5", {N, Cb, PH, PW, b}, [&](const std::vector<Var>& i) {
    return PaddedLoad(w, i[2], i[3], [&](const Expr& hc, const Expr& xc) {
      return data({i[0], i[1], hc, xc, i[4]});
    });
  });
  IterRange ry = te::ReduceAxis(R, "ry"), rx = te::ReduceAxis(S, "rx");
  te::Tensor conv = te::Compute("conv", {N, Cb, OH, OW, b}, [&](const std::vector<Var>& i) {
    Expr h = i[2] * IntImm(st[0]) + ry.var * IntImm(dil[0]);
    Expr x = i[3] * IntImm(st[1]) + rx.var * IntImm(dil[1]);
    return te::Sum(prow({i[0], i[1], h, x, i[4]}) * wpack({i[1], IntImm(0), ry.var, rx.var, i[4]}),
                   {ry, rx});
  });
  // The output in the same blocks, or (no out_block) as NCHW.
  te::Tensor out = ChannelTiledOutput(
      w, b, bias, eps,
      [&](const Var& n, const Expr& cb, const Expr& v, const Var& oh, const Var& ow) {
        return conv({n, cb, oh, ow, v});
      });
  Built bt;
  bt.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *bt.schedule;
  auto [cb, km, v] = SplitChannelTiles(s, out, w, b);
  bt.slp_vectorize =
      ScheduleBlockedDepthwise(s, out, cb, v, prow, conv, cfg.at("dw_ow"), cfg.at("parallel") != 0,
                               DepthwiseSplitsRows(w), w.IntOr("out_block", 0) > 0, true);
  bt.SetArgs({data, wpack, bias}, eps, out);
  bt.packs.push_back({1, weight, *wpack_of});
  return bt;
}

}  // namespace

bool ScheduleBlockedDepthwise(te::Schedule& s, const te::Tensor& out, te::IterVar cb, te::IterVar v,
                              const te::Tensor& prow, const te::Tensor& conv, int64_t dw_ow,
                              bool parallel, bool split_rows, bool blocked_out, bool unroll_taps) {
  te::IterVar n = s.Axis(out, 0), oh = s.Axis(out, 2);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), dw_ow);
  // In parallel, the threads share out the output rows (every channel block
  // of each) where split_rows, else the channel blocks; the padded input
  // rows are copied inside the shared-out loop.
  const bool rows = parallel && split_rows;
  const te::IterVar shared = rows ? oh : cb, inner = rows ? cb : oh;
  s.Reorder(out, {n, shared, inner, owo, owi, v});
  if (blocked_out) {
    s.Vectorize(out, v);
  } else {
    // NCHW: the tile stays in registers; SLP makes each channel's pixel
    // stores a vector.
    s.Unroll(out, v);
  }
  s.Unroll(out, owi);
  if (parallel) s.Parallel(out, shared);
  s.ComputeAt(prow, out, inner);
  s.Vectorize(prow, s.Axis(prow, 4));
  s.ComputeAt(conv, out, owo);
  te::IterVar cy = s.ReduceAxisOf(conv, 0), cx = s.ReduceAxisOf(conv, 1);
  s.Reorder(conv, {s.Axis(conv, 0), s.Axis(conv, 1), s.Axis(conv, 2), cy, cx, s.Axis(conv, 3),
                   s.Axis(conv, 4)});
  s.Vectorize(conv, s.Axis(conv, 4));
  s.Unroll(conv, s.Axis(conv, 3));
  if (unroll_taps) {
    s.Unroll(conv, cx);
    s.Unroll(conv, cy);
  }
  return !blocked_out;
}

absl::StatusOr<Built> BuildDepthwise(const Workload& w, const Target& t, const Config& cfg) {
  if (w.IntOr("in_block", 0) > 0) return BuildDepthwiseBlocked(w, cfg);
  const int lanes = t.NativeVectorLanes();
  const int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W");
  const int64_t R = w.Int("R"), S = w.Int("S"), OH = w.Int("OH"), OW = w.Int("OW");
  const auto& st = w.Ints("stride");
  const auto& dil = w.Ints("dilation");
  const int64_t sw = st[1], PH = PaddedExtent(w).first, PWs = PhaseColumns(w);
  te::Tensor data = te::Placeholder("data", {N, C, H, W});
  te::Tensor weight = te::Placeholder("weight", {C, 1, R, S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {C});
  auto eps = EpilogueOperands(w);
  te::Tensor prow = te::Compute("prow", {N, C, PH, sw, PWs}, [&](const std::vector<Var>& i) {
    return PaddedLoad(w, i[2], i[4] * IntImm(sw) + i[3], [&](const Expr& hc, const Expr& xc) {
      return data({i[0], i[1], hc, xc});
    });
  });
  IterRange ry = te::ReduceAxis(R, "ry"), rx = te::ReduceAxis(S, "rx");
  te::Tensor conv = te::Compute("conv", {N, C, OH, OW}, [&](const std::vector<Var>& i) {
    Expr h = i[2] * IntImm(st[0]) + ry.var * IntImm(dil[0]);
    Expr sx = rx.var * IntImm(dil[1]);
    Expr in = prow({i[0], i[1], h, FloorMod(sx, IntImm(sw)), i[3] + FloorDiv(sx, IntImm(sw))});
    return te::Sum(in * weight({i[1], IntImm(0), ry.var, rx.var}), {ry, rx});
  });
  te::Tensor out = ConvOutput(w, conv, bias, eps);
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  te::IterVar n = s.Axis(out, 0), c = s.Axis(out, 1), oh = s.Axis(out, 2);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), cfg.at("dw_ow"));
  s.Reorder(out, {n, c, oh, owo, owi});
  s.Vectorize(out, owi);
  // Channels in parallel (a batch stays serial outside: a fused loop would
  // hide the channel from bound inference).
  if (cfg.at("parallel")) s.Parallel(out, c);
  s.ComputeAt(prow, out, c);
  if (sw > 1) {
    // Each phase's columns as vectors of stride-sw reads (a wide load and a
    // shuffle each in code generation).
    s.Vectorize(prow, s.Split(prow, s.Axis(prow, 4), lanes).second);
  }
  s.ComputeAt(conv, out, owo);
  te::IterVar cy = s.ReduceAxisOf(conv, 0), cx = s.ReduceAxisOf(conv, 1);
  s.Reorder(conv, {s.Axis(conv, 0), s.Axis(conv, 1), s.Axis(conv, 2), cy, cx, s.Axis(conv, 3)});
  s.Vectorize(conv, s.Axis(conv, 3));
  s.Unroll(conv, cx);
  s.Unroll(conv, cy);
  b.SetArgs({data, weight, bias}, eps, out);
  return b;
}

}  // namespace kiln::compiler::ops
