#include "tuner/features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "compiler/codegen/llvm_amx.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/structural.h"
#include "compiler/lower/ir_util.h"
#include "compiler/ops/lower_workload.h"

namespace kiln::tuner {
namespace {

using namespace ir;

float Log2p(double x) { return static_cast<float>(std::log2(1.0 + std::max(0.0, x))); }

struct Loop {
  const VarNode* var = nullptr;
  int64_t extent = 1;
  ForKind kind = ForKind::kSerial;
};

struct Access {
  Buffer buffer;
  Expr index;
};

struct StoreInfo {
  std::vector<Loop> loops;       // outermost first
  std::vector<Access> accesses;  // the store's, then the loads'
  double ops_per_iter = 0;
  double Iterations() const {
    double n = 1;
    for (const Loop& l : loops) n *= static_cast<double>(l.extent);
    return n;
  }
};

// Float arithmetic, integer dot products (dot4: four multiply-adds of bytes
// per lane; dot2, what they are without VNNI: two of 16-bit halves) and the
// loads of a stored value.
class ValueScan : public ExprVisitor {
 public:
  double ops = 0;
  std::vector<Access> loads;

 protected:
  void VisitBinary(const BinaryNode* op) override {
    if (op->dtype.is_float()) ops += op->dtype.lanes;
    ExprVisitor::VisitBinary(op);
  }
  void VisitCall(const CallNode* op) override {
    if (op->dtype.is_float()) ops += op->dtype.lanes;
    if (op->op == Intrinsic::kDot4 || op->op == Intrinsic::kDot4Vnni) ops += 8.0 * op->dtype.lanes;
    if (op->op == Intrinsic::kDot2 && !op->dtype.is_float()) ops += 4.0 * op->dtype.lanes;
    ExprVisitor::VisitCall(op);
  }
  void VisitBufferLoad(const BufferLoadNode* op) override {
    if (op->indices.size() == 1) loads.push_back({op->buffer, op->indices[0]});
    ExprVisitor::VisitBufferLoad(op);
  }
};

// Integer value of an index expression with the given variables set (all
// others 0); anything it cannot evaluate counts as 0.
class IndexEval {
 public:
  explicit IndexEval(std::map<const VarNode*, int64_t> env) : env_(std::move(env)) {}
  int64_t Eval(const Expr& e) const {
    if (auto v = AsConstInt(e)) return *v;
    if (const auto* var = e.as<VarNode>()) {
      auto it = env_.find(var);
      return it == env_.end() ? 0 : it->second;
    }
    if (const auto* c = e.as<CastNode>()) return Eval(c->value);
    if (const auto* s = e.as<SelectNode>()) {
      return Eval(s->cond) ? Eval(s->true_value) : Eval(s->false_value);
    }
    if (const auto* l = e.as<LetNode>()) return Eval(l->body);
    if (!IsBinary(e.kind())) return 0;
    const auto* b = static_cast<const BinaryNode*>(e.get());
    int64_t x = Eval(b->a), y = Eval(b->b);
    switch (e.kind()) {
      case ExprKind::kAdd:
        return x + y;
      case ExprKind::kSub:
        return x - y;
      case ExprKind::kMul:
        return x * y;
      case ExprKind::kDiv:
      case ExprKind::kFloorDiv:
        return y == 0 ? 0 : (x - (((x % y) + y) % y)) / y;
      case ExprKind::kMod:
      case ExprKind::kFloorMod:
        return y == 0 ? 0 : ((x % y) + y) % y;
      case ExprKind::kMin:
        return std::min(x, y);
      case ExprKind::kMax:
        return std::max(x, y);
      case ExprKind::kEQ:
        return x == y;
      case ExprKind::kNE:
        return x != y;
      case ExprKind::kLT:
        return x < y;
      case ExprKind::kLE:
        return x <= y;
      case ExprKind::kGT:
        return x > y;
      case ExprKind::kGE:
        return x >= y;
      case ExprKind::kAnd:
        return x && y;
      case ExprKind::kOr:
        return x || y;
      default:
        return 0;
    }
  }

