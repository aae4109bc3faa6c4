#pragma once
// Schedules: one stage per compute op, with loop transformation primitives.
// A template applies them for a knob config; the config, not a trace of the
// primitives, is what the tuner stores and `kiln compile` rebuilds from
// (docs/compiler.md: "Why configs, not traces").
//
// Leaf iteration variables get derived names: split(x) -> x.o, x.i;
// fuse(a, b) -> a.b.f. Names are unique within a stage.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/te/tensor.h"

namespace kiln::te {

// The largest local scratch buffer (a compute_at stage's region) lowering
// allocates: it lives in the kernel's stack frame (8 MiB thread stacks).
constexpr int64_t kMaxScratchBytes = int64_t{1} << 20;

struct IterVarNode {
  std::string name;
  ir::Var var;
  int64_t extent = 0;  // over the full domain (informative; lowering recomputes)
  bool reduce = false;
  ir::ForKind kind = ir::ForKind::kSerial;
};
using IterVar = std::shared_ptr<IterVarNode>;

struct Relation {
  enum class Kind { kSplit, kFuse } kind = Kind::kSplit;
  IterVar parent;  // split: parent -> outer, inner (factor)
  IterVar outer, inner;
  IterVar fused;  // fuse: outer, inner -> fused
  int64_t factor = 1;
};

enum class AttachKind { kRoot, kInline, kAt };

// The box a tensorized loop covers (Schedule::Tensorize): where it starts in
// the stage's buffer and along each data axis, and its size. Lowering hands
// it to the stage's TensorizeFn in place of emitting the loops.
struct TensorizeRegion {
  ir::Buffer out;                   // the stage's buffer (its scratch when computed at a loop)
  std::vector<ir::Expr> out_index;  // the box's first element in `out`
  std::vector<ir::Expr> start;      // per data axis: the box's first index in the tensor
  std::vector<int64_t> extent;      // per data axis: the box's size (past the tensor's end
                                    // where a split does not divide: the emitter clips)
};
// The statement that computes a region: the whole reduction inside it, from
// the reduction's initial value (no init nest is emitted for the stage).
using TensorizeFn = std::function<ir::Stmt(const TensorizeRegion&)>;

// A software prefetch (Schedule::Prefetch): at the top of loop `at`'s body,
// the cache lines of `tensor` the stage reads inside `at` at iteration
// `ahead` + `distance` (the last iteration past the end).
struct PrefetchSpec {
  Tensor tensor;
  IterVar at, ahead;
  int64_t distance = 1;
  IterVar spread;  // may be null
};

struct Stage {
  Tensor tensor;
  std::vector<IterVar> root;  // data axes, then reduce axes
  std::vector<IterVar> leaf;  // loop order
  std::vector<Relation> relations;
  AttachKind attach = AttachKind::kRoot;
  int attach_stage = -1;  // index into Schedule::stages()
  IterVar attach_iv;
  bool local = false;  // storage scope: local scratch (Allocate) vs global
  // Where an attached stage's scratch lives (SetScope): the thread's own,
  // or shared by a GPU block's threads.
  ir::StorageScope scope = ir::StorageScope::kLocal;
  // Tensorize: the loops from this leaf inward are one statement `tensorize`
  // emits (an intrinsic over a box of the output).
  IterVar tensorize_iv;
  TensorizeFn tensorize;
  std::vector<PrefetchSpec> prefetches;

  const std::string& name() const { return tensor->name; }
};

class Schedule {
 public:
  // Stages for every compute op reachable from `outputs`, producers first.
  explicit Schedule(std::vector<Tensor> outputs);

  Stage& operator[](const Tensor& t);
  Stage& StageByName(const std::string& name);
  const std::vector<Stage>& stages() const { return stages_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }

