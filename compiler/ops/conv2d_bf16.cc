// conv2d in bfloat16 (--precision bf16: UseBf16Products sets bf16=1 on
// ungrouped convolutions by constant weights that write channel blocks):
// the products of the input's and the weights' values rounded to bfloat16,
// summed in float32. The int8 blocked conv's schedule (conv_int8_blocked.cc)
// with pairs of channels where it has words of four:
//
//   xpack[n][g][ph][pw][j] = channels 2(gJ + j) and +1 of the padded input
//                          at (ph, pw) as one int32 of two bf16 (J = 8 pairs
//                          to a 16-channel block of a blocked input; J = 1
//                          from NCHW, the RGB stem); per call
//   wpack[ko][((g*R + r)*S + s)*J + j][kv] = the same two channels of
//                          w[ko*kb + kv][..][r][s]: packed once, at compile
//                          time
//   conv[n][ko][oh][ow][kv] = sum_{g,r,s,j} dot2_bf16(xpack[n][g][oh*sh +
//                          r*dh][ow*sw + s*dw][j], wpack[ko][..][kv])
//   out = epilogue(conv + bias), in blocks (ChannelTiledOutput)
//
// dot2_bf16 is vdpbf16ps where the CPU has AVX512_BF16 (two products per
// lane, twice a float32 FMA's), else widened halves. Schedule: the pack over
// the image (in parallel over g), then per tile of kb channels and output
// row, register tiles of reg_n pixels x kb channels over the (g, r, s, j)
// loops, leaving through the epilogue as vector stores. Where the CPU has
// AMX-BF16 (amx=1), the layer is AMX tile products of an im2col of pairs
// instead (conv_amx.cc's parts).

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
using namespace ir;

