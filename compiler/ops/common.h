#pragma once

// Shared pieces of the operator templates (internal to compiler/ops).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/config.h"
#include "compiler/ir/ir.h"
#include "compiler/kernel.h"
#include "compiler/target.h"
#include "compiler/te/layout.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "compiler/workload.h"

namespace kiln::compiler::ops {

// A template's compute + schedule, ready to lower.
struct Built {
  std::unique_ptr<te::Schedule> schedule;
  std::vector<te::Tensor> args;  // KernelSignature order
  // Inputs the kernel takes in a layout of its own (compiler/kernel.h
  // PackedInput): args[input] is a placeholder of that layout, and `packed`
  // computes it from `source`, a placeholder of the input as the workload
  // declares it.
  struct Pack {
    int input = 0;
    te::Tensor source;
    te::Tensor packed;
  };
  std::vector<Pack> packs;
  // The schedule unrolls a register tile into scalar stores (a transpose,
  // e.g. channel vectors written to NCHW) that LLVM's SLP vectorizer turns
  // into vector stores, 1.5x faster on MobileNetV2's expand layers. Off
  // elsewhere: SLP finds nothing in the other templates' code and costs 5 %
  // of a build (git history of docs/results.md, session twelve).
  bool slp_vectorize = false;

  // args = the op's inputs (undefined ones, e.g. an absent bias, skipped),
  // then the epilogue operands, then the output.
  void SetArgs(std::vector<te::Tensor> inputs, const std::vector<te::Tensor>& epilogue,
               const te::Tensor& out) {
    args.clear();
    for (auto& t : inputs) {
      if (t.defined()) args.push_back(std::move(t));
    }
    args.insert(args.end(), epilogue.begin(), epilogue.end());
    args.push_back(out);
  }
};

struct OpTemplate {
  std::vector<Knob> (*knobs)(const Workload&, const Target&);
  Config (*default_config)(const Workload&, const Target&);
  // Combination checks after CheckConfigAgainstKnobs.
  absl::Status (*check)(const Workload&, const Target&, const Config&);
  absl::StatusOr<Built> (*build)(const Workload&, const Target&, const Config&);
  // One good config per algorithm the template offers (the default first),
  // which the tuner measures before it searches, so that no algorithm goes
  // untimed because the cost model learned the others first (TensorRT times
  // every tactic). nullptr: the default only.
  std::vector<Config> (*variants)(const Workload&, const Target&) = nullptr;
};

const OpTemplate* Conv2dTemplate();
const OpTemplate* DenseTemplate();
// dense on a GPU (Target::is_gpu): thread-bound tiles (dense_gpu.cc).
const OpTemplate* GpuDenseTemplate();
// eltwise on a GPU: every axis fused, `threads` per block (eltwise.cc).
const OpTemplate* GpuEltwiseTemplate();
// conv2d on a GPU: a register tile of output channels x columns per thread
// (conv2d_gpu.cc).
const OpTemplate* GpuConv2dTemplate();
// pool2d / pool3d on a GPU: one output element per thread (pool.cc).
const OpTemplate* GpuPoolTemplate();
// The generic operators on a GPU: one output element per thread
// (generic_template.cc).
const OpTemplate* GpuGenericTemplate();
// pool2d and pool3d (the spatial rank comes from the workload op).
const OpTemplate* PoolTemplate();
const OpTemplate* EltwiseTemplate();
// Pieces of the int8 templates: the int32 of 4 bytes (byte j, an 8-bit
// integer, in bits 8j .. 8j+7: what one 32-bit load of them gives); those
// bytes with their top bits flipped (int8 + 128 as uint8); an 8-bit input's
// zero point (a one-element tensor) as the unsigned operand's, in int32
// (+ 128 for an int8 input, whose bytes are flipped); the dot-product
// intrinsic for target t (dot4_vnni where it has a 4-byte dot-product
// instruction: AVX512-VNNI or AVX-VNNI on x86, dotprod or i8mm on AArch64;
// else dot4; codegen/llvm_intrinsics.h).
ir::Expr PackBytes4(const std::function<ir::Expr(int)>& byte);
// Two 16-bit values (int32 expressions in range) as one int32's low and high
// halves; and whether a template multiplies bytes in such pairs (dot2:
// pmaddwd, exact) rather than in 4-byte words, as on targets without VNNI.
ir::Expr PackHalves(const ir::Expr& lo, const ir::Expr& hi);
// Bytes 2p and 2p + 1 of a word of 4 (p an int expression, 0 or 1) as such
// a pair: the unsigned bytes, zero-extended.
ir::Expr PairOfBytes(const ir::Expr& word, const ir::Expr& p);
bool PairsOfHalves(const Target& t);
ir::Expr FlipBytes(ir::Expr packed);
// The bfloat16 nearest float32 `x` (ties to even; a NaN stays a NaN): its 16
// bits in the low half of an int32 (two of them make a word for PackHalves
// and the dot2_bf16 intrinsic).
ir::Expr Bf16Bits(const ir::Expr& x);
ir::Expr UnsignedZeroPoint(const te::Tensor& zero_point, bool signed_input);
ir::Intrinsic Dot4Intrinsic(const Target& t);

// AMX (codegen/llvm_amx.h): the byte products of the int8 matmul
// (AMX-INT8) and the bfloat16 pairs of the bf16 dense (AMX-BF16) as tile
// products, where the CPU has them. A template offers amx=1 when its
// operands fit (AmxFits), tensorizes its tile_m x tile_n acc box with
// AmxTileProducts, and keeps tiles of whole 16x16 blocks (CheckAmxTiles).
constexpr int64_t kAmxTile = 16;      // rows and 4-byte columns of a tile
constexpr int64_t kAmxRowBytes = 64;  // bytes of a tile row: one step of k
// Whether `t` has the AMX extension (`unit`: "amx-int8" or "amx-bf16") and
// A's rows of `row_bytes` are whole tile steps, at most 256 KiB for the 16
// rows of stack the last rows are copied to.
bool AmxFits(const Target& t, const char* unit, int64_t row_bytes);
// The row size part of AmxFits, for rules that know no target.
bool AmxRowsFit(int64_t row_bytes);
// A row of `words` 32-bit words rounded up to whole tile steps, in words
// (the AMX convolutions' im2col rows).
int64_t AmxStepWords(int64_t words);
// amx=1 (and tile_m choices of 16, 32, 64 rows below m + 16) where `fits`.
void AddAmxKnobs(std::vector<Knob>& knobs, int64_t m, bool fits);
// amx=1: tiles of whole 16x16 blocks and tile_k 1 (the tiles take the whole
// k); amx=0: at most `vector_rows` rows (the registers' tile).
// INVALID_ARGUMENT naming `what` otherwise.
absl::Status CheckAmxTiles(const Config& c, int64_t vector_rows, const char* what);
// The emitter of an acc box (tile_m x tile_n over the last two data axes)
// as `intrinsic` (amx_dpbusd, amx_dpbf16ps) from A's rows (row_bytes apart,
// from A[lead..., m0, 0], lead the box's leading indices) and B's panel
// n0 / tile_n of Bp ([panels][k steps of 4 bytes a column][tile_n] int32,
// whose every 16 rows are one tile step). With `in_place`, A is read in place
// (codegen/llvm_amx.h): its rows are a padded image's pixels, row_bytes
// apart, each tap a shift of them, and the box is always tile_m rows.
struct AmxInPlaceTaps {
  int64_t tap_row_bytes;  // the shift of one tap row
  int64_t taps_per_row;   // S
  int64_t steps_per_tap;  // tile steps of a pixel's channels
  int64_t k_steps;        // tile steps of all taps
  int64_t reach_rows;     // A's rows a box reads: tile_m and the taps' shift
};
te::TensorizeFn AmxTileProducts(ir::Intrinsic intrinsic, te::Tensor A, int64_t row_bytes,
                                te::Tensor Bp, int64_t m, int64_t tile_m, int64_t tile_n,
                                std::optional<AmxInPlaceTaps> in_place = std::nullopt);
// The generic matmul of uint8/int8 A by int8 B with A's zero point only
// (zp=2), no batch and no prologue: integer dot products (matmul_int8.cc).
bool Int8MatMul(const Workload& w);
// A dense whose products are in bfloat16 (bf16=1, B not batched, float32
// operands: dense_bf16.cc).
bool Bf16Dense(const Workload& w);
const OpTemplate* Bf16DenseTemplate();
// An ungrouped conv2d writing channel blocks whose products are in bfloat16
// (bf16=1: conv2d_bf16.cc).
bool Bf16Conv(const Workload& w);
// Whether conv2d_bf16.cc computes w as AMX tile products by default on a
// CPU with AMX-BF16 (one image, C even, no dilation, blocked output, and
// enough products per pixel: ConvAmxPays).
bool Bf16ConvAmxPays(const Workload& w);
const OpTemplate* Bf16ConvTemplate();
const OpTemplate* Int8MatMulTemplate();
// The dims of the generic 2-D conv `w` (op "conv": x [N, C, H, W], weights
// [K, C / group, R, S], output [N, K, OH, OW]), its strides and its leading
// pads.
struct GenericConvDims {
  int64_t N, C, H, W, K, R, S, OH, OW, sh, sw, ph, pw;
};
GenericConvDims GenericConvDimsOf(const Workload& w);
// The generic 2-D conv of uint8/int8 x by int8 weights with x's zero point
// only (zp=2), one group, no dilation, no bias (conv_int8.cc).
bool Int8Conv(const Workload& w);
const OpTemplate* Int8ConvTemplate();
// Int8Conv written in channel blocks (out_block): vectors along output
// channels (conv_int8_blocked.cc).
const OpTemplate* Int8BlockedConvTemplate();
// The input placeholder of the int8 conv w: NCHW bytes, or for a blocked
// input (in_block) its view as words, [N, C / 16, H, W, 4] int32. And the
// int32 of its channels 4 c4 .. 4 c4 + 3 at input pixel (ih, iw), the dot
// product's unsigned operand: xz's bytes where the pixel is outside the
// image or a channel past C, top bits flipped for int8 x.
te::Tensor Int8InputPlaceholder(const Workload& w);
ir::Expr Int8InputWord(const Workload& w, const te::Tensor& x, const ir::Expr& xz, ir::Expr n,
                       ir::Expr c4, ir::Expr ih, ir::Expr iw);
// The sums of int8 weights w [K, C, R, S] per output channel, in int32 (the
// zero point's correction).
te::Tensor Int8WeightSums(const te::Tensor& w);
// The generic depthwise conv (group = C = K, weights [C, 1, R, S]) of
// uint8/int8 x by int8 weights with x's zero point only (zp=2), no
// dilation, no bias (conv_int8_depthwise.cc).
bool Int8DepthwiseConv(const Workload& w);
const OpTemplate* Int8DepthwiseConvTemplate();
// The generic operators of compiler/ops/generic.h (ops/registry.h names the
// template of each op).
const OpTemplate* GenericTemplate();

// The workload's template built with config c (validated first).
absl::StatusOr<Built> BuildTemplate(const Workload& w, const Target& t, const Config& c);

// The knobs of a kernel that loops over its output `shape`: vec (vector
// width of the last axis; only 1 unless `vectorizable`) and parallel (outer
// axes fused and run in parallel), and their default: native width, parallel
// from 64 Ki elements.
std::vector<Knob> OutputLoopKnobs(const std::vector<int64_t>& shape, const Target& t,
                                  bool vectorizable);
Config OutputLoopDefault(const std::vector<int64_t>& shape, const Target& t, bool vectorizable);
// An elementwise kernel's workload w as one over [rows, cols]: its output,
// its inputs named by `inputs` (ints keys of shapes) and its epilogue
// operands each either of the output's shape, all contiguous alike, or one
// element, so that the loops run along rows of `cols` elements (a multiple
// of 64; up to 4096) instead of the tensor's last axis (7 elements in a 7x7
// image: a vector and a parallel task per 7 elements). The kernel's
// arguments are the same buffers. nullopt where some operand is neither, w
// has prologues, or its size has no such divisor.
std::optional<Workload> FlatElementwise(const Workload& w, const std::vector<std::string>& inputs);
// The `parallel` knob's schedule: the output's axes [0, n) fused into one
// loop that runs in parallel (n >= 1).
void ParallelOverAxes(te::Schedule& s, const te::Tensor& out, int n);

// GPU templates of one output element per thread: knob `threads` (threads
// per block, up to the element count) and its default (256 or fewer).
std::vector<Knob> GpuThreadKnobs(const std::vector<int64_t>& shape);
Config GpuThreadDefault(const std::vector<int64_t>& shape);
// A template's computes (unscheduled; the output last in b.args) scheduled
// one output element per thread, the GPU templates of eltwise, pool and the
// generic operators: the output's axes fused and split into blocks of the
// config's `threads` (blockIdx.x, threadIdx.x); every other stage inlined
// when it has no reduction, else computed per element (at the thread's loop,
// in its registers).
absl::StatusOr<Built> GpuPerElement(absl::StatusOr<Built> computes, const Config& c);

// Small helpers.
std::vector<int64_t> UpTo(std::vector<int64_t> candidates,
                          int64_t limit);  // keeps c <= limit, >= {1}
// 1, then multiples of lanes up to 4*lanes that fit in `extent` (or `extent`
// itself when smaller than lanes).
std::vector<int64_t> VectorChoices(int64_t extent, int lanes);
int64_t Pick(const std::vector<int64_t>& choices,
             int64_t want);  // largest choice <= want (else first)

// Index of an operand broadcast to `out_idx` (operand shape of the same rank).
std::vector<ir::Expr> BroadcastIndex(const std::vector<int64_t>& shape,
                                     const std::vector<ir::Var>& out_idx);
// Applies the epilogue to `y` at output index `idx` and converts the result
// to the output's element type. An invalid epilogue (unknown function, bad
// types) sets *error, or aborts when error is null (templates whose
// workloads never carry such epilogues).
ir::Expr ApplyEpilogue(const Workload& w, ir::Expr y, const std::vector<ir::Var>& idx,
                       const std::vector<te::Tensor>& operands, absl::Status* error = nullptr);
// The epilogue operands as placeholders (named ep0, ...) of their dtypes.
std::vector<te::Tensor> EpilogueOperands(const Workload& w);
// Kernel input i as a placeholder of its shape and dtype.
te::Tensor TypedPlaceholder(const Workload& w, size_t i, const std::string& name);
DType OutputDType(const Workload& w);

}  // namespace kiln::compiler::ops
