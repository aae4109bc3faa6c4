#include "compiler/te/tensor.h"

#include <limits>
#include <mutex>
#include <unordered_map>

#include "compiler/ir/functor.h"

namespace kiln::te {
using namespace ir;

namespace {

std::mutex& RegistryMu() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<const BufferNode*, std::weak_ptr<const OperationNode>>& Registry() {
  static auto* r = new std::unordered_map<const BufferNode*, std::weak_ptr<const OperationNode>>();
  return *r;
}

void Register(const std::shared_ptr<const OperationNode>& op) {
  std::lock_guard<std::mutex> lock(RegistryMu());
  auto& r = Registry();
  // Drop dead entries now and then so the map does not grow without bound.
  if (r.size() > 4096) {
    for (auto it = r.begin(); it != r.end();)
      it = it->second.expired() ? r.erase(it) : std::next(it);
  }
  r[op->buffer.get()] = op;
}

class InputCollector : public ExprVisitor {
 public:
  std::vector<std::shared_ptr<const OperationNode>> inputs;

 protected:
  void VisitBufferLoad(const BufferLoadNode* op) override {
    if (auto producer = OpOfBuffer(op->buffer)) {
      bool seen = false;
      for (const auto& i : inputs) seen = seen || i == producer;
      if (!seen) inputs.push_back(producer);
    }
    ExprVisitor::VisitBufferLoad(op);
  }
};

std::vector<Expr> ShapeExprs(const std::vector<int64_t>& shape) {
  std::vector<Expr> out;
  for (int64_t d : shape) out.push_back(IntImm(d));
  return out;
}

}  // namespace

std::shared_ptr<const OperationNode> OpOfBuffer(const Buffer& buffer) {
  std::lock_guard<std::mutex> lock(RegistryMu());
  auto it = Registry().find(buffer.get());
  return it == Registry().end() ? nullptr : it->second.lock();
}

Expr Tensor::operator()(std::vector<Expr> indices) const {
  KILN_CHECK(indices.size() == op_->shape.size())
      << "tensor " << op_->name << " has rank " << op_->shape.size() << ", indexed with "
      << indices.size();
  return Load(op_->buffer, std::move(indices));
}

Tensor Placeholder(const std::string& name, const std::vector<int64_t>& shape, DataType dtype) {
  auto op = std::make_shared<OperationNode>();
  op->kind = OpKind::kPlaceholder;
  op->name = name;
  op->shape = shape;
  op->buffer = Buffer(name, dtype, ShapeExprs(shape));
  std::shared_ptr<const OperationNode> c = op;
  Register(c);
  return Tensor(c);
}

namespace {
thread_local std::string name_prefix;
}  // namespace

NameScope::NameScope(const std::string& prefix) : saved_(name_prefix.size()) {
  name_prefix += prefix;
}
NameScope::~NameScope() { name_prefix.resize(saved_); }

Tensor ComputeFromParts(const std::string& raw_name, const std::vector<int64_t>& shape,
                        std::vector<IterRange> axes, Expr body) {
  const std::string name = name_prefix + raw_name;
  auto op = std::make_shared<OperationNode>();
  op->kind = OpKind::kCompute;
  op->name = name;
  op->shape = shape;
  op->axes = std::move(axes);
  op->buffer = Buffer(name, body.dtype(), ShapeExprs(shape));
  if (const auto* r = body.as<ReduceNode>()) op->reduce_axes = r->axes;
  InputCollector ic;
  ic.VisitExpr(body);
  op->inputs = std::move(ic.inputs);
  op->body = std::move(body);
  std::shared_ptr<const OperationNode> c = op;
  Register(c);
  return Tensor(c);
}

Tensor Compute(const std::string& name, const std::vector<int64_t>& shape,
               const std::function<Expr(const std::vector<Var>&)>& body, DataType dtype) {
  static const char* kNames[] = {"i", "j", "k", "l", "m", "n"};
  std::vector<Var> vars;
  std::vector<IterRange> axes;
  for (size_t d = 0; d < shape.size(); ++d) {
    Var v(d < 6 ? std::string(kNames[d]) : "ax" + std::to_string(d));
    vars.push_back(v);
    axes.push_back({v, IntImm(0), IntImm(shape[d])});
  }
  Expr b = body(vars);
  KILN_CHECK(b.dtype() == dtype) << "compute " << name << " body has type " << ToString(b.dtype());
  return ComputeFromParts(name, shape, std::move(axes), std::move(b));
}

IterRange ReduceAxis(int64_t extent, const std::string& name) {
  return {Var(name), IntImm(0), IntImm(extent)};
}

Expr Sum(Expr source, std::vector<IterRange> axes) {
  Expr init = source.dtype().is_float() ? FloatImm(0.0, source.dtype()) : IntImm(0, source.dtype());
  return Reduce(ReduceKind::kSum, std::move(source), std::move(axes), init);
}

Expr MaxOf(Expr source, std::vector<IterRange> axes) {
  Expr init = FloatImm(-std::numeric_limits<float>::infinity(), source.dtype());
  return Reduce(ReduceKind::kMax, std::move(source), std::move(axes), init);
}

}  // namespace kiln::te
