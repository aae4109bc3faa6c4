// The depthwise 2-D convolution of 8-bit integers: the Conv of a QDQ graph
// whose groups are its channels (compiler/frontend/onnx_linalg_ops.cc: op
// "conv", zp=2, group = C = K, the weights already shifted into int8, no
// dilation, no bias). out[n][c][oh][ow] = sum_{r,s} (x[n][c][ih][iw] - xz) *
// w[c][0][r][s], exactly, in int32.
//
// A depthwise layer does R*S multiply-adds per output value, too few for
// the 4-byte dot products of conv_int8.cc, and it is bound by memory. It
// computes in float32 lanes, exactly: every product is an integer of at most
// 255 * 128 in magnitude, and a sum of fewer than 2^24 / (255 * 128) = 513
// of them is an integer below 2^24, which float32 holds exactly (Check
// refuses larger kernels).
//
//   xpad[n][c][y][x] = float(x[n][c][y - ph][x - pw] - xz)   (0 in the padding)
//   out[n][c][oh][ow] = epilogue(sum_{r,s} xpad[n][c][oh*sh + r][ow*sw + s]
//                                          * wf[c][r*S + s])
//
// wf: the weights as float32, packed once (Built::packs). Schedule: per
// channel (in parallel), its padded plane (rows PartitionSelects splits into
// border and interior, converted in vectors along the row; at stride 2 along
// the row, each row stored as its even then its odd columns), then blocks
// of output rows, each a register tile of vectors along ow accumulated over
// the R*S taps (contiguous reads, also at stride 2), and the epilogue.
#include <algorithm>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

using Dims = GenericConvDims;
Dims DimsOf(const Workload& w) { return GenericConvDimsOf(w); }

// In channel blocks (in_block; the output rows shared out in parallel from
// kDepthwiseSplitRows rows, as the float32 template's).
bool Blocked(const Workload& w) { return w.IntOr("in_block", 0) > 0; }

