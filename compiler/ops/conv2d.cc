// conv2d (NCHW, groups, stride, dilation, asymmetric padding through an
// inlined padded-input stage), + bias, + epilogue. Knob `layout` picks
// between NCHW[x]c inside the kernel (1; conv2d_nchwc.cc, offered for
// groups=1 and K a multiple of the vector width), depthwise rows (2;
// conv2d_depthwise.cc, groups = C = K), 1x1 as a GEMM (3; conv2d_gemm.cc),
// Winograd F(4x4, 3x3) and F(2x2, 3x3) (4 and 5; conv2d_winograd.cc) and
// direct NCHW (0), whose template follows. Template: the output is
// tiled [tile_k x tile_oh x tile_ow] (tile_ow vectorized); the accumulator
// tile is a local scratch computed at the output tile loop, its reduction
// loops ordered by `order`, kernel width optionally unrolled (unroll_s);
// `parallel` runs the fused batch x output-channel-block loop in parallel.
#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

bool Blocked(const Workload& w) {
  return w.IntOr("in_block", 0) > 0 || w.IntOr("out_block", 0) > 0;
}

bool Padded(const Workload& w) {
  const auto& pad = w.Ints("pad");
  return pad[0] || pad[1] || pad[2] || pad[3];
}

// Iterations of the loop `parallel` runs in parallel: the batch loop when
// N > 1, else the output-channel-block loop. (Fusing the two would hide the
// channel block from bound inference: every parallel iteration would then
// compute the accumulators of all K channels.)
int64_t ParallelExtent(const Workload& w, int64_t tile_k) {
  int64_t N = w.Int("N");
  return N > 1 ? N : (w.Int("K") + tile_k - 1) / tile_k;
}

}  // namespace

std::pair<int64_t, int64_t> PaddedExtent(const Workload& w) {
  const auto& pad = w.Ints("pad");
  const auto& st = w.Ints("stride");
  const auto& dil = w.Ints("dilation");
  int64_t ph = std::max(w.Int("H") + pad[0] + pad[2],
                        (w.Int("OH") - 1) * st[0] + (w.Int("R") - 1) * dil[0] + 1);
  int64_t pw = std::max(w.Int("W") + pad[1] + pad[3],
                        (w.Int("OW") - 1) * st[1] + (w.Int("S") - 1) * dil[1] + 1);
  return {ph, pw};
}

