#pragma once
// Shared by the conv2d template's layouts (internal to compiler/ops): direct
// NCHW (conv2d.cc), NCHW[x]c inside the kernel (conv2d_nchwc.cc),
// depthwise rows (conv2d_depthwise.cc) and 1x1 as GEMM (conv2d_gemm.cc).
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "compiler/ops/common.h"

namespace kiln::compiler::ops {

using te::kMaxScratchBytes;

// Direct NCHW convolution: data[N][C][H][W], weight[K][C/groups][R][S],
// bias[K] (undefined without one), the zero-padded input `pad` (undefined
// when unpadded; its consumers inline it or keep it), conv[N][K][OH][OW]
// (reduction over rc, ry, rx) and out = ConvOutput(conv).
struct DirectConvComputes {
  te::Tensor data, weight, bias, pad, conv, out;
  std::vector<te::Tensor> eps;
};
DirectConvComputes DirectConv(const Workload& w);

// Extent of the padded input the convolution reads: the padded size, or more
// when the output shape reads past it (the excess reads zeros).
std::pair<int64_t, int64_t> PaddedExtent(const Workload& w);

// The output stage out[n][k][oh][ow] = epilogue(conv[n][k][oh][ow] + bias[k])
// (bias when defined).
te::Tensor ConvOutput(const Workload& w, const te::Tensor& conv, const te::Tensor& bias,
                      const std::vector<te::Tensor>& eps);

// The zero-padded input at padded row h_pad and column x_pad (before the
// top / left padding is subtracted): load(hc, xc) at the clamped in-bounds
// indices (the unselected loads stay in bounds, also past the padded
// extent), zero outside the H x W input.
ir::Expr PaddedLoad(const Workload& w, const ir::Expr& h_pad, const ir::Expr& x_pad,
                    const std::function<ir::Expr(const ir::Expr&, const ir::Expr&)>& load);

// The output stage of a template whose result comes in tiles of kb output
// channels: src(n, ko, kin, oh, ow) is channel ko*kb + kin. NCHW (out_block
// 0): out[n][k][oh][ow]; blocked: out[n][k / ob][oh][ow][k % ob], kb a
// multiple of ob. Bias and epilogue applied.
te::Tensor ChannelTiledOutput(
    const Workload& w, int64_t kb, const te::Tensor& bias, const std::vector<te::Tensor>& eps,
    const std::function<ir::Expr(const ir::Var&, const ir::Expr&, const ir::Expr&, const ir::Var&,
                                 const ir::Var&)>& src);
// Splits ChannelTiledOutput's channel axis into ko (tiles of kb channels),
// km (the tile's blocks, blocked output with kb > ob; else null) and kv (the
// channels of a tile, or of a block: the vector).
struct ChannelTileAxes {
  te::IterVar ko, km, kv;
};
ChannelTileAxes SplitChannelTiles(te::Schedule& s, const te::Tensor& out, const Workload& w,
                                  int64_t kb);
// kb choices of a channel-tiled template: one or two vectors, or one or two
// output blocks, dividing K (never empty: a lone invalid choice is refused by
// CheckChannelTile); and the check of a config's kb.
std::vector<int64_t> ChannelTileChoices(const Workload& w, const Target& t);
absl::Status CheckChannelTile(const Workload& w, const Target& t, int64_t kb, const char* knob);

// Vector accumulators of a register tile of `tiles` pixels (or tiles) x kb
// output channels, and the most the target's registers hold beside one
// weight vector per kb lanes and a broadcast (NCHWc and Winograd).
int64_t AccVectors(const Target& t, int64_t kb, int64_t tiles);
int64_t AccBudget(const Target& t, int64_t kb);

// The pixels that register tiles of rn pixels cover in a row of OW: a
// partial last tile runs past the row.
int64_t TiledWidth(int64_t OW, int64_t rn);

// The register tiles of the convs whose vectors run along output-channel
// blocks and broadcast a pixel's word per step (conv_int8_blocked.cc,
// conv2d_bf16.cc), of N images, K output channels and OW-pixel rows. Knobs:
// kb (one or two blocks), reg_n (OW's divisors up to 28, and 4, 6, 8, 12,
// 14), unroll_j (a block's words in one step), parallel (0: serial; 1: the
// threads share out the tiles of kb channels; 2: the output rows). The
// check (`what` names the template): out_block, kb dividing K, the
// accumulators within the registers, tiles to share out for parallel=1.
// The default: the most useful accumulators (vectors per step, less the
// last tile's waste), ties to the wider channel tile (fewer broadcasts per
// multiply); in parallel from 2^18 products, over channel tiles where there
// are 4 or more.
std::vector<Knob> BlockedTileKnobs(int64_t N, int64_t K, int64_t OW);
absl::Status CheckBlockedTile(const Workload& w, const Target& t, const Config& c, int64_t N,
                              int64_t K, const char* what);
void DefaultBlockedTile(const Target& t, const std::vector<Knob>& knobs, int64_t N, int64_t K,
                        int64_t OW, int64_t products, Config* c);

// layout=1: offered for groups=1 and K a multiple of the vector width.
bool NchwcEligible(const Workload& w, const Target& t);
// kb (output-channel block: the vector), cb (input-channel block), reg_n
// (output pixels per register tile); a single 0 choice each when not
// eligible.
std::vector<Knob> NchwcKnobs(const Workload& w, const Target& t);
absl::Status NchwcCheck(const Workload& w, const Target& t, const Config& c);
// kb, cb and reg_n of the default config.
Config NchwcDefault(const Workload& w, const Target& t, const std::vector<Knob>& knobs);
absl::StatusOr<Built> BuildNchwc(const Workload& w, const Config& c);
// Whether the weights, read once per block of output rows, are more than the
// input (4 K C R S > 4 N C H W bytes).
bool WeightsOutweighInput(const Workload& w);
// par_rows (and rows, for a 1x1 layer) of the default config once its
// `parallel` is chosen: the threads share out blocks of rows, each packing
// its own input rows, where there are two or more and the weights do not
// outweigh the input.
void NchwcParallelDefault(const Workload& w, const std::vector<int64_t>& row_choices, Config& c);

// layout=2 (conv2d_depthwise.cc): groups = C = K. Knob dw_ow (output pixels
// per vector accumulator tile; a single 0 choice when not eligible).
bool DepthwiseEligible(const Workload& w);
// Blocked (in_block) with 28 output rows or more: in parallel, the threads
// share out the output rows instead of the channel blocks, as the 1x1
// layers beside such a layer split theirs (NCHWc's par_rows, the GEMM's
// pixel panels), so that each thread reads the rows it wrote, from its own
// core's cache. A property of the graph, not a knob: a kernel timed alone
// cannot see it. MobileNetV2 at 2 threads on an AVX-512 Xeon, untuned:
// 4-6 % faster in each of four runs (3.04 -> 2.89 ms), the same at 1 thread; timed
// alone, its 32-channel 112x112 layer ran 58 -> 72 us, and the tuner picked
// the channel split back for three of six such layers when it was a knob.
// The 14x14 and 7x7 layers' rows split too: 2.82 against 2.74 ms.
bool DepthwiseSplitsRows(const Workload& w);
inline constexpr int64_t kDepthwiseSplitRows = 28;
// The schedule of a depthwise conv in channel blocks (float32 and int8):
// out [N][C/16][OH][OW][16], or NCHW split into cb and v (blocked_out
// false), computed from prow (the padded input rows, [..][h][x][16]) and
// conv ([n][cb][oh][ow][16], reduced over R then S): tiles of dw_ow pixels,
// in parallel over the channel blocks or (split_rows) the output rows.
// Returns whether SLP must vectorize the unrolled NCHW stores.
bool ScheduleBlockedDepthwise(te::Schedule& s, const te::Tensor& out, te::IterVar cb, te::IterVar v,
                              const te::Tensor& prow, const te::Tensor& conv, int64_t dw_ow,
                              bool parallel, bool split_rows, bool blocked_out, bool unroll_taps);
std::vector<Knob> DepthwiseKnobs(const Workload& w, const Target& t);
absl::Status DepthwiseCheck(const Workload& w, const Config& c);
Config DepthwiseDefault(const Workload& w, const Target& t);
absl::StatusOr<Built> BuildDepthwise(const Workload& w, const Target& t, const Config& c);

// layout=3 (conv2d_gemm.cc): 1x1, stride 1, unpadded, H*W a multiple of the
// vector width. Knobs gm (output channels per register tile) and gv (pixel
// vectors per tile); a single 0 choice each when not eligible.
bool GemmEligible(const Workload& w, const Target& t);
std::vector<Knob> GemmKnobs(const Workload& w, const Target& t);
absl::Status GemmCheck(const Workload& w, const Target& t, const Config& c);
Config GemmDefault(const Workload& w, const Target& t);
absl::StatusOr<Built> BuildGemm(const Workload& w, const Target& t, const Config& c);

// layout=4 and 5 (conv2d_winograd.cc): Winograd F(4x4, 3x3) and F(2x2, 3x3)
// for 3x3, stride-1, undilated, ungrouped layers, K a multiple of the vector
// width. Knobs wg_kb (output channels per vector accumulator tile) and wg_tw
// (input tiles per register tile), wg_rows (rows of tiles per block) and
// wg_par (what runs in parallel), shared by both tile sizes; a single 0
// choice each when neither is eligible.
inline constexpr int64_t kWinograd4Layout = 4;
inline constexpr int64_t kWinograd2Layout = 5;
bool WinogradEligible(const Workload& w, const Target& t, int64_t layout);
std::vector<Knob> WinogradKnobs(const Workload& w, const Target& t);
absl::Status WinogradCheck(const Workload& w, const Target& t, const Config& c);
Config WinogradDefault(const Workload& w, const Target& t, int64_t layout);
absl::StatusOr<Built> BuildWinograd(const Workload& w, const Target& t, const Config& c);

// The blocked convolutions as AMX tile products (conv_amx.cc): the
// knobs amx, amx_m (pixels of a box), amx_n (its channels) appended to a
// blocked template's where `fits`; their check (the vector template's knobs
// at their first values with amx=1); the default: amx=1 where it fits and
// pays (ConvAmxPays: int8 from 64 bytes of products per pixel and 64
// output channels, bf16 from 256 bytes and 128). Int8ConvAmxFits: AMX-INT8, uint8 x, C a multiple
// of 4, one image, blocked output; BuildInt8ConvAmx builds it.
void AddConvAmxKnobs(std::vector<Knob>& k, bool fits, const GenericConvDims& g, int64_t lanes);
absl::Status CheckConvAmx(const Config& c, int64_t pixels, const char* what);
bool ConvAmxPays(int64_t tap_bytes, int64_t K, bool int8);
void DefaultConvAmx(Config* c, bool fits, const GenericConvDims& g, int64_t lanes, int64_t products,
                    bool int8);
bool Int8ConvAmxFits(const Workload& w, const Target& t);
absl::StatusOr<Built> BuildInt8ConvAmx(const Workload& w, const Target& t, const Config& c);

// The AMX convolution's parts, shared by the int8 and the bf16 templates:
// an im2col of 32-bit words (`lanes` channels each: 4 bytes, 2 bf16) per
// call, the weights packed to match at compile time ([K / amx_n][Q (+1)]
// [amx_n], Q the words of R S C rounded up to whole tile steps; the extra
// row `last_row` per output channel where defined), and acc[P][K] whose
// boxes ScheduleAmxConv tensorizes into `intrinsic` under `out` (blocked:
// [1][K / 16][OH][OW][16]; parallel=2 over pixel boxes, 1 over channel
// panels). No dilation: `g`'s fields say the layer.
struct AmxConvSpec {
  ir::Intrinsic intrinsic;  // amx_dpbusd, amx_dpbf16ps
  ir::Intrinsic dot;        // one word's products, the compute's spec: dot4_vnni, dot2_bf16
  int64_t lanes;            // channels per word
  int64_t run = 0;          // words of a pixel contiguous in the input (its channel block)
  ir::DataType acc_type;
  // The word of channels c0 .. c0 + lanes - 1 at input pixel (ih, iw), the
  // padding's value outside the image.
  std::function<ir::Expr(ir::Expr c0, ir::Expr ih, ir::Expr iw)> input_word;
  // The word of weights [k][c0 .. c0 + lanes - 1][r][s].
  std::function<ir::Expr(ir::Expr k, ir::Expr c0, ir::Expr r, ir::Expr s)> weight_word;
  te::Tensor last_row;
};
// In place (amx_direct=1, where AmxInPlaceFits: stride 1, taps of more
// than one pixel, whole tile steps of channels a pixel): no im2col; the
// input's words are written out once per call as a padded image of pixels,
// [rows][C / lanes] (xpad), whose rows the tiles read in place, each tap a
// shift of the rows; acc's rows are that image's pixels (OW + S - 1 a row,
// the last S - 1 of each row and the boxes' tails computed and never read).
bool AmxInPlaceFits(const GenericConvDims& g, int64_t lanes);
struct AmxConvStages {
  te::Tensor wpack_of, wpack, im2col, acc;
  // Taps of more than one pixel (R S > 1): the input's words with the
  // padding written out, [runs][(OH - 1) sh + R][(OW - 1) sw + S][run],
  // which the im2col copies from without bounds checks; undefined for 1x1.
  te::Tensor xpad;
  int64_t P = 0, Q = 0;  // pixels, words of a pixel's taps
  int64_t run = 1;       // the im2col's vectors: spec.run where it divides a tap's words
  int64_t tap_runs = 0;  // runs of a tap
  bool in_place = false;
  int64_t row = 0;  // acc's rows per output row: OW, or in place OW + S - 1
  // In place: the bytes of one of xpad's pixels, and where the tiles find
  // each tap (AmxTileProducts).
  int64_t a_row_bytes = 0;
  AmxInPlaceTaps taps{};
  // acc's row of output pixel (oh, ow).
  ir::Expr AccRow(const ir::Expr& oh, const ir::Expr& ow) const {
    return oh * ir::IntImm(row) + ow;
  }
};
AmxConvStages AmxConvCompute(const GenericConvDims& g, const Config& c, const AmxConvSpec& spec);
void ScheduleAmxConv(te::Schedule& s, const te::Tensor& out, const AmxConvStages& st,
                     const Config& c, ir::Intrinsic intrinsic);

}  // namespace kiln::compiler::ops
