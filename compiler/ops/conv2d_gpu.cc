// conv2d on a GPU (direct NCHW, any groups, stride, dilation, padding; the
// padded input inlined): each thread computes a register tile of tile_k
// output channels x tile_ow output columns of one row; the threads of a
// block (`threads`, threadIdx.x) take consecutive (row, column tile) pairs,
// blockIdx.x the blocks of them, blockIdx.y the (image, channel tile)
// pairs. The accumulator tile lives in the thread's registers over the
// reduction (input channels, kernel rows, kernel columns; the kernel columns
// unrolled when unroll_s=1). Tiles divide K and OW, so no thread computes
// past the output. Shared-memory staging of input rows comes with the
// storage scopes.
#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/conv2d_internal.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

// The candidates that divide n.
std::vector<int64_t> Dividing(std::vector<int64_t> candidates, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t c : candidates) {
    if (c <= n && n % c == 0) out.push_back(c);
  }
  return out.empty() ? std::vector<int64_t>{1} : out;
}

// Threads per block choices over `items` (row, column tile) pairs.
int64_t Items(const Workload& w, int64_t tile_ow) { return w.Int("OH") * (w.Int("OW") / tile_ow); }

std::vector<Knob> Knobs(const Workload& w, const Target&) {
  return {
      {"tile_k", Dividing({1, 2, 4, 8}, w.Int("K"))},
      {"tile_ow", Dividing({1, 2, 4}, w.Int("OW"))},
      {"threads", UpTo({32, 64, 128, 256}, w.Int("OH") * w.Int("OW"))},
      {"unroll_s", w.Int("S") > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}},
  };
}

absl::Status Check(const Workload& w, const Target&, const Config& c) {
  if (w.IntOr("in_block", 0) > 0 || w.IntOr("out_block", 0) > 0) {
    return absl::InvalidArgumentError(
        "conv2d (GPU): channel-blocked layouts are a CPU plan (import for a GPU target without "
        "layout planning)");
  }
  if (w.Int("K") % c.at("tile_k") != 0 || w.Int("OW") % c.at("tile_ow") != 0) {
    return absl::InvalidArgumentError("conv2d (GPU): tile_k and tile_ow must divide K and OW");
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  Config c;
  c["tile_k"] = Pick(k[0].choices, 4);
  c["tile_ow"] = Pick(k[1].choices, 2);
  // Enough blocks to fill the device before large blocks.
  c["threads"] = Pick(k[2].choices, Items(w, c["tile_ow"]) >= 4096 ? 128 : 64);
  c["unroll_s"] = k[3].choices.back();
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& cfg) {
  const DirectConvComputes dc = DirectConv(w);
  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{dc.out});
  te::Schedule& s = *b.schedule;
  const te::Tensor& out = dc.out;
  if (dc.pad.defined()) s.ComputeInline(dc.pad);
  const int64_t tk = cfg.at("tile_k"), tow = cfg.at("tile_ow");
  auto [ko, ki] = s.Split(out, s.Axis(out, 1), tk);
  auto [owo, owi] = s.Split(out, s.Axis(out, 3), tow);
  te::IterVar n = s.Axis(out, 0), oh = s.Axis(out, 2);
  s.Reorder(out, {n, ko, oh, owo, ki, owi});
  te::IterVar image_tile = s.Fuse(out, n, ko);
  te::IterVar items = s.Fuse(out, oh, owo);
  auto [block, thread] = s.Split(out, items, cfg.at("threads"));
  for (auto st :
       {s.Bind(out, image_tile, ir::ForKind::kBlockY), s.Bind(out, block, ir::ForKind::kBlockX),
        s.Bind(out, thread, ir::ForKind::kThreadX)}) {
    if (!st.ok()) return st;
  }
  if (tk > 1) s.Unroll(out, ki);
  if (tow > 1) s.Unroll(out, owi);
  // The accumulator tile: rc, ry, rx outside, the tile's channels and
  // columns inside (unrolled: registers).
  s.ComputeAt(dc.conv, out, thread);
  te::IterVar ck = s.Axis(dc.conv, 1), ch = s.Axis(dc.conv, 2), cw = s.Axis(dc.conv, 3);
  te::IterVar rc = s.ReduceAxisOf(dc.conv, 0), ry = s.ReduceAxisOf(dc.conv, 1),
              rx = s.ReduceAxisOf(dc.conv, 2);
  s.Reorder(dc.conv, {s.Axis(dc.conv, 0), rc, ry, rx, ch, ck, cw});
  if (tk > 1) s.Unroll(dc.conv, ck);
  if (tow > 1) s.Unroll(dc.conv, cw);
  if (cfg.at("unroll_s")) s.Unroll(dc.conv, rx);
  b.SetArgs({dc.data, dc.weight, dc.bias}, dc.eps, out);
  return b;
}

}  // namespace

const OpTemplate* GpuConv2dTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
