// The int8 conv in channel blocks (conv_int8_blocked.cc's workloads) as AMX
// tile products (amx=1: a CPU with AMX-INT8, uint8 x with C a multiple of
// 4, one image): an implicit GEMM over an im2col of words.
//
//   im2col[p][q]  = the word (4 channels) q of output pixel p's taps: tap
//                   (r, s) = q / C4, channels 4 (q % C4) .. +3 of x at
//                   (oh sh + r - ph, ow sw + s - pw) (Int8InputWord: xz's
//                   bytes in the padding), 0 past R S C4 (a whole number of
//                   64-byte tile steps); packed per call, in parallel over
//                   pixels
//   wpack[panel][q][j] = the 4 weights of word q for output channel
//                   panel * tn + j (PackBytes4), the last row each
//                   channel's weight sum; packed at compile time
//   acc[p][k]     = sum_q dot4(im2col[p][q], wpack[k / tn][q][k % tn]):
//                   boxes of tile_m pixels x tn channels tensorized into
//                   amx_dpbusd (ops/common.h AmxTileProducts)
//   out[0][k/16][oh][ow][k%16] = epilogue(acc[oh OW + ow][k] - xz * wsum[k])
//
// The box's knobs are amx_m (pixels) and amx_n (channels, dividing K);
// parallel=2 shares out the pixel boxes (each box's im2col rows stay in
// cache over every channel panel), parallel=1 the channel panels (for few
// pixels and many channels), 0 runs pixels outside, serially.
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

struct AmxDims : GenericConvDims {
  int64_t C4, P, Q;  // words of channels; pixels; im2col words (whole tile steps)
};

AmxDims AmxDimsOf(const Workload& w) {
  AmxDims d{GenericConvDimsOf(w), 0, 0, 0};
  d.C4 = d.C / 4;
  d.P = d.OH * d.OW;
  const int64_t step_words = kAmxRowBytes / 4;
  d.Q = (d.R * d.S * d.C4 + step_words - 1) / step_words * step_words;
  return d;
}

}  // namespace

bool Int8ConvAmxFits(const Workload& w, const Target& t) {
  auto sig = w.Signature();
  if (!sig.ok() || sig->inputs[0].dtype != DType::kUInt8) return false;
  const AmxDims d = AmxDimsOf(w);
  return d.N == 1 && d.C % 4 == 0 && w.IntOr("out_block", 0) == kChannelBlock &&
         AmxFits(t, "amx-int8", d.Q * 4);
}

void AddInt8ConvAmxKnobs(std::vector<Knob>& k, const Workload& w, const Target& t) {
  const AmxDims d = AmxDimsOf(w);
  const bool fits = Int8ConvAmxFits(w, t);
  k.push_back({"amx", {0}});
  k.push_back({"amx_m", {kAmxTile}});
  k.push_back({"amx_n", {kAmxTile}});
  if (!fits) return;
  k[k.size() - 3].choices.push_back(1);
  for (int64_t m : {32, 64, 128}) {
    if (m < d.P + kAmxTile) k[k.size() - 2].choices.push_back(m);
  }
  for (int64_t n : {32, 64}) {
    if (d.K % n == 0) k.back().choices.push_back(n);
  }
}

absl::Status CheckInt8ConvAmx(const Workload& w, const Config& c) {
  if (!c.count("amx")) return absl::OkStatus();
  // One config for each distinct kernel: the other template's knobs at
  // their first values.
  if (c.at("amx") == 0 && (c.at("amx_m") != kAmxTile || c.at("amx_n") != kAmxTile)) {
    return absl::InvalidArgumentError("conv int8 blocked: amx_m and amx_n are for amx=1");
  }
  if (c.at("amx") == 1 && (c.at("kb") != kChannelBlock || c.at("reg_n") != 1 ||
                           c.at("unroll_j") != 0 || (c.count("pack") && c.at("pack") != 1))) {
    return absl::InvalidArgumentError(
        "conv int8 blocked: amx=1 takes kb=16, reg_n=1, unroll_j=0, pack=1 (they are for amx=0)");
  }
  const AmxDims d = AmxDimsOf(w);
  if (c.at("amx") == 1 && c.at("parallel") == 2 && d.P <= c.at("amx_m")) {
    return absl::InvalidArgumentError("conv int8 blocked: parallel=2 with a single pixel box");
  }
  return absl::OkStatus();
}

void DefaultInt8ConvAmx(const Workload& w, const Target& t, Config* c) {
  (*c)["amx"] = 0;
  (*c)["amx_m"] = kAmxTile;
  (*c)["amx_n"] = kAmxTile;
  const AmxDims d = AmxDimsOf(w);
  // Layers of few products per pixel stay on VNNI: one or two tile steps of
  // k (R S C < 256 bytes) or 64 output channels leave the im2col pack and
  // the tiles' stores as the cost (ResNet-50 int8 at one thread on a
  // Sapphire Rapids VM, medians of three profiles: its 1x1 64->256 layers
  // 0.68 ms on VNNI against 0.90 as tiles, 3x3 64->64 0.59 against 0.66;
  // 3x3 256->256 0.62 against 0.42, 1x1 1024->256 0.30 against 0.15).
  if (!Int8ConvAmxFits(w, t) || d.R * d.S * d.C4 < 64 || d.K < 128) return;
  (*c)["amx"] = 1;
  (*c)["kb"] = kChannelBlock;
  (*c)["reg_n"] = 1;
  (*c)["unroll_j"] = 0;
  (*c)["pack"] = 1;
  (*c)["amx_m"] = d.P >= 32 ? 32 : kAmxTile;
  (*c)["amx_n"] = d.K % 32 == 0 ? 32 : kAmxTile;
  (*c)["parallel"] = 0;
  if (d.K * d.P * d.C * d.R * d.S >= (1 << 18)) {
    (*c)["parallel"] = d.P >= 2 * (*c)["amx_m"] ? 2 : 1;
  }
}