std::vector<Knob> Knobs(const Workload& w, const Target&) {
  const Dims d = DimsOf(w);
  std::vector<Knob> k;
  k.push_back({"unroll_taps", {0, 1}});
  k.push_back({"parallel", {0}});
  if (d.N * d.C > 1) k.back().choices.push_back(1);
  if (Blocked(w)) {
    // Blocked: output pixels per register tile (a partial last tile runs
    // past the row, into the padding of the packed rows).
    k.push_back({"dw_ow", {}});
    for (int64_t n = 1; n <= std::min<int64_t>(d.OW, 14); ++n) {
      if (d.OW % n == 0 || n == 4 || n == 8) k.back().choices.push_back(n);
    }
  }
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config&) {
  const Dims d = DimsOf(w);
  if (d.R * d.S >= 513) {
    return absl::InvalidArgumentError(
        StrCat("depthwise conv int8: a ", d.R, "x", d.S,
               " kernel's sums may exceed float32's exact integers (at most 512 taps)"));
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  Config c;
  c["unroll_taps"] = d.R * d.S <= 25 ? 1 : 0;
  c["parallel"] = Knobs(w, t)[1].choices.size() > 1 && d.C * d.OH * d.OW >= 16384 ? 1 : 0;
  if (Blocked(w)) {
    // The widest tile up to 8 pixels that divides the row, else 8, as the
    // fp32 template measured, if its accumulators (a block's 16 lanes a
    // pixel) leave 3 registers: with AVX2's 16 (8 lanes) up to 6 pixels,
    // and at least 8 accumulators for the FMAs' latency, else 4 pixels
    // (MobileNetV2's 112-pixel rows at 8 spilled: 0.44 -> 0.32 ms at 4 on
    // a Zen 3 EPYC).
    const auto choices = Knobs(w, t)[2].choices;
    const int64_t per_pixel = std::max<int64_t>(1, 16 / t.NativeVectorLanes());
    const int64_t most = std::min<int64_t>(8, (t.NumVectorRegisters() - 3) / per_pixel);
    c["dw_ow"] = Pick(choices, most >= 8 ? 8 : 4);
    for (int64_t n : choices) {
      if (n <= most && d.OW % n == 0 && n * per_pixel >= 8) c["dw_ow"] = n;
    }
  }
  return c;
}

// The template's arguments: x, the weights, x's zero point (also as a
// float32 expression) and the epilogue operands.
struct Operands {
  te::Tensor X, Wt, XZ;
  std::vector<te::Tensor> eps;
  Expr xz;
};
Operands OperandsOf(const Workload& w) {
  Operands o{TypedPlaceholder(w, 0, "X"), TypedPlaceholder(w, 1, "W"),
             TypedPlaceholder(w, 2, "x_zero_point"), EpilogueOperands(w), Expr()};
  o.xz = Cast(DataType::Float32(), o.XZ(std::vector<Expr>(o.XZ->shape.size(), IntImm(0))));
  return o;
}

// Whether the epilogue starts by converting the sums to float32 (a QDQ
// graph's): it then takes the whole-number float sums as they are (the
// float -> int32 conversion saturates, which x86 does one lane at a time).
bool StartsWithFloat(const Workload& w) {
  return !w.epilogue.empty() && w.epilogue[0].kind == EpilogueKind::kUnary &&
         w.epilogue[0].fn == ElementFn::kCast && w.epilogue[0].params.size() == 1 &&
         static_cast<DType>(w.epilogue[0].params[0]) == DType::kFloat32;
}

// In channel blocks: vectors along the block's 16 channels, so that narrow
// rows waste no lanes (7-pixel rows in 16-lane vectors) and strides read
// whole vectors. Per output row, the R input rows it reads converted once
// to float32, x - xz, 0 in the padding, as wide as the tiles read
// (prow[n][cb][h][x][v]); a tile of dw_ow pixels accumulates R x S
// multiply-adds of whole-block vectors with the block's float weights
// (wpack[cb][r*S + s][v]), then the epilogue, written in the same blocks
// (Int8DepthwiseConv takes in_block only with out_block).
absl::StatusOr<Built> BuildBlocked(const Workload& w, const Config& c) {
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType f32 = DataType::Float32();
  const int64_t b = w.IntOr("in_block", 0), Cb = d.C / b, tw = c.at("dw_ow");
  const auto [X, Wt, XZ, eps, xz] = OperandsOf(w);
  te::Tensor wf_of = te::Compute(
      "wpack", {Cb, d.R * d.S, b},
      [&](const std::vector<Var>& i) {
        return Cast(f32, Wt({i[0] * IntImm(b) + i[2], IntImm(0), FloorDiv(i[1], IntImm(d.S)),
                             FloorMod(i[1], IntImm(d.S))}));
      },
      f32);
  te::Tensor wf = te::Placeholder("W_packed", wf_of->shape, f32);
  const int64_t PH = (d.OH - 1) * d.sh + d.R;
  const int64_t PW = ((d.OW + tw - 1) / tw * tw - 1) * d.sw + d.S;
  te::Tensor prow = te::Compute(
      "prow", {d.N, Cb, PH, PW, b},
      [&](const std::vector<Var>& i) {
        Expr ih = i[2] - IntImm(d.ph), iw = i[3] - IntImm(d.pw);
        Expr inside = ih >= IntImm(0) && ih < IntImm(d.H) && iw >= IntImm(0) && iw < IntImm(d.W);
        Expr x = X({i[0], i[1], Min(Max(ih, IntImm(0)), IntImm(d.H - 1)),
                    Min(Max(iw, IntImm(0)), IntImm(d.W - 1)), i[4]});
        return Select(inside, Cast(f32, x) - xz, FloatImm(0.0, f32));
      },
      f32);
  IterRange rr = te::ReduceAxis(d.R, "rr"), rs = te::ReduceAxis(d.S, "rs");
  te::Tensor conv = te::Compute(
      "conv", {d.N, Cb, d.OH, d.OW, b},
      [&](const std::vector<Var>& i) {
        Expr tap =
            prow({i[0], i[1], i[2] * IntImm(d.sh) + rr.var, i[3] * IntImm(d.sw) + rs.var, i[4]});
        return te::Sum(tap * wf({i[1], rr.var * IntImm(d.S) + rs.var, i[4]}), {rr, rs});
      },
      f32);
  const bool to_float = StartsWithFloat(w);
  te::Tensor out = te::Compute(
      "out", sig->output.shape,
      [&](const std::vector<Var>& i) {
        Expr sum = conv({i[0], i[1], i[2], i[3], i[4]});
        return ApplyEpilogue(w, to_float ? sum : Cast(DataType::Int32(), sum), i, eps);
      },
      IrType(sig->output.dtype));
  Built bt;
  bt.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *bt.schedule;
  ScheduleBlockedDepthwise(s, out, s.Axis(out, 1), s.Axis(out, 4), prow, conv, tw,
                           c.at("parallel") != 0, d.OH >= kDepthwiseSplitRows, true,
                           c.at("unroll_taps") != 0);
  bt.SetArgs({X, wf, XZ}, eps, out);
  bt.packs.push_back({1, Wt, wf_of});
  return bt;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  if (auto s = Check(w, t, c); !s.ok()) return s;
  if (Blocked(w)) return BuildBlocked(w, c);
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType f32 = DataType::Float32();
  const auto [X, Wt, XZ, eps, xz] = OperandsOf(w);
  te::Tensor wf_of = te::Compute(
      "wpack", {d.C, d.R * d.S},
      [&](const std::vector<Var>& i) {
        return Cast(
            f32, Wt({i[0], IntImm(0), FloorDiv(i[1], IntImm(d.S)), FloorMod(i[1], IntImm(d.S))}));
      },
      f32);
  te::Tensor wf = te::Placeholder("W_packed", wf_of->shape, f32);
  // The padded plane, rows only as wide as the output's columns read
  // (PW), and read as one flat row-major image: the accumulators run in
  // whole native vectors along ow (the tile's rows then sit in whole
  // registers: 14-lane rows at offsets of 14 were a stack array, 8x
  // slower), whose lanes past OW read on into the next row and are
  // dropped. A 14 x 14 input at stride 2 converted 495 floats per channel
  // in rows as wide as the vectors read, 225 so.
  const int64_t L = t.NativeVectorLanes(), tiles = (d.OW + L - 1) / L;
  const int64_t PW = (d.OW - 1) * d.sw + d.S;
  // Stride 2 along the row: the plane's even and odd columns as two
  // half-rows, one after the other (row q = 2y + phase), so that every tap
  // reads contiguous vectors (a strided read was two loads and a shuffle per
  // tap; the conversion reads the bytes strided once instead, and 9 taps
  // read each value 2.25 times).
  const bool phased = d.sw == 2;
  const int64_t RW = phased ? (PW + 1) / 2 : PW;  // the stored row's width
  // The last flat index the accumulators read (the last vector's lanes
  // past OW read on into the next rows and are dropped): rows to cover it.
  const int64_t last_row = (d.OH - 1) * d.sh + d.R - 1;
  const int64_t last_at = phased ? ((last_row * 2 + 1) * RW + (tiles * L - 1) + (d.S - 1) / 2)
                                 : (last_row * RW + (tiles * L - 1) * d.sw + d.S - 1);
  const int64_t PH = last_at / RW + 1;
  te::Tensor xpad = te::Compute(
      "xpad", {d.N, d.C, PH, RW},
      [&](const std::vector<Var>& i) {
        Expr row = phased ? FloorDiv(i[2], IntImm(2)) : Expr(i[2]);
        Expr col = phased ? i[3] * IntImm(2) + FloorMod(i[2], IntImm(2)) : Expr(i[3]);
        Expr ih = row - IntImm(d.ph), iw = col - IntImm(d.pw);
        Expr inside = ih >= IntImm(0) && ih < IntImm(d.H) && iw >= IntImm(0) && iw < IntImm(d.W);
        Expr x = X({i[0], i[1], Min(Max(ih, IntImm(0)), IntImm(d.H - 1)),
                    Min(Max(iw, IntImm(0)), IntImm(d.W - 1))});
        return Select(inside, Cast(f32, x) - xz, FloatImm(0.0, f32));
      },
      f32);
  IterRange rr = te::ReduceAxis(d.R, "rr"), rs = te::ReduceAxis(d.S, "rs");
  te::Tensor acc = te::Compute(
      "acc", {d.N, d.C, d.OH, tiles * L},
      [&](const std::vector<Var>& i) {
        // (at / RW, at % RW): the flattened index folds back into `at`.
        Expr y = i[2] * IntImm(d.sh) + rr.var;
        Expr at = phased ? (y * IntImm(2) + FloorMod(rs.var, IntImm(2))) * IntImm(RW) + i[3] +
                               FloorDiv(rs.var, IntImm(2))
                         : y * IntImm(RW) + i[3] * IntImm(d.sw) + rs.var;
        Expr tap = xpad({i[0], i[1], FloorDiv(at, IntImm(RW)), FloorMod(at, IntImm(RW))});
        return te::Sum(tap * wf({i[1], rr.var * IntImm(d.S) + rs.var}), {rr, rs});
      },
      f32);
  const bool to_float = StartsWithFloat(w);
  te::Tensor out = te::Compute(
      "out", sig->output.shape,
      [&](const std::vector<Var>& i) {
        Expr sum = acc({i[0], i[1], i[2], i[3]});
        return ApplyEpilogue(w, to_float ? sum : Cast(DataType::Int32(), sum), i, eps);
      },
      IrType(sig->output.dtype));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  // Output rows in blocks of about 8 vectors: their accumulators are
  // independent chains of R*S multiply-adds each (one vector per step,
  // 9 dependent FMAs and the epilogue behind them, ran at the latency of the
  // chain: MobileNetV2's depthwise layers 0.91 ms of 2.07).
  int64_t rb = 1;
  for (int64_t r = 1; r <= std::max<int64_t>(1, 8 / tiles) && r <= d.OH; ++r) {
    if (d.OH % r == 0) rb = r;
  }
  te::IterVar nc = s.Fuse(out, s.Axis(out, 0), s.Axis(out, 1));
  auto [oho, ohi] = s.Split(out, s.Axis(out, 2), rb);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), L);
  s.Vectorize(out, owi);
  if (c.at("parallel")) s.Parallel(out, nc);
  s.ComputeAt(xpad, out, nc);
  // The plane converted a vector of bytes at a time (the interior rows,
  // once PartitionSelects has split off the padding; one byte at a time,
  // MobileNetV2's 56x56 depthwise layers took 0.095 ms against 0.075, its
  // 56 -> 28 stride-2 one 0.066 against 0.045).
  if (phased) s.Unroll(xpad, s.Split(xpad, s.Axis(xpad, 2), 2).second);
  s.Vectorize(xpad, s.Split(xpad, s.Axis(xpad, 3), L).second);
  s.ComputeAt(acc, out, oho);
  auto [a_owo, a_owi] = s.Split(acc, s.Axis(acc, 3), L);
  te::IterVar a_oh = s.Axis(acc, 2);
  te::IterVar a_r = s.ReduceAxisOf(acc, 0), a_s = s.ReduceAxisOf(acc, 1);
  s.Reorder(acc, {a_r, a_s, a_oh, a_owo, a_owi});
  s.Vectorize(acc, a_owi);
  s.Unroll(acc, a_oh);
  s.Unroll(acc, a_owo);
  if (c.at("unroll_taps")) {
    s.Unroll(acc, a_r);
    s.Unroll(acc, a_s);
  }
  // The epilogue reads the tile at constant offsets: its accumulators stay
  // in registers (at loop indices, a stack array: 2x slower).
  s.Unroll(out, ohi);
  s.Unroll(out, owo);
  b.SetArgs({X, wf, XZ}, eps, out);
  b.packs.push_back({1, Wt, wf_of});
  return b;
}

}  // namespace