te::Tensor ConvOutput(const Workload& w, const te::Tensor& conv, const te::Tensor& bias,
                      const std::vector<te::Tensor>& eps) {
  return te::Compute(
      "out", {w.Int("N"), w.Int("K"), w.Int("OH"), w.Int("OW")},
      [&](const std::vector<Var>& i) {
        Expr y = conv({i[0], i[1], i[2], i[3]});
        if (bias.defined()) y = y + bias({i[1]});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(OutputDType(w)));
}

Expr PaddedLoad(const Workload& w, const Expr& h_pad, const Expr& x_pad,
                const std::function<Expr(const Expr&, const Expr&)>& load) {
  const auto& pad = w.Ints("pad");
  const int64_t H = w.Int("H"), W = w.Int("W");
  Expr h = h_pad - IntImm(pad[0]), x = x_pad - IntImm(pad[1]);
  Expr ok = h >= IntImm(0) && h < IntImm(H) && x >= IntImm(0) && x < IntImm(W);
  Expr hc = Min(Max(h, IntImm(0)), IntImm(H - 1)), xc = Min(Max(x, IntImm(0)), IntImm(W - 1));
  return Select(ok, load(hc, xc), FloatImm(0.0));
}

te::Tensor ChannelTiledOutput(
    const Workload& w, int64_t kb, const te::Tensor& bias, const std::vector<te::Tensor>& eps,
    const std::function<Expr(const Var&, const Expr&, const Expr&, const Var&, const Var&)>& src) {
  const int64_t N = w.Int("N"), K = w.Int("K"), OH = w.Int("OH"), OW = w.Int("OW");
  const int64_t ob = w.IntOr("out_block", 0);
  if (ob == 0) {
    return te::Compute(
        "out", {N, K, OH, OW},
        [&](const std::vector<Var>& i) {
          Expr y = src(i[0], FloorDiv(i[1], IntImm(kb)), FloorMod(i[1], IntImm(kb)), i[2], i[3]);
          if (bias.defined()) y = y + bias({i[1]});
          return ApplyEpilogue(w, y, i, eps);
        },
        IrType(OutputDType(w)));
  }
  const int64_t m = kb / ob;  // blocks per tile
  return te::Compute(
      "out", {N, K / ob, OH, OW, ob},
      [&](const std::vector<Var>& i) {
        Expr y = src(i[0], FloorDiv(i[1], IntImm(m)), FloorMod(i[1], IntImm(m)) * IntImm(ob) + i[4],
                     i[2], i[3]);
        if (bias.defined()) y = y + bias({i[1] * IntImm(ob) + i[4]});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(OutputDType(w)));
}

ChannelTileAxes SplitChannelTiles(te::Schedule& s, const te::Tensor& out, const Workload& w,
                                  int64_t kb) {
  ChannelTileAxes a;
  const int64_t ob = w.IntOr("out_block", 0);
  if (ob == 0) {
    std::tie(a.ko, a.kv) = s.Split(out, s.Axis(out, 1), kb);
    return a;
  }
  a.ko = s.Axis(out, 1);
  a.kv = s.Axis(out, 4);
  if (kb > ob) std::tie(a.ko, a.km) = s.Split(out, a.ko, kb / ob);
  return a;
}

std::vector<int64_t> ChannelTileChoices(const Workload& w, const Target& t) {
  const int lanes = t.NativeVectorLanes();
  const int64_t ob = w.IntOr("out_block", 0), unit = ob > 0 ? ob : lanes;
  std::vector<int64_t> choices;
  for (int64_t kb : {unit, 2 * unit}) {
    if (w.Int("K") % kb == 0 && kb % lanes == 0) choices.push_back(kb);
  }
  if (choices.empty()) choices.push_back(unit);
  return choices;
}

absl::Status CheckChannelTile(const Workload& w, const Target& t, int64_t kb, const char* knob) {
  const int64_t ob = w.IntOr("out_block", 0);
  if (kb % t.NativeVectorLanes() != 0 || w.Int("K") % kb != 0 || (ob > 0 && kb % ob != 0)) {
    return absl::InvalidArgumentError(
        StrCat("conv2d: ", knob, "=", kb, " must be a multiple of the vector width (",
               t.NativeVectorLanes(), ") and of out_block (", ob, ") dividing K"));
  }
  return absl::OkStatus();
}

DirectConvComputes DirectConv(const Workload& w) {
  int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W"), K = w.Int("K");
  int64_t R = w.Int("R"), S = w.Int("S"), G = w.Int("groups"), OH = w.Int("OH"), OW = w.Int("OW");
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  const auto& dil = w.Ints("dilation");
  int64_t Cg = C / G, Kg = K / G;
  te::Tensor data = te::Placeholder("data", {N, C, H, W});
  te::Tensor weight = te::Placeholder("weight", {K, Cg, R, S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {K});
  auto eps = EpilogueOperands(w);
  bool padded = pad[0] || pad[1] || pad[2] || pad[3];
  te::Tensor pd;
  if (padded) {
    auto [PH, PW] = PaddedExtent(w);
    pd = te::Compute("pad", {N, C, PH, PW}, [&](const std::vector<Var>& i) {
      return PaddedLoad(w, i[2], i[3], [&](const Expr& hc, const Expr& xc) {
        return data({i[0], i[1], hc, xc});
      });
    });
  }
  IterRange rc = te::ReduceAxis(Cg, "rc"), ry = te::ReduceAxis(R, "ry"),
            rx = te::ReduceAxis(S, "rx");
  te::Tensor conv = te::Compute("conv", {N, K, OH, OW}, [&](const std::vector<Var>& i) {
    Expr c = G == 1 ? Expr(rc.var) : FloorDiv(i[1], IntImm(Kg)) * IntImm(Cg) + rc.var;
    Expr h = i[2] * IntImm(st[0]) + ry.var * IntImm(dil[0]);
    Expr x = i[3] * IntImm(st[1]) + rx.var * IntImm(dil[1]);
    Expr in = padded ? pd({i[0], c, h, x}) : data({i[0], c, h, x});
    return te::Sum(in * weight({i[1], rc.var, ry.var, rx.var}), {rc, ry, rx});
  });
  return {data, weight, bias, pd, conv, ConvOutput(w, conv, bias, eps), eps};
}

namespace {

// `k`, read only under the given layouts (the tuner counts configs that
// differ only in knobs their layout does not read as one kernel).
Knob ReadUnder(Knob k, std::vector<int64_t> layouts) {
  k.gate = "layout";
  k.gate_values = std::move(layouts);
  return k;
}

std::vector<Knob> Knobs(const Workload& w, const Target& t) {
  int64_t K = w.Int("K"), OH = w.Int("OH"), OW = w.Int("OW"), S = w.Int("S");
  std::vector<Knob> k;
  // The direct layout's (0) knobs.
  k.push_back(ReadUnder({"tile_k", UpTo({1, 2, 4, 8, 16}, K)}, {0}));
  k.push_back(ReadUnder({"tile_oh", UpTo({1, 2, 4}, OH)}, {0}));
  k.push_back(ReadUnder({"tile_ow", VectorChoices(OW, t.NativeVectorLanes())}, {0}));
  k.push_back(
      ReadUnder({"unroll_s", S > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}}, {0}));
  k.push_back(ReadUnder({"order", {0, 1, 2}}, {0}));
  k.push_back({"parallel", {0}});
  if (w.Int("N") * K > 1) k.back().choices.push_back(1);
  // pad_stage=1 materializes the zero-padded input once (a root scratch
  // buffer) so that the inner loop loads contiguous vectors without bounds
  // selects; 0 inlines the padding into every load.
  k.push_back(ReadUnder(
      {"pad_stage", Padded(w) ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}}, {0}));
  // unroll_acc=1 unrolls the accumulator tile's channel and row loops so the
  // accumulators live in vector registers (direct and NCHWc).
  k.push_back(ReadUnder({"unroll_acc", {0, 1}}, {0, 1}));
  // Blocked data or output (in_block / out_block): the layouts that read
  // and write channel blocks, NCHWc, depthwise and Winograd.
  k.push_back({"layout", {}});
  if (!Blocked(w)) k.back().choices.push_back(0);
  if (NchwcEligible(w, t)) k.back().choices.push_back(1);
  if (DepthwiseEligible(w)) k.back().choices.push_back(2);
  if (GemmEligible(w, t)) k.back().choices.push_back(3);
  for (int64_t wg : {kWinograd4Layout, kWinograd2Layout}) {
    if (WinogradEligible(w, t, wg)) k.back().choices.push_back(wg);
  }
  // Never empty (a target whose vectors are wider than a block): NCHWc,
  // which its check then refuses with the reason.
  if (k.back().choices.empty()) k.back().choices.push_back(1);
  for (Knob& n : NchwcKnobs(w, t)) k.push_back(ReadUnder(std::move(n), {1}));
  for (Knob& n : DepthwiseKnobs(w, t)) k.push_back(ReadUnder(std::move(n), {2}));
  for (Knob& n : GemmKnobs(w, t)) k.push_back(ReadUnder(std::move(n), {3}));
  for (Knob& n : WinogradKnobs(w, t)) {
    k.push_back(ReadUnder(std::move(n), {kWinograd4Layout, kWinograd2Layout}));
  }
  return k;
}

absl::Status Check(const Workload& w, const Target& t, const Config& c) {
  if (c.at("layout") != 1 &&
      (c.at("par_rows") || c.at("cin") || c.at("fold") != 1 || c.at("prefetch"))) {
    return absl::InvalidArgumentError(
        "conv2d: par_rows=1, cin > 0, fold > 1 and prefetch=1 need layout=1");
  }
  if (Blocked(w) && (c.at("layout") == 0 || c.at("layout") == 3)) {
    return absl::InvalidArgumentError(
        StrCat("conv2d: layout=", c.at("layout"), " reads and writes NCHW only (in_block=",
               w.IntOr("in_block", 0), ", out_block=", w.IntOr("out_block", 0), ")"));
  }
  if (c.at("layout") == 2) return DepthwiseCheck(w, c);
  if (c.at("layout") == 3) return GemmCheck(w, t, c);
  if (c.at("layout") == kWinograd4Layout || c.at("layout") == kWinograd2Layout) {
    return WinogradCheck(w, t, c);
  }
  if (c.at("layout") == 1) {
    if (auto s = NchwcCheck(w, t, c); !s.ok()) return s;
    if (c.at("parallel") && w.Int("K") / c.at("kb") < 2 && w.Int("OH") < 2) {
      return absl::InvalidArgumentError("conv2d NCHWc: parallel=1 with one channel block and row");
    }
    return absl::OkStatus();
  }
  int64_t outer = ParallelExtent(w, c.at("tile_k"));
  if (c.at("parallel") && outer < 2) {
    return absl::InvalidArgumentError(
        StrCat("conv2d: parallel=1 but the parallel loop (N if N > 1, else ceil(K / tile_k)) has ",
               outer, " iteration: a single iteration cannot run in parallel"));
  }
  if (c.at("pad_stage")) {
    auto [ph, pw] = PaddedExtent(w);
    int64_t bytes = 4 * w.Int("N") * w.Int("C") * ph * pw;
    if (bytes > 256 * 1024) {
      return absl::InvalidArgumentError(
          StrCat("conv2d: pad_stage=1 needs a ", bytes, "-byte scratch (limit 256 KiB)"));
    }
  }
  if (c.at("unroll_s") && w.Int("S") > 16) {
    return absl::InvalidArgumentError("conv2d: unroll_s=1 with a kernel wider than 16");
  }
  return absl::OkStatus();
}

// NCHWc's row split, input-channel chunks and folded rows, which every other
// layout refuses.
void NchwcOff(Config& g) {
  g["par_rows"] = 0;
  g["cin"] = 0;
  g["fold"] = 1;
}

// `c` (NCHWc's knobs at their defaults) with layout 1: in parallel from 4
// MFLOP, over blocks of rows where NchwcParallelDefault says so.
Config AsNchwc(const Workload& w, const Target& t, const std::vector<Knob>& k, Config c) {
  c["layout"] = 1;
  c["unroll_acc"] = 1;
  c["parallel"] = w.Flops() > 4e6 ? 1 : 0;
  // In parallel over blocks of rows, each thread packing its own input
  // rows (measured faster at 2 threads on every 3x3 and 7x7 layer of
  // ResNet-50 with two or more blocks, and on MobileNetV2's 14x14 1x1
  // layers), unless the weights outweigh the input.
  for (const Knob& kn : k) {
    if (kn.name == "rows") NchwcParallelDefault(w, kn.choices, c);
  }
  // Input-channel blocks only where their accumulators fit (rows may have
  // changed).
  if (c["cin"] && !Check(w, t, c).ok()) c["cin"] = 0;
  return c;
}

// `c` (the layout's knobs at their defaults) with another layout than
// NCHWc, in parallel from `min_flops`.
Config AsLayout(const Workload& w, Config c, int64_t layout, double min_flops) {
  c["layout"] = layout;
  NchwcOff(c);
  c["parallel"] = w.Flops() > min_flops ? 1 : 0;
  return c;
}

// The minimum FLOPs from which a layout other than direct and NCHWc runs in
// parallel by default: depthwise layers from 0.2 MFLOP (MobileNetV2's 14x14
// and 7x7 ones, 0.5-1.4 MFLOP, ran 1.8-1.9x faster at 2 threads), the others
// from 4 MFLOP.
double ParallelFrom(int64_t layout) { return layout == 2 ? 2e5 : 4e6; }

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  int lanes = t.NativeVectorLanes();
  Config c;
  // One vector of output width, and as many output channels as keep the
  // accumulator tile (tile_k x tile_oh vectors) in about 16 registers.
  c["tile_ow"] = Pick(k[2].choices, lanes);
  int64_t vecs = (c["tile_ow"] + lanes - 1) / lanes;
  c["tile_k"] = Pick(k[0].choices, std::max<int64_t>(1, 16 / vecs));
  c["tile_oh"] = 1;
  c["unroll_s"] = w.Int("S") > 1 && w.Int("S") <= 3 ? 1 : 0;
  c["order"] = 0;
  c["parallel"] = 0;
  c["unroll_acc"] = 1;
  c["layout"] = 0;
  for (const auto& [name, v] : NchwcDefault(w, t, k)) c[name] = v;
  c["pad_stage"] = k[6].choices.back();
  if (c["pad_stage"] && !Check(w, t, c).ok()) c["pad_stage"] = 0;
  // Parallel only when each of 2+ threads gets 2+ iterations of real work.
  if (k[5].choices.size() > 1 && ParallelExtent(w, c["tile_k"]) >= 4 && w.Flops() > 4e6) {
    c["parallel"] = 1;
    if (!Check(w, t, c).ok()) c["parallel"] = 0;
  }
  if (NchwcEligible(w, t)) {
    Config n = AsNchwc(w, t, k, c);
    if (Check(w, t, n).ok()) c = n;
  }
  if (c["layout"] != 1) NchwcOff(c);
  // Another layout in place of the one so far, if it accepts the config.
  auto prefer = [&](int64_t layout) {
    Config g = AsLayout(w, c, layout, ParallelFrom(layout));
    if (Check(w, t, g).ok()) c = g;
  };
  for (const auto& [name, v] : GemmDefault(w, t)) c[name] = v;
  // A 1x1 layer over enough pixels: a GEMM on the NCHW tensors as they
  // are, nothing repacked but the weights (measured 1.0x oneDNN on
  // ResNet-50's 56x56 1x1 layers, against 0.3-0.75x for NCHWc, whose
  // input packing is a whole copy of the activations).
  if (GemmEligible(w, t)) prefer(3);
  for (const auto& [name, v] : WinogradDefault(w, t, kWinograd4Layout)) c[name] = v;
  // 3x3 stride 1: a quarter of the multiplies (measured 1.6-3.2x oneDNN's
  // direct convolution on ResNet-50's 3x3 layers of 14x14 and more,
  // bench/kernels.sh). Not on smaller images: their 4x4 tiles waste
  // rows and columns (7x7 computes 8x8), and the transformed weights, 4x
  // the weights, make the layer memory-bound (0.5-0.9x at 7x7). F(2x2, 3x3)
  // (layout 5) is left to tuning: it trades multiplies for bytes (16/9 the
  // weights, 1.7x fewer multiplies at 7x7), which pays or not by the board's
  // memory bandwidth (ResNet-18's 7x7 layers 1.2x faster inside the model on
  // the 2-core EPYC, at both thread counts).
  if (WinogradEligible(w, t, kWinograd4Layout) && w.Int("OH") * w.Int("OW") >= 100) {
    prefer(kWinograd4Layout);
  }
  for (const auto& [name, v] : DepthwiseDefault(w, t)) c[name] = v;
  if (DepthwiseEligible(w)) prefer(2);
  return c;
}

// The default, then each other layout the layer offers at its own knobs'
// defaults, where the check accepts it.
std::vector<Config> Variants(const Workload& w, const Target& t) {
  const auto k = Knobs(w, t);
  const Config d = Default(w, t);
  std::vector<Config> out = {d};
  for (const Knob& kn : k) {
    if (kn.name != "layout") continue;
    for (int64_t layout : kn.choices) {
      if (layout == d.at("layout")) continue;
      Config g = d;
      if (layout == 1) {
        for (const auto& [name, v] : NchwcDefault(w, t, k)) g[name] = v;
        g = AsNchwc(w, t, k, g);
      } else if (layout == 0) {
        g = AsLayout(w, g, 0, 4e6);
        g["unroll_acc"] = 1;
      } else {
        if (layout == kWinograd2Layout) {
          for (const auto& [name, v] : WinogradDefault(w, t, layout)) g[name] = v;
        }
        g = AsLayout(w, g, layout, ParallelFrom(layout));
      }
      auto valid = [&] { return CheckConfigAgainstKnobs(g, k).ok() && Check(w, t, g).ok(); };
      if (!valid()) g["parallel"] = 0;
      if (valid()) out.push_back(std::move(g));
    }
  }
  return out;
}

absl::StatusOr<Built> Build(const Workload& w, const Target& t, const Config& cfg) {
  if (cfg.at("layout") == 1) return BuildNchwc(w, cfg);
  if (cfg.at("layout") == 2) return BuildDepthwise(w, t, cfg);
  if (cfg.at("layout") == 3) return BuildGemm(w, t, cfg);
  if (cfg.at("layout") == kWinograd4Layout || cfg.at("layout") == kWinograd2Layout) {
    return BuildWinograd(w, t, cfg);
  }
  const DirectConvComputes dc = DirectConv(w);
  const te::Tensor &pd = dc.pad, &conv = dc.conv, &out = dc.out;
  const bool padded = pd.defined();
  const int64_t N = w.Int("N");
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  if (padded && !cfg.at("pad_stage")) s.ComputeInline(pd);
  if (padded && cfg.at("pad_stage")) {
    // Root scratch; vectorize its contiguous width.
    te::IterVar pw = s.Axis(pd, 3);
    int64_t pv = PaddedExtent(w).second >= 8 ? 8 : 1;
    if (pv > 1) s.Vectorize(pd, s.Split(pd, pw, pv).second);
  }
  int64_t tk = cfg.at("tile_k"), toh = cfg.at("tile_oh"), tow = cfg.at("tile_ow");
  auto [ko, ki] = s.Split(out, s.Axis(out, 1), tk);
  auto [oho, ohi] = s.Split(out, s.Axis(out, 2), toh);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), tow);
  s.Reorder(out, {ko, oho, owo, ki, ohi, owi});
  if (tow > 1) s.Vectorize(out, owi);
  if (cfg.at("parallel")) s.Parallel(out, N > 1 ? s.Axis(out, 0) : ko);
  s.ComputeAt(conv, out, owo);
  te::IterVar n = s.Axis(conv, 0), k = s.Axis(conv, 1), oh = s.Axis(conv, 2), ow = s.Axis(conv, 3);
  te::IterVar c = s.ReduceAxisOf(conv, 0), y = s.ReduceAxisOf(conv, 1), x = s.ReduceAxisOf(conv, 2);
  switch (cfg.at("order")) {
    case 0:
      s.Reorder(conv, {n, c, y, x, k, oh, ow});
      break;
    case 1:
      s.Reorder(conv, {n, k, oh, c, y, x, ow});
      break;
    default:
      s.Reorder(conv, {n, c, k, y, x, oh, ow});
      break;
  }
  if (tow > 1) s.Vectorize(conv, ow);
  if (cfg.at("unroll_s")) s.Unroll(conv, x);
  // Accumulator loops that sit inside the reduction loops (order 0: k and
  // oh; order 2: oh) are unrolled; order 1 keeps the reduction innermost.
  if (cfg.at("unroll_acc") && tk * toh <= 32) {
    if (cfg.at("order") == 0) s.Unroll(conv, k);
    if (cfg.at("order") != 1) s.Unroll(conv, oh);
  }
  b.SetArgs({dc.data, dc.weight, dc.bias}, dc.eps, out);
  return b;
}

}  // namespace

const OpTemplate* Conv2dTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build, Variants};
  return &t;
}

}  // namespace kiln::compiler::ops
