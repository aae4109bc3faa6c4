// conv2d in NCHW[x]c inside the kernel (layout=1 of the conv2d template):
// the input and weights are repacked into channel blocks, the convolution
// runs as an output-channel-vectorized register tile, and the result is
// written back in NCHW with the fused bias and epilogue.
//
//   dpack[n][co][ph][pw][ci]          = padded data[n][co*cb + ci][ph][pw]
//   wpack[ko][co][r][s][ci][kv]       = weight[ko*kb + kv][co*cb + ci][r][s]
//   conv[n][ko][oh][ow][kv]           = sum_{co,r,s,ci} dpack[..] * wpack[..]
//   out[n][k][oh][ow]                 = epilogue(conv[n][k/kb][oh][ow][k%kb] + bias[k])
//
// With in_block / out_block (the layout pass's NCHW[16]c tensors) the input
// is read in its channel blocks (cb divides the block) and the output is
// written in them, kb a multiple of the block: a vector store per register
// of the tile, no scatter along K.
//
// wpack is the kernel's packed weight argument (Built::packs: transformed
// once, at compile time for a model's constants). Schedule: out loops n,
// oho, ko, ohi, owo, owi, kv. dpack (the input rows of `rows` output rows)
// is computed at oho, once for every output-channel block, or skipped
// (pack_data=0) where no padding is read: the convolution then broadcasts
// from the NCHW input directly. The accumulator tile conv[reg_n][kb] is
// computed at owo with its
// reduction loops outside the unrolled pixel loop and the vectorized channel
// loop: each step broadcasts one input value and multiply-adds it into
// reg_n vector accumulators (TVM's conv2d_NCHWc, oneDNN's direct
// convolution). Vectors run along output channels, so strides and narrow
// images waste no lanes.
#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"

