// A 1x1, stride-1, unpadded conv2d as a GEMM on the NCHW tensors (layout=3
// of the conv2d template): out[K][P] = weight[K][C] x data[C][P] with P =
// H*W pixels, contiguous in both data and out, so that neither is repacked.
// The weights are packed once, at compile time for a model's constants, into
// panels of gm output channels; the micro-kernel keeps a gm x (gv vectors of
// pixels) accumulator tile in registers and, for every input channel, loads
// gv vectors of one data row and broadcasts gm packed weights (the register
// tile of a BLAS micro-kernel, B being the activations).
//
//   wpack[ko][c][mi]     = weight[ko*gm + mi][c][0][0]   (0 past K)
//   conv[n][ko][mi][p]   = sum_c data[n][c][p] * wpack[ko][c][mi]
//   out[n][k][p]         = epilogue(conv[n][k/gm][k%gm][p] + bias[k])
//
// Schedule: n, po, ko, ki, pi: the pixel panels outside the channel panels,
// so that one panel of data (C x gv vectors) stays in cache while every
// output-channel panel reads it. In parallel over pixel panels (or images).
#include <algorithm>
#include <optional>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"
#include "compiler/ops/elementwise.h"

namespace kiln::compiler::ops {

using namespace ir;

namespace {

int64_t Pixels(const Workload& w) { return w.Int("OH") * w.Int("OW"); }

// An epilogue operand's shape over [N, K, P]: its spatial dimensions must be
// both broadcast (1) or both full; nullopt otherwise.
std::optional<std::vector<int64_t>> FlatOperandShape(const Workload& w,
                                                     const std::vector<int64_t>& shape) {
  if (shape.size() > 4) return std::nullopt;
  std::vector<int64_t> s4(4 - shape.size(), 1);
  s4.insert(s4.end(), shape.begin(), shape.end());
  if (s4[2] == 1 && s4[3] == 1) return std::vector<int64_t>{s4[0], s4[1], 1};
  if (s4[2] == w.Int("OH") && s4[3] == w.Int("OW")) {
    return std::vector<int64_t>{s4[0], s4[1], Pixels(w)};
  }
  return std::nullopt;
}

// Pixel vectors per tile: gv * lanes divides P (no partial tile reads past
// the data), at most 8 vectors.
std::vector<int64_t> PixelVectorChoices(const Workload& w, int lanes) {
  std::vector<int64_t> out;
  for (int64_t v = 1; v <= 8; ++v) {
    if (Pixels(w) % (v * lanes) == 0) out.push_back(v);
  }
  return out;
}

// The largest gm whose gm x gv accumulators fit the target's registers
// beside gv data vectors and one broadcast.
int64_t MaxRows(const Target& t, int64_t gv) { return (t.NumVectorRegisters() - gv - 1) / gv; }

}  // namespace

bool GemmEligible(const Workload& w, const Target& t) {
  const auto& st = w.Ints("stride");
  const auto& pad = w.Ints("pad");
  if (w.IntOr("in_block", 0) || w.IntOr("out_block", 0)) return false;  // NCHW only
  if (w.Int("groups") != 1 || w.Int("R") != 1 || w.Int("S") != 1 || st[0] != 1 || st[1] != 1 ||
      pad[0] || pad[1] || pad[2] || pad[3] || w.Int("OH") != w.Int("H") ||
      w.Int("OW") != w.Int("W")) {
    return false;
  }
  for (const EpilogueOp& e : w.epilogue) {
    if (e.HasOperand() && !FlatOperandShape(w, e.operand_shape)) return false;
  }
  return !PixelVectorChoices(w, t.NativeVectorLanes()).empty();
}

std::vector<Knob> GemmKnobs(const Workload& w, const Target& t) {
  std::vector<Knob> k = {{"gm", {0}}, {"gv", {0}}};
  if (!GemmEligible(w, t)) return k;
  k[1].choices = PixelVectorChoices(w, t.NativeVectorLanes());
  k[0].choices.clear();
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28}) {
    if (m <= w.Int("K") && m <= MaxRows(t, k[1].choices.front())) k[0].choices.push_back(m);
  }
  return k;
}

absl::Status GemmCheck(const Workload& w, const Target& t, const Config& c) {
  if (!GemmEligible(w, t)) {
    return absl::InvalidArgumentError(
        "conv2d: layout=3 (1x1 GEMM) needs a 1x1, stride-1, unpadded convolution whose pixels "
        "are a multiple of the vector width");
  }
  const int64_t gm = c.at("gm"), gv = c.at("gv");
  if (gm > MaxRows(t, gv)) {
    return absl::InvalidArgumentError(
        StrCat("conv2d 1x1 GEMM: a ", gm, " x ", gv, "-vector accumulator tile needs ",
               gm * gv + gv + 1, " vector registers, the target has ", t.NumVectorRegisters()));
  }
  if (c.at("parallel") && w.Int("N") < 2 && Pixels(w) / (gv * t.NativeVectorLanes()) < 2) {
    return absl::InvalidArgumentError("conv2d 1x1 GEMM: parallel=1 with a single pixel panel");
  }
  return absl::OkStatus();
}

