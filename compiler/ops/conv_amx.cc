// Blocked convolutions as AMX tile products (amx=1): an implicit GEMM over
// an im2col of 32-bit words, for the int8 conv in channel blocks
// (conv_int8_blocked.cc's workloads: AMX-INT8, uint8 x with C a multiple of
// 4, one image; words of 4 bytes, tdpbusd) and the bf16 conv
// (conv2d_bf16.cc: AMX-BF16, C even; words of 2 bf16, tdpbf16ps).
//
//   im2col[p][q]  = the word q of output pixel p's taps: tap (r, s) =
//                   q / words, its channels lanes (q % words) .. + lanes - 1
//                   of x at (oh sh + r - ph, ow sw + s - pw) (the padding's
//                   value outside: int8's xz bytes, bf16's 0), 0 past R S
//                   words (a whole number of 64-byte tile steps); packed per
//                   call, in parallel over pixels
//   wpack[panel][q][j] = the weights of word q for output channel
//                   panel * tn + j; int8: a last row of each channel's
//                   weight sum; packed at compile time
//   acc[p][k]     = sum_q dot(im2col[p][q], wpack[k / tn][q][k % tn]):
//                   boxes of amx_m pixels x amx_n channels tensorized into
//                   the AMX intrinsic (ops/common.h AmxTileProducts)
//   out[0][k/16][oh][ow][k%16] = epilogue(acc[oh OW + ow][k] (- xz wsum[k]))
//
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
  d.Q = AmxStepWords(d.R * d.S * d.C4);
  return d;
}

// In place, a box is amx_m pixels of one output row: its rows rounded up
// to whole tiles, at most 64.
int64_t InPlaceBox(int64_t OW) {
  return std::min<int64_t>(64, (OW + kAmxTile - 1) / kAmxTile * kAmxTile);
}

// In place where the boxes waste at most an eighth of their rows (56, 28
// and 14 pixels a row: not 7, whose boxes of 16 hold 7).
bool InPlacePays(const GenericConvDims& g) {
  const int64_t box = InPlaceBox(g.OW);
  return 8 * g.OW >= 7 * ((g.OW + box - 1) / box * box);
}

}  // namespace

bool Int8ConvAmxFits(const Workload& w, const Target& t) {
  auto sig = w.Signature();
  if (!sig.ok() || sig->inputs[0].dtype != DType::kUInt8) return false;
  const AmxDims d = AmxDimsOf(w);
  return d.N == 1 && d.C % 4 == 0 && w.IntOr("out_block", 0) == kChannelBlock &&
         AmxFits(t, "amx-int8", d.Q * 4);
}

bool AmxInPlaceFits(const GenericConvDims& g, int64_t lanes) {
  return g.sh == 1 && g.sw == 1 && g.R * g.S > 1 && (g.C / lanes) % (kAmxRowBytes / 4) == 0;
}

void AddConvAmxKnobs(std::vector<Knob>& k, bool fits, const GenericConvDims& g, int64_t lanes) {
  const int64_t pixels = g.OH * g.OW;
  k.push_back({"amx", {0}});
  k.push_back({"amx_m", {kAmxTile}});
  k.push_back({"amx_n", {kAmxTile}});
  k.push_back({"amx_direct", {0}});
  k.back().first_if_absent = true;  // added in 0.10.0: 0 is what ran before
  if (!fits) return;
  k[k.size() - 4].choices.push_back(1);
  for (int64_t m : {32, 64, 128}) {
    if (m < pixels + kAmxTile) k[k.size() - 3].choices.push_back(m);
  }
  for (int64_t n : {32, 64}) {
    if (g.K % n == 0) k[k.size() - 2].choices.push_back(n);
  }
  if (AmxInPlaceFits(g, lanes)) k.back().choices.push_back(1);
}