namespace kiln::compiler::ops {

using namespace ir;

int64_t TiledWidth(int64_t OW, int64_t rn) { return (OW + rn - 1) / rn * rn; }

namespace {

// Input rows that `rows` output rows read.
int64_t InputRows(const Workload& w, int64_t rows) {
  return (rows - 1) * w.Ints("stride")[0] + (w.Int("R") - 1) * w.Ints("dilation")[0] + 1;
}

int64_t TiledWidth(const Workload& w, int64_t rn) { return ops::TiledWidth(w.Int("OW"), rn); }

// Bytes of the packed input rows of `rows` output rows, as many columns as
// the register tiles of `rn` pixels read: the columns past the last output
// pixel (clamped) are packed too.
int64_t DpackBytes(const Workload& w, int64_t rows, int64_t rn) {
  const int64_t tiled = TiledWidth(w, rn);
  const int64_t columns =
      (tiled - 1) * w.Ints("stride")[1] + (w.Int("S") - 1) * w.Ints("dilation")[1] + 1;
  return 4 * w.Int("C") * InputRows(w, rows) * columns;
}

// The convolution reads its input as is (pack_data=0) only where no padding
// is read.
bool Unpadded(const Workload& w) {
  const auto& pad = w.Ints("pad");
  auto [ph, pw] = PaddedExtent(w);
  return pad[0] == 0 && pad[1] == 0 && ph <= w.Int("H") && pw <= w.Int("W");
}

// fold > 1 reads a 1x1, stride-1, unpadded layer's image as OH / fold rows
// of OW * fold pixels: the rows of NCHW and NCHW[x]c tensors are contiguous,
// so the register tiles run on across rows instead of ending at each row's
// last pixel (a 7-pixel row is a 4- and a 3-pixel tile, or a 6-pixel tile
// with a 1-pixel tail; 49 pixels are eight 6-pixel tiles and a tail).
bool Foldable(const Workload& w) {
  const auto& st = w.Ints("stride");
  return w.Int("R") == 1 && w.Int("S") == 1 && st[0] == 1 && st[1] == 1 && Unpadded(w) &&
         w.Int("H") == w.Int("OH") && w.Int("W") == w.Int("OW") && w.prologue.empty();
}

// The workload of a folded image: `fold` rows in one, the epilogue
// operands' full images folded the same way (a broadcast row or column
// cannot be: nullopt).
std::optional<Workload> FoldRows(const Workload& w, int64_t fold) {
  Workload v = w;
  v.ints["H"] = {w.Int("H") / fold};
  v.ints["OH"] = {w.Int("OH") / fold};
  v.ints["W"] = {w.Int("W") * fold};
  v.ints["OW"] = {w.Int("OW") * fold};
  for (EpilogueOp& e : v.epilogue) {
    if (!e.HasOperand()) continue;
    std::vector<int64_t>& shape = e.operand_shape;
    if (OneElement(shape)) continue;
    if (shape.size() < 4) return std::nullopt;
    if (shape[2] == 1 && shape[3] == 1) continue;
    if (shape[2] != w.Int("OH") || shape[3] != w.Int("OW")) return std::nullopt;
    shape[2] = v.Int("OH");
    shape[3] = v.Int("OW");
  }
  return v;
}

}  // namespace

bool WeightsOutweighInput(const Workload& w) {
  return w.Int("K") * w.Int("R") * w.Int("S") > w.Int("N") * w.Int("H") * w.Int("W");
}

void NchwcParallelDefault(const Workload& w, const std::vector<int64_t>& row_choices, Config& c) {
  c["par_rows"] = 0;
  if (!c["parallel"]) return;
  const int64_t OH = w.Int("OH");
  if (w.Int("R") * w.Int("S") == 1) {
    // A 1x1 layer whose weights stream once per block of rows: one block,
    // the threads sharing out its output-channel blocks.
    if (WeightsOutweighInput(w)) return;
    // Otherwise two or more blocks of rows, so that each thread packs the
    // rows it reads: packed by one thread and read by the other, the input
    // crossed between the cores (MobileNetV2's 576->96 14x14 layer at 2
    // threads: 239 us one block, 75 us two, 131 us at one thread).
    if (OH / c["rows"] < 2) {
      const int64_t half = Pick(row_choices, OH / 2);
      if (half % c["fold"] == 0) c["rows"] = half;
    }
  }
  c["par_rows"] = OH / c["rows"] >= 2 ? 1 : 0;
  // Threads sharing out the output-channel blocks of one block of rows read
  // its packed input, packed by the calling thread alone: where no padding
  // is read, they read the NCHW input directly instead (MobileNetV2's
  // 960->160 7x7 layer at 2 threads: 78 -> 53 us).
  if (!c["par_rows"] && Unpadded(w)) c["pack_data"] = 0;
}

bool NchwcEligible(const Workload& w, const Target& t) {
  return w.Int("groups") == 1 && w.Int("K") % t.NativeVectorLanes() == 0;
}

std::vector<Knob> NchwcKnobs(const Workload& w, const Target& t) {
  const bool ok = NchwcEligible(w, t);
  const int64_t C = w.Int("C"), K = w.Int("K"), OW = w.Int("OW");
  const int lanes = t.NativeVectorLanes();
  std::vector<Knob> k;
  k.push_back({"kb", {0}});
  k.push_back({"cb", {0}});
  k.push_back({"reg_n", {0}});
  k.push_back({"rows", {0}});
  k.push_back({"pack_data", {0}});
  // par_rows=1: with parallel=1, the threads share out the blocks of output
  // rows (each packs its own input rows) instead of the output-channel
  // blocks of one row block after another (the packing then serial).
  k.push_back({"par_rows", {0}});
  // cin > 0: input-channel cache blocking. The accumulators of a whole block
  // of rows (a scratch in L1) are computed cin input channels at a time,
  // every pixel tile of the block in turn, so that a chunk's weights
  // (kb x cin x R x S) are read from L1 for each tile instead of all the
  // weights from L2 or farther (small images, whose weights are read once
  // per tile: the 7x7 layers).
  k.push_back({"cin", {0}});
  // fold: output rows read as one (Foldable); 1 = none.
  k.push_back({"fold", {1}});
  // prefetch=1 (with cin > 0): while a chunk's weights are read from L1 by
  // the block's rows, each row prefetches a share of the next chunk's, so
  // that weights streamed from memory (a model's, which do not stay in the
  // caches from one run to the next) arrive while the FMAs run rather than
  // in a burst the first row waits on.
  k.push_back({"prefetch", {0}});
  k.back().first_if_absent = true;  // added in 0.9.0: off is what ran before
  if (!ok) return k;
  if (Foldable(w)) {
    for (int64_t f = 2; f <= w.Int("OH") && w.Int("OW") * f <= 112; ++f) {
      if (w.Int("OH") % f == 0 && FoldRows(w, f)) k[7].choices.push_back(f);
    }
  }
  for (int64_t cin : {32, 64, 128, 256}) {
    if (cin < C && C % cin == 0) k[6].choices.push_back(cin);
  }
  if (k[6].choices.size() > 1) k[8].choices.push_back(1);
  k[5].choices = {0, 1};
  // kb: one or two vectors, or one or two output blocks (multiples of the
  // vector width; a kChannelBlock-wide block is a multiple of every width).
  const int64_t ib = w.IntOr("in_block", 0);
  k[0].choices = ChannelTileChoices(w, t);
  k[1].choices.clear();
  for (int64_t cb : {1, 2, 4, 8, 16}) {
    if (C % cb == 0 && (ib == 0 || ib % cb == 0)) k[1].choices.push_back(cb);
  }
  if (ib == 0 && C < 16 && C > 1 && C % 2 != 0) k[1].choices.push_back(C);  // the RGB stem
  // Pixels per register tile: the divisors of OW and the usual tile widths
  // (a partial last tile is guarded).
  k[2].choices.clear();
  for (int64_t d = 2; d <= std::min<int64_t>(OW, 28); ++d) {
    if (OW % d == 0 || d == 4 || d == 6 || d == 8 || d == 12 || d == 14) {
      k[2].choices.push_back(d);
    }
  }
  if (k[2].choices.empty()) k[2].choices.push_back(1);
  // Output rows per block of packed input rows (the divisors of OH).
  k[3].choices.clear();
  for (int64_t d = 1; d <= w.Int("OH"); ++d) {
    if (w.Int("OH") % d == 0) k[3].choices.push_back(d);
  }
  k[4].choices = {1};
  if (Unpadded(w)) k[4].choices.insert(k[4].choices.begin(), 0);
  return k;
}

int64_t AccVectors(const Target& t, int64_t kb, int64_t rn) {
  return rn * ((kb + t.NativeVectorLanes() - 1) / t.NativeVectorLanes());
}
int64_t AccBudget(const Target& t, int64_t kb) {
  return t.NumVectorRegisters() - 1 - kb / t.NativeVectorLanes();
}

std::vector<Knob> BlockedTileKnobs(int64_t N, int64_t K, int64_t OW) {
  std::vector<Knob> k;
  k.push_back({"kb", {kChannelBlock}});
  if (K % (2 * kChannelBlock) == 0) k.back().choices.push_back(2 * kChannelBlock);
  k.push_back({"reg_n", {}});
  for (int64_t n = 1; n <= std::min<int64_t>(OW, 28); ++n) {
    if (OW % n == 0 || n == 4 || n == 6 || n == 8 || n == 12 || n == 14) {
      k.back().choices.push_back(n);
    }
  }
  k.push_back({"unroll_j", {0, 1}});
  k.push_back({"parallel", {0, 2}});
  if (N * K / (2 * kChannelBlock) >= 1) k.back().choices.insert(k.back().choices.begin() + 1, 1);
  return k;
}

absl::Status CheckBlockedTile(const Workload& w, const Target& t, const Config& c, int64_t N,
                              int64_t K, const char* what) {
  const int64_t kb = c.at("kb"), rn = c.at("reg_n");
  if (w.IntOr("out_block", 0) != kChannelBlock || K % kb != 0) {
    return absl::InvalidArgumentError(
        StrCat(what, ": needs out_block=", kChannelBlock, " and kb dividing K (", K, ")"));
  }
  if (AccVectors(t, kb, rn) > AccBudget(t, kb)) {
    return absl::InvalidArgumentError(
        StrCat(what, ": a ", rn, " x ", kb, " accumulator tile needs ", AccVectors(t, kb, rn),
               " vector registers, the target has ", t.NumVectorRegisters(), " (", AccBudget(t, kb),
               " for accumulators)"));
  }
  if (c.at("parallel") == 1 && N * (K / kb) < 2) {
    return absl::InvalidArgumentError(
        StrCat(what, ": parallel=1 shares out channel tiles, and there is one"));
  }
  return absl::OkStatus();
}

void DefaultBlockedTile(const Target& t, const std::vector<Knob>& knobs, int64_t N, int64_t K,
                        int64_t OW, int64_t products, Config* c) {
  auto choices = [&](const char* name) {
    return std::find_if(knobs.begin(), knobs.end(), [&](const Knob& k) { return k.name == name; })
        ->choices;
  };
  double best = -1;
  for (int64_t kb : choices("kb")) {
    for (int64_t rn : choices("reg_n")) {
      if (AccVectors(t, kb, rn) > AccBudget(t, kb) - 1) continue;
      const double waste = static_cast<double>(TiledWidth(OW, rn)) / static_cast<double>(OW);
      const double score = static_cast<double>(AccVectors(t, kb, rn)) / waste;
      if (score > best + 1e-9 || (std::fabs(score - best) < 1e-9 && kb > (*c)["kb"])) {
        best = score;
        (*c)["kb"] = kb;
        (*c)["reg_n"] = rn;
      }
    }
  }
  (*c)["unroll_j"] = 0;
  (*c)["parallel"] = 0;
  if (products >= (1 << 18)) (*c)["parallel"] = N * (K / (*c)["kb"]) >= 4 ? 1 : 2;
}

// A folded layer as its workload of folded rows, with rows counted in
// those; nullopt when the config folds nothing.
std::optional<std::pair<Workload, Config>> Folded(const Workload& w, const Config& c) {
  const int64_t fold = c.at("fold");
  if (fold <= 1) return std::nullopt;
  std::optional<Workload> v = FoldRows(w, fold);
  if (!v) return std::nullopt;
  Config fc = c;
  fc["fold"] = 1;
  fc["rows"] = c.at("rows") / fold;
  return std::make_pair(std::move(*v), std::move(fc));
}

absl::Status NchwcCheck(const Workload& w, const Target& t, const Config& c) {
  if (const int64_t fold = c.at("fold"); fold > 1) {
    auto folded = Foldable(w) && w.Int("OH") % fold == 0 && c.at("rows") % fold == 0 ? Folded(w, c)
                                                                                     : std::nullopt;
    if (!folded) {
      return absl::InvalidArgumentError(
          StrCat("conv2d NCHWc: fold=", fold, " needs a 1x1, stride-1, unpadded layer, fold ",
                 "dividing OH (", w.Int("OH"), ") and rows (", c.at("rows"),
                 "), and epilogue operands of whole images"));
    }
    return NchwcCheck(folded->first, t, folded->second);
  }
  const int64_t kb = c.at("kb"), cb = c.at("cb"), rn = c.at("reg_n");
  const int64_t C = w.Int("C");
  if (AccVectors(t, kb, rn) > AccBudget(t, kb)) {
    return absl::InvalidArgumentError(
        StrCat("conv2d NCHWc: a ", rn, " x ", kb, " accumulator tile needs ", AccVectors(t, kb, rn),
               " vector registers, the target has ", t.NumVectorRegisters(), " (", AccBudget(t, kb),
               " for accumulators)"));
  }
  if (C % cb != 0) return absl::InvalidArgumentError("conv2d NCHWc: cb must divide C");
  if (auto s = CheckChannelTile(w, t, kb, "kb"); !s.ok()) return s;
  if (const int64_t ib = w.IntOr("in_block", 0); ib > 0 && ib % cb != 0) {
    return absl::InvalidArgumentError(
        StrCat("conv2d NCHWc: cb=", cb, " must divide in_block (", ib, ")"));
  }
  if (c.at("par_rows") && (!c.at("parallel") || w.Int("OH") / c.at("rows") < 2)) {
    return absl::InvalidArgumentError(StrCat("conv2d NCHWc: par_rows=1 needs parallel=1 and ",
                                             "two or more blocks of rows (rows=", c.at("rows"),
                                             " of ", w.Int("OH"), ")"));
  }
  if (const int64_t cin = c.at("cin"); cin > 0) {
    const int64_t acc = 4 * c.at("rows") * w.Int("OW") * kb;
    if (cin % cb != 0 || acc > 32 * 1024 ||
        (c.at("parallel") && !c.at("par_rows") && w.Int("K") / kb < 2)) {
      return absl::InvalidArgumentError(
          StrCat("conv2d NCHWc: cin=", cin, " needs cb dividing it, the accumulators of a block ",
                 "of rows within 32 KiB (", acc, " bytes) and, in parallel, par_rows=1 or two ",
                 "or more output-channel blocks"));
    }
  }
  if (c.at("prefetch") && c.at("cin") == 0) {
    return absl::InvalidArgumentError("conv2d NCHWc: prefetch=1 needs cin > 0");
  }
  const int64_t dbytes = DpackBytes(w, c.at("rows"), rn);
  if (c.at("pack_data") && dbytes > kMaxScratchBytes) {
    return absl::InvalidArgumentError(
        StrCat("conv2d NCHWc: the packed input rows of ", c.at("rows"), " output rows (", dbytes,
               " bytes) exceed ", kMaxScratchBytes, " bytes of scratch"));
  }
  return absl::OkStatus();
}

Config NchwcDefault(const Workload& w, const Target& t, const std::vector<Knob>& knobs) {
  Config c;
  auto choices = [&](const std::string& name) {
    for (const Knob& k : knobs) {
      if (k.name == name) return k.choices;
    }
    return std::vector<int64_t>{0};
  };
  c["cb"] = choices("cb").front();
  c["kb"] = choices("kb").front();
  c["reg_n"] = choices("reg_n").front();
  c["rows"] = choices("rows").front();
  // Packed input rows by default: the direct NCHW reads (pack_data=0) step
  // through channels a whole image apart, which the prefetchers do not follow
  // (measured slower on every ResNet-50 1x1 layer but 256->64 56x56, a tie).
  // In channel blocks, the direct reads are contiguous 16-channel runs:
  // read as they are where no padding is read.
  c["pack_data"] =
      w.IntOr("in_block", 0) > 0 ? choices("pack_data").front() : choices("pack_data").back();
  c["par_rows"] = 0;
  c["cin"] = 0;
  c["fold"] = 1;
  c["prefetch"] = 0;
  if (!NchwcEligible(w, t)) return c;
  // The tile with the most useful accumulators: vectors per step, discounted
  // by the partial last tile's waste; ties to the wider channel block, then
  // to no fold. Rows of 14 or fewer pixels are folded where that wastes
  // less: on AVX2, 7 pixels take a 4- and a 3-pixel tile of 8 and 6
  // accumulators, 49 take 6-pixel tiles of 12 (ResNet-50's and MobileNetV2's
  // 7x7 and 14x14 1x1 layers ran 3-35 % faster, one 3 % slower; wider rows
  // are not folded by default, unmeasured).
  const int64_t OW = w.Int("OW");
  double best = -1;
  for (int64_t fold : choices("fold")) {
    if (fold > 1 && OW > 14) continue;
    const int64_t width = OW * fold;
    for (int64_t kb : choices("kb")) {
      for (int64_t rn : choices("reg_n")) {
        if (AccVectors(t, kb, rn) > AccBudget(t, kb) - 1) continue;
        const double waste =
            static_cast<double>(TiledWidth(width, rn)) / static_cast<double>(width);
        double score = static_cast<double>(AccVectors(t, kb, rn)) / waste;
        if (score > best + 1e-9 ||
            (std::fabs(score - best) < 1e-9 && fold == c["fold"] && kb > c["kb"])) {
          best = score;
          c["kb"] = kb;
          c["reg_n"] = rn;
          c["fold"] = fold;
        }
      }
    }
  }
  // The most output rows whose input rows stay in about half an L2:
  // weights are read once per block of rows. A small image (the 7x7 layers)
  // is one block when its whole input fits an L2: its weights, megabytes,
  // are then streamed once instead of once per row.
  const int64_t row_bytes = c["pack_data"] ? 0 : 4 * w.Int("C") * w.Int("W");
  for (int64_t r : choices("rows")) {
    int64_t bytes = c["pack_data"] ? DpackBytes(w, r, c["reg_n"]) : row_bytes * InputRows(w, r);
    const bool whole = r == choices("rows").back() && InputRows(w, r) >= w.Int("H");
    if (bytes <= (whole ? 512 : 256) * 1024) c["rows"] = r;
  }
  // Every block of rows streams all the weights: where they outweigh the
  // whole image's input rows, one block, if its packed rows fit the scratch
  // limit (ResNet-50's 1024->2048 14x14 stride-2 1x1 layer: 8 MB of weights
  // read 7 times at one row per block; 2.28 -> 1.37 ms).
  const int64_t all_rows = choices("rows").back();
  const int64_t in_bytes =
      c["pack_data"] ? DpackBytes(w, all_rows, c["reg_n"]) : row_bytes * InputRows(w, all_rows);
  if (WeightsOutweighInput(w) && (!c["pack_data"] || in_bytes <= kMaxScratchBytes)) {
    c["rows"] = all_rows;
  }
  // Folded rows come in whole folds.
  if (c["rows"] % c["fold"] != 0) c["rows"] = (c["rows"] / c["fold"] + 1) * c["fold"];
  while (w.Int("OH") % c["rows"] != 0) c["rows"] += c["fold"];
  // Input channels per step: at most 256 weight floats (1 KiB) per kernel
  // tap, i.e. 16 channels with 16-wide blocks and 8 with 32-wide ones.
  // Measured on AVX-512 (Zen 4/5): kb=32 with cb=16 ran the 512->512 7x7
  // layer at half the speed of kb=32 with cb=8 or kb=16 with cb=16.
  c["cb"] = Pick(choices("cb"), std::max<int64_t>(1, 256 / c["kb"]));
  // Small images with large weights: input-channel blocks of 32, so that a
  // chunk's weights are read from L1 by every pixel tile of the rows instead
  // of all the weights from L2 or memory once per tile. ResNet-50 (every
  // layer of 14x14 and 7x7, 1-9 MB of weights each) on an AVX-512 Xeon:
  // 50.6 -> 49.5 ms at 1 thread, 28.6 -> 27.4 ms at 2; MobileNetV2's 7x7
  // layers of 0.5 MB or more too (3-5 %), not its 14x14 ones (slower at 2
  // threads with them).
  const int64_t weight_bytes = 4 * w.Int("K") * w.Int("C") * w.Int("R") * w.Int("S");
  const auto cins = choices("cin");
  // (Default drops it where the config's check refuses it.)
  if (OW <= 14 && weight_bytes >= 512 * 1024 &&
      std::find(cins.begin(), cins.end(), 32) != cins.end()) {
    c["cin"] = 32;
  }
  return c;
}

absl::StatusOr<Built> BuildNchwc(const Workload& w, const Config& cfg) {
  if (auto folded = Folded(w, cfg)) return BuildNchwc(folded->first, folded->second);
  const int64_t N = w.Int("N"), C = w.Int("C"), H = w.Int("H"), W = w.Int("W"), K = w.Int("K");
  const int64_t R = w.Int("R"), S = w.Int("S"), OH = w.Int("OH"), OW = w.Int("OW");
  const auto& st = w.Ints("stride");
  const auto& dil = w.Ints("dilation");
  const int64_t kb = cfg.at("kb"), cb = cfg.at("cb"), rn = cfg.at("reg_n");
  const int64_t Ko = K / kb, Co = C / cb;
  const int64_t ib = w.IntOr("in_block", 0);
  auto [PH, PW] = PaddedExtent(w);
  te::Tensor data = te::Placeholder("data", BlockedShape({N, C, H, W}, ib));
  // Input channel co*cb + ci (ci < cb; cb divides in_block) at (n, h, x).
  auto input = [&](Expr n, Expr co, Expr ci, Expr h, Expr x) {
    if (ib == 0) return data({n, co * IntImm(cb) + ci, h, x});
    const int64_t m = ib / cb;
    return data({n, FloorDiv(co, IntImm(m)), h, x, FloorMod(co, IntImm(m)) * IntImm(cb) + ci});
  };
  te::Tensor weight = te::Placeholder("weight", {K, C, R, S});
  te::Tensor bias;
  if (w.Int("bias")) bias = te::Placeholder("bias", {K});
  auto eps = EpilogueOperands(w);
  // Clamped indices keep the (unselected) loads in bounds, also for the
  // columns a tile reads past the padded width.
  te::Tensor dpack = te::Compute("dpack", {N, Co, PH, PW, cb}, [&](const std::vector<Var>& i) {
    return PaddedLoad(w, i[2], i[3], [&](const Expr& hc, const Expr& xc) {
      return input(i[0], i[1], i[4], hc, xc);
    });
  });
  // The weights are packed once, ahead of the calls (Built::packs), into
  // [K/kb][C/cb][R][S][cb][kb] blocks.
  auto wpack_of = te::TransformLayoutOf(weight, "OIHW", StrCat("OIHW", cb, "i", kb, "o"), "wpack");
  if (!wpack_of.ok()) return wpack_of.status();
  te::Tensor wpack = te::Placeholder("weight_packed", {Ko, Co, R, S, cb, kb});
  IterRange rco = te::ReduceAxis(Co, "rco"), ry = te::ReduceAxis(R, "ry"),
            rx = te::ReduceAxis(S, "rx"), rci = te::ReduceAxis(cb, "rci");
  const bool pack_data = cfg.at("pack_data") != 0;
  te::Tensor conv = te::Compute("conv", {N, Ko, OH, OW, kb}, [&](const std::vector<Var>& i) {
    Expr h = i[2] * IntImm(st[0]) + ry.var * IntImm(dil[0]);
    Expr x = i[3] * IntImm(st[1]) + rx.var * IntImm(dil[1]);
    Expr in =
        pack_data ? dpack({i[0], rco.var, h, x, rci.var}) : input(i[0], rco.var, rci.var, h, x);
    return te::Sum(in * wpack({i[1], rco.var, ry.var, rx.var, rci.var, i[4]}), {rco, ry, rx, rci});
  });
  te::Tensor out = ChannelTiledOutput(
      w, kb, bias, eps,
      [&](const Var& n, const Expr& ko, const Expr& kin, const Var& oh, const Var& ow) {
        return conv({n, ko, oh, ow, kin});
      });
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  auto [ko, km, kv] = SplitChannelTiles(s, out, w, kb);
  auto [oho, ohi] = s.Split(out, s.Axis(out, 2), cfg.at("rows"));
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), rn);
  if (km) {
    s.Reorder(out, {oho, ko, ohi, owo, owi, km, kv});
    s.Unroll(out, km);
  } else {
    s.Reorder(out, {oho, ko, ohi, owo, owi, kv});
  }
  if (w.IntOr("out_block", 0) > 0) {
    // A vector store per pixel and block.
    s.Vectorize(out, kv);
  } else {
    // Unrolled, so that the accumulator tile is read at constant offsets and
    // stays in registers (a vector store here would scatter along K); SLP
    // turns the stores of a channel's reg_n pixels into vector stores.
    s.Unroll(out, kv);
    b.slp_vectorize = true;
  }
  s.Unroll(out, owi);
  if (cfg.at("parallel")) s.Parallel(out, cfg.at("par_rows") ? oho : Ko >= 2 ? ko : ohi);
  if (pack_data) s.ComputeAt(dpack, out, oho);
  // conv: reductions outside the register tile [reg_n pixels x kb channels],
  // computed per tile, or (cin > 0) per block of rows with the chunks of
  // cin input channels outside its tiles.
  const int64_t cin = cfg.at("cin");
  s.ComputeAt(conv, out, cin > 0 ? ko : owo);
  te::IterVar cn = s.Axis(conv, 0), ck = s.Axis(conv, 1), coh = s.Axis(conv, 2),
              cow = s.Axis(conv, 3), ckv = s.Axis(conv, 4);
  te::IterVar rco_i = s.ReduceAxisOf(conv, 0), ry_i = s.ReduceAxisOf(conv, 1),
              rx_i = s.ReduceAxisOf(conv, 2), rci_i = s.ReduceAxisOf(conv, 3);
  if (cin > 0) {
    auto [rco_o, rco_in] = s.Split(conv, rco_i, cin / cb);
    auto [cwo, cwi] = s.Split(conv, cow, rn);
    s.Reorder(conv, {cn, ck, rco_o, coh, cwo, rco_in, ry_i, rx_i, rci_i, cwi, ckv});
    // The next chunk's weights are fetched while this one's are re-read
    // from L1, a share in each block row (every row reads all of a chunk).
    if (cfg.at("prefetch")) s.Prefetch(conv, rx_i, wpack, rco_o, 1, coh);
    cow = cwi;
  } else {
    s.Reorder(conv, {cn, ck, coh, rco_i, ry_i, rx_i, rci_i, cow, ckv});
  }
  s.Unroll(conv, cow);
  s.Vectorize(conv, ckv);
  if (cfg.at("unroll_acc") && cb <= 16) s.Unroll(conv, rci_i);
  b.SetArgs({data, wpack, bias}, eps, out);
  b.packs.push_back({1, weight, *wpack_of});
  return b;
}

}  // namespace kiln::compiler::ops
