// The generic 2-D convolution of 8-bit integers with integer dot-product
// instructions: ONNX ConvInteger and QLinearConv with constant weights, and
// the Conv of a QDQ graph's dequantized values (compiler/frontend/
// onnx_linalg_ops.cc: op "conv", zp=2, the weights already shifted into
// int8, one group, no dilation, no bias). out[n][k][oh][ow] = sum_{c,r,s}
// (x[n][c][ih][iw] - xz) * w[k][c][r][s], exactly, in int32.
//
// The input is packed per call (stage xpack, in parallel over channel
// groups): 4 channels per int32 (byte j = channel 4c4 + j; the padding and
// the channels past C hold xz, whose products the correction removes; top
// bits flipped for int8 x: x + 128 as uint8, xz alike), zero-padded, and
// split by stride phase: phase (a, b) holds padded pixels (y*sh + a,
// x*sw + b) as one flat row-major image of width PW2 = ceil(PW / sw) (only
// the phases a tap reads: a < min(sh, R), b < min(sw, S)). Output
// pixel (oh, ow) is then p = oh * PW2 + ow in every phase, and tap (r, s)
// reads phase (r % sh, s % sw) at p + (r / sh) * PW2 + s / sw: contiguous in
// p for any stride, so the output's pixels are computed PW2 to a row (the
// PW2 - OW columns past the edge are computed and dropped) in whole vectors:
//
//   D[n][k][p] = sum_{c4,r,s} dot4(xpack[n][c4][phase(r,s)][p + off(r,s)],
//                                  wpack[(c4*R + r)*S + s][k])
//   out        = epilogue(D[n][k][oh*PW2 + ow] - xz' * wsum[k])
//
// (D is the accumulators' tiles; where PW2 = OW, a 1 x 1 column kernel at
// unit stride, the epilogue reads them directly.)
//
// dot4 as in matmul_int8.cc: vpdpbusd where the target has VNNI, the
// activations the unsigned operand (a vector of pixels), one output
// channel's 4 weight bytes broadcast. Without VNNI the input and weights
// are packed as pairs of 16-bit halves (dot2, pmaddwd), two to a word. The weights are packed once
// (Built::packs) as [C4 * R * S + 1][K] int32, the last row each channel's
// weight sum. Schedule: per tile of tile_k channels and block of output
// rows (all of them where D's scratch stays under 768 KiB), D over the
// block's pixels in register tiles of tile_k x tile_p (vectorized)
// accumulators over the (c4, r, s) loops, then the block's output rows with
// the epilogue.
#include <algorithm>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

struct Dims : GenericConvDims {
  int64_t C4;   // groups of 4 input channels
  int64_t PW2;  // the width of a phase image
};