  // Primitives. Misuse (an iv not a leaf of the stage, bad factor, ...) is a
  // KILN_CHECK failure: templates are code, not user input. Bind,
  // cache_read and transform_layout report errors as Status instead,
  // whose layouts and readers may come from a tuner's config:
  // INVALID_ARGUMENT (a malformed layout, no readers), NOT_FOUND (a reader
  // or tensor not in the schedule), FAILED_PRECONDITION (a reader that does
  // not read the tensor, or one computed inline).
  std::pair<IterVar, IterVar> Split(const Tensor& t, const IterVar& iv, int64_t factor);
  IterVar Fuse(const Tensor& t, const IterVar& outer, const IterVar& inner);
  void Reorder(const Tensor& t, const std::vector<IterVar>& order);
  // tile(x, y, fx, fy) = split both, reorder xo, yo, xi, yi. Returns them.
  std::vector<IterVar> Tile(const Tensor& t, const IterVar& x, const IterVar& y, int64_t fx,
                            int64_t fy);
  void Vectorize(const Tensor& t, const IterVar& iv);
  void Unroll(const Tensor& t, const IterVar& iv);
  void Parallel(const Tensor& t, const IterVar& iv);
  // The loop `iv` and every loop inside it become the statement `fn` emits
  // for their box (TVM's tensorize, with the intrinsic as code): every
  // reduce loop must lie inside, and no stage may be computed at these
  // loops. `name` names the intrinsic in errors.
  void Tensorize(const Tensor& t, const IterVar& iv, const std::string& name, TensorizeFn fn);
  // Software prefetch (TVM's prefetch): at the top of the body of loop `at`
  // of t's stage, the cache lines of `tensor` (a tensor the stage reads)
  // that the iterations inside `at` read at iteration `ahead` + `distance`
  // of loop `ahead` (outside `at`; clamped to its last iteration) are
  // prefetched: the lines from the first element they read to the last, in
  // the tensor's row-major order (a constant span). With `spread` (a loop
  // between `ahead` and `at`, of extent E), an iteration s of it issues the
  // prefetches only where the loops between `spread` and `at`, counted as
  // one index, are s modulo E: data re-read by every iteration of `spread`
  // is then fetched for the next `ahead` a share per iteration, not all in
  // the first (a burst the memory cannot serve while the loop waits on it).
  void Prefetch(const Tensor& t, const IterVar& at, const Tensor& tensor, const IterVar& ahead,
                int64_t distance, const IterVar& spread = nullptr);
  // GPU: the loop `iv` is run by a grid of threads, its variable the index
  // `thread` binds (ir::ForKind kBlockX .. kThreadZ: blockIdx.x ..
  // threadIdx.z). Not a reduce axis (threads would race on the sum).
  // INVALID_ARGUMENT for a reduce axis or a kind that is no thread index; the extents are checked
  // against the device's limits where the kernel is emitted (codegen::LaunchDimsOf).
  absl::Status Bind(const Tensor& t, const IterVar& iv, ir::ForKind thread);
  void ComputeAt(const Tensor& producer, const Tensor& consumer, const IterVar& iv);
  // Where a stage computed at a loop (compute_at) keeps its values: kLocal
  // (each thread's own: the default) or kShared (one copy per GPU block,
  // filled by the block's threads together: bind the stage's loops to
  // threadIdx; lowering puts a barrier before and after the fill and reads
  // the region every thread of the block needs).
  void SetScope(const Tensor& t, ir::StorageScope scope);
  void ComputeInline(const Tensor& producer);
  // Makes `t` a copy of a new stage "<t>.local" (local scope) that computes
  // what `t` computed; returns the new tensor. Must precede other primitives
  // on `t`. Consumers of `t` are unchanged.
  Tensor CacheWrite(const Tensor& t);
  // A new stage "<t>.cache" (then "<t>.cache2", ...) that copies `t` (a
  // placeholder or a stage); the `readers` (stages reading t) read the copy
  // instead, at the same indices. compute_at a reader's loop stages a tile
  // of t in scratch.
  absl::StatusOr<Tensor> CacheRead(const Tensor& t, const std::vector<Tensor>& readers);
  // A new stage "<t>.<dst>" holding `t` in layout `dst` (te/layout.h: e.g.
  // "NCHW" -> "NCHW16c", "OIHW" -> "OIHW4i16o"); the `readers` read it
  // through the layout's index map. This is packing: of weights into
  // blocks, of activations into channel blocks.
  absl::StatusOr<Tensor> TransformLayout(const Tensor& t, const std::string& src,
                                         const std::string& dst,
                                         const std::vector<Tensor>& readers);

  // The root iv of stage `t` for data axis `i` / reduce axis `i`.
  IterVar Axis(const Tensor& t, int i);
  IterVar ReduceAxisOf(const Tensor& t, int i);

 private:
  int IndexOf(const std::string& name) const;
  // cache_read and transform_layout: inserts the stage `read` (computed from
  // t) before the first reader and redirects the readers' loads of t to it
  // through `index` (source indices -> read's indices).
  void RedirectReaders(
      const Tensor& t, const Tensor& read, const std::vector<Tensor>& readers,
      const std::function<std::vector<ir::Expr>(const std::vector<ir::Expr>&)>& index);
  absl::Status CheckReaders(const Tensor& t, const std::vector<Tensor>& readers);
  std::string UniqueName(const std::string& base) const;
  void SetKind(const Tensor& t, const IterVar& iv, ir::ForKind kind);

  std::vector<Tensor> outputs_;
  std::vector<Stage> stages_;
};

}  // namespace kiln::te
