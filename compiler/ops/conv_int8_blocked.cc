// The 2-D convolution of 8-bit integers written in channel blocks (the
// layout pass's NCHW[16]c, out_block): vectors along 16 output channels,
// oneDNN's layout for VNNI. The int8 conv of conv_int8.cc puts pixels in a
// vector and broadcasts a weight per output channel, which wastes lanes on
// small images (49 pixels of a 7x7 image in 64 lanes) and needs a row of
// junk columns per padded row; here each step broadcasts one pixel's 4
// input channels and multiplies them into the weights of kb output
// channels, so narrow images and strides waste nothing.
//
//   xpack[n][g][ph][pw][j] = x's channels 4(gJ + j) .. +3 at padded pixel
//                          (ph, pw) as one int32 (Int8InputWord: xz in the
//                          padding, top bits flipped for int8 x); J = 4
//                          words to a group (a block) for a blocked input,
//                          its own layout plus its padding, else J = 1
//   wpack[ko][((g*R + r)*S + s)*J + j][kv] = w[ko*kb + kv][those 4
//                          channels][r][s], the last row each channel's
//                          weight sum
//   conv[n][ko][oh][ow][kv] = sum_{g,r,s,j} dot4(xpack[n][g][oh*sh + r]
//                          [ow*sw + s][j], wpack[ko][..][kv])
//   out[n][k/16][oh][ow][k%16] = epilogue(conv[..] - xz' * wsum[k])
//
// Without VNNI each word's 4 channels are taken as two pairs of 16-bit
// halves (dot2: one pmaddwd per 16 lanes, exact; the weights packed in
// pairs, and the input packed as pairs, so that the loop broadcasts them
// whole): ResNet-50 int8 on AVX-512 without VNNI 128 -> 28 ms at one thread,
// as AVX2 code 470 -> 56 ms; on a Zen 3 EPYC (AVX2) 212 -> 126 ms by
// packing the input as pairs.
//
// The input is read NCHW (packed into planes of words, [N][C4][PH][PW],
// vectorized along the rows) or in blocks (in_block: a word is one 32-bit
// load, and where no padding is read, pack=0, the convolution reads the
// blocks in place with no pack at all). Schedule: the pack over the whole
// image (in parallel over g), then per tile of kb channels (ko outside,
// so that its weights stay in cache over the image) and output row,
// register tiles of reg_n pixels x kb channels (reg_n * kb / 16 vector
// accumulators) over the (g, r, s, j) loops, each tile leaving through
// the epilogue as 16-byte vector stores. ResNet-50 int8 at one thread:
// 11.7 -> 9.6 ms, every layer as fast or faster than conv_int8.cc's.
// Where the CPU has AMX-INT8, amx=1 computes the layer as AMX tile products
// instead (conv_amx.cc).

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

constexpr int64_t kBlock = kChannelBlock;

struct Dims : GenericConvDims {
  int64_t C4;  // groups of 4 input channels
};

Dims DimsOf(const Workload& w) {
  Dims d{GenericConvDimsOf(w), 0};
  d.C4 = (d.C + 3) / 4;
  return d;
}

// The input can be read in place: blocked, and no padding is read.
bool Direct(const Workload& w) {
  const Dims d = DimsOf(w);
  return w.IntOr("in_block", 0) > 0 && d.ph == 0 && d.pw == 0 && (d.OH - 1) * d.sh + d.R <= d.H &&
         (d.OW - 1) * d.sw + d.S <= d.W;
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  std::vector<Knob> k = BlockedTileKnobs(d.N, d.K, d.OW);
  // pack=0: a blocked input read in place, where no padding is read and the
  // register tiles divide the row (they would read past it).
  k.insert(k.begin() + 3, Knob{"pack", {1}});
  if (Direct(w)) k[3].choices.insert(k[3].choices.begin(), 0);
  AddConvAmxKnobs(k, Int8ConvAmxFits(w, t), GenericConvDimsOf(w), /*lanes=*/4);
  // ko_inner=1: the channel tiles inside each register tile of pixels (its
  // input, all channels, stays in L1 while every tile of weights passes)
  // rather than outside the image (each tile's weights stay in cache while
  // the whole input passes, once per tile).
  k.push_back({"ko_inner", {0, 1}});
  k.back().first_if_absent = true;  // added in 0.10.0: 0 is what ran before
  return k;
}