Dims DimsOf(const Workload& w) {
  Dims d{GenericConvDimsOf(w), 0, 0};
  d.C4 = (d.C + 3) / 4;
  const int64_t PW = (d.OW - 1) * d.sw + d.S;
  d.PW2 = (PW + d.sw - 1) / d.sw;
  return d;
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  const int64_t L = t.NativeVectorLanes(), pixels = d.OH * d.PW2;
  std::vector<Knob> k;
  k.push_back({"tile_k", UpTo({1, 2, 4, 6, 8, 12, 16}, d.K)});
  k.push_back({"tile_p", {L}});
  for (int64_t v = 2; v <= 4 && (v - 1) * L < pixels; ++v) k.back().choices.push_back(v * L);
  k.push_back({"unroll_s", d.S > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}});
  k.push_back({"parallel", {0}});
  if (d.N * d.K > 1) k.back().choices.push_back(1);
  return k;
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  const Dims d = DimsOf(w);
  if (c.at("parallel") && d.N * ((d.K + c.at("tile_k") - 1) / c.at("tile_k")) < 2) {
    return absl::InvalidArgumentError(
        "conv int8: parallel=1 but tile_k leaves a single channel tile");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  auto k = Knobs(w, t);
  const int64_t lanes = t.NativeVectorLanes();
  Config c;
  c["tile_p"] = Pick(k[1].choices, 2 * lanes);
  // About 24 accumulators (AVX-512's 32 registers; 12 of 16).
  c["tile_k"] =
      Pick(k[0].choices, (t.NumVectorRegisters() >= 32 ? 24 : 12) / (c["tile_p"] / lanes));
  // Few channel tiles, the last one partial: equal tiles that divide K
  // instead, so that threads sharing them get the same work (ResNet-50's
  // 256->64 56x56 layer at 2 threads: 6 tiles of 12, 36 channels against
  // 28, 90 us; 8 tiles of 8, 78 us; 131 and 138 us at one thread).
  const int64_t tk = c["tile_k"];
  if (d.K % tk != 0 && (d.K + tk - 1) / tk < 8) {
    for (int64_t v : k[0].choices) {
      if (v < tk && v >= tk / 2 && d.K % v == 0) c["tile_k"] = v;
    }
  }
  c["unroll_s"] = d.S > 1 && d.S <= 3 ? 1 : 0;
  c["parallel"] = 0;
  if (k[3].choices.size() > 1 && d.K * d.OH * d.OW * d.C * d.R * d.S >= (1 << 18)) {
    c["parallel"] = 1;
    if (!Check(w, t, c).ok()) c["parallel"] = 0;
  }
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType i32 = DataType::Int32();
  const bool signed_x = sig->inputs[0].dtype == DType::kInt8;
  te::Tensor X = Int8InputPlaceholder(w);
  te::Tensor Wt = TypedPlaceholder(w, 1, "W");
  te::Tensor XZ = TypedPlaceholder(w, 2, "x_zero_point");
  auto eps = EpilogueOperands(w);
  const Expr xz = XZ(std::vector<Expr>(XZ->shape.size(), IntImm(0)));
  const int64_t tk = c.at("tile_k"), tp = c.at("tile_p");
  // Pixels computed (whole tiles), and the phase images' rows they read.
  const int64_t pixels = (d.OH * d.PW2 + tp - 1) / tp * tp;
  const int64_t reach = (d.R - 1) / d.sh * d.PW2 + (d.S - 1) / d.sw;
  const int64_t flat = (pixels + reach + d.PW2 - 1) / d.PW2 * d.PW2;
  // Packed weights: row (c4 * R + r) * S + s, the last row the sums.
  // Without VNNI (P = 2 pairs of 16-bit halves per word, dot2: pmaddwd)
  // row * 2 + p holds channels 4 c4 + 2p and + 1, and the input is packed
  // as such pairs too, so that the loop multiplies them as they are (dot4
  // as widening multiplies and shuffles ran MobileNetV2's 24-channel 1x1
  // projections at 8 GMAC/s on a Zen 3 EPYC).
  const int64_t P = PairsOfHalves(t) ? 2 : 1;
  const int64_t rows = d.C4 * d.R * d.S;
  te::Tensor wsum = Int8WeightSums(Wt);
  te::Tensor Wp_of = te::Compute(
      "wpack", {rows * P + 1, d.K},
      [&](const std::vector<Var>& i) {
        Expr row = FloorDiv(Min(i[0], IntImm(rows * P - 1)), IntImm(P));
        Expr c4 = FloorDiv(row, IntImm(d.R * d.S));
        Expr r = FloorMod(FloorDiv(row, IntImm(d.S)), IntImm(d.R)), s = FloorMod(row, IntImm(d.S));
        auto weight = [&](Expr ch) {
          return Select(ch < IntImm(d.C), Wt({i[1], Min(ch, IntImm(d.C - 1)), r, s}),
                        Cast(Wt.buffer()->dtype, IntImm(0)));
        };
        Expr packed;
        if (P == 1) {
          packed = PackBytes4([&](int j) { return weight(c4 * IntImm(4) + IntImm(j)); });
        } else {
          Expr ch = c4 * IntImm(4) + FloorMod(i[0], IntImm(P)) * IntImm(2);
          packed = PackHalves(Cast(i32, weight(ch)), Cast(i32, weight(ch + IntImm(1))));
        }
        return Select(i[0] < IntImm(rows * P), packed, wsum({i[1]}));
      },
      i32);
  te::Tensor Wp = te::Placeholder("W_packed", Wp_of->shape, i32);
  // The input: 4 channels per int32, padded with xz, by stride phase.
  // The phases the taps read: min(stride, kernel) of each (a 1x1 stride-2
  // layer reads one of four).
  const int64_t pr = std::min(d.sh, d.R), pc = std::min(d.sw, d.S);
  // Stored as rows of PW2 (so that the pack's conditions compare one loop
  // variable with constants, which PartitionSelects splits off: the
  // interior rows copy without selects or clamps, and vectorize) and read
  // as the flat row-major image, row 0 with the flat index.
  te::Tensor xp = te::Compute(
      "xpack", {d.N, d.C4 * P, pr * pc, flat / d.PW2, d.PW2},
      [&](const std::vector<Var>& i) {
        Expr a = FloorDiv(i[2], IntImm(pc)), b = FloorMod(i[2], IntImm(pc));
        Expr ih = i[3] * IntImm(d.sh) + a - IntImm(d.ph);
        Expr iw = i[4] * IntImm(d.sw) + b - IntImm(d.pw);
        if (P == 1) return Int8InputWord(w, X, xz, i[0], i[1], ih, iw);
        return PairOfBytes(Int8InputWord(w, X, xz, i[0], FloorDiv(i[1], IntImm(P)), ih, iw),
                           FloorMod(i[1], IntImm(P)));
      },
      i32);
  const ir::Intrinsic dot = P == 1 ? Dot4Intrinsic(t) : ir::Intrinsic::kDot2;
  IterRange rc = te::ReduceAxis(d.C4, "rc"), rr = te::ReduceAxis(d.R, "rr"),
            rs = te::ReduceAxis(d.S, "rs"), rp = te::ReduceAxis(P, "rp");
  te::Tensor acc = te::Compute(
      "acc", {d.N, d.K, pixels},
      [&](const std::vector<Var>& i) {
        Expr phase = FloorMod(rr.var, IntImm(d.sh)) * IntImm(pc) + FloorMod(rs.var, IntImm(d.sw));
        Expr at =
            i[2] + FloorDiv(rr.var, IntImm(d.sh)) * IntImm(d.PW2) + FloorDiv(rs.var, IntImm(d.sw));
        Expr row = (rc.var * IntImm(d.R) + rr.var) * IntImm(d.S) + rs.var;
        Expr word = xp({i[0], rc.var * IntImm(P) + rp.var, phase, IntImm(0), at});
        return te::Sum(Call(i32, dot, {word, Wp({row * IntImm(P) + rp.var, i[1]})}),
                       {rc, rr, rs, rp});
      },
      i32);
  const Expr z = UnsignedZeroPoint(XZ, signed_x);
  Built b;
  const int64_t L = t.NativeVectorLanes();
  // The output from sums `from` (of rows of `width` pixels), corrected for
  // the zero point and through the epilogue; the schedule over it.
  auto output = [&](const te::Tensor& from, int64_t width) {
    te::Tensor out = te::Compute(
        "out", sig->output.shape,
        [&](const std::vector<Var>& i) {
          Expr y =
              from({i[0], i[1], i[2] * IntImm(width) + i[3]}) - z * Wp({IntImm(rows * P), i[1]});
          return ApplyEpilogue(w, y, i, eps);
        },
        IrType(sig->output.dtype));
    b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
    if (c.at("parallel") && d.C4 > 1) b.schedule->Parallel(xp, b.schedule->Axis(xp, 1));
    return out;
  };
  if (d.PW2 == d.OW) {
    // D's rows are the output's (no columns past the edge: 1 x S=1 kernels
    // at unit column stride): the epilogue runs on each tile's accumulators
    // as they leave the registers, without the round trip through D.
    te::Tensor out = output(acc, d.OW);
    te::Schedule& s = *b.schedule;
    auto [ko, ki] = s.Split(out, s.Axis(out, 1), tk);
    auto [po, pi] = s.Split(out, s.Fuse(out, s.Axis(out, 2), s.Axis(out, 3)), tp);
    auto [pv, pl] = s.Split(out, pi, std::min(L, tp));
    s.Reorder(out, {ko, po, ki, pv, pl});
    s.Vectorize(out, pl);
    s.Unroll(out, pv);
    if (tk > 1) s.Unroll(out, ki);
    if (c.at("parallel")) s.Parallel(out, d.N > 1 ? s.Axis(out, 0) : ko);
    s.ComputeAt(acc, out, po);
  } else {
    // D: acc tile by tile (each tile's accumulators registers, stored once),
    // then the output's rows, dropping D's PW2 - OW columns past the edge.
    te::Tensor D = te::Compute(
        "D", {d.N, d.K, pixels},
        [&](const std::vector<Var>& i) {
          return acc({i[0], i[1], i[2]});
        },
        i32);
    te::Tensor out = output(D, d.PW2);
    te::Schedule& s = *b.schedule;
    // Output rows in blocks whose D (tile_k channels x the block's pixels)
    // stays under 768 KiB, so the scratch is bounded whatever the image. All
    // rows at once where they fit: blocks whose pixels the tiles do not
    // divide ran ResNet-50 15% slower.
    const int64_t rb = std::clamp<int64_t>((int64_t{3} << 16) / (tk * d.PW2), 1, d.OH);
    auto [ko, ki] = s.Split(out, s.Axis(out, 1), tk);
    auto [oho, ohi] = s.Split(out, s.Axis(out, 2), rb);
    s.Reorder(out, {ko, oho, ki, ohi});
    // The epilogue in native vectors (a 56-pixel row as one 56-lane vector
    // was legalized by LLVM into scalar inserts).
    te::IterVar ow = s.Axis(out, 3);
    if (d.OW > L) ow = s.Split(out, ow, L).second;
    s.Vectorize(out, ow);
    if (c.at("parallel")) s.Parallel(out, d.N > 1 ? s.Axis(out, 0) : ko);
    s.ComputeAt(D, out, oho);
    // D by pixel tiles; each tile's accumulators over the reduction inside.
    auto [po, pi] = s.Split(D, s.Axis(D, 2), tp);
    s.Reorder(D, {po, s.Axis(D, 1), pi});
    s.Vectorize(D, pi);
    s.ComputeAt(acc, D, po);
  }
  te::Schedule& s = *b.schedule;
  te::IterVar ak = s.Axis(acc, 1), ap = s.Axis(acc, 2);
  te::IterVar c4 = s.ReduceAxisOf(acc, 0), r = s.ReduceAxisOf(acc, 1), sx = s.ReduceAxisOf(acc, 2);
  if (P > 1) {
    te::IterVar p = s.ReduceAxisOf(acc, 3);
    s.Reorder(acc, {c4, r, sx, p, ak, ap});
    s.Unroll(acc, p);
  } else {
    s.Reorder(acc, {c4, r, sx, ak, ap});
  }
  s.Vectorize(acc, ap);
  if (tk > 1) s.Unroll(acc, ak);
  if (c.at("unroll_s")) s.Unroll(acc, sx);
  b.SetArgs({X, Wp, XZ}, eps, b.schedule->outputs()[0]);
  b.packs.push_back({1, Wt, Wp_of});
  return b;
}

}  // namespace