Config GemmDefault(const Workload& w, const Target& t) {
  Config c{{"gm", 0}, {"gv", 0}};
  if (!GemmEligible(w, t)) return c;
  auto k = GemmKnobs(w, t);
  // Of the tiles with at least 3/4 of the most accumulators and at most 4
  // pixel vectors, the one with the fewest loads per FMA (gm broadcasts and
  // gv vectors feed gm * gv FMAs), counting the padded rows of the last
  // panel; ties to more accumulators. A core with two 512-bit FMA units
  // (Intel) is bound by loads at 28 x 1 (256->64 56x56: 0.56 of oneDNN;
  // 6 x 4: 0.64-0.70; 64->256: 0.70 -> 0.87). Seven pixel vectors (28x28
  // images) ran 10x slower.
  int64_t most = 0;
  for (int64_t gv : k[1].choices) {
    if (gv <= 4) most = std::max(most, Pick(k[0].choices, MaxRows(t, gv)) * gv);
  }
  const int64_t K = w.Int("K");
  double best = 1e9;
  for (int64_t gv : k[1].choices) {
    const int64_t gm = Pick(k[0].choices, MaxRows(t, gv));
    if (gv > 4 || 4 * gm * gv < 3 * most) continue;
    const double padded = static_cast<double>((K + gm - 1) / gm * gm) / static_cast<double>(K);
    const double loads = (1.0 / static_cast<double>(gm) + 1.0 / static_cast<double>(gv)) * padded;
    if (loads < best - 1e-9 || (loads < best + 1e-9 && gm * gv > c["gm"] * c["gv"])) {
      best = loads;
      c["gm"] = gm;
      c["gv"] = gv;
    }
  }
  return c;
}

absl::StatusOr<Built> BuildGemm(const Workload& w, const Target& t, const Config& cfg) {
  const int64_t N = w.Int("N"), C = w.Int("C"), K = w.Int("K"), P = Pixels(w);
  const int64_t gm = cfg.at("gm"), tp = cfg.at("gv") * t.NativeVectorLanes();
  const int64_t Ko = (K + gm - 1) / gm;
  // The NCHW buffers seen as [N][C][P] and [N][K][P].
  te::Tensor data = te::Placeholder("data", {N, C, P});
  te::Tensor weight = te::Placeholder("weight", {K, C, 1, 1});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {K});
  std::vector<te::Tensor> eps;
  const std::vector<te::Tensor> eps4 = EpilogueOperands(w);
  for (const EpilogueOp& op : w.epilogue) {
    if (!op.HasOperand()) continue;
    const te::Tensor& e = eps4[eps.size()];
    eps.push_back(
        te::Placeholder(e->name, *FlatOperandShape(w, op.operand_shape), e.buffer()->dtype));
  }
  // [ceil(K/gm)][C][gm] panels, the last padded with zeros (Built::packs).
  auto wpack_of = te::TransformLayoutOf(weight, "OIHW", StrCat("OI", gm, "o"), "wpack");
  if (!wpack_of.ok()) return wpack_of.status();
  te::Tensor wpack = te::Placeholder("weight_packed", {Ko, C, gm});
  IterRange rc = te::ReduceAxis(C, "rc");
  te::Tensor conv = te::Compute("conv", {N, Ko, gm, P}, [&](const std::vector<Var>& i) {
    return te::Sum(data({i[0], rc.var, i[3]}) * wpack({i[1], rc.var, i[2]}), {rc});
  });
  te::Tensor out = te::Compute(
      "out", {N, K, P},
      [&](const std::vector<Var>& i) {
        Expr y = conv({i[0], FloorDiv(i[1], IntImm(gm)), FloorMod(i[1], IntImm(gm)), i[2]});
        if (bias.defined()) y = y + bias({i[1]});
        return ApplyEpilogue(w, y, i, eps);
      },
      IrType(OutputDType(w)));
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  auto [ko, ki] = s.Split(out, s.Axis(out, 1), gm);
  auto [po, pi] = s.Split(out, s.Axis(out, 2), tp);
  s.Reorder(out, {s.Axis(out, 0), po, ko, ki, pi});
  s.Unroll(out, ki);
  s.Vectorize(out, pi);
  if (cfg.at("parallel")) s.Parallel(out, N > 1 ? s.Axis(out, 0) : po);
  s.ComputeAt(conv, out, ko);
  te::IterVar cn = s.Axis(conv, 0), cko = s.Axis(conv, 1), cmi = s.Axis(conv, 2),
              cp = s.Axis(conv, 3);
  s.Reorder(conv, {cn, cko, s.ReduceAxisOf(conv, 0), cmi, cp});
  s.Unroll(conv, cmi);
  s.Vectorize(conv, cp);
  b.SetArgs({data, wpack, bias}, eps, out);
  b.packs.push_back({1, weight, *wpack_of});
  return b;
}

}  // namespace kiln::compiler::ops