 private:
  std::map<const VarNode*, int64_t> env_;
};

class StoreCollector : public StmtVisitor {
 public:
  std::vector<StoreInfo> stores;
  double scratch_bytes = 0;

 protected:
  void VisitFor(const ForNode* op) override {
    // Unsimplified (loops_only): a constant expression, or one of outer
    // loops' variables (a tail), taken at their first iteration.
    int64_t extent = IndexEval({}).Eval(op->extent);
    loops_.push_back({op->loop_var.operator->(), std::max<int64_t>(extent, 1), op->for_kind});
    VisitStmt(op->body);
    loops_.pop_back();
  }
  void VisitAllocate(const AllocateNode* op) override {
    const int64_t n = IndexEval({}).Eval(op->buffer.NumElements());
    scratch_bytes += static_cast<double>(std::max<int64_t>(n, 0)) * op->buffer->dtype.bytes();
    StmtVisitor::VisitAllocate(op);
  }
  void VisitBufferStore(const BufferStoreNode* op) override {
    StoreInfo s;
    s.loops = loops_;
    if (op->indices.size() == 1) s.accesses.push_back({op->buffer, op->indices[0]});
    ValueScan scan;
    scan.VisitExpr(op->value);
    s.ops_per_iter = scan.ops;
    for (const Access& a : scan.loads) {
      bool seen = std::any_of(s.accesses.begin(), s.accesses.end(),
                              [&](const Access& b) { return b.buffer.same_as(a.buffer); });
      if (!seen) s.accesses.push_back(a);
    }
    stores.push_back(std::move(s));
  }
  // A tensorized AMX box (codegen/llvm_amx.h) counts as a store of its
  // products: rows x 16 n_tiles outputs, each summing k_steps x 64 bytes
  // (64 int8 or 32 bf16 products), reading its C, A and B.
  void VisitEvaluate(const EvaluateNode* op) override {
    const auto* call = op->value.as<CallNode>();
    if (call == nullptr || !compiler::codegen::IsAmxIntrinsic(call->op) ||
        call->args.size() != 10) {
      return;
    }
    StoreInfo s;
    s.loops = loops_;
    for (int i : {0, 2, 4}) {
      const auto* addr = call->args[i].as<CallNode>();
      const auto* load = addr && !addr->args.empty() ? addr->args[0].as<BufferLoadNode>() : nullptr;
      if (load != nullptr && load->indices.size() == 1) {
        s.accesses.push_back({load->buffer, load->indices[0]});
      }
    }
    const IndexEval first({});
    const double products = call->op == Intrinsic::kAmxDpbusd ? 64 : 32;
    s.ops_per_iter = 2.0 * static_cast<double>(first.Eval(call->args[7])) * 16.0 *
                     static_cast<double>(first.Eval(call->args[8])) *
                     static_cast<double>(first.Eval(call->args[9])) * products;
    stores.push_back(std::move(s));
  }