te::Tensor Int8WeightSums(const te::Tensor& w) {
  const DataType i32 = DataType::Int32();
  IterRange sc = te::ReduceAxis(w->shape[1], "sc"), sr = te::ReduceAxis(w->shape[2], "sr"),
            ss = te::ReduceAxis(w->shape[3], "ss");
  return te::Compute(
      "wsum", {w->shape[0]},
      [&](const std::vector<Var>& i) {
        return te::Sum(Cast(i32, w({i[0], sc.var, sr.var, ss.var})), {sc, sr, ss});
      },
      i32);
}

te::Tensor Int8InputPlaceholder(const Workload& w) {
  const int64_t ib = w.IntOr("in_block", 0);
  if (ib == 0) return TypedPlaceholder(w, 0, "X");
  const GenericConvDims d = GenericConvDimsOf(w);
  return te::Placeholder("X", {d.N, d.C / ib, d.H, d.W, ib / 4}, DataType::Int32());
}

Expr Int8InputWord(const Workload& w, const te::Tensor& x, const Expr& xz, Expr n, Expr c4, Expr ih,
                   Expr iw) {
  const GenericConvDims d = GenericConvDimsOf(w);
  const int64_t ib = w.IntOr("in_block", 0);
  Expr inside = ih >= IntImm(0) && ih < IntImm(d.H) && iw >= IntImm(0) && iw < IntImm(d.W);
  Expr h = Min(Max(ih, IntImm(0)), IntImm(d.H - 1)), col = Min(Max(iw, IntImm(0)), IntImm(d.W - 1));
  Expr v;
  if (ib > 0) {
    // A word of the blocked input's view: C is a multiple of the block.
    const int64_t words = ib / 4;
    v = Select(inside, x({n, FloorDiv(c4, IntImm(words)), h, col, FloorMod(c4, IntImm(words))}),
               PackBytes4([&](int) { return xz; }));
  } else {
    v = PackBytes4([&](int j) {
      Expr ch = c4 * IntImm(4) + IntImm(j);
      Expr b = x({n, Min(ch, IntImm(d.C - 1)), h, col});
      return Select(inside && ch < IntImm(d.C), b, xz);
    });
  }
  auto sig = w.Signature();
  return sig.ok() && sig->inputs[0].dtype == DType::kInt8 ? FlipBytes(v) : v;
}

bool Int8Conv(const Workload& w) {
  if (w.op != Op::kConv || w.IntOr("zp", 0) != 2 || w.IntOr("transposed", 0) != 0 ||
      w.IntOr("group", 1) != 1 || w.IntOr("has_bias", 0) != 0 || !w.prologue.empty() ||
      !w.ints.count("dilations") || w.Ints("dilations") != std::vector<int64_t>{1, 1}) {
    return false;
  }
  auto sig = w.Signature();
  if (!sig.ok() || sig->inputs.size() < 3) return false;
  const auto& x = sig->inputs[0];
  // In channel blocks ([N, C / 16, H, W, 16], in_block) only when writing
  // them (conv_int8_blocked.cc).
  const int64_t ib = w.IntOr("in_block", 0);
  return (x.dtype == DType::kUInt8 || x.dtype == DType::kInt8) &&
         x.shape.size() == (ib > 0 ? 5u : 4u) && sig->inputs[1].dtype == DType::kInt8 &&
         sig->inputs[2].NumElements() == 1;
}

const OpTemplate* Int8ConvTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