bool Int8DepthwiseConv(const Workload& w) {
  if (w.op != Op::kConv || w.IntOr("zp", 0) != 2 || w.IntOr("transposed", 0) != 0 ||
      w.IntOr("has_bias", 0) != 0 || !w.prologue.empty() || !w.ints.count("dilations") ||
      w.Ints("dilations") != std::vector<int64_t>{1, 1}) {
    return false;
  }
  auto sig = w.Signature();
  if (!sig.ok() || sig->inputs.size() < 3) return false;
  const auto& x = sig->inputs[0];
  const auto& wt = sig->inputs[1];
  // In blocks (in_block): [N, C / 16, H, W, 16].
  const int64_t ib = w.IntOr("in_block", 0);
  const int64_t C = ib > 0 && x.shape.size() == 5 ? x.shape[1] * x.shape[4] : x.shape[1];
  return (x.dtype == DType::kUInt8 || x.dtype == DType::kInt8) &&
         x.shape.size() == (ib > 0 ? 5u : 4u) && wt.dtype == DType::kInt8 && wt.shape.size() == 4 &&
         wt.shape[1] == 1 && w.IntOr("group", 1) == C && wt.shape[0] == C &&
         sig->inputs[2].NumElements() == 1 && w.IntOr("out_block", 0) == ib;
}

const OpTemplate* Int8DepthwiseConvTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