absl::Status CheckConvAmx(const Config& c, int64_t pixels, const char* what) {
  if (!c.count("amx")) return absl::OkStatus();
  const bool in_place = c.count("amx_direct") && c.at("amx_direct") == 1;
  // One config for each distinct kernel: the other template's knobs at
  // their first values.
  if (c.at("amx") == 0 && (c.at("amx_m") != kAmxTile || c.at("amx_n") != kAmxTile || in_place)) {
    return absl::InvalidArgumentError(StrCat(what, ": amx_m, amx_n and amx_direct are for amx=1"));
  }
  if (c.at("amx") == 1 && (c.at("kb") != kChannelBlock || c.at("reg_n") != 1 ||
                           c.at("unroll_j") != 0 || (c.count("pack") && c.at("pack") != 1))) {
    return absl::InvalidArgumentError(
        StrCat(what, ": amx=1 takes kb=16, reg_n=1, unroll_j=0, pack=1 (they are for amx=0)"));
  }
  if (c.at("amx") == 1 && !in_place && c.at("parallel") == 2 && pixels <= c.at("amx_m")) {
    return absl::InvalidArgumentError(StrCat(what, ": parallel=2 with a single pixel box"));
  }
  return absl::OkStatus();
}

bool ConvAmxPays(int64_t tap_bytes, int64_t K, bool int8) {
  if (int8) return tap_bytes >= 64 && K >= 64;
  return tap_bytes >= 256 && K >= 128;
}

void DefaultConvAmx(Config* c, bool fits, const GenericConvDims& g, int64_t lanes, int64_t products,
                    bool int8) {
  const int64_t pixels = g.OH * g.OW, K = g.K, tap_bytes = g.R * g.S * g.C * (int8 ? 1 : 2);
  (*c)["amx"] = 0;
  (*c)["amx_m"] = kAmxTile;
  (*c)["amx_n"] = kAmxTile;
  (*c)["amx_direct"] = 0;
  // Layers of few products per pixel stay on the vector template: the
  // im2col pack and the tiles' stores are their cost. int8: from 64 bytes
  // of taps and 64 output channels (ResNet-50's int8 layers at one thread on
  // a Sapphire Rapids VM, best of three: 1x1 64->256 on 56x56 0.24 ms as
  // tiles of 16 channels against 0.43 on VNNI, 3x3 64->64 0.28 against
  // 0.37, 1x1 256->64 0.12 against 0.34); bf16: from 256 bytes and 128
  // channels.
  if (!fits || !ConvAmxPays(tap_bytes, K, int8)) return;
  (*c)["amx"] = 1;
  (*c)["kb"] = kChannelBlock;
  (*c)["reg_n"] = 1;
  (*c)["unroll_j"] = 0;
  if (c->count("pack")) (*c)["pack"] = 1;
  (*c)["amx_m"] = pixels >= 32 ? 32 : kAmxTile;
  // int8: boxes of 16 channels (1x1 2048->512 on 7x7 0.11 ms against 0.16
  // in boxes of 32; 3x3 128->128 on 28x28 0.19 either way).
  (*c)["amx_n"] = !int8 && K % 32 == 0 ? 32 : kAmxTile;
  (*c)["parallel"] = 0;
  if (products >= (1 << 18)) (*c)["parallel"] = pixels >= 2 * (*c)["amx_m"] ? 2 : 1;
  if (AmxInPlaceFits(g, lanes) && InPlacePays(g)) {
    (*c)["amx_direct"] = 1;
    (*c)["amx_m"] = InPlaceBox(g.OW);
    if ((*c)["parallel"]) (*c)["parallel"] = 2;
  }
}

