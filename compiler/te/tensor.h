#pragma once
// Compute definitions (Halide/TVM style): placeholders, computes whose body is
// an expression over index variables, and reductions (ir::Reduce at the top of
// a body). A tensor is read with `t({i, j})`, which is an ir::BufferLoad of
// the tensor's (multi-dimensional) buffer.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::te {

enum class OpKind { kPlaceholder, kCompute };

struct OperationNode {
  OpKind kind = OpKind::kPlaceholder;
  std::string name;
  std::vector<int64_t> shape;
  ir::Buffer buffer;                                         // the tensor's storage
  std::vector<ir::IterRange> axes;                           // compute: one per dim, [0, shape[i])
  std::vector<ir::IterRange> reduce_axes;                    // of the top-level Reduce, if any
  ir::Expr body;                                             // compute only
  std::vector<std::shared_ptr<const OperationNode>> inputs;  // tensors read by body
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const OperationNode> op) : op_(std::move(op)) {}
  ir::Expr operator()(std::vector<ir::Expr> indices) const;
  const OperationNode* operator->() const { return op_.get(); }
  const std::shared_ptr<const OperationNode>& op() const { return op_; }
  bool defined() const { return op_ != nullptr; }
  const ir::Buffer& buffer() const { return op_->buffer; }
  bool same_as(const Tensor& o) const { return op_ == o.op_; }

 private:
  std::shared_ptr<const OperationNode> op_;
};

Tensor Placeholder(const std::string& name, const std::vector<int64_t>& shape,
                   ir::DataType dtype = ir::DataType::Float32());
// body receives one index variable per output dimension.
Tensor Compute(const std::string& name, const std::vector<int64_t>& shape,
               const std::function<ir::Expr(const std::vector<ir::Var>&)>& body,
               ir::DataType dtype = ir::DataType::Float32());
// Rebuilds a compute with an explicit body over given axes (used by
// cache_write); `inputs` are looked up from the loads in the body.
Tensor ComputeFromParts(const std::string& name, const std::vector<int64_t>& shape,
                        std::vector<ir::IterRange> axes, ir::Expr body);

ir::IterRange ReduceAxis(int64_t extent, const std::string& name);

// While alive, prefixes the names of the computes created on this thread
// (nested scopes concatenate), so that an operator's stages keep unique
// names when it is built inside another's (fused prologues).
class NameScope {
 public:
  explicit NameScope(const std::string& prefix);
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

 private:
  size_t saved_;
};
ir::Expr Sum(ir::Expr source, std::vector<ir::IterRange> axes);
ir::Expr MaxOf(ir::Expr source, std::vector<ir::IterRange> axes);

// The operation writing `buffer`, if it was created by this module and is
// still alive.
std::shared_ptr<const OperationNode> OpOfBuffer(const ir::Buffer& buffer);

}  // namespace kiln::te