absl::StatusOr<Built> BuildInt8ConvAmx(const Workload& w, const Target& t, const Config& c) {
  const AmxDims d = AmxDimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  if (!Int8ConvAmxFits(w, t)) {
    return absl::InvalidArgumentError(
        "conv int8 blocked: amx=1 needs AMX-INT8, uint8 x, C a multiple of 4 and one image");
  }
  const DataType i32 = DataType::Int32();
  const int64_t tm = c.at("amx_m"), tn = c.at("amx_n"), taps = d.R * d.S * d.C4;
  te::Tensor X = Int8InputPlaceholder(w);
  te::Tensor Wt = TypedPlaceholder(w, 1, "W");
  te::Tensor XZ = TypedPlaceholder(w, 2, "x_zero_point");
  auto eps = EpilogueOperands(w);
  const Expr xz = XZ(std::vector<Expr>(XZ->shape.size(), IntImm(0)));
  te::Tensor wsum = Int8WeightSums(Wt);
  te::Tensor Wp_of = te::Compute(
      "wpack", {d.K / tn, d.Q + 1, tn},
      [&](const std::vector<Var>& i) {
        Expr q = Min(i[1], IntImm(taps - 1));
        Expr tap = FloorDiv(q, IntImm(d.C4)), c4 = FloorMod(q, IntImm(d.C4));
        Expr r = FloorDiv(tap, IntImm(d.S)), s = FloorMod(tap, IntImm(d.S));
        Expr k = i[0] * IntImm(tn) + i[2];
        Expr word = PackBytes4([&](int j) { return Wt({k, c4 * IntImm(4) + IntImm(j), r, s}); });
        return Select(i[1] < IntImm(taps), word,
                      Select(i[1] < IntImm(d.Q), IntImm(0, i32), wsum({k})));
      },
      i32);
  te::Tensor Wp = te::Placeholder("W_packed", Wp_of->shape, i32);
  te::Tensor im2col = te::Compute(
      "im2col", {d.P, d.Q},
      [&](const std::vector<Var>& i) {
        Expr q = Min(i[1], IntImm(taps - 1));
        Expr tap = FloorDiv(q, IntImm(d.C4));
        Expr oh = FloorDiv(i[0], IntImm(d.OW)), ow = FloorMod(i[0], IntImm(d.OW));
        Expr ih = oh * IntImm(d.sh) + FloorDiv(tap, IntImm(d.S)) - IntImm(d.ph);
        Expr iw = ow * IntImm(d.sw) + FloorMod(tap, IntImm(d.S)) - IntImm(d.pw);
        Expr word = Int8InputWord(w, X, xz, IntImm(0), FloorMod(q, IntImm(d.C4)), ih, iw);
        return taps == d.Q ? word : Select(i[1] < IntImm(taps), word, IntImm(0, i32));
      },
      i32);
  IterRange rq = te::ReduceAxis(d.Q, "rq");
  te::Tensor acc = te::Compute(
      "acc", {d.P, d.K},
      [&](const std::vector<Var>& i) {
        Expr bv = Wp({FloorDiv(i[1], IntImm(tn)), rq.var, FloorMod(i[1], IntImm(tn))});
        return te::Sum(Call(i32, "dot4_vnni", {im2col({i[0], rq.var}), bv}), {rq});
      },
      i32);
  const Expr z = UnsignedZeroPoint(XZ, false);
  te::Tensor out = te::Compute(
      "out", sig->output.shape,
      [&](const std::vector<Var>& i) {
        Expr k = i[1] * IntImm(kChannelBlock) + i[4];
        Expr y = acc({i[2] * IntImm(d.OW) + i[3], k}) -
                 z * Wp({FloorDiv(k, IntImm(tn)), IntImm(d.Q), FloorMod(k, IntImm(tn))});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(sig->output.dtype));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  const int64_t par = c.at("parallel");
  {
    auto [qo, qi] = s.Split(im2col, s.Axis(im2col, 1), kAmxRowBytes / 4);
    s.Vectorize(im2col, qi);
    if (par) s.Parallel(im2col, s.Axis(im2col, 0));
  }
  te::IterVar p = s.Fuse(out, s.Axis(out, 2), s.Axis(out, 3));
  auto [po, pi] = s.Split(out, p, tm);
  auto [ko, ki] = s.Split(out, s.Axis(out, 1), tn / kChannelBlock);
  te::IterVar kv = s.Axis(out, 4);
  const bool channels_outer = par == 1;
  s.Reorder(out, channels_outer ? std::vector<te::IterVar>{s.Axis(out, 0), ko, po, pi, ki, kv}
                                : std::vector<te::IterVar>{s.Axis(out, 0), po, ko, pi, ki, kv});
  s.Vectorize(out, kv);
  if (par) s.Parallel(out, channels_outer ? ko : po);
  s.ComputeAt(acc, out, channels_outer ? po : ko);
  s.Tensorize(acc, s.Axis(acc, 0), "amx_dpbusd",
              AmxTileProducts("amx_dpbusd", im2col, d.Q * 4, Wp, d.P, tm, tn));
  b.SetArgs({X, Wp, XZ}, eps, out);
  b.packs.push_back({1, Wt, Wp_of});
  return b;
}

}  // namespace kiln::compiler::ops