namespace {

// `st` with acc[P][K] = sum over q < Q of the product of A's word q of
// pixel p (`a_word(p, q)`: the im2col's, or in place xpad's shifted by q's
// tap) and the packed weights': the products' spec, which the tiles compute.
AmxConvStages AmxAcc(const GenericConvDims& g, const AmxConvSpec& spec, int64_t tn,
                     AmxConvStages st,
                     const std::function<ir::Expr(const ir::Expr&, const ir::Expr&)>& a_word) {
  IterRange rq = te::ReduceAxis(st.Q, "rq");
  const te::Tensor Wp = st.wpack;
  st.acc = te::Compute(
      "acc", {st.P, g.K},
      [&](const std::vector<Var>& i) {
        Expr bv = Wp({FloorDiv(i[1], IntImm(tn)), rq.var, FloorMod(i[1], IntImm(tn))});
        return te::Sum(Call(spec.acc_type, spec.dot, {a_word(i[0], rq.var), bv}), {rq});
      },
      spec.acc_type);
  return st;
}

}  // namespace

AmxConvStages AmxConvCompute(const GenericConvDims& g, const Config& c, const AmxConvSpec& spec) {
  const DataType i32 = DataType::Int32();
  const int64_t tn = c.at("amx_n");
  const int64_t words = g.C / spec.lanes, taps = g.R * g.S * words;
  AmxConvStages st;
  st.P = g.OH * g.OW;
  st.Q = AmxStepWords(taps);
  const int64_t Q = st.Q;
  st.wpack_of = te::Compute(
      "wpack", {g.K / tn, Q + (spec.last_row.defined() ? 1 : 0), tn},
      [&](const std::vector<Var>& i) {
        Expr q = Min(i[1], IntImm(taps - 1));
        Expr tap = FloorDiv(q, IntImm(words));
        Expr c0 = FloorMod(q, IntImm(words)) * IntImm(spec.lanes);
        Expr k = i[0] * IntImm(tn) + i[2];
        Expr word = spec.weight_word(k, c0, FloorDiv(tap, IntImm(g.S)), FloorMod(tap, IntImm(g.S)));
        Expr past = spec.last_row.defined()
                        ? Select(i[1] < IntImm(Q), IntImm(0, i32), spec.last_row({k}))
                        : IntImm(0, i32);
        return Select(i[1] < IntImm(taps), word, past);
      },
      i32);
  st.wpack = te::Placeholder("W_packed", st.wpack_of->shape, i32);
  st.run = spec.run > 1 && words % spec.run == 0 ? spec.run : 1;
  st.in_place = c.count("amx_direct") && c.at("amx_direct") == 1;
  st.row = g.OW;
  if (st.in_place) {
    // The padded image's rows: OW + S - 1 pixels each; acc's rows reach
    // the last box's end, xpad's that plus the farthest tap's shift.
    const int64_t tm = c.at("amx_m");
    st.row = g.OW + g.S - 1;
    st.P = (g.OH - 1) * st.row + (g.OW + tm - 1) / tm * tm;
    const int64_t row = st.row;
    const int64_t reach = (g.R - 1) * row + g.S - 1;
    st.a_row_bytes = words * 4;
    st.taps = {row * st.a_row_bytes, g.S, st.a_row_bytes / kAmxRowBytes, Q * 4 / kAmxRowBytes,
               tm + reach};
    st.xpad = te::Compute(
        "xpad", {st.P + reach, words},
        [&](const std::vector<Var>& i) {
          return spec.input_word(i[1] * IntImm(spec.lanes),
                                 FloorDiv(i[0], IntImm(row)) - IntImm(g.ph),
                                 FloorMod(i[0], IntImm(row)) - IntImm(g.pw));
        },
        i32);
    const te::Tensor xpad = st.xpad;
    return AmxAcc(g, spec, tn, std::move(st), [&](const Expr& p, const Expr& q) {
      Expr tap = FloorDiv(q, IntImm(words));
      Expr shift = FloorDiv(tap, IntImm(g.S)) * IntImm(row) + FloorMod(tap, IntImm(g.S));
      return xpad({p + shift, FloorMod(q, IntImm(words))});
    });
  }
  // q = run index qr (words of one input block at one pixel) and word w in
  // it, so that once the schedule splits q by the run the pixel, tap and
  // block are the outer loop's and the run's words load as one vector.
  const int64_t run = st.run, runs = taps / run;
  st.tap_runs = words / run;
  if (g.R * g.S > 1) {
    st.xpad = te::Compute(
        "xpad", {words / run, (g.OH - 1) * g.sh + g.R, (g.OW - 1) * g.sw + g.S, run},
        [&](const std::vector<Var>& i) {
          return spec.input_word((i[0] * IntImm(run) + i[3]) * IntImm(spec.lanes),
                                 i[1] - IntImm(g.ph), i[2] - IntImm(g.pw));
        },
        i32);
  }
  st.im2col = te::Compute(
      "im2col", {st.P, Q},
      [&](const std::vector<Var>& i) {
        Expr qr = FloorDiv(i[1], IntImm(run));
        Expr r = Min(qr, IntImm(runs - 1));
        Expr tap = FloorDiv(r, IntImm(words / run));
        Expr oh = FloorDiv(i[0], IntImm(g.OW)), ow = FloorMod(i[0], IntImm(g.OW));
        Expr ih = oh * IntImm(g.sh) + FloorDiv(tap, IntImm(g.S));
        Expr iw = ow * IntImm(g.sw) + FloorMod(tap, IntImm(g.S));
        Expr word =
            st.xpad.defined()
                ? st.xpad({FloorMod(r, IntImm(words / run)), ih, iw, FloorMod(i[1], IntImm(run))})
                : spec.input_word((FloorMod(r, IntImm(words / run)) * IntImm(run) +
                                   FloorMod(i[1], IntImm(run))) *
                                      IntImm(spec.lanes),
                                  ih - IntImm(g.ph), iw - IntImm(g.pw));
        return taps == Q ? word : Select(qr < IntImm(runs), word, IntImm(0, i32));
      },
      i32);
  const te::Tensor im2col = st.im2col;
  return AmxAcc(g, spec, tn, std::move(st), [&](const Expr& p, const Expr& q) {
    return im2col({p, q});
  });
}