// The bytes of the packed input and weights (pairs of 16-bit halves
// without VNNI) that one order or the other streams again and again.
bool InputOutweighsWeights(const Dims& d, const Target& t) {
  const int64_t widen = PairsOfHalves(t) ? 2 : 1;
  const int64_t in = d.N * d.H * d.W * d.C * widen, weights = d.K * d.C * d.R * d.S * widen;
  return in > weights;
}

absl::Status Check(const Workload& w, const Target& t, const Config& c) {
  const Dims d = DimsOf(w);
  if (auto s = CheckBlockedTile(w, t, c, d.N, d.K, "conv int8 blocked"); !s.ok()) return s;
  if (auto s = CheckConvAmx(c, d.OH * d.OW, "conv int8 blocked"); !s.ok()) return s;
  if (c.at("pack") == 0 && (!Direct(w) || d.OW % c.at("reg_n") != 0)) {
    return absl::InvalidArgumentError(StrCat(
        "conv int8 blocked: pack=0 needs a blocked input, no padding and reg_n dividing OW (", d.OW,
        ")"));
  }
  if (c.at("ko_inner") == 1 && c.at("parallel") == 1 && d.N == 1) {
    return absl::InvalidArgumentError(
        "conv int8 blocked: parallel=1 shares the channel tiles, which ko_inner=1 runs inside "
        "each tile of pixels");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  Config c;
  DefaultBlockedTile(t, Knobs(w, t), d.N, d.K, d.OW, d.K * d.OH * d.OW * d.C * d.R * d.S, &c);
  // In place only with VNNI: without it the pack holds the pairs of halves
  // that dot2 reads, and the loop reads them whole.
  c["pack"] = Direct(w) && d.OW % c["reg_n"] == 0 && !PairsOfHalves(t) ? 0 : 1;
  DefaultConvAmx(&c, Int8ConvAmxFits(w, t), GenericConvDimsOf(w), /*lanes=*/4,
                 d.K * d.OH * d.OW * d.C * d.R * d.S, /*int8=*/true);
  // Channel tiles inside for a 1x1 conv whose input outweighs its weights:
  // on a Zen 3 EPYC (AVX2, L2 512 KB) ResNet-50's 512 -> 128 1x1 at 28x28
  // 1.41 -> 0.78 ms at one thread, 256 -> 64 at 56x56 1.53 -> 1.23 ms; its
  // 3x3 convs ran no faster so.
  c["ko_inner"] = d.R * d.S == 1 && InputOutweighsWeights(d, t) ? 1 : 0;
  if (c["ko_inner"] && c["parallel"] == 1 && d.N == 1) c["parallel"] = 2;
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  if (c.count("amx") && c.at("amx")) return BuildInt8ConvAmx(w, t, c);
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType i32 = DataType::Int32();
  const bool signed_x = sig->inputs[0].dtype == DType::kInt8;
  const int64_t ib = w.IntOr("in_block", 0);
  const bool direct = c.at("pack") == 0;
  // Blocked input read in place: its words, 4 to a block's 16 bytes.
  te::Tensor X = Int8InputPlaceholder(w);
  te::Tensor Wt = TypedPlaceholder(w, 1, "W");
  te::Tensor XZ = TypedPlaceholder(w, 2, "x_zero_point");
  auto eps = EpilogueOperands(w);
  const Expr xz = XZ(std::vector<Expr>(XZ->shape.size(), IntImm(0)));
  const int64_t kb = c.at("kb"), rn = c.at("reg_n"), Ko = d.K / kb, m = kb / kBlock;
  // The reduction runs over G groups of J words of 4 channels: a block's 4
  // words (J = 4) when the input is blocked, else the C4 words one by one
  // (J = 1: the RGB stem's one word is not padded to four). Without VNNI
  // each word is two pairs of channels (P = 2), as 16-bit halves of an int32
  // (dot2: x86's pmaddwd, exact), the weights packed in pairs to match.
  const ir::Intrinsic dot = Dot4Intrinsic(t);
  const int64_t P = PairsOfHalves(t) ? 2 : 1;
  const int64_t J = ib > 0 ? 4 : 1, G = (d.C4 + J - 1) / J, taps = G * d.R * d.S * J * P;
  te::Tensor wsum = Int8WeightSums(Wt);
  // Row (((g * R + r) * S + s) * J + j) * P + p: word c4 = g J + j of tap
  // (r, s), or its pair p.
  te::Tensor Wp_of = te::Compute(
      "wpack", {Ko, taps + 1, kb},
      [&](const std::vector<Var>& i) {
        Expr row = Min(i[1], IntImm(taps - 1));
        Expr p = FloorMod(row, IntImm(P)), j = FloorMod(FloorDiv(row, IntImm(P)), IntImm(J));
        Expr tap = FloorDiv(row, IntImm(J * P));
        Expr g = FloorDiv(tap, IntImm(d.R * d.S));
        Expr r = FloorMod(FloorDiv(tap, IntImm(d.S)), IntImm(d.R)), s = FloorMod(tap, IntImm(d.S));
        Expr k = i[0] * IntImm(kb) + i[2];
        auto weight = [&](int b) {
          Expr ch = (g * IntImm(J) + j) * IntImm(4) + p * IntImm(2) + IntImm(b);
          return Select(ch < IntImm(d.C), Wt({k, Min(ch, IntImm(d.C - 1)), r, s}),
                        Cast(Wt.buffer()->dtype, IntImm(0)));
        };
        Expr packed =
            P == 1 ? PackBytes4(weight) : PackHalves(Cast(i32, weight(0)), Cast(i32, weight(1)));
        return Select(i[1] < IntImm(taps), packed, wsum({k}));
      },
      i32);
  te::Tensor Wp = te::Placeholder("W_packed", Wp_of->shape, i32);
  // The padded input as words, as wide as the register tiles read: a
  // blocked input's layout with its padding, [N][G][PH][PW][4]; from NCHW,
  // planes of words [N][C4][PH][PW] (each packed from 4 channel planes
  // along the row, in vectors). Without VNNI each word is packed as its P =
  // 2 pairs, bytes 2p and 2p + 1 as 16-bit halves ([N][G][PH][PW][8], pair
  // p of word j at p * 4 + j, so that the pack reads a block's 4 words as
  // one vector; [N][2 C4][PH][PW]): the loop broadcasts a pair as it is, where taking it
  // out of the word at each use cost 4 scalar operations and a move to the
  // vector unit per pixel and pair (ResNet-50 int8 as AVX2 code on Zen 3:
  // every 3x3 conv at 25 GMAC/s, a third of what pmaddwd does).
  const int64_t PH = (d.OH - 1) * d.sh + d.R, PW = (TiledWidth(d.OW, rn) - 1) * d.sw + d.S;
  te::Tensor xp = te::Compute(
      "xpack",
      ib == 0 ? std::vector<int64_t>{d.N, d.C4 * P, PH, PW}
              : std::vector<int64_t>{d.N, G, PH, PW, 4 * P},
      [&](const std::vector<Var>& i) {
        // The word (c4) and its pair.
        Expr c4 =
            ib == 0 ? FloorDiv(i[1], IntImm(P)) : i[1] * IntImm(4) + FloorMod(i[4], IntImm(4));
        Expr p = ib == 0 ? FloorMod(i[1], IntImm(P)) : FloorDiv(i[4], IntImm(4));
        Expr word = Int8InputWord(w, X, xz, i[0], c4, i[2] - IntImm(d.ph), i[3] - IntImm(d.pw));
        return P == 1 ? word : PairOfBytes(word, p);
      },
      i32);
  // Word j of group g (pair p of it without VNNI) at padded pixel (h, x).
  auto xword = [&](Expr n, Expr g, Expr j, Expr p, Expr h, Expr x) {
    return ib == 0 ? xp({n, g * IntImm(P) + p, h, x}) : xp({n, g, h, x, p * IntImm(4) + j});
  };
  IterRange rc = te::ReduceAxis(G, "rc"), rr = te::ReduceAxis(d.R, "rr"),
            rs = te::ReduceAxis(d.S, "rs"), rj = te::ReduceAxis(J, "rj"),
            rp = te::ReduceAxis(P, "rp");
  te::Tensor conv = te::Compute(
      "conv", {d.N, Ko, d.OH, d.OW, kb},
      [&](const std::vector<Var>& i) {
        Expr h = i[2] * IntImm(d.sh) + rr.var, x = i[3] * IntImm(d.sw) + rs.var;
        Expr row = ((rc.var * IntImm(d.R) + rr.var) * IntImm(d.S) + rs.var) * IntImm(J) + rj.var;
        // The word (a pair of it without VNNI): from the pack, or in place.
        Expr a;
        if (!direct) {
          a = xword(i[0], rc.var, rj.var, P == 1 ? IntImm(0) : Expr(rp.var), h, x);
        } else {
          a = X({i[0], rc.var, h, x, rj.var});
          if (signed_x) a = FlipBytes(a);
          if (P > 1) a = PairOfBytes(a, rp.var);
        }
        if (P == 1) return te::Sum(Call(i32, dot, {a, Wp({i[1], row, i[4]})}), {rc, rr, rs, rj});
        return te::Sum(Call(i32, Intrinsic::kDot2, {a, Wp({i[1], row * IntImm(P) + rp.var, i[4]})}),
                       {rc, rr, rs, rj, rp});
      },
      i32);
  const Expr z = UnsignedZeroPoint(XZ, signed_x);
  te::Tensor out = te::Compute(
      "out", sig->output.shape,
      [&](const std::vector<Var>& i) {
        Expr ko = FloorDiv(i[1], IntImm(m)), kv = FloorMod(i[1], IntImm(m)) * IntImm(kBlock) + i[4];
        Expr y = conv({i[0], ko, i[2], i[3], kv}) - z * Wp({ko, IntImm(taps), kv});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(sig->output.dtype));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  const int64_t par = c.at("parallel");
  if (!direct) {
    if (par && xp->shape[1] > 1) s.Parallel(xp, s.Axis(xp, 1));
    // Along the row where it is contiguous (NCHW's planes), else the block's
    // 4 words (each pair of them).
    if (ib > 0 && P > 1) {
      s.Vectorize(xp, s.Split(xp, s.Axis(xp, 4), 4).second);
    } else {
      s.Vectorize(xp, s.Axis(xp, ib == 0 ? 3 : 4));
    }
  }
  te::IterVar ko = s.Axis(out, 1), km;
  if (m > 1) std::tie(ko, km) = s.Split(out, ko, m);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), rn);
  te::IterVar oh = s.Axis(out, 2), kv = s.Axis(out, 4);
  if (m > 1) {
    s.Reorder(out, {ko, oh, owo, owi, km, kv});
    s.Unroll(out, km);
  } else {
    s.Reorder(out, {ko, oh, owo, owi, kv});
  }
  const bool ko_inner = c.at("ko_inner") == 1;
  if (ko_inner) s.Reorder(out, {oh, owo, ko});
  s.Vectorize(out, kv);
  s.Unroll(out, owi);
  if (par == 1) s.Parallel(out, d.N > 1 ? s.Axis(out, 0) : ko);
  if (par == 2) s.Parallel(out, oh);
  s.ComputeAt(conv, out, ko_inner ? ko : owo);
  te::IterVar cow = s.Axis(conv, 3), ckv = s.Axis(conv, 4);
  te::IterVar g = s.ReduceAxisOf(conv, 0), r = s.ReduceAxisOf(conv, 1),
              sx = s.ReduceAxisOf(conv, 2), j = s.ReduceAxisOf(conv, 3);
  if (P > 1) {
    te::IterVar p = s.ReduceAxisOf(conv, 4);
    s.Reorder(conv, {s.Axis(conv, 0), s.Axis(conv, 1), s.Axis(conv, 2), g, r, sx, j, p, cow, ckv});
    s.Unroll(conv, p);
  } else {
    s.Reorder(conv, {s.Axis(conv, 0), s.Axis(conv, 1), s.Axis(conv, 2), g, r, sx, j, cow, ckv});
  }
  s.Unroll(conv, cow);
  s.Vectorize(conv, ckv);
  if (c.at("unroll_j")) s.Unroll(conv, j);
  b.SetArgs({X, Wp, XZ}, eps, out);
  b.packs.push_back({1, Wt, Wp_of});
  return b;
}

}  // namespace

const OpTemplate* Int8BlockedConvTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