namespace {

constexpr int64_t kBlock = kChannelBlock;

struct Dims {
  int64_t N, C, H, W, K, R, S, OH, OW, sh, sw, dh, dw, ib;
  int64_t J, G;  // pairs per group, groups of pairs
};

Dims DimsOf(const Workload& w) {
  Dims d;
  d.N = w.Int("N"), d.C = w.Int("C"), d.H = w.Int("H"), d.W = w.Int("W"), d.K = w.Int("K");
  d.R = w.Int("R"), d.S = w.Int("S"), d.OH = w.Int("OH"), d.OW = w.Int("OW");
  d.sh = w.Ints("stride")[0], d.sw = w.Ints("stride")[1];
  d.dh = w.Ints("dilation")[0], d.dw = w.Ints("dilation")[1];
  d.ib = w.IntOr("in_block", 0);
  d.J = d.ib > 0 ? d.ib / 2 : 1;
  d.G = d.ib > 0 ? d.C / d.ib : (d.C + 1) / 2;
  return d;
}

// The layer as AMX tile products (conv_amx.cc's parts with words of
// two bf16): where the CPU has AMX-BF16, one image, C even, no dilation.
int64_t AmxRowBytes(const Dims& d) { return AmxStepWords(d.R * d.S * d.C / 2) * 4; }
bool AmxShape(const Workload& w) {
  const Dims d = DimsOf(w);
  return d.N == 1 && d.C % 2 == 0 && d.dh == 1 && d.dw == 1 && w.IntOr("out_block", 0) == kBlock &&
         AmxRowsFit(AmxRowBytes(d));
}
// The layer as conv_amx.cc's parts see it: input_word takes padded
// coordinates (PaddedLoad takes the padding off).
GenericConvDims AmxDims(const Dims& d) {
  return {d.N, d.C, d.H, d.W, d.K, d.R, d.S, d.OH, d.OW, d.sh, d.sw, 0, 0};
}
bool AmxOperandsFit(const Workload& w, const Target& t) {
  return AmxShape(w) && AmxFits(t, "amx-bf16", AmxRowBytes(DimsOf(w)));
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  std::vector<Knob> k = BlockedTileKnobs(d.N, d.K, d.OW);
  AddConvAmxKnobs(k, AmxOperandsFit(w, t), AmxDims(d), /*lanes=*/2);
  return k;
}

absl::Status Check(const Workload& w, const Target& t, const Config& c) {
  const Dims d = DimsOf(w);
  if (auto s = CheckBlockedTile(w, t, c, d.N, d.K, "conv2d bf16"); !s.ok()) return s;
  return CheckConvAmx(c, d.OH * d.OW, "conv2d bf16");
}

Config Default(const Workload& w, const Target& t) {
  const Dims d = DimsOf(w);
  Config c;
  const int64_t products = d.K * d.OH * d.OW * d.C * d.R * d.S;
  DefaultBlockedTile(t, Knobs(w, t), d.N, d.K, d.OW, products, &c);
  DefaultConvAmx(&c, AmxOperandsFit(w, t), AmxDims(d), /*lanes=*/2, products, /*int8=*/false);
  return c;
}

absl::StatusOr<Built> BuildAmx(const Workload& w, const Target& t, const Config& c) {
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  if (!AmxOperandsFit(w, t)) {
    return absl::InvalidArgumentError(
        "conv2d bf16: amx=1 needs AMX-BF16, one image, C even and no dilation");
  }
  te::Tensor data = te::Placeholder("data", sig->inputs[0].shape);
  te::Tensor weight = te::Placeholder("weight", {d.K, d.C, d.R, d.S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {d.K});
  auto eps = EpilogueOperands(w);
  AmxConvSpec spec;
  spec.intrinsic = ir::Intrinsic::kAmxDpbf16ps;
  spec.dot = ir::Intrinsic::kDot2Bf16;
  spec.lanes = 2;
  spec.run = d.ib / 2;
  spec.acc_type = DataType::Float32();
  // (ih, iw) padded: PaddedLoad takes the padding off (0 outside).
  spec.input_word = [&](Expr c0, Expr ih, Expr iw) {
    auto half = [&](int b) {
      return Bf16Bits(PaddedLoad(w, ih, iw, [&](const Expr& h, const Expr& x) {
        Expr ch = c0 + IntImm(b);
        return d.ib > 0
                   ? data({IntImm(0), FloorDiv(ch, IntImm(d.ib)), h, x, FloorMod(ch, IntImm(d.ib))})
                   : data({IntImm(0), ch, h, x});
      }));
    };
    return PackHalves(half(0), half(1));
  };
  spec.weight_word = [&](Expr k, Expr c0, Expr r, Expr s) {
    return PackHalves(Bf16Bits(weight({k, c0, r, s})), Bf16Bits(weight({k, c0 + IntImm(1), r, s})));
  };
  const GenericConvDims g = AmxDims(d);
  AmxConvStages st = AmxConvCompute(g, c, spec);
  te::Tensor out = ChannelTiledOutput(
      w, kBlock, bias, eps,
      [&](const Var&, const Expr& ko, const Expr& kin, const Var& oh, const Var& ow) {
        return st.acc({st.AccRow(oh, ow), ko * IntImm(kBlock) + kin});
      });
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  ScheduleAmxConv(*b.schedule, out, st, c, spec.intrinsic);
  b.SetArgs({data, st.wpack, bias}, eps, out);
  b.packs.push_back({1, weight, st.wpack_of});
  return b;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& c) {
  if (c.count("amx") && c.at("amx")) return BuildAmx(w, t, c);
  const Dims d = DimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  const DataType i32 = DataType::Int32();
  const int64_t kb = c.at("kb"), rn = c.at("reg_n"), Ko = d.K / kb;
  const int64_t J = d.J, G = d.G, taps = G * d.R * d.S * J;
  te::Tensor data = te::Placeholder("data", sig->inputs[0].shape);
  te::Tensor weight = te::Placeholder("weight", {d.K, d.C, d.R, d.S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {d.K});
  auto eps = EpilogueOperands(w);
  // Channel ch of the input at in-bounds (h, x), 0 past C.
  auto channel = [&](Expr n, Expr ch, Expr h, Expr x) {
    Expr cc = Min(ch, IntImm(d.C - 1));
    Expr v = d.ib > 0 ? data({n, FloorDiv(cc, IntImm(d.ib)), h, x, FloorMod(cc, IntImm(d.ib))})
                      : data({n, cc, h, x});
    return d.C % 2 ? Select(ch < IntImm(d.C), v, FloatImm(0.0)) : v;
  };
  // Row ((g * R + r) * S + s) * J + j: the pair of channels 2(g J + j), +1
  // of tap (r, s).
  te::Tensor Wp_of = te::Compute(
      "wpack", {Ko, taps, kb},
      [&](const std::vector<Var>& i) {
        Expr j = FloorMod(i[1], IntImm(J)), tap = FloorDiv(i[1], IntImm(J));
        Expr g = FloorDiv(tap, IntImm(d.R * d.S));
        Expr r = FloorMod(FloorDiv(tap, IntImm(d.S)), IntImm(d.R)), s = FloorMod(tap, IntImm(d.S));
        Expr k = i[0] * IntImm(kb) + i[2];
        auto half = [&](int b) {
          Expr ch = (g * IntImm(J) + j) * IntImm(2) + IntImm(b);
          return Select(ch < IntImm(d.C), Bf16Bits(weight({k, Min(ch, IntImm(d.C - 1)), r, s})),
                        IntImm(0, i32));
        };
        return PackHalves(half(0), half(1));
      },
      i32);
  te::Tensor Wp = te::Placeholder("W_packed", Wp_of->shape, i32);
  // The padded input in pairs, as wide as the register tiles read.
  const int64_t PH = (d.OH - 1) * d.sh + (d.R - 1) * d.dh + 1;
  const int64_t PW = (TiledWidth(d.OW, rn) - 1) * d.sw + (d.S - 1) * d.dw + 1;
  te::Tensor xp = te::Compute(
      "xpack", {d.N, G, PH, PW, J},
      [&](const std::vector<Var>& i) {
        auto half = [&](int b) {
          Expr ch = (i[1] * IntImm(J) + i[4]) * IntImm(2) + IntImm(b);
          return Bf16Bits(PaddedLoad(w, i[2], i[3], [&](const Expr& hc, const Expr& xc) {
            return channel(i[0], ch, hc, xc);
          }));
        };
        return PackHalves(half(0), half(1));
      },
      i32);
  IterRange rc = te::ReduceAxis(G, "rc"), rr = te::ReduceAxis(d.R, "rr"),
            rs = te::ReduceAxis(d.S, "rs"), rj = te::ReduceAxis(J, "rj");
  te::Tensor conv = te::Compute("conv", {d.N, Ko, d.OH, d.OW, kb}, [&](const std::vector<Var>& i) {
    Expr h = i[2] * IntImm(d.sh) + rr.var * IntImm(d.dh);
    Expr x = i[3] * IntImm(d.sw) + rs.var * IntImm(d.dw);
    Expr row = ((rc.var * IntImm(d.R) + rr.var) * IntImm(d.S) + rs.var) * IntImm(J) + rj.var;
    return te::Sum(Call(DataType::Float32(), Intrinsic::kDot2Bf16,
                        {xp({i[0], rc.var, h, x, rj.var}), Wp({i[1], row, i[4]})}),
                   {rc, rr, rs, rj});
  });
  te::Tensor out = ChannelTiledOutput(
      w, kb, bias, eps,
      [&](const Var& n, const Expr& ko, const Expr& kin, const Var& oh, const Var& ow) {
        return conv({n, ko, oh, ow, kin});
      });
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  const int64_t par = c.at("parallel");
  if (par && G > 1) s.Parallel(xp, s.Axis(xp, 1));
  // Along the block's pairs, else (NCHW) along the row.
  s.Vectorize(xp, s.Axis(xp, J > 1 ? 4 : 3));
  auto [ko, km, kv] = SplitChannelTiles(s, out, w, kb);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), rn);
  te::IterVar oh = s.Axis(out, 2);
  if (km) {
    s.Reorder(out, {ko, oh, owo, owi, km, kv});
    s.Unroll(out, km);
  } else {
    s.Reorder(out, {ko, oh, owo, owi, kv});
  }
  s.Vectorize(out, kv);
  s.Unroll(out, owi);
  if (par == 1) s.Parallel(out, d.N > 1 ? s.Axis(out, 0) : ko);
  if (par == 2) s.Parallel(out, oh);
  s.ComputeAt(conv, out, owo);
  te::IterVar cow = s.Axis(conv, 3), ckv = s.Axis(conv, 4);
  te::IterVar g = s.ReduceAxisOf(conv, 0), r = s.ReduceAxisOf(conv, 1),
              sx = s.ReduceAxisOf(conv, 2), j = s.ReduceAxisOf(conv, 3);
  s.Reorder(conv, {s.Axis(conv, 0), s.Axis(conv, 1), s.Axis(conv, 2), g, r, sx, j, cow, ckv});
  s.Unroll(conv, cow);
  s.Vectorize(conv, ckv);
  if (c.at("unroll_j")) s.Unroll(conv, j);
  b.SetArgs({data, Wp, bias}, eps, out);
  b.packs.push_back({1, weight, Wp_of});
  return b;
}

}  // namespace

bool Bf16ConvAmxPays(const Workload& w) {
  const Dims d = DimsOf(w);
  return AmxShape(w) && ConvAmxPays(2 * d.R * d.S * d.C, d.K, /*int8=*/false);
}

bool Bf16Conv(const Workload& w) {
  return w.op == Op::kConv2d && w.IntOr("bf16", 0) == 1 && w.Int("groups") == 1 &&
         w.IntOr("out_block", 0) == kBlock && !w.ints.count("dtypes");
}

const OpTemplate* Bf16ConvTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