namespace {

// In place: xpad once per call (in parallel over its rows), then per box of
// tm pixels of an output row (parallel=2 shares the rows, 1 the channel
// panels) its tiles read xpad's rows, each tap a shift.
void ScheduleAmxConvInPlace(te::Schedule& s, const te::Tensor& out, const AmxConvStages& st,
                            const Config& c, ir::Intrinsic intrinsic) {
  const int64_t tm = c.at("amx_m"), tn = c.at("amx_n"), par = c.at("parallel");
  {
    auto [qo, qi] = s.Split(st.xpad, s.Axis(st.xpad, 1), st.run > 1 ? st.run : kAmxTile);
    s.Vectorize(st.xpad, qi);
    if (par) s.Parallel(st.xpad, s.Axis(st.xpad, 0));
  }
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), tm);
  auto [ko, ki] = s.Split(out, s.Axis(out, 1), tn / kChannelBlock);
  te::IterVar oh = s.Axis(out, 2), kv = s.Axis(out, 4);
  const bool channels_outer = par == 1;
  s.Reorder(out, channels_outer
                     ? std::vector<te::IterVar>{s.Axis(out, 0), ko, oh, owo, owi, ki, kv}
                     : std::vector<te::IterVar>{s.Axis(out, 0), oh, owo, ko, owi, ki, kv});
  s.Vectorize(out, kv);
  if (par) s.Parallel(out, channels_outer ? ko : oh);
  s.ComputeAt(st.acc, out, channels_outer ? owo : ko);
  s.Tensorize(st.acc, s.Axis(st.acc, 0), std::string(NameOf(intrinsic)),
              AmxTileProducts(intrinsic, st.xpad, st.a_row_bytes, st.wpack, st.P, tm, tn, st.taps));
}

}  // namespace

