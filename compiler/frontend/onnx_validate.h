#pragma once
// Internal to compiler/frontend: model-level checks that run before any
// operator is imported, so that malformed models (the tracker takes arbitrary
// bytes) are refused with INVALID_ARGUMENT naming the node, input or
// attribute, instead of reaching an importer, a check or a huge allocation.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"

namespace kiln::compiler::onnx_internal {

// How errors name a node: its name, else its first output, else its op type.
std::string NodeLabel(const onnx::NodeProto& node);

// The default-domain opset the model declares: exactly one entry, in
// 1..max_opset. Models that declare none get max_opset where their nodes
// use no default-domain operator or their IR version is < 3.
absl::StatusOr<int64_t> CheckOpset(const onnx::ModelProto& model, int64_t max_opset);

// The order to import graph.node() in: a topological order, stable (nodes
// already sorted keep their order). INVALID_ARGUMENT for initializers or
// inputs defined twice, a node output that redefines a value, a node input
// that nothing defines, and cycles (naming the nodes on it); graph inputs
// with a negative dimension or more than `max_elements` elements. Also checks
// every node's attributes (CheckAttributes).
absl::StatusOr<std::vector<int>> CheckGraph(const onnx::GraphProto& graph, int64_t max_elements);

// Attributes whose declared type contradicts their content (type INT with
// floats set, no type and two kinds of content), nameless or duplicate.
absl::Status CheckAttributes(const onnx::NodeProto& node);

// The attribute's type: its declared type, else (old writers) the kind of
// content it holds.
onnx::AttributeProto::AttributeType AttrType(const onnx::AttributeProto& a);
std::string AttrTypeName(onnx::AttributeProto::AttributeType t);

// The element count of `shape`, or nullopt when a dimension is negative or
// the count exceeds `limit` (never overflowing).
std::optional<int64_t> CheckedElements(const std::vector<int64_t>& shape, int64_t limit);

}  // namespace kiln::compiler::onnx_internal