 private:
  std::vector<Loop> loops_;
};

int64_t StrideAlong(const Expr& index, const VarNode* v) {
  return IndexEval({{v, 1}}).Eval(index) - IndexEval({}).Eval(index);
}

}  // namespace

std::vector<float> FeaturesOf(const PrimFunc& func, const compiler::Config& config) {
  std::vector<float> f(kNumFeatures, 0.0f);
  StoreCollector collect;
  if (func.body.defined()) collect.VisitStmt(func.body);
  const auto& stores = collect.stores;

  double ops = 0, bytes = 0, parallel = 1;
  const StoreInfo* dominant = nullptr;
  for (const StoreInfo& s : stores) {
    double store_ops = s.ops_per_iter * s.Iterations();
    ops += store_ops;
    for (const Access& a : s.accesses) {
      bytes += s.Iterations() * a.buffer->dtype.bytes();
    }
    if (dominant == nullptr || store_ops > dominant->ops_per_iter * dominant->Iterations()) {
      dominant = &s;
    }
  }
  if (dominant != nullptr) {
    for (const Loop& l : dominant->loops) {
      if (l.kind == ForKind::kParallel) parallel *= static_cast<double>(l.extent);
    }
  }
  f[0] = Log2p(ops);
  f[1] = Log2p(bytes);
  f[2] = Log2p(bytes > 0 ? ops / bytes : 0);
  f[3] = Log2p(parallel > 1 ? parallel : 0);
  f[4] = Log2p(collect.scratch_bytes);
  f[5] = static_cast<float>(stores.size());

  if (dominant != nullptr) {
    const std::vector<Loop>& loops = dominant->loops;
    double vector_width = 0, unrolled = 1;
    const VarNode* vector_var = nullptr;
    for (const Loop& l : loops) {
      if (l.kind == ForKind::kVectorized) {
        vector_width = static_cast<double>(l.extent);
        vector_var = l.var;
      }
      if (l.kind == ForKind::kUnrolled) unrolled *= static_cast<double>(l.extent);
    }
    f[6] = Log2p(vector_width);
    f[7] = Log2p(unrolled > 1 ? unrolled : 0);
    // Loop slot j (0..kLoopLevels-1, innermost last) holds loop `first + j`.
    const int n = static_cast<int>(loops.size());
    const int first = n - kLoopLevels;
    for (int j = 0; j < kLoopLevels; ++j) {
      int li = first + j;
      if (li < 0) continue;
      const Loop& l = loops[li];
      float* slot = &f[kLoopOffset + j * kLoopFeatures];
      slot[0] = Log2p(static_cast<double>(l.extent));
      // Thread-bound loops (GPU kernels) count as parallel.
      slot[1 + static_cast<int>(l.kind == ForKind::kSerial                                ? 0
                                : l.kind == ForKind::kParallel || IsThreadBinding(l.kind) ? 1
                                : l.kind == ForKind::kVectorized                          ? 2
                                                                 : 3)] = 1.0f;
    }
    const VarNode* inner_var = n > 0 ? loops[n - 1].var : nullptr;
    const int accesses = std::min<int>(kAccesses, static_cast<int>(dominant->accesses.size()));
    for (int a = 0; a < accesses; ++a) {
      const Access& acc = dominant->accesses[a];
      float* slot = &f[kAccessOffset + a * kAccessFeatures];
      if (inner_var)
        slot[0] = Log2p(std::abs(static_cast<double>(StrideAlong(acc.index, inner_var))));
      if (vector_var) {
        slot[1] = Log2p(std::abs(static_cast<double>(StrideAlong(acc.index, vector_var))));
      }
      // From the innermost loop outwards: accesses and distinct elements
      // inside each loop.
      double iters = 1, footprint = 1;
      const double elem = acc.buffer->dtype.bytes();
      for (int li = n - 1; li >= 0 && li >= first; --li) {
        iters *= static_cast<double>(loops[li].extent);
        if (lower::UsesVar(acc.index, loops[li].var))
          footprint *= static_cast<double>(loops[li].extent);
        int j = li - first;
        slot[2 + j] = Log2p(footprint * elem);
        slot[2 + kLoopLevels + j] = Log2p(iters / footprint);
      }
    }
  }

  int k = 0;
  for (const auto& [name, value] : config) {
    if (k == kKnobSlots) break;
    f[kKnobOffset + k++] = Log2p(static_cast<double>(std::max<int64_t>(value, 0)));
  }
  return f;
}

absl::StatusOr<std::vector<float>> ExtractFeatures(const compiler::Workload& workload,
                                                   const compiler::Target& target,
                                                   const compiler::Config& config,
                                                   uint64_t* kernel_hash) {
  compiler::LowerOptions opts;
  opts.loops_only = true;
  auto func = compiler::LowerWorkload(workload, config, target, "features", opts);
  if (!func.ok()) return func.status();
  if (kernel_hash != nullptr) *kernel_hash = ir::StructuralHash(func->body);
  return FeaturesOf(*func, config);
}

}  // namespace kiln::tuner
