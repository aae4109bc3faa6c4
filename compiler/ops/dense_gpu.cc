// dense on a GPU: the output is cut into blocks of
// (block_m * thread_m) x (block_n * thread_n) elements, one per thread block
// (blockIdx.y, blockIdx.x; a batch on blockIdx.z); each of the block's
// block_m x block_n threads (threadIdx.y, threadIdx.x) computes a
// thread_m x thread_n tile of it in a private accumulator, over k split by
// tile_k (the k steps unrolled when unroll_k=1). Tiles that do not divide
// the output are guarded. With stage=1 the block's A and B tiles of each k
// step are first copied into shared memory by all its threads together
// (cache_read + set_scope shared, the copy's elements bound to the block's
// threads; barriers around it), and the threads read their operands there.
#include "absl/status/status.h"
#include "base/str.h"
#include "compiler/ops/common.h"
#include "compiler/ops/dense_internal.h"

namespace kiln::compiler::ops {
namespace {
using namespace ir;

// Threads per block a template may ask for; a device's own limit is checked
// where the kernel is loaded (deploy::CheckLaunch).
constexpr int64_t kMaxThreadsPerBlock = 1024;
// Shared memory a template may ask for (every CUDA GPU since sm_20 has 48
// KiB per block without opting in); a device's own is checked at launch.
constexpr int64_t kMaxSharedBytes = 48 << 10;

std::vector<Knob> Knobs(const Workload& w, const Target&) {
  const DenseDims d = DenseDimsOf(w);
  return {
      {"block_m", UpTo({1, 2, 4, 8, 16, 32}, d.M)},
      {"block_n", UpTo({1, 2, 4, 8, 16, 32, 64}, d.N)},
      {"thread_m", UpTo({1, 2, 4}, d.M)},
      {"thread_n", UpTo({1, 2, 4}, d.N)},
      {"tile_k", UpTo({1, 2, 4, 8, 16}, d.K)},
      {"unroll_k", {0, 1}},
      {"stage", {0, 1}},
  };
}

// Bytes of the shared A and B tiles of one k step (stage=1).
int64_t SharedBytes(const Config& c) {
  const int64_t k = c.at("tile_k");
  return 4 * k * (c.at("block_m") * c.at("thread_m") + c.at("block_n") * c.at("thread_n"));
}

absl::Status Check(const Workload&, const Target&, const Config& c) {
  const int64_t threads = c.at("block_m") * c.at("block_n");
  if (threads > kMaxThreadsPerBlock) {
    return absl::InvalidArgumentError(
        StrCat("dense (GPU): ", threads, " threads per block > ", kMaxThreadsPerBlock));
  }
  if (c.at("stage") && SharedBytes(c) > kMaxSharedBytes) {
    return absl::InvalidArgumentError(
        StrCat("dense (GPU): ", SharedBytes(c), " bytes of shared tiles > ", kMaxSharedBytes));
  }
  return absl::OkStatus();
}

Config Default(const Workload& w, const Target& t) {
  auto k = Knobs(w, t);
  Config c;
  c["block_m"] = Pick(k[0].choices, 8);
  c["block_n"] = Pick(k[1].choices, 16);
  c["thread_m"] = Pick(k[2].choices, 2);
  c["thread_n"] = Pick(k[3].choices, 2);
  c["tile_k"] = Pick(k[4].choices, 8);
  c["unroll_k"] = c["tile_k"] > 1 ? 1 : 0;
  // Staged through shared memory where a block's tile reuses its operands.
  c["stage"] = c["block_m"] * c["block_n"] >= 16 ? 1 : 0;
  return c;
}

absl::StatusOr<Built> Build(const Workload& w, const Target&, const Config& c) {
  const DenseDims d = DenseDimsOf(w);
  auto sig = w.Signature();
  if (!sig.ok()) return sig.status();
  te::Tensor A = te::Placeholder("A", sig->inputs[0].shape);
  te::Tensor B = te::Placeholder("B", sig->inputs[1].shape);
  te::Tensor C;
  if (w.Int("bias")) C = te::Placeholder("C", w.Ints("bias_shape"));
  auto eps = EpilogueOperands(w);
  const std::vector<int64_t> out_shape = sig->output.shape;
  te::Tensor acc = DenseAcc(w, A, B, te::Tensor(), 1, out_shape);
  te::Tensor out = DenseOut(w, acc, C, eps, out_shape);

  Built b;
  b.schedule = std::make_unique<te::Schedule>(std::vector<te::Tensor>{out});
  te::Schedule& s = *b.schedule;
  const int off = d.batched ? 1 : 0;
  const int64_t bm = c.at("block_m"), bn = c.at("block_n");
  const int64_t tm = c.at("thread_m"), tn = c.at("thread_n");
  auto [mo, mr] = s.Split(out, s.Axis(out, off), bm * tm);
  auto [mt, mi] = s.Split(out, mr, tm);
  auto [no, nr] = s.Split(out, s.Axis(out, off + 1), bn * tn);
  auto [nt, ni] = s.Split(out, nr, tn);
  std::vector<te::IterVar> order = {mo, no, mt, nt, mi, ni};
  if (d.batched) order.insert(order.begin(), s.Axis(out, 0));
  s.Reorder(out, order);
  auto bind = [&](const te::IterVar& iv, ir::ForKind thread) { return s.Bind(out, iv, thread); };
  for (auto st : {bind(mo, ir::ForKind::kBlockY), bind(no, ir::ForKind::kBlockX),
                  bind(mt, ir::ForKind::kThreadY), bind(nt, ir::ForKind::kThreadX)}) {
    if (!st.ok()) return st;
  }
  if (d.batched) {
    if (absl::Status st = bind(s.Axis(out, 0), ir::ForKind::kBlockZ); !st.ok()) return st;
  }
  if (tm > 1) s.Unroll(out, mi);
  if (tn > 1) s.Unroll(out, ni);
  // Each thread's accumulator tile, in its registers: ko, ki, m, n.
  s.ComputeAt(acc, out, nt);
  te::IterVar am = s.Axis(acc, off), an = s.Axis(acc, off + 1);
  auto [ko, ki] = s.Split(acc, s.ReduceAxisOf(acc, 0), c.at("tile_k"));
  s.Reorder(acc, {ko, ki, am, an});
  if (tm > 1) s.Unroll(acc, am);
  if (tn > 1) s.Unroll(acc, an);
  if (c.at("unroll_k") && c.at("tile_k") > 1) s.Unroll(acc, ki);
  if (c.at("stage")) {
    // Each k step's A and B tiles in shared memory, copied by the block's
    // bm x bn threads: the copy's elements fused, bn consecutive ones per
    // row of threads (threadIdx.x), bm rows at a time (threadIdx.y).
    for (const te::Tensor& operand : {A, B}) {
      auto shared = s.CacheRead(operand, {acc});
      if (!shared.ok()) return shared.status();
      s.SetScope(*shared, ir::StorageScope::kShared);
      s.ComputeAt(*shared, acc, ko);
      te::IterVar all = s.Axis(*shared, 0);
      for (size_t d = 1; d < (*shared)->shape.size(); ++d)
        all = s.Fuse(*shared, all, s.Axis(*shared, static_cast<int>(d)));
      auto [rows, x] = s.Split(*shared, all, bn);
      auto [steps, y] = s.Split(*shared, rows, bm);
      for (auto st :
           {s.Bind(*shared, y, ir::ForKind::kThreadY), s.Bind(*shared, x, ir::ForKind::kThreadX)}) {
        if (!st.ok()) return st;
      }
    }
  }
  b.SetArgs({A, B, C}, eps, out);
  return b;
}

}  // namespace

const OpTemplate* GpuDenseTemplate() {
  static const OpTemplate t{Knobs, Default, Check, Build};
  return &t;
}

}  // namespace kiln::compiler::ops