void ScheduleAmxConv(te::Schedule& s, const te::Tensor& out, const AmxConvStages& st,
                     const Config& c, ir::Intrinsic intrinsic) {
  if (st.in_place) return ScheduleAmxConvInPlace(s, out, st, c, intrinsic);
  const int64_t tm = c.at("amx_m"), tn = c.at("amx_n"), par = c.at("parallel");
  {
    auto [qo, qi] =
        s.Split(st.im2col, s.Axis(st.im2col, 1), st.run > 1 ? st.run : kAmxRowBytes / 4);
    s.Vectorize(st.im2col, qi);
    // A tap's runs inner: the tap (and whether it is inside the image) is
    // the outer loop's.
    if (st.run > 1) s.Split(st.im2col, qo, st.tap_runs);
    if (par == 1) s.Parallel(st.im2col, s.Axis(st.im2col, 0));
  }
  if (st.xpad.defined()) {
    s.Vectorize(st.xpad, s.Axis(st.xpad, 3));
    if (par) s.Parallel(st.xpad, s.Fuse(st.xpad, s.Axis(st.xpad, 0), s.Axis(st.xpad, 1)));
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
  s.ComputeAt(st.acc, out, channels_outer ? po : ko);
  // Pixels outside: each box's im2col rows are packed just before its
  // channel panels read them, and stay in L1/L2 (at the root, a 56x56
  // layer's 1.8 MB went through memory).
  if (!channels_outer) s.ComputeAt(st.im2col, out, po);
  s.Tensorize(st.acc, s.Axis(st.acc, 0), std::string(NameOf(intrinsic)),
              AmxTileProducts(intrinsic, st.im2col, st.Q * 4, st.wpack, st.P, tm, tn));
}

absl::StatusOr<Built> BuildInt8ConvAmx(const Workload& w, const Target& t, const Config& c) {
  const AmxDims d = AmxDimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  if (!Int8ConvAmxFits(w, t)) {
    return absl::InvalidArgumentError(
        "conv int8 blocked: amx=1 needs AMX-INT8, uint8 x, C a multiple of 4 and one image");
  }
  te::Tensor X = Int8InputPlaceholder(w);
  te::Tensor Wt = TypedPlaceholder(w, 1, "W");
  te::Tensor XZ = TypedPlaceholder(w, 2, "x_zero_point");
  auto eps = EpilogueOperands(w);
  const Expr xz = XZ(std::vector<Expr>(XZ->shape.size(), IntImm(0)));
  AmxConvSpec spec;
  spec.intrinsic = ir::Intrinsic::kAmxDpbusd;
  spec.dot = ir::Intrinsic::kDot4Vnni;
  spec.lanes = 4;
  spec.run = w.IntOr("in_block", 0) / 4;
  spec.acc_type = DataType::Int32();
  spec.input_word = [&](Expr c0, Expr ih, Expr iw) {
    return Int8InputWord(w, X, xz, IntImm(0), FloorDiv(c0, IntImm(4)), ih, iw);
  };
  spec.weight_word = [&](Expr k, Expr c0, Expr r, Expr s) {
    return PackBytes4([&](int j) { return Wt({k, c0 + IntImm(j), r, s}); });
  };
  spec.last_row = Int8WeightSums(Wt);
  AmxConvStages st = AmxConvCompute(d, c, spec);
  const int64_t tn = c.at("amx_n");
  const Expr z = UnsignedZeroPoint(XZ, false);
  te::Tensor out = te::Compute(
      "out", sig->output.shape,
      [&](const std::vector<Var>& i) {
        Expr k = i[1] * IntImm(kChannelBlock) + i[4];
        Expr y = st.acc({st.AccRow(i[2], i[3]), k}) -
                 z * st.wpack({FloorDiv(k, IntImm(tn)), IntImm(st.Q), FloorMod(k, IntImm(tn))});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(sig->output.dtype));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  ScheduleAmxConv(*b.schedule, out, st, c, spec.intrinsic);
  b.SetArgs({X, st.wpack, XZ}, eps, out);
  b.packs.push_back({1, Wt, st.wpack_of});
  return b;
}

}  // namespace kiln::compiler::ops
